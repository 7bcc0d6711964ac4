//! How the export is set up: the standard `OTEL_*` variables, or the same
//! settings given as host options. Plain data and its parsing; it opens
//! no connection (checking a configuration reads the certificate files it
//! names, so a bad one is refused before anything runs).

use std::path::PathBuf;
use std::time::Duration;

/// The OTLP/HTTP encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (OTel's default): `application/x-protobuf`.
    HttpProtobuf,
    /// `http/json`: `application/json`.
    HttpJson,
}

impl Protocol {
    /// Parses the `OTEL_EXPORTER_OTLP_PROTOCOL` spelling.
    pub fn parse(text: &str) -> Option<Protocol> {
        match text.trim() {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "http/json" => Some(Protocol::HttpJson),
            _ => None,
        }
    }

    /// The `OTEL_EXPORTER_OTLP_PROTOCOL` spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }

    /// The request's `Content-Type`.
    pub const fn content_type(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "application/x-protobuf",
            Protocol::HttpJson => "application/json",
        }
    }
}

/// A configuration that cannot be used; nothing is exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `OTEL_LOGS_EXPORTER` names no exporter this build has.
    #[error("OTEL_LOGS_EXPORTER={0:?}: only `otlp` (or `none`) is supported")]
    UnsupportedExporter(String),
    /// A protocol other than `http/protobuf` and `http/json`.
    #[error("OTLP protocol {0:?} is not supported: use http/protobuf or http/json")]
    UnsupportedProtocol(String),
    /// An endpoint that is not an `http(s)://host[:port][/path]` URL.
    #[error("OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `key=value` list (headers, resource attributes) that does not parse.
    #[error("{variable}: {entry:?} is not key=value")]
    InvalidList {
        /// The variable or option.
        variable: &'static str,
        /// The entry.
        entry: String,
    },
    /// Export options given while export is off (no endpoint, no
    /// `OTEL_LOGS_EXPORTER=otlp`).
    #[error("the audit export options need a logs endpoint (or OTEL_LOGS_EXPORTER=otlp)")]
    NoEndpoint,
    /// A certificate or key file (for an `https://` endpoint) that cannot
    /// be read or used.
    #[error("{file} {path:?}: {reason}")]
    TlsFile {
        /// Which file: `OTLP certificate`, `OTLP client certificate` or
        /// `OTLP client key`.
        file: &'static str,
        /// The path as configured.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A client certificate without its key, or a key without its
    /// certificate (mTLS needs both).
    #[error("{0}")]
    IncompleteClientIdentity(&'static str),
    /// A request bound that is not a number of bytes, or below the least
    /// that holds a record.
    #[error("{variable}={value:?} is not a number of bytes of at least {MIN_MAX_REQUEST_BYTES}")]
    InvalidRequestBound {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// A timeout that is not a number of milliseconds.
    #[error("{variable}={value:?} is not a number of milliseconds")]
    InvalidTimeout {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
}

/// Where and how the audit is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConfig {
    /// The logs endpoint, a full `http://` or `https://` URL (`.../v1/logs`).
    pub endpoint: String,
    /// The encoding.
    pub protocol: Protocol,
    /// Extra request headers (authentication, tenant).
    pub headers: Vec<(String, String)>,
    /// The resource's `service.name`.
    pub service_name: String,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub resource_attributes: Vec<(String, String)>,
    /// Whether plan titles, questions and command text are exported too
    /// (their SHA-256 always is).
    pub include_content: bool,
    /// At most this many records per request.
    pub batch_size: u32,
    /// At most this many bytes per request body (default
    /// [`DEFAULT_MAX_REQUEST_BYTES`], well under a collector's usual 20 MiB
    /// limit); a record larger alone is sent with its content cut.
    pub max_request_bytes: usize,
    /// How long the exporter sleeps with nothing to send before it looks
    /// again (a host wakes it sooner after a commit).
    pub poll_interval: Duration,
    /// The first wait after a failed send; it doubles up to `max_backoff`.
    pub min_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// The connect, write and read timeout of one request.
    pub timeout: Duration,
    /// A PEM file of the CA certificates trusted for an `https://`
    /// collector, instead of the platform's roots
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`). Unused for `http://`.
    pub certificate: Option<PathBuf>,
    /// A PEM file of the client certificate (chain) presented to an
    /// `https://` collector that asks for one (mTLS,
    /// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`); needs `client_key`.
    pub client_certificate: Option<PathBuf>,
    /// A PEM file of the client certificate's private key
    /// (`OTEL_EXPORTER_OTLP_CLIENT_KEY`); needs `client_certificate`.
    pub client_key: Option<PathBuf>,
}

/// The logs path OTLP/HTTP appends to a base endpoint.
const LOGS_PATH: &str = "v1/logs";
/// The default bound of a request body: 8 MiB, so a 7 MiB plan still
/// travels whole and a collector's default 20 MiB limit is never reached.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// The smallest bound a setting may give (a record's attributes must fit).
pub const MIN_MAX_REQUEST_BYTES: usize = 16 * 1024;

/// The service name when none is configured.
pub const DEFAULT_SERVICE_NAME: &str = "plan-checkpoint";

impl ExportConfig {
    /// A configuration for one logs endpoint (a full URL), with the
    /// defaults for everything else.
    pub fn new(endpoint: impl Into<String>) -> ExportConfig {
        ExportConfig {
            endpoint: endpoint.into(),
            protocol: Protocol::HttpProtobuf,
            headers: Vec::new(),
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            resource_attributes: Vec::new(),
            include_content: false,
            batch_size: 512,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            poll_interval: Duration::from_secs(1),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            certificate: None,
            client_certificate: None,
            client_key: None,
        }
    }

    /// The logs endpoint for a base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`):
    /// `/v1/logs` appended.
    pub fn logs_endpoint(base: &str) -> String {
        format!("{}/{LOGS_PATH}", base.trim_end_matches('/'))
    }

    /// Reads the standard variables through `lookup` (`std::env::var` in a
    /// host): `Ok(None)` unless `OTEL_LOGS_EXPORTER` names `otlp`.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<ExportConfig>, ConfigError> {
        // OpenTelemetry's switch for everything the variables turn on (an
        // explicit host option still applies: see `resolve`).
        if lookup("OTEL_SDK_DISABLED").is_some_and(|disabled| disabled.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let Some(exporters) = lookup("OTEL_LOGS_EXPORTER") else {
            return Ok(None);
        };
        let names: Vec<&str> = exporters
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .collect();
        if !names.contains(&"otlp") {
            return match names.iter().find(|name| **name != "none") {
                Some(other) => Err(ConfigError::UnsupportedExporter((*other).to_owned())),
                None => Ok(None),
            };
        }
        let endpoint = match (
            lookup("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"),
            lookup("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(logs), _) => logs,
            (None, Some(base)) => ExportConfig::logs_endpoint(&base),
            (None, None) => ExportConfig::logs_endpoint("http://localhost:4318"),
        };
        let mut config = ExportConfig::new(endpoint);
        config.read_variables(&lookup)?;
        config.check()?;
        Ok(Some(config))
    }

    /// Applies every variable but the two that turn export on and say
    /// where (protocol, headers, timeout, certificates, service name,
    /// resource attributes, the request bound): read both when the
    /// variables turn export on and when a host option does.
    fn read_variables(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let config = self;
        if let Some(protocol) =
            lookup("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL").or_else(|| lookup("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            config.protocol = Protocol::parse(&protocol)
                .ok_or_else(|| ConfigError::UnsupportedProtocol(protocol.clone()))?;
        }
        for variable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"] {
            if let Some(list) = lookup(variable) {
                for (key, value) in parse_list(variable, &list)? {
                    config
                        .headers
                        .retain(|(known, _)| !known.eq_ignore_ascii_case(&key));
                    config.headers.push((key, value));
                }
            }
        }
        for variable in ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT"] {
            if let Some(value) = lookup(variable) {
                let millis: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| ConfigError::InvalidTimeout { variable, value })?;
                config.timeout = Duration::from_millis(millis.max(1));
            }
        }
        config.read_request_bound(lookup)?;
        // The signal's own variable wins; an empty one counts as unset.
        let path = |logs: &str, general: &str| {
            lookup(logs)
                .filter(|value| !value.trim().is_empty())
                .or_else(|| lookup(general).filter(|value| !value.trim().is_empty()))
                .map(PathBuf::from)
        };
        config.certificate = path(
            "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        );
        config.client_certificate = path(
            "OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        );
        config.client_key = path(
            "OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY",
            "OTEL_EXPORTER_OTLP_CLIENT_KEY",
        );
        if let Some(list) = lookup("OTEL_RESOURCE_ATTRIBUTES") {
            for (key, value) in parse_list("OTEL_RESOURCE_ATTRIBUTES", &list)? {
                if key == "service.name" {
                    config.service_name = value;
                } else {
                    config.resource_attributes.push((key, value));
                }
            }
        }
        if let Some(name) = lookup("OTEL_SERVICE_NAME").filter(|name| !name.trim().is_empty()) {
            config.service_name = name;
        }
        Ok(())
    }

    /// Reads `PLAN_CHECKPOINT_OTLP_MAX_REQUEST_BYTES` (the bound of a
    /// request body in bytes; OpenTelemetry has no variable for it).
    fn read_request_bound(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let variable = "PLAN_CHECKPOINT_OTLP_MAX_REQUEST_BYTES";
        if let Some(value) = lookup(variable).filter(|value| !value.trim().is_empty()) {
            self.max_request_bytes = value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|bytes| *bytes >= MIN_MAX_REQUEST_BYTES)
                .ok_or(ConfigError::InvalidRequestBound { variable, value })?;
        }
        Ok(())
    }

    /// Refuses an endpoint the exporter cannot send to, and, for an
    /// `https://` one, certificate and key files that cannot be read or
    /// used (the files are read; nothing is connected).
    pub fn check(&self) -> Result<(), ConfigError> {
        let target = crate::http::Target::parse(&self.endpoint)?;
        if target.is_https() {
            crate::tls::check(self)?;
        }
        Ok(())
    }
}

/// Parses `key=value,key=value` (the W3C baggage form the OTel variables
/// use), percent-decoding both sides.
pub fn parse_list(variable: &'static str, list: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let invalid = || ConfigError::InvalidList {
            variable,
            entry: entry.to_owned(),
        };
        let (key, value) = entry.split_once('=').ok_or_else(invalid)?;
        let key = percent_decode(key.trim()).ok_or_else(invalid)?;
        let value = percent_decode(value.trim()).ok_or_else(invalid)?;
        if key.is_empty() {
            return Err(invalid());
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' => {
                let hex = text.get(index + 1..index + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                index += 3;
            }
            byte => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Declares a settings record from its one list ([`for_each_export_overrides!`]
/// here, plan-host's `for_each_host_config!` too): the record with serde
/// (the list gives camelCase, unknown fields refused, every field
/// optional) and `Default`. A field's `= default` part is for the bindings
/// (plan-ffi turns it into UniFFI's default) and ignored here.
#[doc(hidden)]
#[macro_export]
macro_rules! declare_settings_record {
    ($(#[$meta:meta])* struct $name:ident {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),+ $(,)?
    }) => {
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty),+
        }
    };
}

/// The one declaration of [`ExportOverrides`], handed to `$callback`
/// (this crate declares the record, plan-host holds it in its `HostConfig`
/// and plan-ffi exports the very type to the bindings). Each field is
/// `name: Type = default`, the default being the value the bindings give an
/// omitted argument, the same as Rust's `Default`. Field types are named as
/// this module imports them (`PathBuf`).
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_export_overrides {
    ($callback:ident) => {
        $callback! {
            /// The audit export's settings a frontend gives (`serve`'s
            /// `--otel-*` flags, the `otel` record of a host's settings,
            /// through the FFI or a JSON file in camelCase), applied over
            /// what the `OTEL_*` variables say by
            /// [`ExportOverrides::resolve`](crate::ExportOverrides::resolve).
            /// Every field is optional: absent (or `false`, or empty) leaves
            /// the variables' value, or the default.
            #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
            struct ExportOverrides {
                /// Exports the audit as OpenTelemetry log records
                /// (OTLP/HTTP) to this logs endpoint, a full `http://` or
                /// `https://` URL (`.../v1/logs`), turning export on by
                /// itself. Without it, export is on only when the standard
                /// variables are read and `OTEL_LOGS_EXPORTER=otlp`.
                #[serde(skip_serializing_if = "Option::is_none")]
                logs_endpoint: Option<String> = None,
                /// `http/protobuf` (the default) or `http/json`.
                #[serde(skip_serializing_if = "Option::is_none")]
                protocol: Option<String> = None,
                /// Request headers for the collector, each `KEY=VALUE`.
                #[serde(skip_serializing_if = "Vec::is_empty")]
                headers: Vec<String> = [],
                /// The resource's `service.name` (default
                /// `plan-checkpoint`).
                #[serde(skip_serializing_if = "Option::is_none")]
                service_name: Option<String> = None,
                /// Also exports the plan text, plan titles, questions and
                /// command text (their SHA-256 always is; they may be
                /// confidential).
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                include_content: bool = false,
                /// A PEM file of the CA certificates trusted for an
                /// `https://` collector, instead of the platform's roots (as
                /// `OTEL_EXPORTER_OTLP_CERTIFICATE`).
                #[serde(skip_serializing_if = "Option::is_none")]
                certificate: Option<PathBuf> = None,
                /// A PEM file of the client certificate for a collector that
                /// requires one (mTLS, as
                /// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`); needs
                /// `client_key`.
                #[serde(skip_serializing_if = "Option::is_none")]
                client_certificate: Option<PathBuf> = None,
                /// A PEM file of the client certificate's private key (as
                /// `OTEL_EXPORTER_OTLP_CLIENT_KEY`); needs
                /// `client_certificate`.
                #[serde(skip_serializing_if = "Option::is_none")]
                client_key: Option<PathBuf> = None,
            }
        }
    };
}

for_each_export_overrides!(declare_settings_record);

impl ExportOverrides {
    /// Whether nothing is set (every field absent, `false` or empty): the
    /// variables, or the defaults, alone.
    pub fn is_empty(&self) -> bool {
        *self == ExportOverrides::default()
    }

    /// The export configuration: the variables read through `lookup`
    /// (none when `lookup` finds nothing), these settings over them; `None`
    /// when export is off. Settings without an endpoint while the
    /// variables leave export off are [`ConfigError::NoEndpoint`].
    pub fn resolve(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ExportConfig>, ConfigError> {
        let from_env = ExportConfig::from_env(&lookup)?;
        let config = match (&self.logs_endpoint, from_env) {
            (Some(endpoint), Some(mut config)) => {
                config.endpoint.clone_from(endpoint);
                Some(config)
            }
            (Some(endpoint), None) => {
                // Turned on by the option: the other variables still say
                // how (resource attributes, headers, ...), unless OTel is
                // disabled as a whole.
                let mut config = ExportConfig::new(endpoint.clone());
                let disabled = lookup("OTEL_SDK_DISABLED")
                    .is_some_and(|disabled| disabled.trim().eq_ignore_ascii_case("true"));
                if !disabled {
                    config.read_variables(&lookup)?;
                }
                Some(config)
            }
            (None, config) => config,
        };
        let Some(mut config) = config else {
            // Any setting but the endpoint, which would be ignored.
            let given = ExportOverrides {
                logs_endpoint: None,
                ..self.clone()
            } != ExportOverrides::default();
            return if given {
                Err(ConfigError::NoEndpoint)
            } else {
                Ok(None)
            };
        };
        if let Some(protocol) = &self.protocol {
            config.protocol = Protocol::parse(protocol)
                .ok_or_else(|| ConfigError::UnsupportedProtocol(protocol.clone()))?;
        }
        for header in &self.headers {
            for (key, value) in parse_list("header", header)? {
                config
                    .headers
                    .retain(|(known, _)| !known.eq_ignore_ascii_case(&key));
                config.headers.push((key, value));
            }
        }
        if let Some(name) = &self.service_name {
            config.service_name.clone_from(name);
        }
        config.include_content |= self.include_content;
        for (setting, option) in [
            (&mut config.certificate, &self.certificate),
            (&mut config.client_certificate, &self.client_certificate),
            (&mut config.client_key, &self.client_key),
        ] {
            if option.is_some() {
                setting.clone_from(option);
            }
        }
        config.check()?;
        Ok(Some(config))
    }
}
