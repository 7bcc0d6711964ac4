// The client of the `plan-checkpoint serve` sidecar: it spawns the process,
// frames JSON-RPC over its stdio, matches responses to requests, routes
// notifications, and turns the process ending into rejected calls. It
// decides nothing about plans or approvals: every rule is the host's, and a
// refusal reaches the caller as the host's canonical code.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

import { PlanCheckpointError, SidecarExitedError } from "./errors.js";
import { LineDecoder, TailBuffer } from "./framing.js";
import {
  METHOD_NAMES,
  type ErrorCode,
  type InitializeResult,
  type Methods,
  type Notifications,
} from "./generated/protocol.js";

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 9;

/** A client method name, e.g. `"plan/approve"`. */
export type MethodName = keyof Methods;
/** A notification name, e.g. `"command/output"`. */
export type NotificationName = keyof Notifications;
/** The params type of a method. */
export type ParamsOf<M extends MethodName> = Methods[M]["params"];
/** The result type of a method. */
export type ResultOf<M extends MethodName> = Methods[M]["result"];

/** The params argument: optional when every field of the params is optional. */
export type ParamsArgument<M extends MethodName> = {} extends ParamsOf<M> ? [params?: ParamsOf<M>] : [params: ParamsOf<M>];

/** `"plan/readArtifact"` -> `"planReadArtifact"`. */
export type CamelMethodName<S extends string> = S extends `${infer Head}/${infer Tail}`
  ? `${Head}${Capitalize<CamelMethodName<Tail>>}`
  : S;

/** One typed async function per protocol method, named by {@link CamelMethodName}. */
export type MethodApi = {
  [M in MethodName as CamelMethodName<M>]: (...params: ParamsArgument<M>) => Promise<ResultOf<M>>;
};

/** The runtime twin of {@link CamelMethodName}. */
export function camelMethodName(method: string): string {
  return method
    .split("/")
    .map((part, index) => (index === 0 || part.length === 0 ? part : part[0]!.toUpperCase() + part.slice(1)))
    .join("");
}

/** How the sidecar ended. */
export interface ExitStatus {
  /** The exit code, or `null` when a signal ended it or it never ran. */
  exitCode: number | null;
  /** The signal that ended it, or `null`. */
  signal: NodeJS.Signals | null;
}

/** Options of {@link PlanCheckpointClient.start}. */
export interface StartOptions {
  /** The `plan-checkpoint` executable; default `plan-checkpoint` looked up on `PATH`. */
  binary?: string;
  /** The database file (`serve --db`). */
  db: string;
  /** More `serve` arguments, e.g. `["--approval-ttl-ms", "60000"]`. */
  args?: readonly string[];
  /** Variables added to (or, set to `undefined`, removed from) the inherited environment. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The sidecar's working directory; default the current one. */
  cwd?: string;
  /** Sent as `initialize`'s `clientName`. */
  clientName?: string;
  /** How much of the sidecar's stderr to keep, in characters; default 64 KiB. */
  stderrLimit?: number;
  /** How long `close()` waits for the sidecar to exit before SIGKILL; default 5000 ms. */
  closeTimeoutMs?: number;
  /** Receives what a notification listener threw; default `process.emitWarning`. */
  onListenerError?: (error: unknown) => void;
}

interface PendingCall {
  method: string;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

interface NotificationStream {
  deliver(params: unknown): void;
  finish(error: Error | undefined): void;
}

type Listener = (params: never) => void;

/** Stops the listener that {@link PlanCheckpointClient.on} added. */
export type Unsubscribe = () => void;

// The class and this interface merge, so the per-method functions that the
// loop at the end of this file installs on the prototype are typed.
export interface PlanCheckpointClient extends MethodApi {}

/** A running `plan-checkpoint serve` sidecar, initialized and ready for requests. */
export class PlanCheckpointClient {
  /** What `initialize` answered (versions, approval TTL, capabilities). */
  readonly initializeResult: InitializeResult;
  /** Resolves once the sidecar has ended, however it ended; never rejects. */
  readonly exited: Promise<ExitStatus>;

