// One case of the suite: its own directories (a home, a CODEX_HOME, the
// project, the temporary directory where its host's socket and pid file
// live), the project set up by `plan-checkpoint codex install`, and the real
// Codex driven through its app-server (the only way to run a plan-mode turn
// without a terminal), as a frontend drives it. Codex is never told how to
// sandbox: what the install wrote decides.

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, watch, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";

import { FakeResponses, type Step } from "./fake-responses.js";

/** The `plan-checkpoint` binary under test. */
export const binary = process.env["PLAN_CHECKPOINT_BIN"] ?? "";

/** The pinned Codex, from the runtime package. */
export const codexBinary = join(
  fileURLToPath(new URL("../../runtime/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", import.meta.url)),
);

/** How long any one wait of a case may take before the case fails. */
export const guardMs = Number(process.env["CODEX_TEST_GUARD_MS"] ?? 90_000);

/** A case's directories and environment. */
export interface Case {
  dir: string;
  home: string;
  codexHome: string;
  project: string;
  tmp: string;
  env: Record<string, string>;
  fake: FakeResponses;
  /** What ends the case's processes (its app-servers), before its directories go. */
  closers: (() => void)[];
}

/** Ends the hosts whose pid files are under `tmp`. */
function endHosts(tmp: string): void {
  for (const directory of existsSync(tmp) ? readdirSync(tmp) : []) {
    if (!directory.startsWith("plan-checkpoint-")) continue;
    for (const file of readdirSync(join(tmp, directory))) {
      if (!file.endsWith(".pid")) continue;
      try {
        process.kill(Number(readFileSync(join(tmp, directory, file), "utf8").trim()), "SIGKILL");
      } catch {
        // Gone already.
      }
    }
  }
}

/** Sets a case up: the fake model playing `steps`, a fresh CODEX_HOME and project, `codex install` run. */
export async function codexCase(
  t: TestContext,
  steps: Step[],
  options: { ttlMs?: number; model?: string; install?: boolean; program?: string } = {},
): Promise<Case> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "codex-e2e-")));
  const closers: (() => void)[] = [];
  t.after(() => {
    for (const close of closers) close();
    endHosts(join(dir, "tmp"));
    rmSync(dir, { recursive: true, force: true, maxRetries: 20 });
  });
  const fake = await FakeResponses.start(t, steps);
  const home = join(dir, "home");
  const codexHome = join(dir, "codex-home");
  const project = join(dir, "project");
  const tmp = join(dir, "tmp");
  for (const directory of [home, codexHome, project, tmp]) mkdirSync(directory, { recursive: true });
  writeFileSync(
    join(codexHome, "config.toml"),
    [
      `model = ${JSON.stringify(options.model ?? "gpt-5.5")}`,
      "check_for_update_on_startup = false",
      'model_provider = "fake"',
      "[model_providers.fake]",
      'name = "fake"',
      `base_url = ${JSON.stringify(fake.baseUrl)}`,
      'wire_api = "responses"',
      'env_key = "FAKE_MODEL_KEY"',
      // Nothing but the model: no plugin marketplace, apps, model
      // discovery, update check or analytics reach out.
      "[features]",
      "plugins = false",
      "remote_plugin = false",
      "apps = false",
      "api_key_model_discovery = false",
      "in_app_updates = false",
      "[analytics]",
      "enabled = false",
      "",
    ].join("\n"),
  );
  spawnSync("git", ["init", "-q", project]);
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: home,
    CODEX_HOME: codexHome,
    TMPDIR: tmp,
    FAKE_MODEL_KEY: "offline",
    LANG: "C.UTF-8",
    // No other traffic: anything that tries a proxy lands on the fake.
    HTTP_PROXY: fake.baseUrl,
    HTTPS_PROXY: fake.baseUrl,
    NO_PROXY: "127.0.0.1",
  };
  if (options.ttlMs !== undefined) env["PLAN_CHECKPOINT_APPROVAL_TTL_MS"] = String(options.ttlMs);
  const made: Case = { dir, home, codexHome, project, tmp, env, fake, closers };
  if (options.install !== false) cli(made, ["codex", "install", "--project", project], options.program);
  return made;
}

/** The output of one `plan-checkpoint` command. */
export interface CliOutput {
  stdout: string;
  stderr: string;
  status: number | null;
}

/** Runs `plan-checkpoint args` in the case's environment. */
export function cliRaw(c: Case, args: string[], program = binary): CliOutput {
  const done = spawnSync(program, args, { env: c.env, cwd: c.project, encoding: "utf8", timeout: guardMs });
  if (done.error !== undefined) throw done.error;
  return { stdout: done.stdout, stderr: done.stderr, status: done.status };
}

/** Like `cliRaw`, failing the case on a non-zero exit. */
export function cli(c: Case, args: string[], program = binary): string {
  const out = cliRaw(c, args, program);
  assert.equal(out.status, 0, `plan-checkpoint ${args.join(" ")} exited ${out.status}; stderr:\n${out.stderr}`);
  return out.stdout;
}

