//! Opening a database file: deciding what it is, and migrating it to v10.
//!
//! The decision follows the "what opening a database must do" table of the
//! storage contract. A file is first inspected without writing to it (its
//! header by hand, then SQLite read-only, with `quick_check` of the tables
//! a v8 migration touches), so that every refusal leaves it byte-identical; only a caller
//! holding the host lock first lets SQLite roll back the hot journal of an
//! interrupted write. The journal mode is switched to WAL only on an
//! accepted database, after its migration committed. Only a new file or a v8 database of the 0.4.14 host is
//! migrated, and always in ONE transaction: the refinery history, the V9 and
//! V10 migrations and `PRAGMA user_version = 10`, written last.
//!
//! This module never repairs, downgrades or partially migrates a database.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use refinery::{Migration, Target};
use refinery_core::traits::sync::{Query, Transaction};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::StorageError;
use crate::error::is_unreadable;
use crate::path::check_database_path;

/// The migration files, embedded at compile time. build.rs makes cargo
/// rebuild when the folder changes.
// The macro generates an undocumented public module with an `unwrap` and an
// unused import; none of it is reachable from outside this crate.
#[allow(unreachable_pub, unused_imports, clippy::unwrap_used, missing_docs)]
mod embedded {
    refinery::embed_migrations!("migrations");
}

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 10;

/// The schema the 0.4.14 host wrote, which this build adopts.
const LEGACY_VERSION: u32 = 8;

/// How long a connection waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The 16 bytes every SQLite database file starts with.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// What opening a database did to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationReport {
    /// The schema found: `None` for a new or empty file, `Some(8)` for an
    /// adopted v8 database, `Some(10)` when there was nothing to migrate.
    pub from: Option<u32>,
    /// The schema the database has now: always [`SCHEMA_VERSION`].
    pub to: u32,
}

impl MigrationReport {
    /// Whether opening changed the schema (created it or migrated it).
    pub fn migrated(&self) -> bool {
        self.from != Some(self.to)
    }
}

/// What the inspection decided to do with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// A new or empty file: create v10 through every migration.
    Create,
    /// A v8 database without refinery history: record V8 as applied, then
    /// run V9 and V10.
    AdoptLegacy,
    /// Already v10: nothing to do.
    Current,
}

/// What the read-only inspection found.
struct Probe {
    user_version: u32,
    has_tables: bool,
    /// `(version, name, checksum)` rows of the refinery history, if the table exists.
    history: Option<Vec<(i64, String, String)>>,
    /// The read-only connection that looked, and whether it reads an
    /// immutable snapshot; `None` for an empty file.
    connection: Option<(Connection, bool)>,
}

/// What the file at a database path is, judged without SQLite.
enum FileKind {
    /// Nothing there.
    Missing,
    /// A regular file of zero bytes.
    Empty,
    /// A regular file that starts with the SQLite header.
    Sqlite,
}

/// Looks at the file without writing to it and without SQLite: the header
/// is checked by hand, because SQLite would happily treat some non-database
/// files as empty databases and later write to them.
fn file_kind(path: &Path) -> Result<FileKind, StorageError> {
    let unreadable = |detail: &str| StorageError::DatabaseUnreadable {
        path: path.to_owned(),
        detail: detail.to_owned(),
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(FileKind::Missing),
        Err(source) => {
            return Err(StorageError::Io {
                context: "reading the metadata of",
                path: path.to_owned(),
                source,
            });
        }
    };
    if !metadata.is_file() {
        return Err(unreadable("it is not a regular file"));
    }
    if metadata.len() == 0 {
        return Ok(FileKind::Empty);
    }
    let mut header = [0_u8; 16];
    let header_read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut header));
    match header_read {
        Ok(()) if &header == SQLITE_HEADER => Ok(FileKind::Sqlite),
        Ok(()) => Err(unreadable("the file does not start with the SQLite header")),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(unreadable("the file is shorter than a SQLite header"))
        }
        Err(source) => Err(StorageError::Io {
            context: "reading the header of",
            path: path.to_owned(),
            source,
        }),
    }
}

