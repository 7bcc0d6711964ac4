// End-to-end tests of what the package does outside a Plan turn: every bash
// call of a session that uses the checkpoint runs on the host (sandboxed
// under auto, audited, killed with the host), the host's `confirm`
// decisions are asked and answered with tool/confirm, a failed /plan refuses
// prompts, a project that never uses Plan gets no sidecar, and what the
// package says when the sidecar is missing. Real pi, real sidecar, fake
// model, as in plan.test.ts.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createReadStream, existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { test } from "node:test";

import { commands, DB, hostLockReleased, inspect, PiRpc, setUp, tempDir, type UiRequest } from "./pi.js";

test("auto bash runs on the host in the workspace-write sandbox: a write outside the workspace is refused by the kernel and the run is listed", async (t) => {
  const outside = await tempDir(t, "plan-pi-outside-");
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "bash", arguments: { command: `echo inside > inside.txt; echo x > ${outside}/file; echo after-write` } }] },
    { text: "ok" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan off auto");
  await pi.prompt("write both files");
  const [result] = llm.toolResults();
  assert.equal(existsSync(join(outside, "file")), false, "the write outside the workspace did not happen");
  if (/SANDBOX_UNAVAILABLE/.test(result ?? "")) {
    t.diagnostic("this kernel has no workspace-write sandbox: the host refused to run the command at all");
    assert.equal(existsSync(join(project, "inside.txt")), false);
    return;
  }
  assert.equal(await readFile(join(project, "inside.txt"), "utf8"), "inside\n", "the host ran it, and the workspace is writable");
  assert.match(result ?? "", /file: (Read-only file system|Permission denied)/, "the kernel refused the write");
  assert.match(result ?? "", /after-write/);
  const [run] = await commands(project);
  assert.equal(run?.sandbox, "workspace-write");
  assert.equal(run?.state, "exited");
  assert.match(String(run?.command), /echo x >/);
});

test("a running Agent command dies with pi and is recorded interrupted; nothing of it runs later", async (t) => {
  const { home, project } = await setUp(t, [
    { calls: [{ name: "bash", arguments: { command: "exec 3> held.fifo; echo started; sleep 30; echo late > late.txt" } }] },
  ]);
  // The command keeps the FIFO's write end open in every process it has:
  // the test's read end sees end-of-file exactly when all of them are dead.
  assert.equal(spawnSync("mkfifo", [join(project, "held.fifo")]).status, 0);
  const held = createReadStream(join(project, "held.fifo"));
  const allDead = new Promise<void>((resolve, reject) => {
    held.on("end", resolve).on("error", reject);
    held.resume();
  });
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan off auto");
  const from = pi.events.length;
  pi.send({ type: "prompt", message: "run the long command" });
  await pi.waitFor((event) => event.type === "tool_execution_update" && JSON.stringify(event).includes("started"), "the command's first output", 30000, from);
  await pi.kill();
  await allDead;
  assert.equal(existsSync(join(project, "late.txt")), false, "the command died with pi's sidecar");

  // The next host runs the startup fence, which records the run interrupted.
  await hostLockReleased(join(project, DB));
  const next = PiRpc.start(t, { cwd: project, home });
  await next.command("/plan off auto");
  const [run] = await commands(project);
  assert.equal(run?.state, "interrupted");
  assert.equal(run?.errorCode, "HOST_RESTARTED");
  assert.equal(existsSync(join(project, "late.txt")), false);
});

test("a /plan that fails (HOST_ALREADY_RUNNING) refuses every prompt until /plan off", async (t) => {
  const { llm, home, project } = await setUp(t, [{ text: "plain pi answered" }]);
  const first = PiRpc.start(t, { cwd: project, home });
  await first.command("/plan");
  const second = PiRpc.start(t, { cwd: project, home });
  await second.command("/plan");
  assert.ok(second.notifications.some((line) => line.includes("HOST_ALREADY_RUNNING")), second.notifications.join("\n"));
  const from = second.events.length;
  await second.command("write the file");
  assert.ok(second.notifications.some((line) => line.includes("could not be entered") && line.includes("/plan off")), second.notifications.join("\n"));
  assert.equal(second.events.slice(from).some((event) => event.type === "agent_start"), false, "the prompt did not run");
  assert.equal(llm.requests.length, 0, "the model was not asked");

  await second.command("/plan off");
  await second.prompt("now without Plan mode");
  assert.equal(llm.requests.length, 1, "after /plan off the prompt runs");
});

