// The hook contract of the pinned Claude Code, measured on the real thing
// offline: what its plan mode does with `PreToolUse` and `PermissionRequest`
// answers, what its hooks are given on stdin, and what the model is shown.
// The integration is built on exactly these facts; each test asserts exact
// fields, so a Claude Code that changes any of them fails here first, loudly.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import {
  ClaudeRun,
  claudeBin,
  denyPrompt,
  ownText,
  pinnedVersion,
  planFileFrom,
  tempDir,
  type ClaudeOptions,
  type OutputEvent,
} from "./claude.js";
import { FakeAnthropic, call, lastToolResult, say, type MessagesRequest, type Step } from "./fake-anthropic.js";
import { ScriptedHooks, type HookCall } from "./hooks.js";

const fixtureFile = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "test", "fixtures", "hook-inputs.json");

interface Case {
  root: string;
  fake: FakeAnthropic;
  hooks: ScriptedHooks;
  run: ClaudeRun;
  result: OutputEvent;
}

/** Runs one case to the end of its turn: scripted model, scripted hooks (registered as [event, matcher, label]). */
async function runCase(
  t: TestContext,
  options: {
    steps: Step[];
    hooks: [event: string, matcher: string | undefined, label: string][];
    answers: Record<string, unknown>;
    localSettings?: Record<string, unknown>;
    onPrompt?: ClaudeOptions["onPrompt"];
    /** Leave the fake's stray traffic to the case to assert on. */
    strayExpected?: boolean;
    /** More Claude Code arguments. */
    extraArgs?: string[];
    /** More settings for `--settings`, beside the hooks. */
    settings?: Record<string, unknown>;
    /** Labels whose hooks hold the call until `during` opens their gate. */
    gates?: string[];
    /** Timeouts (seconds) other than the default 30, by label. */
    timeouts?: Record<string, number>;
    /** Hook entries given as they are, by event, besides the scripted ones. */
    rawHooks?: Record<string, unknown[]>;
    /** Runs alongside the turn (to act on what Claude Code does while it runs). */
    during?: (run: ClaudeRun, hooks: ScriptedHooks) => Promise<void>;
  },
): Promise<Case> {
  const root = tempDir(t, "plan-checkpoint-cc-");
  const hooks = new ScriptedHooks(root, options.answers);
  for (const label of options.gates ?? []) {
    hooks.gate(label);
  }
  const fake = await FakeAnthropic.start(t, options.steps);
  const settings: Record<string, unknown[]> = {};
  for (const [event, matcher, label] of options.hooks) {
    const entry = hooks.entry(matcher ?? "", label);
    const timeout = options.timeouts?.[label];
    if (timeout !== undefined) {
      (entry["hooks"] as { timeout: number }[])[0]!.timeout = timeout;
    }
    if (matcher === undefined) {
      delete entry["matcher"];
    }
    (settings[event] ??= []).push(entry);
  }
  for (const [event, entries] of Object.entries(options.rawHooks ?? {})) {
    (settings[event] ??= []).push(...entries);
  }
  const run = ClaudeRun.start(t, root, {
    fake,
    prompt: "Work on the task.",
    settings: { ...options.settings, hooks: settings },
    localSettings: options.localSettings ?? { useAutoModeDuringPlan: false },
    extraArgs: ["--include-hook-events", ...(options.extraArgs ?? [])],
    ...(options.onPrompt === undefined ? {} : { onPrompt: options.onPrompt }),
  });
  const [result] = await Promise.all([run.finish(), options.during?.(run, hooks)]);
  // The run is the pinned Claude Code, in plan mode, and keeps its files in the case's directory.
  const init = run.events.find((event) => event.type === "system" && event.subtype === "init");
  assert.equal(init?.["claude_code_version"], pinnedVersion);
  assert.equal(init?.["permissionMode"], "plan");
  assert.equal(init?.["cwd"], join(root, "project"));
  const socket = init?.["messaging_socket_path"];
  // (--bare opens none.)
  assert.ok(socket === undefined || String(socket).startsWith(root + "/"), String(socket));
  if (options.strayExpected === true) {
    assert.deepEqual(fake.stepErrors, []);
    assert.equal(fake.turns.length, options.steps.length);
  } else {
    fake.assertClean();
  }
  return { root, fake, hooks, run, result };
}

/** The hook calls of one label, with one expected count. */
function only(hooks: ScriptedHooks, label: string): HookCall {
  const calls = hooks.callsOf(label);
  assert.equal(calls.length, 1, `hook ${label} ran ${calls.length} times: ${JSON.stringify(calls)}`);
  return calls[0] as HookCall;
}

const rewritten = { command: "echo REWRITTEN > made.txt && cat made.txt", description: "rewritten by the hook" };
const original = { command: "touch original.txt", description: "touch a file" };

test("the pinned Claude Code is the one installed", () => {
  assert.ok(existsSync(claudeBin), `no Claude Code at ${claudeBin}: run npm ci in runtime/`);
  const manifest = JSON.parse(readFileSync(join(dirname(claudeBin), "..", "package.json"), "utf8")) as { version: string };
  assert.equal(manifest.version, pinnedVersion);
  // The package's postinstall puts the native binary in place; without it this is a stub.
  const version = execFileSync(claudeBin, ["--version"], { encoding: "utf8", timeout: 60_000, env: { PATH: "/usr/bin:/bin" } });
  assert.equal(version.trim(), `${pinnedVersion} (Claude Code)`);
});

