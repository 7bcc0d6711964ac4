//! The exporter thread: reads the records after the persistent cursor
//! through its own connection, sends them, and moves the cursor only after
//! the collector accepted them (2xx). On a failure it waits (doubling up to
//! a bound) and sends the same records again; stopping or being killed
//! loses nothing, since the cursor did not move. It never touches a
//! decision: the host's commits only wake it.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use plan_storage::{AuditCursor, AuditRecord, Store};
use serde_json::Value;

use crate::config::{ConfigError, ExportConfig, Protocol};
use crate::http::{self, Endpoint, SendError};
use crate::otlp::{self, Origin};

/// What the exporter has done so far (for status lines and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStatus {
    /// The seq of the last record a collector accepted (the cursor).
    pub exported_seq: u64,
    /// Requests the collector accepted.
    pub batches: u64,
    /// Attempts that failed (collector down or refusing, database error).
    pub failures: u64,
    /// The last failure, cleared by the next accepted request.
    pub last_error: Option<String>,
}

/// A change in the export's health, told once per change: the first
/// failure after a success (or after the start), and the first success
/// after failures. The host says each on its stderr in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportEvent {
    /// Sending failed; later failures are not told until a recovery.
    Failing {
        /// Why (the collector's answer, the connection's error).
        error: String,
        /// The last seq a collector accepted.
        exported_seq: u64,
    },
    /// A collector accepted records again.
    Recovered {
        /// How many attempts failed meanwhile.
        failures: u64,
        /// The last seq it accepted.
        exported_seq: u64,
    },
}

impl std::fmt::Display for ExportEvent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportEvent::Failing { error, exported_seq } => write!(
                formatter,
                "audit export failing: {error} (records after seq {exported_seq} wait in the database \
                 and are sent once the collector accepts them)"
            ),
            ExportEvent::Recovered {
                failures,
                exported_seq,
            } => write!(
                formatter,
                "audit export recovered after {failures} failed attempt(s): the collector accepted up to seq {exported_seq}"
            ),
        }
    }
}

/// Receives the export's [`ExportEvent`]s, on the exporter's thread.
pub type ExportObserver = Arc<dyn Fn(&ExportEvent) + Send + Sync>;

#[derive(Debug, Default)]
struct State {
    stop: bool,
    woken: bool,
    status: ExportStatus,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the state is plain data.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits up to `timeout`; a wake ends the wait early when `wakeable`.
    /// Returns whether the exporter must stop.
    fn wait(&self, timeout: Duration, wakeable: bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if state.stop {
                return true;
            }
            if wakeable && state.woken {
                state.woken = false;
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(state, _)| state)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }

    fn update(&self, change: impl FnOnce(&mut ExportStatus)) {
        change(&mut self.lock().status);
        self.changed.notify_all();
    }
}

