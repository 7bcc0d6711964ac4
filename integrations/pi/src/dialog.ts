// The approval dialog in pi's UI: the plan's title and question, where its
// file is (and its text, readable from the dialog), the absolute deadline,
// a countdown to it in pi's status line renewed every second, and the
// choices: approve with a permission mode (ask first) or reject. The
// dialog closes when the host resolves the approval (its deadline
// included: the host expires it and says so); the package keeps no clock
// of its own that decides anything. The decision is the host's answer to
// plan/approve or plan/reject; the dialog only asks the person. The
// confirmation dialog asks about one call a permission mode confirms.

import type { ExtensionContext } from "@mariozechner/pi-coding-agent";
import type { PermissionMode, PlanApproval, PlanCheckpointClient, Session } from "@plan-checkpoint/client";

import { artifactPath, describeError, errorCode, type SessionState, type Sidecar } from "./sidecar.js";
import { escapeForDisplay } from "@plan-checkpoint/client";

import { formatDuration, formatInstant } from "./text.js";

/** How a dialog ended. */
export type Decision =
  | { kind: "approved"; approval: PlanApproval; session: Session; mode: PermissionMode }
  | { kind: "rejected"; approval: PlanApproval }
  | { kind: "expired"; approval: PlanApproval }
  | { kind: "dismissed"; approval: PlanApproval }
  | { kind: "unavailable"; approval: PlanApproval };

/** The dialog's choices, in order: `ask` is first, so it is the one selected. */
export const CHOICES = {
  ask: "Approve: ask (confirm each edit, write and bash)",
  acceptEdits: "Approve: accept-edits (edits and writes allowed, bash confirmed)",
  auto: "Approve: auto (edits, writes and bash allowed)",
  read: "Read the plan",
  reject: "Reject",
} as const;

const MODE_OF: Readonly<Record<string, PermissionMode>> = {
  [CHOICES.ask]: "ask",
  [CHOICES.acceptEdits]: "accept-edits",
  [CHOICES.auto]: "auto",
};

/**
 * Asks the person whether a call the permission mode confirms may run,
 * showing its command or path escaped.
 */
export function confirmCall(ctx: ExtensionContext, piToolName: string, input: Record<string, unknown>, mode: PermissionMode): Promise<boolean> {
  const shown =
    piToolName === "bash" && typeof input.command === "string"
      ? input.command
      : typeof input.path === "string"
        ? input.path
        : JSON.stringify(input);
  return ctx.ui.confirm(`Allow ${piToolName}? (permission mode ${mode})`, escapeForDisplay(shown));
}

/** One line about an approval, for /plan-list and /plan-decide. */
export function approvalLine(cwd: string, approval: PlanApproval): string {
  const when =
    approval.status === "pending"
      ? `expires ${formatInstant(approval.expiresAt)} (in ${formatDuration(approval.expiresAt - Date.now())})`
      : `${approval.decidedAt !== null ? formatInstant(approval.decidedAt) : ""}${approval.errorCode !== null ? ` ${approval.errorCode}` : ""}`;
  const mode = approval.permissionMode !== null ? ` ${approval.permissionMode}` : "";
  const execution = approval.executionState !== null ? ` execution ${approval.executionState}` : "";
  return `${approval.id} ${approval.status}${mode}${execution} "${escapeForDisplay(approval.title)}" ${when} ${artifactPath(cwd, approval) ?? ""}`.trimEnd();
}

/**
 * The dialog's text. `cardUrl` is the approval card's URL when the sidecar
 * serves cards (opt-in: `PLAN_CHECKPOINT_SERVE_ARGS="--web 127.0.0.1:0"`),
 * so the person can decide from a browser or a phone instead.
 */
export function dialogTitle(cwd: string, approval: PlanApproval, cardUrl: string | null = null): string {
  const artifact = approval.artifact;
  const lines = [
    `Plan approval: ${escapeForDisplay(approval.title)}`,
    "",
    escapeForDisplay(approval.question),
    "",
    `Plan file: ${artifactPath(cwd, approval) ?? "(none)"}${artifact !== null ? ` (${artifact.size} bytes, sha256 ${artifact.sha256.slice(0, 16)}…)` : ""}`,
    `Expires: ${formatInstant(approval.expiresAt)} (the time left counts down in the status line)`,
  ];
  if (cardUrl !== null) lines.push(`Or decide in a browser or on a phone: ${cardUrl}`);
  return lines.join("\n");
}

