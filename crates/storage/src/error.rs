//! The one error type of the crate and its mapping to canonical codes.
//!
//! Every failure of storage, migration, locking and artifacts is a
//! [`StorageError`]. Its `Display` names the specifics a person needs (the
//! version found, the path, the row); [`StorageError::code`] gives the
//! canonical [`ErrorCode`] a client sees. This module only describes
//! failures; it never retries or recovers.

use std::path::PathBuf;

use plan_core::{ApprovalStatus, ErrorCode, ExecutionState};

/// Everything that can go wrong in plan-storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The database has a schema version this build does not open (or, for
    /// a read-only open, one that would need a migration first).
    #[error("{path}: database schema version {found} is not supported: {reason}")]
    SchemaUnsupported {
        /// The database file.
        path: PathBuf,
        /// The `user_version` found in the file.
        found: u32,
        /// Why it is refused and what to do about it.
        reason: String,
    },
    /// The file is not a SQLite database, or SQLite reports it corrupt.
    #[error("{path}: not a readable SQLite database: {detail}")]
    DatabaseUnreadable {
        /// The database file.
        path: PathBuf,
        /// What SQLite or the header check said.
        detail: String,
    },
    /// A read-only open named a file that does not exist.
    #[error("{path}: no database file exists at this path")]
    DatabaseMissing {
        /// The path that was looked at.
        path: PathBuf,
    },
    /// The migration transaction failed and was rolled back; the file still
    /// holds the schema it had before.
    #[error("migrating the database from {from} to schema v10 failed and was rolled back: {detail}")]
    MigrationFailed {
        /// The schema the database had (and still has): `v8` or `a new file`.
        from: String,
        /// What failed.
        detail: String,
    },
    /// Any other SQLite failure.
    #[error("storage operation failed while {context}: {source}")]
    Sqlite {
        /// What the store was doing.
        context: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system failure outside artifacts (locking, probing).
    #[error("{context} {path}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A stored value that is not a canonical wire string or is out of range.
    #[error("column {column} holds a value this build does not understand: {value:?}")]
    InvalidValue {
        /// The column.
        column: &'static str,
        /// The value as read.
        value: String,
    },
    /// No session with that id.
    #[error("no session has id {id:?}")]
    SessionNotFound {
        /// The id looked for.
        id: String,
    },
    /// A session with that id exists already.
    #[error("a session with id {id:?} already exists")]
    SessionAlreadyExists {
        /// The id.
        id: String,
    },
    /// No approval with that id.
    #[error("no plan approval has id {id:?}")]
    ApprovalNotFound {
        /// The id looked for.
        id: String,
    },
    /// A compare-and-set update lost: the row no longer matches what the
    /// caller expected, so another writer got there first. The whole
    /// transaction was rolled back.
    #[error(
        "plan approval {id:?} changed under us: expected status {expected_status} with execution state \
         {expected_execution}, found status {found_status} with execution state {found_execution}"
    )]
    StaleApproval {
        /// The approval id.
        id: String,
        /// The status the update expected.
        expected_status: ApprovalStatus,
        /// The execution state the update expected, as text (`none` for NULL).
        expected_execution: String,
        /// The status found.
        found_status: String,
        /// The execution state found, as text (`none` for NULL).
        found_execution: String,
    },
    /// Inserting an approval would break a per-session invariant the database
    /// enforces (one pending approval, one live execution) or reuse an id.
    #[error("plan approval {id:?} cannot be inserted: {detail}")]
    ApprovalConflict {
        /// The approval id.
        id: String,
        /// The constraint SQLite named.
        detail: String,
    },
    /// Another live host holds the database's lock, under this name or any
    /// other (a symbolic or hard link to the same file).
    #[error("another live host is already using the database {database} (it holds the lock on the file)")]
    HostAlreadyRunning {
        /// The database path as given.
        database: PathBuf,
    },
    /// A database name SQLite would not keep on disk (empty, `:memory:`, a
    /// `file:` URI): a host on it would acknowledge work that vanishes.
    #[error("{path:?} cannot be a host database: {reason}")]
    DatabasePathRefused {
        /// The name as given.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// The database or its write-ahead log was deleted, replaced or
    /// truncated under the open connection: a write now could not be
    /// durable, so this connection refuses every further write.
    #[error(
        "{path}: refusing to write: {detail}; restart the host (acknowledged changes since the last checkpoint may be lost)"
    )]
    DatabaseFilesChanged {
        /// The database file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The artifact path or workspace root would leave the workspace.
    #[error("plan artifact path escapes the workspace: {detail}")]
    ArtifactPathEscape {
        /// What was refused.
        detail: String,
    },
    /// A symbolic link where the artifact path needs a real directory or file.
    #[error("plan artifact path goes through a symbolic link at {path}")]
    ArtifactSymlink {
        /// The workspace-relative component that is a link.
        path: String,
    },
    /// The artifact could not be written durably; no file was left behind.
    #[error("plan artifact {path} could not be written durably: {source}")]
    ArtifactWriteFailed {
        /// The workspace-relative path (or the root when it was the problem).
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The artifact file is gone.
    #[error("plan artifact {path} is missing")]
    ArtifactMissing {
        /// The workspace-relative path.
        path: String,
    },
    /// The workspace root a recorded artifact lives under is gone (or is not
    /// a directory), so the artifact is missing too.
    #[error("the workspace root {root} does not exist")]
    WorkspaceMissing {
        /// The workspace root.
        root: String,
    },
    /// A recorded artifact (or a directory on its way) exists but could not
    /// be read.
    #[error("plan artifact {path} could not be read: {source}")]
    ArtifactReadFailed {
        /// The workspace-relative path (or the root when it was the problem).
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A row migrated from schema v8: it never had an artifact.
    #[error("plan approval {id} was migrated from schema v8 and has no artifact")]
    LegacyApproval {
        /// The approval id.
        id: String,
    },
    /// The approval's session is not bound to a workspace, so its artifact
    /// has nowhere to be.
    #[error("the session {session_id} of plan approval {id} has no workspace root")]
    NoWorkspace {
        /// The approval id.
        id: String,
        /// The session id.
        session_id: String,
    },
    /// The artifact's bytes no longer match the record.
    #[error(
        "plan artifact {path} does not match its record: expected {expected_size} bytes with SHA-256 \
         {expected_sha256}, found {found_size} bytes with SHA-256 {found_sha256}"
    )]
    ArtifactIntegrityMismatch {
        /// The workspace-relative path.
        path: String,
        /// The recorded size.
        expected_size: u64,
        /// The recorded SHA-256.
        expected_sha256: String,
        /// The size found.
        found_size: u64,
        /// The SHA-256 found.
        found_sha256: String,
    },
}

