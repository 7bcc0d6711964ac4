//! Where a file-writing tool call writes, placed once from the call's
//! input and the session's workspace, and from where the host found its
//! paths really lead: inside the workspace, at (or under) a name the
//! workspace protects, or outside it (`sandbox.md` P7, P13, P15).
//!
//! A host-run command writes only its workspace and never the protected
//! names, whatever the permission mode, because the kernel keeps it there.
//! A file-writing tool (Write, Edit, MultiEdit, NotebookEdit, Codex's
//! `apply_patch`) is run by the
//! agent itself, so the same allowance is a decision: the permission table
//! (`permissions::write_permission`) turns a [`WriteTarget`] into allow,
//! confirm or deny. This module only places paths; it does no I/O (the
//! host's look at the disk comes in as a [`WriteFact`]).

use crate::CallId;
use crate::protected::protected_root_names;

/// The input fields that name the file a file-writing tool writes:
/// Claude Code's `file_path` (Write, Edit, MultiEdit) and `notebook_path`
/// (NotebookEdit), and pi's `path`. A call naming several is placed by the
/// least favourable; one naming none cannot be placed.
pub const WRITE_PATH_FIELDS: [&str; 3] = ["file_path", "notebook_path", "path"];

/// Where a file-writing call writes, from the most to the least favourable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteTarget {
    /// A file of the workspace that no protected name covers.
    Workspace,
    /// A protected name of the workspace, or something under it, at any
    /// depth (a nested repository's `.git`, a nested project's `.pi`, an
    /// agent's configuration such as `.claude/settings.json`).
    Protected,
    /// Outside the workspace, or a path that cannot be placed (none given,
    /// not text, climbing above `/`, no workspace, or where the host could
    /// not tell where it leads).
    Outside,
}

/// Where the paths of one file-writing call lead on disk, as the host
/// found them when it gathered the decision's facts (symbolic links
/// followed), so a link inside the workspace that points out of it places
/// the call outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFact {
    /// The call.
    pub call_id: CallId,
    /// The workspace's real path, every symlink followed (`None` when it
    /// could not be opened or is not text).
    pub real_root: Option<String>,
    /// For each path the call names ([`write_paths`], in that order), the
    /// real path it leads to: its deepest existing ancestor with every
    /// symlink followed, and the rest of the path after it (`None` when
    /// the host could not tell, or it is not text).
    pub real_paths: Vec<Option<String>>,
}

/// The field of Codex's `apply_patch` that holds its patch, and the patch's
/// lines that name a file it adds, deletes, updates or moves a file to.
const PATCH_FIELD: &str = "command";
const PATCH_START: &str = "*** Begin Patch";
const PATCH_FILE_LINES: [&str; 4] = [
    "*** Add File: ",
    "*** Delete File: ",
    "*** Update File: ",
    "*** Move to: ",
];

/// The paths a file-writing call names, in [`WRITE_PATH_FIELDS`] order: each
/// field that is present and a string; then, for a patch (Codex's
/// `apply_patch`: a `command` whose text begins `*** Begin Patch`), every
/// file the patch adds, deletes, updates or moves to, in its order. A patch
/// that names no file names no path (and so cannot be placed).
pub fn write_paths(input: &serde_json::Value) -> Vec<&str> {
    let mut paths: Vec<&str> = WRITE_PATH_FIELDS
        .iter()
        .filter_map(|field| input.get(field).and_then(serde_json::Value::as_str))
        .collect();
    if let Some(patch) = input
        .get(PATCH_FIELD)
        .and_then(serde_json::Value::as_str)
        .filter(|patch| patch.trim_start().starts_with(PATCH_START))
    {
        paths.extend(patch.lines().filter_map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            PATCH_FILE_LINES
                .iter()
                .find_map(|prefix| line.strip_prefix(prefix))
        }));
    }
    paths
}

