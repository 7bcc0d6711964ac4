// The card's helpers without a browser (escaping, the countdown), and the
// check that the server embeds this very build of the element.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";

import { packageDir } from "./helpers.js";

interface CardModule {
  escapeLine(text: string): string;
  escapeBlock(text: string): string;
  formatRemaining(ms: number): string;
}

const built = join(packageDir, "dist/card/card/plan-approval-card.js");
// Built by `tsc -p tsconfig.card.json` (with DOM types), so imported by path.
const card = (await import(built)) as CardModule;

test("control and bidirectional characters are shown escaped, as everywhere else", () => {
  assert.equal(card.escapeLine("a\u001b[31mb"), "a\\x1b[31mb");
  assert.equal(card.escapeLine("\u202eevil\u2066x\u2069\u200f\u061c"), "\\u202eevil\\u2066x\\u2069\\u200f\\u061c");
  assert.equal(card.escapeLine("bell\u0007 del\u007f c1\u009b sep\u2028"), "bell\\x07 del\\x7f c1\\x9b sep\\u2028");
  assert.equal(card.escapeLine("tab\tnew\nline"), "tab\\x09new\\x0aline");
  assert.equal(card.escapeBlock("tab\tnew\nline\r\u202e"), "tab\tnew\nline\\x0d\\u202e");
  // Text that only looks like markup stays text (it reaches the DOM as textContent).
  assert.equal(card.escapeLine("<b>é中</b>"), "<b>é中</b>");
});

test("a CRLF line end is a line break on the card; a lone carriage return stays escaped", () => {
  assert.equal(card.escapeBlock("# Plan\r\n\r\n1. Split\r\n2. Test"), "# Plan\n\n1. Split\n2. Test");
  assert.equal(card.escapeBlock("over\rwrite\r\r\n"), "over\\x0dwrite\\x0d\n");
});

test("the countdown never goes below zero", () => {
  assert.equal(card.formatRemaining(30 * 60 * 1000), "30m 0s");
  assert.equal(card.formatRemaining(61_500), "1m 1s");
  assert.equal(card.formatRemaining(2 * 3600 * 1000 + 65_000), "2h 1m");
  assert.equal(card.formatRemaining(-5), "0s");
});

test("the host's web server embeds this build of the card", async () => {
  const asset = await readFile(join(packageDir, "../../crates/server/assets/plan-approval-card.js"), "utf8");
  assert.equal(
    asset,
    await readFile(built, "utf8"),
    "crates/server/assets/plan-approval-card.js is stale: run `npm run card:asset` in clients/typescript",
  );
});