test("plan mode: a PreToolUse allow with updatedInput is not enough for a writing Bash command; Claude Code's own prompt is asked with the rewritten command", async (t) => {
  const message = "The test's prompt refuses the rewritten command.";
  const { root, hooks, run, fake } = await runCase(t, {
    steps: [
      () => [call("Bash", original)],
      (request) => {
        const result = lastToolResult(request);
        assert.equal(ownText(result.text), message);
        assert.equal(result.isError, true);
        return [say("Refused.")];
      },
    ],
    // No PermissionRequest hook: nothing races the prompt, so answering it at once is deterministic.
    hooks: [["PreToolUse", "Bash", "pre-bash"]],
    answers: {
      "pre-bash": {
        hookSpecificOutput: {
          hookEventName: "PreToolUse",
          permissionDecision: "allow",
          permissionDecisionReason: "rewritten",
          updatedInput: rewritten,
        },
      },
    },
    onPrompt: denyPrompt(message),
  });
  const pre = only(hooks, "pre-bash");
  assert.equal(pre.input["permission_mode"], "plan");
  assert.deepEqual(pre.input["tool_input"], original);
  assert.equal(run.prompts.length, 1);
  const prompt = run.prompts[0];
  assert.equal(prompt?.tool_name, "Bash");
  assert.deepEqual(prompt?.input, rewritten);
  assert.equal(prompt?.["tool_use_id"], pre.input["tool_use_id"]);
  assert.equal(existsSync(join(root, "project", "made.txt")), false);
  assert.equal(existsSync(join(root, "project", "original.txt")), false);
  assert.equal(fake.turns.length, 2);
});

for (const preDecision of ["allow", "none"] as const) {
  test(`plan mode: PreToolUse updatedInput (decision: ${preDecision}) and a PermissionRequest allow run the rewritten Bash command; the model sees its output; Claude Code's prompt is withdrawn`, async (t) => {
    const { root, hooks, run } = await runCase(t, {
      steps: [
        () => [call("Bash", original)],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(ownText(result.text), "REWRITTEN");
          assert.equal(result.isError, false);
          return [say("Ran.")];
        },
      ],
      hooks: [
        ["PreToolUse", "Bash", "pre-bash"],
        ["PermissionRequest", "Bash", "permission-bash"],
        ["PostToolUse", "Bash", "post-bash"],
      ],
      answers: {
        "pre-bash": {
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            ...(preDecision === "allow" ? { permissionDecision: "allow", permissionDecisionReason: "rewritten" } : {}),
            updatedInput: rewritten,
          },
        },
        "permission-bash": { hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow" } } },
      },
    });
    const pre = only(hooks, "pre-bash");
    assert.deepEqual(pre.input["tool_input"], original);
    const permission = only(hooks, "permission-bash");
    assert.equal(permission.input["permission_mode"], "plan");
    assert.deepEqual(permission.input["tool_input"], rewritten);
    const post = only(hooks, "post-bash");
    assert.deepEqual(post.input["tool_input"], rewritten);
    assert.deepEqual(post.input["tool_response"], {
      stdout: "REWRITTEN",
      stderr: "",
      interrupted: false,
      isImage: false,
      noOutputExpected: false,
    });
    assert.equal(readFileSync(join(root, "project", "made.txt"), "utf8"), "REWRITTEN\n");
    assert.equal(existsSync(join(root, "project", "original.txt")), false);
    // The prompt went out alongside the hook, and was withdrawn when the hook answered.
    assert.equal(run.prompts.length, 1);
    assert.deepEqual(run.prompts[0]?.input, rewritten);
    assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""), "the prompt was not withdrawn");
  });
}

for (const useAutoModeDuringPlan of [undefined, false]) {
  test(`plan mode with auto mode opted in, useAutoModeDuringPlan ${String(useAutoModeDuringPlan)}: ${useAutoModeDuringPlan === false ? "the PermissionRequest hook decides the rewritten command" : "auto mode's check takes the command from the hooks (offline it denies it)"}`, async (t) => {
    const unavailable =
      "Auto mode is unavailable: its safety check does not run for this session, so Bash was not run. Other actions that need the check will be denied too, and retrying won't help. Finish what you can without them, then tell the user what is blocked and that they can switch to another permission mode.";
    const { hooks, run, root } = await runCase(t, {
      steps: [
        () => [call("Bash", original)],
        (request) => {
          const result = lastToolResult(request);
          if (useAutoModeDuringPlan === false) {
            assert.deepEqual([ownText(result.text), result.isError], ["REWRITTEN", false]);
          } else {
            assert.deepEqual([ownText(result.text), result.isError], [unavailable, true]);
          }
          return [say("Done.")];
        },
      ],
      hooks: [
        ["PreToolUse", "Bash", "pre-bash"],
        ["PermissionRequest", "Bash", "permission-bash"],
      ],
      answers: {
        "pre-bash": {
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "allow",
            permissionDecisionReason: "rewritten",
            updatedInput: rewritten,
          },
        },
        "permission-bash": { hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow" } } },
      },
      // The user accepted auto mode's opt-in, and the model is one auto mode supports.
      settings: { skipAutoPermissionPrompt: true },
      extraArgs: ["--model", "claude-opus-5-5"],
      localSettings: useAutoModeDuringPlan === undefined ? {} : { useAutoModeDuringPlan },
    });
    only(hooks, "pre-bash");
    if (useAutoModeDuringPlan === false) {
      only(hooks, "permission-bash");
      assert.equal(readFileSync(join(root, "project", "made.txt"), "utf8"), "REWRITTEN\n");
      assert.equal(run.prompts.length, 1);
    } else {
      assert.deepEqual(hooks.callsOf("permission-bash"), []);
      assert.deepEqual(run.prompts, []);
      assert.equal(existsSync(join(root, "project", "made.txt")), false);
    }
  });
}

