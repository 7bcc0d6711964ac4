//! The person's notifier (`HostOptions::notifier`, `serve --notify`): it
//! hears each pending plan once, with the documented JSON and the card
//! URL; one that hangs delays neither a decision nor the deadline.
//!
//! The notifiers here write to FIFOs the test reads, so every wait is on an
//! event (a line arriving), never on a clock; a failure guard bounds each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use plan_host::{
    ApprovalStatus, ExpiryTimer, Host, HostOptions, Limits, ManualClock, Mode, NewSession, Origin,
    PermissionMode, PlanApproval, SUBMIT_PLAN, ToolCall, WebOptions, serde_json,
};
use plan_protocol::PendingPlanNotice;
use plan_server::web::WebCard;
use serde_json::json;

/// How long a guard waits for a line before the test fails.
const GUARD: Duration = Duration::from_secs(30);

fn fifo(path: &Path) -> PathBuf {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
    path.to_path_buf()
}

/// Lines written to `fifo`, each sent as it arrives (the reader reopens it
/// for every writer).
fn lines_of(fifo: PathBuf) -> Receiver<String> {
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        loop {
            let Ok(file) = std::fs::File::open(&fifo) else {
                return;
            };
            for line in BufReader::new(file).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        }
    });
    receiver
}

struct Setup {
    dir: tempfile::TempDir,
    host: Arc<Host>,
    web: Option<Arc<WebCard>>,
    clock: Arc<ManualClock>,
}

fn open(notifier: String, web: bool, dir: tempfile::TempDir) -> Setup {
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let options = HostOptions {
        limits: Limits::new(60_000, 64 * 1024).unwrap(),
        web: web.then(|| WebOptions::loopback("127.0.0.1:0".parse().unwrap()).unwrap()),
        notifier: Some(notifier),
        clock: Arc::clone(&clock) as Arc<dyn plan_host::Clock>,
        expiry: ExpiryTimer::Manual,
        ..HostOptions::default()
    };
    let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
    let web = WebCard::start_for(&host).unwrap();
    plan_server::notifier::start_for(&host, web.as_ref());
    Setup {
        dir,
        host,
        web,
        clock,
    }
}

fn submit(setup: &Setup, title: &str) -> PlanApproval {
    let workspace = setup.dir.path().join("my-project");
    std::fs::create_dir_all(&workspace).unwrap();
    let session = setup
        .host
        .create_session(NewSession {
            workspace_root: Some(workspace.display().to_string()),
            mode: Some(Mode::Plan),
            ..NewSession::default()
        })
        .unwrap();
    let turn = setup
        .host
        .start_turn(&session.session.id, Origin::Interactive)
        .unwrap();
    let call = ToolCall {
        call_id: "call-1".into(),
        name: SUBMIT_PLAN.to_owned(),
        input: json!({"title": title, "markdown": "# Plan\n\n1. Do it.\n", "question": "Proceed?"}),
    };
    let outcomes = setup
        .host
        .tool_calls(&session.session.id, &turn.turn_id, vec![call])
        .unwrap();
    outcomes[0].approval.clone().unwrap()
}

