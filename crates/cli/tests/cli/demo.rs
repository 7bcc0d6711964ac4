//! The demo runs on a fresh directory and tells every step of the ADR
//! story; what it leaves behind verifies. How long it takes is a benchmark's
//! question (`cargo bench -p plan-checkpoint --bench cli`), not a test's.

use crate::support::run;

fn assert_steps(stdout: &str) {
    let sandboxed = !stdout.contains("the kernel sandbox is unavailable here");
    if !sandboxed {
        eprintln!("the kernel sandbox is unavailable here; the demo must show PLAN_SANDBOX_UNAVAILABLE");
        assert!(
            stdout.contains("denied with PLAN_SANDBOX_UNAVAILABLE"),
            "{stdout}"
        );
    }
    let expected = [
        "1. Open the host",
        "created the database at schema v10",
        "2. Create a project-bound session in Plan mode",
        "mode plan, permission ask",
        "3. Start an interactive Plan turn; the agent asks for Write and Read",
        "Write  denied with TOOL_DENIED_IN_PLAN",
        "Read   allowed",
        "4. The agent runs Bash in the Plan turn: cat a file, then tries to write one",
        "$ cat README.md",
        if sandboxed {
            "The parser lives in src/parser.rs."
        } else {
            "denied"
        },
        if sandboxed {
            "state exited, exit 0"
        } else {
            "$ echo"
        },
        "$ echo 'rewritten by the agent' > notes.txt",
        if sandboxed {
            "state exited, exit 1"
        } else {
            "denied"
        },
        "notes.txt exists afterwards: no, the kernel refused the write",
        "5. The agent calls SubmitPlan; the host writes the artifact",
        "is pending:",
        "\"Split the parser\"",
        "artifact, in the workspace:",
        ".pi/plan/",
        "size:   ",
        "sha256: ",
        "reread and checked",
        "(expires in 30 minutes)",
        "6. A person approves with accept-edits",
        "status approved, permission mode accept-edits",
        "session is now in agent mode with accept-edits",
        "is queued",
        "7. The execution starts",
        "is running",
        "8. The host restarts (close it, open a new host on the same database)",
        "execution interrupted,",
        "error HOST_RESTARTED",
        "nothing replayed: 0 pending, queued or running rows; active turn: none;",
        "session in agent mode",
        "9. A second plan, rejected",
        "a person rejects it: status rejected, permission mode none, execution none",
        "session idle in plan mode",
        "10. A scheduled task tries a Plan run",
        "refused with PLAN_REQUIRES_INTERACTIVE_SESSION",
        "11. The approvals list",
        "ID ",
        "STATUS",
        "EXECUTION",
        "CREATED",
        "DEADLINE / DECIDED",
        "SESSION",
        "TITLE",
        "rejected",
        "interrupted",
        "12. The commands list (plan-checkpoint commands list)",
        "call-bash-write",
        "read-only",
        if sandboxed { "exit 1" } else { "refused" },
        "call-bash-read",
        "Kept everything in",
        "approvals list",
        "approvals cat",
    ];
    let mut from = 0;
    for phrase in expected {
        let Some(found) = stdout[from..].find(phrase) else {
            panic!("the demo output lacks {phrase:?} (in order) in:\n{stdout}");
        };
        from += found;
    }
}

