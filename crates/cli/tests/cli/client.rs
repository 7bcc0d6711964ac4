//! The one `plan-checkpoint serve` test client: the real binary spoken to
//! over pipes, one JSON-RPC message per line.
//!
//! Every read has a timeout (a reader thread feeds a channel), so a server
//! that hangs fails the test instead of blocking CI.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single answer may take before the test fails.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// One running `serve` process and a line-oriented client for it.
pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    lines: Receiver<Option<Vec<u8>>>,
    /// What serve wrote to stderr so far, and a signal for each new part.
    stderr: Arc<(Mutex<String>, Condvar)>,
    /// Notifications seen while waiting for responses, in arrival order.
    pub(crate) notifications: VecDeque<Value>,
    next_id: i64,
    eof: bool,
}

impl Serve {
    pub(crate) fn spawn(db: &Path, extra: &[&str]) -> Serve {
        Serve::spawn_with_env(db, extra, &[])
    }

    /// Spawns with these environment variables set as well.
    pub(crate) fn spawn_with_env(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
            .arg("serve")
            .arg("--db")
            .arg(db)
            .args(extra)
            .envs(env.iter().copied())
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning plan-checkpoint serve");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => {
                        let _ = sender.send(None);
                        return;
                    }
                    Ok(_) => {
                        if sender.send(Some(line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let mut child_stderr = child.stderr.take().unwrap();
        std::thread::spawn({
            let stderr = Arc::clone(&stderr);
            move || {
                let (text, grew) = &*stderr;
                let mut buffer = [0_u8; 4096];
                while let Ok(read) = child_stderr.read(&mut buffer) {
                    if read == 0 {
                        return;
                    }
                    text.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buffer[..read]));
                    grew.notify_all();
                }
            }
        });
        Serve {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            notifications: VecDeque::new(),
            next_id: 1,
            eof: false,
        }
    }

    /// Spawns and initializes.
    pub(crate) fn start(db: &Path, extra: &[&str]) -> Serve {
        let mut serve = Serve::spawn(db, extra);
        let init = serve.call(
            "initialize",
            json!({"protocolVersion": 9, "clientName": "serve-tests"}),
        );
        assert_eq!(init["protocolVersion"], 9);
        assert_eq!(init["schemaVersion"], 10);
        assert_eq!(init["serverName"], "plan-checkpoint");
        serve
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.0.lock().unwrap().clone()
    }

    /// Waits (bounded) until stderr holds `needle`, woken by each part the
    /// reader thread adds (it may lag behind the process).
    pub(crate) fn wait_stderr(&self, needle: &str) {
        let (text, grew) = &*self.stderr;
        let (text, waited) = grew
            .wait_timeout_while(text.lock().unwrap(), REPLY_TIMEOUT, |text| !text.contains(needle))
            .unwrap();
        assert!(!waited.timed_out(), "stderr never said {needle:?}: {}", *text);
    }

