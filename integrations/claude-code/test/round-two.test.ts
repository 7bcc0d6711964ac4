// End to end, round two (`claude-code.md`, "Round two"): what happens after
// the approval, how the hooks fail and what the person sees, with the real
// pinned Claude Code behind the real binary's hooks, offline. One case (or
// more) per numbered item of the round: no code runs outside the host after
// an approval (Monitor, a Skill's `!` commands and frontmatter hooks); writes
// follow the host's allowance whatever the tool; the checkpoint fails closed
// (the binary gone, a hook at its timeout, an instant answer at Claude Code's
// own prompt); the record is true (plan, execute, plan again; Claude Code
// killed while a plan is pending); one project wherever Claude Code starts;
// the person knows a plan waits; a setup a person can check and undo.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ownText, planFileFrom, tempDir, type CanUseTool, type PromptAnswer } from "./claude.js";
import {
  assertRefused,
  binary,
  cli,
  cliRaw,
  denied,
  permissionMode,
  plan,
  runCase,
  type Approval,
  type Case,
  type InstalledSettings,
} from "./e2e-case.js";
import { call, lastToolResult, say, type Step, type ToolResult } from "./fake-anthropic.js";

/** The steps that submit `text` as the plan and wait for the decision; `then` gets the exit's result. */
function submitThen(text: string, then: (exit: ToolResult) => ReturnType<Step>): Step[] {
  return [(request) => [call("Write", { file_path: planFileFrom(request), content: text })], () => [call("ExitPlanMode", {})], (request) => then(lastToolResult(request))];
}

/** The person approves the one pending plan with `mode`, from the terminal. */
function approveWith(mode: string): (c: Case) => Promise<void> {
  return async (c) => {
    const pending = await c.onePending();
    c.cli(["claude-code", "approve", pending.approvalId, "--mode", mode, "--project", c.project]);
  };
}

/** Claude Code's own prompts for `tool`. */
function promptsFor(c: Case, tool: string): CanUseTool[] {
  return c.claude().prompts.filter((prompt) => prompt.tool_name === tool);
}

/** The `plan-checkpoint claude-code hook` processes of a case (its runtime directory is in their environment). */
function hooksOf(c: Case): number[] {
  const runtime = `XDG_RUNTIME_DIR=${c.env["XDG_RUNTIME_DIR"] ?? ""}`;
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      if (!(argv.includes("claude-code") && argv.includes("hook"))) continue;
      if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(runtime)) found.push(pid);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/** Waits (polling /proc, bounded by the guard) until `probe` holds. */