#[test]
fn demo_in_a_given_directory_tells_each_step_and_leaves_a_verifiable_database() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let result = run(None, &["demo", "--dir", target.to_str().unwrap()]);
    assert_eq!(result.code, 0, "{}\n{}", result.stdout, result.stderr);
    assert_steps(&result.stdout);
    let db = target.join("plan-checkpoint.db");
    let verify = run(Some(&db), &["approvals", "verify", "--all"]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    assert!(
        verify.stdout.contains("2 approval(s) checked: 2 ok"),
        "{}",
        verify.stdout
    );
    let status = run(Some(&db), &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(value["counts"]["approved"], 1);
    assert_eq!(value["counts"]["rejected"], 1);
    assert_eq!(value["live"], serde_json::json!([]));
    assert!(
        !target.join("workspace/notes.txt").exists(),
        "the refused write left nothing"
    );
    let commands = run(Some(&db), &["commands", "list", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&commands.stdout).unwrap();
    let runs = value["commands"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{}", commands.stdout);
    assert!(runs.iter().all(|run| run["command"]["sandbox"] == "read-only"));
}

#[test]
fn demo_without_a_directory_makes_and_keeps_a_temporary_one() {
    let result = run(None, &["demo"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_steps(&result.stdout);
    let line = result
        .stdout
        .lines()
        .find(|line| line.starts_with("directory: "))
        .unwrap();
    let dir = std::path::PathBuf::from(line.trim_start_matches("directory: "));
    assert!(dir.join("plan-checkpoint.db").is_file(), "the directory is kept");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The `Try` block's lines: its `export` lines and its commands.
fn try_block(stdout: &str) -> (Vec<String>, Vec<String>) {
    let lines: Vec<String> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("Try"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .map(|line| line.trim().to_owned())
        .collect();
    let exports = lines
        .iter()
        .filter(|line| line.starts_with("export "))
        .cloned()
        .collect();
    let commands = lines
        .iter()
        .filter(|line| line.starts_with("plan-checkpoint "))
        .cloned()
        .collect();
    (exports, commands)
}

/// The `Try` lines, pasted into a shell one command at a time after the
/// block's `export` lines, with `path` as PATH. Returns how many ran.
fn run_try_lines(stdout: &str, path: &str) -> usize {
    let (exports, commands) = try_block(stdout);
    assert!(
        exports
            .iter()
            .any(|line| line.starts_with("export PLAN_CHECKPOINT_DB=")),
        "{stdout}"
    );
    for command in &commands {
        let script = format!("{}\n{command}\n", exports.join("\n"));
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env_remove("PLAN_CHECKPOINT_DB")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.stdout.is_empty(), "{script}");
    }
    commands.len()
}

/// The binary under test copied out of the cargo target directory, as an
/// installed binary is: its demo names no build to use.
fn installed_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("plan-checkpoint");
    crate::support::copy_executable(std::path::Path::new(crate::support::BIN), &copy);
    copy
}

fn run_demo(binary: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = std::process::Command::new(binary);
    command
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("PLAN_CHECKPOINT_DB");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_try_lines_work_as_printed_even_for_an_unusual_directory() {
    let dir = tempfile::tempdir().unwrap();
    let binary = installed_copy(dir.path());
    // A space needs quoting; an ESC must be escaped in the output, never raw.
    let target = dir.path().join("my plans \u{1b}[2K");
    let (code, stdout, stderr) = run_demo(&binary, &["demo", "--dir", target.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    assert!(stdout.contains("my plans \\x1b[2K"), "{stdout}");
    // The raw name cannot be pasted from an escaped line; a plain one with
    // a space can.
    let plain = dir.path().join("my plans");
    let (code, stdout, stderr) = run_demo(&binary, &["demo", "--dir", plain.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "export PLAN_CHECKPOINT_DB='{}/plan-checkpoint.db'",
            plain.display()
        )),
        "{stdout}"
    );
    assert!(
        !stdout.contains("export PATH="),
        "an installed binary names no build: {stdout}"
    );
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    assert_eq!(run_try_lines(&stdout, &path), 6);
}

/// Run from a cargo target directory (as `cargo run -p plan-checkpoint --
/// demo` does), the demo's `Try` block also puts this build on PATH; each
/// command runs as printed with nothing on PATH but the system.
#[test]
fn the_try_lines_of_a_cargo_build_run_without_installing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let result = run(None, &["demo", "--dir", target.to_str().unwrap()]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let bin_dir = std::fs::canonicalize(crate::support::BIN)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let (exports, _) = try_block(&result.stdout);
    assert!(
        exports
            .iter()
            .any(|line| line.starts_with(&format!("export PATH={}:\"$PATH\"", bin_dir.display()))),
        "{}",
        result.stdout
    );
    assert_eq!(run_try_lines(&result.stdout, "/usr/bin:/bin"), 6);
}

/// Removes the demo's kept directory when dropped.
struct Removed(std::path::PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// At 80 columns (a standard terminal) no line of the demo is wider, and
/// its approvals table keeps the EXECUTION column, the story's point: ids
/// are shown as the prefixes the commands accept back, as `approvals list`
/// shows them on a terminal. Run as an installed binary in a new temporary
/// directory, as a newcomer runs it.
#[test]
fn at_80_columns_no_line_is_wider_and_the_execution_column_stays() {
    let dir = tempfile::tempdir().unwrap();
    let binary = installed_copy(dir.path());
    // A newcomer's temporary directory: /tmp (a path is never cut, so a
    // long TMPDIR makes the line naming the database longer).
    let (code, stdout, stderr) = run_demo(
        &binary,
        &["demo"],
        &[
            ("COLUMNS", "80"),
            ("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1"),
            ("TMPDIR", "/tmp"),
        ],
    );
    let kept = stdout
        .lines()
        .find_map(|line| line.strip_prefix("directory: "))
        .map(std::path::PathBuf::from);
    let _cleanup = kept.map(Removed);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    for step in [
        "5. The agent calls SubmitPlan",
        "8. The host restarts",
        "12. The commands list",
    ] {
        assert!(stdout.contains(step), "{step}: {stdout}");
    }
    for line in stdout.lines() {
        let width = unicode_width::UnicodeWidthStr::width(line);
        assert!(width <= 80, "{width} columns: {line:?}\n{stdout}");
    }
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.contains("The approvals list"))
        .skip(1)
        .take(3)
        .collect();
    assert!(table[0].contains("EXECUTION"), "{stdout}");
    assert!(
        table[1].contains("rejected") && table[1].contains(" - "),
        "{stdout}"
    );
    assert!(
        table[2].contains("approved") && table[2].contains("interrupted"),
        "{stdout}"
    );
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    assert_eq!(run_try_lines(&stdout, &path), 6);
}

/// The demo's sentences fit a standard terminal, wrapped at word
/// boundaries, and use no term a newcomer has not met. Only lines holding
/// an id, a path or a command (the tables, the `Try:` lines) may be longer:
/// they are never cut.
#[test]
fn demo_sentences_fit_80_columns_and_use_no_jargon() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let result = run(None, &["demo", "--dir", target.to_str().unwrap()]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    for jargon in ["ADR 0053", "startup fence"] {
        assert!(!result.stdout.contains(jargon), "{jargon}: {}", result.stdout);
    }
    let record = |line: &str| {
        ["approval-", "session-", "call-", "/"]
            .iter()
            .any(|token| line.contains(token))
    };
    // A table's header goes with its rows: its width follows theirs (a
    // relative time, an error code), so it is never cut either.
    let lines: Vec<&str> = result.stdout.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let heads_a_table = lines.get(index + 1).is_some_and(|next| record(next));
        assert!(
            line.chars().count() <= 80 || record(line) || heads_a_table,
            "a sentence longer than 80 columns: {line:?}"
        );
    }
    let intro: Vec<&str> = result
        .stdout
        .lines()
        .take_while(|line| !line.starts_with("directory:"))
        .collect();
    insta::assert_snapshot!("demo_intro", intro.join("\n"));
}

#[test]
fn demo_with_web_into_a_pipe_prints_no_card_url_that_would_already_be_dead() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let result = run(None, &["demo", "--web", "--dir", target.to_str().unwrap()]);
    assert_eq!(result.code, 0, "{}\n{}", result.stdout, result.stderr);
    assert_steps(&result.stdout);
    // Without a terminal on stdin the demo does not wait, so it approves at
    // once and a URL would be dead before anyone opened it.
    assert!(!result.stdout.contains("/card/"), "{}", result.stdout);
    let said = result
        .stdout
        .lines()
        .find(|line| line.contains("approval card:"))
        .unwrap_or_else(|| {
            panic!(
                "the demo does not say why there is no card URL: {}",
                result.stdout
            )
        });
    insta::assert_snapshot!("demo_web_piped_card_line", said);
}

/// One HTTP/1.1 request to the card server, as a browser on its page sends
/// it (`Host` and `Origin` its own); returns the status line and body.
fn card_request(base: &str, method: &str, path: &str, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nOrigin: {base}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// On a terminal the card's URL is printed while the plan is pending, and
/// deciding on the card moves the demo on by itself: nobody presses Enter
/// (util-linux `script` gives the demo a terminal; its stdin stays open
/// and silent).
#[test]
fn demo_with_web_on_a_terminal_goes_on_when_the_plan_is_decided_on_the_card() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if Command::new("script").arg("--version").output().is_err() {
        panic!("util-linux `script` is needed to give the demo a terminal");
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let command = format!(
        "{} --color never demo --web --dir {}",
        crate::support::BIN,
        target.display()
    );
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _silent_stdin = child.stdin.take();
    // A guard, not a wait: a demo that never goes on is killed, failing the
    // test, instead of hanging it.
    // Woken the moment the demo finishes; only a demo that never goes on
    // reaches the bound and is killed.
    let (finished, done) = std::sync::mpsc::channel::<()>();
    let guard = {
        let pid = child.id().to_string();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                done.recv_timeout(std::time::Duration::from_secs(120))
            {
                let _ = Command::new("kill").args(["-9", &pid]).status();
            }
        })
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut transcript = String::new();
    let mut sha256 = None;
    let url = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the demo ended early: {transcript}"))
            .unwrap();
        let line = line.trim_end_matches('\r').to_owned();
        transcript.push_str(&line);
        transcript.push('\n');
        if let Some(hash) = line.trim().strip_prefix("sha256: ") {
            sha256.get_or_insert_with(|| hash.to_owned());
        }
        if let Some((_, url)) = line.split_once("approval card (open it in a browser while it is pending): ")
        {
            break url.trim().to_owned();
        }
    };
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/card/"),
        "{url}"
    );
    // It comes after the plan is submitted and before it is approved.
    assert!(
        transcript.contains("The agent calls SubmitPlan") && !transcript.contains("A person approves"),
        "{transcript}"
    );
    let (base, token) = url.split_once("/card/").unwrap();
    let decision = serde_json::json!({"token": token, "sha256": sha256.unwrap(), "decision": "approve", "permissionMode": "accept-edits"});
    let (status, body) = card_request(base, "POST", "/decision", &decision.to_string());
    assert!(status.contains(" 200 "), "{status}: {body}");
    for line in lines {
        let line = line.unwrap();
        transcript.push_str(line.trim_end_matches('\r'));
        transcript.push('\n');
    }
    let status = child.wait().unwrap();
    let _ = finished.send(());
    drop(guard);
    assert!(status.success(), "{transcript}");
    assert!(
        transcript.contains("the demo goes on by itself once you do"),
        "{transcript}"
    );
    assert!(
        transcript.contains("(approved on the approval card instead)"),
        "{transcript}"
    );
    assert_steps(&transcript);
}

/// Ctrl-C while `demo --web` waits for a decision on the card does not
/// leave the plan pending in the database forever (the card dies with the
/// process): the demo restarts its host, which records the approval
/// interrupted, says so, and exits 130. Ctrl-C is typed into the demo's
/// terminal (util-linux `script` gives it one), as a person would.
#[test]
fn ctrl_c_during_demo_web_leaves_no_approval_pending() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    if Command::new("script").arg("--version").output().is_err() {
        panic!("util-linux `script` is needed to give the demo a terminal");
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("demo");
    let command = format!(
        "{} --color never demo --web --dir {}",
        crate::support::BIN,
        target.display()
    );
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut terminal = child.stdin.take().unwrap();
    let (finished, done) = std::sync::mpsc::channel::<()>();
    let guard = {
        let pid = child.id().to_string();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                done.recv_timeout(std::time::Duration::from_secs(120))
            {
                let _ = Command::new("kill").args(["-9", &pid]).status();
            }
        })
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut transcript = String::new();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the demo ended early: {transcript}"))
            .unwrap();
        transcript.push_str(line.trim_end_matches('\r'));
        transcript.push('\n');
        if line.contains("or press Enter to let the demo approve it") {
            break;
        }
    }
    // Ctrl-C, through the terminal's line discipline: SIGINT to the demo.
    terminal.write_all(b"\x03").unwrap();
    terminal.flush().unwrap();
    for line in lines {
        let line = line.unwrap();
        transcript.push_str(line.trim_end_matches('\r'));
        transcript.push('\n');
    }
    let status = child.wait().unwrap();
    let _ = finished.send(());
    drop(guard);
    assert_eq!(status.code(), Some(130), "{transcript}");
    assert!(
        transcript.contains("Interrupted: the plan was not decided"),
        "{transcript}"
    );
    assert!(!transcript.contains("A person approves"), "{transcript}");
    let listed = run(
        Some(&target.join("plan-checkpoint.db")),
        &["approvals", "list", "--json"],
    );
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let value: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let approvals = value["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{}", listed.stdout);
    assert_eq!(approvals[0]["status"], "interrupted", "{}", listed.stdout);
    assert_eq!(approvals[0]["errorCode"], "HOST_RESTARTED", "{}", listed.stdout);
}
