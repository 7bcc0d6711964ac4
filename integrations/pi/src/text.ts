// Showing agent-written text (plan titles, questions, plans, command
// output) to a person. The agent's text is untrusted: control and
// bidirectional characters are shown escaped so a plan cannot hide a step
// or rewrite the screen. Line breaks and tabs stay as they are.

// C0 controls except tab and line feed, DEL, C1 controls, and the Unicode
// bidirectional formatting characters.
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/** `text` with every unsafe character written as `\xNN` or `\uNNNN`; a CR before LF is dropped. */
export function escapeForDisplay(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(UNSAFE, (character) => {
    const code = character.codePointAt(0) ?? 0;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** "12m 5s", "1h 3m", "40s": a span of milliseconds for people, never negative. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = seconds % 60;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${rest}s`;
  return `${rest}s`;
}

/** An absolute time in the local zone with its offset, e.g. `2026-12-01 12:30:00 +01:00`. */
export function formatInstant(epochMs: number): string {
  const date = new Date(epochMs);
  const offsetMinutes = -date.getTimezoneOffset();
  const sign = offsetMinutes >= 0 ? "+" : "-";
  const pad = (value: number): string => String(Math.abs(value)).padStart(2, "0");
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  return `${day} ${time} ${sign}${pad(Math.trunc(offsetMinutes / 60))}:${pad(offsetMinutes % 60)}`;
}
