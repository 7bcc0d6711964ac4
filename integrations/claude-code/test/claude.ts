// Runs the pinned Claude Code offline for one test case, in its SDK mode
// (`-p` with stream-json in and out, permission prompts sent to us as
// `can_use_tool` control requests), against the scripted fake Messages API.
// Each run gets its own temporary HOME, config directory, temp directory and
// project directory, an environment built from scratch (nothing of the
// caller's leaks in) and every switch that keeps Claude Code off the
// network; any request it still aims at another host goes to the fake (set
// as the proxy) and is recorded as stray. The run's output events are
// collected; the test waits on them (with a guard timeout that only turns a
// hang into a failure). Claude Code runs in its own process group, which is
// killed when the test ends, so no hook it started outlives the test.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import type { FakeAnthropic, MessagesRequest } from "./fake-anthropic.js";

/** The package root (dist/test/claude.js sits two levels below it). */
const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The pinned runtime, installed with `npm ci` in runtime/. */
export const runtimeDir = process.env["CLAUDE_CODE_RUNTIME"] ?? join(packageRoot, "runtime");

/** The Claude Code executable of the pinned runtime (a native binary since 2.1). */
export const claudeBin = join(runtimeDir, "node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe");

/** The Claude Code version the suite pins; a different installed one fails the suite. */
export const pinnedVersion = "2.1.332";

/** One event Claude Code wrote on stdout (a stream-json line). */
export type OutputEvent = { type: string; subtype?: string; [key: string]: unknown };

/** A `can_use_tool` control request, as Claude Code sent it. */
export interface CanUseTool {
  request_id: string;
  tool_name: string;
  input: Record<string, unknown>;
  tool_use_id?: string;
  [key: string]: unknown;
}

/** How the case answers Claude Code's own permission prompt. */
export type PromptAnswer =
  | { behavior: "deny"; message: string }
  | { behavior: "allow"; updatedInput: Record<string, unknown> };

export interface ClaudeOptions {
  fake: FakeAnthropic;
  /** The first user message. */
  prompt: string;
  /** `--permission-mode` (default `plan`). */
  permissionMode?: string;
  /** Settings given with `--settings` (hooks go here). */
  settings?: Record<string, unknown>;
  /** Written as the project's `.claude/settings.local.json`. */
  localSettings?: Record<string, unknown>;
  /** More command-line arguments. */
  extraArgs?: string[];
  /** More environment variables for Claude Code (and so for its hooks), over the offline ones. */
  env?: Record<string, string>;
  /** Where Claude Code starts, relative to the project (default: the project itself). */
  cwd?: string;
  /** Answers Claude Code's own permission prompts; the default never answers (see `holdPrompt`), so its dialog decides nothing. */
  onPrompt?: (request: CanUseTool, run: ClaudeRun) => PromptAnswer | Promise<PromptAnswer>;
}

/**
 * The default: Claude Code's own prompt is never answered, so only hooks can
 * decide a call. Claude Code sends the prompt at the same time as it runs the
 * `PermissionRequest` hooks and takes whichever answers first (it cancels the
 * prompt when a hook decides), so a prompt answered at once would race the
 * hooks; a held one loses every race and shows up as cancelled.
 */
export const holdPrompt = (): Promise<PromptAnswer> => new Promise<PromptAnswer>(() => undefined);

/** Answers the prompt with a deny (for cases where no `PermissionRequest` hook can race it). */
export const denyPrompt = (message: string) => (): PromptAnswer => ({ behavior: "deny", message });

/** What Claude Code appends to every tool result; the text before it is what the tool (or hook) said. */
const reminderSeparator = "\n\n<system-reminder>\n";

/** The part of a tool result that came from the tool or the hook, without Claude Code's trailing reminders. */
export function ownText(text: string): string {
  const at = text.indexOf(reminderSeparator);
  return at === -1 ? text : text.slice(0, at);
}

/** The plan file Claude Code's plan-mode instructions name (the model writes its plan there). */
export function planFileFrom(request: MessagesRequest): string {
  const match = /create your plan at (\S+\.md) using the Write tool/.exec(JSON.stringify(request.messages));
  if (match?.[1] === undefined) {
    throw new Error("the plan-mode instructions no longer name a plan file to create with Write");
  }
  return match[1];
}

