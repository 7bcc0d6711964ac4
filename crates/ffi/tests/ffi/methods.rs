//! The FFI's protocol methods are the protocol's method list: every method
//! of `plan_protocol::for_each_client_method!` is a `PlanHost` method named
//! by the list's snake_case column, taking the method's params record, in
//! the Rust API and in the committed bindings; and each answers exactly as
//! the same method answers through `handle_json` (the connection).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use plan_ffi::{
    ApprovalFilter, ApprovalStatus, Clearable, CommandCancelParams, CommandGetParams, CommandRegisterParams,
    CommandRunParams, CommandStartParams, ExecutionCompleteParams, ExecutionStartParams, HostConfig,
    InitializeParams, Mode, Origin, PermissionMode, PlanApproveParams, PlanCardUrlParams, PlanDiffParams,
    PlanError, PlanGetParams, PlanHost, PlanReadArtifactParams, PlanRejectParams, PlanVerifyParams,
    PlanWithdrawParams, SessionConfigureParams, SessionCreateParams, SessionGetParams, ShellListParams,
    ShellSetDefaultParams, ToolCall, ToolConfirmParams, ToolListAwaitingParams, TurnCancelParams,
    TurnCompleteParams, TurnStartParams, TurnToolCallsParams,
};
use plan_protocol::{RequestParams, method};
use serde_json::{Value, json};

/// Calls the FFI method of a params type; implemented from the method
/// list, so it compiles only if every listed method has its FFI method,
/// taking that params record and answering that result.
trait ViaFfi: RequestParams {
    /// The FFI method's name.
    const FFI_NAME: &'static str;

    /// The answer as the wire's JSON, or the error's canonical code.
    fn call(self, host: &PlanHost) -> Result<Value, String>;
}

fn code(error: PlanError) -> String {
    match error {
        PlanError::Failed { code, .. } => plan_ffi::error_code_wire_name(code),
    }
}

macro_rules! via_ffi {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
        $(
            impl ViaFfi for $params {
                const FFI_NAME: &'static str = stringify!($snake);

                fn call(self, host: &PlanHost) -> Result<Value, String> {
                    let answer: Result<$result, PlanError> = host.$snake(self);
                    answer.map(|result| serde_json::to_value(result).unwrap()).map_err(code)
                }
            }
        )+

        /// Every listed method: its wire name, its FFI name and its params
        /// record's name.
        const LISTED: &[(&str, &str, &str)] = &[$(($name, stringify!($snake), stringify!($params))),+];
    };
}

use plan_protocol::{
    CommandRegisterResult, CommandRun, InitializeResult, PlanApproval, PlanApproveResult, PlanCardUrlResult,
    PlanDiffResult, PlanListResult, PlanReadArtifactResult, PlanRejectResult, PlanVerifyResult,
    PlanWithdrawResult, Session, ShellListResult, ShellSetDefaultResult, ToolConfirmResult,
    ToolListAwaitingResult, TurnStartResult, TurnToolCallsResult,
};

plan_protocol::for_each_client_method!(via_ffi);

/// `turn/toolCalls` -> `turn_tool_calls`: a wire name in snake_case.
fn snake_case(wire_name: &str) -> String {
    let mut snake = String::new();
    for character in wire_name.chars() {
        match character {
            '/' => snake.push('_'),
            upper if upper.is_ascii_uppercase() => {
                snake.push('_');
                snake.push(upper.to_ascii_lowercase());
            }
            other => snake.push(other),
        }
    }
    snake
}

/// `turn_tool_calls` -> `turnToolCalls`, as the Kotlin bindings name it.
fn lower_camel_case(snake: &str) -> String {
    let mut words = snake.split('_');
    let mut camel = words.next().unwrap_or_default().to_owned();
    for word in words {
        let mut characters = word.chars();
        if let Some(first) = characters.next() {
            camel.push(first.to_ascii_uppercase());
            camel.extend(characters);
        }
    }
    camel
}

