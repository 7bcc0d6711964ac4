// Tests of the process handling that the real sidecar never provokes: one
// that ignores the end of its stdin (close() must kill it), one that closes
// its stdin while it lives (writes must fail as calls, not crash), and one
// that writes lines that break the protocol (ignored, kept for diagnostics),
// and one that stops reading for a while (the client must wait for 'drain'
// instead of piling requests into the pipe's buffer).
//
// The stand-ins are small scripts named `serve` in the test's own directory,
// started as `node serve --db ...` (or `sh serve ...`) by pointing `binary`
// at Node (or sh).

import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { Socket } from "node:net";
import { join } from "node:path";
import { test, type TestContext } from "node:test";

import { PlanCheckpointClient, PlanCheckpointError, SidecarExitedError } from "../src/index.js";
import { tempDir, within } from "./helpers.js";

const unhandled: unknown[] = [];
process.on("unhandledRejection", (reason) => unhandled.push(reason));
test.after(() => assert.deepEqual(unhandled, [], "no promise rejection went unhandled"));

// CommonJS, so that it runs the same wherever the temporary directory is.
const fakeSidecar = String.raw`
const mode = process.env.FAKE_MODE;
const initialize = {
  // serverVersion tells what the fake saw of the environment.
  protocolVersion: 9, serverName: "fake", serverVersion: "PLAN_TS_REMOVED=" + (process.env.PLAN_TS_REMOVED ?? "unset"),
  schemaVersion: 10, approvalTtlMs: 1000,
  capabilities: { commands: { planSandbox: "unavailable", reason: "fake" } },
};
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let newline;
  while ((newline = buffer.indexOf("\n")) !== -1) {
    const request = JSON.parse(buffer.slice(0, newline));
    buffer = buffer.slice(newline + 1);
    if (request.method === "initialize") {
      if (mode === "stall") {
        // Reads nothing until the test has seen a write fill the pipe and
        // sends SIGUSR1 (listening before the answer, so the signal cannot
        // come first).
        process.stdin.pause();
        process.once("SIGUSR1", () => process.stdin.resume());
      }
      send({ jsonrpc: "2.0", id: request.id, result: initialize });
    } else if (mode === "stall") {
      send({ jsonrpc: "2.0", id: request.id, error: { code: -32000, message: "stalled", data: { code: "SESSION_NOT_FOUND" } } });
    } else if (mode === "garbage") {
      process.stdout.write("this is not JSON\n");
      send({ jsonrpc: "2.0", id: 999999, result: {} });
      // The request's own id, but neither a result nor an error: no response.
      send({ jsonrpc: "2.0", id: request.id });
      send({ jsonrpc: "2.0", id: request.id, error: { code: -32000, message: "no data member" } });
    }
  }
});
process.stderr.write("fake sidecar up\n");
// Stays alive after stdin ends, as a stuck sidecar would.
setInterval(() => {}, 1000);
`;

// A shell stand-in that answers initialize (the client's first request has
// id 1), then closes its stdin and lives on as \`sleep\` (exec, so that the
// kill reaches it and nothing outlives the test).
const stdinClosingSidecar = String.raw`read -r request
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":9,"serverName":"fake","serverVersion":"0","schemaVersion":10,"approvalTtlMs":1000,"capabilities":{"commands":{"planSandbox":"unavailable","reason":"fake"}}}}'
exec 0<&-
exec sleep 30
`;

async function startFake(t: TestContext, mode: string): Promise<PlanCheckpointClient> {
  const dir = await tempDir(t);
  const shell = mode === "close-stdin";
  await writeFile(join(dir, "serve"), shell ? stdinClosingSidecar : fakeSidecar);
  const client = await PlanCheckpointClient.start({
    binary: shell ? "/bin/sh" : process.execPath,
    db: join(dir, "plan.db"),
    cwd: dir,
    env: { FAKE_MODE: mode },
    closeTimeoutMs: 300,
  });
  t.after(() => client.close());
  return client;
}

test("close() kills a sidecar that does not exit when its stdin ends", async (t) => {
  const client = await startFake(t, "ignore-eof");
  assert.equal(client.initializeResult.serverName, "fake");
  assert.deepEqual(await client.close(), { exitCode: null, signal: "SIGKILL" });
  await assert.rejects(client.shellList(), (error: unknown) => {
    assert.ok(error instanceof SidecarExitedError);
    assert.match(error.message, /the sidecar was closed \(signal SIGKILL\)/);
    assert.match(error.stderrTail, /fake sidecar up/);
    return true;
  });
});

