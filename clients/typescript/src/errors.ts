// The errors the client rejects with: a request the sidecar refused
// (carrying its canonical code), the sidecar refusing to start (its
// null-id error, carrying the code), the binary missing, and the sidecar
// having gone away. This module only describes failures; it never decides
// whether a request is allowed (the host does).

import type { ErrorCode } from "./generated/protocol.js";

/** A request the sidecar answered with a JSON-RPC error. */
export class PlanCheckpointError extends Error {
  /** The canonical `SCREAMING_SNAKE` code (`error.data.code`). */
  readonly code: ErrorCode;
  /** The JSON-RPC number (`error.code`), e.g. -32602 or -32000. */
  readonly rpcCode: number;
  /** The error's `data` member as sent. */
  readonly data: unknown;
  /** The method of the refused request. */
  readonly method: string;

  constructor(method: string, code: ErrorCode, rpcCode: number, message: string, data: unknown) {
    super(`${method}: ${code}: ${message}`);
    this.name = "PlanCheckpointError";
    this.method = method;
    this.code = code;
    this.rpcCode = rpcCode;
    this.data = data;
  }
}

/**
 * The sidecar exited (or never started, or the client closed it) while a
 * request was pending, or a request was made after that.
 */
export class SidecarExitedError extends Error {
  /** Always `SIDECAR_EXITED`, so callers can switch on `code` for both error classes. */
  readonly code = "SIDECAR_EXITED";
  /** The exit code, or `null` when a signal ended it or it never ran. */
  readonly exitCode: number | null;
  /** The signal that ended it, or `null`. */
  readonly signal: NodeJS.Signals | null;
  /** The last part of what the sidecar wrote to stderr. */
  readonly stderrTail: string;

  constructor(reason: string, exitCode: number | null, signal: NodeJS.Signals | null, stderrTail: string, cause?: unknown) {
    const how = signal !== null ? `signal ${signal}` : exitCode !== null ? `exit code ${exitCode}` : "no exit status";
    const tail = stderrTail.length > 0 ? `\n--- sidecar stderr (tail) ---\n${stderrTail}` : "";
    super(`SIDECAR_EXITED: ${reason} (${how})${tail}`, cause === undefined ? undefined : { cause });
    this.name = "SidecarExitedError";
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderrTail = stderrTail;
  }
}

/**
 * The sidecar refused to start: before reading any request it answered with
 * a JSON-RPC error whose `id` is `null` (e.g. `HOST_ALREADY_RUNNING` when
 * another host holds the database, `SCHEMA_UNSUPPORTED`, `INVALID_PARAMS`
 * for a bad `serve` argument), then exited.
 */
export class SidecarStartupError extends Error {
  /** The canonical `SCREAMING_SNAKE` code (`error.data.code`). */
  readonly code: ErrorCode;
  /** The JSON-RPC number (`error.code`). */
  readonly rpcCode: number;
  /** The error's `data` member as sent. */
  readonly data: unknown;

  constructor(code: ErrorCode, rpcCode: number, message: string, data: unknown) {
    super(`${code}: ${message}`);
    this.name = "SidecarStartupError";
    this.code = code;
    this.rpcCode = rpcCode;
    this.data = data;
  }
}

/** What to install when the `plan-checkpoint` binary is missing (no compiler needed). */
export const INSTALL_HINT =
  "Install the plan-checkpoint binary: `npm install plan-checkpoint` in this project (the client finds it there), " +
  "or put it on PATH with `npm install -g plan-checkpoint`, `pipx install plan-checkpoint` or " +
  "`uv tool install plan-checkpoint`; or pass its path as the `binary` option.";

/** The sidecar's executable does not exist (spawning it failed with `ENOENT`); its message says what to install. */
export class SidecarNotFoundError extends Error {
  /** Always `SIDECAR_NOT_FOUND`, so callers can switch on `code` for every error class. */
  readonly code = "SIDECAR_NOT_FOUND";
  /** The executable that was looked for, as given (a bare name is looked up on `PATH`). */
  readonly binary: string;

  constructor(binary: string, cause: unknown) {
    super(
      `SIDECAR_NOT_FOUND: no executable ${JSON.stringify(binary)} (spawn ENOENT). ${INSTALL_HINT}`,
      { cause },
    );
    this.name = "SidecarNotFoundError";
    this.binary = binary;
  }
}
