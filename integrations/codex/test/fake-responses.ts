// A scripted stand-in for the OpenAI Responses API, for the offline
// end-to-end tests: it binds 127.0.0.1 on a port the system picks, answers
// each agent-loop request (`POST /v1/responses` with tools, as a list or,
// for a code-mode model, inside the input) with the next
// scripted step as a server-sent-event stream, answers side requests (no
// tools) with a short message, records every request so a test can assert
// what the model was shown, and records any other traffic as stray. It
// stops by itself when the test ends or after a few minutes, whichever is
// first, and never binds anything but loopback.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/** One output item the fake model produces. */
export type Item = Record<string, unknown>;

/** A `POST /v1/responses` body, as parsed JSON. */
export interface ResponsesRequest {
  model: string;
  input: Item[];
  tools?: { type: string; name?: string }[];
  [key: string]: unknown;
}

/** A step of a case: it sees the request (to assert on it) and returns the model's output items. */
export type Step = (request: ResponsesRequest) => Item[];

let calls = 0;

/** A shell call (`exec_command`), as gpt-5.5 makes it. */
export function shell(cmd: string, callId?: string): Item {
  calls += 1;
  return { type: "function_call", name: "exec_command", arguments: JSON.stringify({ cmd }), call_id: callId ?? `call_${calls}` };
}

/** An `apply_patch` call (a freeform tool for gpt-5.5). */
export function patch(input: string, callId?: string): Item {
  calls += 1;
  return { type: "custom_tool_call", name: "apply_patch", input, call_id: callId ?? `call_${calls}` };
}

/** A message of the model. */
export function say(text: string): Item {
  return { type: "message", role: "assistant", content: [{ type: "output_text", text }] };
}

/** A message proposing `plan` as plan mode asks for it. */
export function propose(plan: string): Item {
  return say(`Here is the plan.\n<proposed_plan>\n${plan}</proposed_plan>\n`);
}

/** What the model was given back for `callId` in this request, as text. */
export function outputOf(request: ResponsesRequest, callId: string): string | undefined {
  for (const item of request.input) {
    const type = item["type"];
    if ((type === "function_call_output" || type === "custom_tool_call_output") && item["call_id"] === callId) {
      const output = item["output"];
      return typeof output === "string" ? output : JSON.stringify(output);
    }
  }
  return undefined;
}

/** Every text of the request's input, joined: what the model was shown. */
export function shown(request: ResponsesRequest): string {
  return JSON.stringify(request.input);
}

export class FakeResponses {
  /** Every agent-loop request, in order (the i-th was answered by step i). */
  readonly requests: ResponsesRequest[] = [];
  /** Side requests (no tools), answered with a short message. */
  readonly side: ResponsesRequest[] = [];
  /** Traffic that was neither. */
  readonly stray: string[] = [];
  /** Errors the steps threw (an assertion inside a step lands here and fails the case). */
  readonly stepErrors: unknown[] = [];
  readonly #server: Server;
  readonly #steps: Step[];
  #count = 0;

  private constructor(server: Server, steps: Step[]) {
    this.#server = server;
    this.#steps = steps;
  }

  /** Starts a server that plays `steps` in order. */
  static async start(t: TestContext, steps: Step[]): Promise<FakeResponses> {
    const server = createServer();
    const fake = new FakeResponses(server, steps);
    server.on("request", (request, response) => fake.#serve(request, response));
    server.on("connect", (request: IncomingMessage, socket) => {
      fake.stray.push(`CONNECT ${request.url ?? ""}`);
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

  /** The provider's base URL. */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
  }

  /** Throws unless every step was played exactly once, no step failed and nothing strayed. */
  assertClean(): void {
    if (this.stepErrors.length > 0) throw this.stepErrors[0];
    if (this.requests.length !== this.#steps.length) {
      throw new Error(`the model was asked ${this.requests.length} times, the script has ${this.#steps.length} steps`);
    }
    if (this.stray.length > 0) throw new Error(`traffic other than the Responses API reached the fake: ${this.stray.join(", ")}`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  #serve(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const path = (request.url ?? "").split("?")[0];
      let body: ResponsesRequest | undefined;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ResponsesRequest;
      } catch {
        body = undefined;
      }
      if (request.method !== "POST" || path !== "/v1/responses" || body === undefined) {
        this.stray.push(`${request.method ?? ""} ${request.url ?? ""}`);
        response.writeHead(404, { "content-type": "application/json" });
        response.end("{}");
        return;
      }
      // A code-mode model gets its tools inside the input instead.
      const agentLoop =
        (body.tools !== undefined && body.tools.length > 0) || body.input.some((item) => item["type"] === "additional_tools");
      const items = agentLoop ? this.#play(body) : this.#side(body);
      this.#answer(response, items);
    });
  }

  #side(body: ResponsesRequest): Item[] {
    this.side.push(body);
    return [say("ok")];
  }

  #play(body: ResponsesRequest): Item[] {
    const index = this.requests.length;
    this.requests.push(body);
    const step = this.#steps[index];
    if (step === undefined) {
      this.stepErrors.push(new Error(`the model was asked a turn the script does not have (request ${index + 1})`));
      return [say("The script has no more steps.")];
    }
    try {
      return step(body);
    } catch (error) {
      this.stepErrors.push(error);
      return [say(`A scripted step failed: ${String(error)}`)];
    }
  }

  #answer(response: ServerResponse, items: Item[]): void {
    this.#count += 1;
    const id = `resp_fake_${this.#count}`;
    const event = (type: string, data: Record<string, unknown>): string =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    let stream = event("response.created", { response: { id } });
    for (const item of items) stream += event("response.output_item.done", { item });
    stream += event("response.completed", {
      response: {
        id,
        usage: { input_tokens: 100, input_tokens_details: null, output_tokens: 20, output_tokens_details: null, total_tokens: 120 },
      },
    });
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    response.end(stream);
  }
}
