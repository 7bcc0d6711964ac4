// End to end: the real pinned Claude Code, in plan mode, in a project where
// `plan-checkpoint claude-code install` was run, with the real
// `plan-checkpoint` binary behind its hooks (PLAN_CHECKPOINT_BIN, e.g.
// target/debug/plan-checkpoint after `cargo build -p plan-checkpoint -p plan-exec`). The model
// is the scripted fake; Claude Code's own permission prompt is never
// answered, so only the hooks (and so the host) decide. A person's decisions
// are taken with the terminal commands a user has (`claude-code pending`,
// `approve`, `reject`), and what was recorded is read back with the
// read-only `approvals` and `commands` commands. Every case has its own
// directories (its runtime directory too, so its host's socket and pid file
// are its own) and stops the hosts its hooks started.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, watch, writeFileSync } from "node:fs";
import { get } from "node:http";
import { isAbsolute, join } from "node:path";
import { test, type TestContext } from "node:test";
import {
  ClaudeRun,
  ownText,
  planFileFrom,
  runEnvironment,
  tempDir,
  type OutputEvent,
} from "./claude.js";
import { decideOnCard } from "./card.js";
import { FakeAnthropic, call, lastToolResult, say, type Step, type ToolResult } from "./fake-anthropic.js";

const binary = process.env["PLAN_CHECKPOINT_BIN"] ?? "";

const guardMs = Number(process.env["CLAUDE_TEST_GUARD_MS"] ?? 60_000);

const sha256 = (bytes: Buffer | string): string => createHash("sha256").update(bytes).digest("hex");

/** Characters that act on a terminal: C0 (but newline and tab), DEL, C1, and the bidirectional controls. */
const rawControl = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/** The output of one `plan-checkpoint` command. */
interface CliOutput {
  stdout: string;
  stderr: string;
  status: number | null;
}

/** Runs `plan-checkpoint args` with the case's environment (so it finds the host its hooks started); stdout is a pipe. */
function cliRaw(env: Record<string, string>, args: string[], cwd?: string, program = binary): CliOutput {
  const done = spawnSync(program, args, { env, cwd, encoding: "utf8", timeout: guardMs });
  if (done.error !== undefined) {
    throw done.error;
  }
  return { stdout: done.stdout, stderr: done.stderr, status: done.status };
}

/** Like `cliRaw`, failing the case on a non-zero exit. */
function cli(env: Record<string, string>, args: string[], cwd?: string, program = binary): string {
  const out = cliRaw(env, args, cwd, program);
  assert.equal(out.status, 0, `plan-checkpoint ${args.join(" ")} exited ${out.status}; stderr:\n${out.stderr}`);
  return out.stdout;
}

/** Resolves once `probe` returns something, asked again each time `dir` changes (until the guard gives up). */
function whenChanged<T>(what: string, dir: string, probe: () => T | undefined): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const watcher = watch(dir);
    const guard = setTimeout(() => finish(() => reject(new Error(`gave up waiting for ${what}`))), guardMs);
    const finish = (then: () => void): void => {
      clearTimeout(guard);
      watcher.close();
      then();
    };
    const check = (): void => {
      const found = probe();
      if (found !== undefined) finish(() => resolve(found));
    };
    watcher.on("change", check);
    check();
  });
}

/** Resolves when process `pid` has ended: the kernel's pidfd becomes readable (it is not this process's child). */
function whenGone(pid: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const waiter = spawn("python3", ["-c", "import os, select, sys; select.select([os.pidfd_open(int(sys.argv[1]))], [], [])", String(pid)], {
      stdio: "ignore",
    });
    const guard = setTimeout(() => {
      waiter.kill("SIGKILL");
      reject(new Error(`gave up waiting for host ${pid} to exit`));
    }, guardMs);
    waiter.on("exit", () => {
      clearTimeout(guard);
      resolve();
    });
  });
}

/** One approval as the protocol's PlanApproval (the fields the cases read). */
interface Approval {
  id: string;
  status: string;
  title: string;
  question: string;
  errorCode: string | null;
  permissionMode: string | null;
  createdAt: number;
  expiresAt: number;
  artifact: { path: string; sha256: string; size: number } | null;
}

/** One entry of `claude-code pending --json`. */
interface PendingEntry {
  approvalId: string;
  sessionId: string;
  title: string;
  expiresAt: number;
  artifact: { path: string; sha256: string; size: number };
}

