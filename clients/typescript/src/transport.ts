// How JSON-RPC messages travel between the client and the sidecar: the
// `Transport` contract, and the stdio transport that spawns
// `plan-checkpoint serve` and frames one JSON object per line over its
// pipes. A transport moves and parses messages and reports how the peer
// ended; it knows nothing of requests, ids, methods or errors of the
// protocol (the client does).

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createRequire } from "node:module";

import { SidecarExitedError, SidecarNotFoundError } from "./errors.js";
import { LineDecoder, TailBuffer } from "./framing.js";
import type { Request } from "./generated/protocol.js";

/**
 * One JSON-RPC message as it arrived from the peer: a parsed JSON object,
 * not yet trusted. The client reads it as the protocol's generated
 * `Response` or `Notification`, checking each member it relies on.
 */
export type JsonRpcMessage = Readonly<Record<string, unknown>>;

/** How the sidecar ended. */
export interface ExitStatus {
  /** The exit code, or `null` when a signal ended it or it never ran. */
  exitCode: number | null;
  /** The signal that ended it, or `null`. */
  signal: NodeJS.Signals | null;
}

/** How a transport ended, as it reports it once to {@link TransportHandlers.closed}. */
export interface TransportEnding {
  /** What every later call rejects with: a {@link SidecarExitedError} or a {@link SidecarNotFoundError}. */
  error: SidecarExitedError | SidecarNotFoundError;
  /** Whether {@link Transport.close} asked for the end. */
  requested: boolean;
}

/** What a transport calls back into; the client is the one implementation. */
export interface TransportHandlers {
  /** One message from the peer, in arrival order. */
  message(message: JsonRpcMessage): void;
  /** The peer has gone; called once, after the last {@link message}. */
  closed(ending: TransportEnding): void;
}

/** A channel of JSON-RPC messages to one peer. */
export interface Transport {
  /** Starts the channel (spawns the process); messages flow to `handlers` from then on. Called once. */
  start(handlers: TransportHandlers): void;
  /** Sends one message; resolves once it is handed to the channel, rejects when it cannot be. */
  send(message: Request): Promise<void>;
  /** Ends the channel and resolves with how the peer ended. Safe to call more than once. */
  close(options?: { timeoutMs?: number }): Promise<ExitStatus>;
  /** Resolves once the peer has ended, however it ended; never rejects. */
  readonly exited: Promise<ExitStatus>;
  /** The peer's process id, while it runs (a transport without a process has none). */
  readonly pid: number | undefined;
  /** The last part of the peer's diagnostics (its stderr) with the notes added to it. */
  diagnostics(): string;
  /** Adds a line of the client's own to the diagnostics, e.g. about a message it skipped. */
  note(line: string): void;
}

/** The `plan-checkpoint` npm package's API: where its per-platform binary is. */
interface BinaryPackage {
  binaryPath(): string;
}

/**
 * The sidecar a client starts when it is not told which: the binary of the
 * `plan-checkpoint` npm package (its per-platform optional dependency,
 * installed with this package, so nothing needs setting up), or, when that
 * package or its binary is not installed, `plan-checkpoint` on `PATH`
 * (`npm install -g`, `pipx`, `uv tool`, `cargo install`).
 */
export function defaultBinary(): string {
  try {
    const require = createRequire(import.meta.url);
    return (require("plan-checkpoint") as BinaryPackage).binaryPath();
  } catch {
    return "plan-checkpoint";
  }
}

/** Options of {@link StdioSidecarTransport}. */
export interface StdioSidecarOptions {
  /**
   * The `plan-checkpoint` executable; default {@link defaultBinary}: the
   * binary of the `plan-checkpoint` npm package when it is installed (this
   * package depends on it), else `plan-checkpoint` looked up on `PATH`.
   */
  binary?: string;
  /** The database file (`serve --db`). */
  db: string;
  /** More `serve` arguments, e.g. `["--approval-ttl-ms", "60000"]`. */
  args?: readonly string[];
  /** Variables added to (or, set to `undefined`, removed from) the inherited environment. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The sidecar's working directory; default the current one. */
  cwd?: string;
  /** How much of the sidecar's stderr to keep, in characters; default 64 KiB. */
  stderrLimit?: number;
  /** How long `close()` waits for the sidecar to exit before SIGKILL; default 5000 ms. */
  closeTimeoutMs?: number;
}

