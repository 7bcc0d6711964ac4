//! The one declaration of a host's settings as plain data, [`HostConfig`],
//! and the one function that turns them into [`HostOptions`].
//!
//! Every frontend gives its settings this way: `serve` fills a `HostConfig`
//! from its flags, the FFI takes one from the foreign host, a Rust embedder
//! may build or deserialize one. [`HostConfig::options`] checks them
//! through plan-core's range rules (and the host's web, scratch and export
//! rules), so a setting a frontend gives is accepted or refused the same way
//! through each, with the same canonical code. It decides nothing else and
//! touches nothing but the environment variables the OpenTelemetry export
//! reads when [`HostConfig::otel_from_environment`] allows them.
//!
//! What only Rust can pass (a clock, the expiry timer mode, the frontend's
//! decision channel, the shell catalog) stays on [`HostOptions`].

use std::net::SocketAddr;
use std::path::PathBuf;

use plan_audit_export::ExportOverrides;
use plan_audit_export::declare_settings_record;
use plan_core::{CommandLimits, ErrorCode, Limits, ResourceBounds};

use crate::{HostError, HostOptions, ScratchSize, WebOptions};

/// The one declaration of [`HostConfig`], handed to `$callback` (plan-host
/// declares the record, plan-ffi exports the very type to the bindings).
/// Each field is `name: Type = default`, the default being the value the
/// bindings give an omitted argument, the same as Rust's `Default` (`=
/// default`: the type's own default, for a record). Field types are named
/// as this module imports them (`PathBuf`, `ExportOverrides`).
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_host_config {
    ($callback:ident) => {
        $callback! {
            /// A host's settings as plain data, the same through every
            /// frontend (`serve`'s flags, the FFI, a Rust embedder, a JSON
            /// file in camelCase). Every field is optional: absent (or
            /// `false`, or empty) is the host's default. Turned into
            /// [`HostOptions`](crate::HostOptions) by
            /// [`HostConfig::options`](crate::HostConfig::options), which
            /// refuses an out-of-range value with `INVALID_PARAMS`.
            #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
            struct HostConfig {
                /// Approval TTL in milliseconds: 1 to 604800000 (seven days);
                /// 30 minutes when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                approval_ttl_ms: Option<i64> = None,
                /// Largest SubmitPlan markdown in bytes: 1 to 67108864
                /// (64 MiB); 8 MiB when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                markdown_limit_bytes: Option<u64> = None,
                /// The command sandbox helper (`plan-exec-sandbox`, or a
                /// binary that acts as it), an absolute path; absent: the one
                /// bundled next to the executable.
                #[serde(skip_serializing_if = "Option::is_none")]
                sandbox_helper: Option<PathBuf> = None,
                /// Where each command's scratch directory is made: a private
                /// directory (0700) of this user, outside every workspace,
                /// reached without a symlink; one that is not is refused and
                /// no command runs. Absent: one per database under
                /// `$XDG_RUNTIME_DIR` or the temporary directory.
                #[serde(skip_serializing_if = "Option::is_none")]
                scratch_root: Option<PathBuf> = None,
                /// How much a command's scratch directory (`TMPDIR`) may
                /// hold, in MB (MiB): 1 to 1048576; 1024 when absent. Inside
                /// the sandbox's namespaces it is a private tmpfs (memory) of
                /// this size; without them an ordinary directory, not capped.
                #[serde(skip_serializing_if = "Option::is_none")]
                scratch_size_mb: Option<u64> = None,
                /// How much memory one sandboxed command (everything it
                /// starts, its scratch directory included) may use, in MB
                /// (MiB): 64 to 1048576; 4096 when absent. Kept by a cgroup
                /// of the command's own where the machine gives one
                /// (`initialize` says whether it does).
                #[serde(skip_serializing_if = "Option::is_none")]
                command_memory_mb: Option<u64> = None,
                /// The timeout of a command whose input names none, in
                /// milliseconds: 1 to the maximum; 120000 (or the maximum
                /// when that is smaller) when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                command_timeout_ms: Option<u64> = None,
                /// The largest timeout a command may ask for, in
                /// milliseconds: at least 1; 600000 when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                command_max_timeout_ms: Option<u64> = None,
                /// Output kept and streamed per command (both streams), in
                /// bytes; 1 MiB when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                command_output_cap: Option<u64> = None,
                /// How many commands of one session may run at once: at
                /// least 1; 4 when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                max_running_commands: Option<u64> = None,
                /// Whether Agent commands (`auto`, and confirmed ones) may
                /// use the network.
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                network_in_auto: bool = false,
                /// Where the kernel sandbox is unavailable, whether Agent
                /// commands (`auto`, and confirmed ones under ask and
                /// accept-edits) run unconfined instead of failing with
                /// `SANDBOX_UNAVAILABLE` (Plan commands never do).
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                auto_without_sandbox: bool = false,
                /// Whether the sandbox skips its namespaces even where the
                /// kernel allows them (as a kernel without them would): Plan
                /// Bash still runs, the database and terminals are no longer
                /// hidden from it, and Agent commands fail with
                /// `SANDBOX_UNAVAILABLE` unless `auto_without_sandbox`.
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                skip_namespaces: bool = false,
                /// More paths kept read-only under Agent `auto`, besides
                /// `.git`, `.pi`, the database with its side files and the
                /// helper.
                #[serde(skip_serializing_if = "Vec::is_empty")]
                protected_paths: Vec<PathBuf> = [],
                /// A command does not inherit the host's environment
                /// variables whose names contain one of these
                /// (case-insensitive). Absent: `KEY`, `SECRET`, `TOKEN` and
                /// `PASSWORD`; an empty list keeps every variable.
                #[serde(skip_serializing_if = "Option::is_none")]
                secret_env_markers: Option<Vec<String>> = None,
                /// Serves approval cards (`<plan-approval-card>`) over HTTP
                /// on this address and port, e.g. `127.0.0.1:0` (port 0
                /// picks a free port); no web server when absent. An address
                /// that is not loopback is `INVALID_PARAMS` unless
                /// `web_allow_any_address`.
                #[serde(skip_serializing_if = "Option::is_none")]
                web_address: Option<String> = None,
                /// Lets `web_address` name an address that is not loopback:
                /// anyone who can reach it and sees a card's URL can decide.
                #[serde(skip_serializing_if = "std::ops::Not::not")]
                web_allow_any_address: bool = false,
                /// The person's notifier: a command line run through
                /// `/bin/sh -c` once each time a plan becomes pending, with
                /// the approval as JSON on its stdin (a `PendingPlanNotice`,
                /// the card URL in it when `web_address` is set), its output
                /// discarded and killed after 30 s. Empty, or with a NUL
                /// byte: `INVALID_PARAMS`.
                #[serde(skip_serializing_if = "Option::is_none")]
                notifier: Option<String> = None,
                /// The audit's OpenTelemetry export (OTLP/HTTP log records):
                /// its endpoint, encoding, headers, service name, content and
                /// TLS files, applied over the standard `OTEL_*` variables
                /// (when `otel_from_environment` reads them). Off unless it
                /// names a logs endpoint or the variables turn export on.
                #[serde(skip_serializing_if = "ExportOverrides::is_empty")]
                otel: ExportOverrides = default,
                /// Whether the standard `OTEL_*` variables of the process
                /// are read (as OpenTelemetry SDKs do); true when absent.
                #[serde(skip_serializing_if = "Option::is_none")]
                otel_from_environment: Option<bool> = None,
            }
        }
    };
}

