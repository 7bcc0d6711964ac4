// Tests of the client over a transport that is not a process: an in-memory
// peer that answers like a sidecar. They show that the client's RPC,
// notifications and startup refusal need nothing of the stdio transport.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  PlanCheckpointClient,
  PlanCheckpointError,
  SidecarExitedError,
  SidecarStartupError,
  type ExitStatus,
  type JsonRpcMessage,
  type Request,
  type Transport,
  type TransportHandlers,
} from "../src/index.js";

const initializeResult = {
  protocolVersion: 9,
  serverName: "memory",
  serverVersion: "0",
  schemaVersion: 10,
  approvalTtlMs: 1000,
  capabilities: { commands: { planSandbox: "unavailable", reason: "in memory" } },
};

/** A peer in memory: `answer` decides what each request gets back. */
class MemoryTransport implements Transport {
  readonly exited: Promise<ExitStatus>;
  readonly pid = undefined;
  readonly sent: Request[] = [];
  readonly #notes: string[] = [];
  #handlers: TransportHandlers | undefined;
  #resolveExited!: (status: ExitStatus) => void;

  constructor(private readonly answer: (request: Request, transport: MemoryTransport) => void) {
    this.exited = new Promise((resolve) => {
      this.#resolveExited = resolve;
    });
  }

  start(handlers: TransportHandlers): void {
    this.#handlers = handlers;
  }

  send(message: Request): Promise<void> {
    this.sent.push(message);
    // Answers arrive later, as from a real peer.
    queueMicrotask(() => this.answer(message, this));
    return Promise.resolve();
  }

  /** Delivers a message from the peer. */
  deliver(message: JsonRpcMessage): void {
    this.#handlers?.message(message);
  }

  close(): Promise<ExitStatus> {
    this.end(true);
    return this.exited;
  }

  /** The peer goes away. */
  end(requested: boolean): void {
    const status = { exitCode: 0, signal: null };
    this.#handlers?.closed({
      error: new SidecarExitedError(requested ? "the sidecar was closed" : "the sidecar exited unexpectedly", 0, null, ""),
      requested,
    });
    this.#handlers = undefined;
    this.#resolveExited(status);
  }

  diagnostics(): string {
    return this.#notes.join("");
  }

  note(line: string): void {
    this.#notes.push(`[client] ${line}\n`);
  }
}

test("the client speaks over any transport: initialize, a typed call, a refusal and a notification", async () => {
  const transport = new MemoryTransport((request, peer) => {
    if (request.method === "initialize") {
      peer.deliver({ jsonrpc: "2.0", id: request.id, result: initializeResult });
    } else if (request.method === "shell/list") {
      peer.deliver({ jsonrpc: "2.0", method: "session/changed", params: { session: { sessionId: "s" } } });
      peer.deliver({ jsonrpc: "2.0", id: request.id, result: { defaultShell: "bash", shells: [] } });
    } else {
      peer.deliver({ jsonrpc: "2.0", id: request.id, error: { code: -32000, message: "no", data: { code: "SESSION_NOT_FOUND" } } });
    }
  });
  const client = await PlanCheckpointClient.connect(transport, { clientName: "memory-test" });
  assert.equal(client.initializeResult.serverName, "memory");
  assert.deepEqual(transport.sent[0], {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: 9, clientName: "memory-test" },
  });
  const changes: unknown[] = [];
  client.on("session/changed", (params) => changes.push(params));
  assert.deepEqual(await client.shellList(), { defaultShell: "bash", shells: [] });
  assert.equal(changes.length, 1, "the notification before the answer was routed");
  await assert.rejects(client.sessionGet({ sessionId: "x" }), (error: unknown) => {
    assert.ok(error instanceof PlanCheckpointError);
    assert.equal(error.code, "SESSION_NOT_FOUND");
    return true;
  });
  assert.deepEqual(await client.close(), { exitCode: 0, signal: null });
  await assert.rejects(client.shellList(), SidecarExitedError);
});

test("a null-id error before initialize answers is the startup error; after it, it is only noted", async () => {
  const refusing = new MemoryTransport((_, peer) => {
    peer.deliver({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "held", data: { code: "HOST_ALREADY_RUNNING" } } });
    peer.end(false);
  });
  await assert.rejects(PlanCheckpointClient.connect(refusing), (error: unknown) => {
    assert.ok(error instanceof SidecarStartupError, String(error));
    assert.equal(error.code, "HOST_ALREADY_RUNNING");
    assert.equal(error.message, "HOST_ALREADY_RUNNING: held");
    return true;
  });

  const late = new MemoryTransport((request, peer) => {
    if (request.method === "initialize") {
      peer.deliver({ jsonrpc: "2.0", id: request.id, result: initializeResult });
    } else {
      peer.deliver({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "bad", data: { code: "INVALID_REQUEST" } } });
      peer.deliver({ jsonrpc: "2.0", id: request.id, result: { defaultShell: "bash", shells: [] } });
    }
  });
  const client = await PlanCheckpointClient.connect(late);
  assert.deepEqual(await client.shellList(), { defaultShell: "bash", shells: [] }, "later calls are not refused");
  assert.match(client.stderrTail(), /\[client\] the sidecar answered an unknown request: .*INVALID_REQUEST/);
  await client.close();
});
