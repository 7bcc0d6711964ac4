// The display escaping of agent text against the host: a plan holding every
// code point of the ranges where terminal controls live is submitted to the
// real sidecar, and `plan-checkpoint approvals cat` (the host's own
// escaping, over plan-core's character set) must print exactly what
// `escapeForDisplay` makes of it. `isTerminalControl` is held to the host
// the same way, through the titles SubmitPlan refuses.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";

import { escapeForDisplay, isTerminalControl } from "../src/index.js";
import { sidecarBinary, startClient } from "./helpers.js";

/** Every code point of the ranges that hold a terminal control, and their neighbours. */
function probeCodePoints(): string[] {
  const ranges: [number, number][] = [
    [0x00, 0x2ff],
    [0x600, 0x6ff],
    [0x2000, 0x20ff],
    [0xfeff, 0xfeff],
  ];
  return ranges.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, index) => String.fromCodePoint(from + index)));
}

/**
 * What `approvals cat` shows on a terminal (into a pipe it writes the exact
 * bytes): it runs under util-linux `script`'s pseudo-terminal, whose line
 * discipline turns each line feed into CR LF; the CLI escapes every carriage
 * return of the text, so each CR LF is a line feed again.
 */
function catOnTerminal(db: string, approvalId: string): Promise<string> {
  const quote = (word: string): string => `'${word.replace(/'/g, "'\\''")}'`;
  const command = [sidecarBinary, "--db", db, "approvals", "cat", approvalId].map(quote).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qec", command, "/dev/null"], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(stdout.replace(/\r\n/g, "\n")) : reject(new Error(`approvals cat exited ${code}: ${stderr}`))));
  });
}

test("escapeForDisplay escapes what the host's CLI escapes, byte for byte", async (t) => {
  const { client, dir } = await startClient(t);
  await client.sessionCreate({ sessionId: "s-text", workspaceRoot: dir, mode: "plan" });
  const turn = await client.turnStart({ sessionId: "s-text", prompt: "plan", origin: "interactive" });
  const markdown = `# Every probe\n${probeCodePoints().join("")}\r\nend \\x1b stays`;
  const { results } = await client.turnToolCalls({
    sessionId: "s-text",
    turnId: turn.turnId,
    calls: [{ callId: "submit", name: "SubmitPlan", input: { title: "Probes", question: "Shown?", markdown } }],
  });
  const approval = results[0]?.approval;
  assert.ok(approval, JSON.stringify(results));
  assert.equal(await catOnTerminal(join(dir, "plan.db"), approval.id), escapeForDisplay(markdown));
  // What it escapes is visible: U+2028/U+2029, a bidi override, ESC, CR.
  assert.equal(escapeForDisplay("a\u2028b\u2029c\u202ed\x1be\r\n\tf"), "a\\u2028b\\u2029c\\u202ed\\x1be\\x0d\n\tf");
});

test("isTerminalControl is exactly the set of characters SubmitPlan refuses in a title", async (t) => {
  const { client, dir } = await startClient(t);
  await client.sessionCreate({ sessionId: "s-title", workspaceRoot: dir, mode: "plan" });
  const turn = await client.turnStart({ sessionId: "s-title", prompt: "plan", origin: "interactive" });
  // A refused title leaves the turn as it was, so every control can be
  // probed in the one turn; the first accepted title would end the probing,
  // so only the controls and one plain character are sent.
  const controls = probeCodePoints().filter(isTerminalControl);
  assert.ok(controls.includes("\u2028") && controls.includes("\u2029") && controls.includes("\u202e"));
  for (const character of controls) {
    const { results } = await client.turnToolCalls({
      sessionId: "s-title",
      turnId: turn.turnId,
      calls: [{ callId: `probe-${character.codePointAt(0)}`, name: "SubmitPlan", input: { title: `a${character}b`, question: "Go?", markdown: "# P\n" } }],
    });
    assert.equal(results[0]?.error?.code, "INVALID_PLAN_INPUT", `U+${character.codePointAt(0)?.toString(16)} is refused by the host`);
  }
  // Every other probed character is accepted, in titles within the length
  // bound (200 characters): each accepted title is rejected to free the
  // session for the next turn.
  const plain = probeCodePoints().filter((character) => !isTerminalControl(character));
  let turnId = turn.turnId;
  for (let start = 0; start < plain.length; start += 198) {
    const chunk = plain.slice(start, start + 198).join("");
    const { results } = await client.turnToolCalls({
      sessionId: "s-title",
      turnId,
      calls: [{ callId: `plain-${start}`, name: "SubmitPlan", input: { title: `a${chunk}b`, question: "Go?", markdown: "# P\n" } }],
    });
    assert.equal(results[0]?.decision, "allow", `every other probed character is accepted: ${JSON.stringify(results[0]?.error)}`);
    const approval = results[0]?.approval;
    assert.ok(approval);
    await client.planReject({ approvalId: approval.id });
    turnId = (await client.turnStart({ sessionId: "s-title", prompt: "plan", origin: "interactive" })).turnId;
  }
});
