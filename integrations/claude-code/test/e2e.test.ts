// End to end: the real pinned Claude Code, in plan mode, in a project where
// `plan-checkpoint claude-code install` was run, with the real
// `plan-checkpoint` binary behind its hooks (PLAN_CHECKPOINT_BIN, e.g.
// target/debug/plan-checkpoint after `cargo build -p plan-checkpoint -p plan-exec`). The model
// is the scripted fake; Claude Code's own permission prompt is never
// answered, so only the hooks (and so the host) decide. A person's decisions
// are taken with the terminal commands a user has (`claude-code pending`,
// `approve`, `reject`), and what was recorded is read back with the
// read-only `approvals` and `commands` commands. Every case has its own
// directories (its runtime directory too, so its host's socket and pid file
// are its own) and stops the hosts its hooks started.

import assert from "node:assert/strict";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { test } from "node:test";
import { ownText, planFileFrom, tempDir } from "./claude.js";
import { decideOnCard } from "./card.js";
import {
  assertDialogDecidedNothing,
  assertRefused,
  binary,
  cli,
  denied,
  exitDenied,
  httpStatus,
  isHostOf,
  permissionMode,
  plan,
  rawControl,
  runCase,
  sha256,
  type Approval,
  type InstalledSettings,
} from "./e2e-case.js";
import { call, lastToolResult, say, type Step, type ToolResult } from "./fake-anthropic.js";

