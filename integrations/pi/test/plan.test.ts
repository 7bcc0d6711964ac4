// End-to-end tests: the real pi agent (RPC and print mode) with this package,
// the real plan-checkpoint sidecar, and a scripted fake model server. Each
// test has its own project directory, pi home and model server.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";

import { approvals, commands, DB, hostLockReleased, inspect, isApprovalDialog, PiRpc, runPrint, setUp, tempDir, type UiRequest } from "./pi.js";

test("write is denied in Plan mode with the canonical code, and the file is not created", async (t) => {
  const { llm, home, project } = await setUp(t, [{ calls: [{ name: "write", arguments: { path: "notes.txt", content: "hello" } }] }, { text: "ok" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.prompt("plan something");
  const results = llm.toolResults();
  assert.equal(results.length, 1, JSON.stringify(llm.requests.at(-1)?.messages));
  assert.match(results[0] ?? "", /TOOL_DENIED_IN_PLAN/);
  assert.equal(existsSync(join(project, "notes.txt")), false);
});

test("SubmitPlan with another call in its batch is refused whole, and nothing is created", async (t) => {
  const submit = { name: "SubmitPlan", arguments: { title: "Plan", markdown: "# Plan\n", question: "Go?" } };
  const { llm, home, project } = await setUp(t, [{ calls: [{ name: "ls", arguments: { path: "." } }, submit] }, { text: "ok" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.prompt("plan something");
  const results = llm.toolResults();
  assert.equal(results.length, 2);
  for (const result of results) assert.match(result, /SUBMIT_PLAN_NOT_ALONE/);
  assert.equal(pi.dialogs.filter(isApprovalDialog).length, 0);
  assert.deepEqual(await approvals(project), []);
  assert.deepEqual(existsSync(join(project, ".pi", "plan")) ? (await readdir(join(project, ".pi", "plan"))).filter((name) => name.endsWith(".md")) : [], []);
});

test("SubmitPlan alone writes the exact bytes to a new .pi/plan file and shows the approval dialog", async (t) => {
  const markdown = "# Plan\r\n\tstep one  \r\n\u00e9tape deux \u4e8c \u{1f680}\n\n- last line, no final newline  ";
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Rename the parser", markdown, question: "Proceed?" } }] },
    { text: "should not be asked" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  let approvalDialogs = 0;
  pi.onDialog = (request) => {
    if (isApprovalDialog(request)) {
      approvalDialogs += 1;
      // First read the plan from the dialog, then close it without deciding.
      return approvalDialogs === 1 ? { value: "Read the plan" } : { cancelled: true };
    }
    if (request.options?.includes("Back to the decision")) return { value: "Back to the decision" };
    return { cancelled: true };
  };
  await pi.command("/plan");
  await pi.prompt("plan the rename");

  const files = (await readdir(join(project, ".pi", "plan"))).filter((name) => name.endsWith(".md"));
  assert.equal(files.length, 1);
  const bytes = await readFile(join(project, ".pi", "plan", files[0] ?? ""));
  assert.ok(bytes.equals(Buffer.from(markdown, "utf8")), "the artifact holds exactly the submitted bytes");

  const [dialog, reading] = pi.dialogs;
  assert.ok(dialog !== undefined && isApprovalDialog(dialog));
  const title = dialog.title ?? "";
  assert.match(title, /Rename the parser/);
  assert.match(title, /Proceed\?/);
  assert.ok(title.includes(join(project, ".pi", "plan", files[0] ?? "")), title);
  assert.match(title, /Expires: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d \(the time left counts down in the status line\)/);
  assert.deepEqual(dialog.options?.slice(0, 3).map((option) => option.split(" ")[1]), ["ask", "accept-edits", "auto"]);
  assert.ok(dialog.options?.includes("Reject"));
  assert.equal(dialog.timeout, undefined, "the host's expiry closes the dialog, not a clock of the package");
  assert.ok(reading?.title?.includes("\u00e9tape deux \u4e8c \u{1f680}"), "the plan's text is readable from the dialog");

  // Closing the dialog leaves the approval pending; the model is told to stop.
  assert.equal(llm.requests.length, 1, "a SubmitPlan ends the run: the model is not asked again");
  const rows = await approvals(project);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]?.status, "pending");
  await pi.command("/plan-list");
  assert.ok(pi.notifications.some((line) => line.includes("pending") && line.includes("Rename the parser")), pi.notifications.join("\n"));
});

test("approving with accept-edits switches pi to Agent mode and runs the execution: writes allowed, bash confirmed", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Add notes", markdown: "# Add notes.txt\n", question: "Proceed?" } }] },
    { calls: [{ name: "write", arguments: { path: "notes.txt", content: "written after approval\n" } }] },
    { calls: [{ name: "bash", arguments: { command: "echo confirmed-bash-ran" } }] },
    { text: "Done." },
    { calls: [{ name: "bash", arguments: { command: "echo auto-bash-ran" } }] },
    { text: "Done again." },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  const confirms: UiRequest[] = [];
  pi.onDialog = (request) => {
    if (isApprovalDialog(request)) return { value: request.options?.find((option) => option.startsWith("Approve: accept-edits")) ?? "" };
    if (request.method === "confirm") {
      confirms.push(request);
      return { confirmed: true };
    }
    return { cancelled: true };
  };
  await pi.command("/plan");
  await pi.prompt("plan and do it");

  assert.equal(await readFile(join(project, "notes.txt"), "utf8"), "written after approval\n");
  assert.equal(confirms.length, 1, "accept-edits confirms bash only");
  assert.match(confirms[0]?.title ?? "", /bash/);
  const results = llm.toolResults();
  assert.match(results[0] ?? "", /approved the plan with permission mode accept-edits/);
  assert.match(results[2] ?? "", /confirmed-bash-ran/);

  const [row] = await approvals(project);
  assert.equal(row?.status, "approved");
  assert.equal(row?.permissionMode, "accept-edits");
  assert.equal(row?.executionState, "completed");

  // The session keeps accept-edits until the user changes it; under auto
  // bash needs no confirmation.
  await pi.command("/plan off auto");
  assert.equal(pi.notifications.at(-1), "Agent mode (permission mode auto)");
  await pi.prompt("once more");
  assert.equal(confirms.length, 1, "auto confirms nothing");
  assert.match(llm.toolResults().join("\n"), /auto-bash-ran/);
  // Both bash calls ran on the host.
  const runs = await commands(project);
  assert.deepEqual(runs.map((run) => run.command).sort(), ["echo auto-bash-ran", "echo confirmed-bash-ran"]);

  // `plan-checkpoint approvals list` shows the row to a person afterwards.
  await pi.stop();
  const listed = await inspect(["--db", join(project, DB), "--color", "never", "approvals", "list"]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /approved/);
  assert.match(listed.stdout, /Add notes/);
});

test("reject is terminal: the Plan turn ends, the model is not asked again, and a revision is a new turn", async (t) => {
  const submit = (title: string) => ({ calls: [{ name: "SubmitPlan", arguments: { title, markdown: `# ${title}\n`, question: "Proceed?" } }] });
  const { llm, home, project } = await setUp(t, [submit("First plan"), submit("Second plan"), { text: "ok" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  pi.onDialog = (request) => (isApprovalDialog(request) && (request.title ?? "").includes("First plan") ? { value: "Reject" } : { cancelled: true });
  await pi.command("/plan");
  await pi.prompt("plan it");
  assert.equal(llm.requests.length, 1, "after a rejection the model is not asked again");
  let rows = await approvals(project);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]?.status, "rejected");
  assert.equal(rows[0]?.executionId ?? null, null, "a rejection grants nothing");

  await pi.command("/plan-decide");
  assert.ok(pi.notifications.some((line) => line.includes("no pending plan approval")), pi.notifications.join("\n"));

  await pi.prompt("revise it");
  rows = await approvals(project);
  assert.equal(rows.length, 2);
  assert.deepEqual(rows.map((row) => row.status).sort(), ["pending", "rejected"]);
  assert.notEqual(rows[0]?.turnId, rows[1]?.turnId, "the revision was submitted in a new turn");
});

test("expiry: the countdown is renewed every second, the host's expiry closes the dialog and records PLAN_APPROVAL_TIMEOUT", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Short-lived", markdown: "# Plan\n", question: "Proceed?" } }] },
    { text: "should not be asked" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home, serveArgs: "--approval-ttl-ms 3000" });
  pi.onDialog = () => undefined; // Nobody answers.
  await pi.command("/plan");
  await pi.prompt("plan it", 30000);
  const dialog = pi.dialogs.find(isApprovalDialog);
  assert.ok(dialog !== undefined);
  assert.equal(dialog.timeout, undefined, "the dialog has no deadline of its own: the host's expiry closes it");
  const countdown = pi.events.filter((event) => event.method === "setStatus" && event.statusKey === "plan-checkpoint-deadline");
  const shown = countdown.map((event) => event.statusText);
  assert.ok(new Set(shown.filter((text) => text !== undefined)).size >= 2, `the countdown was renewed: ${JSON.stringify(shown)}`);
  for (const text of shown.slice(0, -1)) assert.match(String(text), /^plan approval: \d+s left \(until /);
  assert.equal(shown.at(-1), undefined, "the countdown is gone once the dialog closed");
  assert.equal(llm.requests.length, 1);
  const [row] = await approvals(project);
  assert.equal(row?.status, "expired");
  assert.equal(row?.errorCode, "PLAN_APPROVAL_TIMEOUT");
  const end = pi.events.find((event) => event.type === "tool_execution_end" && event.toolName === "SubmitPlan");
  assert.match(JSON.stringify(end), /PLAN_APPROVAL_TIMEOUT/);
});

test("a restarted sidecar interrupts the pending approval and nothing is replayed", async (t) => {
  const { home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Before the restart", markdown: "# Plan\n", question: "Proceed?" } }] },
    { text: "should not be asked" },
  ]);
  const first = PiRpc.start(t, { cwd: project, home });
  first.onDialog = () => undefined;
  await first.command("/plan");
  const from = first.events.length;
  first.send({ type: "prompt", message: "plan it" });
  await first.waitFor((event) => event.type === "extension_ui_request" && event.method === "select", "the approval dialog", 30000, from);
  assert.equal((await approvals(project))[0]?.status, "pending");
  await first.kill();

  // The killed pi's sidecar sees its stdin close and exits; until it has,
  // the single-host lock would refuse a new one with HOST_ALREADY_RUNNING.
  await hostLockReleased(join(project, DB));
  const second = PiRpc.start(t, { cwd: project, home });
  second.onDialog = () => ({ cancelled: true });
  await second.command("/plan-list");
  assert.ok(!second.notifications.some((line) => line.includes("HOST_ALREADY_RUNNING")), second.notifications.join("\n"));
  await second.command("/plan-decide");
  assert.ok(second.notifications.some((line) => line.includes("no pending plan approval")));
  assert.equal(second.dialogs.filter(isApprovalDialog).length, 0, "no approval dialog is replayed");
  const [row] = await approvals(project);
  assert.equal(row?.status, "interrupted");
  assert.equal(row?.errorCode, "HOST_RESTARTED");
  assert.equal(row?.executionId ?? null, null);
});

test("a second pi in the same project is refused with HOST_ALREADY_RUNNING", async (t) => {
  const { home, project } = await setUp(t, []);
  const first = PiRpc.start(t, { cwd: project, home });
  await first.command("/plan");
  assert.ok(first.notifications.some((line) => line.startsWith("Plan mode")), first.notifications.join("\n"));
  const second = PiRpc.start(t, { cwd: project, home });
  await second.command("/plan");
  assert.ok(second.notifications.some((line) => line.includes("HOST_ALREADY_RUNNING")), second.notifications.join("\n"));
  // pi itself keeps running: it answers a later command, and has not exited.
  const before = second.notifications.length;
  await second.command("/plan-list");
  assert.ok(second.notifications.length > before, "pi answered the command after the refusal");
  assert.ok(second.running, "pi itself keeps running");
});

test("Plan-mode bash runs on the host in the read-only sandbox: output streams, a write is refused", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "bash", arguments: { command: "echo visible-output; echo probe > probe.txt; echo after-write" } }] },
    { text: "ok" },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.prompt("look around");
  const [result] = llm.toolResults();
  assert.equal(existsSync(join(project, "probe.txt")), false, "the sandbox refused the write");
  if (/PLAN_SANDBOX_UNAVAILABLE/.test(result ?? "")) {
    t.diagnostic("this kernel has no Plan sandbox: the host refused to run the command at all");
    return;
  }
  assert.match(result ?? "", /visible-output/);
  assert.match(result ?? "", /probe\.txt/);
  assert.match(result ?? "", /after-write/);
  const updates = pi.events.filter((event) => event.type === "tool_execution_update" && event.toolName === "bash");
  assert.ok(updates.some((event) => JSON.stringify(event).includes("visible-output")), "the output was streamed into pi's tool output");
  const commands = await inspect(["--db", join(project, DB), "commands", "list", "--json"]);
  assert.match(commands.stdout, /read-only/);
});

