// End to end, the driver that binds the bytes: `plan-checkpoint codex
// implement` as a Codex frontend over the real pinned Codex's app-server.
// A plan is made and approved as behind the terminal UI (its hooks, the
// person's decision), then the driver starts the implementation in a fresh
// Codex thread from the artifact's bytes; what the model is given, what
// Codex recorded of the turn (its approval policy, sandbox and
// collaboration mode) and what the host ran are checked against the
// approval, for each permission mode; a changed artifact starts nothing.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";

import { AppServer, binary, cli, cliRaw, codexBinary, codexCase, guardMs, whenChanged, whenPending, type Case } from "./codex.js";
import { outputOf, patch, propose, say, shell, type ResponsesRequest } from "./fake-responses.js";

const sha256 = (bytes: Buffer | string): string => createHash("sha256").update(bytes).digest("hex");

const skip = binary === "" ? "PLAN_CHECKPOINT_BIN is not set: build plan-checkpoint and point it there" : false;

const PLAN = "# Split the parser\n\n1. Read `src/parse.rs`.\n2. Split it in two.\n";

/** Codex's approval policy for each approved permission mode. */
const POLICY = { ask: "untrusted", "accept-edits": "untrusted", auto: "never" } as const;

const database = (c: Case): string => join(c.project, ".pi", "plan", "plan.db");

interface Shown {
  artifact: { path: string; sha256: string };
  permissionMode: string;
  executionState: string | null;
  sessionId: string;
}

function approval(c: Case, id: string): Shown {
  return JSON.parse(cli(c, ["--db", database(c), "approvals", "show", id, "--json"])) as Shown;
}

/** The driver's run: its exit status and what it said. */
interface Driven {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `plan-checkpoint codex implement args…` with the pinned Codex; `said` resolves once its stdout holds `text`. */
function drive(c: Case, args: string[]): { done: Promise<Driven>; said: (text: string) => Promise<void> } {
  const child = spawn(binary, ["codex", "implement", ...args, "--project", c.project, "--codex", codexBinary], {
    cwd: c.project,
    env: c.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  c.closers.push(() => child.kill("SIGKILL"));
  let stdout = "";
  let stderr = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    if (process.env["DRIVER_DEBUG"]) process.stderr.write(`[driver] ${chunk}`);
    for (const waiter of waiters.filter((waiting) => stdout.includes(waiting.text))) waiter.resolve();
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
    if (process.env["DRIVER_DEBUG"]) process.stderr.write(`[driver!] ${chunk}`);
  });
  const done = new Promise<Driven>((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error(`the driver did not end; it said:\n${stdout}\n${stderr}`)), guardMs * 2);
    child.on("close", (status) => {
      clearTimeout(guard);
      resolve({ status, stdout, stderr });
    });
  });
  const said = (text: string): Promise<void> =>
    stdout.includes(text)
      ? Promise.resolve()
      : new Promise((resolve, reject) => {
          const guard = setTimeout(() => reject(new Error(`the driver never said ${text}; it said:\n${stdout}\n${stderr}`)), guardMs);
          waiters.push({
            text,
            resolve: () => {
              clearTimeout(guard);
              resolve();
            },
          });
        });
  return { done, said };
}

/** Codex's own record of `thread`'s turn: the `turn_context` of its rollout. */
function turnContext(c: Case, thread: string): Record<string, unknown> {
  const find = (directory: string): string | undefined => {
    for (const name of readdirSync(directory)) {
      const path = join(directory, name);
      if (statSync(path).isDirectory()) {
        const found = find(path);
        if (found !== undefined) return found;
      } else if (name.endsWith(`${thread}.jsonl`)) {
        return path;
      }
    }
    return undefined;
  };
  const rollout = find(join(c.codexHome, "sessions"));
  assert.ok(rollout !== undefined, `no rollout of thread ${thread}`);
  const lines = readFileSync(rollout, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as { type: string; payload: Record<string, unknown> });
  const context = lines.find((line) => line.type === "turn_context");
  assert.ok(context !== undefined, "no turn_context in the rollout");
  return context.payload;
}

/** Waits until `codex pending` lists `call`, and confirms it with the command it gives. */
async function confirmListed(c: Case, call: string): Promise<string> {
  const command = await whenChanged(`${call} listed as waiting`, join(c.project, ".pi", "plan"), () => {
    // In the project, as the person would ask.
    const listed = cliRaw(c, ["codex", "pending"]).stdout;
    return listed
      .split("\n")
      .map((line) => line.trim())
      .find((line) => line.startsWith("plan-checkpoint codex confirm ") && line.split(" ").includes(call) && !line.endsWith("--decline"));
  });
  cli(c, command.split(" ").slice(1));
  return command;
}

/** A plan turn behind the hooks whose plan the person approves with `mode`; its approval id. */
async function approvedPlan(t: TestContext, c: Case, mode: string): Promise<string> {
  const codex = await AppServer.start(t, c);
  const pending = whenPending(c);
  const turn = codex.turn("make a plan", "plan");
  const id = await pending;
  cli(c, ["codex", "approve", id, "--mode", mode, "--project", c.project]);
  await turn;
  // The person does not answer "Yes, implement": the driver implements.
  codex.close();
  return id;
}

