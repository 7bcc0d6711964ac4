//! The typed store over one SQLite connection: sessions, plan approvals,
//! settings, the startup fence and the effects of plan-core transitions.
//!
//! Every write runs in one IMMEDIATE transaction, and every change to an
//! approval is a compare-and-set on the status and execution state the
//! caller saw, so two connections or processes racing on the same row give
//! exactly one winner. The database enforces the checkpoint invariants
//! itself (CHECK constraints and partial unique indexes in V10); the code
//! here does not re-check them. This module decides nothing: plan-core does,
//! and the store only records and loads its values.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, Artifact, Effect, ErrorCode, ExecutionId, ExecutionState,
    Mode, PermissionMode, PlanApproval, RowGuard, Session, SessionId, TurnId, UnixMs, WorkspaceIdentity,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::StorageError;
use crate::error::execution_text;
use crate::guard::FileGuard;
use crate::migrate::{self, MigrationReport};

/// The settings key of the persisted default shell (ADR 0054); its value is
/// a JSON string, or JSON null while no shell was chosen.
pub const DEFAULT_SHELL_KEY: &str = "shell.default";

/// An approval row with the two v8 columns kept for migrated rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApproval {
    /// The row as plan-core sees it.
    pub approval: PlanApproval,
    /// The v8 `proposal_json`, verbatim; `None` for rows created at v10.
    pub legacy_proposal_json: Option<String>,
    /// The v8 `feedback`, verbatim.
    pub legacy_feedback: Option<String>,
}

/// The filter's session id as the text the `session_id` column holds.
fn session_text(filter: &ApprovalFilter) -> Option<&str> {
    filter.session_id.as_ref().map(SessionId::as_str)
}

/// The columns of a plan_approvals row, in the order [`RawApproval`] reads them.
pub(crate) const APPROVAL_COLUMNS: &str = "id, session_id, turn_id, title, question, artifact_path, artifact_sha256, \
     artifact_size, status, error_code, created_at, expires_at, decided_at, permission_mode, execution_id, \
     execution_state, legacy_proposal_json, legacy_feedback";

/// What plan-core reads before deciding about a session: its row, its
/// pending approval and its queued or running execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRows {
    /// The session's row.
    pub session: Session,
    /// Its one pending approval, if any.
    pub pending_approval: Option<PlanApproval>,
    /// Its one queued or running execution, if any.
    pub live_execution: Option<PlanApproval>,
}

/// How many sessions' rows the database's only writer keeps in memory; past
/// it the kept rows are dropped and read again as needed, so a host that
/// sees many sessions does not grow without bound.
const KEPT_SESSIONS: usize = 1024;

/// The one database connection of a host (or of a CLI inspection).
pub struct Store {
    pub(crate) conn: Connection,
    /// Watches the files of a read-write connection; `None` for inspection.
    guard: Option<FileGuard>,
    /// Whether a read-only open had to use an immutable snapshot.
    immutable: bool,
    /// The rows of the sessions read since the last write that could not
    /// be followed, kept write-through. `Some` only for the database's only
    /// writer ([`Store::keep_session_rows`]): any other connection must
    /// read, because another writer may have changed them.
    kept: Option<RefCell<HashMap<SessionId, SessionRows>>>,
    /// The frontend whose client this store's host answers: the channel
    /// recorded for a decision no relayed note says came elsewhere.
    frontend: crate::DecisionChannel,
    /// A transaction of this store committed with the audit chain begun.
    /// Nothing ever unbegins a chain, so later transactions need not look.
    chain_begun: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Store")
            .field("path", &self.conn.path())
            .finish()
    }
}

impl Store {
    /// Opens (creating or migrating as the storage contract says) the
    /// database at `path`, with WAL, `synchronous = FULL`, foreign keys and a
    /// busy timeout. A file this build must not touch is refused unchanged.
    pub fn open(path: impl AsRef<Path>) -> Result<(Store, MigrationReport), StorageError> {
        let (conn, report) = migrate::open_read_write(path.as_ref(), None)?;
        Ok((Store::writer(conn, path.as_ref()), report))
    }

    /// Opens like [`Store::open`], but interrupts the migration transaction
    /// after `steps` SQLite VM steps. Test support for proving that the
    /// migration is all-or-nothing; a host never calls it.
    #[doc(hidden)]
    pub fn open_with_step_limit(
        path: impl AsRef<Path>,
        steps: u64,
    ) -> Result<(Store, MigrationReport), StorageError> {
        let (conn, report) = migrate::open_read_write(path.as_ref(), Some(steps))?;
        Ok((Store::writer(conn, path.as_ref()), report))
    }

    /// Opens a v10 database for inspection only. It never migrates: any
    /// other version is refused with an error naming it, and the file is
    /// left as it was. On read-only media, where SQLite cannot create the
    /// `-shm` file a WAL database needs, it opens the file as an immutable
    /// snapshot instead ([`Store::is_immutable_snapshot`] says so).
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Store, StorageError> {
        let (conn, immutable) = migrate::open_read_only(path.as_ref())?;
        Ok(Store {
            conn,
            guard: None,
            immutable,
            kept: None,
            frontend: crate::DecisionChannel::default(),
            chain_begun: false,
        })
    }

    fn writer(conn: Connection, path: &Path) -> Store {
        Store {
            conn,
            guard: Some(FileGuard::new(path)),
            immutable: false,
            kept: None,
            frontend: crate::DecisionChannel::default(),
            chain_begun: false,
        }
    }

    /// Names the frontend this store's host answers (`serve`'s JSON-RPC,
    /// the FFI, a Rust program): the audit records it as the channel of
    /// every decision that no relayed note ([`Store::apply_noted`]) says
    /// came through another one.
    pub fn set_frontend(&mut self, frontend: crate::DecisionChannel) {
        self.frontend = frontend;
    }

