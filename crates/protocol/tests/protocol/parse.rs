//! Method dispatch, params strictness and the error mapping.

use plan_core::ErrorCode;
use plan_protocol::{
    CanonicalCode, Clearable, ClientRequest, ErrorObject, PermissionMode, PlanApproveParams, ProtocolError,
    Request, RequestId, Response, ResponseOutcome, SessionConfigureParams, jsonrpc_code, method,
    parse_request,
};
use serde_json::{Value, json};

use crate::golden::requests;

fn code_of(result: Result<ClientRequest, ProtocolError>) -> ErrorCode {
    result.unwrap_err().code
}

#[test]
fn every_golden_request_parses_back_to_itself() {
    for (name, request) in requests() {
        let envelope = Request::new(RequestId::String(name.to_owned()), &request).unwrap();
        let line = serde_json::to_string(&envelope).unwrap();
        let read: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(read, envelope, "{name}");
        assert_eq!(read.parse().unwrap(), request, "{name}");
        let tagged: ClientRequest = serde_json::from_value(serde_json::to_value(&request).unwrap()).unwrap();
        assert_eq!(tagged, request, "{name}");
    }
}

#[test]
fn unknown_methods_are_method_not_found() {
    for unknown in [
        "plan/requestChanges",
        "",
        "Initialize",
        "plan/approve/",
        "plan",
        "exit_plan_mode",
    ] {
        let error = parse_request(unknown, json!({})).unwrap_err();
        assert_eq!(error.code, ErrorCode::MethodNotFound, "{unknown}");
        let object = ErrorObject::from(&error);
        assert_eq!(object.code, -32601);
        assert_eq!(object.data.code, CanonicalCode(ErrorCode::MethodNotFound));
    }
    // The method is judged before the params' shape.
    assert_eq!(
        code_of(parse_request("nope", json!([1, 2]))),
        ErrorCode::MethodNotFound
    );
}

#[test]
fn plan_reject_refuses_feedback_and_permission_mode() {
    for extra in [
        json!({"feedback": "make it shorter"}),
        json!({"permissionMode": "auto"}),
    ] {
        let mut params = json!({"approvalId": "apr_01"});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let error = parse_request(method::PLAN_REJECT, params).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidParams);
        let detail = error.detail.clone().unwrap();
        assert!(detail.contains("unknown field"), "{detail}");
        let object = ErrorObject::from(error);
        assert_eq!(object.code, -32602);
        assert_eq!(
            serde_json::to_value(&object).unwrap()["data"]["code"],
            json!("INVALID_PARAMS")
        );
    }
}

#[test]
fn every_params_type_refuses_unknown_fields() {
    for (name, request) in requests() {
        let mut params = request.params_value().unwrap();
        params
            .as_object_mut()
            .unwrap()
            .insert("bogus".to_owned(), json!(1));
        assert_eq!(
            code_of(parse_request(request.method(), params)),
            ErrorCode::InvalidParams,
            "{name}"
        );
    }
    let call_with_extra = json!({
        "sessionId": "s", "turnId": "t",
        "calls": [{"callId": "c", "name": "Read", "input": {}, "extra": true}]
    });
    assert_eq!(
        code_of(parse_request(method::TURN_TOOL_CALLS, call_with_extra)),
        ErrorCode::InvalidParams
    );
}

#[test]
fn plan_approve_without_permission_mode_reaches_the_host_as_none() {
    for params in [
        json!({"approvalId": "apr_01"}),
        json!({"approvalId": "apr_01", "permissionMode": null}),
    ] {
        assert_eq!(
            parse_request(method::PLAN_APPROVE, params).unwrap(),
            ClientRequest::PlanApprove(PlanApproveParams {
                approval_id: "apr_01".into(),
                permission_mode: None,
            })
        );
    }
    for (text, mode) in [
        ("ask", PermissionMode::Ask),
        ("accept-edits", PermissionMode::AcceptEdits),
        ("auto", PermissionMode::Auto),
    ] {
        let parsed = parse_request(
            method::PLAN_APPROVE,
            json!({"approvalId": "a", "permissionMode": text}),
        );
        assert_eq!(
            parsed.unwrap(),
            ClientRequest::PlanApprove(PlanApproveParams {
                approval_id: "a".into(),
                permission_mode: Some(mode),
            })
        );
    }
    for bad in [json!("acceptEdits"), json!("ASK"), json!(1)] {
        let params = json!({"approvalId": "a", "permissionMode": bad});
        assert_eq!(
            code_of(parse_request(method::PLAN_APPROVE, params)),
            ErrorCode::InvalidParams
        );
    }
}

