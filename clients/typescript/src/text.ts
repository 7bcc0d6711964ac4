// Showing agent-written text (plan titles, questions, plans, tool
// arguments, command output) to a person. The agent's text is untrusted: a
// terminal obeys control characters and reorders text around bidirectional
// controls, so a plan could hide a step or rewrite the screen. The set of
// such characters is the host's (plan-core's `is_terminal_control`, the set
// SubmitPlan refuses in a title); a test holds this copy to the host's
// answers. This module formats text for display and decides nothing else.

/**
 * Whether `character` (one code point) is one a terminal would act on
 * instead of showing: C0 controls (tab and line feed included), DEL, C1
 * controls, the bidirectional embeddings, overrides, isolates and marks, and
 * the line and paragraph separators U+2028 and U+2029.
 */
export function isTerminalControl(character: string): boolean {
  return TERMINAL_CONTROL.test(character);
}

const TERMINAL_CONTROL = /^[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]$/u;

// Every terminal control except tab and line feed, which a multi-line text
// (a plan, command output) keeps.
const SHOWN_ESCAPED = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/gu;

/**
 * `text` for a terminal, as the host's CLI shows a block of agent text: every
 * {@link isTerminalControl} character except tab and line feed written as
 * `\xNN` or `\uNNNN` (a carriage return too: it could hide a line by
 * writing over it). A backslash stays as it is.
 */
export function escapeForDisplay(text: string): string {
  return text.replace(SHOWN_ESCAPED, (character) => {
    const code = character.codePointAt(0) ?? 0;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