test("print mode with Plan is refused up front with PLAN_REQUIRES_INTERACTIVE_SESSION, and nothing is created", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Unattended", markdown: "# Plan\n", question: "Proceed?" } }] },
  ]);
  const run = await runPrint({ cwd: project, home }, ["--plan=true", "-p", "plan it"]);
  assert.notEqual(run.code, 0);
  assert.match(run.stderr, /PLAN_REQUIRES_INTERACTIVE_SESSION/);
  assert.match(run.stderr, /`pi -p`, `--mode json`/, "the refusal speaks of how pi was run");
  assert.doesNotMatch(run.stderr, /scheduled/);
  assert.equal(llm.requests.length, 0, "the model was never asked");
  assert.deepEqual(await approvals(project), []);
  assert.deepEqual((await readdir(join(project, ".pi", "plan"))).filter((name) => name.endsWith(".md")), []);

  // The documented caveat: a bare --plan before the message takes the
  // message as its value, so pi gets no prompt and exits 0 doing nothing.
  const swallowed = await runPrint({ cwd: project, home }, ["-p", "--plan", "plan it"]);
  assert.equal(swallowed.code, 0);
  assert.equal(llm.requests.length, 0);
});

test("without a UI a call the permission mode must confirm is blocked: a print run continuing an ask session", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { text: "Noted." },
    { calls: [{ name: "write", arguments: { path: "unconfirmed.txt", content: "no\n" } }] },
    { text: "Stopped." },
  ]);
  const sessionDir = await tempDir(t, "plan-pi-sessions-");
  const pi = PiRpc.start(t, { cwd: project, home, sessionDir });
  await pi.command("/plan off ask");
  await pi.prompt("remember this session");
  await pi.stop();

  const run = await runPrint({ cwd: project, home, sessionDir }, ["-c", "-p", "write the file"]);
  assert.equal(llm.requests.length, 3, run.stderr);
  const results = llm.toolResults();
  assert.equal(results.length, 1);
  assert.match(results[0] ?? "", /PERMISSION_REQUIRES_INTERACTIVE_SESSION/, "the host denies what needs a person in a run without one");
  assert.equal(existsSync(join(project, "unconfirmed.txt")), false, "the unconfirmed write did not happen");
});

