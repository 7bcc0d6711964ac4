// The hosts `plan-checkpoint claude-code` hooks start in a run: each writes
// its pid file in the per-user directory under the run's temporary
// directory, and the run's directory ends them before it goes.

import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";

/** Ends the hosts whose pid files are under `tmp` (a run's temporary directory). */
export function endHosts(tmp: string): void {
  for (const directory of existsSync(tmp) ? readdirSync(tmp) : []) {
    if (!directory.startsWith("plan-checkpoint-")) continue;
    for (const file of readdirSync(join(tmp, directory))) {
      if (!file.endsWith(".pid")) continue;
      try {
        process.kill(Number(readFileSync(join(tmp, directory, file), "utf8").trim()), "SIGKILL");
      } catch {
        // Gone already.
      }
    }
  }
}

/** A directory for one run; when the test ends, the hosts its hooks started end first, then it goes. */
export function caseDir(t: TestContext, prefix: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  t.after(() => {
    endHosts(join(dir, "tmp"));
    // A process of the run that was killed may still be going away.
    rmSync(dir, { recursive: true, force: true, maxRetries: 20 });
  });
  return dir;
}
