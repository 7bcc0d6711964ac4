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

use crate::config::{ConfigError, ExportConfig, Protocol};
use crate::http::{self, Endpoint};
use crate::otlp;

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
        let endpoint = Endpoint::open(&config)?;
        let shared = Arc::new(Shared::default());
        let worker = Worker {
            database: database.into(),
            endpoint,
            host_name: host_name(),
            config,
            shared: Arc::clone(&shared),
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
    host_name: String,
    config: ExportConfig,
    shared: Arc<Shared>,
}

impl Worker {
    fn run(self) {
        let mut store: Option<Store> = None;
        let mut backoff = self.config.min_backoff;
        loop {
            if self.shared.lock().stop {
                return;
            }
            let outcome = self.attempt(&mut store);
            let stop = match outcome {
                Attempt::Sent(seq) => {
                    backoff = self.config.min_backoff;
                    self.shared.update(|status| {
                        status.exported_seq = seq;
                        status.batches += 1;
                        status.last_error = None;
                    });
                    false
                }
                Attempt::Idle => self.shared.wait(self.config.poll_interval, true),
                Attempt::Failed(error) => {
                    self.shared.update(|status| {
                        status.failures += 1;
                        status.last_error = Some(error);
                    });
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

    fn attempt(&self, store: &mut Option<Store>) -> Attempt {
        if store.is_none() {
            match Store::open(&self.database) {
                Ok((opened, _)) => *store = Some(opened),
                Err(error) => return Attempt::Failed(format!("cannot open the database: {error}")),
            }
        }
        let Some(open) = store.as_mut() else {
            return Attempt::Idle;
        };
        let read = open
            .audit_cursor()
            .and_then(|cursor| open.audit_records_after(cursor, self.config.batch_size));
        let batch = match read {
            Ok(batch) => batch,
            Err(error) => {
                // A fresh connection next time.
                *store = None;
                return Attempt::Failed(format!("cannot read the audit records: {error}"));
            }
        };
        let Some(last) = batch.last() else {
            if let Ok(cursor) = open.audit_cursor() {
                self.shared.update(|status| status.exported_seq = cursor.seq);
            }
            return Attempt::Idle;
        };
        let to = AuditCursor {
            seq: last.seq,
            entry_id: last.entry_id,
        };
        if let Err(error) = self.send(&batch) {
            return Attempt::Failed(error);
        }
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

    fn send(&self, batch: &[AuditRecord]) -> Result<(), String> {
        let mut with_text;
        let batch = if self.config.include_content {
            with_text = batch.to_vec();
            with_text.iter_mut().for_each(add_plan_text);
            &with_text[..]
        } else {
            batch
        };
        let body = match self.config.protocol {
            Protocol::HttpJson => otlp::encode_json(batch, &self.config, &self.host_name),
            Protocol::HttpProtobuf => otlp::encode_protobuf(batch, &self.config, &self.host_name),
        };
        http::post(
            &self.endpoint,
            &self.config.headers,
            self.config.protocol.content_type(),
            &body,
            self.config.timeout,
        )
        .map(|_| ())
        .map_err(|error| error.to_string())
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
    Failed(String),
}