test("an assistant message cut off in the middle of SubmitPlan creates no approval", async (t) => {
  const markdown = `# Plan\n\n${"1. A step that is long enough to be cut in the middle.\n".repeat(20)}`;
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Cut off", question: "Proceed?", markdown } }], cut: true },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.prompt("plan it");
  assert.equal(llm.requests.length, 1);
  const end = pi.events.find((event) => event.type === "message_end" && (event.message as { role?: string }).role === "assistant");
  assert.notEqual((end?.message as { stopReason?: string }).stopReason, "toolUse", "the fake server broke the stream");
  assert.equal(pi.dialogs.filter(isApprovalDialog).length, 0);
  assert.deepEqual(await approvals(project), []);
});

test("a dismissed dialog is decided later with /plan-decide; ask confirms each write, and a refused one does not happen", async (t) => {
  const { llm, home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Decide later", markdown: "# Plan\n", question: "Proceed?" } }] },
    { calls: [{ name: "write", arguments: { path: "refused.txt", content: "no\n" } }] },
    { calls: [{ name: "write", arguments: { path: "allowed.txt", content: "yes\n" } }] },
    { text: "Done." },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  let decide = false;
  const confirms: UiRequest[] = [];
  pi.onDialog = (request) => {
    if (isApprovalDialog(request)) return decide ? { value: request.options?.[0] ?? "" } : { cancelled: true };
    if (request.method === "confirm") {
      confirms.push(request);
      return { confirmed: confirms.length > 1 };
    }
    return { cancelled: true };
  };
  await pi.command("/plan");
  await pi.prompt("plan it");
  assert.equal((await approvals(project))[0]?.status, "pending");
  // Another prompt is refused while the approval waits for a decision.
  const from = pi.events.length;
  await pi.command("do something else");
  assert.ok(pi.notifications.some((line) => line.includes("SESSION_BUSY") && line.includes("/plan-decide")), pi.notifications.join("\n"));
  assert.equal(pi.events.slice(from).some((event) => event.type === "agent_start"), false);
  // The host resolves an id, whole: the package matches no prefix itself.
  const pendingId = String((await approvals(project))[0]?.id);
  const prefixFrom = pi.notifications.length;
  await pi.command(`/plan-decide ${pendingId.slice(0, pendingId.length - 2)}`);
  assert.ok(
    pi.notifications.slice(prefixFrom).some((line) => line.includes("APPROVAL_NOT_FOUND")),
    pi.notifications.slice(prefixFrom).join("\n"),
  );

  decide = true;
  const before = pi.events.length;
  await pi.command(`/plan-decide ${pendingId}`);
  await pi.waitFor((event) => event.type === "agent_end", "the execution run", 60000, before);
  assert.equal(confirms.length, 2, "ask confirms each write");
  assert.equal(existsSync(join(project, "refused.txt")), false);
  assert.equal(await readFile(join(project, "allowed.txt"), "utf8"), "yes\n");
  assert.match(llm.toolResults().join("\n"), /TOOL_DECLINED/);
  const [row] = await approvals(project);
  assert.equal(row?.status, "approved");
  assert.equal(row?.permissionMode, "ask");
  assert.equal(row?.executionState, "completed");
});

test("/new keeps the one sidecar of the process: a pending approval is not interrupted", async (t) => {
  const { home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: "Survives /new", markdown: "# Plan\n", question: "Proceed?" } }] },
  ]);
  const pi = PiRpc.start(t, { cwd: project, home });
  pi.onDialog = () => ({ cancelled: true });
  await pi.command("/plan");
  await pi.prompt("plan it");
  const from = pi.events.length;
  pi.send({ type: "new_session", id: "new-1" });
  await pi.waitFor((event) => event.type === "response" && event.id === "new-1", "new_session", 30000, from);
  await pi.command("/plan-list");
  // The new pi session is a new host session, served by the same sidecar.
  assert.equal(pi.notifications.at(-1), "no plan approvals in this session");
  const [row] = await approvals(project);
  assert.equal(row?.status, "pending", "no sidecar restart interrupted it");
});