/** One command run of `commands list --json`. */
interface CommandRun {
  callId: string;
  command: string;
  sandbox: string;
  state: string;
  exitCode: number | null;
}

/** One end-to-end case: the run, the project and the person's terminal. */
class Case {
  readonly root: string;
  readonly project: string;
  readonly env: Record<string, string>;
  readonly fake: FakeAnthropic;
  /** The `plan-checkpoint` the case installed (and so its hooks run). */
  readonly program: string;
  /** Every host pid seen for the project (each is stopped when the case ends). */
  readonly hostPids = new Set<number>();
  run: ClaudeRun | undefined;

  constructor(root: string, env: Record<string, string>, fake: FakeAnthropic, program: string) {
    this.root = root;
    this.program = program;
    this.project = join(root, "project");
    this.env = env;
    this.fake = fake;
  }

  /** Where the host's notifier appends each pending plan's notice. */
  get notices(): string {
    return join(this.root, "notices.jsonl");
  }

  /** The database the host keeps beside the project. */
  get db(): string {
    return join(this.project, ".pi", "plan", "plan.db");
  }

  /** `plan-checkpoint args` as the person at the terminal, in the project. */
  cli(args: string[]): string {
    return cli(this.env, args, this.project, this.program);
  }

  /** Waits for the one approval the hook submitted, and returns it as `pending` shows it. */
  async onePending(): Promise<PendingEntry> {
    // The hook holds ExitPlanMode from here until the decision.
    await this.claude().waitFor(
      "the ExitPlanMode hook to start",
      (event) => event.subtype === "hook_started" && event["hook_name"] === "PreToolUse:ExitPlanMode",
    );
    // The host the hook starts tells its notifier when the plan is pending:
    // it appends the notice to a file of the case's, watched here.
    await whenChanged("a pending approval", this.root, () =>
      existsSync(this.notices) && readFileSync(this.notices, "utf8").includes("\n") ? true : undefined,
    );
    const list = JSON.parse(this.cli(["claude-code", "pending", "--project", this.project, "--json"])) as PendingEntry[];
    assert.equal(list.length, 1, JSON.stringify(list));
    return list[0] as PendingEntry;
  }

  /** The approval as recorded (`approvals show --json`, read-only beside the live host). */
  approval(id: string): Approval {
    return JSON.parse(this.cli(["approvals", "show", id, "--db", this.db, "--json"])) as Approval;
  }

  /** Every approval of the database, newest first (`approvals list --json`). */
  approvals(): Approval[] {
    return (JSON.parse(this.cli(["approvals", "list", "--db", this.db, "--json"])) as { approvals: Approval[] }).approvals;
  }

  /** The audited command runs (`commands list --json`). */
  commands(): CommandRun[] {
    const parsed = JSON.parse(this.cli(["commands", "list", "--db", this.db, "--json"])) as { commands: { command: CommandRun }[] };
    return parsed.commands.map((record) => record.command);
  }

  claude(): ClaudeRun {
    assert.ok(this.run !== undefined, "Claude Code has not been started");
    return this.run;
  }

  /** The pid the host's pid file names now, if there is one. */
  hostPid(): number | undefined {
    const file = hostPidFile(this.env, this.project);
    if (!existsSync(file)) {
      return undefined;
    }
    const pid = Number(readFileSync(file, "utf8").trim());
    assert.ok(Number.isInteger(pid) && pid > 1, `the pid file ${file} holds no pid`);
    this.hostPids.add(pid);
    return pid;
  }

  /** Ends the host of `pid` (only if it is this case's host) and waits until it is gone. */
  async stopHost(pid: number, signal: NodeJS.Signals): Promise<void> {
    if (!isHostOf(pid, this.project)) {
      return;
    }
    const gone = whenGone(pid);
    process.kill(pid, signal);
    await gone;
  }

  /**
   * Stops every host of the case still running: those its pid file named,
   * and any other host for its project (one a hook started just before
   * Claude Code was killed may not have written its pid file yet).
   */
  async stopHosts(): Promise<void> {
    this.hostPid();
    for (const entry of readdirSync("/proc")) {
      const pid = Number(entry);
      if (Number.isInteger(pid) && pid > 1 && isHostOf(pid, this.project)) {
        this.hostPids.add(pid);
      }
    }
    for (const pid of this.hostPids) {
      await this.stopHost(pid, "SIGTERM");
    }
  }
}