// Declared as plan-audit-export declares its settings record (serde,
// `Default`), so both records have one shape.
for_each_host_config!(declare_settings_record);

impl HostConfig {
    /// The host options these settings give, every other option at its
    /// default (the OpenTelemetry variables read from this process's
    /// environment unless [`HostConfig::otel_from_environment`] is
    /// `false`).
    ///
    /// ```
    /// use plan_host::{ErrorCode, HostConfig};
    ///
    /// let config: HostConfig = plan_host::serde_json::from_str(r#"{"approvalTtlMs": 600000}"#)?;
    /// assert_eq!(config.options()?.limits.approval_ttl_ms(), 600_000);
    /// let out_of_range = HostConfig { scratch_size_mb: Some(0), ..HostConfig::default() };
    /// assert_eq!(out_of_range.options().unwrap_err().code(), ErrorCode::InvalidParams);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `INVALID_PARAMS`, saying which setting and its range, for a value
    /// out of plan-core's ranges (TTL, markdown limit, command limits and
    /// memory), a
    /// scratch size out of range, a web address that is not one (or not
    /// loopback without `web_allow_any_address`), or export settings the
    /// exporter refuses.
    pub fn options(&self) -> Result<HostOptions, HostError> {
        self.options_with_environment(|name| std::env::var(name).ok())
    }

