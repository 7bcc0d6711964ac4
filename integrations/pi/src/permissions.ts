// The permission mode an approval grants, enforced in pi. The sidecar
// allows every call of an Agent turn and leaves confirmation to the
// frontend under the chosen mode (ADR 0053: `ask` confirms each edit,
// write and shell command; `accept-edits` confirms shell commands; `auto`
// confirms nothing). pi has no permission system, so this package asks.

import type { PermissionMode } from "@plan-checkpoint/client";

import { escapeForDisplay } from "./text.js";

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

/** What the confirmation dialog shows of a call: the command or the path, escaped. */
export function describeCall(piToolName: string, input: Record<string, unknown>): string {
  if (piToolName === "bash" && typeof input.command === "string") return escapeForDisplay(input.command);
  if (typeof input.path === "string") return escapeForDisplay(input.path);
  return escapeForDisplay(JSON.stringify(input));
}
