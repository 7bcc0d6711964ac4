//! Immutable, hashed plan artifacts under `<workspaceRoot>/.pi/plan/`.
//!
//! Each SubmitPlan gets a new file with a host-chosen, readable, unique name
//! (`20261129T230501Z-<slug>-<suffix>.md`). The Markdown bytes are written
//! exactly as given, flushed with fsync together with the directory entry,
//! and described by their workspace-relative path, SHA-256 and size, which
//! the caller records in the approval row: either after [`write_artifact`]
//! returns, or in a transaction whose commit waits for the file's fsync
//! that [`create_artifact`] started, so no row is ever durable before its
//! file.
//!
//! Path safety does not rely on string checks alone: the root is opened once
//! and `.pi`, `.pi/plan` and the file are reached from its descriptor one
//! component at a time with `O_NOFOLLOW`, so a symbolic link anywhere below
//! the root is refused rather than followed, and the file is created with
//! `O_EXCL`, so nothing is ever replaced. This module never overwrites,
//! renames or deletes an artifact; the only file it removes is the new,
//! partly written one of a failed write.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use plan_core::Artifact;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::StorageError;
use crate::flush::{Flush, Flusher};

/// The artifact directory, relative to the workspace root.
const PLAN_DIR: &str = ".pi/plan";

/// Whether a walk is for writing or for reading, which decides how a
/// failure is reported: a read never says "could not be written".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Write,
    Read,
}

impl Access {
    /// The error for an OS failure on `path` (workspace-relative, or the root).
    fn failed(self, path: &str, source: std::io::Error) -> StorageError {
        match self {
            Access::Write => StorageError::ArtifactWriteFailed {
                path: path.to_owned(),
                source,
            },
            Access::Read => StorageError::ArtifactReadFailed {
                path: path.to_owned(),
                source,
            },
        }
    }
}

/// How many characters of the title the file name keeps.
const SLUG_MAX: usize = 40;

/// How long the caller's unique suffix may be.
const SUFFIX_MAX: usize = 64;

/// Writes `markdown` as a new artifact under `<workspace_root>/.pi/plan/`
/// and returns its workspace-relative path, SHA-256 and size once the file
/// and its directory entry are durable.
///
/// `now_ms` (UTC) and a slug of `title` make the name readable;
/// `unique_suffix` (letters, digits, `-` and `_`; the caller draws it at
/// random) makes it unique. Refusals create nothing: a symbolic link at
/// `.pi` or `.pi/plan` is `ARTIFACT_SYMLINK`, a relative root or a suffix
/// that would leave the directory is `ARTIFACT_PATH_ESCAPE`, and any write
/// or fsync failure is `ARTIFACT_WRITE_FAILED` with the new file removed.
pub fn write_artifact(
    workspace_root: &str,
    title: &str,
    markdown: &[u8],
    now_ms: i64,
    unique_suffix: &str,
) -> Result<Artifact, StorageError> {
    let mut flushing = create_artifact(
        &Flusher::on_caller(),
        workspace_root,
        title,
        markdown,
        now_ms,
        unique_suffix,
    )?;
    flushing.wait()?;
    Ok(flushing.artifact)
}

