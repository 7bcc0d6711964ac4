// The README's "In a new project": its package.json and tsconfig.json, the
// README's example as main.ts, installed, compiled and run in a fresh
// directory outside the package, as a new user would.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, readFile, writeFile } from "node:fs/promises";
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
  const { stdout } = await run("npm", ["start"], { cwd: dir, env });
  assert.match(stdout, /review: Rename/);
  assert.match(stdout, /# Rename foo/);
});
