// Tests of the client against the real `plan-checkpoint serve` built by
// cargo: lifecycle, a Plan turn with SubmitPlan, refusals with canonical
// codes, notifications, a sandboxed Plan-mode Bash command streaming its
// output, and the sidecar dying under pending calls.

import assert from "node:assert/strict";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";

import {
  PlanCheckpointClient,
  PlanCheckpointError,
  SidecarExitedError,
  SidecarNotFoundError,
  SidecarStartupError,
  type CommandOutputNotification,
  type CommandRun,
  type PlanApproval,
} from "../src/index.js";
import { sidecarBinary, startClient, tempDir, within } from "./helpers.js";

const unhandled: unknown[] = [];
process.on("unhandledRejection", (reason) => unhandled.push(reason));
test.after(() => assert.deepEqual(unhandled, [], "no promise rejection went unhandled"));

async function planSession(client: PlanCheckpointClient, workspaceRoot: string, sessionId = "s-plan") {
  await client.sessionCreate({ sessionId, workspaceRoot, mode: "plan" });
  const turn = await client.turnStart({ sessionId, prompt: "plan the change", origin: "interactive" });
  assert.equal(turn.mode, "plan");
  return { sessionId, turnId: turn.turnId };
}

async function submitPlan(client: PlanCheckpointClient, sessionId: string, turnId: string, markdown: string): Promise<PlanApproval> {
  const { results } = await client.turnToolCalls({
    sessionId,
    turnId,
    calls: [{ callId: "call-submit", name: "SubmitPlan", input: { title: "Rename", question: "Go ahead?", markdown } }],
  });
  assert.equal(results.length, 1);
  const [entry] = results;
  assert.equal(entry?.decision, "allow", JSON.stringify(entry));
  assert.ok(entry?.approval);
  return entry.approval;
}

test("start performs initialize, close ends the sidecar, and a request after close is refused", async (t) => {
  const { client } = await startClient(t);
  assert.equal(client.initializeResult.protocolVersion, 9);
  assert.equal(client.initializeResult.schemaVersion, 10);
  assert.equal(client.initializeResult.serverName, "plan-checkpoint");
  assert.ok(["landlock", "unavailable"].includes(client.initializeResult.capabilities.commands.planSandbox));
  assert.ok(typeof client.pid === "number");

  const shells = await client.shellList();
  assert.ok(Array.isArray(shells.shells));

  const status = await client.close();
  assert.deepEqual(status, { exitCode: 0, signal: null });
  assert.equal(client.isClosed, true);
  assert.match(client.stderrTail(), /ready on/);
  await assert.rejects(client.shellList(), (error: unknown) => {
    assert.ok(error instanceof SidecarExitedError);
    assert.equal(error.code, "SIDECAR_EXITED");
    assert.equal(error.exitCode, 0);
    return true;
  });
  // A second close is harmless and reports the same exit.
  assert.deepEqual(await client.close(), status);
});

test("a Plan turn's SubmitPlan creates a pending approval, announced by notifications, whose artifact reads back", async (t) => {
  const { client, dir } = await startClient(t);
  const requested: PlanApproval[] = [];
  client.on("plan/approvalRequested", ({ approval }) => requested.push(approval));
  const sessions = client.notifications("session/changed");

  const { sessionId, turnId } = await planSession(client, dir);
  const markdown = "# Rename\n\n1. Rename `foo` to `bar`.\n2. Run the tests. \u00e9\u4e2d\n";
  const approval = await submitPlan(client, sessionId, turnId, markdown);
  assert.equal(approval.status, "pending");
  assert.equal(approval.sessionId, sessionId);
  assert.ok(approval.artifact);

  const read = await client.planReadArtifact({ approvalId: approval.id });
  assert.equal(read.markdown, markdown);
  assert.equal(read.sha256, approval.artifact.sha256);
  assert.equal(read.size, Buffer.byteLength(markdown));
  assert.equal(await readFile(join(dir, approval.artifact.path), "utf8"), markdown);

  const got = await client.planGet({ approvalId: approval.id });
  assert.deepEqual(got, approval);
  const listed = await client.planList({ sessionId, status: "pending" });
  assert.deepEqual(listed.approvals.map((row) => row.id), [approval.id]);

  // The notification was written before the response, so it has arrived.
  assert.deepEqual(requested.map((row) => row.id), [approval.id]);
  const first = await within(sessions.next(), 5000, "session/changed");
  assert.equal(first.done, false);
  assert.equal(first.value?.session.sessionId, sessionId);
  await sessions.return?.();
});

