//! plan-exec benchmarks (criterion), each a pair measured in the same run so
//! the ratio is what counts, not the machine:
//!
//! - `spawn_true`: spawn-to-exit of `bash -c true` through the runner with
//!   the read-only sandbox, every layer and every bound the machine gives
//!   (and without the bounds, for what they cost), against the same through
//!   the runner without a sandbox (and, for reference, a bare
//!   `std::process::Command`).
//! - `throughput_256MiB`: 256 MiB of stdout through the runner (counted,
//!   delivered and hashed up to the default 1 MiB cap), sandboxed and not,
//!   against the same bytes read from a plain pipe.
//! - `first_output`: spawn to the first output event of `echo x; sleep 1`
//!   (sandboxed and not); the command is cancelled once the event is in.
//! - `spawn_with_2GiB_resident`: spawn-to-exit of a sandboxed `true` from
//!   this process before and after it allocates and touches 2 GiB; the
//!   runner never forks the host, so the two should match.
//! - `walk`: spawn-to-exit of a sandboxed `true` (Plan and `auto`) in a
//!   large repository (5,000 directories, 50,000 files, 1,000 refs, a
//!   configuration naming hooks, an include and programs) and in a
//!   workspace of 300 nested projects (each a repository with a `.pi`),
//!   against the same in a small workspace: what the walk for what to
//!   protect and hide costs as a workspace grows.
//!
//! Sample sizes are small: the machine is shared. These benchmarks only
//! measure; CI runs each of them once (`cargo bench -- --test`) so they keep
//! working, and their figures are taken by hand (`docs/PERFORMANCE.md`).

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use plan_exec::{CommandSpec, CommandState, Confinement, Runner, WorkspaceDir};

const BYTES: u64 = 256 * 1024 * 1024;

fn runner() -> Runner {
    Runner::open(env!("CARGO_BIN_EXE_plan-exec-sandbox")).unwrap()
}

fn spec(command: &str, scratch: &Path, confinement: Confinement) -> CommandSpec {
    CommandSpec {
        shell: PathBuf::from("/bin/bash"),
        command: command.to_owned(),
        cwd: scratch.to_path_buf(),
        workspace: None,
        env: Vec::new(),
        scratch: plan_exec::ScratchDir::open(scratch).unwrap(),
        timeout: Duration::from_secs(60),
        grace: Duration::from_millis(200),
        output_cap: plan_exec::DEFAULT_OUTPUT_CAP,
        confinement,
        // Every layer and every bound the kernel offers, with the names
        // plan-host passes (plan-core's), as a host would run it.
        isolation: every_layer(),
        network: None,
    }
}

/// `spec` run as a host runs a session's command: in `workspace`, held
/// open (so a Plan command's walk happens too).
fn in_workspace(mut spec: CommandSpec, workspace: &Path) -> CommandSpec {
    spec.workspace = Some(WorkspaceDir::open(workspace).unwrap());
    spec.cwd = workspace.to_path_buf();
    spec
}

/// The namespaces where the probe finds them, every bound it finds, with
/// the host's default values (plan-core's `ResourceBounds`), and the names
/// plan-host passes (plan-core's).
fn every_layer() -> plan_exec::Isolation {
    let plan_exec::SandboxSupport::Available { namespaces, bounds } = runner().sandbox_support() else {
        return plan_exec::Isolation::default();
    };
    let available = |availability: plan_exec::Availability| availability.is_available();
    plan_exec::Isolation {
        namespaces,
        bounds: plan_exec::CommandBounds {
            tasks: available(bounds.tasks(namespaces)).then_some(1024),
            memory_bytes: available(bounds.memory()).then_some(4 << 30),
            inotify: available(bounds.inotify(namespaces)).then_some(plan_exec::InotifyBound {
                instances: 16,
                watches: 16_384,
            }),
            open_files: Some(4096),
        },
        protected_names: [".git", ".claude", ".mcp.json", ".codex", ".gemini"]
            .into_iter()
            .map(Into::into)
            .collect(),
        hidden_names: vec![".pi".into()],
        ..plan_exec::Isolation::default()
    }
}