/** The status line key of the countdown. */
const COUNTDOWN = "plan-checkpoint-deadline";

/** The countdown to the host's deadline, as the status line shows it. */
function countdownText(approval: PlanApproval, now: number): string {
  return `plan approval: ${formatDuration(approval.expiresAt - now)} left (until ${formatInstant(approval.expiresAt)})`;
}

/** Shows the countdown now and renews it every second until the returned function stops it. */
function showCountdown(ctx: ExtensionContext, approval: PlanApproval): () => void {
  const show = (): void => ctx.ui.setStatus(COUNTDOWN, countdownText(approval, Date.now()));
  show();
  const ticker = setInterval(show, 1000);
  return () => {
    clearInterval(ticker);
    ctx.ui.setStatus(COUNTDOWN, undefined);
  };
}

/**
 * Shows the approval dialog until the person decides, closes it, or the
 * deadline passes, and carries out the decision through the host.
 */
export async function decideApproval(
  ctx: ExtensionContext,
  sidecar: Sidecar,
  client: PlanCheckpointClient,
  state: SessionState,
  approval: PlanApproval,
  signal: AbortSignal | undefined,
): Promise<Decision> {
  if (!ctx.hasUI) return settle(sidecar, client, approval);
  const closing = new AbortController();
  state.openDialogs.get(approval.id)?.abort();
  state.openDialogs.set(approval.id, closing);
  const onAbort = (): void => closing.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  const stopCountdown = showCountdown(ctx, approval);
  // Without --web the sidecar has no card, and the dialog shows no URL.
  const cardUrl = await client.planCardUrl({ approvalId: approval.id }).then(
    ({ url }) => url,
    () => null,
  );
  try {
    for (;;) {
      if (closing.signal.aborted) return await settle(sidecar, client, approval);
      const choice = await ctx.ui.select(dialogTitle(ctx.cwd, approval, cardUrl), Object.values(CHOICES), { signal: closing.signal });
      if (choice === undefined) return await settle(sidecar, client, approval);
      if (choice === CHOICES.read) {
        await showPlan(ctx, sidecar, client, approval, closing.signal);
        continue;
      }
      try {
        if (choice === CHOICES.reject) {
          const result = await sidecar.track(client.planReject({ approvalId: approval.id }));
          state.session = result.session;
          return { kind: "rejected", approval: result.approval };
        }
        const mode = MODE_OF[choice];
        if (mode === undefined) continue;
        const result = await sidecar.track(client.planApprove({ approvalId: approval.id, permissionMode: mode }));
        state.session = result.session;
        return { kind: "approved", approval: result.approval, session: result.session, mode };
      } catch (error) {
        if (errorCode(error) === "PLAN_APPROVAL_TIMEOUT" || errorCode(error) === "APPROVAL_NOT_PENDING") return await settle(sidecar, client, approval);
        ctx.ui.notify(`the decision failed: ${describeError(error)}`, "error");
        return await settle(sidecar, client, approval);
      }
    }
  } finally {
    stopCountdown();
    signal?.removeEventListener("abort", onAbort);
    if (state.openDialogs.get(approval.id) === closing) state.openDialogs.delete(approval.id);
  }
}

async function showPlan(
  ctx: ExtensionContext,
  sidecar: Sidecar,
  client: PlanCheckpointClient,
  approval: PlanApproval,
  signal: AbortSignal,
): Promise<void> {
  let text: string;
  try {
    const artifact = await sidecar.track(client.planReadArtifact({ approvalId: approval.id }));
    text = escapeForDisplay(artifact.markdown);
  } catch (error) {
    text = `The plan could not be read back: ${describeError(error)}`;
  }
  if (signal.aborted) return;
  await ctx.ui.select(`${escapeForDisplay(approval.title)} (${artifactPath(ctx.cwd, approval) ?? ""})\n\n${text}`, ["Back to the decision"], { signal });
}

/** What became of an approval the dialog did not decide, as the host records it. */
async function settle(sidecar: Sidecar, client: PlanCheckpointClient, approval: PlanApproval): Promise<Decision> {
  let current = approval;
  try {
    current = await sidecar.track(client.planGet({ approvalId: approval.id }));
  } catch {
    return { kind: "unavailable", approval };
  }
  switch (current.status) {
    case "pending":
      return { kind: "dismissed", approval: current };
    case "expired":
      return { kind: "expired", approval: current };
    case "rejected":
      return { kind: "rejected", approval: current };
    case "approved":
    case "interrupted":
      return { kind: "unavailable", approval: current };
  }
}
