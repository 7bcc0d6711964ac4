//! The PID namespace, where the kernel gives namespaces: a Plan and an
//! `auto` command see no process outside their own tree (a canary the test
//! started, the test itself, another command running at the same time), not
//! by `/proc`, not by a signal's answer; `/proc` lists only the command's
//! processes and its init. Ending is unchanged inside it: cancellation sends
//! SIGTERM first (a trap runs), SIGKILL after the grace, exit codes and
//! terminating signals are reported as the shell's, and a background job
//! left behind is dead once the command has ended. Every visibility probe is
//! shown to see the canary when run unconfined, so the checks can fail.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use plan_exec::{CommandSpec, CommandState, Confinement, Stream};

use crate::support::*;

/// Plan and `auto` (a workspace below the test's directory).
fn confinements(root: &Path) -> Vec<Confinement> {
    let workspace = root.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    vec![
        Confinement::ReadOnly,
        Confinement::WorkspaceWrite {
            workspace_root: workspace,
            network: false,
        },
    ]
}

fn in_namespaces(command: &str, dirs: &Dirs, confinement: Confinement) -> CommandSpec {
    let mut spec = spec(command, &dirs.scratch, &dirs.scratch, confinement);
    spec.isolation.namespaces = true;
    spec
}

/// Prints, for every pid in `pids`, `visible <pid>` if `/proc` has it and
/// `exists <pid>` if a signal to it gets any answer but "no such process";
/// then the pids `/proc` lists, on one line.
fn probe(pids: &[u32]) -> String {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "for pid in {}; do \
           test -e /proc/$pid && echo visible $pid; \
           kill -0 $pid 2>&1 | grep -q 'No such process' || echo exists $pid; \
         done; \
         echo listed $(ls /proc | grep '^[0-9]*$' | sort -n)",
        pids.join(" ")
    )
}

#[test]
fn no_process_outside_the_command_is_visible_to_plan_or_auto() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "no_process_outside_the_command_is_visible_to_plan_or_auto",
    ) {
        return;
    }
    let dirs = dirs();
    let mut canary = Command::new("sleep").arg("600").spawn().unwrap();
    let outside = [canary.id(), std::process::id()];
    let command = format!("{}; echo shell $$", probe(&outside));
    for confinement in confinements(dirs.root.path()) {
        let (outcome, events) = run(in_namespaces(&command, &dirs, confinement.clone()));
        assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
        let stdout = events.text(Stream::Stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{confinement:?}: {stdout}");
        // The command's init, the shell and the pipeline's processes, all
        // numbered from 1 in a namespace of the command's own.
        let listed: Vec<u32> = lines[0]
            .strip_prefix("listed ")
            .unwrap()
            .split_whitespace()
            .map(|pid| pid.parse().unwrap())
            .collect();
        let shell: u32 = lines[1].strip_prefix("shell ").unwrap().parse().unwrap();
        assert_eq!(listed.first(), Some(&1), "{confinement:?}: {stdout}");
        assert!(listed.contains(&shell), "{confinement:?}: {stdout}");
        assert!(listed.len() < 10, "{confinement:?}: {stdout}");
        assert!(listed.iter().all(|pid| !outside.contains(pid)), "{stdout}");
    }
    // The same probe, unconfined, sees both.
    let (_, events) = run(spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None));
    let stdout = events.text(Stream::Stdout);
    for pid in outside {
        assert!(stdout.contains(&format!("visible {pid}\n")), "{stdout}");
        assert!(stdout.contains(&format!("exists {pid}\n")), "{stdout}");
    }
    let _ = canary.kill();
    let _ = canary.wait();
}