const plan = "# Plan: greet the reader\n\nContext: a greeting is missing.\n\n1. Write `hello.txt` with one line.\n";

test("ExitPlanMode: hooks get the plan and its file; a PermissionRequest allow echoing updatedInput with setMode acceptEdits ends plan mode and the next Write runs unasked", async (t) => {
  let planFile = "";
  const { root, hooks, run, result } = await runCase(t, {
    steps: [
      (request) => {
        planFile = planFileFrom(request);
        return [call("Write", { file_path: planFile, content: plan })];
      },
      (request) => {
        assert.equal(lastToolResult(request).isError, false);
        return [call("ExitPlanMode", {})];
      },
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, false);
        assert.equal(
          ownText(exit.text),
          "User has approved your plan. You can now start coding. Start with updating your todo list if applicable\n\n" +
            `Your plan has been saved to: ${planFile}\nYou can refer back to it if needed during implementation.\n\n` +
            // (The model is shown the plan without its trailing newline.)
            `## Approved Plan:\n${plan.trimEnd()}`,
        );
        assert.ok(exit.text.includes("## Exited Plan Mode"), exit.text);
        return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
      },
      (request) => {
        assert.equal(lastToolResult(request).isError, false);
        return [say("Done.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "pre-exit"],
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
      ["PreToolUse", "Write", "pre-write"],
      ["PermissionRequest", "Write", "permission-write"],
    ],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedInput: "$TOOL_INPUT",
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
  });
  // The plan file lives in Claude Code's config directory, not in the project.
  assert.equal(planFile.startsWith(join(root, "home", ".claude", "plans") + "/"), true, planFile);
  assert.equal(readFileSync(planFile, "utf8"), plan);
  const expectedInput = { plan, planFilePath: planFile };
  const pre = only(hooks, "pre-exit");
  assert.equal(pre.input["permission_mode"], "plan");
  assert.deepEqual(pre.input["tool_input"], expectedInput);
  const permission = only(hooks, "permission-exit");
  assert.equal(permission.input["permission_mode"], "plan");
  assert.deepEqual(permission.input["tool_input"], expectedInput);
  // Writing the plan file needs no permission in plan mode; the Write after the exit needs none in acceptEdits.
  const writes = hooks.callsOf("pre-write");
  assert.deepEqual(
    writes.map((write) => [write.input["permission_mode"], (write.input["tool_input"] as { file_path: string }).file_path]),
    [
      ["plan", planFile],
      ["acceptEdits", join(root, "project", "hello.txt")],
    ],
  );
  assert.deepEqual(hooks.callsOf("permission-write"), []);
  assert.equal(readFileSync(join(root, "project", "hello.txt"), "utf8"), "hello\n");
  // Only the exit was put to the prompt, and the hook's answer withdrew it.
  assert.deepEqual(
    run.prompts.map((prompt) => prompt.tool_name),
    ["ExitPlanMode"],
  );
  assert.deepEqual(run.prompts[0]?.input, expectedInput);
  assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""), "the exit prompt was not withdrawn");
  assert.equal(result["subtype"], "success");
});

test("ExitPlanMode: while a PreToolUse hook holds the call, Claude Code asks nothing; the PermissionRequest hook's answer then withdraws its prompt", async (t) => {
  const { run, hooks } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        assert.equal(lastToolResult(request).isError, false);
        return [say("Approved.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "hold-exit"],
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
    ],
    gates: ["hold-exit"],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedInput: "$TOOL_INPUT",
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
    during: async (claude, scripted) => {
      await claude.waitFor(
        "the held PreToolUse hook to start",
        (event) => event.subtype === "hook_started" && event["hook_name"] === "PreToolUse:ExitPlanMode",
      );
      // Two round trips through Claude Code's input: a prompt sent alongside the hook would be out by then.
      await claude.roundTrip();
      await claude.roundTrip();
      assert.deepEqual(claude.prompts, []);
      await scripted.open("hold-exit");
    },
  });
  const started = run.events.findIndex((event) => event.subtype === "hook_started" && event["hook_name"] === "PreToolUse:ExitPlanMode");
  const answered = run.events.findIndex((event) => event.subtype === "hook_response" && event["hook_name"] === "PreToolUse:ExitPlanMode");
  const asked = run.events.findIndex((event) => event.type === "control_request");
  assert.ok(started < answered && answered < asked, `hook started at ${started}, answered at ${answered}, prompt at ${asked}`);
  assert.equal(run.prompts.length, 1);
  assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""));
  only(hooks, "hold-exit");
  only(hooks, "permission-exit");
});

