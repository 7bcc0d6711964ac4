// Claude Code's terminal UI, under a pseudo-terminal (util-linux `script`),
// with the checkpoint installed: the model submits a plan with
// ExitPlanMode; the person at Claude Code's terminal reads on its screen
// that the plan waits for them (its title, its deadline and the command
// that decides it, in the status line `install` set up); while they type at
// Claude Code what would answer its own plan dialog, nothing is decided
// there; the plan stays pending until it is decided on the host (here:
// rejected on the card, whose URL the notifier brought), and the model is
// told the person's answer. Offline, against the fake Messages API.

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createReadStream, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { claudeBin, offlineEnv } from "./claude.js";
import { decideOnCard } from "./card.js";
import { caseDir, endHosts } from "./host-processes.js";
import { FakeAnthropic, call, lastToolResult, say, type MessagesRequest } from "./fake-anthropic.js";

const binary = process.env["PLAN_CHECKPOINT_BIN"];

/** Single quotes for a POSIX shell. */
function quote(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}

/** The plan file Claude Code's plan-mode instructions name. */
function planFileFrom(request: MessagesRequest): string {
  const match = /create your plan at (\S+\.md) using the Write tool/.exec(JSON.stringify(request.messages));
  if (match?.[1] === undefined) throw new Error("the plan-mode instructions name no plan file");
  return match[1];
}

const PLAN = "# Rename the module\n\n1. Rename it.\n";

/** What the notifier reads (`notifier.pending_plan.json`), as far as this test needs it. */
interface Notice {
  approvalId: string;
  cardUrl: string;
  expiresAt: number;
  artifact: { sha256: string };
}

