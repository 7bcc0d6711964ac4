// The cost of the checkpoint on a plan-mode Bash call, measured on the real
// Claude Code offline, in one run: the same command (`true`) ten times
// through the hooks (plan mode, `plan-checkpoint claude-code install`: the
// PreToolUse hook, the `bash` client and the host's read-only sandbox; plan
// mode runs the rewritten command unasked, by the permission rule install
// writes), and ten times through Claude Code's own Bash with hooks off
// (plan mode too, the command allowed in the settings); with
// `PLAN_CHECKPOINT_BASELINE_BIN`, also ten times through another build's
// hooks (an earlier commit's), for a ratio against it in the same run.
// A call's time is from the moment the fake Messages API hands Claude Code
// the `tool_use` to the moment the request carrying its `tool_result`
// arrives, so every side includes the same model round trip. The target:
// hooks <= 2 x own + 20 ms (medians). Not part of `npm test`; run with
// `PLAN_CHECKPOINT_BIN=... node --test dist/test/bench.js`.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { test, type TestContext } from "node:test";
import { ClaudeRun } from "./claude.js";
import { caseDir, endHosts } from "./host-processes.js";
import { FakeAnthropic, call, lastToolResult, say, type Step } from "./fake-anthropic.js";

const binary = process.env["PLAN_CHECKPOINT_BIN"];
const baseline = process.env["PLAN_CHECKPOINT_BASELINE_BIN"];
const rounds = Number(process.env["CLAUDE_BENCH_ROUNDS"] ?? 10);

/** Steps that ask for `true` `rounds` times, timing each call. */
function timedCalls(times: number[]): Step[] {
  let sentAt = 0;
  const steps: Step[] = [];
  for (let round = 0; round <= rounds; round += 1) {
    steps.push((request) => {
      if (round > 0) {
        times.push(performance.now() - sentAt);
        assert.equal(lastToolResult(request).isError ?? false, false, JSON.stringify(lastToolResult(request)));
      }
      if (round === rounds) {
        return [say("done")];
      }
      sentAt = performance.now();
      return [call("Bash", { command: "true", description: "nothing" })];
    });
  }
  return steps;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}


async function measure(t: TestContext, hooked: string | undefined): Promise<number[]> {
  const times: number[] = [];
  const root = caseDir(t, "plan-checkpoint-bench-");
  const fake = await FakeAnthropic.start(t, timedCalls(times));
  let localSettings: Record<string, unknown> = { permissions: { allow: ["Bash(true)"] }, useAutoModeDuringPlan: false };
  if (hooked !== undefined) {
    // What `install` writes for the run's project, read back and given as its local settings.
    const project = join(root, "project");
    mkdirSync(project, { recursive: true });
    execFileSync(hooked, ["claude-code", "install", "--project", project]);
    localSettings = JSON.parse(readFileSync(join(project, ".claude", "settings.local.json"), "utf8")) as Record<string, unknown>;
  }
  const run = ClaudeRun.start(t, root, {
    fake,
    prompt: "Run true a few times.",
    permissionMode: "plan",
    localSettings,
  });
  await run.finish();
  endHosts(join(root, "tmp"));
  fake.assertClean();
  assert.equal(times.length, rounds);
  return times;
}

test("a plan-mode Bash through the hooks and the host, against Claude Code's own Bash (one run)", { skip: binary === undefined ? "PLAN_CHECKPOINT_BIN is not set" : false }, async (t) => {
  // Interleaved halves, so a load change hits every side alike.
  const own: number[] = [];
  const hooks: number[] = [];
  const before: number[] = [];
  for (let half = 0; half < 2; half += 1) {
    own.push(...(await measure(t, undefined)));
    hooks.push(...(await measure(t, binary)));
    if (baseline !== undefined) before.push(...(await measure(t, baseline)));
  }
  const ownMedian = median(own);
  const hooksMedian = median(hooks);
  const limit = 2 * ownMedian + 20;
  console.log(
    `Claude Code's own Bash: median ${ownMedian.toFixed(1)} ms (${own.length} calls); ` +
      `through the hooks and the host: median ${hooksMedian.toFixed(1)} ms (${hooks.length} calls); ` +
      `ratio ${(hooksMedian / ownMedian).toFixed(2)}x; target <= 2 x own + 20 ms = ${limit.toFixed(1)} ms: ` +
      (hooksMedian <= limit ? "met" : "not met"),
  );
  if (baseline !== undefined) {
    const beforeMedian = median(before);
    console.log(
      `the baseline build's hooks: median ${beforeMedian.toFixed(1)} ms (${before.length} calls), ` +
        `${(beforeMedian / ownMedian).toFixed(2)}x own; this build against it: ${(hooksMedian / beforeMedian).toFixed(2)}x`,
    );
  }
});