#[test]
fn session_configure_tells_absent_from_null() {
    let parse = |params: Value| match parse_request(method::SESSION_CONFIGURE, params).unwrap() {
        ClientRequest::SessionConfigure(params) => params,
        other => panic!("unexpected {other:?}"),
    };
    let absent = parse(json!({"sessionId": "s"}));
    assert_eq!(
        absent,
        SessionConfigureParams {
            session_id: "s".into(),
            ..SessionConfigureParams::default()
        }
    );
    let cleared = parse(json!({"sessionId": "s", "provider": null, "model": null, "shell": null}));
    assert_eq!(cleared.provider, Some(Clearable::Clear));
    assert_eq!(cleared.model, Some(Clearable::Clear));
    assert_eq!(cleared.shell, Some(Clearable::Clear));
    let set = parse(json!({"sessionId": "s", "shell": "zsh", "mode": "plan", "permissionMode": null}));
    assert_eq!(
        set.shell,
        Some(Clearable::Set {
            value: "zsh".to_owned()
        })
    );
    assert_eq!(set.mode, Some(plan_protocol::Mode::Plan));
    assert_eq!(set.permission_mode, None);
    let change = set.to_config_change();
    assert_eq!(change.shell, Some(Some("zsh".to_owned())));
    assert_eq!(change.provider, None);
    // Serializing keeps the distinction: absent stays absent, null stays null.
    assert_eq!(serde_json::to_value(&absent).unwrap(), json!({"sessionId": "s"}));
    assert_eq!(
        serde_json::to_value(&cleared).unwrap(),
        json!({"sessionId": "s", "provider": null, "model": null, "shell": null})
    );
}