impl StorageError {
    /// The canonical code a client sees for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            StorageError::SchemaUnsupported { .. } => ErrorCode::SchemaUnsupported,
            StorageError::DatabaseUnreadable { .. } | StorageError::DatabaseMissing { .. } => {
                ErrorCode::DatabaseUnreadable
            }
            StorageError::DatabasePathRefused { .. } => ErrorCode::InvalidParams,
            StorageError::MigrationFailed { .. }
            | StorageError::DatabaseFilesChanged { .. }
            | StorageError::Io { .. }
            | StorageError::InvalidValue { .. } => ErrorCode::StorageFailed,
            StorageError::Sqlite { source, .. } => {
                if is_unreadable(source) {
                    ErrorCode::DatabaseUnreadable
                } else {
                    ErrorCode::StorageFailed
                }
            }
            StorageError::SessionNotFound { .. } => ErrorCode::SessionNotFound,
            StorageError::SessionAlreadyExists { .. } => ErrorCode::SessionAlreadyExists,
            StorageError::ApprovalNotFound { .. } => ErrorCode::ApprovalNotFound,
            // A lost race on a pending row (approve, reject, expire) is the
            // approval's problem; a lost race on an execution transition
            // (start, complete, cancel) is the execution's, which is the code
            // plan-core gives for the same situation seen in memory.
            StorageError::StaleApproval { expected_status, .. } => match expected_status {
                ApprovalStatus::Pending => ErrorCode::ApprovalNotPending,
                ApprovalStatus::Approved
                | ApprovalStatus::Rejected
                | ApprovalStatus::Expired
                | ApprovalStatus::Interrupted => ErrorCode::ExecutionNotActive,
            },
            StorageError::ApprovalConflict { .. } => ErrorCode::SessionBusy,
            StorageError::HostAlreadyRunning { .. } => ErrorCode::HostAlreadyRunning,
            StorageError::ArtifactPathEscape { .. } => ErrorCode::ArtifactPathEscape,
            StorageError::ArtifactSymlink { .. } => ErrorCode::ArtifactSymlink,
            StorageError::ArtifactWriteFailed { .. } => ErrorCode::ArtifactWriteFailed,
            StorageError::ArtifactMissing { .. }
            | StorageError::WorkspaceMissing { .. }
            | StorageError::LegacyApproval { .. }
            | StorageError::NoWorkspace { .. } => ErrorCode::ArtifactMissing,
            StorageError::ArtifactReadFailed { .. } => ErrorCode::StorageFailed,
            StorageError::ArtifactIntegrityMismatch { .. } => ErrorCode::ArtifactIntegrityMismatch,
        }
    }

    /// Whether the error refuses the database file itself rather than an
    /// operation on it: missing, unreadable or corrupt, of a schema this
    /// build cannot open, a migration that could not run, a name SQLite
    /// would not keep on disk, or held by another host. Frontends that
    /// report a refused database apart (the CLI's exit code 3) ask this.
    ///
    /// ```
    /// use plan_storage::{Store, StorageError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let missing = Store::open_read_only(dir.path().join("none.db")).map(|_| ()).unwrap_err();
    /// assert!(missing.is_database_refusal());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_database_refusal(&self) -> bool {
        match self {
            StorageError::SchemaUnsupported { .. }
            | StorageError::DatabaseUnreadable { .. }
            | StorageError::DatabaseMissing { .. }
            | StorageError::MigrationFailed { .. }
            | StorageError::DatabasePathRefused { .. }
            | StorageError::HostAlreadyRunning { .. } => true,
            StorageError::Sqlite { .. } => self.code() == ErrorCode::DatabaseUnreadable,
            StorageError::Io { .. }
            | StorageError::DatabaseFilesChanged { .. }
            | StorageError::InvalidValue { .. }
            | StorageError::SessionNotFound { .. }
            | StorageError::SessionAlreadyExists { .. }
            | StorageError::ApprovalNotFound { .. }
            | StorageError::StaleApproval { .. }
            | StorageError::ApprovalConflict { .. }
            | StorageError::ArtifactPathEscape { .. }
            | StorageError::ArtifactSymlink { .. }
            | StorageError::ArtifactWriteFailed { .. }
            | StorageError::ArtifactMissing { .. }
            | StorageError::WorkspaceMissing { .. }
            | StorageError::ArtifactReadFailed { .. }
            | StorageError::LegacyApproval { .. }
            | StorageError::NoWorkspace { .. }
            | StorageError::ArtifactIntegrityMismatch { .. } => false,
        }
    }

    /// Wraps a SQLite error with what the store was doing.
    pub(crate) fn sqlite(context: &'static str) -> impl FnOnce(rusqlite::Error) -> StorageError {
        move |source| StorageError::Sqlite { context, source }
    }
}

/// Whether SQLite says the file is not a database or is corrupt.
pub(crate) fn is_unreadable(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// The text of an optional execution state for messages: `none` for NULL.
pub(crate) fn execution_text(state: Option<ExecutionState>) -> String {
    state.map_or_else(|| "none".to_owned(), |state| state.as_str().to_owned())
}
