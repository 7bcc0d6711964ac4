//! The canonical error codes of the plan checkpoint.
//!
//! Every layer (storage, host, protocol, CLI, FFI) reports failures with one
//! of these codes, so a client sees the same `SCREAMING_SNAKE` string whether
//! it embeds the library, links it through FFI or speaks JSON-RPC. The codes
//! are a stable contract: a variant may be added, never renamed or removed.
//! This module only names and describes codes; it decides nothing.

/// Hands the one list of canonical codes to `$callback`, a macro that
/// receives, per code, its doc comment, its variant name, its wire string and
/// its human message (`$(#[$doc])* $Variant => "WIRE", "message";`).
///
/// [`ErrorCode`] is generated from this list and so are the FFI's typed
/// codes, so a code added here reaches every frontend, and a frontend that
/// has to handle codes one by one stops compiling until it does.
#[macro_export]
macro_rules! for_each_error_code {
    ($callback:ident) => {
        $callback! {
        /// JSON that could not be parsed.
        ParseError => "PARSE_ERROR", "the message is not valid JSON";
        /// A JSON-RPC envelope that is not a valid request.
        InvalidRequest => "INVALID_REQUEST", "the message is not a valid JSON-RPC 2.0 request";
        /// A method the protocol does not have.
        MethodNotFound => "METHOD_NOT_FOUND", "the method does not exist in protocol v9";
        /// A request sent before `initialize`.
        ProtocolNotInitialized => "PROTOCOL_NOT_INITIALIZED", "the connection has not been initialized; send initialize first";
        /// `initialize` named a protocol version other than 9.
        ProtocolVersionUnsupported => "PROTOCOL_VERSION_UNSUPPORTED", "the protocol version is not supported; this host speaks protocol v9";
        /// Parameters of the wrong shape, type or with unknown fields.
        InvalidParams => "INVALID_PARAMS", "the parameters are invalid for this method";
        /// No session with that id.
        SessionNotFound => "SESSION_NOT_FOUND", "no session has that id";
        /// A session with that id exists already.
        SessionAlreadyExists => "SESSION_ALREADY_EXISTS", "a session with that id already exists";
        /// The session has an active turn, a pending approval or a live execution.
        SessionBusy => "SESSION_BUSY", "the session is busy: a turn is active, an approval is pending or an execution is queued or running";
        /// The session has no workspace root, so no plan artifact can be written.
        SessionNotProjectBound => "SESSION_NOT_PROJECT_BOUND", "the session is not bound to a project, so a plan cannot be submitted";
        /// A Plan run from a scheduled or unattended origin.
        PlanRequiresInteractiveSession => "PLAN_REQUIRES_INTERACTIVE_SESSION", "a Plan run needs an interactive session; change the scheduled task to Agent to run it unattended";
        /// `SubmitPlan` outside an active Plan turn.
        PlanNotActive => "PLAN_NOT_ACTIVE", "SubmitPlan is only valid during the active Plan turn";
        /// A tool-call batch that holds `SubmitPlan` and another call.
        SubmitPlanNotAlone => "SUBMIT_PLAN_NOT_ALONE", "SubmitPlan must be the only tool call in its batch; no call in the batch was allowed";
        /// `SubmitPlan` input that is not exactly `{title, markdown, question}`.
        InvalidPlanInput => "INVALID_PLAN_INPUT", "SubmitPlan input must be exactly {title, markdown, question}: non-empty strings, title (at most 200 characters) and question (at most 1000) on one line without control or bidirectional characters, markdown within the size limit";
        /// A tool that Plan mode does not allow.
        ToolDeniedInPlan => "TOOL_DENIED_IN_PLAN", "the tool is not allowed in Plan mode";
        /// The turn named in the request is not the session's active turn.
        TurnNotActive => "TURN_NOT_ACTIVE", "the turn is not the session's active turn";
        /// No approval with that id.
        ApprovalNotFound => "APPROVAL_NOT_FOUND", "no plan approval has that id";
        /// The approval was decided already.
        ApprovalNotPending => "APPROVAL_NOT_PENDING", "the plan approval is no longer pending";
        /// Approve without an explicit permission mode.
        PermissionModeRequired => "PERMISSION_MODE_REQUIRED", "approving a plan needs an explicit permission mode: ask, accept-edits or auto";
        /// The approval's absolute deadline has passed.
        PlanApprovalTimeout => "PLAN_APPROVAL_TIMEOUT", "the plan approval expired at its deadline; submit a new plan";
        /// The artifact path would leave the workspace.
        ArtifactPathEscape => "ARTIFACT_PATH_ESCAPE", "the plan artifact path escapes the workspace root";
        /// A symlink where the artifact path needs a real directory or file.
        ArtifactSymlink => "ARTIFACT_SYMLINK", "the plan artifact path goes through a symbolic link";
        /// The artifact could not be written durably.
        ArtifactWriteFailed => "ARTIFACT_WRITE_FAILED", "the plan artifact could not be written durably";
        /// The artifact file is gone.
        ArtifactMissing => "ARTIFACT_MISSING", "the plan artifact file is missing";
        /// The artifact's size or SHA-256 differs from the record.
        ArtifactIntegrityMismatch => "ARTIFACT_INTEGRITY_MISMATCH", "the plan artifact's size or SHA-256 does not match the approval record";
        /// No execution with that id.
        ExecutionNotFound => "EXECUTION_NOT_FOUND", "no execution has that id";
        /// The execution is not in a state that allows the request.
        ExecutionNotActive => "EXECUTION_NOT_ACTIVE", "the execution is not in a state that allows this request";
        /// The execution was cancelled by the user.
        ExecutionCancelled => "EXECUTION_CANCELLED", "the execution was cancelled";
        /// Work of an earlier host process, interrupted by the startup fence.
        HostRestarted => "HOST_RESTARTED", "the host restarted; work from the earlier host process was interrupted, not replayed";
        /// Another live host holds the database.
        HostAlreadyRunning => "HOST_ALREADY_RUNNING", "another live host is already using this database";
        /// The host object was closed.
        HostClosed => "HOST_CLOSED", "the host has been closed";
        /// A shell id the catalog does not know.
        ShellUnknown => "SHELL_UNKNOWN", "the shell is not in the shell catalog";
        /// A database schema version this build cannot open.
        SchemaUnsupported => "SCHEMA_UNSUPPORTED", "the database schema version is not supported";
        /// The database file is not SQLite or is corrupt.
        DatabaseUnreadable => "DATABASE_UNREADABLE", "the database file is not a readable SQLite database";
        /// A storage operation failed.
        StorageFailed => "STORAGE_FAILED", "the storage operation failed";
        /// A bug: the host reached a state it should never reach.
        Internal => "INTERNAL", "internal error";
        /// Plan-mode Bash on a host without the kernel's read-only sandbox.
        PlanSandboxUnavailable => "PLAN_SANDBOX_UNAVAILABLE", "the read-only Plan sandbox is not available on this host, so Plan-mode Bash cannot run";
        /// An Agent command on a host without the workspace-write sandbox.
        SandboxUnavailable => "SANDBOX_UNAVAILABLE", "the command sandbox is not available on this host, so the command cannot run";
        /// A Bash input that is not `{command, timeoutMs?, cwd?}` with valid values.
        InvalidCommandInput => "INVALID_COMMAND_INPUT", "Bash input must be {command, timeoutMs?, cwd?}: a non-empty command of at most 131071 bytes (the kernel's limit for one argument), a timeout within the host's bounds, a non-empty cwd";
        /// A command cwd outside the workspace root.
        CommandCwdEscape => "COMMAND_CWD_ESCAPE", "the command's working directory is outside the workspace root";
        /// A command start the turn does not allow.
        CommandNotAllowed => "COMMAND_NOT_ALLOWED", "the command may not be started: not a Bash call allowed or confirmed in this Agent turn, still awaiting its confirmation, already started, not the command the call holds, or a Plan turn";
        /// No command run with that call id.
        CommandNotFound => "COMMAND_NOT_FOUND", "no command run has that call id";
        /// The command run is not running.
        CommandNotRunning => "COMMAND_NOT_RUNNING", "the command is not running";
        /// The selected shell is not installed.
        ShellUnavailable => "SHELL_UNAVAILABLE", "the selected shell is not installed on this host";
        /// A tool call a person declined (`tool/confirm` with `allow: false`).
        ToolDeclined => "TOOL_DECLINED", "a person declined this tool call, so it must not run";
        /// `tool/confirm` for a call that is not awaiting a confirmation.
        ToolConfirmationNotPending => "TOOL_CONFIRMATION_NOT_PENDING", "the tool call is not awaiting a confirmation: not a call of the active turn decided confirm, or answered already";
        /// A call that needs a person's confirmation in a turn nobody attends.
        PermissionRequiresInteractiveSession => "PERMISSION_REQUIRES_INTERACTIVE_SESSION", "the permission mode needs a person to confirm this tool call, and the turn is not interactive; approve with auto or run it interactively";
        /// A file-writing tool call under `auto` aimed outside the workspace
        /// or at a name it protects: refused, as the sandbox refuses the
        /// same write to a command.
        ToolWriteProtected => "TOOL_WRITE_PROTECTED", "under auto a file-writing tool writes only inside the workspace and never its protected names (.git, .pi, the agents' configuration such as .claude and .mcp.json), as no command may; approve with ask or accept-edits to confirm such a write";
        /// A tool that would run a shell command or program itself, outside
        /// the host's sandbox and audit.
        ToolRunsOutsideHost => "TOOL_RUNS_OUTSIDE_HOST", "the tool would run a shell command or program outside the host's sandbox and audit; run the command with Bash, which the host runs";
        /// A pending plan its agent withdrew before anyone decided (the
        /// agent ended): it can no longer be approved.
        PlanWithdrawn => "PLAN_WITHDRAWN", "the agent that submitted the plan ended before a person decided, so the plan was withdrawn; submit it again";
        }
    };
}