/// The running exporter of one database. Dropping it stops the thread
/// (after the request in flight, if any) and waits for it.
#[derive(Debug)]
pub struct Exporter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Starts exporting the database at `database` (which a host has
    /// opened) as `config` says, on a thread of its own. For an `https://`
    /// endpoint the TLS configuration is built here, once: the trusted
    /// roots and the certificate files are read now, and one that cannot
    /// be used is [`ExportStartError::Config`].
    pub fn start(database: impl Into<PathBuf>, config: ExportConfig) -> Result<Exporter, ExportStartError> {
        Exporter::start_observed(database, config, None)
    }

    /// [`Exporter::start`], telling `observer` each change in the export's
    /// health (the first failure, the recovery).
    pub fn start_observed(
        database: impl Into<PathBuf>,
        config: ExportConfig,
        observer: Option<ExportObserver>,
    ) -> Result<Exporter, ExportStartError> {
        let endpoint = Endpoint::open(&config)?;
        let shared = Arc::new(Shared::default());
        let worker = Worker {
            database: database.into(),
            endpoint,
            origin: Origin {
                host_name: host_name(),
                database_id: None,
            },
            config,
            shared: Arc::clone(&shared),
            observer,
        };
        let thread = std::thread::Builder::new()
            .name("plan-audit-export".to_owned())
            .spawn(move || worker.run())
            .map_err(|error| ExportStartError::Thread(error.to_string()))?;
        Ok(Exporter {
            shared,
            thread: Some(thread),
        })
    }

    /// Tells the exporter that records were committed: it looks now
    /// instead of at its next poll. Never blocks on the exporter's work.
    pub fn wake(&self) {
        self.shared.lock().woken = true;
        self.shared.changed.notify_all();
    }

    /// What it has done so far.
    pub fn status(&self) -> ExportStatus {
        self.shared.lock().status.clone()
    }

    /// Waits until a collector accepted every record up to `seq`, or
    /// `timeout` passed; returns whether it did.
    pub fn wait_exported(&self, seq: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.status.exported_seq >= seq {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(state, _)| state)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Why the exporter did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportStartError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The thread could not be spawned.
    #[error("cannot start the audit exporter thread: {0}")]
    Thread(String),
}

/// The machine's name for `host.name`.
fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| {
            std::fs::read_to_string(path)
                .ok()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

struct Worker {
    database: PathBuf,
    endpoint: Endpoint,
    origin: Origin,
    config: ExportConfig,
    shared: Arc<Shared>,
    observer: Option<ExportObserver>,
}

/// How the next request is shaped after a collector refused one (a 4xx
/// other than 429): fewer records, or the one record without its content.
#[derive(Debug, Clone, Copy)]
struct Shaping {
    /// At most this many records per request.
    limit: u32,
    /// Send this seq without its confidential content.
    without_content: Option<u64>,
}

impl Worker {
    fn run(mut self) {
        let mut store: Option<Store> = None;
        let mut backoff = self.config.min_backoff;
        let mut shaping = Shaping {
            limit: self.config.batch_size,
            without_content: None,
        };
        // Whether the last attempt failed (the start counts as healthy, so
        // the first failure is told).
        let mut failing = false;
        let mut failures_since = 0_u64;
        loop {
            if self.shared.lock().stop {
                return;
            }
            let outcome = self.attempt(&mut store, &mut shaping);
            let stop = match outcome {
                Attempt::Sent(seq) => {
                    backoff = self.config.min_backoff;
                    self.shared.update(|status| {
                        status.exported_seq = seq;
                        status.batches += 1;
                        status.last_error = None;
                    });
                    if failing {
                        failing = false;
                        self.tell(
                            store.as_mut(),
                            &ExportEvent::Recovered {
                                failures: failures_since,
                                exported_seq: seq,
                            },
                        );
                    }
                    failures_since = 0;
                    false
                }
                Attempt::Idle => self.shared.wait(self.config.poll_interval, true),
                Attempt::Reshaped(error) => {
                    // A smaller request next, at once: not the same one again.
                    self.shared.update(|status| {
                        status.failures += 1;
                        status.last_error = Some(error);
                    });
                    false
                }
                Attempt::Failed(error) => {
                    let exported_seq = self.shared.lock().status.exported_seq;
                    self.shared.update(|status| {
                        status.failures += 1;
                        status.last_error = Some(error.clone());
                    });
                    failures_since += 1;
                    if !failing {
                        failing = true;
                        self.tell(store.as_mut(), &ExportEvent::Failing { error, exported_seq });
                    }
                    let stop = self.shared.wait(backoff, false);
                    backoff = (backoff * 2).min(self.config.max_backoff);
                    stop
                }
            };
            if stop {
                return;
            }
        }
    }

    /// Tells the observer, and records the export's health where `db
    /// status` reads it (best effort: a database that cannot take it is
    /// what failed).
    fn tell(&self, store: Option<&mut Store>, event: &ExportEvent) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| {
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
            });
        let status = match event {
            ExportEvent::Failing { error, exported_seq } => serde_json::json!({
                "state": "failing",
                "lastError": error,
                "since": now,
                "exportedSeq": exported_seq,
            }),
            ExportEvent::Recovered {
                failures,
                exported_seq,
            } => serde_json::json!({
                "state": "ok",
                "lastError": Value::Null,
                "recoveredAt": now,
                "failures": failures,
                "exportedSeq": exported_seq,
            }),
        };
        if let Some(store) = store {
            let _ = store.set_export_status(&status);
        }
        if let Some(observer) = &self.observer {
            // An observer that panics does not stop the export.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observer(event)));
        }
    }

    fn attempt(&mut self, store: &mut Option<Store>, shaping: &mut Shaping) -> Attempt {
        if store.is_none() {
            match Store::open(&self.database) {
                Ok((opened, _)) => {
                    self.origin.database_id = opened.database_id().ok().flatten();
                    *store = Some(opened);
                }
                Err(error) => return Attempt::Failed(format!("cannot open the database: {error}")),
            }
        }
        let Some(open) = store.as_mut() else {
            return Attempt::Idle;
        };
        let read = open
            .audit_cursor()
            .and_then(|cursor| open.audit_records_after(cursor, shaping.limit.max(1)));
        let mut batch = match read {
            Ok(batch) => batch,
            Err(error) => {
                // A fresh connection next time.
                *store = None;
                return Attempt::Failed(format!("cannot read the audit records: {error}"));
            }
        };
        if batch.is_empty() {
            if let Ok(cursor) = open.audit_cursor() {
                self.shared.update(|status| status.exported_seq = cursor.seq);
            }
            return Attempt::Idle;
        }
        if self.config.include_content {
            batch.iter_mut().for_each(add_plan_text);
            if let Some(seq) = shaping.without_content
                && let Some(record) = batch.first_mut().filter(|record| record.seq == seq)
            {
                crate::bound::cut_content(record, 0);
            }
        }
        let (body, count) = crate::bound::bounded_request(&mut batch, &self.config, &self.origin);
        let Some(last) = batch.get(count.saturating_sub(1)) else {
            return Attempt::Idle;
        };
        let to = AuditCursor {
            seq: last.seq,
            entry_id: last.entry_id,
        };
        let sent = http::post(
            &self.endpoint,
            &self.config.headers,
            self.config.protocol.content_type(),
            &body,
            self.config.timeout,
        );
        match sent {
            Ok(_) => {}
            Err(SendError::Refused(status)) if (400..500).contains(&status) && status != 429 => {
                // The request itself is refused (too large, a record the
                // collector cannot take): never the same one again.
                let error = format!("the collector answered {status}");
                if count > 1 {
                    shaping.limit = u32::try_from(count / 2).unwrap_or(1).max(1);
                    return Attempt::Reshaped(format!("{error}; splitting the request ({count} records)"));
                }
                let first = &batch[0];
                if !first.content.is_empty() && shaping.without_content != Some(first.seq) {
                    shaping.without_content = Some(first.seq);
                    return Attempt::Reshaped(format!(
                        "{error}; sending seq {} again without its content",
                        first.seq
                    ));
                }
                // One record without content refused: the collector's
                // configuration (a path, an authorization), not the record.
                // Nothing is skipped; it is sent again after the back-off.
                return Attempt::Failed(format!("{error} to seq {} alone", first.seq));
            }
            Err(error) => return Attempt::Failed(error.to_string()),
        }
        if shaping.without_content.is_some_and(|seq| seq <= to.seq) {
            shaping.without_content = None;
        }
        shaping.limit = shaping.limit.saturating_mul(2).min(self.config.batch_size);
        match open.advance_audit_cursor(to) {
            Ok(()) => Attempt::Sent(to.seq),
            Err(error) => {
                *store = None;
                Attempt::Failed(format!(
                    "the collector accepted seq {}, but the cursor did not move: {error}",
                    to.seq
                ))
            }
        }
    }
}