test("ExitPlanMode: while a PermissionRequest hook holds the call, Claude Code's prompt is already out (the two race, the first answer wins); an allow without setMode leaves plan mode for default", async (t) => {
  const { run, hooks } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        assert.equal(lastToolResult(request).isError, false);
        return [say("Approved.")];
      },
    ],
    hooks: [
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
      ["Stop", undefined, "stop"],
    ],
    gates: ["permission-exit"],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: { behavior: "allow", updatedInput: "$TOOL_INPUT" },
        },
      },
    },
    during: async (claude, scripted) => {
      await claude.waitFor("the prompt", (event) => event.type === "control_request");
      assert.equal(claude.cancelled.size, 0);
      await scripted.open("permission-exit");
    },
  });
  assert.equal(run.prompts.length, 1);
  assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""));
  only(hooks, "permission-exit");
  assert.equal(only(hooks, "stop").input["permission_mode"], "default");
});

for (const [requested, reached] of [
  ["auto", "auto"],
  ["dontAsk", "dontAsk"],
  ["bypassPermissions", "default"],
] as const) {
  test(`ExitPlanMode: an allow with setMode ${requested} leaves plan mode for ${reached}`, async (t) => {
    const { hooks } = await runCase(t, {
      steps: [
        (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
        () => [call("ExitPlanMode", {})],
        (request) => {
          assert.equal(lastToolResult(request).isError, false);
          return [say("Approved.")];
        },
      ],
      hooks: [
        ["PermissionRequest", "ExitPlanMode", "permission-exit"],
        ["Stop", undefined, "stop"],
      ],
      answers: {
        "permission-exit": {
          hookSpecificOutput: {
            hookEventName: "PermissionRequest",
            decision: {
              behavior: "allow",
              updatedInput: "$TOOL_INPUT",
              updatedPermissions: [{ type: "setMode", mode: requested, destination: "session" }],
            },
          },
        },
      },
    });
    assert.equal(only(hooks, "stop").input["permission_mode"], reached);
  });
}

test("ExitPlanMode: the plan Claude Code proceeds with is the updatedInput's plan, which it writes over the plan file", async (t) => {
  const approved = "# Plan: the approved bytes\n\n1. Only this.\n";
  let planFile = "";
  await runCase(t, {
    steps: [
      (request) => {
        planFile = planFileFrom(request);
        return [call("Write", { file_path: planFile, content: plan })];
      },
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = ownText(lastToolResult(request).text);
        assert.ok(exit.endsWith(`## Approved Plan (edited by user):\n${approved.trimEnd()}`), exit);
        return [say("Done.")];
      },
    ],
    hooks: [["PermissionRequest", "ExitPlanMode", "permission-exit"]],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedInput: { plan: approved },
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
  });
  assert.equal(readFileSync(planFile, "utf8"), approved);
});

test("ExitPlanMode: a PreToolUse allow ends plan mode by itself, for default: nothing is asked, no PermissionRequest hook runs (so no setMode applies), and the allow's updatedInput plan is not what Claude Code proceeds with", async (t) => {
  const other = "# Plan: the hook's bytes\n\n1. Not these.\n";
  let planFile = "";
  const { run, hooks } = await runCase(t, {
    steps: [
      (request) => {
        planFile = planFileFrom(request);
        return [call("Write", { file_path: planFile, content: plan })];
      },
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, false);
        assert.ok(ownText(exit.text).endsWith(`## Approved Plan:\n${plan.trimEnd()}`), exit.text);
        return [say("Approved.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "pre-exit"],
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
      ["Stop", undefined, "stop"],
    ],
    answers: {
      "pre-exit": {
        hookSpecificOutput: {
          hookEventName: "PreToolUse",
          permissionDecision: "allow",
          permissionDecisionReason: "approved",
          updatedInput: { plan: other },
        },
      },
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedInput: "$TOOL_INPUT",
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
  });
  only(hooks, "pre-exit");
  assert.deepEqual(hooks.callsOf("permission-exit"), []);
  assert.deepEqual(run.prompts, []);
  assert.equal(only(hooks, "stop").input["permission_mode"], "default");
  assert.equal(readFileSync(planFile, "utf8"), plan);
});

test("ExitPlanMode: the plan file changed while a hook holds the call: an allow whose plan is the one it was given proceeds with the file's new content", async (t) => {
  const changed = "# Plan: changed on disk\n\n1. Something else.\n";
  let planFile = "";
  const { hooks } = await runCase(t, {
    steps: [
      (request) => {
        planFile = planFileFrom(request);
        return [call("Write", { file_path: planFile, content: plan })];
      },
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, false);
        assert.ok(ownText(exit.text).endsWith(`## Approved Plan:\n${changed.trimEnd()}`), exit.text);
        return [say("Approved.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "hold-exit"],
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
    ],
    gates: ["hold-exit"],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            // The plan the hooks were given, explicitly.
            updatedInput: { plan },
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
    during: async (claude, scripted) => {
      await claude.waitFor(
        "the held PreToolUse hook to start",
        (event) => event.subtype === "hook_started" && event["hook_name"] === "PreToolUse:ExitPlanMode",
      );
      writeFileSync(planFile, changed);
      await scripted.open("hold-exit");
    },
  });
  assert.equal((only(hooks, "permission-exit").input["tool_input"] as { plan: string }).plan, plan);
  assert.equal(readFileSync(planFile, "utf8"), changed);
});

test("ExitPlanMode: a PreToolUse deny reaches the model behind the hook's name, as for Bash, and plan mode holds", async (t) => {
  const reason = "PLAN_REJECTED: the person rejected this plan.";
  const { hooks, run } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, true);
        assert.equal(ownText(exit.text), `PreToolUse:ExitPlanMode hook error: ${reason}`);
        return [say("Still planning.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "pre-exit"],
      ["Stop", undefined, "stop"],
    ],
    answers: {
      "pre-exit": {
        hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason },
      },
    },
  });
  only(hooks, "pre-exit");
  assert.deepEqual(run.prompts, []);
  assert.equal(only(hooks, "stop").input["permission_mode"], "plan");
});