async function until(what: string, probe: () => boolean): Promise<void> {
  const started = Date.now();
  while (!probe()) {
    if (Date.now() - started > 30_000) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

if (binary !== "") {
  // -------------------------------------------------- 1. nothing runs outside the host

  test("approved auto: Monitor is refused with TOOL_RUNS_OUTSIDE_HOST and runs nothing, in the project, beside it or in $HOME", async (t) => {
    let outside = "";
    let inHome = "";
    const { c } = await runCase(t, {
      steps: (c) => {
        outside = join(c.root, "monitor-outside");
        inHome = join(c.root, "home", "monitor-home");
        return submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("Monitor", { description: "watch", timeout_ms: 30_000, command: `touch '${outside}' '${inHome}' monitor-inside; echo started` })];
        }).concat([
          (request) => {
            assertRefused(lastToolResult(request), /TOOL_RUNS_OUTSIDE_HOST/);
            return [call("Bash", { command: "echo through the host", description: "the host runs commands" })];
          },
          (request) => {
            assert.equal(ownText(lastToolResult(request).text), "through the host");
            return [say("Done.")];
          },
        ]);
      },
      during: approveWith("auto"),
    });
    for (const path of [outside, inHome, join(c.project, "monitor-inside")]) {
      assert.equal(existsSync(path), false, `${path} was made outside the host`);
    }
    assert.deepEqual(promptsFor(c, "Monitor"), []);
  });

  const skill = (name: string, bang: string, hook: string | undefined): string =>
    `---\nname: ${name}\ndescription: a skill of the case\n` +
    (hook === undefined ? "" : `hooks:\n  PreToolUse:\n    - matcher: "*"\n      hooks:\n        - type: command\n          command: "${hook}"\n`) +
    `---\nThe skill ${name}. Output: !\`${bang}\`\n`;

  test("approved auto: a Skill's ! commands never run in Claude Code's shell and a skill with frontmatter hooks is refused, the agent's own skill included", async (t) => {
    let root = "";
    const { c } = await runCase(t, {
      steps: (c) => {
        root = c.root;
        return submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("Skill", { skill: "hooked" })];
        }).concat([
          (request) => {
            assertRefused(lastToolResult(request), /TOOL_RUNS_OUTSIDE_HOST/);
            return [call("Skill", { skill: "plain" })];
          },
          (request) => {
            // The skill loads; its shell command was not run by Claude Code.
            const loaded = JSON.stringify(request.messages.slice(-1));
            assert.doesNotMatch(loaded, /BANG-RAN/);
            // The agent writes a skill of its own: the Write tool may not.
            const own = skill("mine", `touch ${join(root, "own-bang")}; echo BANG-RAN`, `touch ${join(root, "own-hook")}`);
            return [call("Write", { file_path: join(c.project, ".claude", "skills", "mine", "SKILL.md"), content: own })];
          },
          (request) => {
            assertRefused(lastToolResult(request), /TOOL_WRITE_PROTECTED/);
            // Nor a command by any path it may find; wherever it lands, the skill cannot run code outside the host.
            const own = skill("mine", `touch ${join(root, "own-bang")}; echo BANG-RAN`, `touch ${join(root, "own-hook")}`);
            return [call("Bash", { command: `mkdir -p .claude/skills/mine && printf '%s' '${own.replaceAll("'", "'\\''")}' > .claude/skills/mine/SKILL.md`, description: "write a skill" })];
          },
          () => [call("Skill", { skill: "mine" })],
          (request) => {
            const result = lastToolResult(request);
            if (!result.isError) assert.doesNotMatch(JSON.stringify(request.messages.slice(-1)), /BANG-RAN/);
            return [call("Read", { file_path: join(c.project, "README.md") })];
          },
          () => [say("Done.")],
        ]);
      },
      files: {
        "README.md": "the project\n",
        ".claude/skills/hooked/SKILL.md": "",
        ".claude/skills/plain/SKILL.md": "",
      },
      editSettings: () => undefined,
      afterInstall: (c) => {
        writeFileSync(join(c.project, ".claude/skills/hooked/SKILL.md"), skill("hooked", `touch ${join(c.root, "hooked-bang")}; echo BANG-RAN`, `touch ${join(c.root, "hooked-hook")}`));
        writeFileSync(join(c.project, ".claude/skills/plain/SKILL.md"), skill("plain", `touch ${join(c.root, "plain-bang")}; echo BANG-RAN`, undefined));
      },
      during: approveWith("auto"),
    });
    for (const name of ["hooked-bang", "hooked-hook", "plain-bang", "own-bang", "own-hook"]) {
      assert.equal(existsSync(join(c.root, name)), false, `${name}: code ran in Claude Code's own shell`);
    }
  });

  // -------------------------------------------------- 2. writes follow the host's allowance

  test("accept-edits: a Write outside the project asks Claude Code's prompt (the person), and a Write to .claude or .mcp.json asks too; nothing is written unasked", async (t) => {
    // (and a Read outside the project keeps Claude Code's own question: no hook allow skips it)
    let outside = "";
    const { c } = await runCase(t, {
      steps: (c) => {
        outside = join(c.root, "outside.txt");
        return submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("Write", { file_path: outside, content: "outside\n" })];
        }).concat([
          (request) => {
            assertRefused(lastToolResult(request), /the person said no/);
            return [call("Write", { file_path: join(c.project, ".mcp.json"), content: "{}\n" })];
          },
          (request) => {
            assertRefused(lastToolResult(request), /the person said no/);
            // Reading outside the project keeps Claude Code's own question too.
            writeFileSync(join(c.root, "secret.txt"), "not the model's\n");
            return [call("Read", { file_path: join(c.root, "secret.txt") })];
          },
          (request) => {
            assertRefused(lastToolResult(request), /the person said no/);
            return [call("Write", { file_path: join(c.project, "inside.txt"), content: "inside\n" })];
          },
          (request) => {
            assert.equal(lastToolResult(request).isError, false);
            return [say("Done.")];
          },
        ]);
      },
      // The person at Claude Code's prompt says no to what it asks (the plan exit is the hooks', never this).
      onPrompt: (prompt): PromptAnswer =>
        prompt.tool_name === "Write" || prompt.tool_name === "Read"
          ? { behavior: "deny", message: "the person said no" }
          : (new Promise<PromptAnswer>(() => undefined) as unknown as PromptAnswer),
      during: approveWith("accept-edits"),
    });
    assert.equal(existsSync(outside), false);
    assert.equal(existsSync(join(c.project, ".mcp.json")), false);
    assert.equal(readFileSync(join(c.project, "inside.txt"), "utf8"), "inside\n");
    assert.deepEqual(
      promptsFor(c, "Write").map((prompt) => prompt.input["file_path"]),
      [outside, join(c.project, ".mcp.json")],
    );
    assert.deepEqual(promptsFor(c, "Read").map((prompt) => prompt.input["file_path"]), [join(c.root, "secret.txt")]);
  });

  test("approved auto: a Write outside the project, to .claude/settings.json or to .mcp.json is refused with TOOL_WRITE_PROTECTED and asks nobody", async (t) => {
    const targets: string[] = [];
    const { c } = await runCase(t, {
      steps: (c) => {
        targets.push(join(c.root, "outside.txt"), join(c.project, ".claude", "settings.json"), join(c.project, ".mcp.json"));
        const steps = submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("Write", { file_path: targets[0], content: "x\n" })];
        });
        for (const next of targets.slice(1)) {
          steps.push((request) => {
            assertRefused(lastToolResult(request), /TOOL_WRITE_PROTECTED/);
            return [call("Write", { file_path: next, content: "{}\n" })];
          });
        }
        steps.push((request) => {
          assertRefused(lastToolResult(request), /TOOL_WRITE_PROTECTED/);
          return [say("Done.")];
        });
        return steps;
      },
      during: approveWith("auto"),
    });
    for (const target of targets) assert.equal(existsSync(target), false, target);
    assert.deepEqual(promptsFor(c, "Write"), []);
  });

  // -------------------------------------------------- 4. fails closed

  test("the binary removed after install: every hooked call is blocked (plan-mode Bash runs nowhere, the plan exit never reaches Claude Code's prompt)", async (t) => {
    const program = join(tempDir(t, "plan-checkpoint-bin-"), "plan-checkpoint");
    copyFileSync(binary, program);
    chmodSync(program, 0o755);
    let marker = "";
    const { c } = await runCase(t, {
      program,
      expectHost: false,
      afterInstall: () => rmSync(program),
      steps: (c) => {
        marker = join(c.root, "echo-ran");
        return [
          () => [call("Bash", { command: `echo ran; echo ran >> '${marker}'`, description: "a plan-mode command" })],
          (request) => {
            const result = lastToolResult(request);
            assert.equal(result.isError, true, result.text);
            assert.match(ownText(result.text), /plan-checkpoint/);
            return [call("ExitPlanMode", { plan })];
          },
          (request) => {
            const result = lastToolResult(request);
            assert.equal(result.isError, true, result.text);
            assert.match(ownText(result.text), /plan-checkpoint/);
            return [say("Blocked.")];
          },
        ];
      },
      onPrompt: () => ({ behavior: "allow", updatedInput: { plan } }),
    });
    assert.equal(existsSync(marker), false, "plan-mode Bash ran in Claude Code's own shell");
    assert.deepEqual(c.claude().prompts.map((prompt) => prompt.tool_name), [], "Claude Code's own prompt was asked");
  });

  test("a hook timeout shorter than the deadline: the pending exit is denied as still pending before the hook's end, so an instantly answering prompt never approves it; the plan stays pending until the session ends", async (t) => {
    let approvalId = "";
    let whileRunning = "";
    const { c } = await runCase(t, {
      editSettings: (settings) => {
        for (const entry of settings.hooks["PreToolUse"] ?? []) {
          for (const hook of entry.hooks) {
            hook.timeout = 4;
            const at = hook.args?.indexOf("--timeout") ?? -1;
            if (hook.args !== undefined && at >= 0) hook.args[at + 1] = "4";
          }
        }
      },
      // An SDK host (or an IDE) that answers Claude Code's prompt at once.
      onPrompt: (prompt) => ({ behavior: "allow", updatedInput: prompt.input }),
      steps: (c) =>
        submitThen(plan, (exit) => {
          assert.equal(exit.isError, true, exit.text);
          assert.match(ownText(exit.text), /still waits for a person's decision/);
          // Not decided: still pending while Claude Code runs.
          whileRunning = c.approval(approvalId).status;
          return [say("Waiting for the person.")];
        }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
      },
    });
    assert.equal(whileRunning, "pending");
    assert.equal(permissionMode(c.claude()), "plan");
    // The session ended with the plan undecided: nobody carries it out.
    const approval = c.approval(approvalId);
    assert.deepEqual([approval.status, approval.errorCode], ["interrupted", "PLAN_WITHDRAWN"]);
  });

  test("approved ask, with Claude Code's prompt answered at once (acceptEdits asked): Claude Code continues in default, as the person chose", async (t) => {
    const { c } = await runCase(t, {
      onPrompt: (prompt) => ({
        behavior: "allow",
        updatedInput: prompt.input,
        updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
      } as PromptAnswer),
      steps: submitThen(plan, (exit) => {
        assert.equal(exit.isError, false, exit.text);
        return [say("Done.")];
      }),
      during: approveWith("ask"),
    });
    assert.equal(permissionMode(c.claude()), "default");
  });

  // -------------------------------------------------- 5. the record is true

  test("plan, execute, plan again in one session: plan-mode Bash works after an approval, and each execution ends completed", async (t) => {
    const second = "# Plan: say goodbye\n\n1. Write `bye.txt`.\n";
    const { c } = await runCase(t, {
      steps: (c) =>
        submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("Write", { file_path: join(c.project, "hello.txt"), content: "hello\n" })];
        }).concat([
          (request) => {
            assert.equal(lastToolResult(request).isError, false);
            return [call("EnterPlanMode", {})];
          },
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [call("Bash", { command: "cat hello.txt", description: "read in plan mode again" })];
          },
          (request) => {
            const read = lastToolResult(request);
            assert.equal(read.isError, false, read.text);
            assert.equal(ownText(read.text), "hello");
            return [call("Write", { file_path: planFileFrom(request), content: second })];
          },
          () => [call("ExitPlanMode", {})],
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [say("Done.")];
          },
        ]),
      during: async (c) => {
        await approveWith("accept-edits")(c);
        // The second plan.
        await until("the second plan", () => c.approvals().length === 2 && c.approvals()[0]?.status === "pending");
        const pending = c.approvals()[0] as Approval;
        c.cli(["claude-code", "approve", pending.id, "--mode", "accept-edits", "--project", c.project]);
      },
    });
    const [latest, first] = c.approvals() as [Approval, Approval];
    assert.equal(first.status, "approved");
    assert.equal(first.executionState, "completed");
    // The second execution ends at Claude Code's Stop.
    await until("the second execution to complete", () => c.approval(latest.id).executionState === "completed");
  });

  test("Claude Code killed while a plan is pending: the waiting hooks end and the plan can no longer be approved", async (t) => {
    await runCase(t, {
      killed: true,
      steps: [(request) => [call("Write", { file_path: planFileFrom(request), content: plan })], () => [call("ExitPlanMode", {})]],
      during: async (c) => {
        const approvalId = (await c.onePending()).approvalId;
        assert.notDeepEqual(hooksOf(c), []);
        c.claude().killClaudeCodeOnly();
        await until("the hooks to end", () => hooksOf(c).length === 0);
        await until("the plan to be withdrawn", () => c.approval(approvalId).status !== "pending");
        const approval = c.approval(approvalId);
        assert.deepEqual([approval.status, approval.errorCode], ["interrupted", "PLAN_WITHDRAWN"]);
        const refused = cliRaw(c.env, ["claude-code", "approve", approvalId, "--mode", "auto", "--project", c.project], c.project);
        assert.notEqual(refused.status, 0);
        assert.match(refused.stderr, /APPROVAL_NOT_PENDING/);
      },
    });
  });

  // -------------------------------------------------- 6. one project wherever Claude Code starts

  test("Claude Code started in a subdirectory of the project: one host and one database, the plan pending in the project root", async (t) => {
    const { c } = await runCase(t, {
      git: true,
      files: { "sub/file.txt": "in the subdirectory\n" },
      cwd: "sub",
      steps: [
        () => [call("Bash", { command: "pwd; cat file.txt", description: "where am I" })],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.match(ownText(result.text), /\/project\/sub\nin the subdirectory/);
          return [call("Write", { file_path: planFileFrom(request), content: plan })];
        },
        () => [call("ExitPlanMode", {})],
        (request) => {
          assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
          return [say("Done.")];
        },
      ],
      during: approveWith("ask"),
    });
    assert.equal(existsSync(join(c.project, "sub", ".pi")), false, "a second database in the subdirectory");
    assert.equal(c.approvals().length, 1);
  });

  test("after EnterWorktree the hooks still find the one project and its host: the worktree's plan is pending in the project root", async (t) => {
    const second = "# Plan: work in the worktree\n\n1. Nothing.\n";
    const { c } = await runCase(t, {
      git: true,
      files: { "README.md": "the project\n" },
      // Claude Code's own guard of a worktree's creation stays its own: the person allows it here.
      onPrompt: (prompt) =>
        prompt.tool_name === "EnterWorktree"
          ? { behavior: "allow", updatedInput: prompt.input }
          : (new Promise<PromptAnswer>(() => undefined) as unknown as PromptAnswer),
      steps: () =>
        submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [call("EnterWorktree", { name: "wt1" })];
        }).concat([
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [call("EnterPlanMode", {})];
          },
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [call("Bash", { command: "pwd", description: "where am I" })];
          },
          (request) => {
            const result = lastToolResult(request);
            assert.equal(result.isError, false, result.text);
            assert.match(ownText(result.text), /\/\.claude\/worktrees\/wt1$/);
            return [call("Write", { file_path: planFileFrom(request), content: second })];
          },
          () => [call("ExitPlanMode", {})],
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [say("Done.")];
          },
        ]),
      during: async (c) => {
        await approveWith("auto")(c);
        await until("the worktree's plan in the project root", () => c.approvals().length === 2 && c.approvals()[0]?.status === "pending");
        const pending = JSON.parse(c.cli(["claude-code", "pending", "--project", c.project, "--json"])) as { approvalId: string }[];
        assert.equal(pending.length, 1);
        c.cli(["claude-code", "approve", pending[0]?.approvalId ?? "", "--mode", "ask", "--project", c.project]);
      },
    });
    assert.equal(existsSync(join(c.project, ".claude", "worktrees", "wt1", ".pi")), false, "a second database in the worktree");
  });

  test("a subagent with isolation worktree: its Bash is the one host's, recorded in the project root's database, and the worktree gets no database", async (t) => {
    const { c } = await runCase(t, {
      git: true,
      files: { "README.md": "the project\n" },
      steps: () =>
        submitThen(plan, (exit) => {
          assert.equal(exit.isError, false, exit.text);
          return [
            call("Agent", {
              description: "work in a worktree",
              prompt: "Say where you are.",
              subagent_type: "general-purpose",
              isolation: "worktree",
              run_in_background: false,
            }),
          ];
        }).concat([
          // The subagent's turns.
          () => [call("Bash", { command: "pwd", description: "where am I" })],
          (request) => {
            const result = lastToolResult(request);
            assert.equal(result.isError, false, result.text);
            assert.match(ownText(result.text), /\/\.claude\/worktrees\/[^/]+$/);
            return [say("In the worktree.")];
          },
          // The main agent's last turn.
          (request) => {
            assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
            return [say("Done.")];
          },
        ]),
      during: approveWith("auto"),
    });
    const ran = c.commands().filter((run) => run.command === "pwd");
    assert.equal(ran.length, 1, JSON.stringify(c.commands()));
    assert.equal(ran[0]?.state, "exited", JSON.stringify(ran));
    const worktrees = join(c.project, ".claude", "worktrees");
    for (const entry of existsSync(worktrees) ? readdirSync(worktrees) : []) {
      assert.equal(existsSync(join(worktrees, entry, ".pi")), false, "a second database in the worktree");
    }
  });

  // -------------------------------------------------- 8. setup and commands

  test("install, doctor and uninstall round trip; install refuses a project that does not exist; pending works before any host", (t) => {
    const root = tempDir(t, "plan-checkpoint-setup-");
    const project = join(root, "project");
    mkdirSync(join(project, ".claude"), { recursive: true });
    const original = JSON.stringify({ model: "kept", hooks: { Stop: [{ hooks: [{ type: "command", command: "true" }] }] } }, null, 2) + "\n";
    const settingsFile = join(project, ".claude", "settings.local.json");
    writeFileSync(settingsFile, original);
    const runtime = join(root, "run");
    mkdirSync(runtime, { mode: 0o700 });
    const env = { PATH: "/usr/bin:/bin", HOME: join(root, "home"), XDG_RUNTIME_DIR: runtime };
    const typo = join(root, "typo");
    const refused = cliRaw(env, ["claude-code", "install", "--project", typo], root);
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /does not exist/);
    assert.equal(existsSync(typo), false);

    cli(env, ["claude-code", "install", "--project", project], root);
    const installed = JSON.parse(readFileSync(settingsFile, "utf8")) as InstalledSettings;
    assert.equal(installed["disableSkillShellExecution"], true);
    // Right after install, before any hook started a host.
    assert.equal(cli(env, ["claude-code", "pending", "--project", project], root), "no pending plan\n");
    const doctor = cliRaw(env, ["claude-code", "doctor", "--project", project], root);
    assert.equal(doctor.status, 0, doctor.stdout + doctor.stderr);
    for (const checked of ["binary", "hooks", "settings", "sandbox", "host"]) {
      assert.match(doctor.stdout, new RegExp(`^ok +${checked}`, "m"), doctor.stdout);
    }

    cli(env, ["claude-code", "uninstall", "--project", project], root);
    assert.deepEqual(JSON.parse(readFileSync(settingsFile, "utf8")), JSON.parse(original));
    const after = cliRaw(env, ["claude-code", "doctor", "--project", project], root);
    assert.notEqual(after.status, 0);
    assert.match(after.stdout, /^FAIL +hooks/m);
  });

  test("pending shows the deadline, approve takes an id prefix and says the mode; ToolSearch and AskUserQuestion work in plan mode", async (t) => {
    const { c } = await runCase(t, {
      onPrompt: (prompt) =>
        prompt.tool_name === "AskUserQuestion"
          ? { behavior: "allow", updatedInput: { ...prompt.input, answers: { "Which greeting?": "Hello" } } }
          : (new Promise<PromptAnswer>(() => undefined) as unknown as PromptAnswer),
      steps: [
        () => [call("ToolSearch", { query: "select:ExitPlanMode", max_results: 1 })],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          return [call("AskUserQuestion", { questions: [{ question: "Which greeting?", header: "Greeting", multiSelect: false, options: [{ label: "Hello", description: "plain" }, { label: "Hi", description: "short" }] }] })];
        },
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.doesNotMatch(result.text, /TOOL_DENIED_IN_PLAN/);
          return [call("Write", { file_path: planFileFrom(request), content: plan })];
        },
        () => [call("ExitPlanMode", {})],
        (request) => {
          assert.equal(lastToolResult(request).isError, false, lastToolResult(request).text);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        const listed = c.cli(["claude-code", "pending", "--project", c.project]);
        const deadline = new Date(pending.expiresAt);
        const hhmm = `${String(deadline.getHours()).padStart(2, "0")}:${String(deadline.getMinutes()).padStart(2, "0")}`;
        assert.match(listed, new RegExp(`until [^\\n]*${hhmm}`), listed);
        const said = c.cli(["claude-code", "approve", pending.approvalId.slice(0, 12), "--mode", "accept-edits", "--project", c.project]);
        assert.equal(said, `${pending.approvalId} approved with accept-edits\n`);
      },
    });
    assert.equal(permissionMode(c.claude()), "acceptEdits");
  });
}
