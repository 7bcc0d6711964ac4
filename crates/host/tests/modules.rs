//! The host's modules import each other in one direction only: a test over
//! the `use crate::...` lines of `src/`, so a cycle fails the build's tests
//! instead of waiting for a review to notice it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src/` with the modules its `use crate::` lines name
/// (a name re-exported by `lib.rs` counts as the module that defines it).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    // `pub use module::{A, B};` in lib.rs: which module a root name is from.
    let mut owner = BTreeMap::new();
    for line in lib.lines().filter(|line| line.starts_with("pub use ")) {
        let path = line.trim_start_matches("pub use ").trim_end_matches(';');
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            owner.insert(name.trim().to_owned(), module.to_owned());
        }
    }
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) else {
            continue;
        };
        if name == "lib" || path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let code = std::fs::read_to_string(&path).unwrap();
        let mut targets = BTreeSet::new();
        for statement in code.split(';') {
            // Attributes and comments before a `use` are not part of it.
            let statement = statement
                .lines()
                .map(str::trim)
                .skip_while(|line| line.is_empty() || line.starts_with("#[") || line.starts_with("//"))
                .collect::<Vec<_>>()
                .join(" ");
            let Some(rest) = statement
                .strip_prefix("use crate::")
                .or_else(|| statement.strip_prefix("pub(crate) use crate::"))
            else {
                continue;
            };
            let heads: Vec<&str> = match rest.strip_prefix('{') {
                // `use crate::{a::B, C}`: the first segment of each item.
                Some(items) => items
                    .trim_end_matches('}')
                    .split(',')
                    .filter_map(|item| item.split("::").next())
                    .collect(),
                None => rest.split("::").next().into_iter().collect(),
            };
            for head in heads.into_iter().map(str::trim).filter(|head| !head.is_empty()) {
                targets.insert(owner.get(head).cloned().unwrap_or(head.to_owned()));
            }
        }
        targets.remove(name);
        graph.insert(name.to_owned(), targets);
    }
    graph
}

#[test]
fn the_host_modules_import_each_other_without_a_cycle() {
    let graph = imports();
    assert!(
        graph.contains_key("host") && graph.contains_key("event"),
        "{graph:?}"
    );
    assert!(
        graph["commands"].contains("event"),
        "the scan sees imports: {graph:?}"
    );
    // Kahn's algorithm: repeatedly take a module whose imports are all taken.
    let mut taken = BTreeSet::new();
    while taken.len() < graph.len() {
        let ready: Vec<&String> = graph
            .iter()
            .filter(|(name, targets)| {
                !taken.contains(*name)
                    && targets
                        .iter()
                        .all(|target| taken.contains(target) || !graph.contains_key(target))
            })
            .map(|(name, _)| name)
            .collect();
        assert!(
            !ready.is_empty(),
            "an import cycle among {:?}",
            graph
                .iter()
                .filter(|(name, _)| !taken.contains(*name))
                .collect::<Vec<_>>()
        );
        taken.extend(ready.into_iter().cloned());
    }
}

/// The modules holding an `impl NAME {` block (inherent impls only).
fn inherent_impls_of(name: &str) -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let header = format!("impl {name} {{");
    std::fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .any(|line| line.trim_start() == header)
        })
        .map(|path| path.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect()
}

/// Method calls follow the imports: the public API (`impl Host`) is one
/// module's, and the shared state's methods (`impl HostCore`) live only in
/// the event loop and in the command start path, which imports the loop and
/// which the loop never calls; so a call between modules is always along an
/// import the cycle test above sees.
#[test]
fn impl_blocks_live_with_their_owner_so_calls_follow_the_imports() {
    assert_eq!(inherent_impls_of("Host"), BTreeSet::from(["host".to_owned()]));
    assert_eq!(
        inherent_impls_of("HostCore"),
        BTreeSet::from(["commands".to_owned(), "event".to_owned()])
    );
    let graph = imports();
    assert!(graph["commands"].contains("event"), "{graph:?}");
    assert!(!graph["event"].contains("commands"), "{graph:?}");
    // The event loop calls none of the start path's methods.
    let event = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/event.rs")).unwrap();
    for method in [
        "run_commands",
        "gather",
        "launch",
        "bound_workspace",
        "session_shell",
    ] {
        assert!(
            !event.contains(&format!(".{method}(")),
            "event.rs calls commands.rs's {method}"
        );
    }
}
