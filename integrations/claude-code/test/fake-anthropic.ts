// A scripted stand-in for the Anthropic Messages API, for the offline
// end-to-end tests: it binds 127.0.0.1 on a port the system picks, answers
// each agent-loop request (`POST /v1/messages` with tools) with the next
// scripted step as a server-sent-event stream, answers side calls (no
// tools: titles, summaries) and token counts with something harmless,
// records every request so a test can assert exactly what the model was
// shown, and records any other traffic as stray (it is also the HTTP(S)
// proxy Claude Code is given, so a request aimed at any other host lands
// here and is refused). It stops by itself when the test ends or after a
// few minutes, whichever is first. It never answers for a host other than
// itself and never binds anything but loopback.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/** A text block the fake model writes. */
export interface TextBlock {
  type: "text";
  text: string;
}

/** A tool call the fake model makes; `id` is generated when absent. */
export interface ToolUseBlock {
  type: "tool_use";
  id?: string;
  name: string;
  input: Record<string, unknown>;
}

/** What one scripted step answers. */
export type AssistantBlock = TextBlock | ToolUseBlock;

/** One message of a request, as Claude Code sent it. */
export interface RequestMessage {
  role: string;
  content: string | Record<string, unknown>[];
}

/** A `POST /v1/messages` body, as parsed JSON. */
export interface MessagesRequest {
  model: string;
  messages: RequestMessage[];
  system?: unknown;
  tools?: { name: string }[];
  stream?: boolean;
  [key: string]: unknown;
}

/** A tool result the model was given, flattened to its text. */
export interface ToolResult {
  toolUseId: string;
  text: string;
  isError: boolean;
}

/** A step of a case: it sees the request (to assert on it) and returns the model's answer. */
export type Step = (request: MessagesRequest) => AssistantBlock[];

/** Anything that reached the server and was not an Anthropic API call it serves. */
export interface StrayRequest {
  method: string;
  url: string;
}

/** Short ways to write a step's blocks. */
export const say = (text: string): TextBlock => ({ type: "text", text });
export const call = (name: string, input: Record<string, unknown>, id?: string): ToolUseBlock =>
  id === undefined ? { type: "tool_use", name, input } : { type: "tool_use", id, name, input };

/** The tool results of the request's last message (what the model just got back). */
export function lastToolResults(request: MessagesRequest): ToolResult[] {
  const last = request.messages[request.messages.length - 1];
  if (last === undefined || last.role !== "user" || typeof last.content === "string") {
    return [];
  }
  return last.content
    .filter((block) => block["type"] === "tool_result")
    .map((block) => ({
      toolUseId: String(block["tool_use_id"]),
      text: flattenToolResultContent(block["content"]),
      isError: block["is_error"] === true,
    }));
}

/** The one tool result of the request's last message; throws when there is not exactly one. */
export function lastToolResult(request: MessagesRequest): ToolResult {
  const results = lastToolResults(request);
  const [only] = results;
  if (only === undefined || results.length !== 1) {
    throw new Error(`expected exactly one tool result in the last message, got ${JSON.stringify(results)}`);
  }
  return only;
}

function flattenToolResultContent(content: unknown): string {
  if (typeof content === "string") {
    return content;
  }
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) =>
        typeof part === "object" && part !== null && (part as { type?: unknown }).type === "text"
          ? String((part as { text?: unknown }).text)
          : JSON.stringify(part),
      )
      .join("");
  }
  return content === undefined ? "" : JSON.stringify(content);
}

export class FakeAnthropic {
  /** Every agent-loop request, in order (the i-th was answered by step i). */
  readonly turns: MessagesRequest[] = [];
  /** Side calls (no tools), answered with a short text. */
  readonly sideCalls: MessagesRequest[] = [];
  /** Token-count calls. */
  readonly countTokens: unknown[] = [];
  /** Traffic that was neither: other paths, proxied requests, CONNECT tunnels. */
  readonly stray: StrayRequest[] = [];
  /** Errors the steps threw (an assertion inside a step lands here and fails the case). */
  readonly stepErrors: unknown[] = [];
  readonly #server: Server;
  readonly #steps: Step[];
  #toolUseCount = 0;
  #messageCount = 0;

  private constructor(server: Server, steps: Step[]) {
    this.#server = server;
    this.#steps = steps;
  }