test("a project that never uses Plan mode gets no sidecar and no database; the first /plan writes a .gitignore beside it", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "bash", arguments: { command: "echo plain > plain.txt" } }] },
    { text: "ok" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.prompt("run it");
  assert.equal(await readFile(join(project, "plain.txt"), "utf8"), "plain\n", "plain pi ran the prompt");
  assert.equal(llm.requests.length, 2);
  assert.equal(existsSync(join(project, ".pi")), false, "no database, no plan directory");
  await pi.command("/plan");
  assert.ok(existsSync(join(project, DB)));
  const gitignore = await readFile(join(project, ".pi", "plan", ".gitignore"), "utf8");
  assert.match(gitignore, /^plan\.db$/m);
  assert.match(gitignore, /^plan\.db-\*$/m);
});

test("without the sidecar binary, /plan says how to install it or set PLAN_CHECKPOINT_BIN", async (t) => {
  const { home, project } = await setUp(t, []);
  const missing = join(await tempDir(t, "plan-pi-missing-"), "plan-checkpoint");
  const pi = PiRpc.start(t, { cwd: project, home, sidecarBinary: missing });
  await pi.command("/plan");
  const said = pi.notifications.join("\n");
  assert.match(said, /SIDECAR_NOT_FOUND/);
  assert.match(said, /npm install -g plan-checkpoint/);
  assert.match(said, /pipx install plan-checkpoint/);
  assert.match(said, /PLAN_CHECKPOINT_BIN/);
  assert.ok(said.includes(missing), said);

  // The default, `plan-checkpoint` looked up on a PATH that lacks it: the
  // same typed refusal and hint, not a generic "the sidecar exited".
  const onPath = PiRpc.start(t, { cwd: project, home, sidecarBinary: "plan-checkpoint", path: dirname(process.execPath) });
  await onPath.command("/plan");
  const saidOnPath = onPath.notifications.join("\n");
  assert.match(saidOnPath, /SIDECAR_NOT_FOUND: the plan-checkpoint binary "plan-checkpoint" was not found/);
  assert.match(saidOnPath, /PLAN_CHECKPOINT_BIN/);
  assert.doesNotMatch(saidOnPath, /SIDECAR_EXITED/);
});

test("under ask the host's confirm is asked in a dialog and answered with tool/confirm: audited, shown by commands show", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "bash", arguments: { command: "echo declined > declined.txt" } }] },
    { calls: [{ name: "bash", arguments: { command: "echo confirmed > confirmed.txt" } }] },
    { text: "ok" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  const confirms: UiRequest[] = [];
  pi.onDialog = (request) => {
    if (request.method !== "confirm") return { cancelled: true };
    confirms.push(request);
    return { confirmed: confirms.length > 1 };
  };
  await pi.command("/plan off ask");
  await pi.prompt("run both");
  assert.equal(confirms.length, 2, "each bash call was asked about");
  assert.match(confirms[0]?.message ?? "", /echo declined/);
  assert.equal(existsSync(join(project, "declined.txt")), false, "the declined call did not run");
  assert.match(llm.toolResults()[0] ?? "", /TOOL_DECLINED/);
  const runs = await commands(project);
  assert.deepEqual(runs.map((run) => run.command), ["echo confirmed > confirmed.txt"], "only the confirmed call ran, on the host");
  const shown = await inspect(["--db", join(project, DB), "--color", "never", "commands", "show", String(runs[0]?.callId)]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /confirmed by a person at/);
});