    /// Declares this store the database's only writer (its opener holds the
    /// host lock, which every other writer takes too), so the rows
    /// [`Store::session_rows`] returns may be kept in memory and updated by
    /// this store's own commits instead of read again for every decision.
    /// A change made behind its back anyway is not seen until the next
    /// write: an approval's compare-and-set or the one-pending index then
    /// refuses it, and the refusal drops every kept row.
    pub(crate) fn keep_session_rows(&mut self) {
        self.kept = Some(RefCell::new(HashMap::new()));
    }

    /// Forgets every kept row: after a write whose outcome cannot be
    /// followed row by row.
    fn forget_kept_rows(&self) {
        if let Some(kept) = &self.kept {
            kept.borrow_mut().clear();
        }
    }

    /// Whether this read-only store reads an immutable snapshot of the file
    /// (its directory is not writable): no locks are taken and changes by a
    /// writer elsewhere would not be seen.
    pub fn is_immutable_snapshot(&self) -> bool {
        self.immutable
    }

    /// Runs one write with the file guard around it: refused when the files
    /// changed under the connection, recorded as seen after it committed.
    pub(crate) fn guarded<T>(
        &mut self,
        write: impl FnOnce(&mut Connection) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        if let Some(guard) = self.guard.as_mut() {
            guard.before_write()?;
        }
        let written = match write(&mut self.conn) {
            Ok(written) => written,
            Err(error) => {
                // A refused or failed write may mean another writer got in.
                self.forget_kept_rows();
                return Err(error);
            }
        };
        if let Some(guard) = self.guard.as_mut() {
            guard.committed();
        }
        Ok(written)
    }

    /// How many rows this connection's writes changed so far: a cheap way
    /// to tell whether an operation committed anything.
    pub fn write_count(&self) -> u64 {
        self.conn.total_changes()
    }

