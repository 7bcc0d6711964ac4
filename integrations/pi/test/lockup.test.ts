// End-to-end tests that no way a pi run ends leaves the host turn open: a
// prompt pi refuses before any model call (no API key), a prompt another
// extension takes over after the turn started. After each, the next prompt
// and /plan off work. Real pi, real
// sidecar, fake model, as in plan.test.ts.

import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";

import { FakeLlm } from "./fake-llm.js";
import { packageDir, piHome, PiRpc, tempDir } from "./pi.js";

test("a prompt pi refuses for want of an API key ends the host turn: the next prompt and /plan off are not SESSION_BUSY", async (t) => {
  const llm = await FakeLlm.start(t, []);
  const home = await piHome(t, llm.baseUrl, undefined, true);
  const project = await tempDir(t, "plan-pi-project-");
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  for (const prompt of ["plan something", "plan it again"]) {
    const from = pi.events.length;
    const id = `refused-${from}`;
    pi.send({ type: "prompt", id, message: prompt });
    const response = await pi.waitFor((event) => event.type === "response" && event.id === id, `the response to ${prompt}`, 30000, from);
    assert.equal(response.success, false, JSON.stringify(response));
    assert.match(String(response.error), /No API key found/, "pi refused the prompt itself, not the checkpoint");
  }
  assert.equal(llm.requests.length, 0, "the model was never asked");
  await pi.command("/plan off");
  const said = pi.notifications.join("\n");
  assert.doesNotMatch(said, /SESSION_BUSY/);
  assert.match(said, /Agent mode \(permission mode/, said);
});

test("a prompt another extension takes over after this package started its turn ends that turn: the next prompt and /plan off work", async (t) => {
  // A second extension, loaded after this package, handles one prompt
  // itself: pi never runs it, and no agent_end comes for the host turn.
  const other = await tempDir(t, "plan-pi-other-");
  await writeFile(join(other, "package.json"), JSON.stringify({ name: "swallow", version: "0.0.0", type: "module", pi: { extensions: ["./index.js"] } }));
  await writeFile(
    join(other, "index.js"),
    'export default function (pi) { pi.on("input", (event) => (event.text === "swallowed" ? { action: "handled" } : { action: "continue" })); }\n',
  );
  const llm = await FakeLlm.start(t, [{ text: "the next prompt ran" }]);
  const home = await piHome(t, llm.baseUrl, [packageDir, other]);
  const project = await tempDir(t, "plan-pi-project-");
  const pi = PiRpc.start(t, { cwd: project, home });
  await pi.command("/plan");
  await pi.command("swallowed");
  await pi.prompt("plan something");
  assert.equal(llm.requests.length, 1, `the next prompt reached the model; said: ${pi.notifications.join("\n")}`);
  await pi.command("/plan off");
  const said = pi.notifications.join("\n");
  assert.doesNotMatch(said, /SESSION_BUSY/);
  assert.match(said, /Agent mode \(permission mode/, said);
});
