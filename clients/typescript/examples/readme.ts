import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { PlanCheckpointClient, PlanCheckpointError, SidecarNotFoundError } from "@plan-checkpoint/client";

// A new directory for the database and the workspace (the plan file goes
// to its .pi/plan/), removed at the end: the example runs again as pasted.
const dir = await mkdtemp(join(tmpdir(), "plan-checkpoint-example-"));
let client: PlanCheckpointClient;
try {
  // The plan-checkpoint npm package's binary, else `plan-checkpoint` on PATH.
  client = await PlanCheckpointClient.start({ db: join(dir, "plan.db") });
} catch (error) {
  await rm(dir, { recursive: true, force: true });
  if (!(error instanceof SidecarNotFoundError)) throw error;
  console.error(error.message); // what to install: npm install plan-checkpoint, ...
  process.exit(1);
}
try {
  client.on("plan/approvalRequested", ({ approval }) => console.log("review:", approval.title));
  client.on("command/output", ({ callId, stream, chunk }) => process.stdout.write(`[${callId} ${stream}] ${chunk}`));

  await client.sessionCreate({ sessionId: "s-1", workspaceRoot: dir, mode: "plan" });
  const { turnId } = await client.turnStart({ sessionId: "s-1", prompt: "Plan the rename", origin: "interactive" });
  const { results } = await client.turnToolCalls({
    sessionId: "s-1",
    turnId,
    calls: [{ callId: "c-1", name: "SubmitPlan", input: { title: "Rename", markdown: "# Rename foo\n", question: "Proceed?" } }],
  });
  const approval = results[0]?.approval;
  if (approval) {
    const { markdown } = await client.planReadArtifact({ approvalId: approval.id });
    console.log(markdown);
    await client.planApprove({ approvalId: approval.id, permissionMode: "accept-edits" });
  }
} catch (error) {
  if (!(error instanceof PlanCheckpointError)) throw error;
  console.error(error.code, error.message); // e.g. SESSION_BUSY
  process.exitCode = 1;
} finally {
  await client.close();
  await rm(dir, { recursive: true, force: true });
}