/// [`write_artifact`] with the file's fsync started on `flusher` and not
/// waited for (the directory's is done before this returns). The caller
/// records the artifact meanwhile, in a transaction whose commit waits for
/// it ([`crate::Store::apply_recording`]), so the row is never durable
/// before the file. The refusals are [`write_artifact`]'s; a failed fsync
/// of the file is reported by [`FlushingArtifact::wait`].
pub fn create_artifact(
    flusher: &Flusher,
    workspace_root: &str,
    title: &str,
    markdown: &[u8],
    now_ms: i64,
    unique_suffix: &str,
) -> Result<FlushingArtifact, StorageError> {
    check_suffix(unique_suffix)?;
    let root = open_root(workspace_root, Access::Write)?;
    let pi = ensure_directory(&root, ".pi", ".pi")?;
    let plan = ensure_directory(&pi, "plan", PLAN_DIR)?;
    let name = format!("{}-{}-{}.md", utc_stamp(now_ms), slug(title), unique_suffix);
    let relative = format!("{PLAN_DIR}/{name}");
    let created = rustix::fs::openat(
        &plan,
        name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|errno| StorageError::ArtifactWriteFailed {
        path: relative.clone(),
        source: errno.into(),
    })?;
    let mut file = File::from(created);
    if let Err(source) = file.write_all(markdown) {
        drop(file);
        remove_partial(&plan, &name);
        return Err(StorageError::ArtifactWriteFailed {
            path: relative,
            source,
        });
    }
    // The file's flush goes to the flusher's thread, and its directory
    // entry is synced here meanwhile: the two are in flight at once, and
    // on a journaling filesystem the entry's commit carries the file's
    // data with it, so the file's own flush is mostly done by the time the
    // caller has written its row and waits.
    let mut flush = flusher.start(OwnedFd::from(file));
    if let Err(errno) = rustix::fs::fsync(&plan) {
        // Not written until both are done: the file is removed only after
        // its own flush, whatever that did.
        let _file = flush.wait();
        remove_partial(&plan, &name);
        return Err(StorageError::ArtifactWriteFailed {
            path: relative,
            source: errno.into(),
        });
    }
    Ok(FlushingArtifact {
        artifact: Artifact {
            path: relative,
            sha256: sha256_hex(markdown),
            size: markdown.len() as u64,
        },
        plan,
        name,
        flush,
        outcome: None,
    })
}

/// A new artifact whose directory entry is durable and whose bytes are
/// being flushed ([`create_artifact`]); it is durable once
/// [`FlushingArtifact::wait`] says so.
pub struct FlushingArtifact {
    artifact: Artifact,
    /// `.pi/plan`, for removing the file should its flush fail.
    plan: OwnedFd,
    name: String,
    /// The file's own fsync.
    flush: Flush,
    /// The outcome once waited for: `Err` holds why it failed.
    outcome: Option<Result<(), Errno>>,
}

impl FlushingArtifact {
    /// The record of the artifact: its path, SHA-256 and size.
    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }

    /// Waits until the file is durable. If its fsync failed, the file is
    /// removed and the error is `ARTIFACT_WRITE_FAILED`; later calls give
    /// the same outcome at once.
    pub fn wait(&mut self) -> Result<(), StorageError> {
        let outcome = match self.outcome {
            Some(outcome) => outcome,
            None => {
                let outcome = self.flush.wait();
                if outcome.is_err() {
                    remove_partial(&self.plan, &self.name);
                }
                self.outcome = Some(outcome);
                outcome
            }
        };
        outcome.map_err(|errno| StorageError::ArtifactWriteFailed {
            path: self.artifact.path.clone(),
            source: errno.into(),
        })
    }
}

/// Reads an artifact back and checks it against its record: a missing file
/// or workspace is `ARTIFACT_MISSING`, different size or SHA-256 is
/// `ARTIFACT_INTEGRITY_MISMATCH`, a failed read is
/// [`StorageError::ArtifactReadFailed`]. Symbolic links and paths outside
/// `.pi/plan/` are refused as when writing.
pub fn read_artifact(workspace_root: &str, artifact: &Artifact) -> Result<Vec<u8>, StorageError> {
    let bytes = read_artifact_unverified(workspace_root, artifact)?;
    let found_sha256 = sha256_hex(&bytes);
    let found_size = bytes.len() as u64;
    if found_size != artifact.size || found_sha256 != artifact.sha256 {
        return Err(StorageError::ArtifactIntegrityMismatch {
            path: artifact.path.clone(),
            expected_size: artifact.size,
            expected_sha256: artifact.sha256.clone(),
            found_size,
            found_sha256,
        });
    }
    Ok(bytes)
}

