// The package's entry point: the client, its transports, its errors, the
// display escaping of agent text and the protocol types generated from the
// committed schema. It re-exports; it defines nothing.

export * from "./client.js";
export * from "./errors.js";
export * from "./transport.js";
export { LineDecoder, TailBuffer } from "./framing.js";
export * from "./text.js";
export * from "./generated/protocol.js";