test("ExitPlanMode: a PreToolUse hook Claude Code kills at its timeout decides nothing; the exit goes on to Claude Code's prompt and the PermissionRequest hooks", async (t) => {
  const message = "PLAN_PENDING: the PermissionRequest hook refuses the exit.";
  const { run, hooks } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, true);
        assert.equal(ownText(exit.text), message);
        return [say("Still planning.")];
      },
    ],
    hooks: [
      ["PreToolUse", "ExitPlanMode", "hold-exit"],
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
    ],
    // The held hook is never let go: Claude Code gives up on it after its timeout.
    gates: ["hold-exit"],
    timeouts: { "hold-exit": 2 },
    answers: {
      "permission-exit": { hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "deny", message } } },
    },
  });
  const timedOut = run.events.find((event) => event.subtype === "hook_response" && event["hook_name"] === "PreToolUse:ExitPlanMode");
  assert.equal(timedOut?.["outcome"], "cancelled");
  only(hooks, "hold-exit");
  only(hooks, "permission-exit");
  // Claude Code's prompt went out (a person at its dialog could have decided), and the hook's deny withdrew it.
  assert.deepEqual(
    run.prompts.map((prompt) => prompt.tool_name),
    ["ExitPlanMode"],
  );
  assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""));
});

test("ExitPlanMode: a PermissionRequest allow without updatedInput decides nothing; the exit stays with Claude Code's prompt", async (t) => {
  const message = "The test's prompt refuses the exit.";
  const { hooks, run } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, true);
        assert.equal(ownText(exit.text), message);
        return [say("Still planning.")];
      },
    ],
    hooks: [["PermissionRequest", "ExitPlanMode", "permission-exit"]],
    answers: {
      "permission-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
    // Answer the prompt only once Claude Code has the hook's answer: had the allow counted, the prompt would be withdrawn by then.
    onPrompt: async (_prompt, claude) => {
      await claude.waitFor(
        "the PermissionRequest hook's response",
        (event) => event.subtype === "hook_response" && event["hook_name"] === "PermissionRequest:ExitPlanMode",
      );
      return denyPrompt(message)();
    },
  });
  assert.equal(only(hooks, "permission-exit").input["hook_event_name"], "PermissionRequest");
  assert.equal(run.prompts.length, 1);
  assert.equal(run.cancelled.size, 0);
});

test("ExitPlanMode: a PermissionRequest deny reaches the model word for word and plan mode holds", async (t) => {
  const message = "PLAN_REJECTED: the person rejected this plan.\nKeep planning; ask before anything else.";
  const { hooks, run, root } = await runCase(t, {
    steps: [
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      (request) => {
        const exit = lastToolResult(request);
        assert.equal(exit.isError, true);
        assert.equal(ownText(exit.text), message);
        return [call("Write", { file_path: "hello.txt", content: "hello\n" })];
      },
      (request) => {
        const write = lastToolResult(request);
        assert.equal(write.isError, true);
        assert.equal(ownText(write.text), "The test's prompt refuses the write.");
        return [say("Still planning.")];
      },
    ],
    hooks: [
      ["PermissionRequest", "ExitPlanMode", "permission-exit"],
      ["PreToolUse", "Write", "pre-write"],
    ],
    answers: {
      "permission-exit": {
        hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "deny", message } },
      },
    },
    // The exit's prompt is held (the hook answers it); the Write after it, which no hook answers, is refused.
    onPrompt: (prompt) =>
      prompt.tool_name === "Write"
        ? denyPrompt("The test's prompt refuses the write.")()
        : new Promise(() => undefined),
  });
  only(hooks, "permission-exit");
  const writes = hooks.callsOf("pre-write").map((write) => write.input["permission_mode"]);
  assert.deepEqual(writes, ["plan", "plan"]);
  assert.deepEqual(
    run.prompts.map((prompt) => [prompt.tool_name, prompt["decision_reason_type"]]),
    [
      ["ExitPlanMode", undefined],
      ["Write", "mode"],
    ],
  );
  assert.ok(run.cancelled.has(run.prompts[0]?.request_id ?? ""));
  assert.equal(existsSync(join(root, "project", "hello.txt")), false);
});