test("writing to a sidecar that closed its stdin rejects the call and does not crash", async (t) => {
  const client = await startFake(t, "close-stdin");
  // Enough to overflow the pipe, so the write fails whatever the timing.
  const big = "x".repeat(1 << 20);
  const call = client.sessionGet({ sessionId: big });
  await assert.rejects(within<unknown>(call, 10_000, "the failed write"), (error: unknown) => {
    assert.ok(error instanceof SidecarExitedError);
    assert.match(error.message, /could not write the request to the sidecar/);
    return true;
  });
  assert.equal(client.isClosed, false, "the sidecar itself still runs");
  assert.deepEqual(await client.close(), { exitCode: null, signal: "SIGKILL" });
});

test("a sidecar that stops reading makes the client wait for 'drain' before it writes again", async (t) => {
  const client = await startFake(t, "stall");
  // Every write to a socket (the sidecar's stdin is one) records whether the
  // socket had asked its writer to wait for 'drain'. A client that respects
  // backpressure never writes while it has.
  // It also records whether the write left the socket asking to wait, to
  // show that the test did fill the pipe.
  const writes: { waitingBefore: boolean; waitingAfter: boolean }[] = [];
  const originalWrite = Socket.prototype.write;
  const pid = client.pid;
  assert.ok(pid !== undefined);
  Socket.prototype.write = function (this: Socket, ...args: unknown[]) {
    const waitingBefore = this.writableNeedDrain;
    const flushed = (originalWrite as (...a: unknown[]) => boolean).apply(this, args);
    writes.push({ waitingBefore, waitingAfter: this.writableNeedDrain });
    // The first write has filled the pipe of the stalled fake: let it read.
    if (writes.length === 1) process.kill(pid, "SIGUSR1");
    return flushed;
  } as typeof Socket.prototype.write;
  t.after(() => {
    Socket.prototype.write = originalWrite;
  });
  const big = "x".repeat(512 * 1024);
  const calls = Array.from({ length: 4 }, () => client.sessionGet({ sessionId: big }));
  const outcomes = await within(Promise.allSettled(calls), 10_000, "the stalled calls");
  Socket.prototype.write = originalWrite;
  for (const outcome of outcomes) {
    assert.equal(outcome.status, "rejected");
    assert.ok(outcome.status === "rejected" && outcome.reason instanceof PlanCheckpointError);
    assert.equal(outcome.reason.code, "SESSION_NOT_FOUND");
  }
  assert.equal(writes.length, 4, "one write per request");
  // The first request went to a fake that was not reading, so it must have
  // filled the pipe (otherwise this test proves nothing). The later ones go
  // to a fake that reads again and may or may not fill it, depending on how
  // fast it reads: what must hold is that none was written while the pipe
  // still asked to wait.
  assert.ok(writes[0]?.waitingAfter, "the first 512 KiB request filled the stalled fake's pipe");
  assert.ok(
    writes.every((write) => !write.waitingBefore),
    "no write while the pipe asked to wait for 'drain'",
  );
});

test("lines that break the protocol are skipped and kept in the diagnostics", async (t) => {
  const client = await startFake(t, "garbage");
  await assert.rejects(client.shellList(), (error: unknown) => {
    assert.ok(error instanceof PlanCheckpointError);
    assert.equal(error.code, "INTERNAL");
    assert.equal(error.rpcCode, -32000);
    assert.match(error.message, /no canonical code/);
    return true;
  });
  const tail = client.stderrTail();
  assert.match(tail, /\[client\] the sidecar wrote a line that is not JSON: this is not JSON/);
  assert.match(tail, /\[client\] the sidecar answered an unknown request/);
  assert.match(tail, /\[client\] the sidecar sent a message that is no response or notification: \{"jsonrpc":"2.0","id":\d+\}/);
});

test("env adds to the inherited environment and removes a variable set to undefined", async (t) => {
  process.env.PLAN_TS_REMOVED = "inherited";
  t.after(() => {
    delete process.env.PLAN_TS_REMOVED;
  });
  const dir = await tempDir(t);
  await writeFile(join(dir, "serve"), fakeSidecar);
  const client = await PlanCheckpointClient.start({
    binary: process.execPath,
    db: join(dir, "plan.db"),
    cwd: dir,
    env: { FAKE_MODE: "ignore-eof", PLAN_TS_REMOVED: undefined },
    closeTimeoutMs: 300,
  });
  t.after(() => client.close());
  // The fake answered initialize, so it read FAKE_MODE; its answer says what it saw.
  assert.equal(client.initializeResult.serverVersion, "PLAN_TS_REMOVED=unset");
});

test("a notification iterator ends when its AbortSignal aborts", async (t) => {
  const client = await startFake(t, "ignore-eof");
  const controller = new AbortController();
  const outputs = client.notifications("command/output", { signal: controller.signal });
  const next = outputs.next();
  controller.abort();
  assert.deepEqual(await next, { value: undefined, done: true });
  assert.deepEqual(await outputs.next(), { value: undefined, done: true });
});