/// Reads an artifact's bytes as they are now, WITHOUT checking them against
/// the record: for a person who asked to see a file that failed
/// [`read_artifact`] (`plan-checkpoint approvals cat --force`). A missing
/// file, a symbolic link or a path outside `.pi/plan/` is refused as in
/// [`read_artifact`].
pub fn read_artifact_unverified(workspace_root: &str, artifact: &Artifact) -> Result<Vec<u8>, StorageError> {
    let name = artifact_file_name(&artifact.path)?;
    let root = open_root(workspace_root, Access::Read)?;
    let missing = || StorageError::ArtifactMissing {
        path: artifact.path.clone(),
    };
    // One resolution below the root that refuses every link on the way
    // (a decision re-reads the file, so its syscalls count). Anything but
    // the file or its absence takes the walk below, which says exactly
    // what is in the way; so does a kernel without `openat2`.
    let direct = rustix::fs::openat2(
        &root,
        format!("{PLAN_DIR}/{name}"),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    );
    match direct {
        Ok(fd) => return read_regular_file(fd, artifact),
        Err(Errno::NOENT) => return Err(missing()),
        Err(_) => {}
    }
    let Some(pi) = open_existing_directory(&root, ".pi", ".pi", Access::Read)? else {
        return Err(missing());
    };
    let Some(plan) = open_existing_directory(&pi, "plan", PLAN_DIR, Access::Read)? else {
        return Err(missing());
    };
    let opened = rustix::fs::openat(
        &plan,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(missing()),
        Err(Errno::LOOP) => {
            return Err(StorageError::ArtifactSymlink {
                path: artifact.path.clone(),
            });
        }
        Err(errno) => return Err(Access::Read.failed(&artifact.path, errno.into())),
    };
    read_regular_file(fd, artifact)
}