/** A temporary directory for one case, removed when the test ends. */
export function tempDir(t: TestContext, prefix: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const guardMs = Number(process.env["CLAUDE_TEST_GUARD_MS"] ?? 60_000);

export class ClaudeRun {
  /** Every stdout event, in order. */
  readonly events: OutputEvent[] = [];
  /** Every permission prompt Claude Code asked us. */
  readonly prompts: CanUseTool[] = [];
  /** The request ids of the prompts Claude Code withdrew (a hook decided first). */
  readonly cancelled = new Set<string>();
  /** The run's directories: `root` holds `home`, `tmp` and `project`. */
  readonly root: string;
  readonly project: string;
  readonly home: string;
  /** The whole environment Claude Code (and every hook it runs) was given. */
  readonly env: Record<string, string>;
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiters = new Set<() => void>();
  readonly #onPrompt: (request: CanUseTool, run: ClaudeRun) => PromptAnswer | Promise<PromptAnswer>;
  #stderr = "";
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #requestCount = 0;

  private constructor(child: ChildProcessWithoutNullStreams, root: string, env: Record<string, string>, options: ClaudeOptions) {
    this.#child = child;
    this.root = root;
    this.env = env;
    this.project = join(root, "project");
    this.home = join(root, "home");
    this.#onPrompt = options.onPrompt ?? holdPrompt;
  }

  /** Prepares the directories and settings in `root` and starts Claude Code there. */
  static start(t: TestContext, root: string, options: ClaudeOptions): ClaudeRun {
    const project = join(root, "project");
    const env = runEnvironment(options.fake, root, options.env);
    for (const dir of [env["CLAUDE_CONFIG_DIR"] as string, env["TMPDIR"] as string, join(project, ".claude")]) {
      mkdirSync(dir, { recursive: true });
    }
    const args = [
      "-p",
      "--input-format",
      "stream-json",
      "--output-format",
      "stream-json",
      "--verbose",
      "--permission-prompt-tool",
      "stdio",
      "--permission-mode",
      options.permissionMode ?? "plan",
      "--model",
      "claude-sonnet-4-5",
    ];
    args.push(...(options.extraArgs ?? []));
    if (options.settings !== undefined) {
      const file = join(root, "settings.json");
      writeFileSync(file, JSON.stringify(options.settings, null, 2));
      args.push("--settings", file);
    }
    if (options.localSettings !== undefined) {
      writeFileSync(join(project, ".claude", "settings.local.json"), JSON.stringify(options.localSettings, null, 2));
    }
    const child = spawn(claudeBin, args, {
      cwd: join(project, options.cwd ?? "."),
      env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    const run = new ClaudeRun(child, root, env, options);
    run.#wire();
    t.after(() => run.kill());
    run.send({
      type: "control_request",
      request_id: run.#nextRequestId(),
      request: { subtype: "initialize" },
    });
    run.send({
      type: "user",
      session_id: "",
      parent_tool_use_id: null,
      message: { role: "user", content: [{ type: "text", text: options.prompt }] },
    });
    return run;
  }

  /** Writes one stream-json line to Claude Code's stdin. */
  send(value: unknown): void {
    this.#child.stdin.write(`${JSON.stringify(value)}\n`);
  }

  /** Closes stdin: Claude Code finishes the turn in progress and exits. */
  endInput(): void {
    this.#child.stdin.end();
  }

  /** Claude Code's stderr so far (for failure messages). */
  get stderr(): string {
    return this.#stderr;
  }

  /** Resolves with the first event (already seen or to come) that matches. */
  waitFor(what: string, match: (event: OutputEvent) => boolean): Promise<OutputEvent> {
    return this.#until(what, () => this.events.find(match));
  }

  /**
   * Sends a control request Claude Code answers at once and waits for the
   * answer: everything Claude Code wrote before handling it has been seen.
   */
  async roundTrip(): Promise<void> {
    const requestId = this.#nextRequestId();
    this.send({ type: "control_request", request_id: requestId, request: { subtype: "mcp_status" } });
    await this.waitFor(
      "the answer to a control request",
      (event) =>
        event.type === "control_response" &&
        (event["response"] as { request_id?: unknown } | undefined)?.request_id === requestId,
    );
  }

  /** Resolves with the turn's `result` event. */
  result(): Promise<OutputEvent> {
    return this.waitFor("the result event", (event) => event.type === "result");
  }

  /** Resolves when the process has exited. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.#until("Claude Code to exit", () => this.#exit, true);
  }

  /** Ends the turn (closing stdin) and waits for a clean exit. */
  async finish(): Promise<OutputEvent> {
    const result = await this.result();
    this.endInput();
    const exit = await this.exited();
    if (exit.code !== 0) {
      throw new Error(`Claude Code exited with ${exit.code ?? exit.signal}; stderr:\n${this.#stderr}`);
    }
    return result;
  }

  /** Kills Claude Code's own process only (SIGKILL), as a crash does: whatever it started is left running. */
  killClaudeCodeOnly(): void {
    this.#child.kill("SIGKILL");
  }

  /** Claude Code's process id. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Kills Claude Code and whatever it started (hooks, commands) that is still running. */
  kill(): void {
    const pid = this.#child.pid;
    if (pid === undefined) {
      return;
    }
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // The group is gone already: nothing of the run is left.
    }
  }

  #nextRequestId(): string {
    this.#requestCount += 1;
    return `test_req_${this.#requestCount}`;
  }

  #until<T>(what: string, probe: () => T | undefined, evenAfterExit = false): Promise<T> {
    return new Promise<T>((resolvePromise, reject) => {
      const check = (): void => {
        const found = probe();
        if (found !== undefined) {
          done();
          resolvePromise(found);
        } else if (this.#exit !== undefined && !evenAfterExit) {
          done();
          reject(new Error(`Claude Code exited (${this.#exit.code ?? this.#exit.signal}) before ${what}; stderr:\n${this.#stderr}`));
        }
      };
      const guard = setTimeout(() => {
        done();
        reject(new Error(`gave up waiting for ${what}; events so far:\n${this.events.map((e) => JSON.stringify(e)).join("\n")}\nstderr:\n${this.#stderr}`));
      }, guardMs);
      const done = (): void => {
        clearTimeout(guard);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) {
      waiter();
    }
  }

  #wire(): void {
    this.#child.stderr.setEncoding("utf8");
    this.#child.stderr.on("data", (chunk: string) => (this.#stderr += chunk));
    this.#child.stdin.on("error", () => {
      // Claude Code exited while we were writing: the exit is reported by the waiters.
    });
    createInterface({ input: this.#child.stdout }).on("line", (line) => {
      if (line.trim() === "") {
        return;
      }
      let event: OutputEvent;
      try {
        event = JSON.parse(line) as OutputEvent;
      } catch {
        event = { type: "unparsed", line };
      }
      this.events.push(event);
      if (event.type === "control_request") {
        this.#answerControlRequest(event);
      } else if (event.type === "control_cancel_request") {
        this.cancelled.add(String(event["request_id"]));
      }
      this.#notify();
    });
    this.#child.on("exit", (code, signal) => {
      this.#exit = { code, signal };
      this.#notify();
    });
  }

  #answerControlRequest(event: OutputEvent): void {
    const requestId = String(event["request_id"]);
    const request = event["request"] as Record<string, unknown> | undefined;
    if (request?.["subtype"] !== "can_use_tool") {
      this.send({
        type: "control_response",
        response: { subtype: "error", request_id: requestId, error: `the test does not answer ${String(request?.["subtype"])}` },
      });
      return;
    }
    const prompt = { ...(request as Omit<CanUseTool, "request_id">), request_id: requestId } as CanUseTool;
    this.prompts.push(prompt);
    void Promise.resolve(this.#onPrompt(prompt, this)).then((answer) => {
      if (this.#exit === undefined) {
        this.send({ type: "control_response", response: { subtype: "success", request_id: requestId, response: answer } });
      }
    });
  }
}

