// End to end: the real pinned Codex CLI, in a project where
// `plan-checkpoint codex install` was run, with the real `plan-checkpoint`
// binary behind its hooks (PLAN_CHECKPOINT_BIN, e.g. target/debug/plan-checkpoint
// after `cargo build -p plan-checkpoint -p plan-exec`). The model is the scripted
// fake; Codex's own approval requests are always declined, so only the
// hooks (and so the host) decide. The person's decisions are taken with the
// commands a user has (`codex pending`, `approve`, `reject`, `confirm`, the
// card), and what was recorded is read back with the read-only `approvals`
// and `commands` commands. Every case has its own directories and stops the
// hosts its hooks started.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";

import { decideOnCard } from "./card.js";
import { AppServer, binary, cli, cliRaw, codexCase, commandsOf, whenChanged, whenPending, type Case, type TurnItem } from "./codex.js";
import { outputOf, patch, propose, say, shell, shown, type ResponsesRequest } from "./fake-responses.js";

const sha256 = (bytes: Buffer | string): string => createHash("sha256").update(bytes).digest("hex");

const skip = binary === "" ? "PLAN_CHECKPOINT_BIN is not set: build plan-checkpoint and point it there" : false;
if (skip !== false) {
  console.error(`\n!!! ${skip}; the Codex end-to-end cases are SKIPPED.\n`);
}

const database = (c: Case): string => join(c.project, ".pi", "plan", "plan.db");

/** What a turn's command execution gave, as Codex recorded it. */
function output(items: TurnItem[], index = 0): string {
  const item = commandsOf(items)[index];
  assert.ok(item !== undefined, `no command execution ${index} in ${JSON.stringify(items).slice(0, 2000)}`);
  return String(item["aggregatedOutput"] ?? "");
}

/** The statuses of the project's approvals, newest first. */
function statuses(c: Case): string[] {
  const listed = JSON.parse(cli(c, ["--db", database(c), "approvals", "list", "--json"])) as { approvals: { status: string }[] };
  return listed.approvals.map((approval) => approval.status);
}

/** The host-run commands the audit lists. */
function commandRuns(c: Case): { command: string; sandbox: string; state: string }[] {
  const listed = JSON.parse(cli(c, ["--db", database(c), "commands", "list", "--json"])) as {
    commands: { command: { command: string; sandbox: string; state: string } }[];
  };
  return listed.commands.map((entry) => entry.command);
}

const PLAN = "# Split the parser\n\n1. Read `src/parse.rs`.\n2. Split it in two.\n";

/** The project host's socket under the case's temporary directory (a name that does not exist before the host started). */
function hostSocket(c: Case): string {
  const directory = existsSync(c.tmp) ? readdirSync(c.tmp).find((name) => name.startsWith("plan-checkpoint-")) : undefined;
  const socket = directory === undefined ? undefined : readdirSync(join(c.tmp, directory)).find((name) => name.endsWith(".sock"));
  return directory === undefined || socket === undefined ? join(c.tmp, "no-host.sock") : join(c.tmp, directory, socket);
}

/**
 * Waits until `codex pending` lists `call` as held for the person, then
 * runs the confirm command it gives, as it gives it (no call id or session
 * known beforehand).
 */
async function confirmListed(c: Case, call: string): Promise<void> {
  const command = await whenChanged(`${call} listed as waiting`, join(c.project, ".pi", "plan"), () => {
    const listed = cliRaw(c, ["codex", "pending", "--project", c.project]).stdout;
    if (!listed.includes(`${call}  `)) return undefined;
    return listed
      .split("\n")
      .map((line) => line.trim())
      .find((line) => line.startsWith("plan-checkpoint codex confirm ") && line.includes(` ${call} `) && !line.endsWith("--decline"));
  });
  const words = command.split(" ").slice(1);
  cli(c, words);
}

