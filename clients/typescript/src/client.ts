// The JSON-RPC client of the `plan-checkpoint serve` sidecar over a
// `Transport`: it performs `initialize`, numbers requests and matches their
// responses, routes notifications, and turns the transport ending (or the
// sidecar refusing to start) into rejected calls. It neither spawns nor
// frames (the transport does), and decides nothing about plans or
// approvals: every rule is the host's, and a refusal reaches the caller as
// the host's canonical code.

import {
  PlanCheckpointError,
  SidecarExitedError,
  SidecarNotFoundError,
  SidecarStartupError,
} from "./errors.js";
import {
  METHOD_NAMES,
  PROTOCOL_VERSION,
  type ErrorCode,
  type ErrorObject,
  type InitializeResult,
  type Methods,
  type Notification,
  type Notifications,
  type Request,
  type Response,
} from "./generated/protocol.js";
import {
  StdioSidecarTransport,
  type ExitStatus,
  type JsonRpcMessage,
  type StdioSidecarOptions,
  type Transport,
  type TransportEnding,
} from "./transport.js";

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

/** Options of {@link PlanCheckpointClient.connect}. */
export interface ConnectOptions {
  /** Sent as `initialize`'s `clientName`. */
  clientName?: string;
  /** Receives what a notification listener threw; default `process.emitWarning`. */
  onListenerError?: (error: unknown) => void;
}

/** Options of {@link PlanCheckpointClient.start}: the stdio sidecar's and the connection's. */
export interface StartOptions extends StdioSidecarOptions, ConnectOptions {}

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

/** A connection to a `plan-checkpoint serve` sidecar, initialized and ready for requests. */
export class PlanCheckpointClient {
  /** What `initialize` answered (versions, approval TTL, capabilities). */
  readonly initializeResult: InitializeResult;
  /** The channel the client speaks over. */
  readonly transport: Transport;

  readonly #pending = new Map<number, PendingCall>();
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #streams = new Set<NotificationStream>();
  readonly #onListenerError: (error: unknown) => void;
  #nextId = 1;
  #initialized = false;
  #startupError: SidecarStartupError | undefined;
  #ended: Error | undefined;
  #closing = false;

  private constructor(transport: Transport, options: ConnectOptions) {
    this.initializeResult = undefined as unknown as InitializeResult;
    this.transport = transport;
    this.#onListenerError =
      options.onListenerError ??
      ((error) => process.emitWarning(`a plan-checkpoint notification listener threw: ${String(error)}`));
  }

  /**
   * Spawns `plan-checkpoint serve --db <db>` over a
   * {@link StdioSidecarTransport} and connects to it (see {@link connect}).
   */
  static start(options: StartOptions): Promise<PlanCheckpointClient> {
    return PlanCheckpointClient.connect(new StdioSidecarTransport(options), options);
  }