// What the model reads of a PreToolUse deny depends on the tool: Write gives
// the reason alone, Bash puts it behind "PreToolUse:Bash hook error: ".
for (const [tool, input, file, prefix] of [
  ["Write", { file_path: "hello.txt", content: "hello\n" }, "hello.txt", ""],
  ["Bash", original, "original.txt", "PreToolUse:Bash hook error: "],
] as const) {
  test(`plan mode: a PreToolUse deny on ${tool} reaches the model with its reason${prefix === "" ? " alone" : ", prefixed"}, and nothing is asked`, async (t) => {
    const reason = `PLAN_MODE_DENIED: ${tool} is not allowed in Plan mode.`;
    const { hooks, run, root } = await runCase(t, {
      steps: [
        () => [call(tool, input)],
        (request) => {
          const denied = lastToolResult(request);
          assert.equal(denied.isError, true);
          assert.equal(ownText(denied.text), `${prefix}${reason}`);
          return [say("Understood.")];
        },
      ],
      hooks: [["PreToolUse", tool, "pre"]],
      answers: {
        pre: {
          hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason },
        },
      },
    });
    assert.equal(only(hooks, "pre").input["permission_mode"], "plan");
    assert.deepEqual(run.prompts, []);
    assert.equal(existsSync(join(root, "project", file)), false);
  });
}

test("plan mode: a subagent's tool calls go through the same hooks, in plan mode, with its agent_id and agent_type; a PreToolUse deny reaches the subagent", async (t) => {
  const reason = "PLAN_MODE_DENIED: the subagent may not write.";
  const subagentTask = "Subagent task: create sub.txt.";
  const isSubagent = (request: MessagesRequest): boolean =>
    JSON.stringify(request.messages[0]?.content ?? "").includes(subagentTask);
  // The main agent and its subagent share the fake; each step checks whose turn it is.
  const expect = (who: "main" | "subagent", step: Step): Step => (request) => {
    assert.equal(isSubagent(request) ? "subagent" : "main", who);
    return step(request);
  };
  const { hooks, run, root } = await runCase(t, {
    steps: [
      expect("main", () => [
        call("Agent", { description: "Create a file", prompt: subagentTask, subagent_type: "general-purpose", run_in_background: false }),
      ]),
      expect("subagent", () => [call("Bash", original)]),
      expect("subagent", (request) => {
        const denied = lastToolResult(request);
        assert.equal(denied.isError, true);
        // As in the main agent, a Bash deny reads behind the hook's name.
        assert.equal(ownText(denied.text), `PreToolUse:Bash hook error: ${reason}`);
        return [say("The subagent could not write.")];
      }),
      expect("main", (request) => {
        const handBack = lastToolResult(request);
        assert.equal(handBack.isError, false);
        assert.ok(handBack.text.includes("The subagent could not write."), handBack.text);
        return [say("Done.")];
      }),
    ],
    hooks: [
      ["PreToolUse", "Bash", "pre-bash"],
      ["SubagentStart", undefined, "subagent-start"],
    ],
    answers: {
      "pre-bash": {
        hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason },
      },
    },
  });
  const started = only(hooks, "subagent-start").input;
  assert.equal(started["agent_type"], "general-purpose");
  assert.equal(typeof started["agent_id"], "string");
  const pre = only(hooks, "pre-bash").input;
  assert.equal(pre["permission_mode"], "plan");
  assert.equal(pre["agent_id"], started["agent_id"]);
  assert.equal(pre["agent_type"], "general-purpose");
  assert.deepEqual(pre["tool_input"], original);
  assert.deepEqual(run.prompts, []);
  assert.equal(existsSync(join(root, "project", "original.txt")), false);
});

for (const flag of ["--bare", "--safe-mode"]) {
  test(`${flag} runs no hook from --settings: Claude Code's own prompt decides`, async (t) => {
    const message = "The test's prompt refuses the command.";
    const { hooks, run, root } = await runCase(t, {
      steps: [
        () => [call("Bash", original)],
        (request) => {
          assert.equal(ownText(lastToolResult(request).text), message);
          return [say("Refused.")];
        },
      ],
      hooks: [["PreToolUse", "Bash", "pre-bash"]],
      answers: {
        "pre-bash": {
          hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: "never seen" },
        },
      },
      extraArgs: [flag],
      onPrompt: denyPrompt(message),
    });
    assert.deepEqual(hooks.calls(), []);
    assert.deepEqual(
      run.prompts.map((prompt) => prompt.tool_name),
      ["Bash"],
    );
    assert.equal(existsSync(join(root, "project", "original.txt")), false);
  });
}

