// The package's small pure parts: pi's tool names and inputs in the host's
// vocabulary, and how times are shown.

import assert from "node:assert/strict";
import { test } from "node:test";

import { dialogTitle } from "../src/dialog.js";
import { hostToolInput, hostToolName } from "../src/names.js";
import { formatDuration } from "../src/text.js";

test("pi's built-in tools map to the host's names; anything else passes through unchanged", () => {
  const expected: Record<string, string> = { read: "Read", grep: "Grep", find: "Glob", ls: "Glob", bash: "Bash", edit: "Edit", write: "Write" };
  for (const [pi, host] of Object.entries(expected)) assert.equal(hostToolName(pi), host);
  for (const name of ["SubmitPlan", "web_search", "toString", "constructor", "Read"]) assert.equal(hostToolName(name), name);
});

test("bash's timeout in seconds becomes the host's timeoutMs; other inputs are unchanged", () => {
  assert.deepEqual(hostToolInput("bash", { command: "ls", timeout: 2.5 }), { command: "ls", timeoutMs: 2500 });
  assert.deepEqual(hostToolInput("bash", { command: "ls" }), { command: "ls" });
  assert.deepEqual(hostToolInput("write", { path: "a", content: "b", timeout: 1 }), { path: "a", content: "b", timeout: 1 });
});

test("spans of time are shown for people, never negative", () => {
  assert.equal(formatDuration(-5), "0s");
  assert.equal(formatDuration(125_000), "2m 5s");
  assert.equal(formatDuration(3_780_000), "1h 3m");
});

test("the dialog names the approval card's URL only when the sidecar serves cards", () => {
  const approval = {
    id: "approval-1",
    sessionId: "s",
    turnId: "t",
    title: "Split \u202e the parser",
    question: "Go?",
    artifact: { path: ".pi/plan/a.md", sha256: "ab".repeat(32), size: 10 },
    status: "pending" as const,
    errorCode: null,
    createdAt: Date.now(),
    expiresAt: Date.now() + 60_000,
    decidedAt: null,
    permissionMode: null,
    executionId: null,
    executionState: null,
  };
  const plain = dialogTitle("/w", approval);
  assert.ok(plain.includes("Split \\u202e the parser"), plain);
  assert.ok(!plain.includes("browser"), plain);
  const withCard = dialogTitle("/w", approval, "http://127.0.0.1:8123/card/00");
  assert.ok(withCard.endsWith("Or decide in a browser or on a phone: http://127.0.0.1:8123/card/00"), withCard);
});