    /// [`HostConfig::options`] with the environment read through `lookup`
    /// (when `otel_from_environment` allows it).
    ///
    /// # Errors
    ///
    /// As [`HostConfig::options`].
    pub fn options_with_environment(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<HostOptions, HostError> {
        let defaults = HostOptions::default();
        // A value too large for this platform is out of the range, not
        // wrapped.
        let markdown_limit_bytes = self
            .markdown_limit_bytes
            .map_or(Limits::DEFAULT_MARKDOWN_LIMIT_BYTES, |limit| {
                usize::try_from(limit).unwrap_or(usize::MAX)
            });
        let mut limits = Limits::new(
            self.approval_ttl_ms.unwrap_or(Limits::DEFAULT_APPROVAL_TTL_MS),
            markdown_limit_bytes,
        )?;
        limits.commands.limits = CommandLimits::new(
            self.command_timeout_ms,
            self.command_max_timeout_ms
                .unwrap_or(CommandLimits::DEFAULT_MAX_TIMEOUT_MS),
            self.max_running_commands
                .map_or(CommandLimits::DEFAULT_MAX_RUNNING_PER_SESSION, |limit| {
                    usize::try_from(limit).unwrap_or(usize::MAX)
                }),
        )?;
        limits.commands.bounds = ResourceBounds::with_memory_mb(
            self.command_memory_mb
                .unwrap_or(ResourceBounds::DEFAULT_MEMORY_MB),
        )?;
        limits.commands.network_in_auto = self.network_in_auto;
        limits.commands.auto_without_sandbox = self.auto_without_sandbox;
        let scratch_size =
            ScratchSize::from_megabytes(self.scratch_size_mb.unwrap_or(ScratchSize::DEFAULT_MEGABYTES))?;
        let read_environment = self.otel_from_environment.unwrap_or(true);
        let audit_export = self
            .otel
            .resolve(|name| if read_environment { lookup(name) } else { None })
            .map_err(|error| HostError::with_detail(ErrorCode::InvalidParams, error.to_string()))?;
        Ok(HostOptions {
            limits,
            sandbox_helper: self.sandbox_helper.clone(),
            scratch_root: self.scratch_root.clone(),
            command_output_cap: self.command_output_cap.unwrap_or(defaults.command_output_cap),
            command_env_secret_markers: self
                .secret_env_markers
                .clone()
                .unwrap_or_else(|| defaults.command_env_secret_markers.clone()),
            skip_namespaces: self.skip_namespaces,
            protected_paths: self.protected_paths.clone(),
            scratch_size,
            web: self.web()?,
            notifier: self.notifier.clone(),
            audit_export,
            ..defaults
        })
    }

    /// The web option: none without an address; a loopback address (the
    /// host's rule, [`WebOptions::loopback`]) unless any address is asked
    /// for explicitly.
    fn web(&self) -> Result<Option<WebOptions>, HostError> {
        let Some(address) = &self.web_address else {
            return Ok(None);
        };
        let address: SocketAddr = address.parse().map_err(|error| {
            HostError::with_detail(
                ErrorCode::InvalidParams,
                format!("web address {address:?} is not an address and port: {error}"),
            )
        })?;
        if self.web_allow_any_address {
            Ok(Some(WebOptions::any_address(address)))
        } else {
            WebOptions::loopback(address).map(Some)
        }
    }
}