test("offline: a request Claude Code aims at another host reaches only the fake, as a refused proxy tunnel", async (t) => {
  // WebFetch asks Anthropic whether the domain is safe before fetching: that
  // request shows the proxy settings are honoured, so the stray check of every
  // other case is not vacuous.
  const { fake, run } = await runCase(t, {
    steps: [
      () => [call("WebFetch", { url: "https://example.com/", prompt: "Summarise the page." })],
      (request) => {
        const fetched = lastToolResult(request);
        assert.equal(fetched.isError, true);
        assert.equal(
          ownText(fetched.text),
          "Unable to verify if domain example.com is safe to fetch. This may be due to network restrictions or enterprise security policies blocking claude.ai.",
        );
        return [say("No network.")];
      },
    ],
    hooks: [["PreToolUse", "WebFetch", "pre-fetch"]],
    answers: {
      "pre-fetch": { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow", permissionDecisionReason: "test" } },
    },
    strayExpected: true,
  });
  assert.deepEqual(fake.stray, [{ method: "CONNECT", url: "api.anthropic.com:443" }]);
  assert.deepEqual(run.prompts, []);
});

/** Replaces what differs between runs (ids, temporary paths, generated names, durations) with stable placeholders. */
function scrub(value: unknown, root: string): unknown {
  if (typeof value === "string") {
    return value
      .replaceAll(root, "<tmp>")
      .replace(/projects\/[^/]+\//g, "projects/<project>/")
      .replace(/plans\/[a-z0-9-]+\.md/g, "plans/<name>.md")
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>");
  }
  if (Array.isArray(value)) {
    return value.map((item) => scrub(item, root));
  }
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, key === "duration_ms" ? 0 : scrub(item, root)]),
    );
  }
  return value;
}

test("hook stdin and Claude Code's own prompt: every kind's JSON matches the committed fixture", async (t) => {
  const events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop", "SessionEnd"];
  const toolEvents = new Set(["PreToolUse", "PermissionRequest", "PostToolUse"]);
  const { root, hooks, run } = await runCase(t, {
    steps: [
      () => [call("Bash", { command: "echo hello", description: "a read-only command" })],
      () => [call("Bash", original)],
      (request) => [call("Write", { file_path: planFileFrom(request), content: plan })],
      () => [call("ExitPlanMode", {})],
      () => [call("Write", { file_path: "hello.txt", content: "hello\n" })],
      () => [say("Done.")],
    ],
    hooks: [
      ...events.map((event): [string, string | undefined, string] => [event, toolEvents.has(event) ? "*" : undefined, event]),
      ["PermissionRequest", "Bash", "allow-bash"],
      ["PermissionRequest", "ExitPlanMode", "allow-exit"],
    ],
    answers: {
      "allow-bash": { hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow" } } },
      "allow-exit": {
        hookSpecificOutput: {
          hookEventName: "PermissionRequest",
          decision: {
            behavior: "allow",
            updatedInput: "$TOOL_INPUT",
            updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
          },
        },
      },
    },
  });
  const seen = {
    // Sorted by their JSON: hooks of one moment run as separate processes
    // (a tool's logging PermissionRequest hook and its PostToolUse can finish
    // in either order), and this test is about each kind's JSON, not the
    // order the processes happened to record it in.
    hookInputs: hooks
      .calls()
      .filter((hookCall) => events.includes(hookCall.label))
      .map((hookCall) => scrub(hookCall.input, root))
      .sort((left, right) => JSON.stringify(left).localeCompare(JSON.stringify(right))),
    // The can_use_tool requests (both withdrawn: the PermissionRequest hooks answered).
    prompts: run.prompts.map((prompt) => scrub(prompt, root)),
  };
  assert.equal(run.cancelled.size, 2);
  if (process.env["UPDATE_HOOK_FIXTURE"] === "1") {
    writeFileSync(fixtureFile, `${JSON.stringify(seen, null, 2)}\n`);
  }
  const committed = JSON.parse(readFileSync(fixtureFile, "utf8")) as unknown;
  assert.deepEqual(seen, committed, "the hook inputs changed; if on purpose, rerun with UPDATE_HOOK_FIXTURE=1 and review the diff");
});

const toolsFixture = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "test", "fixtures", "claude-code-tools.json");

/** The input schemas the pinned package lists (`ToolInputSchemas` of its `sdk-tools.d.ts`). */
function inputSchemas(): string[] {
  const declarations = readFileSync(join(dirname(claudeBin), "..", "sdk-tools.d.ts"), "utf8");
  const union = /export type ToolInputSchemas =([\s\S]*?);/.exec(declarations)?.[1];
  assert.ok(union !== undefined, "sdk-tools.d.ts no longer declares ToolInputSchemas");
  return union
    .split("|")
    .map((part) => part.trim())
    .filter((name) => name !== "" && name !== "ToolOutputSchemas")
    .sort();
}