/// The bytes of the opened artifact `fd`, which must be a regular file
/// (anything else is as good as missing).
fn read_regular_file(fd: OwnedFd, artifact: &Artifact) -> Result<Vec<u8>, StorageError> {
    let stat = rustix::fs::fstat(&fd).map_err(|errno| Access::Read.failed(&artifact.path, errno.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(StorageError::ArtifactMissing {
            path: artifact.path.clone(),
        });
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(|source| Access::Read.failed(&artifact.path, source))?;
    Ok(bytes)
}

/// The workspace-relative paths (`.pi/plan/<name>.md`) of every regular
/// Markdown file in the artifact directory, sorted; empty when the directory
/// does not exist, [`StorageError::WorkspaceMissing`] when the root does
/// not. Verification compares them with the approval rows to find orphans.
pub fn list_artifact_files(workspace_root: &str) -> Result<Vec<String>, StorageError> {
    let root = open_root(workspace_root, Access::Read)?;
    let Some(pi) = open_existing_directory(&root, ".pi", ".pi", Access::Read)? else {
        return Ok(Vec::new());
    };
    let Some(plan) = open_existing_directory(&pi, "plan", PLAN_DIR, Access::Read)? else {
        return Ok(Vec::new());
    };
    let listing_failed = |errno: Errno| StorageError::Io {
        context: "listing the plan artifacts in",
        path: Path::new(workspace_root).join(PLAN_DIR),
        source: errno.into(),
    };
    let dir = Dir::read_from(&plan).map_err(listing_failed)?;
    let mut paths = Vec::new();
    for entry in dir {
        let entry = entry.map_err(listing_failed)?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if !name.ends_with(".md") {
            continue;
        }
        // d_type may be unknown on some file systems; ask without following links.
        let file_type = if entry.file_type() == FileType::Unknown {
            rustix::fs::statat(&plan, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|stat| FileType::from_raw_mode(stat.st_mode))
                .map_err(listing_failed)?
        } else {
            entry.file_type()
        };
        if file_type == FileType::RegularFile {
            paths.push(format!("{PLAN_DIR}/{name}"));
        }
    }
    paths.sort();
    Ok(paths)
}

/// Lowercase hex SHA-256 of `bytes`: how an artifact's hash is recorded,
/// so a frontend that holds a plan's bytes compares them the same way.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Removes a file that [`write_artifact`] wrote moments ago when the
/// submission it belongs to was refused before any approval recorded it
/// (another call ended the Plan turn or created the pending approval first).
/// Only for that: an artifact that a row references is never removed.
/// The removal is made durable; a file that is already gone is fine.
pub fn discard_unrecorded_artifact(workspace_root: &str, artifact: &Artifact) -> Result<(), StorageError> {
    let name = artifact_file_name(&artifact.path)?;
    let root = open_root(workspace_root, Access::Write)?;
    let Some(pi) = open_existing_directory(&root, ".pi", ".pi", Access::Write)? else {
        return Ok(());
    };
    let Some(plan) = open_existing_directory(&pi, "plan", PLAN_DIR, Access::Write)? else {
        return Ok(());
    };
    match rustix::fs::unlinkat(&plan, name, AtFlags::empty()) {
        Ok(()) => rustix::fs::fsync(&plan).map_err(|errno| StorageError::ArtifactWriteFailed {
            path: artifact.path.clone(),
            source: errno.into(),
        }),
        Err(Errno::NOENT) => Ok(()),
        Err(errno) => Err(StorageError::ArtifactWriteFailed {
            path: artifact.path.clone(),
            source: errno.into(),
        }),
    }
}

/// Removes the new file of a failed write. It is best effort: the write has
/// already failed and that error is the one reported; a leftover here would
/// be an orphan that `list_artifact_files` shows.
fn remove_partial(plan: &OwnedFd, name: &str) {
    if rustix::fs::unlinkat(plan, name, AtFlags::empty()).is_ok() {
        // Make the removal durable too, so a crash cannot resurrect the entry.
        let _synced = rustix::fs::fsync(plan);
    }
}

/// Opens the workspace root: an absolute, normalized path to an existing
/// directory. Links in the root path itself are the user's choice of
/// project location and are followed; everything below it is not. For a
/// read, a root that is gone is [`StorageError::WorkspaceMissing`].
fn open_root(workspace_root: &str, access: Access) -> Result<OwnedFd, StorageError> {
    let path = Path::new(workspace_root);
    let normalized = path
        .components()
        .all(|component| matches!(component, Component::RootDir | Component::Normal(_)));
    if !path.is_absolute() || !normalized {
        return Err(StorageError::ArtifactPathEscape {
            detail: format!("the workspace root {workspace_root:?} is not an absolute, normalized path"),
        });
    }
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match (access, errno) {
        (Access::Read, Errno::NOENT | Errno::NOTDIR) => StorageError::WorkspaceMissing {
            root: workspace_root.to_owned(),
        },
        (Access::Read | Access::Write, errno) => access.failed(workspace_root, errno.into()),
    })
}

/// Opens `name` under `parent` as a real directory, creating it when absent.
fn ensure_directory(parent: &OwnedFd, name: &str, relative: &str) -> Result<OwnedFd, StorageError> {
    // It exists for every submission but a workspace's first: opening it
    // first saves a failing `mkdirat` per directory and per submission.
    if let Some(directory) = open_existing_directory(parent, name, relative, Access::Write)? {
        return Ok(directory);
    }
    let created = match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(errno) => {
            return Err(StorageError::ArtifactWriteFailed {
                path: relative.to_owned(),
                source: errno.into(),
            });
        }
    };
    let Some(directory) = open_existing_directory(parent, name, relative, Access::Write)? else {
        // Created a moment ago and gone now: someone else is changing the tree.
        return Err(StorageError::ArtifactWriteFailed {
            path: relative.to_owned(),
            source: Errno::NOENT.into(),
        });
    };
    if created {
        rustix::fs::fsync(parent).map_err(|errno| StorageError::ArtifactWriteFailed {
            path: relative.to_owned(),
            source: errno.into(),
        })?;
    }
    Ok(directory)
}

