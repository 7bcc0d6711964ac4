//! `plan-checkpoint demo`: the ADR 0053 story, driven through the real
//! `plan_host::Host` on a real database and workspace, told step by step.
//!
//! It creates its directory (a new temporary one unless `--dir` is given)
//! and keeps it, so the result can be inspected with the other commands.
//! Every outcome it prints is what the host answered; the demo only chooses
//! the inputs (the tool calls a model would make, the person's decisions)
//! and decides nothing itself. Apart from creating its directory (with one
//! file for the agent to read) and looking whether the refused write left a
//! file, it touches the file system only through the host.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use plan_core::{
    ApprovalId, ApprovalStatus, ConfigChange, ErrorCode, Mode, Origin, PermissionMode, SessionId, ToolCall,
    TurnId,
};
use plan_host::{
    ApprovalFilter, CommandFilter, Host, HostConfig, HostError, NewSession, PlanSandbox, ToolCallDecision,
    ToolCallResult,
};
use plan_protocol::ServerNotification;
use plan_server::web::WebCard;

use crate::render;
use crate::table::Table;
use crate::terminal::Terminal;
use crate::{Failure, escape, exit};

/// The first plan the agent submits.
const FIRST_PLAN: &str = "# Split the parser\n\n\
1. Read `src/parser.rs` and list its responsibilities.\n\
2. Move tokenizing into `src/lexer.rs`; keep the public API.\n\
3. Run `cargo test` and fix what breaks.\n";

/// The revision that the person rejects.
const SECOND_PLAN: &str = "# Split the parser (revision)\n\n\
1. Read `src/parser.rs` and list its responsibilities.\n\
2. Move tokenizing into `src/lexer.rs` and rename the public API.\n\
3. Delete the old tests and write new ones.\n";

/// Output collected and written at each step, so a failure still leaves
/// the steps so far on the screen.
struct Story {
    step: u32,
}

impl Story {
    fn step(&mut self, title: &str) -> Result<(), Failure> {
        self.step += 1;
        say(&format!("\n{}. {title}\n", self.step))
    }
}

/// Writes one part of the story. Titles, ids and paths come back from the
/// host (and the directory from the command line), so the whole text is
/// escaped like any other agent text.
fn say(text: &str) -> Result<(), Failure> {
    render::write_stdout(escape::block(text).as_bytes())
}

/// The width the demo's sentences are wrapped to: a standard terminal's.
const WIDTH: usize = 80;

/// Writes a sentence or two wrapped at word boundaries to [`WIDTH`]
/// columns, every line starting with `indent`. A word longer than a line
/// (a path, an id) gets a line of its own and is never cut.
fn say_prose(indent: &str, text: &str) -> Result<(), Failure> {
    say(&wrap(indent, text))
}