#[test]
fn two_commands_at_the_same_time_do_not_see_each_other() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "two_commands_at_the_same_time_do_not_see_each_other",
    ) {
        return;
    }
    let [first, second] = [dirs(), dirs()];
    let [first_modes, second_modes] = [confinements(first.root.path()), confinements(second.root.path())];
    for (first_mode, second_mode) in first_modes.into_iter().zip(second_modes.into_iter().rev()) {
        // Each starts a marked background job, says so, and waits for the
        // test to name the other's processes.
        let command = |name: &str| {
            format!(
                "(exec -a canary-{name} sleep 600) & echo bg $!; \
                 read -r _ < \"$TMPDIR/../go\"; \
                 {}; cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo",
                probe_of_file()
            )
        };
        for dirs in [&first, &second] {
            let _ = std::fs::remove_file(dirs.root.path().join("others"));
            let go = dirs.root.path().join("go");
            if !go.exists() {
                assert!(Command::new("mkfifo").arg(&go).status().unwrap().success());
            }
        }
        let mut others = Vec::new();
        let (a, a_events) = start(in_namespaces(&command("a"), &first, first_mode));
        let (b, b_events) = start(in_namespaces(&command("b"), &second, second_mode));
        for (dirs, other, other_events) in [(&first, &second, &b_events), (&second, &first, &a_events)] {
            stdout_line(other_events, "bg ");
            let pids: Vec<i32> = processes_of(&other.scratch)
                .into_iter()
                .map(|(pid, _)| pid)
                .collect();
            assert!(pids.len() >= 3, "the other command's processes: {pids:?}");
            let text: Vec<String> = pids.iter().map(i32::to_string).collect();
            std::fs::write(dirs.root.path().join("others"), text.join(" ")).unwrap();
            others.push(pids);
        }
        for dirs in [&first, &second] {
            std::fs::write(dirs.root.path().join("go"), "\n").unwrap();
        }
        let runs = [(a, a_events, "a", "b"), (b, b_events, "b", "a")];
        for ((running, events, own, other), pids) in runs.into_iter().zip(others) {
            let outcome = running.wait();
            assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
            let stdout = events.text(Stream::Stdout);
            for pid in pids {
                assert!(!stdout.contains(&format!("visible {pid}\n")), "{pid}: {stdout}");
                assert!(!stdout.contains(&format!("exists {pid}\n")), "{pid}: {stdout}");
            }
            assert!(stdout.contains(&format!("canary-{own} ")), "{stdout}");
            assert!(!stdout.contains(&format!("canary-{other}")), "{stdout}");
        }
    }
}

/// `probe` over the pids the test wrote to `$TMPDIR/../others` (beside the
/// scratch directory, which inside the namespaces is the command's own).
fn probe_of_file() -> String {
    "for pid in $(cat \"$TMPDIR/../others\"); do \
       test -e /proc/$pid && echo visible $pid; \
       kill -0 $pid 2>&1 | grep -q 'No such process' || echo exists $pid; \
     done"
        .to_owned()
}

#[test]
fn cancellation_sends_sigterm_first_and_a_trap_runs() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "cancellation_sends_sigterm_first_and_a_trap_runs",
    ) {
        return;
    }
    let dirs = dirs();
    for confinement in confinements(dirs.root.path()) {
        // A grace far longer than any test: the command ends by itself,
        // with its own code, only if the SIGTERM reached its trap.
        let mut spec = in_namespaces(
            "trap 'echo got-term; exit 3' TERM; echo sh $$; sleep 600 & wait",
            &dirs,
            confinement.clone(),
        );
        spec.grace = Duration::from_secs(600);
        let (running, events) = start(spec);
        stdout_line(&events, "sh ");
        running.cancel_handle().cancel();
        let outcome = running.wait();
        assert_eq!(
            (outcome.state, outcome.exit_code, outcome.signal),
            (CommandState::Cancelled, Some(3), None),
            "{confinement:?}"
        );
        assert!(
            events.text(Stream::Stdout).ends_with("got-term\n"),
            "{}",
            events.text(Stream::Stdout)
        );
    }
}

