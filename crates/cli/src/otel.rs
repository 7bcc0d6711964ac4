//! The `serve` options of the audit's OpenTelemetry export: the standard
//! `OTEL_*` variables first, these flags over them. Maps arguments to the
//! one record of those settings (`ExportOverrides`, the `otel` field of the
//! host's settings); what is exported and how is the exporter's.

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
