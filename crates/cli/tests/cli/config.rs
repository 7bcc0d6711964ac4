//! The host's settings through `serve`'s flags, through `serve --config`
//! (the record as JSON) and through the FFI's `HostConfig`: the same
//! settings give the same host (its `initialize` answer), and a setting one
//! refuses the others refuse too, with the same canonical code. All go
//! through `HostConfig::options`.

use std::process::{Command, Stdio};

use plan_ffi::{ExportOverrides, HostConfig, PlanError, PlanHost, error_code_wire_name};
use serde_json::{Value, json};

use crate::client::Serve;

/// The code `serve` refuses these flags with (its start refusal on stdout).
fn serve_refusal(flags: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
        .arg("serve")
        .arg("--db")
        .arg(dir.path().join("plan.db"))
        .args(flags)
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{flags:?} was accepted: {stderr}");
    let line = stdout
        .lines()
        .next()
        .unwrap_or_else(|| panic!("{flags:?}: no refusal a client can read on stdout; stderr: {stderr}"));
    let refusal: Value = serde_json::from_str(line).unwrap();
    refusal["error"]["data"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{flags:?}: {refusal}"))
        .to_owned()
}

/// `config` as the JSON file `serve --config` reads, in `dir`.
fn config_file(dir: &std::path::Path, config: &HostConfig) -> String {
    let path = dir.join("settings.json");
    std::fs::write(&path, serde_json::to_string(config).unwrap()).unwrap();
    path.display().to_string()
}

/// The code the FFI's constructor refuses `config` with.
fn ffi_refusal(config: HostConfig) -> String {
    let dir = tempfile::tempdir().unwrap();
    let described = format!("{config:?}");
    match PlanHost::new(dir.path().join("plan.db").display().to_string(), config) {
        Ok(host) => {
            host.shutdown();
            panic!("{described} was accepted");
        }
        Err(PlanError::Failed { code, .. }) => error_code_wire_name(code),
    }
}

/// Settings each frontend must refuse, as flags and as the record.
fn refused() -> Vec<(Vec<&'static str>, HostConfig)> {
    let config = HostConfig::default;
    vec![
        (
            vec!["--approval-ttl-ms", "0"],
            HostConfig {
                approval_ttl_ms: Some(0),
                ..config()
            },
        ),
        (
            vec!["--approval-ttl-ms", "604800001"],
            HostConfig {
                approval_ttl_ms: Some(604_800_001),
                ..config()
            },
        ),
        (
            vec!["--markdown-limit-bytes", "0"],
            HostConfig {
                markdown_limit_bytes: Some(0),
                ..config()
            },
        ),
        (
            vec!["--markdown-limit-bytes", "67108865"],
            HostConfig {
                markdown_limit_bytes: Some(67_108_865),
                ..config()
            },
        ),
        (
            vec!["--command-max-timeout-ms", "0"],
            HostConfig {
                command_max_timeout_ms: Some(0),
                ..config()
            },
        ),
        (
            vec!["--command-timeout-ms", "700000"],
            HostConfig {
                command_timeout_ms: Some(700_000),
                ..config()
            },
        ),
        (
            vec!["--max-running-commands", "0"],
            HostConfig {
                max_running_commands: Some(0),
                ..config()
            },
        ),
        (
            vec!["--scratch-size-mb", "0"],
            HostConfig {
                scratch_size_mb: Some(0),
                ..config()
            },
        ),
        (
            vec!["--scratch-size-mb", "1048577"],
            HostConfig {
                scratch_size_mb: Some(1_048_577),
                ..config()
            },
        ),
        (
            vec!["--command-memory-mb", "63"],
            HostConfig {
                command_memory_mb: Some(63),
                ..config()
            },
        ),
        (
            vec!["--web", "0.0.0.0:0"],
            HostConfig {
                web_address: Some("0.0.0.0:0".to_owned()),
                ..config()
            },
        ),
        (
            vec!["--web", "not-an-address"],
            HostConfig {
                web_address: Some("not-an-address".to_owned()),
                ..config()
            },
        ),
        (
            vec!["--web-bind", "localhost"],
            HostConfig {
                web_address: Some("localhost".to_owned()),
                web_allow_any_address: true,
                ..config()
            },
        ),
        (
            vec!["--otel-protocol", "http/json"],
            HostConfig {
                otel: ExportOverrides {
                    protocol: Some("http/json".to_owned()),
                    ..ExportOverrides::default()
                },
                ..config()
            },
        ),
        (
            vec!["--otel-logs-endpoint", "ftp://127.0.0.1/v1/logs"],
            HostConfig {
                otel: ExportOverrides {
                    logs_endpoint: Some("ftp://127.0.0.1/v1/logs".to_owned()),
                    ..ExportOverrides::default()
                },
                ..config()
            },
        ),
        (
            vec!["--notify", " "],
            HostConfig {
                notifier: Some(" ".to_owned()),
                ..config()
            },
        ),
    ]
}

#[test]
fn a_setting_serve_refuses_the_ffi_refuses_with_the_same_code() {
    for (flags, config) in refused() {
        let described = format!("{config:?}");
        let dir = tempfile::tempdir().unwrap();
        let through_serve = serve_refusal(&flags);
        let through_file = serve_refusal(&["--config", &config_file(dir.path(), &config)]);
        let through_ffi = ffi_refusal(config);
        assert_eq!(through_serve, through_ffi, "{flags:?} and {described}");
        assert_eq!(through_file, through_ffi, "{described} as a file");
        assert_eq!(through_serve, "INVALID_PARAMS", "{flags:?}");
    }
}

/// `initialize`'s answer with the parts a run makes up left out.
fn comparable(mut init: Value) -> Value {
    init.as_object_mut().unwrap().remove("serverVersion");
    init
}

#[test]
fn the_same_settings_through_serve_and_the_ffi_give_the_same_host() {
    let helper = env!("CARGO_BIN_EXE_plan-checkpoint");
    let flags = [
        "--approval-ttl-ms",
        "90000",
        "--sandbox-helper",
        helper,
        "--skip-namespaces",
        "--auto-without-sandbox",
        "--network-in-auto",
        "--command-max-timeout-ms",
        "30000",
    ];
    let config = HostConfig {
        approval_ttl_ms: Some(90_000),
        sandbox_helper: Some(helper.into()),
        skip_namespaces: true,
        auto_without_sandbox: true,
        network_in_auto: true,
        command_max_timeout_ms: Some(30_000),
        ..HostConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::spawn(&dir.path().join("serve.db"), &flags);
    let params = json!({"protocolVersion": 9, "clientName": "config-tests"});
    let through_serve = serve.call("initialize", params.clone());
    serve.close();
    let file = config_file(dir.path(), &config);
    let mut serve = Serve::spawn(&dir.path().join("file.db"), &["--config", &file]);
    let through_file = serve.call("initialize", params.clone());
    serve.close();

    let host = PlanHost::new(dir.path().join("ffi.db").display().to_string(), config).unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let reply: Value = serde_json::from_str(&host.handle_json(request.to_string()).unwrap()).unwrap();
    host.shutdown();
    assert_eq!(through_serve["approvalTtlMs"], 90_000);
    assert_eq!(
        comparable(through_serve.clone()),
        comparable(reply["result"].clone())
    );
    assert_eq!(comparable(through_file), comparable(through_serve));
}

#[test]
fn a_settings_file_is_refused_beside_a_settings_flag_or_with_an_unknown_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(dir.path(), &HostConfig::default());
    for flag in [
        &["--approval-ttl-ms", "60000"][..],
        &["--skip-namespaces"],
        &["--otel-include-content"],
        &["--web", "127.0.0.1:0"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
            .args(["serve", "--db"])
            .arg(dir.path().join("plan.db"))
            .args(["--config", &file])
            .args(flag)
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("cannot be used with"),
            "{flag:?}"
        );
    }
    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, r#"{"approval_ttl_ms": 60000}"#).unwrap();
    assert_eq!(
        serve_refusal(&["--config", &unknown.display().to_string()]),
        "INVALID_PARAMS"
    );
    let missing = dir.path().join("missing.json");
    assert_eq!(
        serve_refusal(&["--config", &missing.display().to_string()]),
        "INVALID_PARAMS"
    );
}