/// The path of a file SQLite keeps beside the database (`-journal`, `-wal`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Lets SQLite roll back a hot rollback journal, which a process killed in
/// the middle of a write (creating the schema, switching to WAL, migrating)
/// leaves beside the database. A read-only connection cannot roll it back
/// and fails with "attempt to write a readonly database", so this runs
/// before any read-only look, on a file already known to be SQLite, by a
/// caller that holds the host lock. A journal that is not hot (another
/// connection is writing) is left alone by SQLite itself.
fn roll_back_hot_journal(path: &Path) -> Result<(), StorageError> {
    let journal = sibling(path, "-journal");
    match std::fs::metadata(&journal) {
        Ok(metadata) if metadata.len() > 0 => {}
        Ok(_) | Err(_) => return Ok(()),
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(StorageError::sqlite(
        "opening the database to roll back an interrupted write",
    ))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(StorageError::sqlite("setting the busy timeout"))?;
    // The first read of a read-write connection rolls a hot journal back.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
        row.get::<_, i64>(0)
    })
    .map_err(|error| {
        if is_unreadable(&error) {
            StorageError::DatabaseUnreadable {
                path: path.to_owned(),
                detail: error.to_string(),
            }
        } else {
            StorageError::Sqlite {
                context: "rolling back an interrupted write",
                source: error,
            }
        }
    })?;
    conn.close()
        .map_err(|(_, error)| StorageError::sqlite("closing after the rollback")(error))
}

/// A read-only connection for looking at a database, and whether it had to
/// be opened as an immutable snapshot.
///
/// A WAL database needs its `-shm` file, which SQLite creates beside it; on
/// read-only media (a backup, a snapshot mount) that fails with "unable to
/// open database file". There, and only when no write-ahead log with
/// unmerged changes lies beside it, the file is opened with
/// `immutable=1`: SQLite then takes no locks and reads the main file only,
/// which is exactly its content, since nothing can be writing to it.
fn inspection_connection(path: &Path) -> Result<(Connection, bool), StorageError> {
    let classify = |context: &'static str| read_failure(path, context);
    let first_read = |conn: &Connection| {
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
            row.get::<_, i64>(0)
        })
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(classify("opening the database read-only"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(StorageError::sqlite("setting the busy timeout"))?;
    let error = match first_read(&conn) {
        Ok(_) => return Ok((conn, false)),
        Err(error) => error,
    };
    let directory_writable = path
        .parent()
        .map(|parent| {
            if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            }
        })
        .is_some_and(|parent| rustix::fs::access(parent, rustix::fs::Access::WRITE_OK).is_ok());
    // SQLite says "unable to open database file" or "attempt to write a
    // readonly database" when it cannot create or initialize the -shm file.
    let cannot_share = error.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen)
        || (error.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly)
            && error.sqlite_extended_error_code() != Some(rusqlite::ffi::SQLITE_READONLY_ROLLBACK));
    if !cannot_share || directory_writable {
        return Err(classify("reading the database")(error));
    }
    drop(conn);
    let has_content =
        |suffix: &str| std::fs::metadata(sibling(path, suffix)).is_ok_and(|metadata| metadata.len() > 0);
    if has_content("-wal") || has_content("-journal") {
        return Err(StorageError::DatabaseUnreadable {
            path: path.to_owned(),
            detail: "its directory is read-only and a write-ahead log or journal with changes not yet merged \
                     into the database lies beside it, which SQLite cannot read there; copy the database with \
                     its -wal, -shm and -journal files to writable storage to inspect it"
                .to_owned(),
        });
    }
    let conn = Connection::open_with_flags(
        immutable_uri(path),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(classify("opening the database as an immutable snapshot"))?;
    first_read(&conn).map_err(classify("reading the database as an immutable snapshot"))?;
    Ok((conn, true))
}

/// A `file:` URI naming `path` with `immutable=1`; every byte outside a
/// small safe set is percent-encoded, so no name can add parameters.
fn immutable_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'-' | b'~' => {
                uri.push(char::from(*byte));
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// How a failed read of the file at `path` is reported: a file SQLite
/// cannot read as a database is `DATABASE_UNREADABLE`, anything else a
/// SQLite failure in `context`.
fn read_failure<'path>(
    path: &'path Path,
    context: &'static str,
) -> impl Fn(rusqlite::Error) -> StorageError + 'path {
    move |error: rusqlite::Error| {
        if is_unreadable(&error) {
            StorageError::DatabaseUnreadable {
                path: path.to_owned(),
                detail: error.to_string(),
            }
        } else {
            StorageError::Sqlite {
                context,
                source: error,
            }
        }
    }
}