/// Where a file-writing call with `input` writes in a session whose
/// workspace root is `workspace_root` (normalized, absolute): the least
/// favourable place of every path it names, read as given (a relative path
/// from the workspace root) and, when the host looked (`fact`), as it
/// really leads.
///
/// ```
/// use plan_core::{WriteTarget, write_target};
/// use serde_json::json;
///
/// let root = Some("/w");
/// assert_eq!(write_target(&json!({"file_path": "/w/src/a.rs"}), root, None), WriteTarget::Workspace);
/// assert_eq!(write_target(&json!({"path": "src/a.rs"}), root, None), WriteTarget::Workspace);
/// assert_eq!(write_target(&json!({"file_path": "/w/.claude/settings.json"}), root, None), WriteTarget::Protected);
/// assert_eq!(write_target(&json!({"file_path": "/w/../etc/passwd"}), root, None), WriteTarget::Outside);
/// assert_eq!(write_target(&json!({"content": "no path"}), root, None), WriteTarget::Outside);
/// ```
pub fn write_target(
    input: &serde_json::Value,
    workspace_root: Option<&str>,
    fact: Option<&WriteFact>,
) -> WriteTarget {
    let paths = write_paths(input);
    let Some(root) = workspace_root else {
        return WriteTarget::Outside;
    };
    if paths.is_empty() {
        return WriteTarget::Outside;
    }
    let as_given = paths
        .iter()
        .map(|path| place(path, root))
        .max()
        .unwrap_or(WriteTarget::Outside);
    let Some(fact) = fact else {
        return as_given;
    };
    // The host looked at every path the call names, or the call cannot be
    // placed.
    if fact.real_paths.len() != paths.len() {
        return WriteTarget::Outside;
    }
    let as_found = match &fact.real_root {
        None => WriteTarget::Outside,
        Some(real_root) => fact
            .real_paths
            .iter()
            .map(|real| {
                real.as_deref()
                    .map_or(WriteTarget::Outside, |real| place(real, real_root))
            })
            .max()
            .unwrap_or(WriteTarget::Outside),
    };
    as_given.max(as_found)
}

/// Where one path lies relative to `root` (an absolute, normalized path),
/// by its text alone: a relative path is read from the root.
fn place(path: &str, root: &str) -> WriteTarget {
    if path.contains('\0') {
        return WriteTarget::Outside;
    }
    let absolute = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{root}/{path}")
    };
    let Some(components) = normalized_components(&absolute) else {
        return WriteTarget::Outside;
    };
    let Some(root_components) = normalized_components(root) else {
        return WriteTarget::Outside;
    };
    let Some(inside) = components.strip_prefix(root_components.as_slice()) else {
        return WriteTarget::Outside;
    };
    if inside.is_empty() {
        // The workspace directory itself is no file of it.
        return WriteTarget::Outside;
    }
    if inside
        .iter()
        .any(|component| protected_root_names().any(|name| name == *component))
    {
        return WriteTarget::Protected;
    }
    WriteTarget::Workspace
}