/// The request's body in the configured encoding.
pub(crate) fn encode(records: &[AuditRecord], config: &ExportConfig, origin: &Origin) -> Vec<u8> {
    match config.protocol {
        Protocol::HttpJson => otlp::encode_json(records, config, origin),
        Protocol::HttpProtobuf => otlp::encode_protobuf(records, config, origin),
    }
}

/// The plan's Markdown as content of its submission's record, read from
/// the immutable artifact and checked against the recorded SHA-256 and
/// size; left out when the file is gone or differs (its hash is exported
/// either way).
fn add_plan_text(record: &mut AuditRecord) {
    if record.event != "plan_checkpoint.plan.submitted" {
        return;
    }
    let text = |key: &str| {
        record
            .attributes
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let (Some(root), Some(path), Some(sha256), Some(size)) = (
        record.workspace_root.clone(),
        text("plan_checkpoint.plan.path"),
        text("plan_checkpoint.plan.sha256"),
        record
            .attributes
            .get("plan_checkpoint.plan.size")
            .and_then(serde_json::Value::as_u64),
    ) else {
        return;
    };
    let artifact = plan_core::Artifact { path, sha256, size };
    if let Ok(bytes) = plan_storage::read_artifact(&root, &artifact)
        && let Ok(markdown) = String::from_utf8(bytes)
    {
        record
            .content
            .insert("plan_checkpoint.plan.text".to_owned(), markdown);
    }
}

enum Attempt {
    Sent(u64),
    Idle,
    /// Refused as it was; the next request is smaller, sent at once.
    Reshaped(String),
    Failed(String),
}