/// Inspects the file without writing to it; `Ok(None)` when there is no
/// file. The connection is handed back for a read-only open to keep.
fn probe(path: &Path) -> Result<Option<Probe>, StorageError> {
    let classify = |context: &'static str| read_failure(path, context);
    match file_kind(path)? {
        FileKind::Missing => return Ok(None),
        FileKind::Empty => {
            return Ok(Some(Probe {
                user_version: 0,
                has_tables: false,
                history: None,
                connection: None,
            }));
        }
        FileKind::Sqlite => {}
    }
    let (conn, immutable) = inspection_connection(path)?;
    let user_version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(classify("reading the schema version"))?;
    // Reading the schema table parses every schema entry, which is where a
    // damaged file shows itself.
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()
        })
        .map_err(classify("reading the schema"))?;
    let history = if tables.iter().any(|name| name == "refinery_schema_history") {
        let rows = conn
            .prepare("SELECT version, name, checksum FROM refinery_schema_history ORDER BY version")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                    .collect::<Result<Vec<(i64, String, String)>, _>>()
            })
            .map_err(classify("reading the migration history"))?;
        Some(rows)
    } else {
        None
    };
    Ok(Some(Probe {
        // A negative or huge user_version is reported as the largest value,
        // which is refused as newer than this build.
        user_version: u32::try_from(user_version).unwrap_or(u32::MAX),
        has_tables: !tables.is_empty(),
        history,
        connection: Some((conn, immutable)),
    }))
}

/// The v8 tables the migration to v10 reads or writes: `plan_approvals` is
/// copied and dropped, `sessions` gains a column, `settings` a row. The
/// others (`transcript_entries`, the bulk of a long-lived database, and
/// `scheduled_tasks`) are neither read nor rewritten.
const MIGRATED_TABLES: [&str; 3] = ["plan_approvals", "sessions", "settings"];

/// Checks that every page the migration reads is sound (`quick_check` of
/// each table it touches, with its indexes), on the read-only probe
/// connection, before anything is written: a damaged v8 file is refused
/// byte-identical instead of failing halfway. A check of the whole file
/// would read every transcript page, so its cost would grow with a history
/// the migration never reads.
fn check_health(path: &Path, conn: &Connection) -> Result<(), StorageError> {
    let mut findings = Vec::new();
    for table in MIGRATED_TABLES {
        // A pragma takes no bound parameters; the names are this module's constants.
        let found: Vec<String> = conn
            .prepare(&format!("PRAGMA quick_check({table})"))
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .map_err(|error| StorageError::DatabaseUnreadable {
                path: path.to_owned(),
                detail: format!("SQLite's quick_check could not read it: {error}"),
            })?;
        if !(found.len() == 1 && found[0] == "ok") {
            findings.extend(found.into_iter().take(5));
        }
    }
    if findings.is_empty() {
        return Ok(());
    }
    Err(StorageError::DatabaseUnreadable {
        path: path.to_owned(),
        detail: format!("SQLite's quick_check reports damage: {}", findings.join("; ")),
    })
}

/// The refinery history of a v10 database written by this build:
/// `(version, name, checksum)` of each migration file, by version. refinery
/// computes these when it loads the embedded files, and loading them
/// compiles a regex for the file names, which took about a tenth of a short
/// read-only command; so the usual history is compared with these first. A
/// test checks they are what refinery computes (and so that no released
/// migration file has changed).
const RECORDED_HISTORY: [(i64, &str, &str); 3] = [
    (8, "baseline", "4241813163072674317"),
    (9, "session_shell", "10539454896665048574"),
    (10, "plan_checkpoint", "6800684072194404704"),
];

/// Whether the recorded history is exactly this build's migrations.
fn history_matches(history: &[(i64, String, String)]) -> bool {
    let recorded = history.len() == RECORDED_HISTORY.len()
        && history.iter().zip(RECORDED_HISTORY).all(
            |((version, name, checksum), (want_version, want_name, want_checksum))| {
                *version == want_version && name == want_name && checksum == want_checksum
            },
        );
    recorded || history_matches_runner(history)
}

