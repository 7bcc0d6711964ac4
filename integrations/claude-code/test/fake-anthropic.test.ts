// The scripted Messages API on its own (no Claude Code): what it streams
// parses back into the scripted blocks, and every way a case can go wrong
// (an unscripted turn, a failing step, traffic for another host) is caught.

import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { test } from "node:test";
import { FakeAnthropic, call, lastToolResult, say, type MessagesRequest } from "./fake-anthropic.js";

const tools = [{ name: "Bash" }];

async function post(fake: FakeAnthropic, path: string, body: unknown): Promise<{ status: number; type: string; text: string }> {
  const response = await fetch(`${fake.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, type: response.headers.get("content-type") ?? "", text: await response.text() };
}

/** Rebuilds the assistant message from an SSE body, as a client would. */
function replay(sse: string): { content: Record<string, unknown>[]; stopReason: unknown; events: string[] } {
  const events: string[] = [];
  const content: Record<string, unknown>[] = [];
  const partial = new Map<number, string>();
  let stopReason: unknown;
  for (const chunk of sse.split("\n\n").filter((part) => part !== "")) {
    const [eventLine, dataLine] = chunk.split("\n");
    const type = eventLine?.replace("event: ", "") ?? "";
    const data = JSON.parse(dataLine?.replace("data: ", "") ?? "null") as Record<string, any>;
    assert.equal(data["type"], type);
    events.push(type);
    if (type === "content_block_start") {
      content[data["index"]] = { ...data["content_block"] };
    } else if (type === "content_block_delta" && data["delta"].type === "text_delta") {
      (content[data["index"]] as { text: string }).text += data["delta"].text;
    } else if (type === "content_block_delta") {
      partial.set(data["index"], (partial.get(data["index"]) ?? "") + data["delta"].partial_json);
    } else if (type === "content_block_stop" && partial.has(data["index"])) {
      (content[data["index"]] as { input: unknown }).input = JSON.parse(partial.get(data["index"]) ?? "");
    } else if (type === "message_delta") {
      stopReason = data["delta"].stop_reason;
    }
  }
  return { content, stopReason, events };
}

test("a streamed step parses back into the scripted text and tool call, and the step sees the tool result", async (t) => {
  const seen: MessagesRequest[] = [];
  const fake = await FakeAnthropic.start(t, [
    (request) => {
      seen.push(request);
      assert.deepEqual(lastToolResult(request), { toolUseId: "toolu_1", text: "out", isError: true });
      return [say("Running."), call("Bash", { command: "ls -la", description: "list" })];
    },
  ]);
  const toolResult = { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "out" }], is_error: true };
  const response = await post(fake, "/v1/messages?beta=true", {
    model: "m",
    stream: true,
    tools,
    messages: [{ role: "user", content: [toolResult] }],
  });
  assert.equal(response.status, 200);
  assert.equal(response.type, "text/event-stream");
  const message = replay(response.text);
  assert.deepEqual(message.events, [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  assert.deepEqual(message.content, [
    { type: "text", text: "Running." },
    { type: "tool_use", id: "toolu_fake_0001", name: "Bash", input: { command: "ls -la", description: "list" } },
  ]);
  assert.equal(message.stopReason, "tool_use");
  assert.equal(seen.length, 1);
  fake.assertClean();
});

test("side calls without tools and token counts are answered without using a step", async (t) => {
  const fake = await FakeAnthropic.start(t, []);
  const side = await post(fake, "/v1/messages", { model: "m", messages: [{ role: "user", content: "title?" }] });
  assert.equal(side.status, 200);
  const body = JSON.parse(side.text) as { content: unknown; stop_reason: unknown };
  assert.deepEqual(body.content, [{ type: "text", text: "Plan checkpoint test" }]);
  assert.equal(body.stop_reason, "end_turn");
  const count = await post(fake, "/v1/messages/count_tokens", { model: "m", messages: [] });
  assert.deepEqual(JSON.parse(count.text), { input_tokens: 1000 });
  assert.equal(fake.sideCalls.length, 1);
  assert.equal(fake.countTokens.length, 1);
  fake.assertClean();
});

test("a turn the script does not have, a step that throws, and a step left unplayed each fail the case", async (t) => {
  const unscripted = await FakeAnthropic.start(t, []);
  await post(unscripted, "/v1/messages", { model: "m", stream: true, tools, messages: [] });
  assert.throws(() => unscripted.assertClean(), /the script does not have \(turn 1\)/);

  const failing = await FakeAnthropic.start(t, [
    () => {
      throw new Error("the model saw the wrong thing");
    },
  ]);
  const answer = await post(failing, "/v1/messages", { model: "m", stream: true, tools, messages: [] });
  assert.equal(answer.status, 200);
  assert.throws(() => failing.assertClean(), /the model saw the wrong thing/);

  const unplayed = await FakeAnthropic.start(t, [() => [say("never asked")]]);
  assert.throws(() => unplayed.assertClean(), /asked 0 times, the script has 1 steps/);
});

test("traffic for any other host or path is refused and recorded as stray", async (t) => {
  const fake = await FakeAnthropic.start(t, []);
  const { port } = new URL(fake.baseUrl);
  const tunnel = await new Promise<number | undefined>((resolve, reject) => {
    httpRequest({ host: "127.0.0.1", port, method: "CONNECT", path: "statsig.anthropic.com:443" })
      .on("connect", (response, socket) => {
        socket.destroy();
        resolve(response.statusCode);
      })
      .on("error", reject)
      .end();
  });
  assert.equal(tunnel, 403);
  const proxied = await new Promise<number | undefined>((resolve, reject) => {
    httpRequest({ host: "127.0.0.1", port, method: "GET", path: "http://example.com/" }, (response) => {
      response.resume();
      resolve(response.statusCode);
    })
      .on("error", reject)
      .end();
  });
  assert.equal(proxied, 404);
  const other = await post(fake, "/api/oauth/profile", {});
  assert.equal(other.status, 404);
  assert.deepEqual(fake.stray, [
    { method: "CONNECT", url: "statsig.anthropic.com:443" },
    { method: "GET", url: "http://example.com/" },
    { method: "POST", url: "/api/oauth/profile" },
  ]);
  assert.throws(() => fake.assertClean(), /traffic other than the Messages API/);
});
