//! The `serve` options of the audit's OpenTelemetry export: the standard
//! `OTEL_*` variables first, these flags over them. Maps arguments to the
//! host's export option; what is exported and how is the exporter's.

use clap::Args;
use plan_audit_export::{ExportConfig, Protocol, parse_list};
use plan_host::{ErrorCode, HostError};

/// `serve` options for the audit's OpenTelemetry export (off unless
/// OTEL_LOGS_EXPORTER=otlp or --otel-logs-endpoint).
#[derive(Debug, Clone, Args)]
pub(crate) struct OtelArgs {
    /// Export the audit as OTLP log records to this logs endpoint, a full
    /// http:// URL (as OTEL_EXPORTER_OTLP_LOGS_ENDPOINT; e.g.
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
    /// Also export plan titles, questions and command text (their SHA-256
    /// is always exported; they may be confidential).
    #[arg(long)]
    otel_include_content: bool,
}

fn invalid(message: String) -> HostError {
    HostError::with_detail(ErrorCode::InvalidParams, message)
}

impl OtelArgs {
    /// The host's export option from the environment (through `lookup`)
    /// and these flags; `None` when export is off.
    pub(crate) fn config(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ExportConfig>, HostError> {
        let from_env = ExportConfig::from_env(lookup).map_err(|error| invalid(error.to_string()))?;
        let config = match (&self.otel_logs_endpoint, from_env) {
            (Some(endpoint), Some(mut config)) => {
                config.endpoint.clone_from(endpoint);
                Some(config)
            }
            (Some(endpoint), None) => Some(ExportConfig::new(endpoint.clone())),
            (None, config) => config,
        };
        let Some(mut config) = config else {
            let given = self.otel_protocol.is_some()
                || !self.otel_header.is_empty()
                || self.otel_service_name.is_some()
                || self.otel_include_content;
            return if given {
                Err(invalid(
                    "the --otel-* options need --otel-logs-endpoint (or OTEL_LOGS_EXPORTER=otlp)".to_owned(),
                ))
            } else {
                Ok(None)
            };
        };
        if let Some(protocol) = &self.otel_protocol {
            config.protocol = Protocol::parse(protocol).ok_or_else(|| {
                invalid(format!(
                    "--otel-protocol {protocol:?}: use http/protobuf or http/json"
                ))
            })?;
        }
        for header in &self.otel_header {
            for (key, value) in
                parse_list("--otel-header", header).map_err(|error| invalid(error.to_string()))?
            {
                config
                    .headers
                    .retain(|(known, _)| !known.eq_ignore_ascii_case(&key));
                config.headers.push((key, value));
            }
        }
        if let Some(name) = &self.otel_service_name {
            config.service_name.clone_from(name);
        }
        config.include_content |= self.otel_include_content;
        config.check().map_err(|error| invalid(error.to_string()))?;
        Ok(Some(config))
    }
}