/**
 * Where the host of `project` keeps its pid file: beside its socket, in the
 * per-user private directory under the runtime directory
 * (`$XDG_RUNTIME_DIR/plan-checkpoint-<uid>/`), named after the first 16 hex
 * digits of the SHA-256 of its database's absolute path. Each case has its
 * own runtime directory, so nothing of another case is ever found there.
 */
function hostPidFile(env: Record<string, string>, project: string): string {
  const runtime = env["XDG_RUNTIME_DIR"];
  assert.ok(runtime !== undefined);
  const uid = process.getuid?.() ?? 0;
  const name = sha256(join(project, ".pi", "plan", "plan.db")).slice(0, 16);
  return join(runtime, `plan-checkpoint-${uid}`, `${name}.pid`);
}

/** Whether `pid` is a live `plan-checkpoint claude-code host` for `project` (never signal anything else). */
function isHostOf(pid: number, project: string): boolean {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return false;
  }
  return argv.includes("claude-code") && argv.includes("host") && argv.includes(project) && !isGone(pid);
}

/** Whether `pid` has exited (gone, or a zombie its parent has not reaped yet). */
function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

interface CaseOptions {
  /** The model's script, or a function of the case that gives it (to name the case's paths). */
  steps: Step[] | ((c: Case) => Step[]);
  /** More environment for Claude Code and so for its hooks and the host they start. */
  env?: Record<string, string>;
  /** Files the case puts in the project before Claude Code starts. */
  files?: Record<string, string>;
  /** Runs alongside the turn: the person's side. */
  during?: (c: Case) => Promise<void>;
  /** The `plan-checkpoint` to install (default: PLAN_CHECKPOINT_BIN). */
  program?: string;
  /** Changes the settings the installer wrote, before Claude Code starts. */
  editSettings?: (settings: InstalledSettings) => void;
}

/** The project's `.claude/settings.local.json`, as the cases read it. */
interface InstalledSettings {
  useAutoModeDuringPlan?: boolean;
  hooks: Record<string, { matcher?: string; hooks: { type: string; command: string; timeout?: number }[] }[]>;
  [key: string]: unknown;
}

/**
 * Runs one case: a project with the checkpoint installed, Claude Code in
 * plan mode through the scripted turn, `during` alongside it; then checks
 * the run was clean and stops the case's hosts.
 */
async function runCase(t: TestContext, options: CaseOptions): Promise<{ c: Case; result: OutputEvent }> {
  const root = tempDir(t, "plan-checkpoint-e2e-");
  const steps: Step[] = [];
  const fake = await FakeAnthropic.start(t, steps);
  const runtime = join(root, "run");
  mkdirSync(runtime, { mode: 0o700 });
  const env = runEnvironment(fake, root, {
    XDG_RUNTIME_DIR: runtime,
    // The host the hooks start appends each pending plan's notice here (one line each).
    PLAN_CHECKPOINT_NOTIFY: `(cat; echo) >> '${join(root, "notices.jsonl")}'`,
    ...options.env,
  });
  const c = new Case(root, env, fake, options.program ?? binary);
  steps.push(...(typeof options.steps === "function" ? options.steps(c) : options.steps));
  mkdirSync(c.project);
  for (const [name, text] of Object.entries(options.files ?? {})) {
    writeFileSync(join(c.project, name), text);
  }
  try {
    cli(env, ["claude-code", "install", "--project", c.project], root, c.program);
    if (options.editSettings !== undefined) {
      const file = join(c.project, ".claude", "settings.local.json");
      const settings = JSON.parse(readFileSync(file, "utf8")) as InstalledSettings;
      options.editSettings(settings);
      writeFileSync(file, JSON.stringify(settings, null, 2));
    }
    c.run = ClaudeRun.start(t, root, { fake, prompt: "Work on the task.", env, extraArgs: ["--include-hook-events"] });
    const [result] = await Promise.all([c.run.finish(), options.during?.(c)]);
    const init = c.run.events.find((event) => event.type === "system" && event.subtype === "init");
    assert.equal(init?.["permissionMode"], "plan");
    fake.assertClean();
    // The hooks started a host for the project, and it is still there.
    const pid = c.hostPid();
    assert.ok(pid !== undefined && isHostOf(pid, c.project), "no live host for the project after the run");
    return { c, result };
  } finally {
    c.run?.kill();
    await c.stopHosts();
  }
}