/// Declares [`ErrorCode`] and its tables from [`for_each_error_code`].
macro_rules! declare_error_code {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal, $message:literal;)+) => {
        /// A canonical, stable error code with a human message.
        ///
        /// `as_str` gives the wire string; `Display` and `message` give a
        /// sentence for people.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: [ErrorCode; [$($wire),+].len()] = [$(ErrorCode::$variant),+];

            /// The stable wire string, for example `"PLAN_APPROVAL_TIMEOUT"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }

            /// The human message, as a static sentence.
            pub const fn sentence(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $message,)+
                }
            }
        }
    };
}

for_each_error_code!(declare_error_code);

impl ErrorCode {
    /// The code for a wire string, or `None` when the string is not a code.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|candidate| candidate.as_str() == code)
    }

    /// The human message (the same text as `Display`).
    pub fn message(self) -> String {
        self.sentence().to_owned()
    }

    /// The human message followed by a detail, `"<message>: <detail>"`: the
    /// one format every layer uses for an error with specifics.
    pub fn message_with(self, detail: &str) -> String {
        format!("{}: {detail}", self.sentence())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.sentence())
    }
}

impl std::error::Error for ErrorCode {}

/// A code travels as its exact wire string.
impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Reading a string that is not a known code fails: codes are only ever
/// added together with a new release of this crate.
impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        ErrorCode::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown canonical error code `{text}`")))
    }
}

/// The schema names the wire's name for a code, `CanonicalCode`: a string
/// that is one of the codes.
impl schemars::JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("CanonicalCode")
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<serde_json::Value> = ErrorCode::ALL
            .iter()
            .map(|code| serde_json::Value::from(code.as_str()))
            .collect();
        let mut object = serde_json::Map::new();
        object.insert(
            "description".to_owned(),
            "A canonical SCREAMING_SNAKE error code.".into(),
        );
        object.insert("type".to_owned(), "string".into());
        object.insert("enum".to_owned(), serde_json::Value::Array(codes));
        schemars::Schema::from(object)
    }
}
