//! What stays the person's inside a writable workspace: the names no
//! approved command or file-writing tool may create, change or remove
//! (P7, P13 and P15 of the sandbox's threat model).
//!
//! They are of two kinds. The checkpoint's own and the repository's
//! ([`CHECKPOINT_DIRECTORY`], [`REPOSITORY_METADATA`]): the artifacts and
//! the audit, and what git runs when the person next uses it. And the
//! agents' configuration ([`AGENT_CONFIGURATION`]): what an agent reads at
//! its next start to decide which hooks, servers and commands run, the
//! checkpoint's own hooks among them, so that writing it would switch the
//! checkpoint off from inside.
//!
//! This module only names them, once; the host hands them to the sandbox
//! (which protects them by the kernel) and to the rule for file-writing
//! tools, so the two never disagree. It decides nothing about a path.

/// The directory of the checkpoint's artifacts (and, by default, its
/// database): `<workspace>/.pi`.
pub const CHECKPOINT_DIRECTORY: &str = ".pi";

/// A repository's metadata entry: a directory, or a `gitdir:` pointer file.
pub const REPOSITORY_METADATA: &str = ".git";

/// The agents' configuration in a project, one entry per agent the project
/// integrates with: Claude Code's `.claude` directory (settings, hooks,
/// skills, agents, commands) and `.mcp.json`, Codex's `.codex`, Gemini
/// CLI's `.gemini`.
pub const AGENT_CONFIGURATION: [&str; 4] = [".claude", ".mcp.json", ".codex", ".gemini"];

/// Every name that is protected at a workspace's root, and reserved there
/// when missing (creating it is refused as changing it is).
pub fn protected_root_names() -> impl Iterator<Item = &'static str> {
    [REPOSITORY_METADATA, CHECKPOINT_DIRECTORY]
        .into_iter()
        .chain(AGENT_CONFIGURATION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_names_are_the_checkpoint_the_repository_and_every_agent_configuration() {
        let names: Vec<_> = protected_root_names().collect();
        assert_eq!(
            names,
            [".git", ".pi", ".claude", ".mcp.json", ".codex", ".gemini"]
        );
    }
}