  /** Starts a server that plays `steps` in order. */
  static async start(t: TestContext, steps: Step[]): Promise<FakeAnthropic> {
    const server = createServer();
    const fake = new FakeAnthropic(server, steps);
    server.on("request", (request, response) => fake.#serve(request, response));
    server.on("connect", (request: IncomingMessage, socket) => {
      fake.stray.push({ method: "CONNECT", url: request.url ?? "" });
      socket.end("HTTP/1.1 403 Forbidden\r\n\r\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const stop = setTimeout(() => void fake.close(), 5 * 60 * 1000);
    stop.unref();
    t.after(() => {
      clearTimeout(stop);
      return fake.close();
    });
    return fake;
  }

  /** The base URL for `ANTHROPIC_BASE_URL` (and the proxy URL for every other host). */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** How many scripted steps have been played. */
  get played(): number {
    return this.turns.length;
  }

  /** Throws unless every step was played exactly once, no step failed and nothing strayed. */
  assertClean(): void {
    if (this.stepErrors.length > 0) {
      throw this.stepErrors[0];
    }
    if (this.turns.length !== this.#steps.length) {
      throw new Error(`the model was asked ${this.turns.length} times, the script has ${this.#steps.length} steps`);
    }
    if (this.stray.length > 0) {
      throw new Error(`traffic other than the Messages API reached the fake: ${JSON.stringify(this.stray)}`);
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  #serve(request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? "";
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const path = url.split("?")[0];
      if (request.method !== "POST" || !url.startsWith("/")) {
        this.#refuse(request, response);
        return;
      }
      let body: MessagesRequest;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as MessagesRequest;
      } catch {
        this.#refuse(request, response);
        return;
      }
      if (path === "/v1/messages/count_tokens") {
        this.countTokens.push(body);
        sendJson(response, { input_tokens: 1000 });
      } else if (path === "/v1/messages" && (body.tools === undefined || body.tools.length === 0)) {
        this.sideCalls.push(body);
        this.#answer(response, body, [say("Plan checkpoint test")]);
      } else if (path === "/v1/messages") {
        this.#answer(response, body, this.#playStep(body));
      } else {
        this.#refuse(request, response);
      }
    });
  }

  #refuse(request: IncomingMessage, response: ServerResponse): void {
    this.stray.push({ method: request.method ?? "", url: request.url ?? "" });
    sendJson(response, { type: "error", error: { type: "not_found_error", message: "not served here" } }, 404);
  }

  #playStep(body: MessagesRequest): AssistantBlock[] {
    const index = this.turns.length;
    this.turns.push(body);
    const step = this.#steps[index];
    if (step === undefined) {
      this.stepErrors.push(new Error(`the model was asked a turn the script does not have (turn ${index + 1})`));
      return [say("The script has no more steps.")];
    }
    try {
      return step(body);
    } catch (error) {
      this.stepErrors.push(error);
      return [say(`A scripted step failed: ${String(error)}`)];
    }
  }

  #answer(response: ServerResponse, body: MessagesRequest, blocks: AssistantBlock[]): void {
    this.#messageCount += 1;
    const id = `msg_fake_${this.#messageCount}`;
    const content = blocks.map((block) =>
      block.type === "tool_use" ? { ...block, id: block.id ?? this.#nextToolUseId() } : block,
    );
    const stopReason = content.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn";
    const usage = { input_tokens: 100, output_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    if (body.stream !== true) {
      sendJson(response, {
        id,
        type: "message",
        role: "assistant",
        model: body.model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage,
      });
      return;
    }
    const events: [string, Record<string, unknown>][] = [
      [
        "message_start",
        {
          message: {
            id,
            type: "message",
            role: "assistant",
            model: body.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...usage, output_tokens: 1 },
          },
        },
      ],
    ];
    content.forEach((block, index) => {
      if (block.type === "text") {
        events.push(["content_block_start", { index, content_block: { type: "text", text: "" } }]);
        events.push(["content_block_delta", { index, delta: { type: "text_delta", text: block.text } }]);
      } else {
        events.push([
          "content_block_start",
          { index, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } },
        ]);
        // The arguments arrive in two pieces, as a real stream splits them.
        const json = JSON.stringify(block.input);
        const half = Math.floor(json.length / 2);
        for (const part of [json.slice(0, half), json.slice(half)]) {
          events.push(["content_block_delta", { index, delta: { type: "input_json_delta", partial_json: part } }]);
        }
      }
      events.push(["content_block_stop", { index }]);
    });
    events.push([
      "message_delta",
      { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } },
    ]);
    events.push(["message_stop", {}]);
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    response.end(
      events.map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`).join(""),
    );
  }

  #nextToolUseId(): string {
    this.#toolUseCount += 1;
    return `toolu_fake_${String(this.#toolUseCount).padStart(4, "0")}`;
  }
}

function sendJson(response: ServerResponse, value: unknown, status = 200): void {
  const body = JSON.stringify(value);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  response.end(body);
}