test("outside Plan mode pi does not offer SubmitPlan: a call made anyway is a tool pi does not have, and creates nothing", async (t) => {
  const submit = { name: "SubmitPlan", arguments: { title: "Plan", markdown: "# Plan\n", question: "Go?" } };
  const { llm, home, project } = await setUp(t, [{ calls: [submit] }, { text: "ok" }, { calls: [submit] }, { text: "ok" }, { text: "planning" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  const offered = (index: number) => (llm.requests[index]?.tools ?? []).map((tool) => tool.function.name);

  // A session that never used the checkpoint (plain pi).
  await pi.prompt("submit a plan");
  assert.equal(offered(0).includes("SubmitPlan"), false, offered(0).join(", "));
  assert.equal(llm.toolResults()[0], "Tool SubmitPlan not found");
  assert.equal(existsSync(join(project, ".pi")), false, "nothing of the checkpoint started");

  // Agent mode of a session that uses the checkpoint.
  await pi.command("/plan off auto");
  await pi.prompt("submit a plan again");
  assert.equal(offered(2).includes("SubmitPlan"), false, offered(2).join(", "));
  assert.equal(llm.toolResults()[1], "Tool SubmitPlan not found");
  assert.deepEqual(await approvals(project), []);

  // In Plan mode it is offered.
  await pi.command("/plan");
  await pi.prompt("now plan");
  assert.ok(offered(4).includes("SubmitPlan"), offered(4).join(", "));
});

test("a SubmitPlan after the plan was approved, in the same run, is refused with 'not in Plan mode; use /plan' (or is no longer offered)", async (t) => {
  const submit = (title: string) => ({ name: "SubmitPlan", arguments: { title, markdown: "# Plan\n", question: "Go?" } });
  const { llm, home, project } = await setUp(t, [{ calls: [submit("First")] }, { calls: [submit("Second")] }, { text: "ok" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  pi.onDialog = (request) =>
    isApprovalDialog(request) ? { value: request.options?.find((option) => option.startsWith("Approve: auto")) ?? "" } : { cancelled: true };
  await pi.command("/plan");
  await pi.prompt("plan and do it");
  const second = llm.toolResults()[1] ?? "";
  if (second === "Tool SubmitPlan not found") {
    t.diagnostic("this pi applied the tool set within the run: SubmitPlan was no longer offered");
  } else {
    assert.match(second, /^SubmitPlan was refused: not in Plan mode; use \/plan to enter Plan mode/);
    assert.match(second, /PLAN_NOT_ACTIVE/, "the host's refusal is named");
    assert.ok(pi.notifications.some((line) => line.startsWith("SubmitPlan was refused: not in Plan mode; use /plan")), pi.notifications.join("\n"));
  }
  assert.deepEqual((await approvals(project)).map((row) => row.title), ["First"]);
});
