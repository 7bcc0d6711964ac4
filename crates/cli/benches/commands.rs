//! First-output latency of host-run commands: from sending the Plan turn's
//! `Bash` call to `plan-checkpoint serve` until the first `command/output`
//! of that call reaches the client, for a command that prints one line and
//! sleeps (`echo ready; sleep 0.02`). Target: median under 30 ms.
//!
//! The baseline measured in the same run is the same read-only sandboxed
//! command spawned in-process through `plan_exec::Runner` (the binary acting
//! as its own helper), from `spawn` to its first output event: what remains
//! between the two is the protocol, plan-core's decision, the durable
//! `commandStarted` audit commit (an fsync) and the pipe to the client.
//!
//! With `COMMANDS_BENCH_BASELINE_BIN` naming another build of
//! `plan-checkpoint` (an earlier commit, built with `--release`), it also
//! times `commands/answered`: a Plan-mode Bash `true` from sending
//! `turn/toolCalls` to its answer, through this build and through that one,
//! interleaved in the same run, and prints the ratio.
//!
//! Prints medians and the ratio; `COMMANDS_BENCH_ROUNDS` sets the rounds
//! (default 60). `COMMANDS_BENCH_DIR` puts the database there (for example
//! `/dev/shm`, which takes fsync out). Skipped with a message when the
//! kernel sandbox is unavailable. CI compiles this and does not run it.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_plan-checkpoint");
const COMMAND: &str = "echo ready; sleep 0.02";

/// A serve process with a synchronous client (no reader thread, so no
/// hand-off is measured).
struct Serve {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
}

