// The end-to-end cases' common ground: a project where
// `plan-checkpoint claude-code install` was run, the real pinned Claude Code
// in it behind the real binary's hooks (PLAN_CHECKPOINT_BIN), the person's
// terminal commands, and what was recorded, read back with the read-only
// `approvals` and `commands` commands. Every case has its own directories
// (its runtime directory too, so its host's socket and pid file are its own)
// and stops the hosts its hooks started.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, watch, writeFileSync } from "node:fs";
import { get } from "node:http";
import { dirname, join } from "node:path";
import type { TestContext } from "node:test";
import { ClaudeRun, ownText, runEnvironment, tempDir, type ClaudeOptions, type OutputEvent } from "./claude.js";
import { FakeAnthropic, type Step, type ToolResult } from "./fake-anthropic.js";

export const binary = process.env["PLAN_CHECKPOINT_BIN"] ?? "";

export const guardMs = Number(process.env["CLAUDE_TEST_GUARD_MS"] ?? 60_000);

export const sha256 = (bytes: Buffer | string): string => createHash("sha256").update(bytes).digest("hex");

/** Characters that act on a terminal: C0 (but newline and tab), DEL, C1, and the bidirectional controls. */
export const rawControl = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/** The output of one `plan-checkpoint` command. */
export interface CliOutput {
  stdout: string;
  stderr: string;
  status: number | null;
}

/** Runs `plan-checkpoint args` with the case's environment (so it finds the host its hooks started); stdout is a pipe. */
export function cliRaw(env: Record<string, string>, args: string[], cwd?: string, program = binary): CliOutput {
  const done = spawnSync(program, args, { env, cwd, encoding: "utf8", timeout: guardMs });
  if (done.error !== undefined) {
    throw done.error;
  }
  return { stdout: done.stdout, stderr: done.stderr, status: done.status };
}

/** Like `cliRaw`, failing the case on a non-zero exit. */
export function cli(env: Record<string, string>, args: string[], cwd?: string, program = binary): string {
  const out = cliRaw(env, args, cwd, program);
  assert.equal(out.status, 0, `plan-checkpoint ${args.join(" ")} exited ${out.status}; stderr:\n${out.stderr}`);
  return out.stdout;
}

