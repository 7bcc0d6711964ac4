// Installing the package as a person would: `npm pack` makes a tarball
// holding everything the package needs (the client is bundled into
// dist/extension.js, so there is nothing to install with it and no path
// back to this checkout). pi installs it unpacked, as a directory (every
// supported pi), or, on pi 1.x, straight from the tarball as an npm source
// (without a second pi); pi then loads it, and `pi remove` takes it out.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { test, type TestContext } from "node:test";

import { FakeLlm } from "./fake-llm.js";
import { DB, packageDir, piCli, piHome, PiRpc, run, runPi, tempDir, type PiHome } from "./pi.js";

/** The tarball `npm pack` makes of the package. */
async function packTarball(t: TestContext): Promise<string> {
  const packed = await tempDir(t, "plan-pi-packed-");
  const pack = await run("npm", ["pack", "--pack-destination", packed, "--json"], packageDir);
  assert.equal(pack.code, 0, pack.stderr);
  const [{ filename, files }] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
  assert.deepEqual(files.map((file) => file.path).sort(), ["README.md", "dist/extension.js", "package.json"]);
  return join(packed, filename);
}

/**
 * Installs `source` for the (throwaway) user, checks pi loads it in a new
 * project (/plan starts the sidecar), and removes it again. The user scope,
 * because pi 1.x loads a project's own packages only once the project is
 * trusted.
 */
async function installUseRemove(t: TestContext, home: PiHome, source: string, whileInstalled: () => Promise<void> = async () => {}): Promise<void> {
  const project = await tempDir(t, "plan-pi-project-");
  const installed = await runPi({ cwd: project, home }, ["install", source]);
  assert.equal(installed.code, 0, installed.stderr);
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  assert.ok(pi.notifications.some((line) => line.startsWith("Plan mode")), `pi loaded the installed package: ${pi.stderr}`);
  assert.ok(existsSync(join(project, DB)));
  await pi.stop();
  await whileInstalled();
  const removed = await runPi({ cwd: project, home }, ["remove", source]);
  assert.equal(removed.code, 0, removed.stderr);
  const settings = JSON.parse(await readFile(join(home.agentDir, "settings.json"), "utf8")) as { packages?: unknown[] };
  assert.deepEqual(settings.packages ?? [], []);
}

test("npm pack's tarball, unpacked, is a package pi installs, loads and removes; it needs nothing else", async (t) => {
  const tarball = await packTarball(t);
  const manifest = JSON.parse(await readFile(join(packageDir, "package.json"), "utf8")) as Record<string, unknown>;
  assert.equal(manifest.dependencies, undefined, "nothing to install with it");
  const unpacked = await tempDir(t, "plan-pi-unpacked-");
  const untar = await run("tar", ["-xzf", tarball, "-C", unpacked], unpacked);
  assert.equal(untar.code, 0, untar.stderr);
  const llm = await FakeLlm.start(t, []);
  const home = await piHome(t, llm.baseUrl, []);
  await installUseRemove(t, home, join(unpacked, "package"));
});

test("on pi 1.x the tarball installs as an npm source, without a second pi", async (t) => {
  const piManifest = JSON.parse(await readFile(join(dirname(piCli), "..", "package.json"), "utf8")) as { version: string };
  if (Number(piManifest.version.split(".")[0]) < 1) {
    // pi 0.73 takes the version after the name for a pin it compares with
    // the installed one, so it would reinstall a tarball at every start.
    t.skip(`pi ${piManifest.version} installs the package unpacked (previous test)`);
    return;
  }
  const tarball = await packTarball(t);
  const llm = await FakeLlm.start(t, []);
  const home = await piHome(t, llm.baseUrl, []);
  const modules = join(home.agentDir, "npm", "node_modules");
  await installUseRemove(t, home, `npm:@plan-checkpoint/pi@file:${tarball}`, async () => {
    assert.deepEqual((await readdir(modules)).filter((name) => !name.startsWith(".")), ["@plan-checkpoint"], "no second pi, nothing else");
    assert.deepEqual(await readdir(join(modules, "@plan-checkpoint")), ["pi"]);
  });
  assert.equal(existsSync(join(modules, "@plan-checkpoint", "pi")), false, "pi remove took it out");
});