fn wrap(indent: &str, text: &str) -> String {
    let room = WIDTH.saturating_sub(indent.chars().count());
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn host_failure(what: &str) -> impl FnOnce(HostError) -> Failure {
    move |error| {
        Failure::new(
            exit::FAILURE,
            format!(
                "demo: {what} failed: {}: {}",
                error.code().as_str(),
                error.message()
            ),
        )
    }
}

fn io_failure(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Failure {
    let message = format!("demo: cannot {what} {}", path.display());
    move |error| Failure::new(exit::FAILURE, format!("{message}: {error}"))
}

/// Makes (or checks) the demo directory and returns it absolute.
fn prepare_dir(dir: Option<&Path>) -> Result<PathBuf, Failure> {
    let dir = match dir {
        None => {
            let temp = tempfile::Builder::new()
                .prefix("plan-checkpoint-demo-")
                .tempdir()
                .map_err(io_failure(
                    "create a temporary directory in",
                    &std::env::temp_dir(),
                ))?;
            temp.keep()
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(io_failure("create", dir))?;
            let mut entries = std::fs::read_dir(dir).map_err(io_failure("read", dir))?;
            if entries.next().is_some() {
                return Err(Failure::new(
                    exit::USAGE,
                    format!(
                        "demo: {} is not empty; give a new or empty directory",
                        dir.display()
                    ),
                ));
            }
            dir.to_path_buf()
        }
    };
    // The host refuses a relative workspace root (`.` and `..` it normalizes
    // itself) and `--dir` may be relative; resolved, it is also the path the
    // commands printed at the end name.
    std::fs::canonicalize(&dir).map_err(io_failure("resolve", &dir))
}

fn call(call_id: &str, name: &str, input: serde_json::Value) -> ToolCall {
    ToolCall {
        call_id: call_id.into(),
        name: name.to_owned(),
        input,
    }
}

fn submit(title: &str, markdown: &str) -> ToolCall {
    call(
        "call-submit",
        "SubmitPlan",
        serde_json::json!({
            "title": title,
            "markdown": markdown,
            "question": "Shall I go ahead with this plan?",
        }),
    )
}

fn verdict(result: &ToolCallResult) -> String {
    match (result.decision, &result.error) {
        (ToolCallDecision::Allow, _) => "allowed".to_owned(),
        (ToolCallDecision::Confirm, _) => "awaiting a person's confirmation".to_owned(),
        (ToolCallDecision::Deny, Some(error)) => {
            format!("denied with {} ({})", error.code.as_str(), error.code.message())
        }
        (ToolCallDecision::Deny, None) => "denied".to_owned(),
    }
}

/// Prints the pending approval's card URL (`--web`) when a person is at
/// the terminal, and waits until the plan is decided on the card or Enter
/// is pressed, whichever comes first. Without a terminal on stdin the demo
/// cannot wait, so it would approve at once and the URL would already be
/// dead: it says so instead of printing it.
fn show_card(
    host: &Host,
    card_server: &WebCard,
    approval: &plan_core::PlanApproval,
) -> Result<Waited, Failure> {
    if !std::io::stdin().is_terminal() {
        say(
            "   approval card: no URL, since without a terminal on stdin the demo cannot wait for you,\n   \
             so it approves at once and the card would stop working before you opened it\n",
        )?;
        return Ok(Waited::GoOn);
    }
    let Some(url) = card_server.card_url(approval) else {
        return Ok(Waited::GoOn);
    };
    // Ctrl-C is handled before the person is asked anything, so that
    // from the first moment it can be pressed it records the plan.
    let (wake, woken) = channel::<Waited>();
    interrupt_wakes(wake.clone())?;
    say(&format!(
        "   approval card (open it in a browser while it is pending): {url}\n"
    ))?;
    say(
        "   decide on the card (the demo goes on by itself once you do),\n   \
         or press Enter to let the demo approve it with accept-edits\n",
    )?;
    let decided = wake.clone();
    let id = approval.id.clone();
    host.add_listener(Arc::new(move |event: plan_host::HostEvent| {
        if let plan_host::HostEvent::ApprovalResolved(resolved) = &event
            && resolved.id == id
        {
            let _ = decided.send(Waited::GoOn);
        }
    }));
    // The reader stays blocked on the terminal if the card decides first;
    // nothing else reads stdin, and it ends with the process.
    std::thread::spawn(move || {
        let mut line = String::new();
        // EOF or an unreadable terminal just goes on with the story.
        let _ = std::io::stdin().read_line(&mut line);
        let _ = wake.send(Waited::GoOn);
    });
    // Decided before the listener was added: nothing more will come.
    let still_pending = host
        .approval(&approval.id)
        .map_err(host_failure("reading the approval"))?
        .approval
        .status
        == ApprovalStatus::Pending;
    if still_pending {
        return Ok(woken.recv().unwrap_or(Waited::GoOn));
    }
    Ok(Waited::GoOn)
}

/// How the wait for a decision on the card ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    /// Decided on the card, or Enter: the story goes on.
    GoOn,
    /// Ctrl-C (or SIGTERM, SIGHUP): the person left with the plan pending.
    Interrupted,
}

/// From now on Ctrl-C, SIGTERM and SIGHUP are not the end of the process
/// but a [`Waited::Interrupted`] for whoever waits on `wake`, so that the
/// pending plan is recorded interrupted instead of staying pending in the
/// database forever. Once nobody waits any more (the story went on), such
/// a signal ends the process at once, as it did before (exit 130).
fn interrupt_wakes(wake: std::sync::mpsc::Sender<Waited>) -> Result<(), Failure> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|error| Failure::new(exit::FAILURE, format!("demo: cannot handle Ctrl-C: {error}")))?;
    std::thread::spawn(move || {
        for _ in signals.forever() {
            if wake.send(Waited::Interrupted).is_err() {
                std::process::exit(INTERRUPTED);
            }
        }
    });
    Ok(())
}

