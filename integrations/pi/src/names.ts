// How pi's tool names and inputs reach the sidecar. The sidecar decides
// every call by the name it receives; this module only translates pi's
// vocabulary into the host's, and decides nothing itself.

/** pi's built-in tools and the host tool each one is. */
const HOST_TOOL_NAMES: Readonly<Record<string, string>> = {
  read: "Read",
  grep: "Grep",
  find: "Glob",
  ls: "Glob",
  bash: "Bash",
  edit: "Edit",
  write: "Write",
};

/**
 * The name the sidecar knows a pi tool by. Tools pi does not ship (other
 * extensions' tools, `SubmitPlan`) pass through unchanged, so the sidecar
 * denies any it does not know in a Plan turn.
 */
export function hostToolName(piToolName: string): string {
  return Object.hasOwn(HOST_TOOL_NAMES, piToolName) ? (HOST_TOOL_NAMES[piToolName] as string) : piToolName;
}

/**
 * The input the sidecar sees for a pi call. pi's `bash` takes `timeout` in
 * seconds where the host's `Bash` takes `timeoutMs`; every other input is
 * passed as pi produced it.
 */
export function hostToolInput(piToolName: string, input: Record<string, unknown>): Record<string, unknown> {
  if (piToolName !== "bash") return input;
  const { timeout, ...rest } = input;
  return typeof timeout === "number" ? { ...rest, timeoutMs: Math.round(timeout * 1000) } : rest;
}