test("refusals reject with PlanCheckpointError carrying the canonical code, and change nothing", async (t) => {
  const { client, dir } = await startClient(t);
  const { sessionId, turnId } = await planSession(client, dir);
  const approval = await submitPlan(client, sessionId, turnId, "# Plan\n");

  await assert.rejects(client.planApprove({ approvalId: approval.id }), (error: unknown) => {
    assert.ok(error instanceof PlanCheckpointError);
    assert.equal(error.code, "PERMISSION_MODE_REQUIRED");
    assert.equal(error.method, "plan/approve");
    assert.equal(typeof error.rpcCode, "number");
    assert.deepEqual(error.data, { code: "PERMISSION_MODE_REQUIRED" });
    return true;
  });
  // An unknown field is refused by the host; the types refuse it too.
  // @ts-expect-error `feedback` is not a field of plan/reject params.
  const unknownField = client.planReject({ approvalId: approval.id, feedback: "no" });
  await assert.rejects(unknownField, (error: unknown) => {
    assert.ok(error instanceof PlanCheckpointError);
    assert.equal(error.code, "INVALID_PARAMS");
    assert.equal(error.rpcCode, -32602);
    return true;
  });
  await assert.rejects(client.sessionGet({ sessionId: "no-such-session" }), { name: "PlanCheckpointError", code: "SESSION_NOT_FOUND" });
  assert.equal((await client.planGet({ approvalId: approval.id })).status, "pending");

  const decided = await client.planApprove({ approvalId: approval.id, permissionMode: "accept-edits" });
  assert.equal(decided.approval.status, "approved");
  assert.equal(decided.session.permissionMode, "accept-edits");
});

test("a sidecar that refuses its arguments fails start with its startup error's code", async (t) => {
  const dir = await tempDir(t);
  const client = PlanCheckpointClient.start({ binary: sidecarBinary, db: join(dir, "plan.db"), args: ["--approval-ttl-ms", "0"] });
  await assert.rejects(client, (error: unknown) => {
    assert.ok(error instanceof SidecarStartupError, String(error));
    assert.equal(error.code, "INVALID_PARAMS");
    assert.match(error.message, /^INVALID_PARAMS: /);
    return true;
  });
});

test("a second sidecar on a database another host holds fails start with HOST_ALREADY_RUNNING", async (t) => {
  const { dir } = await startClient(t);
  await assert.rejects(PlanCheckpointClient.start({ binary: sidecarBinary, db: join(dir, "plan.db") }), (error: unknown) => {
    assert.ok(error instanceof SidecarStartupError, String(error));
    assert.equal(error.code, "HOST_ALREADY_RUNNING");
    assert.equal(error.rpcCode, -32000);
    return true;
  });
});

test("a binary that does not exist fails start with SIDECAR_NOT_FOUND", async (t) => {
  const dir = await tempDir(t);
  const binary = join(dir, "no-such-binary");
  await assert.rejects(PlanCheckpointClient.start({ binary, db: join(dir, "plan.db") }), (error: unknown) => {
    assert.ok(error instanceof SidecarNotFoundError, String(error));
    assert.equal(error.code, "SIDECAR_NOT_FOUND");
    assert.equal(error.binary, binary);
    assert.equal((error.cause as NodeJS.ErrnoException).code, "ENOENT");
    return true;
  });
});

test("a Plan-mode Bash call streams command/output, then command/exited", async (t) => {
  const { client, dir } = await startClient(t);
  const sandbox = client.initializeResult.capabilities.commands;
  const { sessionId, turnId } = await planSession(client, dir);
  const outputs: CommandOutputNotification[] = [];
  client.on("command/output", (output) => outputs.push(output));
  const exited = client.notifications("command/exited");

  const { results } = await client.turnToolCalls({
    sessionId,
    turnId,
    calls: [{ callId: "call-bash", name: "Bash", input: { command: "printf 'out-1\\n'; printf 'err-1\\n' >&2; printf 'out-2\\n'" } }],
  });
  const [entry] = results;
  if (sandbox.planSandbox === "unavailable") {
    console.log(`the Plan sandbox is unavailable here (${sandbox.reason ?? "no reason"}): checking PLAN_SANDBOX_UNAVAILABLE`);
    assert.equal(entry?.decision, "deny");
    assert.equal(entry?.error?.code, "PLAN_SANDBOX_UNAVAILABLE");
    assert.equal(entry?.command, null);
    await exited.return?.();
    return;
  }
  assert.equal(entry?.decision, "allow", JSON.stringify(entry));
  assert.equal(entry?.command?.state, "running");
  assert.equal(entry?.command?.sandbox, "read-only");

  const end = await within(exited.next(), 30_000, "command/exited");
  assert.equal(end.done, false);
  const run: CommandRun | undefined = end.value?.command;
  assert.equal(run?.callId, "call-bash");
  assert.equal(run?.state, "exited");
  assert.equal(run?.exitCode, 0);
  // command/exited is the last message of the call: all output came before it.
  const mine = outputs.filter((output) => output.callId === "call-bash");
  assert.deepEqual(mine.map((output) => output.seq), mine.map((_, index) => index));
  const text = (stream: string) => mine.filter((output) => output.stream === stream).map((output) => output.chunk).join("");
  assert.equal(text("stdout"), "out-1\nout-2\n");
  assert.equal(text("stderr"), "err-1\n");
  assert.equal(run?.stdoutBytes, Buffer.byteLength("out-1\nout-2\n"));
  assert.deepEqual(await client.commandGet({ sessionId, callId: "call-bash" }), run);
  await exited.return?.();
});

