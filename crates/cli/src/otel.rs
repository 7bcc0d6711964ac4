//! The `serve` options of the audit's OpenTelemetry export: the standard
//! `OTEL_*` variables first, these flags over them. Maps arguments to the
//! one record of those settings (`ExportOverrides`, the `otel` field of the
//! host's settings); what is exported and how is the exporter's. Also the
//! per-user file that gives the same settings to the host an agent's hooks
//! start (Claude Code passes no `OTEL_*` variable to its hooks), and the
//! one-line stderr report of the export's health.

use std::path::PathBuf;

use clap::Args;
use plan_host::{ExportOverrides, HostConfig};

/// `serve` options for the audit's OpenTelemetry export (off unless
/// OTEL_LOGS_EXPORTER=otlp or --otel-logs-endpoint).
#[derive(Debug, Clone, Args)]
pub(crate) struct OtelArgs {
    /// Export the audit as OTLP log records to this logs endpoint, a full
    /// http:// or https:// URL (as OTEL_EXPORTER_OTLP_LOGS_ENDPOINT; e.g.
    /// http://127.0.0.1:4318/v1/logs). Without it, export is on only when
    /// OTEL_LOGS_EXPORTER=otlp, with the standard OTEL_EXPORTER_OTLP_*
    /// variables, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    #[arg(long, value_name = "URL")]
    otel_logs_endpoint: Option<String>,
    /// The OTLP encoding: http/protobuf (the default) or http/json.
    #[arg(long, value_name = "PROTOCOL")]
    otel_protocol: Option<String>,
    /// A request header for the collector (authentication), KEY=VALUE;
    /// repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    otel_header: Vec<String>,
    /// The resource's service.name [default: plan-checkpoint].
    #[arg(long, value_name = "NAME")]
    otel_service_name: Option<String>,
    /// Also export the plan text, plan titles, questions and command text
    /// (their SHA-256 is always exported; they may be confidential).
    #[arg(long)]
    otel_include_content: bool,
    /// A PEM file of the CA certificates to trust for an https://
    /// collector instead of the platform's roots (as
    /// OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long, value_name = "FILE")]
    otel_certificate: Option<PathBuf>,
    /// A PEM file of the client certificate for a collector that requires
    /// one (mTLS; as OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE); needs
    /// --otel-client-key.
    #[arg(long, value_name = "FILE")]
    otel_client_certificate: Option<PathBuf>,
    /// A PEM file of the client certificate's private key (as
    /// OTEL_EXPORTER_OTLP_CLIENT_KEY).
    #[arg(long, value_name = "FILE")]
    otel_client_key: Option<PathBuf>,
}

impl OtelArgs {
    /// `config` with these flags as its export settings (its `otel`
    /// record), applied over the standard `OTEL_*` variables (which `serve`
    /// always reads) by [`HostConfig::options`].
    pub(crate) fn config(&self, config: HostConfig) -> HostConfig {
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: self.otel_logs_endpoint.clone(),
                protocol: self.otel_protocol.clone(),
                headers: self.otel_header.clone(),
                service_name: self.otel_service_name.clone(),
                include_content: self.otel_include_content,
                certificate: self.otel_certificate.clone(),
                client_certificate: self.otel_client_certificate.clone(),
                client_key: self.otel_client_key.clone(),
            },
            ..config
        }
    }
}

/// The export's health told as one line each on stderr (`PREFIX: audit
/// export failing: ...`, `PREFIX: audit export recovered ...`): the first
/// failure and the recovery, never one line per retry.
pub(crate) fn stderr_observer(prefix: &'static str) -> plan_audit_export::ExportObserver {
    std::sync::Arc::new(move |event: &plan_audit_export::ExportEvent| {
        plan_server::log::line(&format!("{prefix}: {event}"));
    })
}

/// The per-user file of the audit export's settings for the host an
/// agent's hooks start: `$XDG_CONFIG_HOME/plan-checkpoint/audit-export.json`
/// (`~/.config/...` without XDG_CONFIG_HOME), or the file
/// `PLAN_CHECKPOINT_AUDIT_EXPORT_FILE` names. It holds the `otel` record
/// of a `serve --config` file and, under `environment`, the standard
/// variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_RESOURCE_ATTRIBUTES`,
/// ...) as the hooks' environment would have carried them; a variable the
/// host's own environment sets wins over the file's. Per user, never per
/// project: a repository cannot send its users' audit elsewhere.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AgentExportFile {
    #[serde(default)]
    otel: ExportOverrides,
    #[serde(default)]
    environment: std::collections::BTreeMap<String, String>,
}

/// Where the agent host's export settings are read from.
pub(crate) fn agent_export_file() -> Option<PathBuf> {
    if let Some(named) =
        std::env::var_os("PLAN_CHECKPOINT_AUDIT_EXPORT_FILE").filter(|named| !named.is_empty())
    {
        return Some(PathBuf::from(named));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|base| !base.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("plan-checkpoint").join("audit-export.json"))
}

/// The agent host's options: `config` with the per-user file's export
/// settings, resolved by the same conversion as `serve`'s (the host's own
/// environment first, then the file's `environment`). No file: the
/// environment alone. A file that cannot be read or parsed, or settings the
/// exporter refuses, is an error naming the file.
pub(crate) fn agent_host_options(config: HostConfig) -> Result<plan_host::HostOptions, String> {
    let file = agent_export_file();
    let settings = match &file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str::<AgentExportFile>(&text)
                .map_err(|error| format!("{}: {error}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => AgentExportFile::default(),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        },
        None => AgentExportFile::default(),
    };
    let config = HostConfig {
        otel: settings.otel,
        otel_from_environment: Some(true),
        ..config
    };
    let environment = settings.environment;
    config
        .options_with_environment(|name| {
            std::env::var(name)
                .ok()
                .or_else(|| environment.get(name).cloned())
        })
        .map_err(|error| match &file {
            Some(path) => format!("{}: {}", path.display(), error.message()),
            None => error.message(),
        })
}
