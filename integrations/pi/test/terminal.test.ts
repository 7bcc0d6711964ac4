// What reaches a person's terminal: pi runs interactively under a
// pseudo-terminal (util-linux `script`), the fake model calls SubmitPlan
// with hostile arguments, and the bytes pi writes are checked: the
// package's renderers show the arguments escaped (the client's
// escapeForDisplay), so no raw bidirectional override, line separator or
// terminal escape sequence of the agent's reaches the terminal.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";

import { piCli, piEnv, setUp } from "./pi.js";

/** Single quotes for a POSIX shell. */
function quote(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}

test("hostile SubmitPlan arguments never reach the terminal raw", async (t) => {
  const hostileTitle = "Title \u202eevil\u2028 \x1b]0;pwned-title\x07 end";
  const hostileQuestion = "Go \x1b]52;c;cHduZWQ=\x07 \u2029 \u2066ahead?";
  const { home, project } = await setUp(t, [
    { calls: [{ name: "SubmitPlan", arguments: { title: hostileTitle, question: hostileQuestion, markdown: "# Plan\n\x1b[31mred\u202e\n" } }] },
    { text: "All done here." },
  ]);
  const env = { ...piEnv({ cwd: project, home }), TERM: "xterm-256color" };
  // A fixed size, so pi lays out as on a real terminal, then pi itself.
  const command = `stty cols 120 rows 40; exec ${[process.execPath, piCli, "--no-session", "--plan=true"].map(quote).join(" ")}`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], { cwd: project, env, stdio: ["pipe", "pipe", "pipe"] });
  const guard = setTimeout(() => child.kill("SIGKILL"), 60000);
  t.after(() => {
    clearTimeout(guard);
    child.kill("SIGKILL");
  });
  const chunks: Buffer[] = [];
  const seen = (text: string): boolean => Buffer.concat(chunks).toString("utf8").includes(text);
  const waitFor = (text: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (seen(text)) {
          child.stdout.off("data", check);
          resolve();
        }
      };
      child.stdout.on("data", check);
      child.on("exit", () => (seen(text) ? resolve() : reject(new Error(`pi exited before showing ${JSON.stringify(text)}:\n${Buffer.concat(chunks).toString("utf8").slice(-2000)}`))));
      check();
    });
  child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));

  await waitFor("plan mode");
  child.stdin.write("plan it\r");
  await waitFor("All done here.");
  const screen = Buffer.concat(chunks).toString("utf8");
  for (const raw of ["\u202e", "\u2028", "\u2029", "\u2066", "\x1b]0;pwned", "\x1b]52;"]) {
    assert.equal(screen.includes(raw), false, `raw ${JSON.stringify(raw)} reached the terminal`);
  }
  // The call was shown, escaped (the host refused it for those characters).
  assert.ok(screen.includes("\\u202eevil"), "the title was shown escaped");
  assert.ok(screen.includes("INVALID_PLAN_INPUT"), "the host's refusal was shown");
});
