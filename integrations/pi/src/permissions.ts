// Which allowed Agent-turn calls the package has a person confirm, while the
// host answers every Agent call `allow` (ADR 0053: `ask` confirms each edit,
// write and shell command; `accept-edits` confirms shell commands; `auto`
// confirms nothing). It turns a host `allow` into a `confirm` decision and
// nothing else; the dialog and what follows are the same as for a `confirm`
// the host sends. It goes away when the host decides `confirm` itself.

import type { PermissionMode, Session } from "@plan-checkpoint/client";

import type { CallDecision } from "./sidecar.js";

/** Whether a pi tool call needs a person's confirmation under `mode`. */
export function confirmationNeeded(piToolName: string, mode: PermissionMode): boolean {
  const edits = piToolName === "edit" || piToolName === "write";
  const shell = piToolName === "bash";
  switch (mode) {
    case "ask":
      return edits || shell;
    case "accept-edits":
      return shell;
    case "auto":
      return false;
  }
}

/** The host's decision, with `allow` in an Agent session turned into `confirm` where the permission mode asks. */
export function withPackageConfirmation(decision: CallDecision, piToolName: string, session: Session | undefined): CallDecision {
  if (decision.kind !== "allow" || session === undefined || session.mode !== "agent") return decision;
  const mode = session.permissionMode;
  return confirmationNeeded(piToolName, mode) ? { kind: "confirm", permissionMode: mode } : decision;
}
