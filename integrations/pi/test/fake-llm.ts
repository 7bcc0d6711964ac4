// A scripted OpenAI-compatible chat-completions server for the tests: it
// binds 127.0.0.1 on a port the system picks, answers each request with the
// next scripted reply as a server-sent-event stream, records what pi sent
// (so a test can read what the model was shown), and stops by itself when
// the test ends or after a few minutes, whichever is first.

import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/** One tool call the fake model makes. */
export interface ScriptedCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** One reply: text, tool calls, or both. */
export interface ScriptedReply {
  text?: string;
  calls?: ScriptedCall[];
  /** Break the connection in the middle of the last call's arguments, as a network failure would. */
  cut?: boolean;
}

/** A request pi made, as parsed JSON. */
export interface RecordedRequest {
  messages: { role: string; content: unknown; tool_call_id?: string }[];
  tools?: { function: { name: string } }[];
}

export class FakeLlm {
  readonly requests: RecordedRequest[] = [];
  readonly #server: Server;
  readonly #script: ScriptedReply[];
  #callCount = 0;

  private constructor(server: Server, script: ScriptedReply[]) {
    this.#server = server;
    this.#script = script;
  }

  /** Starts a server that plays `script` in order, then answers "Done." to anything more. */
  static async start(t: TestContext, script: ScriptedReply[]): Promise<FakeLlm> {
    const server = createServer();
    const llm = new FakeLlm(server, script);
    server.on("request", (request, response) => {
      void llm.#answer(request).then(
        ({ body, cut }) => {
          response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
          if (!cut) {
            response.end(body);
            return;
          }
          // Once the partial body is flushed, end the connection gracefully
          // (FIN after the data, no chunked terminator): the client reads
          // every byte sent, then a stream that stops mid-message.
          response.write(body, () => response.socket?.end());
        },
        () => {
          response.writeHead(400);
          response.end();
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const stop = setTimeout(() => llm.close(), 5 * 60 * 1000);
    stop.unref();
    t.after(() => {
      clearTimeout(stop);
      return llm.close();
    });
    return llm;
  }

  /** The base URL pi's provider points at. */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }

  /** The tool results pi sent back to the model, as text, in order. */
  toolResults(): string[] {
    const last = this.requests.at(-1);
    return (last?.messages ?? [])
      .filter((message) => message.role === "tool")
      .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)));
  }

  async #answer(request: IncomingMessage): Promise<{ body: string; cut: boolean }> {
    let raw = "";
    for await (const chunk of request) raw += String(chunk);
    this.requests.push(JSON.parse(raw) as RecordedRequest);
    const reply = this.#script[this.requests.length - 1] ?? { text: "Done." };
    const id = `chatcmpl-${this.requests.length}`;
    const frame = (delta: unknown, finish: string | null, usage?: unknown): string =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created: 0,
        model: "fake-model",
        choices: [{ index: 0, delta, finish_reason: finish }],
        ...(usage === undefined ? {} : { usage }),
      })}\n\n`;
    let body = frame({ role: "assistant", content: "" }, null);
    if (reply.text !== undefined) body += frame({ content: reply.text }, null);
    (reply.calls ?? []).forEach((call, index) => {
      this.#callCount += 1;
      const json = JSON.stringify(call.arguments);
      body += frame(
        {
          tool_calls: [
            { index, id: `call_${this.#callCount}`, type: "function", function: { name: call.name, arguments: reply.cut === true ? json.slice(0, Math.floor(json.length / 2)) : json } },
          ],
        },
        null,
      );
    });
    if (reply.cut === true) return { body, cut: true };
    body += frame({}, (reply.calls ?? []).length > 0 ? "tool_calls" : "stop", { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    return { body: `${body}data: [DONE]\n\n`, cut: false };
  }
}
