// The one `plan-checkpoint serve` sidecar of this pi process. pi re-creates
// its extensions on /new, /resume, /fork and /reload; a sidecar per
// extension instance would restart the host each time, and a restarted host
// interrupts every pending approval. So the sidecar, and what the package
// remembers about each host session, live on `globalThis` and outlive the
// extension instances; only pi quitting closes it. This module starts,
// tracks and stops the process; it decides nothing about plans.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import {
  PlanCheckpointClient,
  PlanCheckpointError,
  SidecarExitedError,
  SidecarNotFoundError,
  SidecarStartupError,
  type CommandRun,
  type PlanApproval,
  type Session,
  type ToolCallResult,
} from "@plan-checkpoint/client";

/** Where the database lives, relative to the project (pi's working directory). */
export const DATABASE_PATH = join(".pi", "plan", "plan.db");

/** What the `.gitignore` beside the database says: the database and its `-wal`/`-shm` are local state, the plans are not. */
const GITIGNORE = "# The plan checkpoint's database is this machine's state; the plans beside it are yours to keep.\nplan.db\nplan.db-*\n";

/** What a Bash call the host runs (Plan or Agent) has printed so far, and how it ended. */
export interface HostCommand {
  run: CommandRun | undefined;
  output: string[];
  ended: CommandRun | undefined;
  /** Set when the sidecar ended before the command's end reached pi. */
  lost: boolean;
  listeners: Set<() => void>;
}

/**
 * The decision for one call: the sidecar's, or a refusal when none could be
 * had. `confirm` means the call may run only after a person says so.
 */
export type CallDecision =
  | { kind: "allow"; approval: PlanApproval | null; command: CommandRun | null }
  | { kind: "confirm" }
  | { kind: "deny"; reason: string };

/** A sidecar result entry as a {@link CallDecision}. */
export function fromResult(result: ToolCallResult): CallDecision {
  switch (result.decision) {
    case "allow":
      return { kind: "allow", approval: result.approval, command: result.command };
    case "confirm":
      return { kind: "confirm" };
    case "deny":
      return denied(result.error === null ? "denied by the plan checkpoint" : `${result.error.code}: ${result.error.message}`);
  }
}

/** A denial the package reports because it has no decision from the sidecar. */
export function denied(reason: string): CallDecision {
  return { kind: "deny", reason };
}

/** What the package keeps about one host session (one pi session). */
export interface SessionState {
  readonly sessionId: string;
  /** The host's answer last seen (responses and `session/changed`). */
  session: Session | undefined;
  /** Whether the current pi run goes through the checkpoint. */
  runChecked: boolean;
  /**
   * Whether pi began the run the host turn was started for (its
   * `before_agent_start` came). A turn whose run pi refused or failed
   * before it began is ended by the package: no `agent_end` will come.
   */
  runBegan: boolean;
  /**
   * Why Plan mode, asked for with `/plan` or `--plan`, could not be entered.
   * While set, prompts are refused (never run as plain pi); a `/plan` that
   * succeeds or `/plan off` clears it.
   */
  planRefusedBecause: string | undefined;
  /** The host turn the current pi run reports to, if any. */
  turnId: string | undefined;
  /** Why the current run has no turn any more (a rejected or expired plan), for the model. */
  turnEndedBecause: string | undefined;
  /** Decisions of the current run's batches by pi tool call id. */
  readonly decisions: Map<string, Promise<CallDecision>>;
  /** Host-run commands by call id. */
  readonly commands: Map<string, HostCommand>;
  /** Approvals whose dialog is open, with what closes it. */
  readonly openDialogs: Map<string, AbortController>;
}

/** The process-wide state: the sidecar and the sessions it serves. */
export class Sidecar {
  #client: Promise<PlanCheckpointClient> | undefined;
  #cwd: string | undefined;
  readonly #inflight = new Set<Promise<unknown>>();
  readonly sessions = new Map<string, SessionState>();
  #closed = false;
  /** Counts started sidecars, so the end of a replaced one is not taken for the end of the current one. */
  #generation = 0;
  /** Called with a sentence when the sidecar ends unexpectedly. */
  onLost: ((message: string) => void) | undefined;

