// The generated protocol module matches the committed schema, the client
// has one function per method of the map, and the README's example is the
// file that the type checker compiles.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import {
  ERROR_CODES,
  METHOD_NAMES,
  NOTIFICATION_NAMES,
  PlanCheckpointClient,
  camelMethodName,
  type CamelMethodName,
  type ErrorCode,
  type ParamsOf,
  type ResultOf,
} from "../src/index.js";
import { packageDir } from "./helpers.js";

// The generator is a plain script of the package, not compiled: load it
// from the package directory, typed by its declaration file.
const { generateProtocol } = (await import(
  pathToFileURL(join(packageDir, "scripts/generate-protocol.mjs")).href
)) as typeof import("../scripts/generate-protocol.mjs");

test("src/generated/protocol.ts is what the generator makes of the committed schema", async () => {
  const committed = await readFile(join(packageDir, "src/generated/protocol.ts"), "utf8");
  assert.ok(committed === generateProtocol(), "src/generated/protocol.ts is stale: run `npm run generate` and commit it");
});

test("every type is emitted once", async () => {
  const committed = await readFile(join(packageDir, "src/generated/protocol.ts"), "utf8");
  const names = [...committed.matchAll(/^export (?:interface|type) ([A-Za-z0-9_]+)/gm)].map((match) => match[1]);
  assert.deepEqual(names, [...new Set(names)]);
  assert.equal(names.filter((name) => name === "PermissionMode").length, 1);
});

test("the method and notification maps list what the schema's unions list", async () => {
  const schema = async (file: string) =>
    JSON.parse(await readFile(join(packageDir, "../../crates/protocol/schema", file), "utf8")) as {
      oneOf: { properties: { method: { const: string } } }[];
      $defs: { CanonicalCode: { enum: string[] } };
    };
  const methods = (await schema("client_request.json")).oneOf.map((branch) => branch.properties.method.const);
  const notifications = (await schema("server_notification.json")).oneOf.map((branch) => branch.properties.method.const);
  assert.deepEqual([...METHOD_NAMES], methods);
  assert.deepEqual([...NOTIFICATION_NAMES], notifications);
  assert.deepEqual([...ERROR_CODES], (await schema("jsonrpc.error.json")).$defs.CanonicalCode.enum);
});

test("the client has one function per protocol method, named from the map", () => {
  for (const method of METHOD_NAMES) {
    const name = camelMethodName(method);
    assert.equal(typeof (PlanCheckpointClient.prototype as unknown as Record<string, unknown>)[name], "function", name);
  }
  assert.equal(camelMethodName("plan/readArtifact"), "planReadArtifact");
  // The type-level name agrees with the runtime one.
  const typed: CamelMethodName<"shell/setDefault"> = "shellSetDefault";
  assert.equal(camelMethodName("shell/setDefault"), typed);
});

test("params and result types are tied to the method name", () => {
  const approve: ParamsOf<"plan/approve"> = { approvalId: "a-1", permissionMode: "auto" };
  // @ts-expect-error "sometimes" is not a PermissionMode.
  const wrong: ParamsOf<"plan/approve"> = { approvalId: "a-1", permissionMode: "sometimes" };
  const code: ErrorCode = "PERMISSION_MODE_REQUIRED";
  // @ts-expect-error a string that is not a canonical code.
  const notACode: ErrorCode = "NOPE";
  const status: ResultOf<"plan/get">["status"] = "pending";
  assert.ok(approve && wrong && code && notACode && status);
});

test("the README's example is examples/readme.ts, which the type checker compiles", async () => {
  const readme = await readFile(join(packageDir, "README.md"), "utf8");
  const example = await readFile(join(packageDir, "examples/readme.ts"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.equal(block, example);
});
