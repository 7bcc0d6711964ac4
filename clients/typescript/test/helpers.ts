// Shared set-up of the tests: where the real sidecar binary is, a temporary
// directory per test, and a client started in it that the test stops.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";

import { PlanCheckpointClient, type StartOptions } from "../src/index.js";

/** The package directory (tests run from dist/test). */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The binary built by `cargo build -p plan-checkpoint`, or PLAN_CHECKPOINT_BIN. */
export const sidecarBinary = process.env.PLAN_CHECKPOINT_BIN ?? resolve(packageDir, "../../target/debug/plan-checkpoint");

/** A fresh directory removed when the test ends. */
export async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "plan-checkpoint-ts-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts the real sidecar on a database in a fresh directory; closed when the test ends. */
export async function startClient(
  t: TestContext,
  options: Partial<StartOptions> = {},
): Promise<{ client: PlanCheckpointClient; dir: string }> {
  const dir = await tempDir(t);
  const client = await PlanCheckpointClient.start({ binary: sidecarBinary, db: join(dir, "plan.db"), clientName: "ts-tests", ...options });
  t.after(() => client.close());
  return { client, dir };
}

/** `promise`, or a rejection naming `what` after `ms` so that a broken sidecar fails the test instead of hanging it. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