/** Resolves once `probe` returns something, asked again each time `dir` changes. */
export function whenChanged<T>(what: string, dir: string, probe: () => T | undefined): Promise<T> {
  mkdirSync(dir, { recursive: true });
  return new Promise<T>((resolve, reject) => {
    const watcher = watch(dir);
    const guard = setTimeout(() => finish(() => reject(new Error(`gave up waiting for ${what}`))), guardMs);
    const finish = (then: () => void): void => {
      clearTimeout(guard);
      watcher.close();
      then();
    };
    const check = (): void => {
      let found: T | undefined;
      try {
        found = probe();
      } catch {
        found = undefined;
      }
      if (found !== undefined) finish(() => resolve(found as T));
    };
    watcher.on("change", check);
    check();
  });
}

/** The id of the project's pending plan, once there is one (the artifact's directory changes when it is written). */
export function whenPending(c: Case): Promise<string> {
  return whenChanged("a pending plan", join(c.project, ".pi", "plan"), () => {
    const out = cliRaw(c, ["codex", "pending", "--project", c.project]);
    const line = out.stdout.split("\n").find((text) => text.includes(" session "));
    return line?.split(" ")[0];
  });
}

/** An item of a finished turn, as app-server reports it. */
export type TurnItem = Record<string, unknown>;

/** Codex's app-server over stdio, spoken to as a frontend does. */
export class AppServer {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  readonly #listeners = new Set<(message: Record<string, unknown>) => void>();
  readonly notifications: Record<string, unknown>[] = [];
  #next = 0;
  threadId = "";

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.#child = child;
    createInterface({ input: child.stdout }).on("line", (line) => this.#receive(line));
    child.stderr.resume();
  }

  /** Starts Codex's app-server in the case's project and opens a thread (or resumes `threadId`). */
  static async start(_t: TestContext, c: Case, threadId?: string): Promise<AppServer> {
    const child = spawn(codexBinary, ["app-server"], { cwd: c.project, env: c.env, stdio: ["pipe", "pipe", "pipe"] });
    const server = new AppServer(child);
    c.closers.push(() => server.close());
    await server.request("initialize", { clientInfo: { name: "plan-checkpoint-e2e", version: "0" }, capabilities: { experimentalApi: true } });
    child.stdin.write(`${JSON.stringify({ method: "initialized" })}\n`);
    const thread = (
      threadId === undefined
        ? await server.request("thread/start", { cwd: c.project })
        : await server.request("thread/resume", { threadId, cwd: c.project })
    ) as { thread: { id: string } };
    server.threadId = thread.thread.id;
    return server;
  }

  /** The host session of this thread. */
  get session(): string {
    return `codex-${this.threadId}`;
  }

  request(method: string, params: unknown): Promise<unknown> {
    this.#next += 1;
    const id = this.#next;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
    });
  }

  /** Runs one turn in `mode` and resolves with its items once it completed. */
  async turn(prompt: string, mode: "plan" | "default", model = "gpt-5.5"): Promise<TurnItem[]> {
    const items: TurnItem[] = [];
    const done = new Promise<void>((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error(`the ${mode} turn did not complete`)), guardMs * 2);
      const listener = (message: Record<string, unknown>): void => {
        const params = message["params"] as Record<string, unknown> | undefined;
        if (message["method"] === "item/completed" && params !== undefined) items.push(params["item"] as TurnItem);
        if (message["method"] === "turn/completed") {
          clearTimeout(guard);
          this.#listeners.delete(listener);
          resolve();
        }
      };
      this.#listeners.add(listener);
    });
    await this.request("turn/start", {
      threadId: this.threadId,
      input: [{ type: "text", text: prompt, text_elements: [] }],
      collaborationMode: { mode, settings: { model, reasoning_effort: null, developer_instructions: null } },
    });
    await done;
    return items;
  }

  close(): void {
    this.#child.kill("SIGKILL");
  }

  #receive(line: string): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const id = message["id"];
    if (typeof id === "number" && message["method"] === undefined) {
      const pending = this.#pending.get(id);
      this.#pending.delete(id);
      if (message["error"] !== undefined) pending?.reject(new Error(JSON.stringify(message["error"])));
      else pending?.resolve(message["result"]);
      return;
    }
    if (typeof id === "number") {
      // Codex asks its frontend to approve something: this frontend never
      // does, so only the hooks (the host) decide.
      this.#child.stdin.write(`${JSON.stringify({ id, result: { decision: "decline" } })}\n`);
      this.notifications.push(message);
      return;
    }
    this.notifications.push(message);
    for (const listener of [...this.#listeners]) listener(message);
  }
}

/** The command executions of a turn's items. */
export function commandsOf(items: TurnItem[]): TurnItem[] {
  return items.filter((item) => item["type"] === "commandExecution");
}