impl Serve {
    fn start_binary(binary: &Path, db: &Path) -> Serve {
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--db")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Serve {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, method: &str, params: &Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        id
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "serve exited");
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.send(method, params);
        loop {
            let message = self.read();
            if message["id"] == id {
                return message["result"].clone();
            }
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One round: the Bash call, then read until its first output (timed) and
/// on until its exit (untimed), so rounds never overlap.
fn serve_round(serve: &mut Serve, turn: &str, call_id: &str) -> Duration {
    let start = Instant::now();
    serve.send(
        "turn/toolCalls",
        &json!({"sessionId": "bench", "turnId": turn, "calls": [
            {"callId": call_id, "name": "Bash", "input": {"command": COMMAND}}
        ]}),
    );
    let mut first = None;
    loop {
        let message = serve.read();
        let for_call = message["params"]["callId"] == call_id;
        match message["method"].as_str() {
            Some("command/output") if for_call && first.is_none() => first = Some(start.elapsed()),
            Some("command/exited") if for_call => return first.expect("output before exit"),
            _ => {}
        }
    }
}

/// One round of `commands/answered`: a Bash `true` from sending the batch
/// to its answer (timed), then read on until the command's exit (untimed).
fn answered_round(serve: &mut Serve, turn: &str, call_id: &str) -> Duration {
    let start = Instant::now();
    let id = serve.send(
        "turn/toolCalls",
        &json!({"sessionId": "bench", "turnId": turn, "calls": [
            {"callId": call_id, "name": "Bash", "input": {"command": "true"}}
        ]}),
    );
    let mut answered = None;
    loop {
        let message = serve.read();
        if message["id"] == id {
            assert_eq!(message["result"]["results"][0]["decision"], "allow", "{message}");
            answered = Some(start.elapsed());
        }
        if message["method"] == "command/exited" && message["params"]["callId"] == call_id {
            return answered.expect("the answer comes before the exit");
        }
    }
}

/// A serve of `binary` on its own database, in a Plan turn of session
/// `bench` over `workspace`; returns it and the turn id.
fn plan_serve(binary: &Path, db: &Path, workspace: &Path) -> (Serve, String) {
    let mut serve = Serve::start_binary(binary, db);
    serve.call("initialize", &json!({"protocolVersion": 9}));
    serve.call(
        "session/create",
        &json!({"sessionId": "bench", "workspaceRoot": workspace.to_str().unwrap(), "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        &json!({"sessionId": "bench", "prompt": "bench", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    (serve, turn)
}

/// `commands/answered`, this build against `baseline`, interleaved.
fn answered_against(baseline: &Path, dir: &Path, workspace: &Path, rounds: usize) {
    let (mut current, current_turn) = plan_serve(Path::new(BIN), &dir.join("current.db"), workspace);
    let (mut earlier, earlier_turn) = plan_serve(baseline, &dir.join("baseline.db"), workspace);
    for round in 0..5 {
        answered_round(&mut current, &current_turn, &format!("warm-{round}"));
        answered_round(&mut earlier, &earlier_turn, &format!("warm-{round}"));
    }
    let mut this_build = Vec::with_capacity(rounds);
    let mut that_build = Vec::with_capacity(rounds);
    for round in 0..rounds {
        // Alternating which goes first, so neither always runs second.
        let call_id = format!("call-{round}");
        if round % 2 == 0 {
            this_build.push(answered_round(&mut current, &current_turn, &call_id));
            that_build.push(answered_round(&mut earlier, &earlier_turn, &call_id));
        } else {
            that_build.push(answered_round(&mut earlier, &earlier_turn, &call_id));
            this_build.push(answered_round(&mut current, &current_turn, &call_id));
        }
    }
    let this_median = median(this_build);
    let that_median = median(that_build);
    println!("commands/answered over {rounds} interleaved rounds (medians):");
    println!("  this build, Bash `true` turn/toolCalls -> answer: {this_median:?}");
    println!("  baseline {}:  {that_median:?}", baseline.display());
    println!(
        "  ratio this / baseline: {:.2} (goal <= 1.1)",
        this_median.as_secs_f64() / that_median.as_secs_f64()
    );
}

fn runner_round(runner: &plan_exec::Runner, workspace: &Path, scratch: &Path) -> Duration {
    let (sender, first) = channel();
    let start = Instant::now();
    let running = runner.spawn(
        plan_exec::CommandSpec {
            shell: PathBuf::from("/bin/sh"),
            command: COMMAND.to_owned(),
            cwd: workspace.to_path_buf(),
            workspace: None,
            env: Vec::new(),
            scratch: plan_exec::ScratchDir::open(scratch).unwrap(),
            timeout: Duration::from_secs(10),
            grace: Duration::from_secs(1),
            output_cap: plan_exec::DEFAULT_OUTPUT_CAP,
            confinement: plan_exec::Confinement::ReadOnly,
            isolation: plan_exec::Isolation {
                namespaces: matches!(
                    runner.sandbox_support(),
                    plan_exec::SandboxSupport::Available { namespaces: true, .. }
                ),
                ..plan_exec::Isolation::default()
            },
            network: None,
        },
        move |_event: plan_exec::OutputEvent| {
            let _ = sender.send(start.elapsed());
        },
    );
    let elapsed = first.recv().unwrap();
    running.wait();
    elapsed
}

fn main() {
    let rounds: usize = std::env::var("COMMANDS_BENCH_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(60);
    let dir = match std::env::var_os("COMMANDS_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let workspace = dir.path().canonicalize().unwrap().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let runner = plan_exec::Runner::open(BIN).unwrap();
    if !matches!(
        runner.sandbox_support(),
        plan_exec::SandboxSupport::Available { .. }
    ) {
        println!("commands/first_output: skipped, the kernel sandbox is unavailable here");
        return;
    }
    let scratch = dir.path().join("bench-scratch");
    std::fs::create_dir(&scratch).unwrap();

    let (mut serve, turn) = plan_serve(Path::new(BIN), &dir.path().join("plan.db"), &workspace);

    // Warm-up, then interleaved rounds so machine noise hits both alike.
    for round in 0..5 {
        serve_round(&mut serve, &turn, &format!("warm-{round}"));
        runner_round(&runner, &workspace, &scratch);
    }
    let mut through_serve = Vec::with_capacity(rounds);
    let mut through_runner = Vec::with_capacity(rounds);
    for round in 0..rounds {
        through_serve.push(serve_round(&mut serve, &turn, &format!("call-{round}")));
        through_runner.push(runner_round(&runner, &workspace, &scratch));
    }
    let serve_median = median(through_serve);
    let runner_median = median(through_runner);
    println!("commands/first_output over {rounds} interleaved rounds (medians):");
    println!("  serve client, turn/toolCalls -> first command/output: {serve_median:?} (target < 30 ms)");
    println!("  in-process Runner, spawn -> first output event:      {runner_median:?}");
    println!(
        "  ratio serve / runner: {:.2}",
        serve_median.as_secs_f64() / runner_median.as_secs_f64()
    );
    drop(serve);
    if let Some(baseline) = std::env::var_os("COMMANDS_BENCH_BASELINE_BIN") {
        answered_against(Path::new(&baseline), dir.path(), &workspace, rounds);
    }
}
