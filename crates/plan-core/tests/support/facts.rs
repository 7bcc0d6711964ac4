//! Command facts as a host with everything in place gathers them: its
//! sandbox helper and scratch root, an installed shell, a workspace that is
//! the one its session bound, every Bash call's cwd inside it. With these,
//! plan-core's own rules alone decide (the tests of a missing fact build
//! their own).

use plan_core::{
    CallFacts, CommandFacts, CommandShell, CwdFact, Event, ToolCall, TurnId, WorkspaceFact, WorkspaceIdentity,
};

/// The workspace directory every session of these tests bound.
pub(crate) const WORKSPACE: WorkspaceIdentity = WorkspaceIdentity { device: 1, inode: 1 };

/// Facts under which the calls named start.
pub(crate) fn ready<'id>(call_ids: impl IntoIterator<Item = &'id str>) -> CommandFacts {
    CommandFacts {
        workspace: WorkspaceFact::Found {
            found: WORKSPACE,
            bound: Some(WORKSPACE),
            real_root: Some("/real/w".to_owned()),
        },
        shell: CommandShell {
            id: "bash".to_owned(),
            path: "/bin/bash".to_owned(),
        },
        shell_installed: true,
        runner_ready: true,
        scratch_outside_workspace: true,
        database_in_workspace_root: false,
        network_ready: true,
        calls: call_ids
            .into_iter()
            .map(|call_id| CallFacts {
                call_id: call_id.into(),
                cwd: CwdFact::Resolved("/real/w".to_owned()),
                scratch_ready: true,
            })
            .collect(),
        // File-writing calls are placed by their paths as given (a host
        // that looked at the disk adds where they lead).
        writes: Vec::new(),
    }
}

/// A batch whose every call has the facts it needs to start.
pub(crate) fn tool_calls(turn_id: TurnId, calls: Vec<ToolCall>) -> Event {
    let commands = ready(calls.iter().map(|call| call.call_id.as_str()));
    Event::ToolCalls {
        turn_id,
        calls,
        commands,
    }
}