  /** The database file for a project. */
  static databaseFor(cwd: string): string {
    return join(cwd, DATABASE_PATH);
  }

  /** The running client, starting the sidecar for `cwd` on first use (and again after it died). */
  client(cwd: string): Promise<PlanCheckpointClient> {
    if (this.#closed) return Promise.reject(new Error("pi is shutting down; the plan checkpoint is closed"));
    if (this.#client === undefined || (this.#cwd !== undefined && this.#cwd !== cwd)) {
      // A session of another project (a /resume across directories) gets
      // that project's database: the previous sidecar is closed first.
      const previous = this.#client;
      this.#cwd = cwd;
      const starting = (previous === undefined ? Promise.resolve() : previous.then((old) => old.close()).then(() => undefined, () => undefined)).then(() =>
        this.#start(cwd),
      );
      this.#client = starting;
      // A failed start is not remembered: the next call tries again (the
      // other host may have gone by then).
      starting.catch(() => {
        if (this.#client === starting) this.#client = undefined;
      });
    }
    return this.#client;
  }

  async #start(cwd: string): Promise<PlanCheckpointClient> {
    const generation = ++this.#generation;
    const db = Sidecar.databaseFor(cwd);
    const directory = join(cwd, ".pi", "plan");
    mkdirSync(directory, { recursive: true });
    const gitignore = join(directory, ".gitignore");
    if (!existsSync(gitignore)) writeFileSync(gitignore, GITIGNORE);
    const extra = (process.env.PLAN_CHECKPOINT_SERVE_ARGS ?? "").split(/\s+/).filter((arg) => arg.length > 0);
    const client = await PlanCheckpointClient.start({
      // Unset: the client's default, the plan-checkpoint npm package this
      // package depends on (its binary), else plan-checkpoint on PATH.
      ...(process.env.PLAN_CHECKPOINT_BIN ? { binary: process.env.PLAN_CHECKPOINT_BIN } : {}),
      db,
      args: extra,
      cwd,
      clientName: "pi",
      onListenerError: (error) => process.stderr.write(`plan-checkpoint: a notification handler failed: ${String(error)}\n`),
    });
    this.#route(client);
    void client.exited.then(() => {
      if (this.#closed || generation !== this.#generation) return;
      this.#client = undefined;
      for (const state of this.sessions.values()) {
        state.turnId = undefined;
        for (const dialog of state.openDialogs.values()) dialog.abort();
        for (const entry of state.commands.values()) {
          if (entry.ended !== undefined) continue;
          entry.lost = true;
          for (const listener of [...entry.listeners]) listener();
        }
      }
      this.onLost?.(`the plan-checkpoint sidecar ended (${client.stderrTail().trim().split("\n").pop() ?? "no output"}); the next request starts a new one, which interrupts what was pending`);
    });
    return client;
  }

  /** Delivers the sidecar's notifications to the sessions they concern. */
  #route(client: PlanCheckpointClient): void {
    const command = (sessionId: string, callId: string): HostCommand => this.hostCommand(sessionId, callId);
    const wake = (entry: HostCommand): void => {
      for (const listener of [...entry.listeners]) listener();
    };
    client.on("command/output", ({ sessionId, callId, chunk }) => {
      const entry = command(sessionId, callId);
      entry.output.push(chunk);
      wake(entry);
    });
    client.on("command/exited", ({ sessionId, callId, command: run }) => {
      const entry = command(sessionId, callId);
      entry.ended = run;
      wake(entry);
    });
    client.on("session/changed", ({ session }) => {
      this.state(session.sessionId).session = session;
    });
    client.on("plan/approvalResolved", ({ approval }) => {
      // The host decided (expiry included): a dialog still showing it closes.
      this.state(approval.sessionId).openDialogs.get(approval.id)?.abort();
    });
  }

  /**
   * Runs `request` against the client and remembers it until it settles, so
   * shutdown can wait for every call pi started (print mode tears down right
   * after the prompt).
   */
  track<T>(promise: Promise<T>): Promise<T> {
    this.#inflight.add(promise);
    const forget = (): void => {
      this.#inflight.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  }

  /** What a host-run command of a session has printed so far (an entry is made by whichever arrives first: output or the batch's answer). */
  hostCommand(sessionId: string, callId: string): HostCommand {
    const state = this.state(sessionId);
    let entry = state.commands.get(callId);
    if (entry === undefined) {
      entry = { run: undefined, output: [], ended: undefined, lost: false, listeners: new Set() };
      state.commands.set(callId, entry);
    }
    return entry;
  }

  /** The state of a host session, created empty on first use. */
  state(sessionId: string): SessionState {
    let state = this.sessions.get(sessionId);
    if (state === undefined) {
      state = {
        sessionId,
        session: undefined,
        runChecked: false,
        runBegan: false,
        planRefusedBecause: undefined,
        turnId: undefined,
        turnEndedBecause: undefined,
        decisions: new Map(),
        commands: new Map(),
        openDialogs: new Map(),
      };
      this.sessions.set(sessionId, state);
    }
    return state;
  }

  /** Waits for every request in flight, then closes the sidecar (it exits once it has answered them). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const state of this.sessions.values()) for (const dialog of state.openDialogs.values()) dialog.abort();
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
    const client = await this.#client?.catch(() => undefined);
    await client?.close();
  }
}

const GLOBAL_KEY = Symbol.for("plan-checkpoint.pi.sidecar");

/** The sidecar of this process, shared by every extension instance pi creates. */
export function processSidecar(): Sidecar {
  const holder = globalThis as unknown as Record<symbol, Sidecar | undefined>;
  let sidecar = holder[GLOBAL_KEY];
  if (sidecar === undefined) {
    sidecar = new Sidecar();
    holder[GLOBAL_KEY] = sidecar;
  }
  return sidecar;
}

/** A refusal or failure as `CODE: sentence`, the form the model and the user see. */
export function describeError(error: unknown): string {
  if (error instanceof PlanCheckpointError) return `${error.code}: ${stripMethod(error.message, error.method, error.code)}`;
  if (error instanceof SidecarStartupError) {
    if (error.code === "HOST_ALREADY_RUNNING") {
      return `HOST_ALREADY_RUNNING: another pi (or another plan-checkpoint host) is using this project's plan database; Plan mode is unavailable in this pi until it exits (${error.message})`;
    }
    return `${error.code}: the plan-checkpoint sidecar refused to start (${error.message})`;
  }
  if (error instanceof SidecarNotFoundError) {
    return (
      `SIDECAR_NOT_FOUND: the plan-checkpoint binary ${JSON.stringify(error.binary)} was not found. Install it without compiling` +
      " with `npm install -g plan-checkpoint` (or `pipx install plan-checkpoint`), which puts plan-checkpoint on PATH, or set PLAN_CHECKPOINT_BIN to the binary's path"
    );
  }
  if (error instanceof SidecarExitedError) {
    return `SIDECAR_EXITED: the plan-checkpoint sidecar is not running (${error.message.split("\n")[0] ?? ""})`;
  }
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The canonical code of an error, when it has one. */
export function errorCode(error: unknown): string | undefined {
  if (error instanceof PlanCheckpointError) return error.code;
  if (error instanceof SidecarStartupError || error instanceof SidecarNotFoundError || error instanceof SidecarExitedError) return error.code;
  return undefined;
}

function stripMethod(message: string, method: string, code: string): string {
  const prefix = `${method}: ${code}: `;
  return message.startsWith(prefix) ? message.slice(prefix.length) : message;
}

/** An approval's artifact path, absolute. */
export function artifactPath(cwd: string, approval: PlanApproval): string | undefined {
  return approval.artifact === null ? undefined : join(cwd, approval.artifact.path);
}