/** Resolves once `probe` returns something, asked again each time `dir` changes (until the guard gives up). */
export function whenChanged<T>(what: string, dir: string, probe: () => T | undefined): Promise<T> {
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
export function whenGone(pid: number): Promise<void> {
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
export interface Approval {
  id: string;
  status: string;
  title: string;
  question: string;
  errorCode: string | null;
  permissionMode: string | null;
  executionState: string | null;
  createdAt: number;
  expiresAt: number;
  artifact: { path: string; sha256: string; size: number } | null;
}

/** One entry of `claude-code pending --json`. */
export interface PendingEntry {
  approvalId: string;
  sessionId: string;
  title: string;
  expiresAt: number;
  artifact: { path: string; sha256: string; size: number };
}

/** One command run of `commands list --json`. */
export interface CommandRun {
  callId: string;
  command: string;
  sandbox: string;
  state: string;
  exitCode: number | null;
}

/** One end-to-end case: the run, the project and the person's terminal. */
export class Case {
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
export function hostPidFile(env: Record<string, string>, project: string): string {
  const runtime = env["XDG_RUNTIME_DIR"];
  assert.ok(runtime !== undefined);
  const uid = process.getuid?.() ?? 0;
  const name = sha256(join(project, ".pi", "plan", "plan.db")).slice(0, 16);
  return join(runtime, `plan-checkpoint-${uid}`, `${name}.pid`);
}

/** Whether `pid` is a live `plan-checkpoint claude-code host` for `project` (never signal anything else). */
export function isHostOf(pid: number, project: string): boolean {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return false;
  }
  return argv.includes("claude-code") && argv.includes("host") && argv.includes(project) && !isGone(pid);
}

/** Whether `pid` has exited (gone, or a zombie its parent has not reaped yet). */
export function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

export interface CaseOptions {
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
  /** Makes the project a git repository with one commit (before install). */
  git?: boolean;
  /** Where Claude Code starts, relative to the project (default: the project). */
  cwd?: string;
  /** Answers Claude Code's own permission prompts (default: never answered, so it decides nothing). */
  onPrompt?: ClaudeOptions["onPrompt"];
  /** Runs after install, before Claude Code starts (to break the setup). */
  afterInstall?: (c: Case) => void;
  /** Whether the run leaves a live host for the project (default: it does). */
  expectHost?: boolean;
  /** Claude Code is killed during the case (by `during`): the run ends with its exit, not a result. */
  killed?: boolean;
}

/** The project's `.claude/settings.local.json`, as the cases read it. */
export interface InstalledSettings {
  useAutoModeDuringPlan?: boolean;
  hooks: Record<string, { matcher?: string; hooks: { type: string; command: string; args?: string[]; timeout?: number }[] }[]>;
  [key: string]: unknown;
}

/**
 * Runs one case: a project with the checkpoint installed, Claude Code in
 * plan mode through the scripted turn, `during` alongside it; then checks
 * the run was clean and stops the case's hosts.
 */
export async function runCase(t: TestContext, options: CaseOptions): Promise<{ c: Case; result: OutputEvent }> {
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
    mkdirSync(dirname(join(c.project, name)), { recursive: true });
    writeFileSync(join(c.project, name), text);
  }
  if (options.git === true) {
    const git = (args: string[]): void => {
      const done = spawnSync("git", ["-C", c.project, "-c", "user.name=test", "-c", "user.email=test@example.invalid", ...args], { encoding: "utf8" });
      assert.equal(done.status, 0, done.stderr);
    };
    git(["init", "-q"]);
    writeFileSync(join(c.project, ".gitignore"), ".claude/settings.local.json\n.pi/\n");
    git(["add", "-A"]);
    git(["commit", "-qm", "the project"]);
  }
  try {
    cli(env, ["claude-code", "install", "--project", c.project], root, c.program);
    if (options.editSettings !== undefined) {
      const file = join(c.project, ".claude", "settings.local.json");
      const settings = JSON.parse(readFileSync(file, "utf8")) as InstalledSettings;
      options.editSettings(settings);
      writeFileSync(file, JSON.stringify(settings, null, 2));
    }
    options.afterInstall?.(c);
    c.run = ClaudeRun.start(t, root, {
      fake,
      prompt: "Work on the task.",
      env,
      extraArgs: ["--include-hook-events"],
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      ...(options.onPrompt === undefined ? {} : { onPrompt: options.onPrompt }),
    });
    if (options.killed === true) {
      await Promise.all([c.run.exited(), options.during?.(c)]);
      return { c, result: { type: "killed" } };
    }
    const [result] = await Promise.all([c.run.finish(), options.during?.(c)]);
    const init = c.run.events.find((event) => event.type === "system" && event.subtype === "init");
    assert.equal(init?.["permissionMode"], "plan");
    fake.assertClean();
    if (options.expectHost !== false) {
      // The hooks started a host for the project, and it is still there.
      const pid = c.hostPid();
      assert.ok(pid !== undefined && isHostOf(pid, c.project), "no live host for the project after the run");
    }
    return { c, result };
  } finally {
    c.run?.kill();
    await c.stopHosts();
  }
}

/** Claude Code's own prompts of the run: each one must have been withdrawn (a hook decided, never its dialog). */
export function assertDialogDecidedNothing(run: ClaudeRun): void {
  for (const prompt of run.prompts) {
    assert.ok(run.cancelled.has(prompt.request_id), `Claude Code's own prompt decided ${prompt.tool_name}: ${JSON.stringify(prompt)}`);
  }
}

/** Claude Code's permission mode now, as its stream last reported it. */
export function permissionMode(run: ClaudeRun): unknown {
  const reported = run.events.filter(
    (event) => event.type === "system" && (event.subtype === "status" || event.subtype === "init") && "permissionMode" in event,
  );
  return reported[reported.length - 1]?.["permissionMode"];
}

/** A tool result the model got for a refused or failed call, with `pattern` in what the tool or hook said. */
export function assertRefused(result: ToolResult, pattern: RegExp): void {
  assert.equal(result.isError, true, `not an error: ${result.text}`);
  assert.match(ownText(result.text), pattern);
}

/** How the model reads a PreToolUse deny of ExitPlanMode: behind the hook's name, as for Bash. */
export const exitDenied = "PreToolUse:ExitPlanMode hook error: ";

export const denied = /TOOL_DENIED_IN_PLAN.*the tool is not allowed in Plan mode/s;

export const plan = "# Plan: greet the reader\n\nContext: a greeting is missing.\n\n1. Write `hello.txt` with one line.\n";


/** GETs a loopback URL; resolves with its status. */
export function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    }).on("error", reject);
  });
}