test("toolConfirm answers an ask confirmation once; only then does the host run the Bash call", async (t) => {
  const { client, dir } = await startClient(t);
  // The workspace is not the database's directory: there no Agent command
  // could be sandboxed.
  const workspaceRoot = join(dir, "ws");
  await mkdir(workspaceRoot);
  const sessionId = "s-ask";
  await client.sessionCreate({ sessionId, workspaceRoot, mode: "agent", permissionMode: "ask" });
  const { turnId } = await client.turnStart({ sessionId, prompt: "build it", origin: "interactive" });
  const command = "printf confirmed";
  const { results } = await client.turnToolCalls({
    sessionId,
    turnId,
    calls: [
      { callId: "b1", name: "Bash", input: { command } },
      { callId: "r1", name: "Read", input: { path: "a" } },
    ],
  });
  assert.deepEqual(
    results.map((entry) => [entry.decision, entry.hostRun]),
    [
      ["confirm", true],
      ["allow", false],
    ],
  );
  await assert.rejects(client.commandStart({ sessionId, turnId, callId: "b1", command }), {
    name: "PlanCheckpointError",
    code: "COMMAND_NOT_ALLOWED",
  });
  const confirmed = await client.toolConfirm({ sessionId, turnId, callId: "b1", allow: true });
  assert.equal(confirmed.decision, "allow");
  assert.equal(confirmed.hostRun, true);
  await assert.rejects(client.toolConfirm({ sessionId, turnId, callId: "b1", allow: false }), {
    name: "PlanCheckpointError",
    code: "TOOL_CONFIRMATION_NOT_PENDING",
  });
  if (client.initializeResult.capabilities.commands.planSandbox === "unavailable") {
    await assert.rejects(client.commandStart({ sessionId, turnId, callId: "b1", command }), { code: "SANDBOX_UNAVAILABLE" });
    return;
  }
  const exited = client.notifications("command/exited");
  const run = await client.commandStart({ sessionId, turnId, callId: "b1", command });
  assert.equal(run.sandbox, "workspace-write");
  const end = await within(exited.next(), 30_000, "command/exited");
  assert.equal(end.value?.command.exitCode, 0);
  await exited.return?.();
});

test("many concurrent requests and a large artifact are matched and framed correctly", async (t) => {
  const { client, dir } = await startClient(t);
  const { sessionId, turnId } = await planSession(client, dir);
  // Larger than a pipe buffer both ways: stdin waits for 'drain', stdout
  // arrives in many chunks that split the line.
  const markdown = `# Big\n\n${"line of the plan \u00e9\n".repeat(200_000)}`;
  const approval = await submitPlan(client, sessionId, turnId, markdown);
  const calls = Array.from({ length: 2000 }, (_, index) =>
    index % 2 === 0
      ? client.sessionGet({ sessionId }).then((session) => session.sessionId)
      : client.sessionGet({ sessionId: `missing-${index}` }).catch((error: PlanCheckpointError) => `${error.code}:${index}`),
  );
  const answers = await Promise.all(calls);
  answers.forEach((answer, index) => assert.equal(answer, index % 2 === 0 ? sessionId : `SESSION_NOT_FOUND:${index}`));
  const read = await client.planReadArtifact({ approvalId: approval.id });
  assert.equal(read.markdown, markdown);
});

test("a sidecar killed with SIGKILL rejects pending calls and ends notification streams", async (t) => {
  const { client } = await startClient(t);
  const stream = client.notifications("command/output");
  const pending = [client.shellList(), client.planList(), client.sessionGet({ sessionId: "x" })];
  assert.ok(client.pid !== undefined);
  process.kill(client.pid, "SIGKILL");

  for (const call of pending) {
    await assert.rejects(within<unknown>(call, 10_000, "the pending call to settle"), (error: unknown) => {
      assert.ok(error instanceof SidecarExitedError);
      assert.equal(error.signal, "SIGKILL");
      assert.equal(error.exitCode, null);
      assert.match(error.message, /SIDECAR_EXITED: the sidecar exited unexpectedly \(signal SIGKILL\)/);
      assert.match(error.stderrTail, /ready on/);
      return true;
    });
  }
  await assert.rejects(within(stream.next(), 10_000, "the stream to end"), SidecarExitedError);
  await assert.rejects(client.shellList(), SidecarExitedError);
  assert.deepEqual(await client.exited, { exitCode: null, signal: "SIGKILL" });
});

test("a listener that throws is reported to onListenerError and the others still run", async (t) => {
  const thrown: unknown[] = [];
  const { client, dir } = await startClient(t, { onListenerError: (error) => thrown.push(error) });
  const seen: string[] = [];
  client.on("session/changed", () => {
    throw new Error("listener bug");
  });
  const stop = client.on("session/changed", ({ session }) => seen.push(session.sessionId));
  await planSession(client, dir, "s-listeners");
  assert.deepEqual(seen, ["s-listeners"]);
  assert.deepEqual(thrown.map((error) => (error as Error).message), ["listener bug"]);
  stop();
  await client.turnCancel({ sessionId: "s-listeners" });
  assert.deepEqual(seen, ["s-listeners"], "an unsubscribed listener is not called");
  assert.equal(thrown.length, 2, "turn/cancel changed the session once more");
});