    /// The `user_version` of the open database.
    pub fn schema_version(&self) -> Result<u32, StorageError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(StorageError::sqlite("reading the schema version"))?;
        u32::try_from(version).map_err(|_| StorageError::InvalidValue {
            column: "user_version",
            value: version.to_string(),
        })
    }

    // --- sessions ---------------------------------------------------------

    /// Inserts a new session; its title starts empty.
    pub fn create_session(&mut self, session: &Session, now: UnixMs) -> Result<(), StorageError> {
        self.guarded(|conn| {
            let inserted = conn.execute(
            "INSERT INTO sessions (id, title, workspace_root, mode, permission_mode, provider, model, shell, \
             created_at, updated_at) VALUES (?1, '', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
            params![
                session.id.as_str(),
                session.workspace_root,
                session.mode.as_str(),
                session.permission_mode.as_str(),
                session.provider,
                session.model,
                session.shell,
                now
            ],
        );
            match inserted {
                Ok(_) => Ok(()),
                Err(error)
                    if constraint_code(&error) == Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) =>
                {
                    Err(StorageError::SessionAlreadyExists {
                        id: session.id.to_string(),
                    })
                }
                Err(error) => Err(StorageError::sqlite("inserting a session")(error)),
            }
        })
    }

    /// Binds the session's workspace to the directory `found` identifies,
    /// unless it was bound already, and returns the identity it is bound
    /// to (the first one recorded, by this host or an earlier one). Kept in
    /// `settings` under `session.workspace.<session id>`, so the schema
    /// stays as it is.
    pub fn bind_workspace(
        &mut self,
        session_id: &SessionId,
        found: WorkspaceIdentity,
    ) -> Result<WorkspaceIdentity, StorageError> {
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("binding a session's workspace"))?;
            bind_workspace_row(&transaction, session_id, found)?;
            let bound = workspace_binding(&transaction, session_id)?;
            transaction
                .commit()
                .map_err(StorageError::sqlite("binding a session's workspace"))?;
            bound.ok_or_else(|| StorageError::InvalidValue {
                column: "settings.value_json (session.workspace)",
                value: "no binding after binding".to_owned(),
            })
        })
    }

    /// The workspace `session_id` bound (P12), if it bound one.
    pub fn bound_workspace(&self, session_id: &SessionId) -> Result<Option<WorkspaceIdentity>, StorageError> {
        workspace_binding(&self.conn, session_id)
    }

    /// Runs `reads` in one read transaction: one snapshot and one round of
    /// locks for several lookups, instead of one per statement. `reads` must
    /// not write (a write inside would upgrade the transaction).
    pub fn read<T, E: From<StorageError>>(&self, reads: impl FnOnce(&Store) -> Result<T, E>) -> Result<T, E> {
        let transaction = self
            .conn
            .unchecked_transaction()
            .map_err(StorageError::sqlite("starting a read transaction"))?;
        let value = reads(self)?;
        transaction
            .commit()
            .map_err(StorageError::sqlite("ending a read transaction"))?;
        Ok(value)
    }

    /// The session's row, pending approval and live execution, read in one
    /// read transaction, or kept from an earlier read when this store is
    /// the database's only writer. `None` when there is no such session.
    pub fn session_rows(&self, id: &SessionId) -> Result<Option<SessionRows>, StorageError> {
        if let Some(rows) = self.kept.as_ref().and_then(|kept| kept.borrow().get(id).cloned()) {
            return Ok(Some(rows));
        }
        let rows = self.read(|store| {
            let Some(session) = store.get_session(id)? else {
                return Ok::<_, StorageError>(None);
            };
            Ok(Some(SessionRows {
                session,
                pending_approval: store.pending_approval(id)?,
                live_execution: store.live_execution(id)?,
            }))
        })?;
        if let (Some(kept), Some(rows)) = (&self.kept, &rows) {
            let mut kept = kept.borrow_mut();
            if kept.len() >= KEPT_SESSIONS {
                kept.clear();
            }
            kept.insert(id.clone(), rows.clone());
        }
        Ok(rows)
    }

    /// The session with that id, if any.
    pub fn get_session(&self, id: &SessionId) -> Result<Option<Session>, StorageError> {
        let raw = self
            .conn
            .prepare_cached(
                "SELECT id, workspace_root, mode, permission_mode, provider, model, shell FROM sessions \
                 WHERE id = ?1",
            )
            .and_then(|mut statement| {
                statement
                    .query_row([id.as_str()], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, Option<String>>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                            row.get::<_, Option<String>>(4)?,
                            row.get::<_, Option<String>>(5)?,
                            row.get::<_, Option<String>>(6)?,
                        ))
                    })
                    .optional()
            })
            .map_err(StorageError::sqlite("reading a session"))?;
        let Some((id, workspace_root, mode, permission_mode, provider, model, shell)) = raw else {
            return Ok(None);
        };
        Ok(Some(Session {
            id: SessionId::from(id),
            workspace_root,
            mode: parse_wire("sessions.mode", &mode, Mode::parse)?,
            permission_mode: parse_wire(
                "sessions.permission_mode",
                &permission_mode,
                PermissionMode::parse,
            )?,
            provider,
            model,
            shell,
        }))
    }

    /// Persists a session's configuration in its own transaction.
    pub fn save_session(&mut self, session: &Session, now: UnixMs) -> Result<(), StorageError> {
        self.apply(&[Effect::SaveSession(session.clone())], now)
    }

    // --- approvals: reads -------------------------------------------------

    /// The session's `approvalDecided` transcript entries, oldest first:
    /// which decisions a relaying frontend made, and from where.
    pub fn decision_entries(
        &self,
        session_id: &plan_core::SessionId,
    ) -> Result<Vec<crate::DecisionEntry>, StorageError> {
        crate::decision::load(&self.conn, session_id)
    }

    /// The approval with that id, if any. The id is typed, so another kind
    /// of id is refused at compile time:
    ///
    /// ```compile_fail
    /// fn look(store: &plan_storage::Store, session: &plan_core::SessionId) {
    ///     let _ = store.get_approval(session);
    /// }
    /// ```
    pub fn get_approval(&self, id: &ApprovalId) -> Result<Option<StoredApproval>, StorageError> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE id = ?1");
        Ok(query_approvals(&self.conn, &sql, [id.as_str()])?
            .into_iter()
            .next())
    }

    /// The approval whose execution has that id, if any.
    pub fn find_by_execution_id(
        &self,
        execution_id: &ExecutionId,
    ) -> Result<Option<StoredApproval>, StorageError> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE execution_id = ?1");
        Ok(query_approvals(&self.conn, &sql, [execution_id.as_str()])?
            .into_iter()
            .next())
    }

    /// The session's one pending approval, if any (read through the partial
    /// unique index that enforces "one pending per session").
    pub fn pending_approval(&self, session_id: &SessionId) -> Result<Option<PlanApproval>, StorageError> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ?1 AND status = 'pending'"
        );
        Ok(query_approvals(&self.conn, &sql, [session_id.as_str()])?
            .into_iter()
            .next()
            .map(|stored| stored.approval))
    }

    /// The session's one queued or running execution, if any.
    pub fn live_execution(&self, session_id: &SessionId) -> Result<Option<PlanApproval>, StorageError> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM plan_approvals \
             WHERE session_id = ?1 AND execution_state IN ('queued','running')"
        );
        Ok(query_approvals(&self.conn, &sql, [session_id.as_str()])?
            .into_iter()
            .next()
            .map(|stored| stored.approval))
    }

    /// Every pending approval and every queued or running execution, read
    /// through the partial indexes, so the cost follows the live rows only.
    pub fn live_rows(&self) -> Result<Vec<PlanApproval>, StorageError> {
        load_live_rows(&self.conn)
    }

    /// Approvals newest first (`created_at` descending, then id), filtered
    /// by session and status, read in index order.
    pub fn list_approvals(&self, filter: &ApprovalFilter) -> Result<Vec<StoredApproval>, StorageError> {
        let mut rows = Vec::new();
        self.visit_approvals(filter, &mut |stored| {
            rows.push(stored);
            true
        })?;
        Ok(rows)
    }

    /// How many approvals the filter selects, its limit ignored.
    pub fn count_approvals(&self, filter: &ApprovalFilter) -> Result<u64, StorageError> {
        let status = filter.status.map(ApprovalStatus::as_str);
        let sql = match (&filter.session_id, status) {
            (Some(_), Some(_)) => "SELECT count(*) FROM plan_approvals WHERE session_id = ?1 AND status = ?2",
            (Some(_), None) => "SELECT count(*) FROM plan_approvals WHERE session_id = ?1 AND ?2 IS NULL",
            (None, Some(_)) => {
                "SELECT count(*) FROM plan_approvals INDEXED BY plan_approvals_by_status \
                 WHERE ?1 IS NULL AND status = ?2"
            }
            (None, None) => "SELECT count(*) FROM plan_approvals WHERE ?1 IS NULL AND ?2 IS NULL",
        };
        let count: i64 = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut statement| {
                statement.query_row(params![session_text(filter), status], |row| row.get(0))
            })
            .map_err(StorageError::sqlite("counting approvals"))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// The approval ids just before and just after `id` in byte order
    /// (whether or not `id` itself exists): what a frontend needs to print
    /// the shortest prefix of `id` that no other id shares. Two lookups in
    /// the primary key.
    pub fn approval_id_neighbours(&self, id: &str) -> Result<(Option<String>, Option<String>), StorageError> {
        let read = |sql: &str| -> Result<Option<String>, StorageError> {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut statement| statement.query_row([id], |row| row.get(0)))
                .map_err(StorageError::sqlite("reading approval ids"))
        };
        Ok((
            read("SELECT max(id) FROM plan_approvals WHERE id < ?1")?,
            read("SELECT min(id) FROM plan_approvals WHERE id > ?1")?,
        ))
    }

    /// Up to `limit` approval ids that start with `prefix`, in byte order.
    /// An exact id sorts first among them.
    pub fn approval_ids_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>, StorageError> {
        let mut ids = Vec::new();
        let mut statement = self
            .conn
            .prepare_cached("SELECT id FROM plan_approvals WHERE id >= ?1 ORDER BY id")
            .map_err(StorageError::sqlite("resolving an approval id"))?;
        let mut rows = statement
            .query([prefix])
            .map_err(StorageError::sqlite("resolving an approval id"))?;
        while let Some(row) = rows
            .next()
            .map_err(StorageError::sqlite("resolving an approval id"))?
        {
            let id: String = row
                .get(0)
                .map_err(StorageError::sqlite("resolving an approval id"))?;
            // Ids are in byte order, so the ones with the prefix come first.
            if !id.starts_with(prefix) || ids.len() >= limit as usize {
                break;
            }
            ids.push(id);
        }
        Ok(ids)
    }

    /// How many approvals have each status, for every status (zeros included).
    ///
    /// One count per status over the narrow status index: on a large history
    /// this is several times cheaper than grouping over a listing index.
    pub fn count_by_status(&self) -> Result<Vec<(ApprovalStatus, u64)>, StorageError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM plan_approvals INDEXED BY plan_approvals_by_status WHERE status = ?1",
            )
            .map_err(StorageError::sqlite("counting approvals by status"))?;
        let mut counts = Vec::with_capacity(ApprovalStatus::ALL.len());
        for status in ApprovalStatus::ALL {
            let count: i64 = statement
                .query_row([status.as_str()], |row| row.get(0))
                .map_err(StorageError::sqlite("counting approvals by status"))?;
            counts.push((*status, u64::try_from(count).unwrap_or(0)));
        }
        Ok(counts)
    }

    // --- writes -----------------------------------------------------------

    /// Carries out the storage effects of one plan-core transition in ONE
    /// IMMEDIATE transaction: `InsertApproval`, `UpdateApproval` (a
    /// compare-and-set on the guard's status and execution state) and
    /// `SaveSession`. If any of them fails, nothing is written.
    ///
    /// `WriteArtifact` is not a storage effect of the transaction and is
    /// skipped: the host writes the artifact (with [`crate::write_artifact`],
    /// or [`crate::create_artifact`] and [`Store::apply_recording`]) before
    /// the transition that inserts the row commits.
    pub fn apply(&mut self, effects: &[Effect], now: UnixMs) -> Result<(), StorageError> {
        self.apply_noted(effects, now, None)
    }

    /// [`Store::apply`], plus, in the same transaction, the transcript entry
    /// of `note` when the effects decide its approval (see
    /// [`crate::DecisionNote`]): a relayed decision and the record of where
    /// it came from commit together or not at all.
    pub fn apply_noted(
        &mut self,
        effects: &[Effect],
        now: UnixMs,
        note: Option<&crate::DecisionNote>,
    ) -> Result<(), StorageError> {
        self.apply_awaiting(effects, now, note, None)
    }

    /// [`Store::apply_noted`] for the transition that may record `artifact`,
    /// whose file's fsync [`crate::create_artifact`] started: the statements
    /// run while it is in flight, and when an `InsertApproval` records this
    /// artifact the commit waits for it first. If it failed, nothing is
    /// committed and the error is the artifact's `ARTIFACT_WRITE_FAILED`
    /// (the file is removed); a transition that does not record the
    /// artifact commits without waiting.
    pub fn apply_recording(
        &mut self,
        effects: &[Effect],
        now: UnixMs,
        note: Option<&crate::DecisionNote>,
        artifact: &mut crate::FlushingArtifact,
    ) -> Result<(), StorageError> {
        self.apply_awaiting(effects, now, note, Some(artifact))
    }

    fn apply_awaiting(
        &mut self,
        effects: &[Effect],
        now: UnixMs,
        note: Option<&crate::DecisionNote>,
        artifact: Option<&mut crate::FlushingArtifact>,
    ) -> Result<(), StorageError> {
        let frontend = self.frontend;
        let chain_begun = self.chain_begun;
        let recorded = artifact.filter(|artifact| {
            effects.iter().any(|effect| match effect {
                Effect::InsertApproval(approval) => approval.artifact.as_ref() == Some(artifact.artifact()),
                Effect::WriteArtifact(_)
                | Effect::UpdateApproval { .. }
                | Effect::SaveSession(_)
                | Effect::RecordToolAudit(_)
                | Effect::RecordCommand { .. }
                | Effect::BindWorkspace { .. }
                | Effect::CancelCommand { .. } => false,
            })
        });
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            // Before any row changes: a chain that begins here numbers the
            // history the database holds, not the rows these effects write.
            if !chain_begun {
                crate::chain::begin_chain(&transaction)?;
            }
            for effect in effects {
                apply_effect(&transaction, effect, now, note, frontend)?;
            }
            if let Some(note) = note {
                crate::decision::record(&transaction, effects, note, now)?;
            }
            // A row is never durable before the file it records; a failed
            // flush rolls the transaction back.
            if let Some(artifact) = recorded {
                artifact.wait()?;
            }
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing a write transaction"))
        })?;
        self.chain_begun = true;
        if let Some(kept) = &self.kept {
            let mut kept = kept.borrow_mut();
            for effect in effects {
                follow_effect(&mut kept, effect);
            }
        }
        Ok(())
    }

    /// The startup fence: in one transaction, marks every pending approval
    /// and every queued or running execution interrupted with
    /// `HOST_RESTARTED` (the mapping is plan-core's), records every command
    /// run that started and never ended as `interrupted` (plan-core's
    /// `fence_commands`), and returns the approval rows it changed. Only the live rows are read, through partial indexes.
    pub fn startup_fence(&mut self, now: UnixMs) -> Result<Vec<PlanApproval>, StorageError> {
        // The fence changes live rows of many sessions at once.
        self.forget_kept_rows();
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning the startup fence"))?;
            // Every host opens through the fence: a database without a
            // chain (upgraded from an earlier build or from v8) numbers its
            // history here, once, so the exporter sends it too.
            crate::chain::begin_chain(&transaction)?;
            let live = load_live_rows(&transaction)?;
            let effects = plan_core::startup_fence(&live, now);
            let mut changed = Vec::with_capacity(effects.len());
            for effect in &effects {
                apply_effect(&transaction, effect, now, None, crate::DecisionChannel::default())?;
                match effect {
                    Effect::UpdateApproval { approval, .. } => changed.push(approval.clone()),
                    Effect::WriteArtifact(_)
                    | Effect::InsertApproval(_)
                    | Effect::SaveSession(_)
                    | Effect::RecordToolAudit(_)
                    | Effect::RecordCommand { .. }
                    | Effect::BindWorkspace { .. }
                    | Effect::CancelCommand { .. } => {}
                }
            }
            // Commands of the earlier process died with it: every run that
            // started and never ended is recorded interrupted, in the same
            // transaction (or, on a big transcript without the kept set of
            // open runs, by a host's thread after it answered).
            crate::audit::fence_runs(&transaction, now)?;
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing the startup fence"))?;
            Ok(changed)
        })
        .inspect(|_| self.chain_begun = true)
    }

    // --- settings ---------------------------------------------------------

    /// The persisted default shell id; `None` while no shell was chosen.
    pub fn default_shell(&self) -> Result<Option<String>, StorageError> {
        let value: Option<String> = self
            .conn
            .query_row(
                "SELECT value_json FROM settings WHERE key = ?1",
                [DEFAULT_SHELL_KEY],
                |row| row.get(0),
            )
            .optional()
            .map_err(StorageError::sqlite("reading the default shell"))?;
        let Some(value) = value else {
            return Ok(None);
        };
        match serde_json::from_str::<serde_json::Value>(&value) {
            Ok(serde_json::Value::String(shell)) => Ok(Some(shell)),
            Ok(serde_json::Value::Null) => Ok(None),
            Ok(
                serde_json::Value::Bool(_)
                | serde_json::Value::Number(_)
                | serde_json::Value::Array(_)
                | serde_json::Value::Object(_),
            )
            | Err(_) => Err(StorageError::InvalidValue {
                column: "settings.value_json (shell.default)",
                value,
            }),
        }
    }

    /// Persists the default shell id. The caller checks it against its
    /// shell catalog first.
    pub fn set_default_shell(&mut self, shell_id: &str) -> Result<(), StorageError> {
        let value = serde_json::Value::String(shell_id.to_owned()).to_string();
        self.guarded(|conn| {
            conn.execute(
                "INSERT INTO settings (key, value_json) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json",
                params![DEFAULT_SHELL_KEY, value],
            )
            .map_err(StorageError::sqlite("saving the default shell"))?;
            Ok(())
        })
    }

    // --- inspection (read-only; used by the CLI) ---------------------------

    /// Calls `visit` with each approval the filter selects, newest first,
    /// one row at a time (nothing is collected), until it returns `false`.
    /// For exports and verification over histories too large to hold.
    pub fn visit_approvals(
        &self,
        filter: &ApprovalFilter,
        visit: &mut dyn FnMut(StoredApproval) -> bool,
    ) -> Result<(), StorageError> {
        // A negative LIMIT means no limit in SQLite.
        let limit = filter.limit.map_or(-1, i64::from);
        let status = filter.status.map(ApprovalStatus::as_str);
        let order = "ORDER BY created_at DESC, id DESC LIMIT ?3";
        let sql = match (&filter.session_id, status) {
            (Some(_), Some(_)) => format!(
                "SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ?1 AND status = ?2 {order}"
            ),
            (Some(_), None) => format!(
                "SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ?1 AND ?2 IS NULL {order}"
            ),
            // Named, so that the planner never prefers the narrow counting
            // index and then sorts a whole status's history.
            (None, Some(_)) => format!(
                "SELECT {APPROVAL_COLUMNS} FROM plan_approvals INDEXED BY plan_approvals_by_status_created \
                 WHERE ?1 IS NULL AND status = ?2 {order}"
            ),
            (None, None) => format!(
                "SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE ?1 IS NULL AND ?2 IS NULL {order}"
            ),
        };
        let mut statement = self
            .conn
            .prepare_cached(&sql)
            .map_err(StorageError::sqlite("reading approvals"))?;
        let mut rows = statement
            .query(params![session_text(filter), status, limit])
            .map_err(StorageError::sqlite("reading approvals"))?;
        while let Some(row) = rows.next().map_err(StorageError::sqlite("reading approvals"))? {
            let raw = RawApproval::read(row).map_err(StorageError::sqlite("reading approvals"))?;
            if !visit(raw.into_stored()?) {
                break;
            }
        }
        Ok(())
    }

    /// The distinct workspace roots of all sessions, sorted; sessions that
    /// are not project-bound have none and are left out.
    pub fn workspace_roots(&self) -> Result<Vec<String>, StorageError> {
        self.conn
            .prepare_cached(
                "SELECT DISTINCT workspace_root FROM sessions WHERE workspace_root IS NOT NULL ORDER BY 1",
            )
            .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
            .map_err(StorageError::sqlite("listing workspace roots"))
    }

    /// Calls `visit` with every artifact path recorded by an approval of a
    /// session whose stored root is one of `workspace_roots`, in sorted
    /// order (duplicates included), until it returns `false`. Files under
    /// that workspace's `.pi/plan/` that are never visited are orphans.
    pub fn visit_recorded_paths(
        &self,
        workspace_roots: &[String],
        visit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(), StorageError> {
        if workspace_roots.is_empty() {
            return Ok(());
        }
        let placeholders = vec!["?"; workspace_roots.len()].join(", ");
        let sql = format!(
            "SELECT a.artifact_path FROM plan_approvals a JOIN sessions s ON s.id = a.session_id \
             WHERE s.workspace_root IN ({placeholders}) AND a.artifact_path IS NOT NULL ORDER BY 1"
        );
        let failed = StorageError::sqlite("listing recorded artifact paths");
        let mut statement = self.conn.prepare(&sql).map_err(failed)?;
        let mut rows = statement
            .query(rusqlite::params_from_iter(workspace_roots))
            .map_err(StorageError::sqlite("listing recorded artifact paths"))?;
        while let Some(row) = rows
            .next()
            .map_err(StorageError::sqlite("listing recorded artifact paths"))?
        {
            let path: String = row
                .get(0)
                .map_err(StorageError::sqlite("listing recorded artifact paths"))?;
            if !visit(&path) {
                break;
            }
        }
        Ok(())
    }
}

