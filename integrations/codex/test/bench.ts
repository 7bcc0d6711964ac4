// The plan-mode shell `true` through the Codex hooks against Codex's own
// sandboxed shell, measured in one run (docs/PERFORMANCE.md): the same
// scripted turn of N `true` calls, once in a project set up with
// `plan-checkpoint codex install` (the hook registers the call, the host
// runs it read-only, the client streams it back) and once in a project
// without it (Codex's own read-only sandbox). Each sample is the time the
// model waits for one call: from the fake's answer that makes the call to
// the request that carries its output. Run by hand:
//
//   PLAN_CHECKPOINT_BIN=$PWD/../../target/release/plan-checkpoint npm run bench

import { test } from "node:test";

import { AppServer, codexCase } from "./codex.js";
import { say, shell, type Step } from "./fake-responses.js";

const calls = Number(process.env["BENCH_CALLS"] ?? 11);

/** The script, and the time each request arrived. */
function timed(): { steps: Step[]; arrivals: number[] } {
  const arrivals: number[] = [];
  const steps: Step[] = [];
  for (let index = 0; index < calls; index += 1) {
    steps.push(() => {
      arrivals.push(performance.now());
      return [shell("true")];
    });
  }
  steps.push(() => {
    arrivals.push(performance.now());
    return [say("done")];
  });
  return { steps, arrivals };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

test("a plan-mode `true`: through the hooks and the host, against Codex's own sandbox", async (t) => {
  // The two sides interleaved in rounds, so that the machine's load moves
  // both alike.
  const rounds = Number(process.env["BENCH_ROUNDS"] ?? 4);
  const results: Record<string, number[]> = { own: [], hooked: [] };
  for (let round = 0; round < rounds; round += 1) {
    for (const [name, install] of [
      ["own", false],
      ["hooked", true],
    ] as const) {
      const { steps, arrivals } = timed();
      const c = await codexCase(t, steps, { install });
      const codex = await AppServer.start(t, c);
      await codex.turn("run true many times", "plan");
      codex.close();
      // The first call of a run also starts the project's host (and
      // Codex's own first spawn): it is left out.
      const waits = arrivals.slice(1).map((at, index) => at - (arrivals[index] ?? at));
      results[name]?.push(...waits.slice(1));
    }
  }
  const own = median(results["own"] ?? []);
  const hooked = median(results["hooked"] ?? []);
  console.log(`Codex's own sandbox: median ${own.toFixed(1)} ms over ${results["own"]?.length} calls`);
  console.log(`through the hooks and the host: median ${hooked.toFixed(1)} ms over ${results["hooked"]?.length} calls`);
  console.log(`ratio ${(hooked / own).toFixed(2)}x; budget 1.3x + 20 ms = ${(own * 1.3 + 20).toFixed(1)} ms: ${hooked <= own * 1.3 + 20 ? "met" : "NOT met"}`);
});