/** Claude Code's own prompts of the run: each one must have been withdrawn (a hook decided, never its dialog). */
function assertDialogDecidedNothing(run: ClaudeRun): void {
  for (const prompt of run.prompts) {
    assert.ok(run.cancelled.has(prompt.request_id), `Claude Code's own prompt decided ${prompt.tool_name}: ${JSON.stringify(prompt)}`);
  }
}

/** Claude Code's permission mode now, as its stream last reported it. */
function permissionMode(run: ClaudeRun): unknown {
  const reported = run.events.filter(
    (event) => event.type === "system" && (event.subtype === "status" || event.subtype === "init") && "permissionMode" in event,
  );
  return reported[reported.length - 1]?.["permissionMode"];
}

/** A tool result the model got for a refused or failed call, with `pattern` in what the tool or hook said. */
function assertRefused(result: ToolResult, pattern: RegExp): void {
  assert.equal(result.isError, true, `not an error: ${result.text}`);
  assert.match(ownText(result.text), pattern);
}

/** How the model reads a PreToolUse deny of ExitPlanMode: behind the hook's name, as for Bash. */
const exitDenied = "PreToolUse:ExitPlanMode hook error: ";

const denied = /TOOL_DENIED_IN_PLAN.*the tool is not allowed in Plan mode/s;

const plan = "# Plan: greet the reader\n\nContext: a greeting is missing.\n\n1. Write `hello.txt` with one line.\n";


/** GETs a loopback URL; resolves with its status. */
function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    }).on("error", reject);
  });
}