#[test]
fn a_command_ignoring_sigterm_is_killed_after_the_grace() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "a_command_ignoring_sigterm_is_killed_after_the_grace",
    ) {
        return;
    }
    let dirs = dirs();
    for confinement in confinements(dirs.root.path()) {
        let mut spec = in_namespaces(
            "trap '' TERM; echo sh $$; while :; do sleep 0.05; done",
            &dirs,
            confinement.clone(),
        );
        spec.grace = Duration::from_millis(200);
        let (running, events) = start(spec);
        let shell: i32 = stdout_line(&events, "sh ").parse().unwrap();
        running.cancel_handle().cancel();
        let outcome = running.wait();
        assert_eq!(
            (outcome.state, outcome.exit_code, outcome.signal),
            (CommandState::Cancelled, None, Some(9)),
            "{confinement:?}"
        );
        assert!(!alive_in(&dirs.scratch, shell));
    }
}

#[test]
fn exit_codes_and_signals_of_the_shell_are_reported() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "exit_codes_and_signals_of_the_shell_are_reported",
    ) {
        return;
    }
    let dirs = dirs();
    for confinement in confinements(dirs.root.path()) {
        for (command, expected) in [
            ("exit 7", (Some(7), None)),
            ("exit 0", (Some(0), None)),
            ("kill -USR1 $$", (None, Some(10))),
            ("kill -SEGV $$", (None, Some(11))),
            ("kill -PIPE $$", (None, Some(13))),
            ("kill -TERM $$", (None, Some(15))),
        ] {
            let (outcome, _) = run(in_namespaces(command, &dirs, confinement.clone()));
            assert_eq!(
                (outcome.state, (outcome.exit_code, outcome.signal)),
                (CommandState::Exited, expected),
                "{command} under {confinement:?}"
            );
        }
    }
}

#[test]
fn a_background_job_left_behind_is_dead_once_the_command_has_ended() {
    if !namespaces_here(
        "the PID namespace is not tested",
        "a_background_job_left_behind_is_dead_once_the_command_has_ended",
    ) {
        return;
    }
    let dirs = dirs();
    let go = dirs.root.path().join("go");
    assert!(Command::new("mkfifo").arg(&go).status().unwrap().success());
    for confinement in confinements(dirs.root.path()) {
        let (running, events) = start(in_namespaces(
            "sleep 1000 >/dev/null 2>&1 & echo bg $!; read -r _ < \"$TMPDIR/../go\"; exit 0",
            &dirs,
            confinement.clone(),
        ));
        let own: i32 = stdout_line(&events, "bg ").parse().unwrap();
        // The job is forked once `bg` is printed, so it is found now.
        let job = outer_pid(&dirs.scratch, own).expect("the background job");
        let job_pidfd = pidfd(job).expect("the background job's pidfd");
        // Every process of the command, known from here on: the shell has
        // started its only job and goes on with builtins only (`read`,
        // `exit`), and the helper's stages all exist before the shell does.
        // (One that has already ended needs no wait.)
        let everything: Vec<(i32, OwnedFd)> = processes_of(&dirs.scratch)
            .into_iter()
            .filter_map(|(pid, _)| Some((pid, pidfd(pid)?)))
            .collect();
        std::fs::write(&go, "\n").unwrap();
        let outcome = running.wait();
        assert_eq!(outcome.exit_code, Some(0), "{confinement:?}");
        // A pidfd is readable once its process has ended: the job has, with
        // no wait at all.
        assert!(
            ends_within(&job_pidfd, Duration::ZERO),
            "the background job outlived the command under {confinement:?}"
        );
        // Nothing of the command is left: each process it had ends (the
        // supervisor may still be on its way out after its report), and
        // then none is listed, so none was started after the list above.
        for (pid, pidfd) in &everything {
            assert!(
                ends_within(pidfd, Duration::from_secs(10)),
                "pid {pid} of the command is left under {confinement:?}"
            );
        }
        let left = processes_of(&dirs.scratch);
        assert!(left.is_empty(), "{left:?} under {confinement:?}");
    }
}
