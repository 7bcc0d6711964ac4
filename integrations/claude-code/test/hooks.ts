// Tiny scripted hooks for the contract tests: one Node script, written to
// the case's temporary directory, that Claude Code runs for every hook the
// case registers. Each registration names a label; the script appends the
// label and the JSON Claude Code gave it on stdin to a log, and prints the
// case's scripted answer for that label (where an answer holds the string
// "$TOOL_INPUT", the hook's own `tool_input` is put in its place, so a hook
// can echo the input it was given). A label can be gated: its hook then
// holds the call until the test opens the gate (a named pipe), the way a
// hook that waits for a person's decision does. It never runs anything else.

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";

const script = `"use strict";
const fs = require("node:fs");
const [logFile, answersFile, label, gate] = process.argv.slice(2);
const raw = fs.readFileSync(0, "utf8");
const input = JSON.parse(raw);
fs.appendFileSync(logFile, JSON.stringify({ label, input }) + "\\n");
if (gate !== undefined) {
  fs.readFileSync(gate);
}
const answers = JSON.parse(fs.readFileSync(answersFile, "utf8"));
const echo = (value) =>
  value === "$TOOL_INPUT"
    ? input.tool_input
    : Array.isArray(value)
      ? value.map(echo)
      : value !== null && typeof value === "object"
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, echo(v)]))
        : value;
const answer = answers[label];
if (answer !== undefined) {
  process.stdout.write(JSON.stringify(echo(answer)));
}
`;

/** One hook call as logged: the registration's label and the stdin JSON. */
export interface HookCall {
  label: string;
  input: Record<string, unknown>;
}

/** The scripted hooks of one case. */
export class ScriptedHooks {
  readonly #dir: string;
  readonly #answers: Record<string, unknown>;
  readonly #gates = new Set<string>();

  /** Writes the hook script into `dir`; `answers` maps a label to the JSON it prints (none: prints nothing). */
  constructor(dir: string, answers: Record<string, unknown>) {
    this.#dir = dir;
    this.#answers = answers;
    writeFileSync(join(dir, "hook.cjs"), script);
    writeFileSync(join(dir, "hook-answers.json"), JSON.stringify(answers));
  }

  /** The shell command Claude Code runs for the registration named `label`. */
  command(label: string): string {
    const quote = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`;
    const gate = this.#gates.has(label) ? [this.gatePath(label)] : [];
    return [process.execPath, join(this.#dir, "hook.cjs"), join(this.#dir, "hook-log.jsonl"), join(this.#dir, "hook-answers.json"), label, ...gate]
      .map(quote)
      .join(" ");
  }

  /** Makes the hook of `label` hold the call until `open(label)`. */
  gate(label: string): void {
    execFileSync("mkfifo", ["-m", "0600", this.gatePath(label)]);
    this.#gates.add(label);
  }

  /** Lets the held hook of `label` go on (resolves once it has read the gate). */
  async open(label: string): Promise<void> {
    await writeFile(this.gatePath(label), "go\n");
  }

  gatePath(label: string): string {
    return join(this.#dir, `gate-${label}`);
  }

  /** A `hooks` settings entry: `{ matcher, hooks: [command] }`. */
  entry(matcher: string, label: string): Record<string, unknown> {
    return { matcher, hooks: [{ type: "command", command: this.command(label), timeout: 30 }] };
  }

  /** Every hook call so far, in order. */
  calls(): HookCall[] {
    const log = join(this.#dir, "hook-log.jsonl");
    if (!existsSync(log)) {
      return [];
    }
    return readFileSync(log, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as HookCall);
  }

  /** The calls of one registration. */
  callsOf(label: string): HookCall[] {
    return this.calls().filter((call) => call.label === label);
  }

  /** The scripted answers (for messages in assertions). */
  get answers(): Record<string, unknown> {
    return this.#answers;
  }
}