test("the pinned Claude Code's tool list (its input schemas and the tools a session offers) is the committed one the adapter's table is taken from", async (t) => {
  // What a session offers: its tool list and the tools the model is shown
  // (the same in every permission mode of the pinned version).
  const offered = new Set<string>();
  const { run, fake } = await runCase(t, { steps: [() => [say("Listing.")]], hooks: [], answers: {} });
  const init = run.events.find((event) => event.type === "system" && event.subtype === "init");
  for (const name of (init?.["tools"] as string[] | undefined) ?? []) offered.add(name);
  for (const name of (fake.turns[0] as MessagesRequest).tools?.map((tool) => tool.name) ?? []) offered.add(name);
  const seen = { version: pinnedVersion, schemas: inputSchemas(), offered: [...offered].sort() };
  if (process.env["UPDATE_TOOLS_FIXTURE"] === "1") {
    writeFileSync(toolsFixture, `${JSON.stringify(seen, null, 2)}\n`);
  }
  const committed = JSON.parse(readFileSync(toolsFixture, "utf8")) as unknown;
  assert.deepEqual(
    seen,
    committed,
    "the pinned Claude Code's tools changed: rerun with UPDATE_TOOLS_FIXTURE=1, review the diff and give each new tool its row in crates/cli/src/claude_code/tools.rs (cargo test then checks the table against this file)",
  );
});

for (const [what, hook] of [
  ["a hook whose program does not exist", { type: "command", command: "/nonexistent/plan-checkpoint", args: ["claude-code", "hook"], onFailure: "block", timeout: 10 }],
  ["a hook Claude Code ends at its timeout", { type: "command", command: "/bin/sleep", args: ["30"], onFailure: "block", timeout: 2 }],
] as const) {
  test(`onFailure block: ${what} blocks the call (the model reads why) and nothing is asked; a hook spawned with args runs without a shell`, async (t) => {
    const { run } = await runCase(t, {
      steps: [
        () => [call("Bash", { command: "echo RAN", description: "a command" })],
        (request) => {
          const result = lastToolResult(request);
          assert.equal(result.isError, true, result.text);
          assert.match(ownText(result.text), /^PreToolUse:Bash hook error: \[.*\]: (failed|timed out); blocking because onFailure is "block"/);
          return [say("Blocked.")];
        },
      ],
      hooks: [],
      answers: {},
      rawHooks: { PreToolUse: [{ matcher: "*", hooks: [hook] }] },
      localSettings: { useAutoModeDuringPlan: false, permissions: { allow: ["Bash(echo RAN)"] } },
      onPrompt: () => ({ behavior: "allow", updatedInput: { command: "echo RAN" } }),
    });
    assert.deepEqual(run.prompts, []);
  });
}

test("plan mode: a permission allow rule lets a writing Bash command run without Claude Code's prompt or a PermissionRequest hook", async (t) => {
  const { run, hooks } = await runCase(t, {
    steps: [
      () => [call("Bash", original)],
      (request) => {
        const result = lastToolResult(request);
        assert.equal(result.isError, false, result.text);
        return [say("Ran.")];
      },
    ],
    hooks: [["PermissionRequest", "*", "permission"]],
    answers: {},
    localSettings: { useAutoModeDuringPlan: false, permissions: { allow: [`Bash(${original.command}:*)`] } },
    onPrompt: denyPrompt("asked"),
  });
  assert.deepEqual(run.prompts, []);
  assert.deepEqual(hooks.callsOf("permission"), []);
});

test("skills: with disableSkillShellExecution a skill's ! command is not run; a PreSkillShellCommand deny keeps one from running too", async (t) => {
  for (const [local, hooked] of [
    [{ useAutoModeDuringPlan: false, disableSkillShellExecution: true }, false],
    [{ useAutoModeDuringPlan: false }, true],
  ] as const) {
    const root = tempDir(t, "plan-checkpoint-cc-skill-");
    const marker = join(root, "project", "ran.txt");
    const skills = join(root, "project", ".claude", "skills", "probe");
    mkdirSync(skills, { recursive: true });
    writeFileSync(join(skills, "SKILL.md"), `---\nname: probe\ndescription: a probe\n---\nOutput: !\`touch ran.txt; echo BANG\`\n`);
    const scripted = new ScriptedHooks(root, { deny: { hookSpecificOutput: { hookEventName: "PreSkillShellCommand", permissionDecision: "deny", permissionDecisionReason: "not here" } } });
    let loaded = "";
    const fake = await FakeAnthropic.start(t, [
      () => [call("Skill", { skill: "probe" })],
      (request) => {
        loaded = JSON.stringify(request.messages.slice(-1));
        return [say("Loaded.")];
      },
    ]);
    const run = ClaudeRun.start(t, root, {
      fake,
      prompt: "Use the skill.",
      permissionMode: "acceptEdits",
      localSettings: local,
      settings: { hooks: { PreToolUse: [{ matcher: "Skill", hooks: [{ type: "command", command: "true" }] }], ...(hooked ? { PreSkillShellCommand: [scripted.entry("*", "deny")] } : {}) } },
    });
    await run.finish();
    assert.equal(existsSync(marker), false, "the skill's command ran");
    assert.doesNotMatch(loaded, /Output: BANG/);
    assert.match(loaded, hooked ? /not run: blocked by hook: not here/ : /shell command execution disabled by policy/);
  }
});