/// [`history_matches`] as refinery's runner sees the embedded files.
fn history_matches_runner(history: &[(i64, String, String)]) -> bool {
    let runner = embedded::migrations::runner();
    // The runner lists the files in directory order; the history is by version.
    let mut expected: Vec<&Migration> = runner.get_migrations().iter().collect();
    expected.sort_by_key(|migration| migration.version());
    history.len() == expected.len()
        && history
            .iter()
            .zip(expected.iter())
            .all(|((version, name, checksum), migration)| {
                *version == i64::from(migration.version())
                    && name == migration.name()
                    && *checksum == migration.checksum().to_string()
            })
}

/// Decides what to do with what the probe found, per the contract's table.
fn decide(path: &Path, found: Option<&Probe>) -> Result<Plan, StorageError> {
    let Some(probe) = found else {
        return Ok(Plan::Create);
    };
    let refuse = |reason: &str| StorageError::SchemaUnsupported {
        path: path.to_owned(),
        found: probe.user_version,
        reason: reason.to_owned(),
    };
    match (probe.user_version, &probe.history) {
        (0, None) if !probe.has_tables => Ok(Plan::Create),
        (LEGACY_VERSION, None) => Ok(Plan::AdoptLegacy),
        (LEGACY_VERSION, Some(_)) => Err(refuse(
            "a v8 database with a refinery history is not a state any host writes; restore it from a backup",
        )),
        (SCHEMA_VERSION, Some(history)) if history_matches(history) => Ok(Plan::Current),
        (SCHEMA_VERSION, Some(_) | None) => Err(refuse(
            "its migration history does not match this build's migrations v8 to v10",
        )),
        (9, _) => Err(refuse(
            "v9 is an intermediate state no host commits; the file was not written by this host",
        )),
        (version, _) if version > SCHEMA_VERSION => Err(refuse(
            "it is newer than this build, which reads schema v10; use a newer host",
        )),
        (_, _) => Err(refuse(
            "it is older than v8; this build migrates only from v8 (the 0.4.14 host) to v10",
        )),
    }
}

/// Applies the connection settings every read-write connection uses; none
/// of them writes to the file.
fn configure(conn: &Connection) -> Result<(), StorageError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(StorageError::sqlite("setting the busy timeout"))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(StorageError::sqlite("enabling foreign keys"))?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(StorageError::sqlite("setting synchronous = FULL"))?;
    // A cached statement keeps the plan it was prepared with. Otherwise
    // SQLite prepares it again at its next step whenever a parameter its
    // plan looked at gets a new value: the transcript's next seq, read for
    // every audited fact, was parsed anew for each session it asked about.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(StorageError::sqlite("keeping query plans stable"))?;
    Ok(())
}

/// Switches an accepted database to WAL. It rewrites the header, so it
/// runs only after the file was accepted and, for a new or v8 file, after
/// the migration committed: a refused or failed open never changes the
/// journal mode.
fn switch_to_wal(conn: &Connection) -> Result<(), StorageError> {
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        .map_err(StorageError::sqlite("switching to WAL"))?;
    Ok(())
}

/// Opens a database read-write, migrating it to v10 when the contract says
/// so. `step_limit` aborts the migration transaction after that many SQLite
/// VM steps (test support for the all-or-nothing proof).
pub(crate) fn open_read_write(
    path: &Path,
    step_limit: Option<u64>,
) -> Result<(Connection, MigrationReport), StorageError> {
    check_database_path(path)?;
    if let FileKind::Sqlite = file_kind(path)? {
        roll_back_hot_journal(path)?;
    }
    let found = probe(path)?;
    let plan = decide(path, found.as_ref())?;
    if let (
        Plan::AdoptLegacy,
        Some(Probe {
            connection: Some((conn, _)),
            ..
        }),
    ) = (plan, &found)
    {
        check_health(path, conn)?;
    }
    // The probe's connection goes before the writer opens the file.
    drop(found);
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(StorageError::sqlite("opening the database"))?;
    configure(&conn)?;
    let from = match plan {
        Plan::Create => None,
        Plan::AdoptLegacy => Some(LEGACY_VERSION),
        Plan::Current => Some(SCHEMA_VERSION),
    };
    match plan {
        Plan::Current => {}
        Plan::Create | Plan::AdoptLegacy => {
            migrate(&mut conn, plan, step_limit).map_err(|detail| StorageError::MigrationFailed {
                from: from.map_or_else(|| "a new file".to_owned(), |version| format!("v{version}")),
                detail,
            })?;
        }
    }
    switch_to_wal(&conn)?;
    Ok((
        conn,
        MigrationReport {
            from,
            to: SCHEMA_VERSION,
        },
    ))
}