/// The exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
const INTERRUPTED: i32 = 130;

/// Runs the story. Returns the exit code.
pub(crate) fn run(dir: Option<&Path>, term: &Terminal, web: bool) -> Result<i32, Failure> {
    let dir = prepare_dir(dir)?;
    let workspace = dir.join("workspace");
    std::fs::create_dir(&workspace).map_err(io_failure("create", &workspace))?;
    let database = dir.join("plan-checkpoint.db");
    let root = workspace.to_string_lossy().into_owned();
    say_prose(
        "",
        "plan-checkpoint demo: an agent plans read-only and submits one plan; a person approves or \
         rejects that exact, hashed plan before a deadline; a host restart interrupts work instead of \
         replaying it. This demo drives the real host through that story.",
    )?;
    say(&format!(
        "directory: {}\n  workspace: {}\n  database:  {}\n",
        dir.display(),
        workspace.display(),
        database.display()
    ))?;
    let mut story = Story { step: 0 };

    story.step("Open the host")?;
    std::fs::write(
        workspace.join("README.md"),
        "# Parser\n\nThe parser lives in src/parser.rs.\n",
    )
    .map_err(io_failure("write", &workspace.join("README.md")))?;
    // This binary is also the command sandbox helper.
    let options = HostConfig {
        sandbox_helper: std::env::current_exe().ok(),
        // The demo exports no audit, whatever the environment says.
        otel_from_environment: Some(false),
        ..HostConfig::default()
    }
    .options()
    .map_err(host_failure("choosing the host's settings"))?;
    let host = Arc::new(Host::open(&database, options.clone()).map_err(host_failure("opening the host"))?);
    // With --web, the approval card's server of `serve --web`, on a free
    // loopback port.
    let card_server = if web {
        let loopback = plan_host::WebOptions::loopback(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .map_err(host_failure("choosing the card server's address"))?;
        Some(WebCard::start(&host, loopback).map_err(host_failure("starting the card server"))?)
    } else {
        None
    };
    let (events, notifications) = channel();
    host.add_listener(Arc::new(move |event: plan_host::HostEvent| {
        let _ = events.send(plan_server::notification(event));
    }));
    let migration = host.migration();
    say_prose(
        "   ",
        &format!(
            "created the database at schema v{} ({}). A starting host first marks whatever an earlier host \
         left pending, queued or running as interrupted, and replays nothing: here there was nothing to \
         recover.",
            migration.to,
            migration
                .from
                .map_or_else(|| "new file".to_owned(), |from| format!("from v{from}"))
        ),
    )?;

    story.step("Create a project-bound session in Plan mode")?;
    let state = host
        .create_session(NewSession {
            workspace_root: Some(root.clone()),
            mode: Some(Mode::Plan),
            ..NewSession::default()
        })
        .map_err(host_failure("creating the session"))?;
    let session_id = state.session.id.clone();
    say(&format!(
        "   session {session_id}: mode {}, permission {}\n",
        state.session.mode, state.session.permission_mode
    ))?;

    story.step("Start an interactive Plan turn; the agent asks for Write and Read")?;
    let turn = host
        .start_turn(&session_id, Origin::Interactive)
        .map_err(host_failure("starting the Plan turn"))?;
    say(&format!("   turn {} runs in {} mode\n", turn.turn_id, turn.mode))?;
    let outcomes = host
        .tool_calls(
            &session_id,
            &turn.turn_id,
            vec![
                call(
                    "call-write",
                    "Write",
                    serde_json::json!({"path": "src/parser.rs", "content": "// rewritten"}),
                ),
                call("call-read", "Read", serde_json::json!({"path": "src/parser.rs"})),
            ],
        )
        .map_err(host_failure("deciding the tool calls"))?;
    for (name, outcome) in ["Write", "Read"].iter().zip(&outcomes) {
        say(&format!("   {name:<6} {}\n", verdict(outcome)))?;
    }

    story.step("The agent runs Bash in the Plan turn: cat a file, then tries to write one")?;
    plan_bash(&host, &session_id, &turn.turn_id, &workspace, &notifications)?;

    story.step("The agent calls SubmitPlan; the host writes the artifact")?;
    let outcomes = host
        .tool_calls(
            &session_id,
            &turn.turn_id,
            vec![submit("Split the parser", FIRST_PLAN)],
        )
        .map_err(host_failure("submitting the plan"))?;
    let Some(first) = outcomes.into_iter().find_map(|outcome| outcome.approval) else {
        return Err(Failure::new(
            exit::FAILURE,
            "demo: SubmitPlan created no approval",
        ));
    };
    let Some(artifact) = first.artifact.clone() else {
        return Err(Failure::new(exit::FAILURE, "demo: the approval has no artifact"));
    };
    let content = host
        .read_artifact(&first.id)
        .map_err(host_failure("rereading the artifact"))?;
    say(&format!(
        "   approval {} is {}:\n     \"{}\"\n",
        first.id, first.status, first.title
    ))?;
    say(&format!(
        "   artifact, in the workspace:\n     {}\n     size:   {} bytes\n     sha256: {}\n     \
         reread and checked: {} bytes, sha256 matches\n   expires: {} ({})\n",
        artifact.path,
        artifact.size,
        artifact.sha256,
        content.size,
        render::local_rfc3339(first.expires_at),
        render::deadline(&first, first.created_at)
    ))?;

    if let Some(card_server) = &card_server
        && show_card(&host, card_server, &first)? == Waited::Interrupted
    {
        // Left with the plan pending: a restart records it interrupted
        // (the next host's first act), so it does not stay pending in the
        // database after the card is gone with this process.
        card_server.stop();
        host.close();
        drop(host);
        let host = Host::open(&database, options).map_err(host_failure("reopening the host"))?;
        let after = host
            .approval(&first.id)
            .map_err(host_failure("reading the approval"))?
            .approval;
        host.close();
        say("\n")?;
        say_prose(
            "",
            &format!(
                "Interrupted: the plan was not decided, so the demo restarted its host, which recorded \
                 approval {} as {} ({}); nothing was approved. Everything is kept in {}.",
                after.id,
                after.status,
                after.error_code.map_or("-", ErrorCode::as_str),
                dir.display()
            ),
        )?;
        return Ok(INTERRUPTED);
    }

    story.step("A person approves with accept-edits")?;
    let current = host
        .approval(&first.id)
        .map_err(host_failure("reading the approval"))?
        .approval;
    let (approved, state) = match current.status {
        ApprovalStatus::Pending => host
            .approve(&first.id, PermissionMode::AcceptEdits)
            .map_err(host_failure("approving"))?,
        // Decided on the card, in a browser.
        ApprovalStatus::Approved => {
            say("   (approved on the approval card instead)\n")?;
            let state = host
                .session(&session_id)
                .map_err(host_failure("reading the session"))?;
            (current, state)
        }
        ApprovalStatus::Rejected | ApprovalStatus::Expired | ApprovalStatus::Interrupted => {
            say(&format!(
                "   the plan was {} on the approval card, so the story ends here\n",
                current.status
            ))?;
            return Ok(exit::OK);
        }
    };
    let Some(execution_id) = approved.execution_id.clone() else {
        return Err(Failure::new(exit::FAILURE, "demo: the approval has no execution"));
    };
    say(&format!(
        "   approval {}:\n   status {}, permission mode {}\n",
        approved.id,
        approved.status,
        approved.permission_mode.map_or("-", PermissionMode::as_str),
    ))?;
    say(&format!(
        "   session is now in {} mode with {}\n   execution {execution_id} is {}\n",
        state.session.mode,
        state.session.permission_mode,
        approved.execution_state.map_or("-", |state| state.as_str()),
    ))?;

    story.step("The execution starts")?;
    let running = host
        .start_execution(&execution_id)
        .map_err(host_failure("starting the execution"))?;
    say(&format!(
        "   execution {execution_id} is {}\n",
        running.execution_state.map_or("-", |state| state.as_str())
    ))?;

    story.step("The host restarts (close it, open a new host on the same database)")?;
    if let Some(card_server) = &card_server {
        card_server.stop();
    }
    host.close();
    drop(host);
    let host = Host::open(&database, options.clone()).map_err(host_failure("reopening the host"))?;
    let after = host
        .approval(&first.id)
        .map_err(host_failure("reading the approval"))?
        .approval;
    let state = host
        .session(&session_id)
        .map_err(host_failure("reading the session"))?;
    let live = host
        .list_approvals(&ApprovalFilter::default())
        .map_err(host_failure("listing approvals"))?
        .into_iter()
        .filter(|stored| {
            stored.approval.has_live_execution() || stored.approval.status == ApprovalStatus::Pending
        })
        .count();
    say_prose(
        "   ",
        &format!(
            "the new host interrupted the execution: approval {} is {}, execution {}, error {}",
            after.id,
            after.status,
            after.execution_state.map_or("-", |state| state.as_str()),
            after.error_code.map_or("-", ErrorCode::as_str),
        ),
    )?;
    say_prose(
        "   ",
        &format!(
            "nothing replayed: {live} pending, queued or running rows; active turn: {}; session in {} mode",
            state
                .active_turn
                .as_ref()
                .map_or("none", |turn| turn.turn_id.as_str()),
            state.session.mode,
        ),
    )?;

    story.step("A second plan, rejected")?;
    host.configure_session(
        &session_id,
        ConfigChange {
            mode: Some(Mode::Plan),
            ..ConfigChange::default()
        },
    )
    .map_err(host_failure("switching back to Plan"))?;
    let turn = host
        .start_turn(&session_id, Origin::Interactive)
        .map_err(host_failure("starting the second Plan turn"))?;
    let outcomes = host
        .tool_calls(
            &session_id,
            &turn.turn_id,
            vec![submit("Split the parser (revision)", SECOND_PLAN)],
        )
        .map_err(host_failure("submitting the second plan"))?;
    let Some(second) = outcomes.into_iter().find_map(|outcome| outcome.approval) else {
        return Err(Failure::new(
            exit::FAILURE,
            "demo: the second SubmitPlan created no approval",
        ));
    };
    let (rejected, state) = host.reject(&second.id).map_err(host_failure("rejecting"))?;
    say_prose(
        "   ",
        &format!(
            "the agent submitted a new plan: approval {}, a new artifact {}",
            second.id,
            second
                .artifact
                .as_ref()
                .map_or("-", |artifact| artifact.path.as_str()),
        ),
    )?;
    say_prose(
        "   ",
        &format!(
            "a person rejects it: status {}, permission mode {}, execution {}; session idle in {} mode; a \
         revision needs a new turn and a new SubmitPlan",
            rejected.status,
            rejected.permission_mode.map_or("none", PermissionMode::as_str),
            rejected.execution_state.map_or("none", |state| state.as_str()),
            state.session.mode,
        ),
    )?;

    story.step("A scheduled task tries a Plan run")?;
    match host.start_turn(&session_id, Origin::Scheduled) {
        Err(error) => {
            say_prose(
                "   ",
                &format!("refused with {}: {}", error.code().as_str(), error.message()),
            )?;
            say("   nothing was created: no turn, no artifact, no approval\n")?;
        }
        Ok(turn) => {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "demo: the scheduled Plan run was accepted (turn {})",
                    turn.turn_id
                ),
            ));
        }
    }

    story.step("The approvals list (plan-checkpoint approvals list)")?;
    let rows = host
        .list_approvals(&ApprovalFilter::default())
        .map_err(host_failure("listing approvals"))?;
    let now = render::now_ms();
    let ids: Vec<String> = rows.iter().map(|stored| stored.approval.id.to_string()).collect();
    // On a terminal, ids as the shortest prefixes the commands accept
    // back, as `approvals list` shows them, so that the table keeps its
    // EXECUTION column (the story's point) at 80 columns.
    let shown = if term.is_terminal {
        shortest_prefixes(&ids)
    } else {
        ids.clone()
    };
    let mut table = Table::new(render::story_approval_columns(), *term);
    for (stored, id) in rows.iter().zip(shown) {
        table.push(render::approval_row(&stored.approval, id, now))?;
    }
    table.finish()?;

    story.step("The commands list (plan-checkpoint commands list)")?;
    let runs = host
        .list_commands(&CommandFilter::default())
        .map_err(host_failure("listing commands"))?;
    crate::commands::table(&runs, term)?;
    host.close();

    // The commands to try, short enough for a terminal: the database named
    // once (PLAN_CHECKPOINT_DB), ids as prefixes (every command accepts
    // any unique prefix), and this build named once where it is not
    // installed.
    let prefixes = shortest_prefixes(&ids);
    let prefix_of = |id: &ApprovalId| {
        ids.iter()
            .position(|known| known == id.as_str())
            .and_then(|index| prefixes.get(index).cloned())
            .unwrap_or_else(|| id.to_string())
    };
    let (first_id, second_id) = (prefix_of(&first.id), prefix_of(&second.id));
    let mut closing = format!("\nKept everything in {}.\n", dir.display());
    closing.push_str("Try (any unique prefix of an id works):\n");
    closing.push_str(&format!(
        "  export PLAN_CHECKPOINT_DB={}\n",
        render::shell_word(&database.display().to_string())
    ));
    if let Some(this_build) = cargo_built_binary() {
        // Someone who just ran `cargo run -p plan-checkpoint -- demo` has
        // this binary already; installing it would cost a second build.
        if let Some(directory) = this_build.parent() {
            closing.push_str(&format!(
                "  export PATH={}:\"$PATH\"  # this build, or install it (README)\n",
                render::shell_word(&directory.display().to_string())
            ));
        }
    }
    closing.push_str(&format!(
        "  plan-checkpoint approvals list\n  plan-checkpoint approvals show {first_id}\n  \
         plan-checkpoint approvals cat {first_id}\n  plan-checkpoint commands show call-bash-write\n  \
         plan-checkpoint approvals diff {first_id} {second_id}\n  plan-checkpoint approvals verify --all\n"
    ));
    say(&closing)?;
    Ok(exit::OK)
}

