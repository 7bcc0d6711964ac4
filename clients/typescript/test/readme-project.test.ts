// The README's "In a new project": its package.json and tsconfig.json, the
// README's example as main.ts, installed, compiled and run in a fresh
// directory outside the package, as a new user would.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, mkdir, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { delimiter, dirname, join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { packageDir, sidecarBinary, tempDir } from "./helpers.js";

const run = promisify(execFile);

/** The fenced `json` blocks of the README's "In a new project" section. */
async function projectFiles(): Promise<{ packageJson: string; tsconfig: string }> {
  const readme = await readFile(join(packageDir, "README.md"), "utf8");
  const section = readme.split("### In a new project")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```json\n([\s\S]*?)```/g)].map((match) => match[1] ?? "");
  assert.equal(blocks.length, 2, "the section shows package.json and tsconfig.json");
  return { packageJson: blocks[0] ?? "", tsconfig: blocks[1] ?? "" };
}

test("the README's new project installs, compiles and runs the example", async (t) => {
  const { packageJson, tsconfig } = await projectFiles();
  const manifest = JSON.parse(packageJson) as { type?: string; dependencies: Record<string, string> };
  assert.equal(manifest.type, "module", "the project is ESM, as the package needs");
  // Only the checkout's place differs from the README.
  manifest.dependencies["@plan-checkpoint/client"] = `file:${packageDir}`;

  const dir = await tempDir(t);
  await writeFile(join(dir, "package.json"), JSON.stringify(manifest, null, 2));
  await writeFile(join(dir, "tsconfig.json"), tsconfig);
  // The README's example block is this file (generated.test.ts checks it).
  await copyFile(join(packageDir, "examples/readme.ts"), join(dir, "main.ts"));

  // The package's own install already cached typescript and @types/node.
  await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: dir });
  await run("npm", ["run", "build"], { cwd: dir });
  const env = { ...process.env, PATH: `${dirname(sidecarBinary)}${delimiter}${process.env.PATH ?? ""}` };
  const before = (await readdir(dir)).sort();
  // Twice, as a new user runs it again: each run has its own temporary
  // directory, so the second is no SESSION_ALREADY_EXISTS, and nothing is
  // left in the directory it runs in.
  for (const round of [1, 2]) {
    const { stdout, stderr } = await run("npm", ["start"], { cwd: dir, env });
    assert.match(stdout, /review: Rename/, `run ${round}: ${stderr}`);
    assert.match(stdout, /# Rename foo/, `run ${round}`);
    assert.doesNotMatch(stderr, /[A-Z]+_[A-Z_]+/, `run ${round}: no refusal`);
    assert.deepEqual((await readdir(dir)).sort(), before, `run ${round} left nothing in the project directory`);
  }
});

test("the README's example fails (exit code 1) when the host refuses a request", async (t) => {
  // The same example against a sidecar that refuses session/create: a
  // fake binary answering initialize, then SESSION_ALREADY_EXISTS.
  const dir = await tempDir(t);
  const fake = join(dir, "plan-checkpoint");
  await writeFile(
    fake,
    [
      "#!/usr/bin/env node",
      'const rl = require("node:readline").createInterface({ input: process.stdin });',
      'rl.on("line", (line) => { const m = JSON.parse(line);',
      '  const out = m.method === "initialize"',
      '    ? { jsonrpc: "2.0", id: m.id, result: { protocolVersion: 9, schemaVersion: 10, serverName: "plan-checkpoint", serverVersion: "0", approvalTtlMs: 1, capabilities: { commands: { planSandbox: "unavailable", reason: "fake", layers: [], enforced: [] }, web: null } } }',
      '    : { jsonrpc: "2.0", id: m.id, error: { code: -32000, message: "a session with this id exists", data: { code: "SESSION_ALREADY_EXISTS" } } };',
      '  process.stdout.write(JSON.stringify(out) + "\\n"); });',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "commonjs" }));
  await mkdir(join(dir, "node_modules", "@plan-checkpoint"), { recursive: true });
  await symlink(packageDir, join(dir, "node_modules", "@plan-checkpoint", "client"));
  await copyFile(join(packageDir, "dist/examples/readme.js"), join(dir, "main.mjs"));
  const env = { ...process.env, PATH: `${dir}${delimiter}${process.env.PATH ?? ""}` };
  const failed = await run(process.execPath, [join(dir, "main.mjs")], { cwd: dir, env }).then(
    () => undefined,
    (error: { code?: number; stderr?: string }) => error,
  );
  assert.ok(failed !== undefined, "the example exited 0 after a refusal");
  assert.equal(failed.code, 1);
  assert.match(failed.stderr ?? "", /SESSION_ALREADY_EXISTS/);
});

test("the README's example without the binary says what to install instead of a stack trace", async (t) => {
  // A new user who installed the client but no binary: nothing named
  // plan-checkpoint on PATH, and no plan-checkpoint npm package beside it.
  const dir = await tempDir(t);
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "commonjs" }));
  await mkdir(join(dir, "node_modules", "@plan-checkpoint"), { recursive: true });
  await symlink(packageDir, join(dir, "node_modules", "@plan-checkpoint", "client"));
  await copyFile(join(packageDir, "dist/examples/readme.js"), join(dir, "main.mjs"));
  const env = { ...process.env, PATH: dirname(process.execPath) };
  const failed = await run(process.execPath, [join(dir, "main.mjs")], { cwd: dir, env }).then(
    () => undefined,
    (error: { code?: number; stderr?: string }) => error,
  );
  assert.ok(failed !== undefined, "the example exited 0 without a binary");
  assert.equal(failed.code, 1);
  const stderr = failed.stderr ?? "";
  assert.match(stderr, /SIDECAR_NOT_FOUND/);
  assert.match(stderr, /npm install plan-checkpoint/);
  assert.match(stderr, /pipx install plan-checkpoint/);
  assert.doesNotMatch(stderr, /^\s+at /m, "no stack trace");
  assert.doesNotMatch(stderr, /SidecarNotFoundError/, "no error class name, just the message");
  assert.deepEqual(await readdir(dir).then((names) => names.sort()), ["main.mjs", "node_modules", "package.json"]);
});