/**
 * The environment of a run in `root` (its `home` and `tmp`), as `ClaudeRun.start`
 * gives it: the offline one with `extra` over it. A test runs its own commands
 * beside Claude Code with it, so they find what Claude Code's hooks find.
 */
export function runEnvironment(fake: FakeAnthropic, root: string, extra: Record<string, string> = {}): Record<string, string> {
  const home = join(root, "home");
  return { ...offlineEnv(fake, home, join(home, ".claude"), join(root, "tmp")), ...extra };
}

/** The whole environment of a run: nothing inherited, every switch that keeps Claude Code offline. */
export function offlineEnv(fake: FakeAnthropic, home: string, configDir: string, tmp: string): Record<string, string> {
  return {
    // The pinned Node first, so hook commands run on it; then the system's tools for Bash.
    PATH: [dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"].join(":"),
    HOME: home,
    CLAUDE_CONFIG_DIR: configDir,
    TMPDIR: tmp,
    CLAUDE_CODE_TMPDIR: tmp,
    SHELL: "/bin/bash",
    LANG: "C.UTF-8",
    TERM: "dumb",
    ANTHROPIC_BASE_URL: fake.baseUrl,
    ANTHROPIC_API_KEY: "sk-ant-offline-test-key",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    DISABLE_AUTOUPDATER: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    // Anything still aimed at another host goes to the fake, which records it as stray and refuses it.
    HTTP_PROXY: fake.baseUrl,
    HTTPS_PROXY: fake.baseUrl,
    http_proxy: fake.baseUrl,
    https_proxy: fake.baseUrl,
    NO_PROXY: "127.0.0.1,localhost",
    no_proxy: "127.0.0.1,localhost",
  };
}