/// Opens `name` under `parent` as a directory without following a link;
/// `Ok(None)` when it does not exist.
fn open_existing_directory(
    parent: &OwnedFd,
    name: &str,
    relative: &str,
    access: Access,
) -> Result<Option<OwnedFd>, StorageError> {
    let opened = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    );
    match opened {
        Ok(directory) => Ok(Some(directory)),
        Err(Errno::NOENT) => Ok(None),
        // O_NOFOLLOW on a link fails with ELOOP, or ENOTDIR together with
        // O_DIRECTORY on some kernels; look at the entry itself to tell a
        // link from a plain file in the way.
        Err(errno @ (Errno::LOOP | Errno::NOTDIR)) => {
            let is_link = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink);
            if is_link {
                Err(StorageError::ArtifactSymlink {
                    path: relative.to_owned(),
                })
            } else {
                Err(access.failed(relative, errno.into()))
            }
        }
        Err(errno) => Err(access.failed(relative, errno.into())),
    }
}

/// The suffix must be one plain name component of safe characters.
fn check_suffix(suffix: &str) -> Result<(), StorageError> {
    let safe = !suffix.is_empty()
        && suffix.len() <= SUFFIX_MAX
        && suffix
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if safe {
        Ok(())
    } else {
        Err(StorageError::ArtifactPathEscape {
            detail: format!("the unique suffix {suffix:?} is not a plain name (letters, digits, - and _)"),
        })
    }
}

/// Checks that a recorded path is `.pi/plan/<one plain name>.md` and returns the name.
fn artifact_file_name(path: &str) -> Result<&str, StorageError> {
    let name = path.strip_prefix(".pi/plan/").unwrap_or("");
    let plain = name.ends_with(".md")
        && name.len() > ".md".len()
        && !name.contains('/')
        && !name.contains('\0')
        && Path::new(name).file_name() == Some(OsStr::new(name));
    if plain {
        Ok(name)
    } else {
        Err(StorageError::ArtifactPathEscape {
            detail: format!("the artifact path {path:?} is not .pi/plan/<name>.md"),
        })
    }
}

/// A readable file-name slug of the title: lowercase ASCII letters and
/// digits, other runs as one `-`, at most [`SLUG_MAX`] characters; `plan`
/// when nothing is left.
fn slug(title: &str) -> String {
    let mut slug = String::with_capacity(SLUG_MAX);
    let mut pending_dash = false;
    for character in title.chars() {
        if slug.len() >= SLUG_MAX {
            break;
        }
        if character.is_ascii_alphanumeric() {
            if pending_dash && !slug.is_empty() {
                slug.push('-');
            }
            pending_dash = false;
            slug.push(character.to_ascii_lowercase());
        } else {
            pending_dash = true;
        }
    }
    slug.truncate(SLUG_MAX);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "plan".to_owned()
    } else {
        slug.to_owned()
    }
}