if (binary === "") {
  const why =
    "PLAN_CHECKPOINT_BIN is not set: the end-to-end cases of the Claude Code integration DID NOT RUN. " +
    "Build the sidecar (cargo build -p plan-checkpoint) and set PLAN_CHECKPOINT_BIN to target/debug/plan-checkpoint.";
  process.stderr.write(`\n${"!".repeat(100)}\n!!! ${why}\n${"!".repeat(100)}\n\n`);
  test("end to end with the real plan-checkpoint", { skip: why }, () => undefined);
} else {
  test("the sidecar binary exists", () => {
    assert.ok(isAbsolute(binary), `PLAN_CHECKPOINT_BIN must be an absolute path: ${binary}`);
    assert.ok(existsSync(binary), `PLAN_CHECKPOINT_BIN names no file: ${binary}`);
  });

  test("install: writes the hooks and useAutoModeDuringPlan into the project's local settings, keeps what was there, and is idempotent", (t) => {
    const root = tempDir(t, "plan-checkpoint-e2e-");
    const project = join(root, "project");
    const settingsFile = join(project, ".claude", "settings.local.json");
    mkdirSync(join(project, ".claude"), { recursive: true });
    writeFileSync(settingsFile, JSON.stringify({ model: "kept", hooks: { Stop: [{ hooks: [{ type: "command", command: "true" }] }] } }));
    const env = { PATH: "/usr/bin:/bin", HOME: join(root, "home") };
    const said = cli(env, ["claude-code", "install", "--project", project], root);
    assert.match(said, /settings\.local\.json/);
    assert.match(said, /useAutoModeDuringPlan/);
    const first = readFileSync(settingsFile, "utf8");
    const settings = JSON.parse(first) as InstalledSettings;
    assert.equal(settings.model, "kept");
    assert.equal(settings.useAutoModeDuringPlan, false);
    assert.deepEqual(settings.hooks["Stop"], [{ hooks: [{ type: "command", command: "true" }] }]);
    const command = `'${binary}' claude-code hook`;
    assert.deepEqual(settings.hooks["PreToolUse"], [{ matcher: "*", hooks: [{ type: "command", command, timeout: 1800 + 300 }] }]);
    assert.equal(settings.hooks["PermissionRequest"]?.length, 1);
    assert.equal(settings.hooks["PermissionRequest"]?.[0]?.matcher, "*");
    assert.equal(settings.hooks["PermissionRequest"]?.[0]?.hooks[0]?.command, command);
    assert.deepEqual(settings.hooks["PostToolUse"], [
      { matcher: "Write|Edit|MultiEdit|NotebookEdit|WebFetch|WebSearch|Task|Agent", hooks: [{ type: "command", command, timeout: 60 }] },
    ]);
    // Again: the same file.
    cli(env, ["claude-code", "install", "--project", project], root);
    assert.equal(readFileSync(settingsFile, "utf8"), first);
  });

  test("plan mode: touch, a redirect and rm run in the host's read-only sandbox; the kernel refuses them, the model sees it, the canary is untouched and the audit lists each command", async (t) => {
    const canary = "the test's canary: unchanged\n";
    const commands = {
      read: "cat canary.txt",
      touch: "touch new.txt",
      redirect: "echo overwritten > canary.txt",
      rm: "rm canary.txt",
    };
    const readOnly = /Read-only file system|Permission denied/;
    const { c } = await runCase(t, {
      files: { "canary.txt": canary },
      steps: [
        () => [call("Bash", { command: commands.read, description: "read the canary" }, "toolu_read")],
        (request) => {
          // The sandbox runs commands (this one reads), so the refusals below are the kernel's.
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), canary.trimEnd());
          return [call("Bash", { command: commands.touch, description: "create a file" }, "toolu_touch")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [call("Bash", { command: commands.redirect, description: "overwrite the canary" }, "toolu_redirect")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [call("Bash", { command: commands.rm, description: "remove the canary" }, "toolu_rm")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [say("Nothing could be written.")];
        },
      ],
    });
    const run = c.claude();
    assert.equal(readFileSync(join(c.project, "canary.txt"), "utf8"), canary);
    assert.equal(existsSync(join(c.project, "new.txt")), false);
    // What Claude Code ran was the rewritten command: the thin client, naming the project and the call, with the
    // original command in a quoted here-document (so the shell expands nothing of it).
    const rewritten = run.prompts.map((prompt) => {
      const match = /^'(.+?)' claude-code bash (.*) <<'(\w+)'\n([\s\S]*)\n(\w+)$/.exec(String(prompt.input["command"]));
      assert.ok(match !== null, `not a rewritten command: ${JSON.stringify(prompt.input)}`);
      const [, program, options, opened, original, closed] = match;
      assert.deepEqual([program, opened], [binary, closed]);
      assert.ok(options?.includes(`--project '${c.project}'`), options);
      return [/--call '([^']*)'/.exec(options ?? "")?.[1], original];
    });
    assert.deepEqual(rewritten, [
      ["toolu_read", commands.read],
      ["toolu_touch", commands.touch],
      ["toolu_redirect", commands.redirect],
      ["toolu_rm", commands.rm],
    ]);
    assertDialogDecidedNothing(run);
    // The audit: each command, read-only, with its exit status.
    const audited = c
      .commands()
      .map((run) => [run.callId, run.command, run.sandbox, run.state, run.exitCode === 0])
      .sort();
    assert.deepEqual(audited, [
      ["toolu_read", commands.read, "read-only", "exited", true],
      ["toolu_redirect", commands.redirect, "read-only", "exited", false],
      ["toolu_rm", commands.rm, "read-only", "exited", false],
      ["toolu_touch", commands.touch, "read-only", "exited", false],
    ]);
  });

  test("plan-checkpoint installed alone (as cargo install puts it: no sandbox helper beside it) runs plan-mode Bash in its read-only sandbox", async (t) => {
    const alone = join(tempDir(t, "plan-checkpoint-bin-"), "plan-checkpoint");
    copyFileSync(binary, alone);
    chmodSync(alone, 0o755);
    const canary = "read through the sandbox\n";
    const { c } = await runCase(t, {
      program: alone,
      files: { "canary.txt": canary },
      steps: [
        () => [call("Bash", { command: "cat canary.txt", description: "read the canary" })],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), canary.trimEnd());
          return [call("Bash", { command: "touch new.txt", description: "create a file" })];
        },
        (request) => {
          assertRefused(lastToolResult(request), /Read-only file system|Permission denied/);
          return [say("Done.")];
        },
      ],
    });
    assert.equal(existsSync(join(c.project, "new.txt")), false);
    assert.deepEqual(
      c.commands().map((run) => [run.command, run.sandbox]),
      [
        ["touch new.txt", "read-only"],
        ["cat canary.txt", "read-only"],
      ],
    );
  });

  test("plan mode: Write and Edit are denied with the host's TOOL_DENIED_IN_PLAN, which the model reads", async (t) => {
    const canary = "unchanged\n";
    const { c } = await runCase(t, {
      files: { "canary.txt": canary },
      steps: (c) => [
        () => [call("Write", { file_path: "hello.txt", content: "hello\n" })],
        (request) => {
          assertRefused(lastToolResult(request), denied);
          // (Claude Code edits only a file the model has read; Read is allowed in plan mode.)
          return [call("Read", { file_path: join(c.project, "canary.txt") })];
        },
        (request) => {
          const read = lastToolResult(request);
          assert.equal(read.isError, false, read.text);
          assert.match(read.text, /unchanged/);
          return [call("Edit", { file_path: join(c.project, "canary.txt"), old_string: "unchanged", new_string: "edited" })];
        },
        (request) => {
          assertRefused(lastToolResult(request), denied);
          return [say("Planning only.")];
        },
      ],
    });
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assert.equal(readFileSync(join(c.project, "canary.txt"), "utf8"), canary);
    assert.deepEqual(c.claude().prompts, []);
  });

  test("plan mode: starting a subagent (the Agent tool) is denied with the host's TOOL_DENIED_IN_PLAN; no subagent runs", async (t) => {
    const { c } = await runCase(t, {
      steps: [
        () => [
          call("Agent", { description: "Create a file", prompt: "Subagent task: create sub.txt.", subagent_type: "general-purpose" }),
        ],
        (request) => {
          assertRefused(lastToolResult(request), denied);
          return [say("Planning alone.")];
        },
      ],
    });
    // (assertClean: the model was asked exactly twice, so no subagent turn happened.)
    assert.equal(existsSync(join(c.project, "sub.txt")), false);
    assert.deepEqual(c.claude().prompts, []);
  });

  test("ExitPlanMode: the exact plan bytes are the artifact under .pi/plan/ with the recorded SHA-256; approving accept-edits from the terminal moves Claude Code to acceptEdits and the next Write happens", async (t) => {
    let planFile = "";
    let approvalId = "";
    const { c, result } = await runCase(t, {
      steps: (c) => [
        (request) => {
          planFile = planFileFrom(request);
          return [call("Write", { file_path: planFile, content: plan })];
        },
        (request) => {
          // Claude Code's own plan file is left to it.
          assert.equal(lastToolResult(request).isError, false);
          return [call("ExitPlanMode", {})];
        },
        (request) => {
          const exit = lastToolResult(request);
          assert.equal(exit.isError, false, exit.text);
          assert.ok(ownText(exit.text).endsWith(`## Approved Plan:\n${plan.trimEnd()}`), exit.text);
          // Claude Code left plan mode for the mode the person chose.
          assert.equal(permissionMode(c.claude()), "acceptEdits");
          return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
        },
        (request) => {
          assert.equal(lastToolResult(request).isError, false);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        approvalId = pending.approvalId;
        assert.equal(pending.title, "Plan: greet the reader");
        const approval = c.approval(pending.approvalId);
        assert.equal(approval.status, "pending");
        assert.equal(approval.title, "Plan: greet the reader");
        assert.ok(approval.artifact !== null);
        assert.match(approval.artifact.path, /^\.pi\/plan\/[^/]+\.md$/);
        const bytes = readFileSync(join(c.project, approval.artifact.path));
        assert.equal(bytes.toString("utf8"), plan);
        assert.equal(approval.artifact.size, bytes.length);
        assert.equal(approval.artifact.sha256, sha256(bytes));
        assert.equal(sha256(plan), approval.artifact.sha256);
        assert.deepEqual(pending.artifact, approval.artifact);
        // On a terminal: the id, the title and the start of the hash, to compare with the card's.
        assert.equal(
          c.cli(["claude-code", "pending", "--project", c.project]),
          `${pending.approvalId}  Plan: greet the reader  sha256 ${approval.artifact.sha256.slice(0, 16)}…\n`,
        );
        // The card for a browser, on loopback.
        const url = c.cli(["claude-code", "card-url", pending.approvalId, "--project", c.project]).trim();
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\//);
        assert.equal(await httpStatus(url), 200);
        // Claude Code asked nothing while the hook held the exit.
        assert.deepEqual(c.claude().prompts, []);
        // The person approves on the card, choosing accept-edits.
        const decided = await decideOnCard(url, {
          sha256: approval.artifact.sha256,
          decision: "approve",
          permissionMode: "accept-edits",
        });
        assert.equal(decided, 200);
      },
    });
    const run = c.claude();
    assert.equal(result["subtype"], "success");
    assert.equal(readFileSync(join(c.project, "hello.txt"), "utf8"), "hello\n");
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "approved");
    assert.equal(approval.permissionMode, "accept-edits");
    // What Claude Code proceeds with (it rewrites its plan file from the allow's echo) hashes to the record.
    assert.equal(sha256(readFileSync(planFile)), approval.artifact?.sha256);
    // The exit was put to Claude Code's prompt once, and the hook's answer withdrew it; the Write asked nothing.
    assert.deepEqual(
      run.prompts.map((prompt) => prompt.tool_name),
      ["ExitPlanMode"],
    );
    assertDialogDecidedNothing(run);
  });

  test("ExitPlanMode: Claude Code's plan file changed while the plan is pending: what Claude Code proceeds with is still the approved bytes (or the exit is denied), never the changed file", async (t) => {
    const changed = "# Plan: something else\n\n1. Delete the repository.\n";
    let planFile = "";
    let exit: ToolResult | undefined;
    const { c } = await runCase(t, {
      steps: [
        (request) => {
          planFile = planFileFrom(request);
          return [call("Write", { file_path: planFile, content: plan })];
        },
        () => [call("ExitPlanMode", {})],
        (request) => {
          exit = lastToolResult(request);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        // Anything of the user's may write there (an editor, another process): not the plan that was submitted.
        writeFileSync(planFile, changed);
        c.cli(["claude-code", "approve", pending.approvalId, "--mode", "accept-edits", "--project", c.project]);
      },
    });
    assert.ok(exit !== undefined);
    const approved = c.approval((c.approvals()[0] as Approval).id);
    assert.equal(approved.artifact?.sha256, sha256(plan));
    // What the hook or the tool said (Claude Code's own reminders after it
    // may quote the changed file; they say nothing was approved).
    assert.doesNotMatch(ownText(exit.text), /something else/, `the model was told another plan was approved:\n${exit.text}`);
    if (exit.isError) {
      assert.match(ownText(exit.text), /ARTIFACT_INTEGRITY_MISMATCH: Claude Code's plan file .* no longer holds the approved plan/);
    } else {
      assert.ok(ownText(exit.text).endsWith(`:\n${plan.trimEnd()}`), exit.text);
      assert.equal(readFileSync(planFile, "utf8"), plan);
    }
    assertDialogDecidedNothing(c.claude());
  });

  test("approved auto: Bash runs on the host in the workspace-write sandbox: it writes in the project, and a write outside it is refused", async (t) => {
    const { c } = await runCase(t, {
      steps: (c) => [
        (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
        () => [call("ExitPlanMode", {})],
        (request) => {
          const exit = lastToolResult(request);
          assert.equal(exit.isError, false, exit.text);
          return [call("Bash", { command: "echo inside > inside.txt && cat inside.txt", description: "write in the project" }, "toolu_inside")];
        },
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), "inside");
          // The case's own directory, beside the project: outside the workspace.
          return [call("Bash", { command: `touch ${join(c.root, "outside.txt")}`, description: "write outside" }, "toolu_outside")];
        },
        (request) => {
          assertRefused(lastToolResult(request), /Read-only file system|Permission denied/);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        c.cli(["claude-code", "approve", pending.approvalId, "--mode", "auto", "--project", c.project]);
      },
    });
    assert.equal(readFileSync(join(c.project, "inside.txt"), "utf8"), "inside\n");
    assert.equal(existsSync(join(c.root, "outside.txt")), false);
    assert.deepEqual(
      c
        .commands()
        .map((run) => [run.callId, run.sandbox, run.exitCode === 0])
        .sort(),
      [
        ["toolu_inside", "workspace-write", true],
        ["toolu_outside", "workspace-write", false],
      ],
    );
    assertDialogDecidedNothing(c.claude());
  });

  /** A plan submitted and refused; the model tries a Write after it, which plan mode still denies. */
  function refusedExit(expect: (exit: ToolResult) => void): Step[] {
    return [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        expect(lastToolResult(request));
        return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
      },
      (request) => {
        assertRefused(lastToolResult(request), denied);
        return [say("Still planning.")];
      },
    ];
  }

  test("ExitPlanMode: rejecting from the terminal denies the exit with the host's sentence and plan mode holds", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true);
        // The host's sentence, naming the approval, behind the hook's name.
        assert.ok(ownText(exit.text).startsWith(`${exitDenied}The person rejected this plan (${approvalId}).`), exit.text);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
        c.cli(["claude-code", "reject", approvalId, "--project", c.project]);
      },
    });
    assert.equal(c.approval(approvalId).status, "rejected");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  // Long enough for the case to see the approval pending, short enough not to wait long.
  const ttlMs = 3000;

  test("ExitPlanMode: at the deadline the exit is denied with PLAN_APPROVAL_TIMEOUT and the host's sentence, and plan mode holds", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      env: { PLAN_CHECKPOINT_APPROVAL_TTL_MS: String(ttlMs) },
      steps: refusedExit((exit) =>
        assert.deepEqual(
          [ownText(exit.text), exit.isError],
          [`${exitDenied}PLAN_APPROVAL_TIMEOUT: the plan approval expired at its deadline; submit a new plan`, true],
        ),
      ),
      during: async (c) => {
        const pending = await c.onePending();
        approvalId = pending.approvalId;
        const approval = c.approval(pending.approvalId);
        assert.equal(approval.expiresAt - approval.createdAt, ttlMs);
      },
    });
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "expired");
    assert.equal(approval.errorCode, "PLAN_APPROVAL_TIMEOUT");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  test("a hostile plan (ANSI escapes and bidi overrides in its title line): claude-code pending shows them escaped, never raw; the artifact keeps the exact bytes", async (t) => {
    const hostile = "# Plan: \u001b[2J\u001b[31mred\u001b[0m \u202eevil\u202c end\n\nBody \u001b]0;title\u0007 and \u2066isolate\u2069.\n";
    let approvalId = "";
    const { c } = await runCase(t, {
      steps: [
        (request) => [call("Write", { file_path: planFileFrom(request), content: hostile })],
        () => [call("ExitPlanMode", {})],
        (request) => {
          assertRefused(lastToolResult(request), /reject/i);
          return [say("Rejected.")];
        },
      ],
      during: async (c) => {
        const entry = await c.onePending();
        approvalId = entry.approvalId;
        const human = c.cli(["claude-code", "pending", "--project", c.project]);
        assert.doesNotMatch(human, rawControl, JSON.stringify(human));
        // Shown as escapes (`\x1b` or `\u{1b}`, `\u202e` or `\u{202e}`), so a reader sees they are there.
        assert.match(human, /\\(x1b|u\{1b\})\[31mred/);
        assert.match(human, /\\(u202e|u\{202e\})evil/);
        const json = c.cli(["claude-code", "pending", "--project", c.project, "--json"]);
        assert.doesNotMatch(json, rawControl, JSON.stringify(json));
        const shown = c.cli(["approvals", "show", entry.approvalId, "--db", c.db]);
        assert.doesNotMatch(shown, rawControl, JSON.stringify(shown));
        const approval = c.approval(entry.approvalId);
        assert.ok(approval.artifact !== null);
        const bytes = readFileSync(join(c.project, approval.artifact.path));
        assert.equal(bytes.toString("utf8"), hostile);
        assert.equal(approval.artifact.sha256, sha256(hostile));
        c.cli(["claude-code", "reject", entry.approvalId, "--project", c.project]);
      },
    });
    assert.equal(c.approval(approvalId).status, "rejected");
  });

  test("killing the host while a plan is pending: the hook denies the exit (never allows), and the next host interrupts the approval with HOST_RESTARTED", async (t) => {
    let approvalId = "";
    let killed = 0;
    const { c } = await runCase(t, {
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true, exit.text);
        assert.doesNotMatch(exit.text, /approved/i);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
        const pid = c.hostPid();
        assert.ok(pid !== undefined && isHostOf(pid, c.project), "no live host while the plan is pending");
        killed = pid;
        await c.stopHost(pid, "SIGKILL");
      },
    });
    // The Write after the exit started a new host, whose startup fence interrupted the approval.
    assert.equal(c.hostPids.size, 2, `hosts seen: ${[...c.hostPids].join(", ")}`);
    assert.ok(c.hostPids.has(killed));
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "interrupted");
    assert.equal(approval.errorCode, "HOST_RESTARTED");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  test("Claude Code kills the ExitPlanMode hook at its timeout while the plan is pending: the exit is still denied, never left to Claude Code's dialog", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      // The hook's timeout (seconds) far inside the approval's deadline: Claude Code gives up on the hook first.
      editSettings: (settings) => {
        for (const entry of settings.hooks["PreToolUse"] ?? []) {
          for (const hook of entry.hooks) {
            hook.timeout = 3;
          }
        }
      },
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true, exit.text);
        assert.doesNotMatch(exit.text, /approved/i);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
      },
    });
    assert.notEqual(c.approval(approvalId).status, "approved");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });
}