test("a plan-mode write is refused by the kernel behind the hook, and the audit lists it", { skip }, async (t) => {
  const c = await codexCase(t, [() => [shell("touch made; echo status=$?")], () => [say("It is read-only.")]]);
  const codex = await AppServer.start(t, c);
  const items = await codex.turn("try a write", "plan");
  const text = output(items);
  assert.match(text, /Read-only file system/);
  assert.match(text, /status=1/);
  assert.equal(existsSync(join(c.project, "made")), false);
  // The command ran through the host: its client, not the model's text.
  const command = String(commandsOf(items)[0]?.["command"]);
  assert.match(command, / codex run --socket /);
  assert.doesNotMatch(command, /touch/);
  const [run] = commandRuns(c);
  assert.equal(run?.command, "touch made; echo status=$?");
  assert.equal(run?.sandbox, "read-only");
  c.fake.assertClean();
});

test("with the hook broken, a plan-mode write is still refused by Codex's own read-only sandbox", { skip }, async (t) => {
  const c = await codexCase(t, [() => [shell("touch made; echo status=$?")], () => [say("done")]]);
  // The hooks fail: the binary they name is gone. Codex runs the call.
  const hooks = join(c.project, ".codex", "hooks.json");
  writeFileSync(hooks, readFileSync(hooks, "utf8").replaceAll(binary, `${binary}-missing`));
  const codex = await AppServer.start(t, c);
  const items = await codex.turn("try a write", "plan");
  assert.match(output(items), /Read-only file system/);
  assert.equal(existsSync(join(c.project, "made")), false);
  c.fake.assertClean();
});

test("the client run by the model itself is refused, behind the hook and without it", { skip }, async (t) => {
  let made: Case | undefined;
  let session = "codex-anything";
  // The model names the host's socket (once a hook started the host), the
  // session and a reference of its own.
  const forged = (): string =>
    `${binary} codex run --socket ${made === undefined ? "" : hostSocket(made)} --session ${session} 0123456789abcdef0123456789abcdef`;
  const c = await codexCase(t, [() => [shell(forged())], () => [say("done")], () => [shell(forged())], () => [say("done")]]);
  made = c;
  const codex = await AppServer.start(t, c);
  session = codex.session;
  // Behind the hook, the model's command is registered like any other and
  // runs in the host's sandbox, where no socket of the host is reachable.
  const items = await codex.turn("run the client", "plan");
  assert.match(output(items), /could not be reached: .*(Operation not permitted|Permission denied|No such file)/);
  // Without the hook, the rule lets the client out of Codex's sandbox and
  // the host (still running) refuses a reference it never gave.
  codex.close();
  const hooks = join(c.project, ".codex", "hooks.json");
  writeFileSync(hooks, readFileSync(hooks, "utf8").replaceAll(binary, `${binary}-missing`));
  const unhooked = await AppServer.start(t, c);
  const refused = await unhooked.turn("run the client", "plan");
  assert.match(output(refused), /COMMAND_NOT_ALLOWED/);
  // The host's audit holds the refusal: a reference that named no call.
  const runs = commandRuns(c);
  assert.ok(
    runs.some((run) => run.state === "failedToStart" && run.command === ""),
    JSON.stringify(runs),
  );
  c.fake.assertClean();
});

test("apply_patch is denied in plan mode with the host's code", { skip }, async (t) => {
  let denied = "";
  const c = await codexCase(t, [
    () => [patch("*** Begin Patch\n*** Add File: made.txt\n+hello\n*** End Patch\n", "call_patch")],
    (request) => {
      denied = outputOf(request, "call_patch") ?? "";
      return [say("I will not edit in plan mode.")];
    },
  ]);
  const codex = await AppServer.start(t, c);
  await codex.turn("edit a file", "plan");
  assert.match(denied, /TOOL_DENIED_IN_PLAN/);
  assert.equal(existsSync(join(c.project, "made.txt")), false);
  c.fake.assertClean();
});

/** A plan turn whose plan the person decides with `decide` once it is pending; the turn's items and the request after it. */
async function planned(t: TestContext, c: Case, codex: AppServer, decide: (id: string) => void | Promise<void>): Promise<{ items: TurnItem[]; id: string }> {
  const pending = whenPending(c);
  const turn = codex.turn("make a plan", "plan");
  const id = await pending;
  await decide(id);
  return { items: await turn, id };
}