/// Brings the kept rows up to date with one committed effect: the same
/// rows the queries of [`Store::session_rows`] would now return.
fn follow_effect(kept: &mut HashMap<SessionId, SessionRows>, effect: &Effect) {
    match effect {
        Effect::InsertApproval(approval) | Effect::UpdateApproval { approval, .. } => {
            let Some(rows) = kept.get_mut(&approval.session_id) else {
                return;
            };
            let pending = approval.status == ApprovalStatus::Pending;
            follow_row(&mut rows.pending_approval, approval, pending);
            let live = matches!(
                approval.execution_state,
                Some(ExecutionState::Queued | ExecutionState::Running)
            );
            follow_row(&mut rows.live_execution, approval, live);
        }
        Effect::SaveSession(session) => {
            if let Some(rows) = kept.get_mut(&session.id) {
                rows.session = session.clone();
            }
        }
        Effect::WriteArtifact(_)
        | Effect::CancelCommand { .. }
        | Effect::RecordToolAudit(_)
        | Effect::RecordCommand { .. }
        | Effect::BindWorkspace { .. } => {}
    }
}

/// One kept slot (pending approval or live execution) after `approval` was
/// written: it is the slot's row if it now qualifies, and no longer the
/// slot's row if it stopped qualifying.
fn follow_row(slot: &mut Option<PlanApproval>, approval: &PlanApproval, qualifies: bool) {
    if qualifies {
        *slot = Some(approval.clone());
    } else if slot.as_ref().is_some_and(|kept| kept.id == approval.id) {
        *slot = None;
    }
}