#[test]
fn each_pending_plan_is_told_once_with_the_documented_json_and_its_card_url() {
    let dir = tempfile::tempdir().unwrap();
    let notices = fifo(&dir.path().join("notices"));
    let runs = dir.path().join("runs.log");
    // One line per run in a log, and the message (one line of JSON) into
    // the FIFO the test reads.
    let notifier = format!(
        "echo run >> '{}'; (cat; echo) > '{}'",
        runs.display(),
        notices.display()
    );
    let received = lines_of(notices);
    let setup = open(notifier, true, dir);
    let first = submit(&setup, "Split the parser");
    let line = received.recv_timeout(GUARD).expect("the notifier ran");
    let notice: PendingPlanNotice = serde_json::from_str(&line).unwrap();
    let artifact = first.artifact.as_ref().unwrap();
    assert_eq!(notice.approval_id, first.id.to_string());
    assert_eq!(notice.session_id, first.session_id.to_string());
    assert_eq!(notice.project.as_deref(), Some("my-project"));
    assert_eq!(
        (notice.title.as_str(), notice.question.as_str()),
        ("Split the parser", "Proceed?")
    );
    assert_eq!(notice.expires_at, first.expires_at);
    assert_eq!(notice.artifact.sha256, artifact.sha256);
    assert_eq!(notice.artifact.size, artifact.size);
    assert_eq!(notice.artifact.fingerprint, artifact.fingerprint());
    assert_eq!(notice.artifact.file_name, artifact.file_name());
    let web = setup.web.as_ref().unwrap();
    assert_eq!(
        notice.card_url,
        web.card_url(&first),
        "the same card the client gets"
    );
    // The message is exactly the schema's shape (no other member).
    let value: serde_json::Value = serde_json::from_str(&line).unwrap();
    let mut members: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    members.sort_unstable();
    assert_eq!(
        members,
        [
            "approvalId",
            "artifact",
            "cardUrl",
            "expiresAt",
            "project",
            "question",
            "sessionId",
            "title"
        ]
    );

    // Decided, and a second plan: one more run, for the second plan only.
    setup.host.approve(&first.id, PermissionMode::Ask).unwrap();
    let second = submit(&setup, "Second plan");
    let line = received.recv_timeout(GUARD).expect("the notifier ran again");
    let notice: PendingPlanNotice = serde_json::from_str(&line).unwrap();
    assert_eq!(notice.approval_id, second.id.to_string());
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\nrun\n");
}

#[test]
fn without_the_web_card_the_notice_has_no_url() {
    let dir = tempfile::tempdir().unwrap();
    let notices = fifo(&dir.path().join("notices"));
    let received = lines_of(notices.clone());
    let setup = open(format!("(cat; echo) > '{}'", notices.display()), false, dir);
    let approval = submit(&setup, "No card");
    let notice: PendingPlanNotice =
        serde_json::from_str(&received.recv_timeout(GUARD).expect("the notifier ran")).unwrap();
    assert_eq!(notice.approval_id, approval.id.to_string());
    assert_eq!(notice.card_url, None);
}

#[test]
fn a_notifier_that_hangs_delays_neither_a_decision_nor_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let started = fifo(&dir.path().join("started"));
    let held = dir.path().join("held");
    // Makes a FIFO of its own, says it started (and its pid), then waits
    // for a writer on that FIFO, which only the end of this test provides.
    let notifier = format!(
        "mkfifo '{held}-'$$ && echo $$ > '{started}' && read line < '{held}-'$$",
        started = started.display(),
        held = held.display()
    );
    let received = lines_of(started);
    let setup = open(notifier, true, dir);
    let first = submit(&setup, "Decided while the notifier hangs");
    let mut hanging = vec![received.recv_timeout(GUARD).unwrap()];
    let (approved, _) = setup.host.approve(&first.id, PermissionMode::Ask).unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    // The deadline too: a second plan expires on time while both hang.
    let second = submit(&setup, "Expires while the notifier hangs");
    hanging.push(received.recv_timeout(GUARD).unwrap());
    setup.clock.advance(60_000);
    let expired = setup.host.expire_due().unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, second.id);
    assert_eq!(
        setup.host.approval(&second.id).unwrap().approval.status,
        ApprovalStatus::Expired
    );
    // Let both notifiers end: each reads a line from its own FIFO.
    for pid in hanging {
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("{}-{pid}", held.display()))
            .unwrap();
        writer.write_all(b"go\n").unwrap();
    }
}

#[test]
fn an_empty_notifier_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for notifier in ["", "  ", "echo a\0b"] {
        let options = HostOptions {
            notifier: Some(notifier.to_owned()),
            ..HostOptions::default()
        };
        let error = Host::open(dir.path().join("plan.db"), options).unwrap_err();
        assert_eq!(error.code(), plan_host::ErrorCode::InvalidParams, "{notifier:?}");
    }
}