if (binary === "") {
  const why =
    "PLAN_CHECKPOINT_BIN is not set: the end-to-end cases of the Claude Code integration DID NOT RUN. " +
    "Build the sidecar (cargo build -p plan-checkpoint) and set PLAN_CHECKPOINT_BIN to target/debug/plan-checkpoint.";
  process.stderr.write(`\n${"!".repeat(100)}\n!!! ${why}\n${"!".repeat(100)}\n\n`);
  test("end to end with the real plan-checkpoint", { skip: why }, () => undefined);
} else {
  test("the sidecar binary exists", () => {
    assert.ok(isAbsolute(binary), `PLAN_CHECKPOINT_BIN must be an absolute path: ${binary}`);
    assert.ok(existsSync(binary), `PLAN_CHECKPOINT_BIN names no file: ${binary}`);
  });

  test("install: writes the hooks and useAutoModeDuringPlan into the project's local settings, keeps what was there, and is idempotent", (t) => {
    const root = tempDir(t, "plan-checkpoint-e2e-");
    const project = join(root, "project");
    const settingsFile = join(project, ".claude", "settings.local.json");
    mkdirSync(join(project, ".claude"), { recursive: true });
    writeFileSync(settingsFile, JSON.stringify({ model: "kept", hooks: { Stop: [{ hooks: [{ type: "command", command: "true" }] }] } }));
    const env = { PATH: "/usr/bin:/bin", HOME: join(root, "home") };
    const said = cli(env, ["claude-code", "install", "--project", project], root);
    assert.match(said, /settings\.local\.json/);
    assert.match(said, /useAutoModeDuringPlan/);
    const first = readFileSync(settingsFile, "utf8");
    const settings = JSON.parse(first) as InstalledSettings;
    assert.equal(settings.model, "kept");
    assert.equal(settings.useAutoModeDuringPlan, false);
    assert.equal(settings["disableSkillShellExecution"], true);
    // Every hook is this binary, spawned with its arguments (no shell), for this project; those a call waits on
    // are fail-closed.
    const hook = (args: string[], timeout: number, gates: boolean): Record<string, unknown> => ({
      type: "command",
      command: binary,
      args: ["claude-code", "hook", "--project", project, ...args],
      timeout,
      ...(gates ? { onFailure: "block" } : {}),
    });
    const [pre] = settings.hooks["PreToolUse"] ?? [];
    assert.equal(settings.hooks["PreToolUse"]?.length, 1);
    const statusMessage = (pre?.hooks[0] as { statusMessage?: string } | undefined)?.statusMessage;
    assert.deepEqual(pre, { matcher: "*", hooks: [{ ...hook(["--timeout", "2100"], 1800 + 300, true), statusMessage }] });
    assert.match(String(statusMessage), /plan-checkpoint/);
    for (const [event, matcher] of [
      ["PermissionRequest", "*"],
      ["PostToolUse", "Write|Edit|MultiEdit|NotebookEdit|WebFetch|WebSearch|Task|Agent|ExitPlanMode"],
      ["PreSkillShellCommand", "*"],
    ] as const) {
      assert.deepEqual(settings.hooks[event], [{ matcher, hooks: [hook([], 60, true)] }], event);
    }
    // The hooks that only record: a binary that cannot run blocks nothing there.
    assert.deepEqual(settings.hooks["SessionEnd"], [{ hooks: [hook([], 60, false)] }]);
    assert.deepEqual(settings.hooks["Stop"], [
      { hooks: [{ type: "command", command: "true" }] },
      { hooks: [hook([], 60, false)] },
    ]);
    assert.deepEqual(settings["statusLine"], {
      type: "command",
      command: `'${binary}' claude-code status --project '${project}'`,
      refreshInterval: 1,
    });
    // Again: the same file.
    cli(env, ["claude-code", "install", "--project", project], root);
    assert.equal(readFileSync(settingsFile, "utf8"), first);
  });

  test("plan mode: touch, a redirect and rm run in the host's read-only sandbox; the kernel refuses them, the model sees it, the canary is untouched and the audit lists each command", async (t) => {
    const canary = "the test's canary: unchanged\n";
    const commands = {
      read: "cat canary.txt",
      touch: "touch new.txt",
      redirect: "echo overwritten > canary.txt",
      rm: "rm canary.txt",
    };
    const readOnly = /Read-only file system|Permission denied/;
    const { c } = await runCase(t, {
      files: { "canary.txt": canary },
      steps: [
        () => [call("Bash", { command: commands.read, description: "read the canary" }, "toolu_read")],
        (request) => {
          // The sandbox runs commands (this one reads), so the refusals below are the kernel's.
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), canary.trimEnd());
          return [call("Bash", { command: commands.touch, description: "create a file" }, "toolu_touch")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [call("Bash", { command: commands.redirect, description: "overwrite the canary" }, "toolu_redirect")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [call("Bash", { command: commands.rm, description: "remove the canary" }, "toolu_rm")];
        },
        (request) => {
          assertRefused(lastToolResult(request), readOnly);
          return [say("Nothing could be written.")];
        },
      ],
    });
    const run = c.claude();
    assert.equal(readFileSync(join(c.project, "canary.txt"), "utf8"), canary);
    assert.equal(existsSync(join(c.project, "new.txt")), false);
    // What Claude Code ran was the rewritten command: the thin client, naming the project and the call, with the
    // original command in a quoted here-document (so the shell expands nothing of it). Plan mode ran it without
    // asking (the permission rule `install` writes): nothing was put to Claude Code's prompt.
    assert.deepEqual(run.prompts, []);
    const answers = run.events
      .filter((event) => event.subtype === "hook_response" && event["hook_name"] === "PreToolUse:Bash")
      .map((event) => JSON.parse(String(event["stdout"])) as { hookSpecificOutput: { updatedInput: Record<string, unknown> } });
    const rewritten = answers.map((answer) => {
      const input = answer.hookSpecificOutput.updatedInput;
      const match = /^'(.+?)' claude-code bash (.*) <<'(\w+)'\n([\s\S]*)\n(\w+)$/.exec(String(input["command"]));
      assert.ok(match !== null, `not a rewritten command: ${JSON.stringify(input)}`);
      const [, program, options, opened, original, closed] = match;
      assert.deepEqual([program, opened], [binary, closed]);
      assert.ok(options?.includes(`--project '${c.project}'`), options);
      return [/--call '([^']*)'/.exec(options ?? "")?.[1], original];
    });
    assert.deepEqual(rewritten, [
      ["toolu_read", commands.read],
      ["toolu_touch", commands.touch],
      ["toolu_redirect", commands.redirect],
      ["toolu_rm", commands.rm],
    ]);
    assertDialogDecidedNothing(run);
    // The audit: each command, read-only, with its exit status.
    const audited = c
      .commands()
      .map((run) => [run.callId, run.command, run.sandbox, run.state, run.exitCode === 0])
      .sort();
    assert.deepEqual(audited, [
      ["toolu_read", commands.read, "read-only", "exited", true],
      ["toolu_redirect", commands.redirect, "read-only", "exited", false],
      ["toolu_rm", commands.rm, "read-only", "exited", false],
      ["toolu_touch", commands.touch, "read-only", "exited", false],
    ]);
  });

  test("plan-checkpoint installed alone (as cargo install puts it: no sandbox helper beside it) runs plan-mode Bash in its read-only sandbox", async (t) => {
    const alone = join(tempDir(t, "plan-checkpoint-bin-"), "plan-checkpoint");
    copyFileSync(binary, alone);
    chmodSync(alone, 0o755);
    const canary = "read through the sandbox\n";
    const { c } = await runCase(t, {
      program: alone,
      files: { "canary.txt": canary },
      steps: [
        () => [call("Bash", { command: "cat canary.txt", description: "read the canary" })],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), canary.trimEnd());
          return [call("Bash", { command: "touch new.txt", description: "create a file" })];
        },
        (request) => {
          assertRefused(lastToolResult(request), /Read-only file system|Permission denied/);
          return [say("Done.")];
        },
      ],
    });
    assert.equal(existsSync(join(c.project, "new.txt")), false);
    assert.deepEqual(
      c.commands().map((run) => [run.command, run.sandbox]),
      [
        ["touch new.txt", "read-only"],
        ["cat canary.txt", "read-only"],
      ],
    );
  });

  test("plan mode: Write and Edit are denied with the host's TOOL_DENIED_IN_PLAN, which the model reads", async (t) => {
    const canary = "unchanged\n";
    const { c } = await runCase(t, {
      files: { "canary.txt": canary },
      steps: (c) => [
        () => [call("Write", { file_path: "hello.txt", content: "hello\n" })],
        (request) => {
          assertRefused(lastToolResult(request), denied);
          // (Claude Code edits only a file the model has read; Read is allowed in plan mode.)
          return [call("Read", { file_path: join(c.project, "canary.txt") })];
        },
        (request) => {
          const read = lastToolResult(request);
          assert.equal(read.isError, false, read.text);
          assert.match(read.text, /unchanged/);
          return [call("Edit", { file_path: join(c.project, "canary.txt"), old_string: "unchanged", new_string: "edited" })];
        },
        (request) => {
          assertRefused(lastToolResult(request), denied);
          return [say("Planning only.")];
        },
      ],
    });
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assert.equal(readFileSync(join(c.project, "canary.txt"), "utf8"), canary);
    assert.deepEqual(c.claude().prompts, []);
  });

  test("plan mode: starting a subagent (the Agent tool) is denied with the host's TOOL_DENIED_IN_PLAN; no subagent runs", async (t) => {
    const { c } = await runCase(t, {
      steps: [
        () => [
          call("Agent", { description: "Create a file", prompt: "Subagent task: create sub.txt.", subagent_type: "general-purpose" }),
        ],
        (request) => {
          assertRefused(lastToolResult(request), denied);
          return [say("Planning alone.")];
        },
      ],
    });
    // (assertClean: the model was asked exactly twice, so no subagent turn happened.)
    assert.equal(existsSync(join(c.project, "sub.txt")), false);
    assert.deepEqual(c.claude().prompts, []);
  });

  test("ExitPlanMode: the exact plan bytes are the artifact under .pi/plan/ with the recorded SHA-256; approving accept-edits from the terminal moves Claude Code to acceptEdits and the next Write happens", async (t) => {
    let planFile = "";
    let approvalId = "";
    const { c, result } = await runCase(t, {
      steps: (c) => [
        (request) => {
          planFile = planFileFrom(request);
          return [call("Write", { file_path: planFile, content: plan })];
        },
        (request) => {
          // Claude Code's own plan file is left to it.
          assert.equal(lastToolResult(request).isError, false);
          return [call("ExitPlanMode", {})];
        },
        (request) => {
          const exit = lastToolResult(request);
          assert.equal(exit.isError, false, exit.text);
          assert.ok(ownText(exit.text).endsWith(`## Approved Plan:\n${plan.trimEnd()}`), exit.text);
          // Claude Code left plan mode for the mode the person chose.
          assert.equal(permissionMode(c.claude()), "acceptEdits");
          return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
        },
        (request) => {
          assert.equal(lastToolResult(request).isError, false);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        approvalId = pending.approvalId;
        assert.equal(pending.title, "Plan: greet the reader");
        const approval = c.approval(pending.approvalId);
        assert.equal(approval.status, "pending");
        assert.equal(approval.title, "Plan: greet the reader");
        assert.ok(approval.artifact !== null);
        assert.match(approval.artifact.path, /^\.pi\/plan\/[^/]+\.md$/);
        const bytes = readFileSync(join(c.project, approval.artifact.path));
        assert.equal(bytes.toString("utf8"), plan);
        assert.equal(approval.artifact.size, bytes.length);
        assert.equal(approval.artifact.sha256, sha256(bytes));
        assert.equal(sha256(plan), approval.artifact.sha256);
        assert.deepEqual(pending.artifact, approval.artifact);
        // On a terminal: the id, the title, the deadline and the start of the hash, to compare with the card's.
        assert.match(
          c.cli(["claude-code", "pending", "--project", c.project]),
          new RegExp(`^${pending.approvalId}  Plan: greet the reader  until \\d\\d:\\d\\d:\\d\\d \\(in (29|30) minutes\\)  sha256 ${approval.artifact.sha256.slice(0, 16)}…\\n$`),
        );
        // The card for a browser, on loopback.
        const url = c.cli(["claude-code", "card-url", pending.approvalId, "--project", c.project]).trim();
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\//);
        assert.equal(await httpStatus(url), 200);
        // Claude Code asked nothing while the hook held the exit.
        assert.deepEqual(c.claude().prompts, []);
        // The person approves on the card, choosing accept-edits.
        const decided = await decideOnCard(url, {
          sha256: approval.artifact.sha256,
          decision: "approve",
          permissionMode: "accept-edits",
        });
        assert.equal(decided, 200);
      },
    });
    const run = c.claude();
    assert.equal(result["subtype"], "success");
    assert.equal(readFileSync(join(c.project, "hello.txt"), "utf8"), "hello\n");
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "approved");
    assert.equal(approval.permissionMode, "accept-edits");
    // What Claude Code proceeds with (it rewrites its plan file from the allow's echo) hashes to the record.
    assert.equal(sha256(readFileSync(planFile)), approval.artifact?.sha256);
    // The exit was put to Claude Code's prompt once, and the hook's answer withdrew it; the Write asked nothing.
    assert.deepEqual(
      run.prompts.map((prompt) => prompt.tool_name),
      ["ExitPlanMode"],
    );
    assertDialogDecidedNothing(run);
  });

  test("ExitPlanMode: Claude Code's plan file changed while the plan is pending: what Claude Code proceeds with is still the approved bytes (or the exit is denied), never the changed file", async (t) => {
    const changed = "# Plan: something else\n\n1. Delete the repository.\n";
    let planFile = "";
    let exit: ToolResult | undefined;
    const { c } = await runCase(t, {
      steps: [
        (request) => {
          planFile = planFileFrom(request);
          return [call("Write", { file_path: planFile, content: plan })];
        },
        () => [call("ExitPlanMode", {})],
        (request) => {
          exit = lastToolResult(request);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        // Anything of the user's may write there (an editor, another process): not the plan that was submitted.
        writeFileSync(planFile, changed);
        c.cli(["claude-code", "approve", pending.approvalId, "--mode", "accept-edits", "--project", c.project]);
      },
    });
    assert.ok(exit !== undefined);
    const approved = c.approval((c.approvals()[0] as Approval).id);
    assert.equal(approved.artifact?.sha256, sha256(plan));
    // What the hook or the tool said (Claude Code's own reminders after it
    // may quote the changed file; they say nothing was approved).
    assert.doesNotMatch(ownText(exit.text), /something else/, `the model was told another plan was approved:\n${exit.text}`);
    if (exit.isError) {
      assert.match(ownText(exit.text), /ARTIFACT_INTEGRITY_MISMATCH: Claude Code's plan file .* no longer holds the approved plan/);
      // The approved plan is not carried out, and the record says so.
      assert.deepEqual([approved.status, approved.executionState, approved.errorCode], ["approved", "interrupted", "EXECUTION_CANCELLED"]);
    } else {
      assert.ok(ownText(exit.text).endsWith(`:\n${plan.trimEnd()}`), exit.text);
      assert.equal(readFileSync(planFile, "utf8"), plan);
    }
    assertDialogDecidedNothing(c.claude());
  });

  test("approved auto: Bash runs on the host in the workspace-write sandbox: it writes in the project, and a write outside it is refused", async (t) => {
    const { c } = await runCase(t, {
      steps: (c) => [
        (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
        () => [call("ExitPlanMode", {})],
        (request) => {
          const exit = lastToolResult(request);
          assert.equal(exit.isError, false, exit.text);
          return [call("Bash", { command: "echo inside > inside.txt && cat inside.txt", description: "write in the project" }, "toolu_inside")];
        },
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, false, result.text);
          assert.equal(ownText(result.text), "inside");
          // The case's own directory, beside the project: outside the workspace.
          return [call("Bash", { command: `touch ${join(c.root, "outside.txt")}`, description: "write outside" }, "toolu_outside")];
        },
        (request) => {
          assertRefused(lastToolResult(request), /Read-only file system|Permission denied/);
          return [say("Done.")];
        },
      ],
      during: async (c) => {
        const pending = await c.onePending();
        c.cli(["claude-code", "approve", pending.approvalId, "--mode", "auto", "--project", c.project]);
      },
    });
    assert.equal(readFileSync(join(c.project, "inside.txt"), "utf8"), "inside\n");
    assert.equal(existsSync(join(c.root, "outside.txt")), false);
    assert.deepEqual(
      c
        .commands()
        .map((run) => [run.callId, run.sandbox, run.exitCode === 0])
        .sort(),
      [
        ["toolu_inside", "workspace-write", true],
        ["toolu_outside", "workspace-write", false],
      ],
    );
    assertDialogDecidedNothing(c.claude());
  });

  /** A plan submitted and refused; the model tries a Write after it, which plan mode still denies. */
  function refusedExit(expect: (exit: ToolResult) => void): Step[] {
    return [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        expect(lastToolResult(request));
        return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
      },
      (request) => {
        assertRefused(lastToolResult(request), denied);
        return [say("Still planning.")];
      },
    ];
  }

  test("ExitPlanMode: rejecting from the terminal denies the exit with the host's sentence and plan mode holds", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true);
        // The host's sentence, naming the approval, behind the hook's name.
        assert.ok(ownText(exit.text).startsWith(`${exitDenied}The person rejected this plan (${approvalId}).`), exit.text);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
        c.cli(["claude-code", "reject", approvalId, "--project", c.project]);
      },
    });
    assert.equal(c.approval(approvalId).status, "rejected");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  // Long enough for the case to see the approval pending, short enough not to wait long.
  const ttlMs = 3000;

  test("ExitPlanMode: at the deadline the exit is denied with PLAN_APPROVAL_TIMEOUT and the host's sentence, and plan mode holds", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      env: { PLAN_CHECKPOINT_APPROVAL_TTL_MS: String(ttlMs) },
      steps: refusedExit((exit) =>
        assert.deepEqual(
          [ownText(exit.text), exit.isError],
          [`${exitDenied}PLAN_APPROVAL_TIMEOUT: the plan approval expired at its deadline; submit a new plan`, true],
        ),
      ),
      during: async (c) => {
        const pending = await c.onePending();
        approvalId = pending.approvalId;
        const approval = c.approval(pending.approvalId);
        assert.equal(approval.expiresAt - approval.createdAt, ttlMs);
      },
    });
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "expired");
    assert.equal(approval.errorCode, "PLAN_APPROVAL_TIMEOUT");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  test("a hostile plan (ANSI escapes and bidi overrides in its title line): claude-code pending shows them escaped, never raw; the artifact keeps the exact bytes", async (t) => {
    const hostile = "# Plan: \u001b[2J\u001b[31mred\u001b[0m \u202eevil\u202c end\n\nBody \u001b]0;title\u0007 and \u2066isolate\u2069.\n";
    let approvalId = "";
    const { c } = await runCase(t, {
      steps: [
        (request) => [call("Write", { file_path: planFileFrom(request), content: hostile })],
        () => [call("ExitPlanMode", {})],
        (request) => {
          assertRefused(lastToolResult(request), /reject/i);
          return [say("Rejected.")];
        },
      ],
      during: async (c) => {
        const entry = await c.onePending();
        approvalId = entry.approvalId;
        const human = c.cli(["claude-code", "pending", "--project", c.project]);
        assert.doesNotMatch(human, rawControl, JSON.stringify(human));
        // Shown as escapes (`\x1b` or `\u{1b}`, `\u202e` or `\u{202e}`), so a reader sees they are there.
        assert.match(human, /\\(x1b|u\{1b\})\[31mred/);
        assert.match(human, /\\(u202e|u\{202e\})evil/);
        const json = c.cli(["claude-code", "pending", "--project", c.project, "--json"]);
        assert.doesNotMatch(json, rawControl, JSON.stringify(json));
        const shown = c.cli(["approvals", "show", entry.approvalId, "--db", c.db]);
        assert.doesNotMatch(shown, rawControl, JSON.stringify(shown));
        const approval = c.approval(entry.approvalId);
        assert.ok(approval.artifact !== null);
        const bytes = readFileSync(join(c.project, approval.artifact.path));
        assert.equal(bytes.toString("utf8"), hostile);
        assert.equal(approval.artifact.sha256, sha256(hostile));
        c.cli(["claude-code", "reject", entry.approvalId, "--project", c.project]);
      },
    });
    assert.equal(c.approval(approvalId).status, "rejected");
  });

  test("killing the host while a plan is pending: the hook denies the exit (never allows), and the next host interrupts the approval with HOST_RESTARTED", async (t) => {
    let approvalId = "";
    let killed = 0;
    const { c } = await runCase(t, {
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true, exit.text);
        assert.doesNotMatch(exit.text, /approved/i);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
        const pid = c.hostPid();
        assert.ok(pid !== undefined && isHostOf(pid, c.project), "no live host while the plan is pending");
        killed = pid;
        await c.stopHost(pid, "SIGKILL");
      },
    });
    // The Write after the exit started a new host, whose startup fence interrupted the approval.
    assert.equal(c.hostPids.size, 2, `hosts seen: ${[...c.hostPids].join(", ")}`);
    assert.ok(c.hostPids.has(killed));
    const approval = c.approval(approvalId);
    assert.equal(approval.status, "interrupted");
    assert.equal(approval.errorCode, "HOST_RESTARTED");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });

  test("Claude Code kills the ExitPlanMode hook at its timeout while the plan is pending (the hook not told its timeout): the exit is still denied, never left to Claude Code's dialog, even one that answers at once", async (t) => {
    let approvalId = "";
    const { c } = await runCase(t, {
      // An SDK host (or an IDE) that answers Claude Code's own prompt at once: it must get no say.
      onPrompt: (prompt) => ({ behavior: "allow", updatedInput: prompt.input }),
      // The hook's timeout (seconds) far inside the approval's deadline, the hook not told (a stale
      // setting): Claude Code gives up on the hook first.
      editSettings: (settings) => {
        for (const entry of settings.hooks["PreToolUse"] ?? []) {
          for (const hook of entry.hooks) {
            hook.timeout = 3;
          }
        }
      },
      steps: refusedExit((exit) => {
        assert.equal(exit.isError, true, exit.text);
        assert.doesNotMatch(exit.text, /approved/i);
      }),
      during: async (c) => {
        approvalId = (await c.onePending()).approvalId;
      },
    });
    assert.notEqual(c.approval(approvalId).status, "approved");
    assert.equal(existsSync(join(c.project, "hello.txt")), false);
    assertDialogDecidedNothing(c.claude());
  });
}
