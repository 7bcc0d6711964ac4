// The pi extension: it gives pi the plan checkpoint by reporting every pi
// run as a host turn and every assistant batch to `turn/toolCalls`, and by
// carrying out what the sidecar decides. Policy is the sidecar's: which
// tools a Plan turn may use, whether SubmitPlan is alone, whether a run
// without a person may plan, what an approval grants, which calls a
// permission mode has a person confirm. Every bash call of a
// session that uses the checkpoint runs on the host (Plan turns: started by
// `turn/toolCalls`; Agent turns: `command/start`), never as pi's own bash.
// This module translates, shows dialogs and carries out decisions; it adds
// no rule of its own. A session that never asked for Plan mode is left to
// plain pi: no sidecar, no database, no lock.

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { createBashToolDefinition } from "@mariozechner/pi-coding-agent";
import { Text } from "@mariozechner/pi-tui";
import { Type } from "typebox";

import { escapeForDisplay, PERMISSION_MODE_VALUES, type CommandRun, type PermissionMode, type PlanApproval } from "@plan-checkpoint/client";

import { approvalLine, confirmCall, decideApproval, type Decision } from "./dialog.js";
import { hostToolInput, hostToolName } from "./names.js";
import {
  DATABASE_PATH,
  denied,
  describeError,
  errorCode,
  fromResult,
  processSidecar,
  type CallDecision,
  type HostCommand,
  type SessionState,
} from "./sidecar.js";

const PLAN_PROMPT = [
  "You are in Plan mode. Explore the project read-only (read, grep, find, ls; bash runs in a read-only sandbox where writes fail),",
  "then call SubmitPlan with a title, the plan as Markdown and a question for the user.",
  "SubmitPlan must be the only tool call in its message. Do not edit or write files: those tools are denied until a person approves the plan.",
].join(" ");

/** The host session id of the pi session `ctx` belongs to. */
function hostSessionId(ctx: ExtensionContext): string {
  return `pi-${ctx.sessionManager.getSessionId()}`;
}

/** The custom entry pi saves in a session once it uses the checkpoint, so a resumed session uses it again. */
const SESSION_ENTRY = "plan-checkpoint";

/**
 * The print-mode refusal in pi's words: the host speaks of scheduled tasks,
 * which is how the package reports a pi run without a UI.
 */
const NO_UI_PLAN =
  "PLAN_REQUIRES_INTERACTIVE_SESSION: Plan mode needs a person to approve the plan, and this pi has no UI (`pi -p`, `--mode json`):" +
  " run pi interactively or in RPC mode, or leave out --plan";

/**
 * Whether pi will refuse the prompt itself once `input` returns: it has no
 * model, or no credentials for the model's provider (pi then says "No API
 * key found for the selected model"). Only a sure refusal counts.
 */
function piRefusesPrompt(ctx: ExtensionContext): boolean {
  const model = ctx.model;
  return model === undefined || !ctx.modelRegistry.hasConfiguredAuth(model);
}

/**
 * What a SubmitPlan outside Plan mode is told, person and model alike: pi
 * offers the tool only in Plan mode, and a call made anyway is refused.
 */
const NOT_IN_PLAN_MODE = "SubmitPlan was refused: not in Plan mode; use /plan to enter Plan mode, then plan and submit again";

/** Writes a message where the user sees it: pi's UI, or stderr when there is none (print mode). */
function tell(ctx: ExtensionContext, message: string, level: "info" | "warning" | "error"): void {
  if (ctx.hasUI) ctx.ui.notify(message, level);
  else process.stderr.write(`plan-checkpoint: ${message}\n`);
}