/// The components of an absolute path with `.` dropped and each `..`
/// removing the one before it; `None` when a `..` climbs above `/`.
fn normalized_components(path: &str) -> Option<Vec<&str>> {
    let mut components = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                components.pop()?;
            }
            name => components.push(name),
        }
    }
    Some(components)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fact(real_root: Option<&str>, real_paths: &[Option<&str>]) -> WriteFact {
        WriteFact {
            call_id: CallId::from("c"),
            real_root: real_root.map(str::to_owned),
            real_paths: real_paths.iter().map(|path| path.map(str::to_owned)).collect(),
        }
    }

    #[test]
    fn paths_are_placed_by_their_text_and_the_least_favourable_wins() {
        let root = Some("/w/project");
        let place = |input: serde_json::Value| write_target(&input, root, None);
        assert_eq!(
            place(json!({"file_path": "/w/project/a.txt"})),
            WriteTarget::Workspace
        );
        assert_eq!(
            place(json!({"notebook_path": "/w/project/n.ipynb"})),
            WriteTarget::Workspace
        );
        assert_eq!(place(json!({"path": "./src/../a.txt"})), WriteTarget::Workspace);
        // A sibling whose name starts like the root is outside.
        assert_eq!(
            place(json!({"file_path": "/w/project-2/a.txt"})),
            WriteTarget::Outside
        );
        assert_eq!(place(json!({"file_path": "/w/project"})), WriteTarget::Outside);
        assert_eq!(place(json!({"path": "../../../../x"})), WriteTarget::Outside);
        assert_eq!(
            place(json!({"file_path": "/w/project/a\u{0}b"})),
            WriteTarget::Outside
        );
        assert_eq!(place(json!({"file_path": 7})), WriteTarget::Outside);
        // Every protected name, at the root or nested at any depth.
        for name in protected_root_names() {
            assert_eq!(
                place(json!({"file_path": format!("/w/project/{name}")})),
                WriteTarget::Protected
            );
            assert_eq!(
                place(json!({"file_path": format!("/w/project/sub/dir/{name}/x")})),
                WriteTarget::Protected
            );
        }
        assert_eq!(
            place(json!({"file_path": "/w/project/.claude/skills/s/SKILL.md"})),
            WriteTarget::Protected
        );
        assert_eq!(
            place(json!({"file_path": "/w/project/.claudex/a"})),
            WriteTarget::Workspace
        );
        // Two paths: the worse one.
        assert_eq!(
            place(json!({"file_path": "/w/project/a", "path": "/tmp/b"})),
            WriteTarget::Outside
        );
        // Without a workspace nothing is inside it.
        assert_eq!(
            write_target(&json!({"file_path": "/w/project/a"}), None, None),
            WriteTarget::Outside
        );
    }

    #[test]
    fn a_patch_is_placed_by_every_file_it_adds_deletes_updates_or_moves_to() {
        let root = Some("/w/project");
        let patch = |body: &str| json!({"command": format!("*** Begin Patch\n{body}*** End Patch\n")});
        let place = |input: serde_json::Value| write_target(&input, root, None);
        assert_eq!(place(patch("*** Add File: a.txt\n+a\n")), WriteTarget::Workspace);
        assert_eq!(
            place(patch(
                "*** Update File: src/a.rs\n@@\n-x\n+y\n*** Delete File: old.rs\n"
            )),
            WriteTarget::Workspace
        );
        // Every file counts, the least favourable wins.
        assert_eq!(
            place(patch(
                "*** Add File: a.txt\n+a\n*** Add File: .claude/settings.json\n+{}\n"
            )),
            WriteTarget::Protected
        );
        assert_eq!(
            place(patch(
                "*** Update File: a.txt\n*** Move to: ../elsewhere.txt\n@@\n-a\n+b\n"
            )),
            WriteTarget::Outside
        );
        assert_eq!(place(patch("*** Add File: /etc/x\n+x\n")), WriteTarget::Outside);
        // A line of the patch's content is no file of it.
        assert_eq!(
            write_paths(&patch("*** Add File: a.txt\n+*** Add File: /etc/x\n")),
            vec!["a.txt"]
        );
        // A patch naming no file, or no patch at all, cannot be placed.
        assert_eq!(place(patch("")), WriteTarget::Outside);
        assert_eq!(place(json!({"command": "echo hi > a.txt"})), WriteTarget::Outside);
        // CRLF line ends are no part of a name.
        assert_eq!(
            write_paths(
                &json!({"command": "*** Begin Patch\r\n*** Add File: a.txt\r\n+a\r\n*** End Patch\r\n"})
            ),
            vec!["a.txt"]
        );
    }

    #[test]
    fn where_the_host_found_a_path_leads_counts_too() {
        let root = Some("/w/project");
        let input = json!({"file_path": "/w/project/link/file"});
        // The link leads out of the workspace.
        let out = fact(Some("/real/project"), &[Some("/home/person/.bashrc")]);
        assert_eq!(write_target(&input, root, Some(&out)), WriteTarget::Outside);
        // Into a protected name.
        let protected = fact(
            Some("/real/project"),
            &[Some("/real/project/.git/hooks/pre-commit")],
        );
        assert_eq!(
            write_target(&input, root, Some(&protected)),
            WriteTarget::Protected
        );
        // Where it is written.
        let inside = fact(Some("/real/project"), &[Some("/real/project/link/file")]);
        assert_eq!(write_target(&input, root, Some(&inside)), WriteTarget::Workspace);
        // The host could not tell, or looked at fewer paths than given.
        assert_eq!(
            write_target(&input, root, Some(&fact(Some("/real/project"), &[None]))),
            WriteTarget::Outside
        );
        assert_eq!(
            write_target(&input, root, Some(&fact(None, &[Some("/real/project/a")]))),
            WriteTarget::Outside
        );
        assert_eq!(
            write_target(&input, root, Some(&fact(Some("/real/project"), &[]))),
            WriteTarget::Outside
        );
        // A path given outside stays outside whatever the disk says.
        let given_outside = json!({"file_path": "/etc/x"});
        assert_eq!(
            write_target(
                &given_outside,
                root,
                Some(&fact(Some("/real/project"), &[Some("/real/project/x")]))
            ),
            WriteTarget::Outside
        );
    }
}