  readonly #child: ChildProcessWithoutNullStreams;
  readonly #stderr: TailBuffer;
  readonly #stdout = new LineDecoder();
  readonly #pending = new Map<number, PendingCall>();
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #streams = new Set<NotificationStream>();
  readonly #closeTimeoutMs: number;
  readonly #onListenerError: (error: unknown) => void;
  #nextId = 1;
  #writes: Promise<void> = Promise.resolve();
  #ended: SidecarExitedError | undefined;
  #closing = false;
  #exitStatus: ExitStatus = { exitCode: null, signal: null };
  #spawnError: Error | undefined;
  #resolveExited!: (status: ExitStatus) => void;

  private constructor(options: StartOptions) {
    this.initializeResult = undefined as unknown as InitializeResult;
    this.exited = new Promise((resolve) => {
      this.#resolveExited = resolve;
    });
    this.#stderr = new TailBuffer(options.stderrLimit ?? 64 * 1024);
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    this.#onListenerError =
      options.onListenerError ??
      ((error) => process.emitWarning(`a plan-checkpoint notification listener threw: ${String(error)}`));

    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const [name, value] of Object.entries(options.env ?? {})) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
    this.#child = spawn(options.binary ?? "plan-checkpoint", ["serve", "--db", options.db, ...(options.args ?? [])], {
      stdio: ["pipe", "pipe", "pipe"],
      env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });
    const child = this.#child;

    child.on("error", (error) => {
      // Emitted when spawning fails, or when a kill could not be delivered;
      // only the first means the sidecar is gone.
      if (child.pid === undefined) {
        this.#spawnError = error;
        this.#finish();
      }
    });
    child.on("exit", (exitCode, signal) => {
      this.#exitStatus = { exitCode, signal };
      // 'close' follows once stdout and stderr are drained; a grandchild
      // holding them open must not keep the calls pending, so give up waiting
      // for it shortly after the exit.
      setTimeout(() => this.#finish(), 250).unref();
    });
    child.on("close", () => this.#finish());

    // Writing to a sidecar that has exited fails with EPIPE on stdin; the
    // failure is handled where the write is made, and must not become an
    // uncaught 'error' event that would end the host process.
    child.stdin.on("error", () => {});
    child.stdout.on("data", (chunk: Buffer) => {
      for (const line of this.#stdout.push(chunk)) this.#receive(line);
    });
    child.stdout.on("end", () => {
      const rest = this.#stdout.end();
      if (rest !== undefined) this.#receive(rest);
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text: string) => this.#stderr.write(text));
  }

  /**
   * Spawns `plan-checkpoint serve --db <db>`, performs `initialize` and
   * returns the ready client. When initialization fails the sidecar is
   * stopped and the error (a {@link PlanCheckpointError} or a
   * {@link SidecarExitedError}) is thrown.
   */
  static async start(options: StartOptions): Promise<PlanCheckpointClient> {
    const client = new PlanCheckpointClient(options);
    try {
      const result = await client.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        ...(options.clientName === undefined ? {} : { clientName: options.clientName }),
      });
      (client as { initializeResult: InitializeResult }).initializeResult = result;
      return client;
    } catch (error) {
      await client.close();
      throw error;
    }
  }

  /** The sidecar's process id, while it runs. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Whether the sidecar has ended (requests then reject at once). */
  get isClosed(): boolean {
    return this.#ended !== undefined;
  }

  /** The last part of the sidecar's stderr (its logs), for diagnostics. */
  stderrTail(): string {
    return this.#stderr.toString();
  }

  /**
   * Sends one request and resolves with its typed result. A refusal rejects
   * with a {@link PlanCheckpointError} carrying the canonical code; the
   * sidecar ending first rejects with a {@link SidecarExitedError}.
   */
  request<M extends MethodName>(method: M, ...params: ParamsArgument<M>): Promise<ResultOf<M>> {
    if (this.#ended !== undefined) return Promise.reject(this.#ended);
    const id = this.#nextId++;
    const line = `${JSON.stringify({ jsonrpc: "2.0", id, method, params: params[0] ?? {} })}\n`;
    return new Promise<ResultOf<M>>((resolve, reject) => {
      this.#pending.set(id, { method, resolve: resolve as (result: unknown) => void, reject });
      this.#write(line).catch(async (error: unknown) => {
        // A failed write means the sidecar is going away; wait briefly for
        // its exit so the rejection says how it ended.
        await Promise.race([this.exited, new Promise((wait) => setTimeout(wait, 1000).unref())]);
        if (this.#pending.delete(id)) {
          reject(
            this.#ended ??
              new SidecarExitedError("could not write the request to the sidecar", null, null, this.stderrTail(), error),
          );
        }
      });
    });
  }

  /**
   * Calls `listener` with every `name` notification until the returned
   * function is called. What a listener throws goes to `onListenerError`.
   */
  on<N extends NotificationName>(name: N, listener: (params: Notifications[N]) => void): Unsubscribe {
    let set = this.#listeners.get(name);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(name, set);
    }
    const entry = listener as Listener;
    set.add(entry);
    return () => {
      set.delete(entry);
    };
  }

  /**
   * Every `name` notification from now on, as an async iterator. It buffers
   * what arrives between reads, ends when the client is closed (or `signal`
   * aborts), and throws the {@link SidecarExitedError} if the sidecar dies.
   */
  notifications<N extends NotificationName>(name: N, options: { signal?: AbortSignal } = {}): AsyncIterableIterator<Notifications[N]> {
    const queue: Notifications[N][] = [];
    const waiting: { resolve: (next: IteratorResult<Notifications[N]>) => void; reject: (error: Error) => void }[] = [];
    let done = false;
    let failure: Error | undefined;
    const stream: NotificationStream = {
      deliver: (params) => {
        const value = params as Notifications[N];
        const next = waiting.shift();
        if (next !== undefined) next.resolve({ value, done: false });
        else queue.push(value);
      },
      finish: (error) => {
        if (done) return;
        done = true;
        failure = error;
        this.#streams.delete(stream);
        options.signal?.removeEventListener("abort", abort);
        for (const next of waiting.splice(0)) {
          if (error !== undefined) next.reject(error);
          else next.resolve({ value: undefined, done: true });
        }
      },
    };
    const abort = (): void => stream.finish(undefined);
    const unsubscribe = this.on(name, stream.deliver);
    const iterator: AsyncIterableIterator<Notifications[N]> = {
      next: () => {
        const value = queue.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (done) {
          unsubscribe();
          const error = failure;
          failure = undefined;
          return error !== undefined ? Promise.reject(error) : Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
      },
      return: () => {
        unsubscribe();
        queue.length = 0;
        failure = undefined;
        stream.finish(undefined);
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    if (this.#ended !== undefined) stream.finish(this.#closing ? undefined : this.#ended);
    else this.#streams.add(stream);
    if (options.signal?.aborted === true) abort();
    else options.signal?.addEventListener("abort", abort, { once: true });
    return iterator;
  }

  /**
   * Ends the sidecar: closes its stdin (it answers what it already read,
   * then exits), waits up to `timeoutMs` (default the `closeTimeoutMs`
   * option), then kills it. Calls still pending reject with a
   * {@link SidecarExitedError}. Safe to call more than once.
   */
  async close(options: { timeoutMs?: number } = {}): Promise<ExitStatus> {
    this.#closing = true;
    if (this.#ended === undefined) {
      this.#child.stdin.end();
      const timer = setTimeout(() => this.#child.kill("SIGKILL"), options.timeoutMs ?? this.#closeTimeoutMs);
      try {
        await this.exited;
      } finally {
        clearTimeout(timer);
      }
    }
    return this.exited;
  }

  /** Queues a line behind earlier ones, waiting for 'drain' when stdin is full. */
  #write(line: string): Promise<void> {
    const written = this.#writes.then(
      () =>
        new Promise<void>((resolve, reject) => {
          const stdin = this.#child.stdin;
          if (this.#ended !== undefined || stdin.destroyed || stdin.writableEnded) {
            reject(new Error("the sidecar's stdin is closed"));
            return;
          }
          const flushed = stdin.write(line, (error) => {
            if (error) reject(error);
          });
          if (flushed) {
            resolve();
            return;
          }
          const settle = (error?: Error): void => {
            stdin.off("drain", onDrain);
            stdin.off("close", onClose);
            if (error === undefined) resolve();
            else reject(error);
          };
          const onDrain = (): void => settle();
          const onClose = (): void => settle(new Error("the sidecar's stdin closed before it drained"));
          stdin.on("drain", onDrain);
          stdin.on("close", onClose);
        }),
    );
    // The chain itself must never hold a rejection: each caller handles its own.
    this.#writes = written.catch(() => {});
    return written;
  }

  #receive(line: string): void {
    if (line.trim().length === 0) return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.#stderr.write(`[client] the sidecar wrote a line that is not JSON: ${line.slice(0, 200)}\n`);
      return;
    }
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      this.#stderr.write(`[client] the sidecar wrote a message that is not an object: ${line.slice(0, 200)}\n`);
      return;
    }
    const record = message as Record<string, unknown>;
    if (typeof record.method === "string" && !("id" in record)) {
      this.#notify(record.method, record.params);
      return;
    }
    const pending = typeof record.id === "number" ? this.#pending.get(record.id) : undefined;
    if (pending === undefined) {
      this.#stderr.write(`[client] the sidecar answered an unknown request: ${line.slice(0, 200)}\n`);
      return;
    }
    this.#pending.delete(record.id as number);
    if ("error" in record) pending.reject(toError(pending.method, record.error));
    else pending.resolve(record.result);
  }

  #notify(method: string, params: unknown): void {
    for (const listener of [...(this.#listeners.get(method) ?? [])]) {
      try {
        (listener as (params: unknown) => void)(params);
      } catch (error) {
        this.#onListenerError(error);
      }
    }
  }

  /** Runs once, when the sidecar is gone: rejects every pending call and ends every stream. */
  #finish(): void {
    if (this.#ended !== undefined) return;
    const { exitCode, signal } = this.#exitStatus;
    const reason =
      this.#spawnError !== undefined
        ? `could not start the sidecar: ${this.#spawnError.message}`
        : this.#closing
          ? "the sidecar was closed"
          : "the sidecar exited unexpectedly";
    const ended = new SidecarExitedError(reason, exitCode, signal, this.stderrTail(), this.#spawnError);
    this.#ended = ended;
    for (const pending of this.#pending.values()) pending.reject(ended);
    this.#pending.clear();
    for (const stream of [...this.#streams]) stream.finish(this.#closing ? undefined : ended);
    this.#resolveExited({ exitCode, signal });
  }
}

/** Turns a JSON-RPC `error` member into a {@link PlanCheckpointError}. */
function toError(method: string, error: unknown): PlanCheckpointError {
  const object = typeof error === "object" && error !== null ? (error as Record<string, unknown>) : {};
  const data = object.data;
  const canonical =
    typeof data === "object" && data !== null && typeof (data as Record<string, unknown>).code === "string"
      ? ((data as Record<string, unknown>).code as ErrorCode)
      : undefined;
  const message = typeof object.message === "string" ? object.message : "the sidecar sent an error without a message";
  const rpcCode = typeof object.code === "number" ? object.code : 0;
  // The contract puts the canonical code in every error; one without it is
  // a broken sidecar, reported as INTERNAL with what it sent.
  if (canonical === undefined) {
    return new PlanCheckpointError(method, "INTERNAL", rpcCode, `${message} (no canonical code in ${JSON.stringify(error)})`, data);
  }
  return new PlanCheckpointError(method, canonical, rpcCode, message, data);
}

for (const method of METHOD_NAMES) {
  Object.defineProperty(PlanCheckpointClient.prototype, camelMethodName(method), {
    value(this: PlanCheckpointClient, params?: unknown) {
      return this.request(method, params as never);
    },
    writable: true,
    configurable: true,
  });
}
