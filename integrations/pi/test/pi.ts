// Runs the real pi coding agent for the tests: in RPC mode (or print mode)
// as a subprocess, with a hermetic environment (its own agent directory
// with a models.json pointing at the fake model server, a throwaway HOME,
// PI_OFFLINE=1, --no-session unless a test keeps sessions, retries off) and
// this package installed through settings. The test sees pi's events and
// answers its dialogs.

import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";

import { FakeLlm, type ScriptedReply } from "./fake-llm.js";

/** The package directory (tests run from dist/test). */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The sidecar binary built by `cargo build -p plan-checkpoint`, or PLAN_CHECKPOINT_BIN. */
export const sidecarBinary = process.env.PLAN_CHECKPOINT_BIN ?? resolve(packageDir, "../../target/debug/plan-checkpoint");
/**
 * pi's command line entry point: PI_CLI (CI runs the suite once per
 * supported pi), or the pi `npm ci` installs as a development dependency.
 */
export const piCli = process.env.PI_CLI ?? join(packageDir, "node_modules/@mariozechner/pi-coding-agent/dist/cli.js");

/** The database of a project, relative to it. */
export const DB = join(".pi", "plan", "plan.db");

/** A fresh directory removed when the test ends. */
export async function tempDir(t: TestContext, prefix = "plan-pi-"): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A fake model playing `script`, a pi home pointing at it, and an empty project directory. */
export async function setUp(t: TestContext, script: ScriptedReply[]) {
  const llm = await FakeLlm.start(t, script);
  const home = await piHome(t, llm.baseUrl);
  const project = await tempDir(t, "plan-pi-project-");
  return { llm, home, project };
}

/** Every approval of a project's database, as `approvals list --all --json` prints them. */
export async function approvals(project: string): Promise<Record<string, unknown>[]> {
  const listed = await inspect(["--db", join(project, DB), "approvals", "list", "--all", "--json"]);
  assert.equal(listed.code, 0, listed.stderr);
  return (JSON.parse(listed.stdout) as { approvals: Record<string, unknown>[] }).approvals;
}

/** Every host-run command of a project's database (its latest `CommandRun`, newest first), from `commands list --json`. */
export async function commands(project: string): Promise<Record<string, unknown>[]> {
  const listed = await inspect(["--db", join(project, DB), "commands", "list", "--json"]);
  assert.equal(listed.code, 0, listed.stderr);
  return (JSON.parse(listed.stdout) as { commands: { command: Record<string, unknown> }[] }).commands.map((record) => record.command);
}

/** Whether a dialog pi shows is the approval dialog. */
export function isApprovalDialog(request: UiRequest): boolean {
  return request.method === "select" && (request.title ?? "").startsWith("Plan approval:");
}

/** A hermetic pi home: agent directory with models and settings, and a HOME. */
export interface PiHome {
  agentDir: string;
  home: string;
}

/**
 * A pi home whose settings load this package from its directory, or load
 * `packages` instead. With `withoutKey` the provider has no API key, so pi
 * refuses every prompt before asking the model.
 */
export async function piHome(t: TestContext, baseUrl: string, packages: string[] = [packageDir], withoutKey = false): Promise<PiHome> {
  const root = await tempDir(t, "plan-pi-home-");
  const agentDir = join(root, "agent");
  const home = join(root, "home");
  await mkdir(agentDir, { recursive: true });
  await mkdir(home, { recursive: true });
  await writeFile(
    join(agentDir, "models.json"),
    JSON.stringify({
      providers: { fake: { baseUrl, api: "openai-completions", ...(withoutKey ? {} : { apiKey: "not-a-key" }), models: [{ id: "fake-model" }] } },
    }),
  );
  await writeFile(
    join(agentDir, "settings.json"),
    JSON.stringify({
      defaultProvider: "fake",
      defaultModel: "fake-model",
      retry: { enabled: false },
      quietStartup: true,
      enableInstallTelemetry: false,
      packages,
    }),
  );
  return { agentDir, home };
}

export interface PiOptions {
  cwd: string;
  home: PiHome;
  /** More arguments, e.g. `["--plan=true"]`. */
  args?: string[];
  /** Extra `serve` arguments for the sidecar (PLAN_CHECKPOINT_SERVE_ARGS). */
  serveArgs?: string;
  /** Where pi saves its sessions, so that a later run can continue one; ephemeral (`--no-session`) when absent. */
  sessionDir?: string;
  /** The sidecar binary pi is told about (PLAN_CHECKPOINT_BIN); the built one when absent. */
  sidecarBinary?: string;
  /** pi's PATH; the test runner's when absent. */
  path?: string;
}

/** pi's arguments for where sessions go. */
function sessionArgs(options: PiOptions): string[] {
  return options.sessionDir === undefined ? ["--no-session"] : ["--session-dir", options.sessionDir];
}

/** The environment pi runs in: hermetic, offline, pointed at the sidecar. */
export function piEnv(options: PiOptions): NodeJS.ProcessEnv {
  return {
    PATH: options.path ?? process.env.PATH,
    HOME: options.home.home,
    PI_CODING_AGENT_DIR: options.home.agentDir,
    PI_OFFLINE: "1",
    PI_TELEMETRY: "0",
    PI_SKIP_VERSION_CHECK: "1",
    NO_COLOR: "1",
    PLAN_CHECKPOINT_BIN: options.sidecarBinary ?? sidecarBinary,
    // `pi install` runs npm, which with the throwaway HOME has no user
    // configuration: it installs a tarball without dependencies offline.
    npm_config_offline: "true",
    npm_config_update_notifier: "false",
    npm_config_audit: "false",
    npm_config_fund: "false",
    ...(options.serveArgs === undefined ? {} : { PLAN_CHECKPOINT_SERVE_ARGS: options.serveArgs }),
  };
}