fn run_to_exit(runner: &Runner, spec: &CommandSpec) {
    let outcome = runner.spawn(spec.clone(), |_| {}).wait();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
}

fn spawn_true(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let runner = runner();
    let mut group = c.benchmark_group("spawn_true");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    // A small workspace with a repository, as a host's session has.
    let workspace = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(workspace.path().join(".git/hooks")).unwrap();
    let sandboxed = in_workspace(
        spec("true", scratch.path(), Confinement::ReadOnly),
        workspace.path(),
    );
    let unsandboxed = spec("true", scratch.path(), Confinement::None);
    group.bench_function("runner_read_only", |b| {
        b.iter(|| run_to_exit(&runner, &sandboxed))
    });
    // The same without the bounds of P16 (what a spawn cost before them).
    let mut unbounded = sandboxed.clone();
    unbounded.isolation.bounds = plan_exec::CommandBounds::default();
    group.bench_function("runner_read_only_without_bounds", |b| {
        b.iter(|| run_to_exit(&runner, &unbounded))
    });
    // `auto`: the workspace walk, its protected paths bound read-only, and
    // with the network the session's network namespace joined (its stack
    // started once, as the host does per session), or, for comparison, a
    // namespace and stack made for the one command.
    let session_network = plan_exec::NetworkNamespace::start(&runner).unwrap();
    for (name, network) in [
        ("runner_workspace_write", None),
        ("runner_workspace_write_network", Some(Some(&session_network))),
        ("runner_workspace_write_network_own_stack", Some(None)),
    ] {
        let mut auto = in_workspace(
            spec(
                "true",
                scratch.path(),
                Confinement::WorkspaceWrite {
                    workspace_root: workspace.path().to_path_buf(),
                    network: network.is_some(),
                },
            ),
            workspace.path(),
        );
        auto.network = network.flatten().cloned();
        group.bench_function(name, |b| b.iter(|| run_to_exit(&runner, &auto)));
    }
    group.bench_function("runner_unsandboxed", |b| {
        b.iter(|| run_to_exit(&runner, &unsandboxed))
    });
    group.bench_function("bare_command", |b| {
        b.iter(|| {
            let status = Command::new("/bin/bash")
                .args(["-c", "true"])
                .stdin(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        })
    });
    group.finish();
}

fn throughput(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let runner = runner();
    let command = format!("head -c {BYTES} /dev/zero");
    let mut group = c.benchmark_group("throughput_256MiB");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_millis(500))
        .throughput(Throughput::Bytes(BYTES));
    for (name, confinement) in [
        ("runner_read_only", Confinement::ReadOnly),
        ("runner_unsandboxed", Confinement::None),
    ] {
        let through_runner = spec(&command, scratch.path(), confinement);
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = runner.spawn(through_runner.clone(), |_| {}).wait();
                assert_eq!(outcome.stdout_bytes, BYTES);
            })
        });
    }
    group.bench_function("plain_pipe", |b| {
        b.iter(|| {
            let mut child = Command::new("/bin/bash")
                .args(["-c", &command])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let mut buffer = vec![0_u8; 256 * 1024];
            let mut total = 0_u64;
            loop {
                let read = stdout.read(&mut buffer).unwrap();
                if read == 0 {
                    break;
                }
                total += read as u64;
            }
            assert!(child.wait().unwrap().success());
            assert_eq!(total, BYTES);
        })
    });
    group.finish();
}

/// Spawn to the first output event; the command is then cancelled.
fn first_event(runner: &Runner, spec: &CommandSpec) -> Duration {
    let (sender, receiver) = mpsc::channel();
    let started = Instant::now();
    let running = runner.spawn(spec.clone(), move |_| {
        let _ = sender.send(Instant::now());
    });
    let first = receiver.recv().unwrap();
    running.cancel();
    assert_eq!(running.wait().state, CommandState::Cancelled);
    first - started
}

fn first_output(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let runner = runner();
    let mut group = c.benchmark_group("first_output");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for (name, confinement) in [
        ("read_only", Confinement::ReadOnly),
        ("unsandboxed", Confinement::None),
    ] {
        let spec = spec("echo x; sleep 1", scratch.path(), confinement);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| first_event(&runner, &spec)).sum())
        });
    }
    group.finish();
}