/// `YYYYMMDDTHHMMSSZ` for Unix milliseconds, in UTC.
fn utc_stamp(now_ms: i64) -> String {
    let time = plan_core::UtcTime::from_unix_ms(now_ms);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        time.year, time.month, time.day, time.hour, time.minute, time.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use plan_core::{ApprovalStatus, Effect, PlanApproval, Session};

    const NOW: i64 = 1_790_000_000_000;

    /// A store with session `s1` and a new artifact of its workspace, its
    /// flush started.
    fn store_and_artifact(dir: &Path) -> (Store, String, FlushingArtifact) {
        let root = dir.join("workspace");
        std::fs::create_dir(&root).unwrap();
        let root = root.to_str().unwrap().to_owned();
        let (mut store, _) = Store::open(dir.join("host.db")).unwrap();
        store
            .create_session(&Session::new("s1", Some(root.clone())), NOW)
            .unwrap();
        let flushing =
            create_artifact(&Flusher::on_thread(), &root, "Split", b"# Plan\n", NOW, "f1").unwrap();
        (store, root, flushing)
    }

    fn recording(artifact: &Artifact) -> Effect {
        Effect::InsertApproval(PlanApproval {
            id: "a1".into(),
            session_id: "s1".into(),
            turn_id: "t1".into(),
            title: "Split".to_owned(),
            question: "Go?".to_owned(),
            artifact: Some(artifact.clone()),
            status: ApprovalStatus::Pending,
            error_code: None,
            created_at: NOW,
            expires_at: NOW + 1_800_000,
            decided_at: None,
            permission_mode: None,
            execution_id: None,
            execution_state: None,
        })
    }

    #[test]
    fn the_row_that_records_an_artifact_commits_once_its_flush_succeeded() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, root, mut flushing) = store_and_artifact(dir.path());
        let effects = [recording(flushing.artifact())];
        store.apply_recording(&effects, NOW, None, &mut flushing).unwrap();
        assert_eq!(flushing.outcome, Some(Ok(())), "the commit waited for the flush");
        let stored = store.list_approvals(&crate::ApprovalFilter::default()).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(read_artifact(&root, flushing.artifact()).unwrap(), b"# Plan\n");
    }

    #[test]
    fn a_failed_flush_commits_no_row_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, root, mut flushing) = store_and_artifact(dir.path());
        // What the flush thread reports when the disk fails the fsync.
        flushing.flush = Flush::Done(Err(Errno::IO));
        let effects = [recording(flushing.artifact())];
        let error = store
            .apply_recording(&effects, NOW, None, &mut flushing)
            .unwrap_err();
        assert_eq!(error.code(), plan_core::ErrorCode::ArtifactWriteFailed);
        assert!(
            store
                .list_approvals(&crate::ApprovalFilter::default())
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.pending_approval(&"s1".into()).unwrap(), None);
        assert!(
            list_artifact_files(&root).unwrap().is_empty(),
            "the file is removed"
        );
        // The caller hears the same outcome when it asks again.
        assert_eq!(
            flushing.wait().unwrap_err().code(),
            plan_core::ErrorCode::ArtifactWriteFailed
        );
    }

    #[test]
    fn a_transition_that_does_not_record_the_artifact_commits_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _root, mut flushing) = store_and_artifact(dir.path());
        flushing.flush = Flush::Done(Err(Errno::IO));
        let other = Artifact {
            path: ".pi/plan/other.md".to_owned(),
            sha256: "0".repeat(64),
            size: 1,
        };
        store
            .apply_recording(&[recording(&other)], NOW, None, &mut flushing)
            .unwrap();
        assert_eq!(flushing.outcome, None, "nothing waited for this artifact");
    }

    #[test]
    fn stamps_are_utc_calendar_times() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_795_907_101_000), "20261128T230501Z");
        assert_eq!(utc_stamp(951_782_400_000), "20000229T000000Z");
        assert_eq!(utc_stamp(-1), "19691231T235959Z");
    }

    #[test]
    fn slugs_are_readable_and_safe() {
        assert_eq!(slug("Split the parser: step 1/2"), "split-the-parser-step-1-2");
        assert_eq!(slug("Планировать ✓"), "plan");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert!(slug(&"a".repeat(100)).len() <= SLUG_MAX);
    }

    #[test]
    fn recorded_paths_must_be_plain_names() {
        assert!(artifact_file_name(".pi/plan/x.md").is_ok());
        assert!(artifact_file_name(".pi/plan/../x.md").is_err());
        assert!(artifact_file_name(".pi/plan/a/x.md").is_err());
        assert!(artifact_file_name("/etc/x.md").is_err());
        assert!(artifact_file_name(".pi/plan/.md").is_err());
    }
}