    /// Writes one line (a `\n` is appended). Returns false if the pipe is closed.
    pub(crate) fn send_bytes(&mut self, bytes: &[u8]) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .is_ok()
    }

    /// The next stdout message, or `None` at EOF. Panics after the timeout.
    pub(crate) fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        if self.eof {
            return None;
        }
        match self.lines.recv_timeout(timeout) {
            Ok(Some(line)) => {
                assert_eq!(
                    line.last(),
                    Some(&b'\n'),
                    "every stdout message ends with a newline"
                );
                let text = std::str::from_utf8(&line).expect("stdout is UTF-8");
                let value: Value = serde_json::from_str(text)
                    .unwrap_or_else(|error| panic!("stdout carries protocol only, got {text:?}: {error}"));
                assert!(value.is_array() || value["jsonrpc"] == "2.0", "{value}");
                Some(value)
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                self.eof = true;
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "no message from serve within {timeout:?}; stderr: {}",
                    self.stderr()
                )
            }
        }
    }

    /// The next response (an object with an `id` member, or a batch array),
    /// keeping notifications aside; `None` at EOF.
    pub(crate) fn next_response(&mut self) -> Option<Value> {
        loop {
            let message = self.next_message(REPLY_TIMEOUT)?;
            if is_notification(&message) {
                self.notifications.push_back(message);
            } else {
                return Some(message);
            }
        }
    }

    /// Sends a raw line and returns the response to it.
    pub(crate) fn raw(&mut self, line: &[u8]) -> Value {
        assert!(
            self.send_bytes(line),
            "serve closed its stdin; stderr: {}",
            self.stderr()
        );
        self.next_response()
            .unwrap_or_else(|| panic!("serve exited; stderr: {}", self.stderr()))
    }

    /// Sends a request and returns its whole response, or `None` if the server went away.
    pub(crate) fn try_request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if !self.send_bytes(line.as_bytes()) {
            return None;
        }
        let response = self.next_response()?;
        assert_eq!(
            response["id"], id,
            "responses come back in order with their id: {response}"
        );
        Some(response)
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.try_request(method, params)
            .unwrap_or_else(|| panic!("serve exited; stderr: {}", self.stderr()))
    }

    /// The result of a request that must succeed.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone());
        match response.get("result") {
            Some(result) if response.get("error").is_none() => result.clone(),
            _ => panic!("{method} {params} failed: {response}"),
        }
    }

    /// The canonical code of a request that must fail (and its JSON-RPC number).
    pub(crate) fn error(&mut self, method: &str, params: Value) -> (i64, String) {
        let response = self.request(method, params.clone());
        error_of(&response).unwrap_or_else(|| panic!("{method} {params} should fail: {response}"))
    }

    pub(crate) fn code(&mut self, method: &str, params: Value) -> String {
        self.error(method, params).1
    }

    /// Waits for a notification with `method` (earlier other ones are kept).
    pub(crate) fn wait_notification(&mut self, method: &str, timeout: Duration) -> Value {
        if let Some(index) = self.notifications.iter().position(|n| n["method"] == method) {
            return self.notifications.remove(index).unwrap();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .next_message(left)
                .unwrap_or_else(|| panic!("serve exited waiting for {method}; stderr: {}", self.stderr()));
            if message["method"] == method && is_notification(&message) {
                return message;
            }
            assert!(is_notification(&message), "unexpected response {message}");
            self.notifications.push_back(message);
        }
    }

    /// The next notification, whatever its method (queued ones first).
    pub(crate) fn next_notification(&mut self, timeout: Duration) -> Value {
        if let Some(queued) = self.notifications.pop_front() {
            return queued;
        }
        let message = self.next_message(timeout).unwrap_or_else(|| {
            panic!(
                "serve exited waiting for a notification; stderr: {}",
                self.stderr()
            )
        });
        assert!(is_notification(&message), "unexpected response {message}");
        message
    }

    pub(crate) fn take_notifications(&mut self) -> Vec<Value> {
        self.notifications.drain(..).collect()
    }

    /// Closes stdin and waits (bounded) for the process to exit.
    pub(crate) fn close(mut self) -> ExitStatus {
        self.stdin = None;
        self.wait()
    }

    /// Waits for the process to exit; a watchdog kills it after
    /// `REPLY_TIMEOUT` (a liveness bound) and the wait then fails.
    pub(crate) fn wait(&mut self) -> ExitStatus {
        let (exited, watched) = channel::<()>();
        let pid = self.child.id().to_string();
        let watchdog = std::thread::spawn(move || {
            let fired = matches!(
                watched.recv_timeout(REPLY_TIMEOUT),
                Err(RecvTimeoutError::Timeout)
            );
            if fired {
                // Not reaped yet (the wait below has not returned), so the
                // pid is still this child's.
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
            fired
        });
        let status = self.child.wait().unwrap();
        let _ = exited.send(());
        assert!(
            !watchdog.join().unwrap(),
            "serve did not exit within {REPLY_TIMEOUT:?}; stderr: {}",
            self.stderr()
        );
        status
    }

    /// SIGKILL (std's `Child::kill`), then reap.
    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn is_notification(message: &Value) -> bool {
    message.is_object() && message.get("id").is_none() && message.get("method").is_some()
}

pub(crate) fn error_of(response: &Value) -> Option<(i64, String)> {
    let error = response.get("error")?;
    Some((
        error["code"].as_i64()?,
        error["data"]["code"].as_str()?.to_owned(),
    ))
}

pub(crate) fn notification_methods(notifications: &[Value]) -> Vec<String> {
    notifications
        .iter()
        .map(|n| n["method"].as_str().unwrap().to_owned())
        .collect()
}