for (const mode of ["ask", "accept-edits", "auto"] as const) {
  test(`approved with ${mode}, the driver implements from the recorded bytes in Codex's ${POLICY[mode]} policy and workspace-write sandbox`, { skip }, async (t) => {
    let implementing: ResponsesRequest | undefined;
    let patched = "";
    const c = await codexCase(t, [
      () => [propose(PLAN)],
      (request) => {
        implementing = request;
        return [shell("echo built > inside.txt && echo wrote", "call_impl")];
      },
      () => [patch("*** Begin Patch\n*** Add File: patched.txt\n+patched\n*** End Patch\n", "call_patch")],
      (request) => {
        patched = outputOf(request, "call_patch") ?? "";
        return [say("done")];
      },
    ]);
    let driver: ReturnType<typeof drive>;
    let id: string;
    if (mode === "auto") {
      // Started before there is a plan: it waits for one to be approved.
      driver = drive(c, []);
      await driver.said("waiting for a Codex plan");
      id = await approvedPlan(t, c, mode);
    } else {
      id = await approvedPlan(t, c, mode);
      driver = drive(c, [id]);
    }
    if (mode !== "auto") {
      // The shell call waits for the person: the driver shows it with the
      // command that confirms it, the one `codex pending` gives.
      await driver.said("call_impl  Bash");
      const command = await confirmListed(c, "call_impl");
      await driver.said(command);
    }
    if (mode === "ask") {
      // An edit too; under accept-edits and auto the host allows it, and
      // Codex's own prompt for it (untrusted) gets the host's answer.
      await driver.said("call_patch  ");
      await confirmListed(c, "call_patch");
    }
    const done = await driver.done;
    assert.equal(done.status, 0, `${done.stdout}\n${done.stderr}`);
    const shown = approval(c, id);
    assert.equal(shown.permissionMode, mode);
    assert.equal(shown.executionState, "completed");

    // What Codex implements from: the approved plan as the fresh thread's
    // context, byte for byte the recorded artifact (by its hash), and none
    // of the planning conversation.
    assert.ok(implementing !== undefined, "the model was never asked to implement");
    const injected = implementing.input.find((item) => item["type"] === "function_call_output" && item["name"] === "proposed_plan");
    assert.ok(injected !== undefined, JSON.stringify(implementing.input).slice(0, 2000));
    const bytes = String(injected["output"]);
    assert.equal(sha256(bytes), shown.artifact.sha256);
    assert.equal(sha256(readFileSync(join(c.project, shown.artifact.path))), shown.artifact.sha256);
    assert.doesNotMatch(JSON.stringify(implementing.input), /make a plan/);

    // Codex's own record of the turn: the mapped policy, its
    // workspace-write sandbox, the default collaboration mode.
    const thread = /codex thread: (\S+)/.exec(done.stdout)?.[1] ?? "";
    const context = turnContext(c, thread);
    assert.equal(context["approval_policy"], POLICY[mode], JSON.stringify(context));
    assert.equal((context["sandbox_policy"] as { type: string }).type, "workspace-write", JSON.stringify(context));
    assert.equal((context["collaboration_mode"] as { mode: string }).mode, "default", JSON.stringify(context));

    // The work ran on the host, in the approved plan's session and
    // execution, in the workspace-write sandbox.
    assert.equal(readFileSync(join(c.project, "inside.txt"), "utf8"), "built\n");
    assert.ok(existsSync(join(c.project, "patched.txt")), `no patched.txt; the patch got: ${patched}`);
    assert.equal(readFileSync(join(c.project, "patched.txt"), "utf8"), "patched\n");
    const runs = JSON.parse(cli(c, ["--db", database(c), "commands", "list", "--json"])) as {
      commands: { command: { command: string; sandbox: string; sessionId: string } }[];
    };
    const run = runs.commands.map((entry) => entry.command).find((entry) => entry.command.startsWith("echo built"));
    assert.equal(run?.sandbox, "workspace-write");
    assert.equal(run?.sessionId, shown.sessionId);
    c.fake.assertClean();
  });
}

test("the driver refuses to start from an artifact that changed after the approval", { skip }, async (t) => {
  const c = await codexCase(t, [() => [propose(PLAN)]]);
  const id = await approvedPlan(t, c, "auto");
  const shown = approval(c, id);
  const artifact = join(c.project, shown.artifact.path);
  chmodSync(artifact, 0o644);
  writeFileSync(artifact, "# Another plan\n\n1. Something else.\n");
  const done = await drive(c, [id]).done;
  assert.equal(done.status, 1, `${done.stdout}\n${done.stderr}`);
  assert.match(done.stderr, /ARTIFACT_INTEGRITY_MISMATCH/);
  assert.doesNotMatch(done.stdout, /codex thread:/);
  // Nothing began: the execution still waits, and the model was asked
  // nothing more.
  assert.equal(approval(c, id).executionState, "queued");
  c.fake.assertClean();
});