/**
 * The `plan-checkpoint serve` sidecar as a transport: newline-delimited
 * JSON on its stdin and stdout, its stderr kept as diagnostics.
 */
export class StdioSidecarTransport implements Transport {
  /** Resolves once the sidecar has ended, however it ended; never rejects. */
  readonly exited: Promise<ExitStatus>;

  readonly #options: StdioSidecarOptions;
  readonly #binary: string;
  readonly #stderr: TailBuffer;
  readonly #stdout = new LineDecoder();
  readonly #closeTimeoutMs: number;
  #child: ChildProcessWithoutNullStreams | undefined;
  #handlers: TransportHandlers | undefined;
  #writes: Promise<void> = Promise.resolve();
  #ended = false;
  #closing = false;
  #exitStatus: ExitStatus = { exitCode: null, signal: null };
  #spawnError: Error | undefined;
  #resolveExited!: (status: ExitStatus) => void;

  constructor(options: StdioSidecarOptions) {
    this.#options = options;
    this.#binary = options.binary ?? defaultBinary();
    this.#stderr = new TailBuffer(options.stderrLimit ?? 64 * 1024);
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    this.exited = new Promise((resolve) => {
      this.#resolveExited = resolve;
    });
  }

  /** The sidecar's process id, while it runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(handlers: TransportHandlers): void {
    if (this.#handlers !== undefined) throw new Error("the transport was already started");
    this.#handlers = handlers;
    const options = this.#options;
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const [name, value] of Object.entries(options.env ?? {})) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
    const child = spawn(this.#binary, ["serve", "--db", options.db, ...(options.args ?? [])], {
      stdio: ["pipe", "pipe", "pipe"],
      env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });
    this.#child = child;

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

  /** Queues a line behind earlier ones, waiting for 'drain' when stdin is full. */
  send(message: Request): Promise<void> {
    const line = `${JSON.stringify(message)}\n`;
    const written = this.#writes.then(
      () =>
        new Promise<void>((resolve, reject) => {
          const stdin = this.#child?.stdin;
          if (stdin === undefined || this.#ended || stdin.destroyed || stdin.writableEnded) {
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

  /**
   * Closes the sidecar's stdin (it answers what it already read, then
   * exits), waits up to `timeoutMs` (default the `closeTimeoutMs` option),
   * then kills it.
   */
  async close(options: { timeoutMs?: number } = {}): Promise<ExitStatus> {
    this.#closing = true;
    const child = this.#child;
    if (!this.#ended && child !== undefined) {
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? this.#closeTimeoutMs);
      try {
        await this.exited;
      } finally {
        clearTimeout(timer);
      }
    } else if (child === undefined) {
      this.#finish();
    }
    return this.exited;
  }

  diagnostics(): string {
    return this.#stderr.toString();
  }

  note(line: string): void {
    this.#stderr.write(`[client] ${line}\n`);
  }

  #receive(line: string): void {
    if (line.trim().length === 0) return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.note(`the sidecar wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      this.note(`the sidecar wrote a message that is not an object: ${line.slice(0, 200)}`);
      return;
    }
    this.#handlers?.message(message as JsonRpcMessage);
  }

  /** Runs once, when the sidecar is gone. */
  #finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    const { exitCode, signal } = this.#exitStatus;
    const spawnError = this.#spawnError;
    const error =
      spawnError !== undefined && (spawnError as NodeJS.ErrnoException).code === "ENOENT"
        ? new SidecarNotFoundError(this.#binary, spawnError)
        : new SidecarExitedError(
            spawnError !== undefined
              ? `could not start the sidecar: ${spawnError.message}`
              : this.#closing
                ? "the sidecar was closed"
                : "the sidecar exited unexpectedly",
            exitCode,
            signal,
            this.diagnostics(),
            spawnError,
          );
    this.#handlers?.closed({ error, requested: this.#closing });
    this.#resolveExited({ exitCode, signal });
  }
}
