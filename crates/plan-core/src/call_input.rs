//! What a tool call asks for, reduced to one digest, so "the same call" means
//! one thing everywhere: a call id sent again in `turn/toolCalls`, and the
//! input `command/start` is given, are compared with the input that was
//! decided (and, under `ask` and `accept-edits`, that a person confirmed)
//! only through [`CallDigest`] (`sandbox.md`, P14).
//!
//! The digest covers the tool name and what the call would do: for a valid
//! `Bash` input the command text, the workspace-relative `cwd` and the
//! effective timeout (the fields that decide what runs, whatever other
//! fields an agent adds); for any other call, or a `Bash` input that is not
//! valid (and so can never start), the whole input as canonical JSON (object
//! keys sorted, no white space). This module computes digests; it decides
//! nothing and keeps nothing.

use sha2::{Digest as _, Sha256};

use crate::commands::{BASH, BashInput, CommandOptions, parse_bash_input};

/// The SHA-256 of a call's canonical form: the tool and exactly what the
/// call asks for. Two calls with equal digests run the same way.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallDigest([u8; 32]);

impl std::fmt::Debug for CallDigest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("CallDigest(")?;
        for byte in self.0 {
            write!(formatter, "{byte:02x}")?;
        }
        formatter.write_str(")")
    }
}

impl CallDigest {
    /// The digest of a call of `tool` with `input`, in a session whose
    /// workspace root is `workspace_root`, under the host's command options
    /// (which give a `Bash` call without `timeoutMs` its timeout).
    pub fn of_call(
        tool: &str,
        input: &serde_json::Value,
        workspace_root: Option<&str>,
        options: &CommandOptions,
    ) -> CallDigest {
        if tool == BASH
            && let Ok(run) = parse_bash_input(input, workspace_root, options)
        {
            return CallDigest::of_run(&run);
        }
        let mut hasher = Sha256::new();
        hasher.update(b"call\0");
        hash_string(&mut hasher, tool);
        hash_canonical(&mut hasher, input);
        CallDigest(hasher.finalize().into())
    }

    /// The digest of a validated `Bash` input: what `command/start` runs.
    pub fn of_run(run: &BashInput) -> CallDigest {
        let mut hasher = Sha256::new();
        hasher.update(b"run\0");
        hash_string(&mut hasher, BASH);
        hash_string(&mut hasher, &run.command);
        hash_string(&mut hasher, &run.cwd);
        hasher.update(run.timeout_ms.to_be_bytes());
        CallDigest(hasher.finalize().into())
    }
}

/// A string as JSON writes it (quoted and escaped), so no two sequences of
/// strings hash alike.
fn hash_string(hasher: &mut Sha256, text: &str) {
    hasher.update(serde_json::Value::from(text).to_string().as_bytes());
}

/// `value` as canonical JSON: object keys in byte order, no white space.
/// The order is sorted here, whatever order the parsed map keeps.
fn hash_canonical(hasher: &mut Sha256, value: &serde_json::Value) {
    match value {
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            hasher.update(value.to_string().as_bytes());
        }
        serde_json::Value::String(text) => hash_string(hasher, text),
        serde_json::Value::Array(items) => {
            hasher.update(b"[");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    hasher.update(b",");
                }
                hash_canonical(hasher, item);
            }
            hasher.update(b"]");
        }
        serde_json::Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            hasher.update(b"{");
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    hasher.update(b",");
                }
                hash_string(hasher, key);
                hasher.update(b":");
                if let Some(field) = fields.get(key) {
                    hash_canonical(hasher, field);
                }
            }
            hasher.update(b"}");
        }
    }
}