fn bindings(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("bindings")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every method of `method::ALL` has its FFI method, named after it, in
/// the Rust API (`LISTED` comes from the list's expansion that calls them)
/// and in the committed Python and Kotlin bindings, which CI regenerates.
#[test]
fn every_protocol_method_is_an_ffi_method_of_the_same_name() {
    let listed: Vec<&str> = LISTED.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(listed, method::ALL, "the list the FFI expands is the protocol's");
    let python = bindings("python/generated/plan_ffi.py");
    let kotlin = bindings("kotlin/generated/dev/plancheckpoint/ffi/plan_ffi.kt");
    for (name, ffi_name, params) in LISTED {
        assert_eq!(*ffi_name, snake_case(name), "the FFI name of {name}");
        let python_method = format!("    def {ffi_name}(self, params: {params}) -> ");
        assert!(python.contains(&python_method), "Python has no `{python_method}`");
        let kotlin_method = format!("fun `{}`(`params`: {params}): ", lower_camel_case(ffi_name));
        assert!(kotlin.contains(&kotlin_method), "Kotlin has no `{kotlin_method}`");
    }
}

/// One side of the comparison: a host with its own database and workspace.
struct Side {
    _dir: tempfile::TempDir,
    workspace: String,
    host: Arc<PlanHost>,
}

impl Side {
    fn new() -> Side {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let host = PlanHost::new(
            dir.path().join("plan.db").to_string_lossy().into_owned(),
            HostConfig::default(),
        )
        .unwrap();
        Side {
            _dir: dir,
            workspace: workspace.to_string_lossy().into_owned(),
            host,
        }
    }

    /// The same params as a JSON-RPC request through `handle_json`.
    fn call_json<P: RequestParams>(&self, id: usize, params: &P) -> Result<Value, String> {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": P::METHOD, "params": params});
        let answer: Value =
            serde_json::from_str(&self.host.handle_json(request.to_string()).unwrap()).unwrap();
        match (answer.get("result"), answer.get("error")) {
            (Some(result), None) => Ok(result.clone()),
            (None, Some(error)) => Err(error["data"]["code"].as_str().unwrap().to_owned()),
            _ => panic!("neither a result nor an error: {answer}"),
        }
    }
}

/// Where the two sides may differ: ids the hosts make, their own paths
/// and the times they read. The rest must be equal, and each differing
/// value must stand for the same thing throughout (one FFI id is always
/// the same wire id).
const MADE_BY_THE_HOST: &[&str] = &[
    "id",
    "turnId",
    "approvalId",
    "executionId",
    "pendingApprovalId",
    "activeExecutionId",
    "againstApprovalId",
    "workspaceRoot",
    "path",
];
const TIMES: &[&str] = &[
    "createdAt",
    "expiresAt",
    "decidedAt",
    "startedAt",
    "endedAt",
    "at",
];

/// The scenario's two sides and what it has compared so far.
struct Comparison {
    ffi: Side,
    wire: Side,
    requests: usize,
    /// Each FFI-side host-made value, with the wire-side value it stands for.
    same_as: BTreeMap<String, String>,
    methods: BTreeSet<&'static str>,
}

impl Comparison {
    /// Runs one method with the same params (made per side by `params`)
    /// through the FFI's method on one host and through `handle_json` on
    /// the other, and asserts the answers agree: the same result JSON or
    /// the same error code.
    fn compare<P: ViaFfi>(
        &mut self,
        params: impl Fn(&Side) -> P,
    ) -> (Result<Value, String>, Result<Value, String>) {
        self.requests += 1;
        self.methods.insert(P::METHOD);
        let through_ffi = params(&self.ffi).call(&self.ffi.host);
        let through_wire = self.wire.call_json(self.requests, &params(&self.wire));
        let context = format!("{} ({}) #{}", P::METHOD, P::FFI_NAME, self.requests);
        match (&through_ffi, &through_wire) {
            (Ok(ffi), Ok(wire)) => self.agree(ffi, wire, None, &context),
            (Err(ffi), Err(wire)) => assert_eq!(ffi, wire, "{context}: the error codes differ"),
            _ => panic!("{context}: the FFI answered {through_ffi:?}, the wire {through_wire:?}"),
        }
        (through_ffi, through_wire)
    }

    /// [`Comparison::compare`] for a call that succeeds; its results (FFI,
    /// wire).
    fn both<P: ViaFfi>(&mut self, params: impl Fn(&Side) -> P) -> (Value, Value) {
        match self.compare(params) {
            (Ok(ffi), Ok(wire)) => (ffi, wire),
            refused => panic!("{}: refused: {refused:?}", P::METHOD),
        }
    }

    /// [`Comparison::compare`] for a call that fails with `expected`.
    fn refused<P: ViaFfi>(&mut self, expected: &str, params: impl Fn(&Side) -> P) {
        let (through_ffi, _) = self.compare(params);
        assert_eq!(through_ffi.err().as_deref(), Some(expected), "{}", P::METHOD);
    }

    fn agree(&mut self, ffi: &Value, wire: &Value, key: Option<&str>, context: &str) {
        match (ffi, wire) {
            (Value::Object(ffi_fields), Value::Object(wire_fields)) => {
                let keys =
                    |fields: &serde_json::Map<String, Value>| fields.keys().cloned().collect::<Vec<_>>();
                assert_eq!(
                    keys(ffi_fields),
                    keys(wire_fields),
                    "{context}: the members differ"
                );
                for (name, value) in ffi_fields {
                    self.agree(value, &wire_fields[name], Some(name), context);
                }
            }
            (Value::Array(ffi_items), Value::Array(wire_items)) => {
                assert_eq!(
                    ffi_items.len(),
                    wire_items.len(),
                    "{context}: {key:?} lengths differ"
                );
                for (ffi_item, wire_item) in ffi_items.iter().zip(wire_items) {
                    self.agree(ffi_item, wire_item, key, context);
                }
            }
            (Value::String(ffi_text), Value::String(wire_text))
                if key.is_some_and(|key| MADE_BY_THE_HOST.contains(&key)) =>
            {
                let stands_for = self
                    .same_as
                    .entry(ffi_text.clone())
                    .or_insert_with(|| wire_text.clone());
                assert_eq!(
                    stands_for, wire_text,
                    "{context}: {key:?} {ffi_text} stood for another value"
                );
            }
            (Value::Number(_), Value::Number(_)) if key.is_some_and(|key| TIMES.contains(&key)) => {}
            // A diff's header names the two approvals and their files.
            (Value::String(ffi_text), Value::String(wire_text)) if key == Some("unified") => {
                let translated = self
                    .same_as
                    .iter()
                    .fold(ffi_text.clone(), |text, (ffi, wire)| text.replace(ffi, wire));
                assert_eq!(&translated, wire_text, "{context}: the diffs differ");
            }
            _ => assert_eq!(ffi, wire, "{context}: {key:?} differs"),
        }
    }

    /// The wire-side value an FFI-side host-made value stands for.
    fn wire_of(&self, ffi_value: &str) -> String {
        self.same_as[ffi_value].clone()
    }
}

fn submit_plan(markdown: &str) -> ToolCall {
    ToolCall {
        call_id: "submit".into(),
        name: "SubmitPlan".to_owned(),
        input: json!({"title": "Split the parser", "markdown": markdown, "question": "Proceed?"}),
    }
}

/// A session's life through every method, errors included, answered by
/// the FFI's generated methods on one host and by `handle_json` on
/// another: every answer agrees (result JSON, or error code).
#[test]
fn every_method_answers_the_same_through_the_ffi_and_the_wire() {
    let mut run = Comparison {
        ffi: Side::new(),
        wire: Side::new(),
        requests: 0,
        same_as: BTreeMap::new(),
        methods: BTreeSet::new(),
    };
    let ffi_side: *const Side = &run.ffi;
    // The side's own value of a host-made id learned from the FFI side.
    macro_rules! own {
        ($side:expr, $ffi:expr, $wire:expr) => {
            if std::ptr::eq($side, ffi_side) {
                $ffi.clone()
            } else {
                $wire.clone()
            }
        };
    }

    run.both(|_| InitializeParams {
        protocol_version: 9,
        client_name: Some("comparison".to_owned()),
    });
    run.refused("PROTOCOL_VERSION_UNSUPPORTED", |_| InitializeParams {
        protocol_version: 8,
        client_name: None,
    });

    let create = |side: &Side| SessionCreateParams {
        session_id: Some("s1".into()),
        workspace_root: Some(side.workspace.clone()),
        mode: Some(Mode::Plan),
        permission_mode: None,
    };
    run.both(create);
    run.refused("SESSION_ALREADY_EXISTS", create);
    run.both(|_| SessionGetParams {
        session_id: "s1".into(),
    });
    run.refused("SESSION_NOT_FOUND", |_| SessionGetParams {
        session_id: "no-such-session".into(),
    });
    run.both(|_| SessionConfigureParams {
        session_id: "s1".into(),
        provider: Some(Clearable::Set {
            value: "anthropic".to_owned(),
        }),
        model: Some(Clearable::Clear),
        ..SessionConfigureParams::default()
    });
    run.refused("SHELL_UNKNOWN", |_| SessionConfigureParams {
        session_id: "s1".into(),
        shell: Some(Clearable::Set {
            value: "no-such-shell".to_owned(),
        }),
        ..SessionConfigureParams::default()
    });

    let (shells, _) = run.both(|_| ShellListParams {});
    let default_shell = shells["default"].as_str().unwrap().to_owned();
    run.both(|_| ShellSetDefaultParams {
        shell_id: default_shell.clone(),
    });
    run.refused("SHELL_UNKNOWN", |_| ShellSetDefaultParams {
        shell_id: "no-such-shell".to_owned(),
    });

    // A Plan turn: a denied call, then a plan.
    let (turn, wire_turn) = run.both(|_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Plan the split".to_owned(),
        origin: Origin::Interactive,
        mode: None,
    });
    let (turn, wire_turn) = (
        turn["turnId"].as_str().unwrap().to_owned(),
        wire_turn["turnId"].as_str().unwrap().to_owned(),
    );
    let write = ToolCall {
        call_id: "write".into(),
        name: "Write".to_owned(),
        input: json!({"file_path": "a.txt", "content": "x"}),
    };
    let first_plan = submit_plan("# Plan\n\n1. Split.\n");
    run.refused("SUBMIT_PLAN_NOT_ALONE", |side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: own!(side, turn, wire_turn).into(),
        calls: vec![write.clone(), first_plan.clone()],
    });
    let (decided, _) = run.both(|side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: own!(side, turn, wire_turn).into(),
        calls: vec![write.clone()],
    });
    assert_eq!(decided["results"][0]["error"]["code"], "TOOL_DENIED_IN_PLAN");
    let (decided, wire_decided) = run.both(|side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: own!(side, turn, wire_turn).into(),
        calls: vec![first_plan.clone()],
    });
    let approval = decided["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let wire_approval = wire_decided["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let this_approval = |side: &Side| -> plan_ffi::ApprovalId { own!(side, approval, wire_approval).into() };

    run.both(|side| PlanGetParams {
        approval_id: this_approval(side),
    });
    run.refused("APPROVAL_NOT_FOUND", |_| PlanGetParams {
        approval_id: "no-such-approval".into(),
    });
    run.both(|_| ApprovalFilter {
        session_id: Some("s1".into()),
        status: Some(ApprovalStatus::Pending),
        limit: None,
    });
    run.both(|side| PlanReadArtifactParams {
        approval_id: this_approval(side),
    });
    run.both(|side| PlanVerifyParams {
        approval_id: Some(this_approval(side)),
        session_id: None,
    });
    run.both(|_| PlanVerifyParams {
        approval_id: None,
        session_id: Some("s1".into()),
    });
    run.refused("INVALID_PARAMS", |side| PlanVerifyParams {
        approval_id: Some(this_approval(side)),
        session_id: Some("s1".into()),
    });
    run.both(|side| PlanDiffParams {
        approval_id: this_approval(side),
        against_approval_id: None,
    });
    // No card server: a pending approval's card is INVALID_PARAMS.
    run.refused("INVALID_PARAMS", |side| PlanCardUrlParams {
        approval_id: this_approval(side),
    });
    run.refused("APPROVAL_NOT_FOUND", |_| PlanCardUrlParams {
        approval_id: "no-such-approval".into(),
    });
    run.refused("PERMISSION_MODE_REQUIRED", |side| PlanApproveParams {
        approval_id: this_approval(side),
        permission_mode: None,
    });
    run.refused("APPROVAL_NOT_FOUND", |_| PlanApproveParams {
        approval_id: "no-such-approval".into(),
        permission_mode: Some(PermissionMode::Ask),
    });
    let (approved, _) = run.both(|side| PlanApproveParams {
        approval_id: this_approval(side),
        permission_mode: Some(PermissionMode::Ask),
    });
    let execution = approved["approval"]["executionId"].as_str().unwrap().to_owned();
    let wire_execution = run.wire_of(&execution);
    run.refused("APPROVAL_NOT_PENDING", |side| PlanCardUrlParams {
        approval_id: this_approval(side),
    });
    run.refused("EXECUTION_NOT_FOUND", |_| ExecutionStartParams {
        execution_id: "no-such-execution".into(),
    });
    run.both(|side| ExecutionStartParams {
        execution_id: own!(side, execution, wire_execution).into(),
    });
    run.both(|side| ExecutionCompleteParams {
        execution_id: own!(side, execution, wire_execution).into(),
    });

    // An Agent turn under `ask`: a Bash call awaits a person, who declines.
    let (turn, wire_turn) = run.both(|_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Do it".to_owned(),
        origin: Origin::Interactive,
        mode: None,
    });
    let (turn, wire_turn) = (
        turn["turnId"].as_str().unwrap().to_owned(),
        wire_turn["turnId"].as_str().unwrap().to_owned(),
    );
    let this_turn = |side: &Side| -> plan_ffi::TurnId { own!(side, turn, wire_turn).into() };
    let bash = ToolCall {
        call_id: "bash".into(),
        name: "Bash".to_owned(),
        input: json!({"command": "true"}),
    };
    let (decided, _) = run.both(|side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
        calls: vec![bash.clone()],
    });
    assert_eq!(decided["results"][0]["decision"], "confirm");
    let (awaiting, _) = run.both(|_| ToolListAwaitingParams {
        session_id: Some("s1".into()),
    });
    assert_eq!(awaiting["calls"][0]["callId"], "bash");
    run.refused("SESSION_NOT_FOUND", |_| ToolListAwaitingParams {
        session_id: Some("no-such-session".into()),
    });
    run.refused("TOOL_CONFIRMATION_NOT_PENDING", |side| ToolConfirmParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
        call_id: "no-such-call".into(),
        allow: true,
    });
    let (declined, _) = run.both(|side| ToolConfirmParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
        call_id: "bash".into(),
        allow: false,
    });
    assert_eq!(declined["error"]["code"], "TOOL_DECLINED");
    run.refused("COMMAND_NOT_ALLOWED", |side| CommandStartParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
        call_id: "bash".into(),
        command: "true".to_owned(),
        cwd: None,
        timeout_ms: None,
    });
    // A declined call cannot be registered for a reference-carrying
    // client, and no reference runs anything it was not given for.
    run.refused("COMMAND_NOT_ALLOWED", |side| CommandRegisterParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
        call_id: "bash".into(),
        command: "true".to_owned(),
        cwd: None,
        timeout_ms: None,
    });
    run.refused("COMMAND_NOT_ALLOWED", |_| CommandRunParams {
        session_id: "s1".into(),
        reference: "0123456789abcdef0123456789abcdef".to_owned(),
    });
    // Whatever the declined call left, both answer alike.
    let _ = run.compare(|_| CommandGetParams {
        session_id: "s1".into(),
        call_id: "bash".into(),
    });
    let _ = run.compare(|_| CommandCancelParams {
        session_id: "s1".into(),
        call_id: "bash".into(),
    });
    run.refused("COMMAND_NOT_FOUND", |_| CommandGetParams {
        session_id: "s1".into(),
        call_id: "no-such-call".into(),
    });
    run.refused("COMMAND_NOT_FOUND", |_| CommandCancelParams {
        session_id: "s1".into(),
        call_id: "no-such-call".into(),
    });
    run.both(|side| TurnCompleteParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
    });
    run.refused("TURN_NOT_ACTIVE", |side| TurnCompleteParams {
        session_id: "s1".into(),
        turn_id: this_turn(side),
    });

    // A second plan, compared with the first, then rejected; a turn cancelled.
    run.both(|_| SessionConfigureParams {
        session_id: "s1".into(),
        mode: Some(Mode::Plan),
        ..SessionConfigureParams::default()
    });
    let (turn, wire_turn) = run.both(|_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Plan again".to_owned(),
        origin: Origin::Interactive,
        mode: None,
    });
    let (turn, wire_turn) = (
        turn["turnId"].as_str().unwrap().to_owned(),
        wire_turn["turnId"].as_str().unwrap().to_owned(),
    );
    let (decided, _) = run.both(|side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: own!(side, turn, wire_turn).into(),
        calls: vec![submit_plan("# Plan\n\n1. Split.\n2. Test.\n")],
    });
    let second = decided["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let wire_second = run.wire_of(&second);
    let this_second = |side: &Side| -> plan_ffi::ApprovalId { own!(side, second, wire_second).into() };
    run.both(|side| PlanDiffParams {
        approval_id: this_second(side),
        against_approval_id: Some(this_approval(side)),
    });
    run.both(|side| PlanRejectParams {
        approval_id: this_second(side),
    });
    run.refused("APPROVAL_NOT_PENDING", |side| PlanRejectParams {
        approval_id: this_second(side),
    });
    // A third, withdrawn by its agent: no longer decidable.
    let (turn, wire_turn) = run.both(|_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Plan a third time".to_owned(),
        origin: Origin::Interactive,
        mode: None,
    });
    let (turn, wire_turn) = (
        turn["turnId"].as_str().unwrap().to_owned(),
        wire_turn["turnId"].as_str().unwrap().to_owned(),
    );
    let (decided, _) = run.both(|side| TurnToolCallsParams {
        session_id: "s1".into(),
        turn_id: own!(side, turn, wire_turn).into(),
        calls: vec![submit_plan("# Plan\n\n1. Withdraw me.\n")],
    });
    let third = decided["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let wire_third = run.wire_of(&third);
    let this_third = |side: &Side| -> plan_ffi::ApprovalId { own!(side, third, wire_third).into() };
    run.both(|side| PlanWithdrawParams {
        approval_id: this_third(side),
    });
    run.refused("APPROVAL_NOT_PENDING", |side| PlanApproveParams {
        approval_id: this_third(side),
        permission_mode: Some(PermissionMode::Auto),
    });
    run.both(|_| ApprovalFilter::default());
    run.refused("PLAN_REQUIRES_INTERACTIVE_SESSION", |_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Plan unattended".to_owned(),
        origin: Origin::Scheduled,
        mode: None,
    });
    run.both(|_| TurnStartParams {
        session_id: "s1".into(),
        prompt: "Plan once more".to_owned(),
        origin: Origin::Interactive,
        mode: None,
    });
    run.both(|_| TurnCancelParams {
        session_id: "s1".into(),
    });
    run.refused("SESSION_NOT_FOUND", |_| TurnCancelParams {
        session_id: "no-such-session".into(),
    });

    assert_eq!(
        run.methods.iter().copied().collect::<BTreeSet<_>>(),
        method::ALL.into_iter().collect::<BTreeSet<_>>(),
        "the scenario calls every method"
    );
}