/// Carries out one effect inside the caller's transaction, with the audit
/// facts it makes (a submission, a decision, an execution's start or end, a
/// mode change); `note` says where a relayed decision came from. The
/// caller began the chain in that transaction ([`crate::chain::begin_chain`]).
fn apply_effect(
    conn: &Connection,
    effect: &Effect,
    now: UnixMs,
    note: Option<&crate::DecisionNote>,
    frontend: crate::DecisionChannel,
) -> Result<(), StorageError> {
    match effect {
        Effect::InsertApproval(approval) => {
            insert_approval(conn, approval)?;
            crate::chain::approval_facts(conn, true, approval, None, None, now)
        }
        Effect::UpdateApproval { approval, expected } => {
            // While a big history is numbered, an old row's history is
            // written before its change (nothing otherwise).
            crate::backfill::before_update(conn, approval.id.as_str())?;
            update_approval(conn, approval, *expected)?;
            // A decision's channel: the relayed note's (the web card, with
            // its peer), else the frontend whose client asked.
            let decided = expected.status == plan_core::ApprovalStatus::Pending
                && matches!(
                    approval.status,
                    plan_core::ApprovalStatus::Approved | plan_core::ApprovalStatus::Rejected
                );
            let source = note
                .filter(|note| note.approval_id == approval.id)
                .map(|note| crate::chain::FactSource {
                    channel: note.source.channel.audit_name(),
                    remote_address: Some(&note.source.remote_address),
                })
                .or_else(|| {
                    decided.then_some(crate::chain::FactSource {
                        channel: frontend.audit_name(),
                        remote_address: None,
                    })
                });
            crate::chain::approval_facts(
                conn,
                false,
                approval,
                Some((expected.status, expected.execution_state)),
                source,
                now,
            )
        }
        Effect::SaveSession(session) => {
            crate::chain::mode_change_fact(conn, effect, now)?;
            save_session_row(conn, session, now)
        }
        Effect::RecordToolAudit(entry) => crate::tool_audit::insert_tool_entry(conn, entry),
        Effect::RecordCommand { kind, run } => crate::audit::insert_entry(conn, *kind, run, None, now),
        Effect::BindWorkspace { session_id, identity } => bind_workspace_row(conn, session_id, *identity),
        // Not storage effects: see `Store::apply`.
        Effect::WriteArtifact(_) | Effect::CancelCommand { .. } => Ok(()),
    }
}

