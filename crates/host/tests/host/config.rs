//! `HostConfig`, the settings every frontend gives, and its one conversion
//! into `HostOptions`: JSON in camelCase with unknown fields refused,
//! defaults for what is absent, and `INVALID_PARAMS` for what is out of
//! range.

use std::path::PathBuf;

use plan_core::{CommandLimits, ErrorCode, Limits, ResourceBounds};
use plan_host::{ExportOverrides, HostConfig, HostOptions, ScratchSize};

#[test]
fn an_empty_config_gives_the_default_options() {
    let config: HostConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(config, HostConfig::default());
    assert_eq!(serde_json::to_string(&config).unwrap(), "{}");
    let options = config.options_with_environment(|_| None).unwrap();
    let defaults = HostOptions::default();
    assert_eq!(options.limits, defaults.limits);
    assert_eq!(options.scratch_size, ScratchSize::default());
    assert_eq!(options.command_output_cap, defaults.command_output_cap);
    assert_eq!(
        options.command_env_secret_markers,
        defaults.command_env_secret_markers
    );
    assert!(options.web.is_none() && options.notifier.is_none() && options.audit_export.is_none());
    assert_eq!(options.frontend, defaults.frontend);
}

#[test]
fn a_json_config_in_camel_case_sets_every_field_it_names() {
    let config: HostConfig = serde_json::from_str(
        r#"{
            "approvalTtlMs": 60000,
            "markdownLimitBytes": 4096,
            "sandboxHelper": "/opt/plan/plan-exec-sandbox",
            "scratchRoot": "/run/plan-scratch",
            "scratchSizeMb": 64,
            "commandMemoryMb": 512,
            "commandTimeoutMs": 1000,
            "commandMaxTimeoutMs": 2000,
            "commandOutputCap": 512,
            "maxRunningCommands": 2,
            "networkInAuto": true,
            "autoWithoutSandbox": true,
            "skipNamespaces": true,
            "protectedPaths": ["/srv/secrets"],
            "secretEnvMarkers": [],
            "webAddress": "0.0.0.0:0",
            "webAllowAnyAddress": true,
            "notifier": "true"
        }"#,
    )
    .unwrap();
    let options = config.options_with_environment(|_| None).unwrap();
    assert_eq!(options.limits.approval_ttl_ms(), 60_000);
    assert_eq!(options.limits.markdown_limit_bytes(), 4096);
    assert_eq!(
        options.limits.commands.limits,
        CommandLimits::new(Some(1000), 2000, 2).unwrap()
    );
    assert!(options.limits.commands.network_in_auto && options.limits.commands.auto_without_sandbox);
    assert_eq!(
        options.sandbox_helper,
        Some(PathBuf::from("/opt/plan/plan-exec-sandbox"))
    );
    assert_eq!(options.scratch_root, Some(PathBuf::from("/run/plan-scratch")));
    assert_eq!(options.scratch_size.megabytes(), 64);
    assert_eq!(options.limits.commands.bounds.memory_mb(), 512);
    assert_eq!(options.command_output_cap, 512);
    assert!(options.skip_namespaces);
    assert_eq!(options.protected_paths, vec![PathBuf::from("/srv/secrets")]);
    assert!(options.command_env_secret_markers.is_empty());
    assert_eq!(options.web.unwrap().bind().to_string(), "0.0.0.0:0");
    assert_eq!(options.notifier.as_deref(), Some("true"));
}

#[test]
fn an_unknown_or_snake_case_field_is_refused() {
    for text in [r#"{"approval_ttl_ms": 1}"#, r#"{"ttl": 1}"#] {
        let error = serde_json::from_str::<HostConfig>(text).unwrap_err();
        assert!(error.to_string().contains("unknown field"), "{text}: {error}");
    }
}