#[test]
fn session_create_needs_workspace_root_present_but_accepts_null() {
    assert_eq!(
        code_of(parse_request(method::SESSION_CREATE, json!({}))),
        ErrorCode::InvalidParams
    );
    match parse_request(method::SESSION_CREATE, json!({"workspaceRoot": null})).unwrap() {
        ClientRequest::SessionCreate(params) => assert_eq!(params.workspace_root, None),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn missing_or_mistyped_fields_are_invalid_params() {
    let cases = [
        (method::TURN_START, json!({"sessionId": "s", "prompt": "p"})),
        (
            method::TURN_START,
            json!({"sessionId": "s", "prompt": "p", "origin": "cron"}),
        ),
        (method::SESSION_GET, json!({"sessionId": 7})),
        (method::PLAN_LIST, json!({"limit": -1})),
        (method::PLAN_LIST, json!({"status": "waiting"})),
        (method::INITIALIZE, json!({"protocolVersion": "9"})),
        (
            method::TURN_TOOL_CALLS,
            json!({"sessionId": "s", "turnId": "t", "calls": [{"callId": "c", "name": "Read"}]}),
        ),
        (method::SHELL_LIST, json!({"all": true})),
    ];
    for (method, params) in cases {
        let error = parse_request(method, params.clone()).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidParams, "{method} {params}");
        assert!(error.detail.is_some());
    }
}

#[test]
fn params_must_be_an_object_but_may_be_absent() {
    for params in [json!([]), json!("x"), json!(1), json!(true)] {
        assert_eq!(
            code_of(parse_request(method::SHELL_LIST, params)),
            ErrorCode::InvalidParams
        );
    }
    assert!(parse_request(method::SHELL_LIST, Value::Null).is_ok());
    let request: Request = serde_json::from_str(r#"{"jsonrpc":"2.0","id":1,"method":"shell/list"}"#).unwrap();
    assert_eq!(request.params, None);
    assert!(request.parse().is_ok());
    // A struct would otherwise accept a positional array.
    assert_eq!(
        code_of(parse_request(method::PLAN_GET, json!(["apr_01"]))),
        ErrorCode::InvalidParams
    );
}

#[test]
fn initialize_accepts_any_version_number_so_the_host_can_refuse_it() {
    match parse_request(method::INITIALIZE, json!({"protocolVersion": 8})).unwrap() {
        ClientRequest::Initialize(params) => assert_eq!(params.protocol_version, 8),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn envelope_requires_jsonrpc_two() {
    assert!(serde_json::from_str::<Request>(r#"{"jsonrpc":"1.0","id":1,"method":"shell/list"}"#).is_err());
    assert!(serde_json::from_str::<Request>(r#"{"id":1,"method":"shell/list"}"#).is_err());
    let string_id: Request =
        serde_json::from_str(r#"{"jsonrpc":"2.0","id":"abc","method":"shell/list","params":{}}"#).unwrap();
    assert_eq!(string_id.id, RequestId::String("abc".to_owned()));
}

#[test]
fn jsonrpc_numbers_follow_the_contract() {
    for code in ErrorCode::ALL {
        let expected = [
            (ErrorCode::ParseError, -32700),
            (ErrorCode::InvalidRequest, -32600),
            (ErrorCode::MethodNotFound, -32601),
            (ErrorCode::InvalidParams, -32602),
        ]
        .into_iter()
        .find(|(special, _)| *special == code)
        .map_or(-32000, |(_, number)| number);
        assert_eq!(jsonrpc_code(code), expected, "{code:?}");
        let object = ErrorObject::new(code);
        assert_eq!(object.code, expected);
        assert_eq!(object.message, code.message());
        assert_eq!(object.canonical_code(), code);
        assert_eq!(
            serde_json::to_value(&object).unwrap()["data"]["code"],
            json!(code.as_str())
        );
    }
    let detailed = ErrorObject::with_detail(ErrorCode::InvalidParams, "unknown field `feedback`");
    assert_eq!(
        detailed.message,
        format!("{}: unknown field `feedback`", ErrorCode::InvalidParams.message())
    );
}

#[test]
fn responses_read_back_in_both_forms() {
    let ok: Response =
        serde_json::from_str(r#"{"jsonrpc":"2.0","id":3,"result":{"default":"bash"}}"#).unwrap();
    assert_eq!(ok.outcome, ResponseOutcome::Result(json!({"default": "bash"})));
    let failed: Response = serde_json::from_str(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":{"code":"PARSE_ERROR"}}}"#,
    )
    .unwrap();
    assert_eq!(failed.id, None);
    match failed.outcome {
        ResponseOutcome::Error(error) => assert_eq!(error.canonical_code(), ErrorCode::ParseError),
        ResponseOutcome::Result(result) => panic!("unexpected {result}"),
    }
    let unknown_code =
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"code":"NOPE"}}}"#;
    assert!(serde_json::from_str::<Response>(unknown_code).is_err());
}

#[test]
fn results_write_absent_values_as_null() {
    let approval = crate::fixtures::wire_approval(&crate::fixtures::migrated_interrupted_approval());
    let value = serde_json::to_value(&approval).unwrap();
    for field in ["artifact", "permissionMode", "executionId", "executionState"] {
        assert_eq!(value.get(field), Some(&Value::Null), "{field}");
    }
    let session = serde_json::to_value(crate::fixtures::unbound_session()).unwrap();
    for field in [
        "workspaceRoot",
        "provider",
        "model",
        "shell",
        "activeTurn",
        "pendingApprovalId",
        "activeExecutionId",
    ] {
        assert_eq!(session.get(field), Some(&Value::Null), "{field}");
    }
    let denied = serde_json::to_value(plan_protocol::ToolCallResult::allow("c")).unwrap();
    assert_eq!(
        denied,
        json!({"callId": "c", "decision": "allow", "hostRun": false, "error": null, "approval": null, "command": null})
    );
}