fn insert_approval(conn: &Connection, approval: &PlanApproval) -> Result<(), StorageError> {
    let artifact = approval.artifact.as_ref();
    let size = match artifact.map(|artifact| i64::try_from(artifact.size)) {
        None => None,
        Some(Ok(size)) => Some(size),
        Some(Err(_)) => {
            return Err(StorageError::InvalidValue {
                column: "plan_approvals.artifact_size",
                value: artifact.map_or(0, |artifact| artifact.size).to_string(),
            });
        }
    };
    let inserted = conn
        .prepare_cached(&format!(
            "INSERT INTO plan_approvals ({APPROVAL_COLUMNS}) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, NULL, NULL)"
        ))
        .and_then(|mut statement| {
            statement.execute(params![
                approval.id.as_str(),
                approval.session_id.as_str(),
                approval.turn_id.as_str(),
                approval.title,
                approval.question,
                artifact.map(|artifact| artifact.path.as_str()),
                artifact.map(|artifact| artifact.sha256.as_str()),
                size,
                approval.status.as_str(),
                approval.error_code.map(ErrorCode::as_str),
                approval.created_at,
                approval.expires_at,
                approval.decided_at,
                approval.permission_mode.map(PermissionMode::as_str),
                approval.execution_id.as_ref().map(ExecutionId::as_str),
                approval.execution_state.map(ExecutionState::as_str),
            ])
        });
    match inserted {
        Ok(_) => Ok(()),
        Err(error) => Err(classify_write(error, "inserting an approval", approval)),
    }
}