for (const mode of ["ask", "accept-edits", "auto"] as const) {
  test(`a plan approved on the card with ${mode} is the exact bytes, and after it the host runs the work in the workspace-write sandbox`, { skip }, async (t) => {
    const outside = "outside-the-workspace.txt";
    let insideOutput = "";
    let outsideOutput = "";
    const c = await codexCase(t, [
      () => [propose(PLAN)],
      () => [shell(`echo built > inside.txt && echo wrote`, "call_inside")],
      (request) => {
        insideOutput = outputOf(request, "call_inside") ?? "";
        return [shell(`echo x > ../${outside}; echo status=$?`, "call_outside")];
      },
      (request) => {
        outsideOutput = outputOf(request, "call_outside") ?? "";
        // Under auto the host allows an edit: Codex's own read-only sandbox
        // asks, and its PermissionRequest hook gives the host's answer.
        return mode === "auto" ? [patch("*** Begin Patch\n*** Add File: patched.txt\n+patched\n*** End Patch\n", "call_patch")] : [say("done")];
      },
      ...(mode === "auto" ? [() => [say("done")]] : []),
    ]);
    const codex = await AppServer.start(t, c);
    const { id } = await planned(t, c, codex, async (approvalId) => {
      const url = cli(c, ["codex", "card-url", approvalId, "--project", c.project]).trim();
      const shownPending = JSON.parse(cli(c, ["--db", database(c), "approvals", "show", approvalId, "--json"])) as {
        artifact: { sha256: string };
      };
      const sha = shownPending.artifact.sha256;
      assert.equal(await decideOnCard(url, { decision: "approve", permissionMode: mode, sha256: sha }), 200);
    });
    // The artifact is the Plan item's exact bytes, and the record its hash.
    const shownApproval = JSON.parse(cli(c, ["--db", database(c), "approvals", "show", id, "--json"])) as {
      artifact: { path: string; sha256: string };
      permissionMode: string;
    };
    const bytes = readFileSync(join(c.project, shownApproval.artifact.path));
    assert.equal(bytes.toString("utf8"), PLAN);
    assert.equal(sha256(bytes), shownApproval.artifact.sha256);
    assert.equal(shownApproval.permissionMode, mode);

    // The implementation turn: every shell call through the host.
    const work = codex.turn("implement it", "default");
    if (mode !== "auto") {
      // ask and accept-edits confirm a command: the hook holds it until the
      // person confirms on the host, with the command `codex pending` gives.
      for (const call of ["call_inside", "call_outside"]) {
        await confirmListed(c, call);
      }
    }
    await work;
    assert.match(insideOutput, /wrote/);
    assert.equal(readFileSync(join(c.project, "inside.txt"), "utf8"), "built\n");
    assert.match(outsideOutput, /status=[12]/);
    assert.equal(existsSync(join(c.dir, outside)), false);
    if (mode === "auto") assert.equal(readFileSync(join(c.project, "patched.txt"), "utf8"), "patched\n");
    const runs = commandRuns(c);
    assert.deepEqual(
      runs.map((run) => [run.command.startsWith("echo built") ? "inside" : "outside", run.sandbox]).sort(),
      [["inside", "workspace-write"], ["outside", "workspace-write"]],
    );
    c.fake.assertClean();
  });
}

test("a rejected plan and an expired one go on with the host's sentence", { skip }, async (t) => {
  let afterReject = "";
  const c = await codexCase(t, [
    () => [propose(PLAN)],
    (request) => {
      afterReject = shown(request);
      return [say("I will revise it with you.")];
    },
  ]);
  const codex = await AppServer.start(t, c);
  await planned(t, c, codex, (id) => {
    cli(c, ["codex", "reject", id, "--project", c.project]);
  });
  assert.match(afterReject, /rejected this plan/);
  c.fake.assertClean();

  let afterExpiry = "";
  const d = await codexCase(
    t,
    [
      () => [propose(PLAN)],
      (request) => {
        afterExpiry = shown(request);
        return [say("It expired.")];
      },
    ],
    { ttlMs: 1500 },
  );
  const late = await AppServer.start(t, d);
  await late.turn("make a plan", "plan");
  assert.match(afterExpiry, /PLAN_APPROVAL_TIMEOUT/);
  assert.deepEqual(statuses(d), ["expired"]);
  d.fake.assertClean();
});