/// What opening a database read-write (`db migrate`, a host) would do to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingMigration {
    /// The file is empty (no schema, no tables): a new v10 schema is created.
    CreateSchema,
    /// A schema v8 database of the 0.4.14 host: migrated to v10 in one
    /// transaction.
    FromV8,
    /// Already schema v10: nothing to do.
    Nothing,
}

/// What a read-write open would do to the file at `path`, found by reading
/// it only: the same decision the open makes. A missing file is
/// [`StorageError::DatabaseMissing`]; a version no open accepts is
/// [`StorageError::SchemaUnsupported`].
pub fn pending_migration(path: &Path) -> Result<PendingMigration, StorageError> {
    check_database_path(path)?;
    let Some(found) = probe(path)? else {
        return Err(StorageError::DatabaseMissing {
            path: path.to_owned(),
        });
    };
    Ok(match decide(path, Some(&found))? {
        Plan::Create => PendingMigration::CreateSchema,
        Plan::AdoptLegacy => PendingMigration::FromV8,
        Plan::Current => PendingMigration::Nothing,
    })
}

/// Opens a v10 database read-only; anything else is refused, unchanged.
/// The flag says whether it had to be opened as an immutable snapshot
/// (read-only media, see [`inspection_connection`]).
pub(crate) fn open_read_only(path: &Path) -> Result<(Connection, bool), StorageError> {
    check_database_path(path)?;
    let Some(mut found) = probe(path)? else {
        return Err(StorageError::DatabaseMissing {
            path: path.to_owned(),
        });
    };
    match decide(path, Some(&found))? {
        Plan::Current => {}
        Plan::Create | Plan::AdoptLegacy => {
            return Err(StorageError::SchemaUnsupported {
                path: path.to_owned(),
                found: found.user_version,
                reason: "a read-only open never migrates; run `db migrate` to bring it to v10 first"
                    .to_owned(),
            });
        }
    }
    match found.connection.take() {
        Some(opened) => Ok(opened),
        // An empty file decides Create, which was refused above.
        None => Err(StorageError::DatabaseMissing {
            path: path.to_owned(),
        }),
    }
}

/// Runs the migration in one IMMEDIATE transaction. The error is a message:
/// the caller wraps it with the version the file still has.
fn migrate(conn: &mut Connection, plan: Plan, step_limit: Option<u64>) -> Result<(), String> {
    if let Some(limit) = step_limit {
        // Called after every VM step of every statement on this connection;
        // it interrupts exactly once, at step `limit`, so that the rollback
        // that follows is not interrupted itself.
        let mut steps: u64 = 0;
        conn.progress_handler(
            1,
            Some(move || {
                steps = steps.saturating_add(1);
                steps == limit
            }),
        )
        .map_err(|error| error.to_string())?;
    }
    let result = migrate_in_transaction(conn, plan);
    if step_limit.is_some() {
        conn.progress_handler(0, None::<fn() -> bool>)
            .map_err(|error| error.to_string())?;
    }
    match result {
        Ok(()) => Ok(()),
        // COMMIT can report an error (an interrupt in its last VM steps)
        // after the transaction is already durable. The file, not the
        // return code, says what happened: if no transaction is open and the
        // version is 10, the migration committed whole and the open succeeds.
        Err(_) if conn.is_autocommit() && committed_version(conn) == Some(SCHEMA_VERSION) => Ok(()),
        Err(error) => Err(error),
    }
}

/// The `user_version` as committed, or `None` when it cannot be read.
fn committed_version(conn: &Connection) -> Option<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get::<_, u32>(0))
        .ok()
}