  /**
   * Starts `transport`, performs `initialize` and returns the ready client.
   * When initialization fails the transport is closed and the error is
   * thrown: a {@link SidecarStartupError} when the sidecar refused to start
   * (its code says why, e.g. `HOST_ALREADY_RUNNING`), a
   * {@link SidecarNotFoundError} when its binary does not exist, a
   * {@link PlanCheckpointError} when it refused `initialize`, otherwise a
   * {@link SidecarExitedError}.
   */
  static async connect(transport: Transport, options: ConnectOptions = {}): Promise<PlanCheckpointClient> {
    const client = new PlanCheckpointClient(transport, options);
    transport.start({
      message: (message) => client.#receive(message),
      closed: (ending) => client.#finish(ending),
    });
    try {
      const result = await client.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        ...(options.clientName === undefined ? {} : { clientName: options.clientName }),
      });
      (client as { initializeResult: InitializeResult }).initializeResult = result;
      client.#initialized = true;
      return client;
    } catch (error) {
      await client.close();
      throw error;
    }
  }

  /** Resolves once the sidecar has ended, however it ended; never rejects. */
  get exited(): Promise<ExitStatus> {
    return this.transport.exited;
  }

  /** The sidecar's process id, while it runs. */
  get pid(): number | undefined {
    return this.transport.pid;
  }

  /** Whether the sidecar has ended (requests then reject at once). */
  get isClosed(): boolean {
    return this.#ended !== undefined;
  }

  /** The last part of the sidecar's stderr (its logs), for diagnostics. */
  stderrTail(): string {
    return this.transport.diagnostics();
  }

  /**
   * Sends one request and resolves with its typed result. A refusal rejects
   * with a {@link PlanCheckpointError} carrying the canonical code; the
   * sidecar ending first rejects with a {@link SidecarExitedError}.
   */
  request<M extends MethodName>(method: M, ...params: ParamsArgument<M>): Promise<ResultOf<M>> {
    const refused = this.#ended ?? this.#startupError;
    if (refused !== undefined) return Promise.reject(refused);
    const id = this.#nextId++;
    return new Promise<ResultOf<M>>((resolve, reject) => {
      this.#pending.set(id, { method, resolve: resolve as (result: unknown) => void, reject });
      // A copy: every params type is a JSON object, which the envelope types as one.
      const message: Request = { jsonrpc: "2.0", id, method, params: { ...params[0] } };
      this.transport.send(message).catch(async (error: unknown) => {
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
   * Ends the sidecar: closes the transport (the stdio sidecar answers what
   * it already read, then exits; after `timeoutMs`, default the
   * `closeTimeoutMs` option, it is killed). Calls still pending reject with
   * a {@link SidecarExitedError}. Safe to call more than once.
   */
  close(options: { timeoutMs?: number } = {}): Promise<ExitStatus> {
    this.#closing = true;
    return this.transport.close(options);
  }

  #receive(record: JsonRpcMessage): void {
    const message = readMessage(record);
    if (message === undefined) {
      this.transport.note(`the sidecar sent a message that is no response or notification: ${JSON.stringify(record).slice(0, 200)}`);
      return;
    }
    if (!("id" in message)) {
      this.#notify(message.method, message.params);
      return;
    }
    if (message.id === null && "error" in message && !this.#initialized) {
      // The sidecar refuses to start in the only form a client can read
      // before its first answer: an error with a null id, then it exits.
      this.#refuseStartup(toStartupError(message.error));
      return;
    }
    const pending = typeof message.id === "number" ? this.#pending.get(message.id) : undefined;
    if (pending === undefined) {
      this.transport.note(`the sidecar answered an unknown request: ${JSON.stringify(record).slice(0, 200)}`);
      return;
    }
    this.#pending.delete(message.id as number);
    if ("error" in message) pending.reject(toError(pending.method, message.error));
    else pending.resolve(message.result);
  }

  #refuseStartup(error: SidecarStartupError): void {
    this.#startupError ??= error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
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

  /** Runs once, when the transport has ended: rejects every pending call and ends every stream. */
  #finish(ending: TransportEnding): void {
    if (this.#ended !== undefined) return;
    const requested = ending.requested || this.#closing;
    // A sidecar that said why it would not start has said more than its exit can.
    const ended: Error = this.#startupError ?? ending.error;
    this.#ended = ended;
    for (const pending of this.#pending.values()) pending.reject(ended);
    this.#pending.clear();
    for (const stream of [...this.#streams]) stream.finish(requested ? undefined : ended);
  }
}

/**
 * A message as the protocol's generated `Response` or `Notification`, or
 * `undefined` when it is neither: a notification has a string `method` and
 * no `id`; a response has an `id` (number, string or `null`) and either a
 * `result` or an `error`. The error object itself is read by
 * {@link readError}, which fills in what a broken sidecar left out.
 */
function readMessage(record: JsonRpcMessage): Response | Notification | undefined {
  if (!("id" in record)) {
    return typeof record.method === "string" ? (record as unknown as Notification) : undefined;
  }
  const id = record.id;
  if (id !== null && typeof id !== "number" && typeof id !== "string") return undefined;
  if (!("result" in record) && !("error" in record)) return undefined;
  return record as unknown as Response;
}

/** The canonical code and message of a JSON-RPC `error` member, with what the contract does not guarantee filled in. */
function readError(error: ErrorObject | unknown): { canonical: ErrorCode | undefined; rpcCode: number; message: string; data: unknown } {
  const object: Partial<Record<keyof ErrorObject, unknown>> =
    typeof error === "object" && error !== null ? (error as Partial<Record<keyof ErrorObject, unknown>>) : {};
  const data = object.data;
  const canonical =
    typeof data === "object" && data !== null && typeof (data as Record<string, unknown>).code === "string"
      ? ((data as Record<string, unknown>).code as ErrorCode)
      : undefined;
  const message = typeof object.message === "string" ? object.message : "the sidecar sent an error without a message";
  const rpcCode = typeof object.code === "number" ? object.code : 0;
  return { canonical, rpcCode, message, data };
}

/** Turns a null-id JSON-RPC `error` member into a {@link SidecarStartupError}. */
function toStartupError(error: unknown): SidecarStartupError {
  const { canonical, rpcCode, message, data } = readError(error);
  if (canonical === undefined) {
    return new SidecarStartupError("INTERNAL", rpcCode, `${message} (no canonical code in ${JSON.stringify(error)})`, data);
  }
  return new SidecarStartupError(canonical, rpcCode, message, data);
}

/** Turns a JSON-RPC `error` member into a {@link PlanCheckpointError}. */
function toError(method: string, error: unknown): PlanCheckpointError {
  const { canonical, rpcCode, message, data } = readError(error);
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