/// Maps a failed approval write: a broken uniqueness (a second pending row
/// or live execution for the session, a reused id) is a conflict, a missing
/// session is reported as such, anything else is a storage failure.
fn classify_write(error: rusqlite::Error, context: &'static str, approval: &PlanApproval) -> StorageError {
    match constraint_code(&error) {
        Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) => {
            StorageError::ApprovalConflict {
                id: approval.id.to_string(),
                detail: error.to_string(),
            }
        }
        Some(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => StorageError::SessionNotFound {
            id: approval.session_id.to_string(),
        },
        Some(_) | None => StorageError::sqlite(context)(error),
    }
}

/// Writes the mutable columns of an approval, only if the row still has the
/// status and execution state the caller saw. Title, question, artifact and
/// the deadline are never changed after insertion.
fn update_approval(
    conn: &Connection,
    approval: &PlanApproval,
    expected: RowGuard,
) -> Result<(), StorageError> {
    let updated = conn
        .prepare_cached(
            "UPDATE plan_approvals SET status = ?2, error_code = ?3, decided_at = ?4, permission_mode = ?5, \
             execution_id = ?6, execution_state = ?7 \
             WHERE id = ?1 AND status = ?8 AND execution_state IS ?9",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                approval.id.as_str(),
                approval.status.as_str(),
                approval.error_code.map(ErrorCode::as_str),
                approval.decided_at,
                approval.permission_mode.map(PermissionMode::as_str),
                approval.execution_id.as_ref().map(ExecutionId::as_str),
                approval.execution_state.map(ExecutionState::as_str),
                expected.status.as_str(),
                expected.execution_state.map(ExecutionState::as_str),
            ])
        })
        .map_err(|error| classify_write(error, "updating an approval", approval))?;
    if updated == 1 {
        return Ok(());
    }
    // Zero rows: either the row is gone or another writer changed it first.
    let found: Option<(String, Option<String>)> = conn
        .query_row(
            "SELECT status, execution_state FROM plan_approvals WHERE id = ?1",
            [approval.id.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(StorageError::sqlite("reading an approval after a lost update"))?;
    match found {
        None => Err(StorageError::ApprovalNotFound {
            id: approval.id.to_string(),
        }),
        Some((found_status, found_execution)) => Err(StorageError::StaleApproval {
            id: approval.id.to_string(),
            expected_status: expected.status,
            expected_execution: execution_text(expected.execution_state),
            found_status,
            found_execution: found_execution.unwrap_or_else(|| "none".to_owned()),
        }),
    }
}

fn save_session_row(conn: &Connection, session: &Session, now: UnixMs) -> Result<(), StorageError> {
    let updated = conn
        .prepare_cached(
            "UPDATE sessions SET workspace_root = ?2, mode = ?3, permission_mode = ?4, provider = ?5, \
             model = ?6, shell = ?7, updated_at = ?8 WHERE id = ?1",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                session.id.as_str(),
                session.workspace_root,
                session.mode.as_str(),
                session.permission_mode.as_str(),
                session.provider,
                session.model,
                session.shell,
                now
            ])
        })
        .map_err(StorageError::sqlite("saving a session"))?;
    if updated == 0 {
        return Err(StorageError::SessionNotFound {
            id: session.id.to_string(),
        });
    }
    Ok(())
}

fn load_live_rows(conn: &Connection) -> Result<Vec<PlanApproval>, StorageError> {
    // Each half repeats the WHERE clause of one partial index exactly, and
    // names it, so SQLite scans an index that holds only live rows: the cost
    // follows the live rows, not the history.
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM plan_approvals INDEXED BY plan_approvals_one_pending \
         WHERE status = 'pending' \
         UNION ALL \
         SELECT {APPROVAL_COLUMNS} FROM plan_approvals INDEXED BY plan_approvals_one_live_execution \
         WHERE execution_state IN ('queued','running')"
    );
    Ok(query_approvals(conn, &sql, [])?
        .into_iter()
        .map(|stored| stored.approval)
        .collect())
}

/// A plan_approvals row as SQLite returns it, before the wire strings are parsed.
pub(crate) struct RawApproval {
    id: String,
    session_id: String,
    turn_id: String,
    title: String,
    question: String,
    artifact_path: Option<String>,
    artifact_sha256: Option<String>,
    artifact_size: Option<i64>,
    status: String,
    error_code: Option<String>,
    created_at: i64,
    expires_at: i64,
    decided_at: Option<i64>,
    permission_mode: Option<String>,
    execution_id: Option<String>,
    execution_state: Option<String>,
    legacy_proposal_json: Option<String>,
    legacy_feedback: Option<String>,
}

impl RawApproval {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawApproval> {
        RawApproval::read_from(row, 0)
    }