/** An `extension_ui_request` from pi. */
export interface UiRequest {
  type: "extension_ui_request";
  id: string;
  method: string;
  title?: string;
  message?: string;
  options?: string[];
  timeout?: number;
  notifyType?: string;
}

/** What the test answers to a dialog: a response body, or `undefined` to leave it unanswered. */
export type UiAnswer = { value: string } | { confirmed: boolean } | { cancelled: true } | undefined;

/** pi in RPC mode. */
export class PiRpc {
  readonly events: Record<string, unknown>[] = [];
  readonly notifications: string[] = [];
  readonly dialogs: UiRequest[] = [];
  #stderr = "";
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiters = new Set<() => void>();
  readonly exited: Promise<number | null>;
  onDialog: (request: UiRequest) => UiAnswer = () => ({ cancelled: true });

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.#child = child;
    let buffer = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (text: string) => {
      buffer += text;
      let newline = buffer.indexOf("\n");
      while (newline !== -1) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        if (line.trim().length > 0) this.#receive(line);
        newline = buffer.indexOf("\n");
      }
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text: string) => {
      this.#stderr += text;
    });
    child.stdin.on("error", () => {});
    this.exited = new Promise((resolveExit) => child.on("exit", (code) => resolveExit(code)));
  }

  static start(t: TestContext, options: PiOptions): PiRpc {
    const child = spawn(process.execPath, [piCli, "--mode", "rpc", ...sessionArgs(options), ...(options.args ?? [])], {
      cwd: options.cwd,
      env: piEnv(options),
      stdio: ["pipe", "pipe", "pipe"],
    });
    const pi = new PiRpc(child);
    t.after(() => pi.stop());
    return pi;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Whether pi's process has not exited (nor been ended by a signal). */
  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  #receive(line: string): void {
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    this.events.push(event);
    if (event.type === "extension_ui_request") {
      const request = event as unknown as UiRequest;
      if (request.method === "notify" && typeof request.message === "string") this.notifications.push(request.message);
      if (["select", "confirm", "input", "editor"].includes(request.method)) {
        this.dialogs.push(request);
        const answer = this.onDialog(request);
        if (answer !== undefined) this.send({ type: "extension_ui_response", id: request.id, ...answer });
      }
    }
    for (const waiter of [...this.#waiters]) waiter();
  }

  send(command: Record<string, unknown>): void {
    this.#child.stdin.write(`${JSON.stringify(command)}\n`);
  }

  /** Resolves with the first event (from `from` on) that `matches`, or fails after `ms`. */
  waitFor(matches: (event: Record<string, unknown>) => boolean, what: string, ms = 30000, from = 0): Promise<Record<string, unknown>> {
    return new Promise((resolveEvent, reject) => {
      const check = (): boolean => {
        const found = this.events.slice(from).find(matches);
        if (found === undefined) return false;
        cleanup();
        resolveEvent(found);
        return true;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out waiting for ${what}; stderr:\n${this.#stderr}\nlast events:\n${this.events.slice(-8).map((e) => JSON.stringify(e).slice(0, 400)).join("\n")}`));
      }, ms);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
      };
      const waiter = (): void => {
        check();
      };
      this.#waiters.add(waiter);
      check();
    });
  }

  /** Sends a prompt and waits until pi's run for it has ended (or the command was refused or handled). */
  async prompt(message: string, ms = 60000): Promise<void> {
    const from = this.events.length;
    const id = `prompt-${from}`;
    this.send({ type: "prompt", id, message });
    const response = await this.waitFor((event) => event.type === "response" && event.id === id, `the response to ${id}`, ms, from);
    if (response.success !== true) throw new Error(`prompt refused: ${JSON.stringify(response)}`);
    await this.waitFor((event) => event.type === "agent_end", "agent_end", ms, from);
  }

  /** Runs an extension command (e.g. `/plan`) and waits for its response. */
  async command(text: string, ms = 30000): Promise<void> {
    const from = this.events.length;
    const id = `command-${from}`;
    this.send({ type: "prompt", id, message: text });
    await this.waitFor((event) => event.type === "response" && event.id === id, `the response to ${text}`, ms, from);
  }

  /** Closes stdin and waits for pi to exit (killing it after a while). */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    this.#child.stdin.end();
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 10000);
    await this.exited;
    clearTimeout(timer);
  }

  kill(): Promise<number | null> {
    this.#child.kill("SIGKILL");
    return this.exited;
  }
}

/** pi in print mode: runs to the end and returns its exit code and output. */
export function runPrint(options: PiOptions, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runPi(options, [...sessionArgs(options), ...args]);
}

/** pi with exactly `args` (e.g. `install -l <source>`), run to the end. */
export function runPi(options: PiOptions, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return run(process.execPath, [piCli, ...args], options.cwd, piEnv(options));
}

/** A program run to the end (killed after a minute), with what it printed. */
export function run(program: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(program, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
  });
}

/**
 * Resolves once no process holds the host lock of `database` (an exclusive
 * `flock` on the file itself): util-linux `flock` blocks until it gets the
 * lock, then lets it go. A guard fails the wait after `ms`.
 */
export function hostLockReleased(database: string, ms = 30000): Promise<void> {
  return new Promise((resolveWait, reject) => {
    const child = spawn("flock", ["--exclusive", database, "true"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const timer = setTimeout(() => child.kill("SIGKILL"), ms);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolveWait();
      else reject(new Error(`the host lock of ${database} was not released (flock: code ${code}, signal ${signal}) ${stderr}`));
    });
  });
}

/** Runs the sidecar binary's inspection CLI. */
export function inspect(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(sidecarBinary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.on("exit", (code) => resolveRun({ code, stdout, stderr }));
  });
}