#[test]
fn every_value_out_of_range_is_invalid_params() {
    let config = HostConfig::default;
    let refused = [
        HostConfig {
            approval_ttl_ms: Some(0),
            ..config()
        },
        HostConfig {
            approval_ttl_ms: Some(Limits::MAX_APPROVAL_TTL_MS + 1),
            ..config()
        },
        HostConfig {
            markdown_limit_bytes: Some(0),
            ..config()
        },
        HostConfig {
            markdown_limit_bytes: Some(u64::MAX),
            ..config()
        },
        HostConfig {
            command_max_timeout_ms: Some(0),
            ..config()
        },
        HostConfig {
            command_timeout_ms: Some(0),
            ..config()
        },
        HostConfig {
            command_timeout_ms: Some(3000),
            command_max_timeout_ms: Some(2000),
            ..config()
        },
        HostConfig {
            max_running_commands: Some(0),
            ..config()
        },
        HostConfig {
            scratch_size_mb: Some(0),
            ..config()
        },
        HostConfig {
            scratch_size_mb: Some(ScratchSize::MAX_MEGABYTES + 1),
            ..config()
        },
        HostConfig {
            command_memory_mb: Some(ResourceBounds::MIN_MEMORY_MB - 1),
            ..config()
        },
        HostConfig {
            command_memory_mb: Some(ResourceBounds::MAX_MEMORY_MB + 1),
            ..config()
        },
        HostConfig {
            web_address: Some("0.0.0.0:0".to_owned()),
            ..config()
        },
        HostConfig {
            web_address: Some("localhost".to_owned()),
            web_allow_any_address: true,
            ..config()
        },
        HostConfig {
            otel: ExportOverrides {
                protocol: Some("http/json".to_owned()),
                ..ExportOverrides::default()
            },
            ..config()
        },
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: Some("ftp://127.0.0.1/v1/logs".to_owned()),
                ..ExportOverrides::default()
            },
            ..config()
        },
    ];
    for config in refused {
        let error = config.options_with_environment(|_| None).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{config:?}: {error}");
    }
}

#[test]
fn the_otel_variables_are_read_unless_the_config_says_not_to() {
    let environment = |name: &str| match name {
        "OTEL_LOGS_EXPORTER" => Some("otlp".to_owned()),
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT" => Some("http://127.0.0.1:4318/v1/logs".to_owned()),
        _ => None,
    };
    let reading = HostConfig::default()
        .options_with_environment(environment)
        .unwrap();
    assert!(reading.audit_export.is_some());
    let ignoring = HostConfig {
        otel_from_environment: Some(false),
        ..HostConfig::default()
    }
    .options_with_environment(environment)
    .unwrap();
    assert!(ignoring.audit_export.is_none());
}

#[test]
fn the_export_settings_are_one_otel_record_in_camel_case() {
    let text = r#"{
        "otel": {
            "logsEndpoint": "http://127.0.0.1:4318/v1/logs",
            "protocol": "http/json",
            "headers": ["x-tenant=a"],
            "serviceName": "embedded",
            "includeContent": true
        },
        "otelFromEnvironment": false
    }"#;
    let config: HostConfig = serde_json::from_str(text).unwrap();
    assert_eq!(
        config.otel,
        ExportOverrides {
            logs_endpoint: Some("http://127.0.0.1:4318/v1/logs".to_owned()),
            protocol: Some("http/json".to_owned()),
            headers: vec!["x-tenant=a".to_owned()],
            service_name: Some("embedded".to_owned()),
            include_content: true,
            ..ExportOverrides::default()
        }
    );
    let written: serde_json::Value = serde_json::to_value(&config).unwrap();
    assert_eq!(written, serde_json::from_str::<serde_json::Value>(text).unwrap());
    let export = config
        .options_with_environment(|_| panic!("the environment is not read"))
        .unwrap()
        .audit_export
        .unwrap();
    assert_eq!(export.endpoint, "http://127.0.0.1:4318/v1/logs");
    assert_eq!(export.protocol.as_str(), "http/json");
    assert_eq!(export.headers, vec![("x-tenant".to_owned(), "a".to_owned())]);
    assert_eq!(export.service_name, "embedded");
    assert!(export.include_content);
}

#[test]
fn an_export_setting_outside_the_otel_record_or_unknown_inside_it_is_refused() {
    for text in [
        r#"{"otelLogsEndpoint": "http://127.0.0.1:4318/v1/logs"}"#,
        r#"{"otel": {"endpoint": "http://127.0.0.1:4318/v1/logs"}}"#,
        r#"{"otel": {"logs_endpoint": "http://127.0.0.1:4318/v1/logs"}}"#,
    ] {
        let error = serde_json::from_str::<HostConfig>(text).unwrap_err();
        assert!(error.to_string().contains("unknown field"), "{text}: {error}");
    }
}
