//! The objects of protocol v9 that only the wire has: the wire's view of a
//! session (`Session`, `ActiveTurn`), the verification report with its
//! `ok`, the params of every notification, and the method
//! results the FFI exports as they are (`PlanDecisionResult`,
//! `ShellListResult`).
//!
//! The enums and records plan-core reasons about (`PlanApproval`,
//! `CommandRun`, the modes and statuses, a tool call's result, ...) are not
//! declared here: they
//! are plan-core's own types, declared once in `plan_core::for_each_core_object!`
//! with their serde and JSON Schema derives, and this crate re-exports them.
//! The wire-only objects that foreign hosts see as they are, are declared
//! once in [`for_each_shared_object!`]: this module expands that list into
//! the serde and JSON Schema types, and plan-ffi expands the same list (and
//! plan-core's) into its UniFFI exports of these very types, so a field
//! added to either list reaches the wire, the schema and every binding at
//! once.
//!
//! Objects are what the host sends: every optional field is serialized as
//! `null` when absent, never omitted. Objects accept unknown fields when read
//! (only params are strict; plan-core's `ToolCall`, part of
//! `turn/toolCalls` params, denies unknown fields). These types only
//! describe shapes; the conversions from plan-core's session view live in
//! `convert`.

use plan_core::{
    ArtifactVerification, CallId, CommandRun, ExecutionState, Mode, Origin, OrphanArtifact, PermissionMode,
    PlanApproval, ShellInfo, SkippedWorkspace, TurnKind, declare_shared_object,
};

/// The one declaration of every wire-only object the FFI exports
/// unchanged, in the grammar of `plan_core::for_each_core_object!`: enums
/// (`enum Name { Variant => "wire text", .. }`) and records
/// (`struct Name { field: Type, .. }`, every field public;
/// `struct Name as FfiName { .. }` where the bindings know the record by
/// another name, as they know `PlanDecisionResult` as `Decision`). Each item
/// is handed to `$callback` on its own; the field types are named as this
/// module imports them (plan-core's shared types, `Option<..>`, the other
/// items), so a caller brings them into scope.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_shared_object {
    ($callback:ident) => {
        $callback! {
            /// The stream a `command/output` chunk came from.
            enum OutputStream {
                /// Standard output.
                Stdout => "stdout",
                /// Standard error.
                Stderr => "stderr",
            }
        }

        $callback! {
            /// The session's active turn.
            #[serde(rename_all = "camelCase")]
            struct ActiveTurn {
                /// Turn id.
                turn_id: String,
                /// The mode the turn runs in.
                mode: Mode,
                /// Who started it.
                origin: Origin,
                /// Prompt or execution.
                kind: TurnKind,
            }
        }

        $callback! {
            /// A session as the host reports it.
            #[serde(rename_all = "camelCase")]
            struct Session {
                /// Session id.
                session_id: String,
                /// Absolute workspace root; `null` when the session is not project-bound.
                workspace_root: Option<String>,
                /// Agent or Plan.
                mode: Mode,
                /// The permission mode of Agent turns.
                permission_mode: PermissionMode,
                /// Model provider, if chosen.
                provider: Option<String>,
                /// Model, if chosen.
                model: Option<String>,
                /// Selected shell id; `null` means the default shell.
                shell: Option<String>,
                /// The one active turn, if any.
                active_turn: Option<ActiveTurn>,
                /// The pending approval's id, if any.
                pending_approval_id: Option<String>,
                /// The queued or running execution's id, if any.
                active_execution_id: Option<String>,
            }
        }

        $callback! {
            /// `plan/verify` result.
            #[serde(rename_all = "camelCase")]
            struct VerifyReport {
                /// False when an artifact is missing, mismatched or unreadable, or an
                /// orphan was found.
                ok: bool,
                /// One entry per approval checked, newest first.
                artifacts: Vec<ArtifactVerification>,
                /// Files under `<root>/.pi/plan/` that no row of that workspace records.
                orphans: Vec<OrphanArtifact>,
                /// Workspaces whose orphans could not be looked for.
                skipped_workspaces: Vec<SkippedWorkspace>,
            }
        }

        $callback! {
            /// `plan/approve` and `plan/reject` result: the decided row and the session.
            #[serde(rename_all = "camelCase")]
            struct PlanDecisionResult as Decision {
                /// The approval after the decision.
                approval: PlanApproval,
                /// The session after the decision.
                session: Session,
            }
        }

        $callback! {
            /// `shell/list` result.
            #[serde(rename_all = "camelCase")]
            struct ShellListResult as ShellCatalog {
                /// The shell catalog.
                shells: Vec<ShellInfo>,
                /// The persisted default shell id.
                #[serde(rename = "default")]
                default_shell: String,
            }
        }

        $callback! {
            /// `plan/approvalRequested`: a SubmitPlan was accepted and awaits a decision.
            #[serde(rename_all = "camelCase")]
            struct PlanApprovalRequestedNotification {
                /// The new pending approval.
                approval: PlanApproval,
                /// The approval card's URL, with its token, for the host's own client to
                /// show or open; `null` when the web server is off.
                #[serde(default)]
                card_url: Option<String>,
            }
        }

        $callback! {
            /// `plan/approvalResolved`: an approval was approved, rejected, expired or
            /// interrupted.
            #[serde(rename_all = "camelCase")]
            struct PlanApprovalResolvedNotification {
                /// The approval after the change.
                approval: PlanApproval,
            }
        }

        $callback! {
            /// `execution/stateChanged`: an execution moved to a new state.
            #[serde(rename_all = "camelCase")]
            struct ExecutionStateChangedNotification {
                /// The owning session.
                session_id: String,
                /// The execution.
                execution_id: String,
                /// Its new state.
                state: ExecutionState,
            }
        }

        $callback! {
            /// `session/changed`: a session's configuration or activity changed.
            #[serde(rename_all = "camelCase")]
            struct SessionChangedNotification {
                /// The session after the change.
                session: Session,
            }
        }

        $callback! {
            /// `command/output`: one chunk of streamed shell output.
            #[serde(rename_all = "camelCase")]
            struct CommandOutputNotification {
                /// The session.
                session_id: String,
                /// The tool call that runs the command.
                call_id: CallId,
                /// stdout or stderr.
                stream: OutputStream,
                /// Sequence number of the chunk within the call, from 0, across both streams.
                seq: u64,
                /// The text of the chunk.
                chunk: String,
            }
        }

        $callback! {
            /// `command/exited`: a command ended; always the last message for its call.
            #[serde(rename_all = "camelCase")]
            struct CommandExitedNotification {
                /// The session.
                session_id: String,
                /// The Bash call.
                call_id: CallId,
                /// The run as it ended.
                command: CommandRun,
            }
        }
    };
}

for_each_shared_object!(declare_shared_object);