export default function planCheckpoint(pi: ExtensionAPI): void {
  const sidecar = processSidecar();

  pi.registerFlag("plan", {
    description: "Start in Plan mode (write --plan=true, or put the prompt first: a bare --plan takes the next word as its value)",
    type: "boolean",
    default: false,
  });

  /**
   * Whether this pi session uses the checkpoint: it asked for Plan mode, or
   * has a host session (in this process, or saved in the pi session). Until
   * then the package starts nothing.
   */
  function engaged(ctx: ExtensionContext): boolean {
    const state = sidecar.sessions.get(hostSessionId(ctx));
    if (state?.session !== undefined || state?.planRefusedBecause !== undefined) return true;
    return ctx.sessionManager.getEntries().some((entry) => entry.type === "custom" && entry.customType === SESSION_ENTRY);
  }

  /** The sidecar and this session's state, starting the sidecar and creating the host session on first use. */
  async function connect(ctx: ExtensionContext) {
    const client = await sidecar.track(sidecar.client(ctx.cwd));
    const state = sidecar.state(hostSessionId(ctx));
    if (state.session === undefined) {
      if (!ctx.sessionManager.getEntries().some((entry) => entry.type === "custom" && entry.customType === SESSION_ENTRY)) {
        pi.appendEntry(SESSION_ENTRY, { sessionId: state.sessionId });
      }
      try {
        state.session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
      } catch (error) {
        if (errorCode(error) !== "SESSION_NOT_FOUND") throw error;
        // Outside Plan mode pi behaves as it does without the package: the
        // session starts in Agent mode with everything allowed.
        state.session = await sidecar.track(
          client.sessionCreate({ sessionId: state.sessionId, workspaceRoot: ctx.cwd, mode: "agent", permissionMode: "auto" }),
        );
      }
    }
    await endAbandonedTurn(ctx, state);
    return { client, state };
  }

  async function setMode(ctx: ExtensionContext, mode: "plan" | "agent", permissionMode?: PermissionMode): Promise<boolean> {
    // Asking for Plan mode is remembered until it works or is turned off;
    // turning it off clears the refusal even when the host is unreachable.
    sidecar.state(hostSessionId(ctx)).planRefusedBecause = undefined;
    try {
      const { client, state } = await connect(ctx);
      state.session = await sidecar.track(
        client.sessionConfigure({ sessionId: state.sessionId, mode, ...(permissionMode === undefined ? {} : { permissionMode }) }),
      );
      if (mode === "plan") {
        // pi ships grep, find and ls inactive; a Plan turn may use them. pi
        // 0.73 snapshots the tools when a run starts, so this applies from
        // the next prompt on.
        pi.setActiveTools([...new Set([...pi.getActiveTools(), "grep", "find", "ls", "SubmitPlan"])]);
      }
      showStatus(ctx, state);
      return true;
    } catch (error) {
      if (mode === "plan") {
        sidecar.state(hostSessionId(ctx)).planRefusedBecause = describeError(error);
        tell(ctx, `could not enter Plan mode: ${describeError(error)}. Prompts are refused until /plan succeeds or /plan off turns Plan mode off.`, "error");
      } else {
        tell(ctx, `could not switch to Agent mode: ${describeError(error)}`, "error");
      }
      return false;
    }
  }

  /**
   * Offers SubmitPlan to the model only in Plan mode. (pi 0.73 snapshots
   * the tools when a run starts, so a change applies from the next run on.)
   */
  function offerSubmitPlan(inPlanMode: boolean): void {
    const active = pi.getActiveTools();
    if (active.includes("SubmitPlan") === inPlanMode) return;
    pi.setActiveTools(inPlanMode ? [...active, "SubmitPlan"] : active.filter((name) => name !== "SubmitPlan"));
  }

  function showStatus(ctx: ExtensionContext, state: SessionState): void {
    offerSubmitPlan(state.session?.mode === "plan");
    if (!ctx.hasUI) return;
    const session = state.session;
    const text = session === undefined ? undefined : session.mode === "plan" ? "plan mode" : `agent (${session.permissionMode})`;
    ctx.ui.setStatus("plan-checkpoint", text);
  }

  sidecar.onLost = (message) => process.stderr.write(`plan-checkpoint: ${message}\n`);

  pi.on("session_start", async (_event, ctx) => {
    const state = sidecar.state(hostSessionId(ctx));
    offerSubmitPlan(state.session?.mode === "plan");
    if (pi.getFlag("plan") === true) {
      if (state.session?.mode !== "plan") await setMode(ctx, "plan");
      return;
    }
    // A session that used the checkpoint before (resumed, or this process's)
    // may be in Plan mode: the sidecar starts now, so the status is right.
    if (!engaged(ctx) || state.session !== undefined) return;
    try {
      await connect(ctx);
      showStatus(ctx, state);
    } catch (error) {
      tell(ctx, `this session uses the plan checkpoint, which could not start: ${describeError(error)}`, "warning");
    }
  });

  pi.on("session_shutdown", async (event) => {
    // Only quitting ends the sidecar: /new, /resume, /fork and /reload
    // re-create this extension in the same process, and a new sidecar would
    // interrupt every pending approval.
    if (event.reason === "quit") await sidecar.close();
  });

  // Each pi run is one host turn, started before the model is asked
  // anything, so a refusal (PLAN_REQUIRES_INTERACTIVE_SESSION in print mode,
  // SESSION_BUSY with an approval pending) stops the run before it begins.
  pi.on("input", async (event, ctx) => {
    if (!ctx.isIdle()) return { action: "continue" };
    if (!engaged(ctx)) return { action: "continue" };
    const refusedPlan = sidecar.sessions.get(hostSessionId(ctx))?.planRefusedBecause;
    if (refusedPlan !== undefined) {
      return refuse(ctx, `Plan mode was asked for and could not be entered (${refusedPlan}); the prompt was not run. Try /plan again, or /plan off to leave Plan mode.`);
    }
    // pi refuses a prompt itself, after this handler, when it has no model
    // or no API key for it ("No API key found for the selected model"): no
    // run begins, so no agent_end would end a host turn started here. Such
    // a prompt starts none; should pi find a key after all,
    // before_agent_start starts the turn.
    if (piRefusesPrompt(ctx)) return { action: "continue" };
    return beginTurn(ctx, event.text);
  });

  /**
   * Starts the host turn of the pi run about to begin (or the execution an
   * approval queued), and marks the run checked. A refusal is returned as
   * the `input` result that stops the run.
   */
  async function beginTurn(ctx: ExtensionContext, prompt: string) {
    let connected;
    try {
      connected = await connect(ctx);
    } catch (error) {
      const state = sidecar.sessions.get(hostSessionId(ctx));
      if (state?.session?.mode !== "agent") {
        return refuse(ctx, `Plan mode needs the plan checkpoint: ${describeError(error)}`);
      }
      tell(ctx, `running without the plan checkpoint (bash is refused until it is back): ${describeError(error)}`, "warning");
      return { action: "continue" as const };
    }
    const { client, state } = connected;
    state.decisions.clear();
    state.turnEndedBecause = undefined;
    state.runBegan = false;
    try {
      const session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
      state.session = session;
      const active = session.activeTurn;
      if (active !== null && active.kind === "execution" && session.activeExecutionId !== null) {
        // An approval decided with /plan-decide queued this execution; this
        // run carries it out.
        const approval = await sidecar.track(client.executionStart({ executionId: session.activeExecutionId }));
        state.turnId = active.turnId;
        state.session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
        tell(ctx, `executing the approved plan "${escapeForDisplay(approval.title)}" (${approval.permissionMode ?? "?"})`, "info");
      } else {
        const turn = await sidecar.track(client.turnStart({ sessionId: state.sessionId, prompt, origin: ctx.hasUI ? "interactive" : "background" }));
        state.turnId = turn.turnId;
      }
      state.runChecked = true;
      showStatus(ctx, state);
      return { action: "continue" as const };
    } catch (error) {
      // A turn started before the failure is ended: the run will not happen.
      const started = state.turnId;
      state.turnId = undefined;
      state.runChecked = false;
      if (started !== undefined) await endHostTurn(ctx, state, started, false);
      if (errorCode(error) === "PLAN_REQUIRES_INTERACTIVE_SESSION" && !ctx.hasUI) return refuse(ctx, NO_UI_PLAN);
      const hint = errorCode(error) === "SESSION_BUSY" && state.session?.pendingApprovalId ? " (an approval is pending: decide it with /plan-decide)" : "";
      return refuse(ctx, `${describeError(error)}${hint}`);
    }
  }

  /**
   * Ends the host turn `turnId` of a pi run that is over, however it ended.
   * A run that began ends as it went: an execution completes, a turn
   * completes unless an approval is pending (which keeps it open until it
   * is decided or expires). A turn that cannot complete (a command still
   * running after an abort) and a turn whose run never began are cancelled:
   * the host kills their commands and ends them, and an execution that
   * never ran is recorded interrupted. Never throws: a failure is told.
   */
  async function endHostTurn(ctx: ExtensionContext, state: SessionState, turnId: string, began: boolean): Promise<void> {
    try {
      const client = await sidecar.track(sidecar.client(ctx.cwd));
      const session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
      state.session = session;
      if (session.activeTurn?.turnId !== turnId || session.pendingApprovalId !== null) return;
      const execution = session.activeTurn.kind === "execution" ? session.activeExecutionId : null;
      try {
        if (!began) throw new Error("pi did not run the prompt");
        state.session =
          execution !== null
            ? (await sidecar.track(client.executionComplete({ executionId: execution })), await sidecar.track(client.sessionGet({ sessionId: state.sessionId })))
            : await sidecar.track(client.turnComplete({ sessionId: state.sessionId, turnId }));
      } catch (error) {
        state.session = await sidecar.track(client.turnCancel({ sessionId: state.sessionId }));
        if (execution !== null || began) {
          tell(ctx, `the turn was cancelled${execution !== null ? " (the approved plan's execution is recorded interrupted)" : ""}: ${describeError(error)}`, "warning");
        }
      }
      showStatus(ctx, state);
    } catch (error) {
      tell(ctx, `could not end the turn: ${describeError(error)}`, "warning");
    }
  }

  /**
   * Ends the host turn of a run pi never began (it refused or failed the
   * prompt after `input`): once pi is idle again, that turn has no run.
   */
  async function endAbandonedTurn(ctx: ExtensionContext, state: SessionState): Promise<void> {
    const turnId = state.turnId;
    if (turnId === undefined || state.runBegan || !ctx.isIdle()) return;
    state.turnId = undefined;
    state.runChecked = false;
    await endHostTurn(ctx, state, turnId, false);
  }

  function refuse(ctx: ExtensionContext, message: string) {
    tell(ctx, message, "error");
    if (!ctx.hasUI) process.exitCode = 1;
    return { action: "handled" as const };
  }

  pi.on("before_agent_start", async (event, ctx) => {
    if (!engaged(ctx)) return;
    let state = sidecar.state(hostSessionId(ctx));
    if (!state.runChecked) {
      // `input` started no turn (pi looked unable to run the prompt), yet pi
      // runs it: the turn starts now. A refusal cannot stop the run here, so
      // it is aborted and every call of it denied.
      const started = await beginTurn(ctx, "prompt" in event && typeof event.prompt === "string" ? event.prompt : "");
      state = sidecar.state(hostSessionId(ctx));
      if (started.action !== "continue" || !state.runChecked) {
        state.runChecked = true;
        state.turnId = undefined;
        state.turnEndedBecause ??= "the plan checkpoint refused to start this run";
        ctx.abort();
        return;
      }
    }
    state.runBegan = true;
    if (state.session?.mode !== "plan") return;
    return { systemPrompt: `${event.systemPrompt}\n\n${PLAN_PROMPT}` };
  });

  // The whole batch goes to the sidecar at once, when the assistant message
  // is final and before any of its calls runs, so "SubmitPlan alone in its
  // batch" is decided on exactly what the model sent.
  pi.on("message_end", async (event, ctx) => {
    const message = event.message;
    if (message.role !== "assistant") return;
    const state = sidecar.sessions.get(hostSessionId(ctx));
    if (state?.runChecked !== true) return;
    const calls = message.content.flatMap((part) => (part.type === "toolCall" ? [part] : []));
    if (calls.length === 0) return;
    // An aborted or failed message may hold a partial call (a half-written
    // SubmitPlan): nothing of it reaches the sidecar, and tool_call blocks
    // whatever pi might still try to run.
    if (message.stopReason !== "toolUse") return;
    const turnId = state.turnId;
    if (turnId === undefined) {
      const why = state.turnEndedBecause ?? "this run has no turn in the plan checkpoint";
      for (const call of calls) state.decisions.set(call.id, Promise.resolve(denied(`TURN_NOT_ACTIVE: ${why}; start a new prompt`)));
      return;
    }
    const request = sidecar.track(
      sidecar.client(ctx.cwd).then((client) =>
        client.turnToolCalls({
          sessionId: state.sessionId,
          turnId,
          calls: calls.map((call) => ({ callId: call.id, name: hostToolName(call.name), input: hostToolInput(call.name, call.arguments) })),
        }),
      ),
    );
    for (const call of calls) {
      state.decisions.set(
        call.id,
        request.then(
          ({ results }) => {
            const result = results.find((entry) => entry.callId === call.id);
            if (result === undefined) return denied(`INTERNAL: the plan checkpoint did not decide call ${call.id}`);
            if (result.command !== null) sidecar.hostCommand(state.sessionId, call.id).run = result.command;
            return fromResult(result);
          },
          // A refused batch (SUBMIT_PLAN_NOT_ALONE) refuses every call in it.
          (error: unknown) => denied(describeError(error)),
        ),
      );
    }
    await request.catch(() => undefined);
  });

  pi.on("tool_call", async (event, ctx) => {
    const state = sidecar.sessions.get(hostSessionId(ctx));
    if (state?.runChecked !== true) return;
    const decision = await state.decisions.get(event.toolCallId);
    if (decision === undefined) {
      return { block: true, reason: "NOT_DECIDED: the plan checkpoint never saw this call (its message did not end in tool calls)" };
    }
    switch (decision.kind) {
      case "allow":
        return;
      case "deny": {
        if (event.toolName === "SubmitPlan" && state.session?.mode !== "plan") {
          tell(ctx, NOT_IN_PLAN_MODE, "warning");
          return { block: true, reason: `${NOT_IN_PLAN_MODE} (${decision.reason})` };
        }
        const hint =
          state.session?.mode === "plan" && state.turnId !== undefined
            ? " You are in Plan mode: explore read-only (read, grep, find, ls, bash in a read-only sandbox) and call SubmitPlan alone when the plan is ready."
            : "";
        return { block: true, reason: `${decision.reason}.${hint}` };
      }
      case "confirm": {
        // The host asks for a person's answer (it never does in a turn
        // without one): the dialog asks, tool/confirm records the answer,
        // and the host's new decision is the call's.
        const turnId = state.turnId;
        const mode = state.session?.permissionMode ?? "ask";
        const allow = ctx.hasUI && (await confirmCall(ctx, event.toolName, event.input, mode));
        let answer: CallDecision;
        try {
          if (turnId === undefined) throw new Error("TURN_NOT_ACTIVE: this run has no turn in the plan checkpoint");
          const client = await sidecar.track(sidecar.client(ctx.cwd));
          answer = fromResult(await sidecar.track(client.toolConfirm({ sessionId: state.sessionId, turnId, callId: event.toolCallId, allow })));
        } catch (error) {
          answer = denied(describeError(error));
        }
        state.decisions.set(event.toolCallId, Promise.resolve(answer));
        if (answer.kind === "allow") return;
        return { block: true, reason: answer.kind === "deny" ? `${answer.reason} (permission mode ${mode})` : "the plan checkpoint did not allow this call" };
      }
    }
  });

  pi.on("agent_end", async (_event, ctx) => {
    const state = sidecar.sessions.get(hostSessionId(ctx));
    if (state?.runChecked !== true) return;
    state.runChecked = false;
    const turnId = state.turnId;
    state.turnId = undefined;
    if (turnId !== undefined) await endHostTurn(ctx, state, turnId, true);
  });

  pi.registerTool({
    name: "SubmitPlan",
    label: "Submit plan",
    description:
      "Submit the plan for the user's approval (Plan mode only). Must be the only tool call in its message. " +
      "The plan is saved as an immutable Markdown file and the user approves it (choosing a permission mode) or rejects it.",
    promptSnippet: "Submit a finished plan for approval (Plan mode)",
    promptGuidelines: ["In Plan mode, call SubmitPlan alone in its message once the plan is ready; never combine SubmitPlan with other tool calls."],
    parameters: Type.Object({
      title: Type.String({ description: "A one-line title" }),
      markdown: Type.String({ description: "The plan, in Markdown" }),
      question: Type.String({ description: "The question the user answers, e.g. 'Proceed with this plan?'" }),
    }),
    // pi shows a tool call and its result with these; without them pi 1.x
    // prints the raw arguments, which are the agent's untrusted text.
    renderCall(args, theme, context) {
      const text = context.lastComponent instanceof Text ? context.lastComponent : new Text("", 0, 0);
      const title = typeof args.title === "string" ? ` ${escapeForDisplay(args.title)}` : "";
      const question = typeof args.question === "string" ? `\n${theme.fg("muted", escapeForDisplay(args.question))}` : "";
      text.setText(`${theme.fg("toolTitle", theme.bold("SubmitPlan"))}${title}${question}`);
      return text;
    },
    renderResult(result, _options, theme, context) {
      const text = context.lastComponent instanceof Text ? context.lastComponent : new Text("", 0, 0);
      const body = result.content.map((part) => (part.type === "text" ? escapeForDisplay(part.text) : `[${part.type}]`)).join("\n");
      text.setText(context.isError ? theme.fg("error", body) : theme.fg("toolOutput", body));
      return text;
    },
    async execute(toolCallId, _params, signal, _onUpdate, ctx) {
      const state = sidecar.sessions.get(hostSessionId(ctx));
      if (!engaged(ctx) || state?.session?.mode !== "plan") {
        // A session that never used the checkpoint, or is in Agent mode.
        tell(ctx, NOT_IN_PLAN_MODE, "warning");
        throw new Error(NOT_IN_PLAN_MODE);
      }
      const decision = await state.decisions.get(toolCallId);
      if (decision === undefined || decision.kind !== "allow" || decision.approval === null) {
        throw new Error(decision?.kind === "deny" ? decision.reason : "SubmitPlan was not accepted by the plan checkpoint");
      }
      const client = await sidecar.track(sidecar.client(ctx.cwd));
      const outcome = await decideApproval(ctx, sidecar, client, state, decision.approval, signal);
      return finishSubmit(ctx, state, outcome, client);
    },
  });

  async function finishSubmit(
    ctx: ExtensionContext,
    state: SessionState,
    outcome: Decision,
    client: Awaited<ReturnType<typeof sidecar.client>>,
  ) {
    const text = (message: string, terminate: boolean) => ({
      content: [{ type: "text" as const, text: message }],
      details: { outcome: outcome.kind, approvalId: outcome.approval.id },
      terminate,
    });
    switch (outcome.kind) {
      case "approved": {
        const executionId = outcome.approval.executionId;
        if (executionId !== null) {
          try {
            await sidecar.track(client.executionStart({ executionId }));
            state.turnId = outcome.session.activeTurn?.turnId;
            state.session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
          } catch (error) {
            state.turnId = undefined;
            state.turnEndedBecause = describeError(error);
            return text(`The plan was approved but its execution could not start: ${describeError(error)}. Stop here.`, true);
          }
        }
        showStatus(ctx, state);
        return text(
          `The user approved the plan with permission mode ${outcome.mode}. You are now in Agent mode: carry out the plan.` +
            ` ${modeSentence(outcome.mode)}`,
          false,
        );
      }
      case "rejected":
        state.turnId = undefined;
        state.turnEndedBecause = "the user rejected the plan, which ended the Plan turn";
        return text("The user rejected the plan. The Plan turn is over: stop now and wait for the user; a revision is a new prompt.", true);
      case "expired":
        state.turnId = undefined;
        state.turnEndedBecause = "the plan approval expired (PLAN_APPROVAL_TIMEOUT), which ended the Plan turn";
        return text("PLAN_APPROVAL_TIMEOUT: nobody decided before the deadline, so the plan expired and the Plan turn is over. Stop now.", true);
      case "dismissed":
        return text(
          `The approval dialog was closed without a decision. The plan stays pending until ${new Date(outcome.approval.expiresAt).toISOString()};` +
            " the user can decide it with /plan-decide. Stop now and wait.",
          true,
        );
      case "unavailable":
        state.turnId = undefined;
        state.turnEndedBecause = `the approval is ${outcome.approval.status}`;
        return text(`The plan approval is ${outcome.approval.status}${outcome.approval.errorCode ? ` (${outcome.approval.errorCode})` : ""}. Stop now.`, true);
    }
  }

  // Every bash call of a session that uses the checkpoint runs on the host:
  // a Plan turn's was started by the host when it answered the batch (in its
  // read-only sandbox); an Agent turn's is started here with command/start
  // once the call is allowed (confirmed first where it had to be), so it is
  // bounded, audited, killed with the host and, under auto, sandboxed. This
  // tool streams the run's output into pi. Only a session that never used
  // the checkpoint gets pi's own bash.
  const builtinBash = createBashToolDefinition(process.cwd());
  pi.registerTool({
    ...builtinBash,
    async execute(toolCallId, params, signal, onUpdate, ctx) {
      if (!engaged(ctx)) return createBashToolDefinition(ctx.cwd).execute(toolCallId, params, signal, onUpdate, ctx);
      const state = sidecar.state(hostSessionId(ctx));
      const turnId = state.turnId;
      if (!state.runChecked || turnId === undefined) {
        throw new Error("bash runs only on the plan checkpoint's host, and this run has no turn there (the sidecar could not be reached, or the turn ended)");
      }
      const decision = await state.decisions.get(toolCallId);
      if (decision?.kind !== "allow") throw new Error(decision?.kind === "deny" ? decision.reason : "the plan checkpoint did not allow this bash call");
      const entry = sidecar.hostCommand(state.sessionId, toolCallId);
      if (decision.command === null) {
        const client = await sidecar.track(sidecar.client(ctx.cwd));
        const input = hostToolInput("bash", params);
        entry.run = await sidecar.track(
          client.commandStart({
            sessionId: state.sessionId,
            turnId,
            callId: toolCallId,
            command: params.command,
            ...(typeof input.timeoutMs === "number" ? { timeoutMs: input.timeoutMs } : {}),
          }),
        );
      }
      return streamHostCommand(ctx, state, toolCallId, entry, signal, onUpdate);
    },
  });

  async function streamHostCommand(
    ctx: ExtensionContext,
    state: SessionState,
    callId: string,
    entry: HostCommand,
    signal: AbortSignal | undefined,
    onUpdate: ((update: { content: { type: "text"; text: string }[]; details: undefined }) => void) | undefined,
  ) {
    const onAbort = (): void => {
      void sidecar.track(sidecar.client(ctx.cwd).then((client) => client.commandCancel({ sessionId: state.sessionId, callId }))).catch(() => undefined);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const ended = await new Promise<NonNullable<HostCommand["ended"]>>((resolve, reject) => {
        let shown = 0;
        const check = (): void => {
          if (entry.output.length > shown) {
            shown = entry.output.length;
            onUpdate?.({ content: [{ type: "text", text: entry.output.join("") }], details: undefined });
          }
          if (entry.ended !== undefined) {
            entry.listeners.delete(check);
            resolve(entry.ended);
          } else if (entry.lost) {
            entry.listeners.delete(check);
            reject(new Error(`${entry.output.join("")}\n\nSIDECAR_EXITED: the plan checkpoint's sidecar ended while the command ran; the command died with it`));
          }
        };
        entry.listeners.add(check);
        check();
      });
      const output = entry.output.join("");
      const truncated = ended.truncated ? "\n[output truncated by the host's output cap]" : "";
      const body = `${output.length > 0 ? output : "(no output)"}${truncated}`;
      if (ended.state === "exited" && ended.exitCode === 0) {
        return { content: [{ type: "text" as const, text: body }], details: undefined };
      }
      const how =
        ended.state === "exited"
          ? `Command exited with code ${ended.exitCode ?? "?"}`
          : `Command ${ended.state}${ended.errorCode !== null ? ` (${ended.errorCode})` : ""}`;
      throw new Error(`${body}\n\n${how}.${sandboxSentence(ended)}`);
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  pi.registerCommand("plan", {
    description: `Enter Plan mode; /plan off [${PERMISSION_MODE_VALUES.join("|")}] returns to Agent mode (with that permission mode)`,
    handler: async (args, ctx) => {
      const [word, modeWord] = args.trim().split(/\s+/);
      if (word !== "off") {
        if (await setMode(ctx, "plan")) {
          tell(ctx, `Plan mode: the agent plans read-only and submits one plan for your approval (database ${DATABASE_PATH})`, "info");
        }
        return;
      }
      const permissionMode = PERMISSION_MODE_VALUES.find((mode) => mode === modeWord);
      if (modeWord !== undefined && permissionMode === undefined) {
        tell(ctx, `unknown permission mode "${modeWord}": use ${PERMISSION_MODE_VALUES.join(", ")}`, "error");
        return;
      }
      if (await setMode(ctx, "agent", permissionMode)) {
        const state = sidecar.sessions.get(hostSessionId(ctx));
        tell(ctx, `Agent mode (permission mode ${state?.session?.permissionMode ?? "?"})`, "info");
      }
    },
  });

  pi.registerCommand("plan-list", {
    description: "List this session's plan approvals",
    handler: async (_args, ctx) => {
      try {
        const { client, state } = await connect(ctx);
        const { approvals } = await sidecar.track(client.planList({ sessionId: state.sessionId, limit: 20 }));
        tell(ctx, approvals.length === 0 ? "no plan approvals in this session" : approvals.map((row) => approvalLine(ctx.cwd, row)).join("\n"), "info");
      } catch (error) {
        tell(ctx, `could not list approvals: ${describeError(error)}`, "error");
      }
    },
  });

  pi.registerCommand("plan-decide", {
    description: "Decide a pending plan approval whose dialog was closed (until it expires)",
    handler: async (args, ctx) => {
      if (!ctx.hasUI) {
        tell(ctx, "/plan-decide needs a UI to show the approval dialog", "error");
        return;
      }
      try {
        const { client, state } = await connect(ctx);
        const wanted = args.trim();
        // An id is the host's to resolve, whole (`plan/get`); without one,
        // the session's pending approval (the host keeps at most one).
        const approval: PlanApproval | undefined =
          wanted.length > 0
            ? await sidecar.track(client.planGet({ approvalId: wanted }))
            : (await sidecar.track(client.planList({ sessionId: state.sessionId, status: "pending" }))).approvals[0];
        if (approval === undefined) {
          tell(ctx, "no pending plan approval in this session", "info");
          return;
        }
        if (approval.sessionId !== state.sessionId || approval.status !== "pending") {
          tell(ctx, `${approval.id} is not a pending approval of this session (${approval.status})`, "info");
          return;
        }
        const outcome = await decideApproval(ctx, sidecar, client, state, approval, undefined);
        state.session = await sidecar.track(client.sessionGet({ sessionId: state.sessionId }));
        showStatus(ctx, state);
        if (outcome.kind === "approved") {
          pi.sendUserMessage(
            `The plan "${escapeForDisplay(approval.title)}" was approved with permission mode ${outcome.mode}. Carry it out now` +
              (approval.artifact !== null ? ` (the plan is in ${approval.artifact.path}).` : "."),
          );
        } else {
          tell(ctx, `plan ${outcome.kind}: ${escapeForDisplay(approval.title)}`, "info");
        }
      } catch (error) {
        tell(ctx, `could not decide: ${describeError(error)}`, "error");
      }
    },
  });
}

/** Where a host-run command ran, for the model reading a failure. */
function sandboxSentence(run: CommandRun): string {
  switch (run.sandbox) {
    case "read-only":
      return " It ran in the Plan sandbox (read-only: writes outside $TMPDIR are refused by the kernel).";
    case "workspace-write":
      return " It ran in the workspace-write sandbox (writes outside the workspace and $TMPDIR are refused by the kernel).";
    case "none":
      return "";
  }
}

function modeSentence(mode: PermissionMode): string {
  switch (mode) {
    case "ask":
      return "Each edit, write and bash call is confirmed by the user.";
    case "accept-edits":
      return "Edits and writes are allowed; each bash call is confirmed by the user.";
    case "auto":
      return "Edits, writes and bash are allowed.";
  }
}