fn spawn_with_resident_memory(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let runner = runner();
    let sandboxed = spec("true", scratch.path(), Confinement::ReadOnly);
    let mut group = c.benchmark_group("spawn_with_2GiB_resident");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    group.bench_function("small_host", |b| b.iter(|| run_to_exit(&runner, &sandboxed)));
    // Every page written, so all 2 GiB are resident.
    let resident = vec![1_u8; 2 << 30];
    group.bench_function("host_with_2GiB", |b| b.iter(|| run_to_exit(&runner, &sandboxed)));
    assert_eq!(resident[resident.len() / 2], 1);
    drop(resident);
    group.finish();
}

/// A large repository: 5,000 directories of 10 files, 1,000 refs, hooks
/// in `.githooks` named by its configuration with an include and programs.
fn large_repository(root: &Path) {
    let run = |script: &str| {
        let status = Command::new("/bin/bash")
            .args(["-c", script])
            .current_dir(root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    };
    run("set -e
         git init -q .
         mkdir -p .githooks tools && touch .githooks/pre-commit tools/fsmonitor tools/textconv
         git config core.hooksPath .githooks
         printf '[core]\n\tfsmonitor = tools/fsmonitor\n' > shared.gitconfig
         git config include.path ../shared.gitconfig
         git config diff.lock.textconv ./tools/textconv");
    for top in 0..50 {
        for inner in 0..100 {
            let directory = root.join(format!("src/m{top}/d{inner}"));
            std::fs::create_dir_all(&directory).unwrap();
            for file in 0..10 {
                std::fs::write(directory.join(format!("f{file}.rs")), b"fn f() {}\n").unwrap();
            }
        }
    }
    let tags = root.join(".git/refs/tags");
    for tag in 0..1000 {
        std::fs::write(
            tags.join(format!("v{tag}")),
            b"0123456789012345678901234567890123456789\n",
        )
        .unwrap();
    }
}

/// A workspace of `count` nested projects, each a repository (its `.git`
/// with `HEAD`, `objects`, `refs` and a `config`) with a `.pi/plan` of a
/// database and a plan.
fn nested_projects(root: &Path, count: usize) {
    for project in 0..count {
        let base = root.join(format!("projects/p{project}"));
        for directory in [".git/objects", ".git/refs/heads", ".git/hooks", ".pi/plan", "src"] {
            std::fs::create_dir_all(base.join(directory)).unwrap();
        }
        std::fs::write(base.join(".git/HEAD"), b"ref: refs/heads/main\n").unwrap();
        std::fs::write(base.join(".git/config"), b"[core]\n\tbare = false\n").unwrap();
        std::fs::write(base.join(".pi/plan/plan.db"), b"SQLite format 3\0").unwrap();
        std::fs::write(base.join(".pi/plan/plan-1.md"), b"# Plan\n").unwrap();
        std::fs::write(base.join("src/main.rs"), b"fn main() {}\n").unwrap();
    }
}

fn walk(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let runner = runner();
    let mut group = c.benchmark_group("walk");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_millis(500));
    let small = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(small.path().join(".git/hooks")).unwrap();
    let large = tempfile::tempdir().unwrap();
    large_repository(large.path());
    let nested = tempfile::tempdir().unwrap();
    nested_projects(nested.path(), 300);
    for (name, workspace) in [
        ("small", small.path()),
        ("large_repository", large.path()),
        ("300_nested_projects", nested.path()),
    ] {
        let plan = in_workspace(spec("true", scratch.path(), Confinement::ReadOnly), workspace);
        let auto = in_workspace(
            spec(
                "true",
                scratch.path(),
                Confinement::WorkspaceWrite {
                    workspace_root: workspace.to_path_buf(),
                    network: false,
                },
            ),
            workspace,
        );
        group.bench_function(format!("read_only_{name}"), |b| {
            b.iter(|| run_to_exit(&runner, &plan))
        });
        group.bench_function(format!("workspace_write_{name}"), |b| {
            b.iter(|| run_to_exit(&runner, &auto))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    spawn_true,
    throughput,
    first_output,
    spawn_with_resident_memory,
    walk
);
criterion_main!(benches);