test("a host killed while a plan is pending: the turn is told, the next host interrupts the plan", { skip }, async (t) => {
  let afterKill = "";
  const c = await codexCase(t, [
    () => [propose(PLAN)],
    (request) => {
      afterKill = shown(request);
      return [say("The host went away.")];
    },
  ]);
  const codex = await AppServer.start(t, c);
  await planned(t, c, codex, () => {
    const directory = readdirSync(c.tmp).find((name) => name.startsWith("plan-checkpoint-")) ?? "";
    const pidFile = readdirSync(join(c.tmp, directory)).find((name) => name.endsWith(".pid")) ?? "";
    process.kill(Number(readFileSync(join(c.tmp, directory, pidFile), "utf8").trim()), "SIGKILL");
  });
  assert.match(afterKill, /could not be reached|closed the connection/);
  // The next frontend's host runs the startup fence: nothing replays.
  const list = cli(c, ["--db", database(c), "db", "status", "--json"]);
  assert.ok(list.length > 0);
  const next = await AppServer.start(t, c);
  void next;
  assert.deepEqual(statuses(c), ["interrupted"]);
  c.fake.assertClean();
});

test("a moved binary is noticed: doctor says so, and a turn whose hooks did not run is said", { skip }, async (t) => {
  const c = await codexCase(t, [
      () => [shell("cat README.md || true", "call_unhooked")],
      () => [say("read")],
      () => [propose(PLAN)],
      () => [say("I will revise it.")],
    ], {
    install: false,
  });
  const copy = join(c.dir, "bin", "plan-checkpoint");
  mkdirSync(join(c.dir, "bin"));
  copyFileSync(binary, copy);
  chmodSync(copy, 0o755);
  cli(c, ["codex", "install", "--project", c.project], copy);
  assert.equal(cliRaw(c, ["codex", "doctor", "--project", c.project], copy).status, 0);
  renameSync(copy, `${copy}-moved`);
  const doctor = cliRaw(c, ["codex", "doctor", "--project", c.project], `${copy}-moved`);
  assert.equal(doctor.status, 1);
  assert.match(doctor.stdout, /FAIL .*moved/);
  // A turn without the hooks: Codex runs the call itself.
  const codex = await AppServer.start(t, c);
  await codex.turn("read", "plan");
  codex.close();
  // Installed again, the next turn's end says the earlier call never
  // reached the host.
  cli(c, ["codex", "install", "--project", c.project], `${copy}-moved`);
  const resumed = await AppServer.start(t, c, codex.threadId);
  const pending = whenPending(c);
  const turn = resumed.turn("plan", "plan");
  cli(c, ["codex", "reject", await pending, "--project", c.project], `${copy}-moved`);
  await turn;
  assert.match(JSON.stringify(resumed.notifications), /call_unhooked[^"]*never reached the host|never reached the host[^"]*call_unhooked/);
  c.fake.assertClean();
});

test("gpt-5.5's tool set is what the hooks map", { skip }, async (t) => {
  const c = await codexCase(t, [
    (request: ResponsesRequest) => {
      const names = (request.tools ?? []).map((tool) => tool.name ?? tool.type);
      for (const name of ["exec_command", "apply_patch", "write_stdin", "request_user_input"]) {
        assert.ok(names.includes(name), `gpt-5.5 has no ${name}: ${names.join(", ")}`);
      }
      return [say("ok")];
    },
  ]);
  const codex = await AppServer.start(t, c);
  await codex.turn("hello", "plan");
  c.fake.assertClean();
});

test("a code-mode model's nested shell calls go through the same hooks", { skip }, async (t) => {
  let shownAfter = "";
  const c = await codexCase(
    t,
    [
      () => [
        {
          type: "custom_tool_call",
          name: "exec",
          call_id: "call_code",
          input: 'const result = await tools.exec_command({ cmd: "touch made; echo status=$?" });\ntext(JSON.stringify(result));\n',
        },
      ],
      (request) => {
        shownAfter = outputOf(request, "call_code") ?? "";
        return [say("done")];
      },
    ],
    { model: "gpt-5.6-sol" },
  );
  const codex = await AppServer.start(t, c);
  await codex.turn("try a write", "plan", "gpt-5.6-sol");
  assert.equal(existsSync(join(c.project, "made")), false);
  const [run] = commandRuns(c);
  assert.equal(run?.command, "touch made; echo status=$?");
  assert.equal(run?.sandbox, "read-only");
  assert.match(shownAfter, /Read-only file system/);
  c.fake.assertClean();
});