/// Each id's shortest prefix that no other of `ids` shares (at least
/// `approval-` and 8 more characters), which every command accepts back.
fn shortest_prefixes(ids: &[String]) -> Vec<String> {
    const SHORTEST: usize = "approval-".len() + 8;
    ids.iter()
        .map(|id| {
            let shared = ids
                .iter()
                .filter(|other| *other != id)
                .map(|other| id.bytes().zip(other.bytes()).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            let mut length = (shared + 1).max(SHORTEST).min(id.len());
            while !id.is_char_boundary(length) {
                length += 1;
            }
            id[..length].to_owned()
        })
        .collect()
}

/// This binary's absolute path when it runs from a cargo target directory
/// (`target/debug/plan-checkpoint`, `target/<triple>/release/...`), found
/// by the `.fingerprint` directory cargo keeps beside what it builds in
/// every profile directory. (Not by the `CACHEDIR.TAG` at the top: cargo
/// writes that only into a target directory it created itself, and a
/// script may have created it first.)
fn cargo_built_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let in_target = exe.parent()?.join(".fingerprint").is_dir();
    in_target.then_some(exe)
}

/// The Plan turn's Bash calls: a read that works and a write the kernel
/// refuses. Prints what the host streamed and how each run ended.
fn plan_bash(
    host: &Host,
    session_id: &SessionId,
    turn_id: &TurnId,
    workspace: &Path,
    notifications: &Receiver<ServerNotification>,
) -> Result<(), Failure> {
    let capabilities = host.command_capabilities();
    let sandboxed = match capabilities.plan_sandbox {
        PlanSandbox::Landlock => true,
        PlanSandbox::Unavailable => {
            // Name the prerequisite, so that a reader on an older kernel or
            // another system knows what is missing and that nothing is wrong
            // with the rest of the story.
            say_prose(
                "   ",
                &format!(
                    "Plan Bash needs Linux with Landlock ABI 3 or newer (kernel 6.2+) and seccomp; \
                     the kernel sandbox is unavailable here ({}), so the host refuses both calls with \
                     PLAN_SANDBOX_UNAVAILABLE and runs nothing (the rest of the demo does not need it)",
                    escape::line(capabilities.reason.as_deref().unwrap_or_default())
                ),
            )?;
            false
        }
    };
    let target = workspace.join("notes.txt");
    for (call_id, command) in [
        ("call-bash-read", "cat README.md".to_owned()),
        (
            "call-bash-write",
            "echo 'rewritten by the agent' > notes.txt".to_owned(),
        ),
    ] {
        let outcomes = host
            .tool_calls(
                session_id,
                turn_id,
                vec![call(call_id, "Bash", serde_json::json!({"command": command}))],
            )
            .map_err(host_failure("running Bash"))?;
        let Some(outcome) = outcomes.first() else {
            return Err(Failure::new(exit::FAILURE, "demo: no decision for the Bash call"));
        };
        say(&format!(
            "   $ {}
",
            escape::line(&command)
        ))?;
        let Some(run) = &outcome.command else {
            say(&format!(
                "     {}
",
                verdict(outcome)
            ))?;
            continue;
        };
        say(&format!(
            "     started by the host, sandbox {}, network {}
",
            run.sandbox,
            if run.network { "on" } else { "off" }
        ))?;
        let (output, ended) = wait_exited(notifications, call_id)?;
        for line in output.lines() {
            say(&format!(
                "     | {}
",
                escape::line(line)
            ))?;
        }
        let status = ended.exit_code.map_or_else(
            || format!("state {}", ended.state),
            |code| format!("state {}, exit {code}", ended.state),
        );
        say(&format!(
            "     {status}
"
        ))?;
    }
    say(&format!(
        "   notes.txt exists afterwards: {}
",
        match (target.exists(), sandboxed) {
            (true, _) => "yes (NOT refused!)",
            (false, true) => "no, the kernel refused the write",
            (false, false) => "no, nothing ran",
        }
    ))?;
    Ok(())
}

/// The output (both streams, in order) and the end of one command.
fn wait_exited(
    notifications: &Receiver<ServerNotification>,
    call_id: &str,
) -> Result<(String, plan_protocol::CommandRun), Failure> {
    let mut output = String::new();
    loop {
        match notifications.recv_timeout(Duration::from_secs(60)) {
            Ok(ServerNotification::CommandOutput(chunk)) if chunk.call_id == call_id => {
                output.push_str(&chunk.chunk)
            }
            Ok(ServerNotification::CommandExited(end)) if end.call_id == call_id => {
                return Ok((output, end.command));
            }
            Ok(_) => {}
            Err(_) => {
                return Err(Failure::new(
                    exit::FAILURE,
                    format!("demo: {call_id} did not end within a minute"),
                ));
            }
        }
    }
}