test("in the terminal UI the screen says a plan waits (title, deadline, the command), it is decided on the card while Claude Code waits, and keys typed at Claude Code decide nothing", { skip: binary === undefined ? "PLAN_CHECKPOINT_BIN is not set" : false }, async (t) => {
  const bin = binary as string;
  const root = caseDir(t, "plan-checkpoint-tui-");
  const home = join(root, "home");
  const configDir = join(home, ".claude");
  const tmp = join(root, "tmp");
  const project = join(root, "project");
  for (const dir of [configDir, tmp, project]) mkdirSync(dir, { recursive: true });
  execFileSync(bin, ["claude-code", "install", "--project", project]);
  // A person who has used Claude Code before: onboarding done, the project
  // trusted, the key accepted (so no first-run screen takes the keys).
  const key = "sk-ant-offline-test-key";
  writeFileSync(
    join(configDir, ".claude.json"),
    JSON.stringify({
      hasCompletedOnboarding: true,
      theme: "dark",
      customApiKeyResponses: { approved: [key.slice(-20)], rejected: [] },
      projects: { [project]: { hasTrustDialogAccepted: true, hasCompletedProjectOnboarding: true } },
    }),
  );
  // The model's third turn carries the answer to ExitPlanMode.
  let heard: (text: string) => void = () => undefined;
  const answered = new Promise<string>((resolve) => (heard = resolve));
  const fake = await FakeAnthropic.start(t, [
    (request) => [call("Write", { file_path: planFileFrom(request), content: PLAN })],
    () => [call("ExitPlanMode", {})],
    (request) => {
      heard(lastToolResult(request).text);
      return [say("Understood, staying in plan mode.")];
    },
  ]);
  // The host the hooks start tells this FIFO when the plan is pending (its
  // notifier), so the test waits on that event.
  const notices = join(root, "notices");
  execFileSync("mkfifo", [notices]);
  const env = {
    ...offlineEnv(fake, home, configDir, tmp),
    TERM: "xterm-256color",
    PLAN_CHECKPOINT_NOTIFY: `cat > ${quote(notices)}`,
  };
  // Claude Code's pid (the pty's session leader, so its group's id too).
  const pidFile = join(root, "claude.pid");
  const command = `stty cols 120 rows 40; echo $$ > ${quote(pidFile)}; exec ${[claudeBin, "--permission-mode", "plan", "--model", "claude-sonnet-4-5", "Plan the rename."].map(quote).join(" ")}`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], { cwd: project, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  const chunks: Buffer[] = [];
  child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
  t.after(() => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // Gone already.
    }
  });
  const screen = (): string => Buffer.concat(chunks).toString("utf8");
  // The screen as a person reads it: the terminal's control sequences out.
  const text = (): string =>
    screen()
      .replace(/\u001b\][^\u0007]*\u0007/g, "")
      .replace(/\u001b\[[0-9;?]*[ -\/]*[@-~]/g, "")
      .replace(/\u001b[()][0-9A-B]/g, "");
  /** Resolves once the screen shows what `pattern` matches (each new output is looked at; a guard turns a hang into a failure). */
  const shown = (pattern: RegExp): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const guard = setTimeout(() => {
        child.stdout.off("data", look);
        reject(new Error(`the screen never showed ${pattern}:\n${text().slice(-3000)}`));
      }, Number(process.env["CLAUDE_TEST_GUARD_MS"] ?? 60_000));
      const look = (): void => {
        const found = pattern.exec(text());
        if (found !== null) {
          clearTimeout(guard);
          child.stdout.off("data", look);
          resolve(found[0]);
        }
      };
      child.stdout.on("data", look);
      child.once("exit", () => reject(new Error(`Claude Code ended before the screen showed ${pattern}:\n${text().slice(-3000)}`)));
      look();
    });
  const ended = new Promise<never>((_, reject) =>
    child.on("exit", () => reject(new Error(`Claude Code ended:\n${screen().slice(-2000)}`))),
  );
  const host = (args: string[]): string =>
    execFileSync(bin, ["claude-code", ...args, "--project", project], { env, stdio: ["ignore", "pipe", "ignore"] }).toString();

  // The plan becomes pending on the host while ExitPlanMode's hook holds the call.
  const notice = await Promise.race([
    new Promise<Notice>((resolve) => {
      let text = "";
      createReadStream(notices)
        .on("data", (chunk) => (text += chunk.toString()))
        .on("end", () => resolve(JSON.parse(text) as Notice));
    }),
    ended,
  ]);
  // The person at Claude Code's terminal sees that the plan waits for them,
  // its title and deadline, and the command that decides it.
  const deadline = new Date(notice.expiresAt);
  const clock = [deadline.getHours(), deadline.getMinutes(), deadline.getSeconds()].map((part) => String(part).padStart(2, "0")).join(":");
  await Promise.race([shown(new RegExp(`the plan "Rename the module" waits for your decision until ${clock}`)), ended]);
  await Promise.race([shown(new RegExp(`claude-code approve ${notice.approvalId.slice(0, 21)} --mode ask\\|accept-edits\\|auto`)), ended]);
  // What would approve Claude Code's own plan dialog, were it shown; then
  // one more key, whose echo shows that the terminal read them all.
  for (const keys of ["1", "\r", "y", "\r", "\x1b[B", "\r"]) child.stdin.write(keys);
  await Promise.race([new Promise((resolve) => child.stdout.once("data", resolve)), ended]);
  const pending = JSON.parse(host(["pending", "--json"])) as { approvalId: string }[];
  assert.deepEqual(
    pending.map((approval) => approval.approvalId),
    [notice.approvalId],
    "the plan is still pending: Claude Code's dialog decided nothing",
  );
  // The person rejects it on the card (its URL reached them by the notifier).
  assert.match(notice.cardUrl, /^http:\/\/127\.0\.0\.1:\d+\/card\/[0-9a-f]+$/);
  assert.equal(await decideOnCard(notice.cardUrl, { sha256: notice.artifact.sha256, decision: "reject" }), 200);
  // The model hears the person's answer from the host.
  const denial = await Promise.race([answered, ended]);
  assert.match(denial, /The person rejected this plan/);
  // Claude Code (in the pty's own session) and its host end here, before
  // the run's directory goes.
  process.kill(-Number(readFileSync(pidFile, "utf8").trim()), "SIGKILL");
  endHosts(tmp);
  assert.deepEqual(fake.stepErrors, []);
  // The terminal UI also looks for updates and plugins: those requests
  // reach only the fake, which refuses them (nothing leaves the machine).
  for (const stray of fake.stray) {
    assert.equal(stray.method, "CONNECT", JSON.stringify(fake.stray));
    assert.match(stray.url, /^(downloads\.claude\.ai|github\.com|api\.anthropic\.com|statsig\.anthropic\.com|storage\.googleapis\.com):443$/, JSON.stringify(fake.stray));
  }
});


