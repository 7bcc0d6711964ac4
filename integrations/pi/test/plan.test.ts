// End-to-end tests: the real pi agent (RPC and print mode) with this package,
// the real plan-checkpoint sidecar, and a scripted fake model server. Each
// test has its own project directory, pi home and model server.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test, type TestContext } from "node:test";

import { FakeLlm, type ScriptedReply } from "./fake-llm.js";
import { inspect, piHome, PiRpc, runPrint, tempDir, type UiRequest } from "./pi.js";

const DB = join(".pi", "plan", "plan.db");

async function setUp(t: TestContext, script: ScriptedReply[]) {
  const llm = await FakeLlm.start(t, script);
  const home = await piHome(t, llm.baseUrl);
  const project = await tempDir(t, "plan-pi-project-");
  return { llm, home, project };
}

async function approvals(project: string): Promise<Record<string, unknown>[]> {
  const listed = await inspect(["--db", join(project, DB), "approvals", "list", "--all", "--json"]);
  assert.equal(listed.code, 0, listed.stderr);
  return listed.stdout
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .flatMap((line) => {
      const parsed = JSON.parse(line) as unknown;
      return Array.isArray(parsed) ? (parsed as Record<string, unknown>[]) : [parsed as Record<string, unknown>];
    });
}

function isApprovalDialog(request: UiRequest): boolean {
  return request.method === "select" && (request.title ?? "").startsWith("Plan approval:");
}

test("write is denied in Plan mode with the canonical code, and the file is not created", async (t) => {
  const { llm, home, project } = await setUp(t, [{ calls: [{ name: "write", arguments: { path: "notes.txt", content: "hello" } }] }, { text: "ok" }]);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.prompt("plan something");
  const results = llm.toolResults();
  assert.equal(results.length, 1, JSON.stringify(llm.requests.at(-1)?.messages));
  assert.match(results[0] ?? "", /TOOL_DENIED_IN_PLAN/);
  assert.equal(existsSync(join(project, "notes.txt")), false);
});