    /// Reads [`APPROVAL_COLUMNS`] starting at column `at`.
    pub(crate) fn read_from(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<RawApproval> {
        Ok(RawApproval {
            id: row.get(at)?,
            session_id: row.get(at + 1)?,
            turn_id: row.get(at + 2)?,
            title: row.get(at + 3)?,
            question: row.get(at + 4)?,
            artifact_path: row.get(at + 5)?,
            artifact_sha256: row.get(at + 6)?,
            artifact_size: row.get(at + 7)?,
            status: row.get(at + 8)?,
            error_code: row.get(at + 9)?,
            created_at: row.get(at + 10)?,
            expires_at: row.get(at + 11)?,
            decided_at: row.get(at + 12)?,
            permission_mode: row.get(at + 13)?,
            execution_id: row.get(at + 14)?,
            execution_state: row.get(at + 15)?,
            legacy_proposal_json: row.get(at + 16)?,
            legacy_feedback: row.get(at + 17)?,
        })
    }

    pub(crate) fn into_stored(self) -> Result<StoredApproval, StorageError> {
        let artifact = match (self.artifact_path, self.artifact_sha256, self.artifact_size) {
            (Some(path), Some(sha256), Some(size)) => Some(Artifact {
                path,
                sha256,
                size: u64::try_from(size).map_err(|_| StorageError::InvalidValue {
                    column: "plan_approvals.artifact_size",
                    value: size.to_string(),
                })?,
            }),
            // The CHECK constraints keep the three together; a partial set
            // cannot be stored, so it reads as no artifact.
            (_, _, _) => None,
        };
        let approval = PlanApproval {
            id: ApprovalId::from(self.id),
            session_id: SessionId::from(self.session_id),
            turn_id: TurnId::from(self.turn_id),
            title: self.title,
            question: self.question,
            artifact,
            status: parse_wire("plan_approvals.status", &self.status, ApprovalStatus::parse)?,
            error_code: parse_optional("plan_approvals.error_code", self.error_code, ErrorCode::parse)?,
            created_at: self.created_at,
            expires_at: self.expires_at,
            decided_at: self.decided_at,
            permission_mode: parse_optional(
                "plan_approvals.permission_mode",
                self.permission_mode,
                PermissionMode::parse,
            )?,
            execution_id: self.execution_id.map(ExecutionId::from),
            execution_state: parse_optional(
                "plan_approvals.execution_state",
                self.execution_state,
                ExecutionState::parse,
            )?,
        };
        Ok(StoredApproval {
            approval,
            legacy_proposal_json: self.legacy_proposal_json,
            legacy_feedback: self.legacy_feedback,
        })
    }
}

/// The settings key of a session's bound workspace (P12).
fn workspace_key(session_id: &SessionId) -> String {
    format!("session.workspace.{}", session_id.as_str())
}

/// Binds `session_id` to `found` unless it bound a workspace already (the
/// first binding stays), inside the caller's transaction.
fn bind_workspace_row(
    conn: &Connection,
    session_id: &SessionId,
    found: WorkspaceIdentity,
) -> Result<(), StorageError> {
    let text = serde_json::to_string(&found).map_err(|error| StorageError::InvalidValue {
        column: "settings.value_json (session.workspace)",
        value: error.to_string(),
    })?;
    conn.prepare_cached(
        "INSERT INTO settings (key, value_json) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
    )
    .and_then(|mut statement| statement.execute(params![workspace_key(session_id), text]))
    .map_err(StorageError::sqlite("binding a session's workspace"))?;
    Ok(())
}

/// The workspace `session_id` bound, if any.
fn workspace_binding(
    conn: &Connection,
    session_id: &SessionId,
) -> Result<Option<WorkspaceIdentity>, StorageError> {
    let stored: Option<String> = conn
        .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([workspace_key(session_id)], |row| row.get(0))
                .optional()
        })
        .map_err(StorageError::sqlite("reading a session's workspace"))?;
    stored
        .map(|stored| {
            serde_json::from_str(&stored).map_err(|_| StorageError::InvalidValue {
                column: "settings.value_json (session.workspace)",
                value: stored.chars().take(200).collect(),
            })
        })
        .transpose()
}

/// Calls `each` with every approval row, oldest first, one row at a time
/// (a long history is never held in memory at once).
pub(crate) fn for_each_approval(
    conn: &Connection,
    mut each: impl FnMut(&PlanApproval) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let failed = "reading approvals";
    let sql = format!("SELECT {APPROVAL_COLUMNS} FROM plan_approvals ORDER BY created_at, id");
    let mut statement = conn.prepare(&sql).map_err(StorageError::sqlite(failed))?;
    let rows = statement
        .query_map([], RawApproval::read)
        .map_err(StorageError::sqlite(failed))?;
    for row in rows {
        let stored = row.map_err(StorageError::sqlite(failed))?.into_stored()?;
        each(&stored.approval)?;
    }
    Ok(())
}

pub(crate) fn query_approvals(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<StoredApproval>, StorageError> {
    let raw: Vec<RawApproval> = conn
        .prepare_cached(sql)
        .and_then(|mut statement| statement.query_map(params, RawApproval::read)?.collect())
        .map_err(StorageError::sqlite("reading approvals"))?;
    raw.into_iter().map(RawApproval::into_stored).collect()
}

fn parse_wire<T>(column: &'static str, value: &str, parse: fn(&str) -> Option<T>) -> Result<T, StorageError> {
    parse(value).ok_or_else(|| StorageError::InvalidValue {
        column,
        value: value.to_owned(),
    })
}

fn parse_optional<T>(
    column: &'static str,
    value: Option<String>,
    parse: fn(&str) -> Option<T>,
) -> Result<Option<T>, StorageError> {
    value.map(|value| parse_wire(column, &value, parse)).transpose()
}

/// The extended result code of a constraint violation, if `error` is one.
fn constraint_code(error: &rusqlite::Error) -> Option<std::ffi::c_int> {
    if let rusqlite::Error::SqliteFailure(failure, _) = error
        && failure.code == rusqlite::ErrorCode::ConstraintViolation
    {
        return Some(failure.extended_code);
    }
    None
}