fn migrate_in_transaction(conn: &mut Connection, plan: Plan) -> Result<(), String> {
    let transaction = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|error| error.to_string())?;
    let mut runner_target = InTransaction { conn: &transaction };
    match plan {
        Plan::Current => return Ok(()),
        Plan::Create => {}
        Plan::AdoptLegacy => {
            // The 0.4.14 host wrote exactly the V8 baseline without refinery:
            // record it as applied instead of running it.
            embedded::migrations::runner()
                .set_target(Target::FakeVersion(8))
                .run(&mut runner_target)
                .map_err(|error| error.to_string())?;
        }
    }
    embedded::migrations::runner()
        .set_grouped(true)
        .run(&mut runner_target)
        .map_err(|error| error.to_string())?;
    if let Plan::Create = plan {
        // A database this build creates holds no history: its audit chain
        // begins empty, now (an upgraded one numbers its history instead,
        // when its first host opens it).
        crate::chain::begin_empty_chain(&transaction).map_err(|error| error.to_string())?;
    }
    // The contract: user_version = 10 is the last statement of the transaction.
    transaction
        .pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(|error| error.to_string())?;
    transaction.commit().map_err(|error| error.to_string())
}

/// Lets refinery run inside a transaction the store already holds.
///
/// refinery's own rusqlite driver opens and commits a transaction per call,
/// which would split adoption (FakeVersion) and the grouped migration into
/// separate commits; this adapter executes the statements as they come and
/// leaves BEGIN and COMMIT to the caller.
struct InTransaction<'conn> {
    conn: &'conn Connection,
}

impl Transaction for InTransaction<'_> {
    type Error = rusqlite::Error;

    fn execute<'a, T: Iterator<Item = &'a str>>(&mut self, queries: T) -> Result<usize, Self::Error> {
        let mut count = 0;
        for query in queries {
            self.conn.execute_batch(query)?;
            count += 1;
        }
        Ok(count)
    }
}

impl Query<Vec<Migration>> for InTransaction<'_> {
    fn query(&mut self, query: &str) -> Result<Vec<Migration>, Self::Error> {
        let mut statement = self.conn.prepare(query)?;
        let rows = statement.query_map([], |row| {
            let version: refinery::SchemaVersion = row.get(0)?;
            let name: String = row.get(1)?;
            let applied_on: String = row.get(2)?;
            let checksum: String = row.get(3)?;
            let checksum = checksum.parse::<u64>().map_err(|error| {
                rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(error))
            })?;
            // The timestamp is informational; a value refinery cannot have
            // written is shown as the epoch rather than failing the open.
            let applied_on =
                time::OffsetDateTime::parse(&applied_on, &time::format_description::well_known::Rfc3339)
                    .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            Ok(Migration::applied(version, name, applied_on, checksum))
        })?;
        rows.collect()
    }
}

impl refinery::Migrate for InTransaction<'_> {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_recorded_history_is_what_refinery_computes_from_the_files() {
        let runner = embedded::migrations::runner();
        let mut computed: Vec<(i64, String, String)> = runner
            .get_migrations()
            .iter()
            .map(|migration| {
                (
                    i64::from(migration.version()),
                    migration.name().to_owned(),
                    migration.checksum().to_string(),
                )
            })
            .collect();
        computed.sort();
        let recorded: Vec<(i64, String, String)> = RECORDED_HISTORY
            .iter()
            .map(|(version, name, checksum)| (*version, (*name).to_owned(), (*checksum).to_owned()))
            .collect();
        assert_eq!(computed, recorded);
        assert!(history_matches_runner(&recorded));
        let mut changed = recorded.clone();
        changed[2].2 = "1".to_owned();
        assert!(!history_matches(&changed) && !history_matches(&recorded[..2]));
    }

    /// SQLite re-prepares a statement at its next step when a new value is
    /// bound to a parameter its plan looked at, unless the connection keeps
    /// its plans stable: a transcript append, once per audited fact, would
    /// parse its query again on every call for another session.
    #[test]
    fn a_cached_statement_is_not_prepared_again_when_its_parameter_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, _) = open_read_write(&dir.path().join("plan.db"), None).unwrap();
        for session in ["a", "b", "a", "c"] {
            let mut statement = conn.prepare_cached(crate::transcript::NEXT_SEQ).unwrap();
            let next: i64 = statement.query_row([session], |row| row.get(0)).unwrap();
            assert_eq!(next, 1);
            assert_eq!(
                statement.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "re-prepared for session {session}"
            );
        }
    }
}
