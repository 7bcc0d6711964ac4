//! git's configuration format, read as bytes, and which of its values name
//! a program git runs or a file git reads (`sandbox.md` P15): what
//! `protect.rs` must keep read-only when it lies in a workspace.
//!
//! Parsing only: it opens nothing and decides nothing about a path. A
//! malformed line is skipped, never a reason to panic; what git itself
//! would refuse to read is read here all the same (protecting more is
//! harmless, protecting less is not).

/// One `key = value` of a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The section, lowercase (`core`, `includeif`).
    pub(crate) section: String,
    /// The subsection as written (`[diff "lock"]`: `lock`), if any.
    pub(crate) subsection: Option<Vec<u8>>,
    /// The key, lowercase.
    pub(crate) key: String,
    /// The value with quotes and escapes resolved; `None` for a key without
    /// `=` (git reads it as `true`).
    pub(crate) value: Option<Vec<u8>>,
}

/// What an entry's value means to git.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    /// Another configuration file git reads (`include.path`,
    /// `includeIf.<condition>.path`), relative to the including file.
    Include,
    /// The directory of hooks git runs (`core.hooksPath`).
    Hooks,
    /// A file or directory git reads, as one path.
    Path,
    /// A command line git runs (through a shell where it needs one): every
    /// word of it that is a path is what runs or what it reads.
    Program,
    /// Nothing git runs or reads (a name, a number, a URL, the work tree).
    Nothing,
}

/// Key names (the last part, lowercase) that name a file or directory git
/// reads: `core.excludesFile`, `commit.template`, `init.templateDir`,
/// `http.sslCAInfo`, `gpg.ssh.allowedSignersFile`, `user.signingKey` (a key
/// file for SSH signing), `fsck.skipList`, `difftool.<tool>.path`...
const PATH_KEYS: [&str; 9] = [
    "file",
    "path",
    "dir",
    "template",
    "sslcert",
    "sslkey",
    "sslcainfo",
    "signingkey",
    "skiplist",
];

/// Key names that name a program git runs: `core.fsmonitor`,
/// `core.sshCommand`, `core.editor`, `sequence.editor`, `core.pager`,
/// `diff.<driver>.textconv`, `diff.external`, `filter.<driver>.clean`,
/// `.smudge`, `.process`, `merge.<driver>.driver`, `credential.helper`,
/// `gpg.program`, `core.askPass`, `core.gitProxy`, `*.cmd`, `*.command`,
/// `uploadpack.packObjectsHook`, `interactive.diffFilter`...
const PROGRAM_KEYS: [&str; 20] = [
    "cmd",
    "command",
    "program",
    "helper",
    "driver",
    "textconv",
    "external",
    "editor",
    "pager",
    "hook",
    "askpass",
    "proxy",
    "clean",
    "smudge",
    "process",
    "fsmonitor",
    "filter",
    "uploadpack",
    "receivepack",
    "browser",
];

/// What `entry`'s value names (see [`Named`]). The rule is by the key's
/// shape, so that keys git adds later with the same shape are covered:
/// a key ending in one of [`PATH_KEYS`] or [`PROGRAM_KEYS`], an alias or a
/// submodule update that starts with `!`, any `pager.<command>`. What names
/// only where git operates or fetches from (`core.worktree`,
/// `submodule.<name>.path`, remote URLs) is not a program or a file of
/// configuration; repositories it points at are found on their own.
pub(crate) fn named(entry: &Entry) -> Named {
    let section = entry.section.as_str();
    let key = entry.key.as_str();
    let starts_with_bang = entry
        .value
        .as_deref()
        .is_some_and(|value| value.trim_ascii_start().starts_with(b"!"));
    match (section, key) {
        ("include", "path") => Named::Include,
        ("includeif", "path") if entry.subsection.is_some() => Named::Include,
        ("core", "hookspath") => Named::Hooks,
        ("core", "worktree") | ("submodule", "path" | "url" | "branch") => Named::Nothing,
        ("remote", "url" | "pushurl" | "fetch" | "push") => Named::Nothing,
        ("alias", _) | ("submodule", "update") => {
            if starts_with_bang {
                Named::Program
            } else {
                Named::Nothing
            }
        }
        ("pager", _) | ("sendemail", "smtpserver") => Named::Program,
        _ if PROGRAM_KEYS.iter().any(|suffix| key.ends_with(suffix)) => Named::Program,
        _ if PATH_KEYS.iter().any(|suffix| key.ends_with(suffix)) => Named::Path,
        _ => Named::Nothing,
    }
}

/// The words of a command line that may be paths: split at whitespace,
/// quotes and the shell's and git's punctuation (`=`, `:`, `,` too, so
/// `--file=./x` and `UserKnownHostsFile=/dev/null` give the path), with a
/// leading `!` (an alias's) dropped. Over-splitting a path that holds such
/// a byte only makes it a word that names nothing.
pub(crate) fn words(value: &[u8]) -> Vec<&[u8]> {
    const SEPARATORS: &[u8] = b" \t\r\n'\"`;|&<>(){}$=:,!\\";
    value
        .split(|byte| SEPARATORS.contains(byte))
        .filter(|word| !word.is_empty())
        .collect()
}

/// Every entry of `text`, in order.
pub(crate) fn parse(text: &[u8]) -> Vec<Entry> {
    let mut parser = Parser {
        text,
        at: 0,
        section: None,
        entries: Vec::new(),
    };
    parser.run();
    parser.entries
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    /// The current section and subsection; `None` before the first header
    /// (git refuses keys there; they are skipped).
    section: Option<(String, Option<Vec<u8>>)>,
    entries: Vec<Entry>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_line(&mut self) {
        while let Some(byte) = self.peek() {
            self.at += 1;
            if byte == b'\n' {
                break;
            }
        }
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    fn run(&mut self) {
        while let Some(byte) = self.peek() {
            match byte {
                b' ' | b'\t' | b'\r' | b'\n' => self.at += 1,
                b'#' | b';' => self.skip_line(),
                b'[' => {
                    if !self.header() {
                        self.section = None;
                        self.skip_line();
                    }
                }
                byte if byte.is_ascii_alphabetic() => self.entry(),
                // Git refuses such a line; nothing of it is a key.
                _ => self.skip_line(),
            }
        }
    }

    /// `[section]`, `[section "subsection"]` or `[section.subsection]`;
    /// `false` when malformed.
    fn header(&mut self) -> bool {
        self.at += 1;
        let mut name = String::new();
        while let Some(byte) = self.peek() {
            if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.' {
                name.push(char::from(byte.to_ascii_lowercase()));
                self.at += 1;
            } else {
                break;
            }
        }
        if name.is_empty() {
            return false;
        }
        let mut subsection = None;
        self.skip_blanks();
        if self.peek() == Some(b'"') {
            self.at += 1;
            let mut bytes = Vec::new();
            loop {
                match self.peek() {
                    None | Some(b'\n') => return false,
                    Some(b'"') => {
                        self.at += 1;
                        break;
                    }
                    Some(b'\\') => {
                        self.at += 1;
                        match self.peek() {
                            None | Some(b'\n') => return false,
                            Some(byte) => bytes.push(byte),
                        }
                        self.at += 1;
                    }
                    Some(byte) => {
                        bytes.push(byte);
                        self.at += 1;
                    }
                }
            }
            subsection = Some(bytes);
            self.skip_blanks();
        } else if let Some((section, rest)) = name.split_once('.') {
            subsection = Some(rest.as_bytes().to_vec());
            name = section.to_owned();
        }
        if self.peek() != Some(b']') {
            return false;
        }
        self.at += 1;
        self.section = Some((name, subsection));
        true
    }

    /// `key`, `key = value`; what follows on the line after the value is a
    /// comment or nothing.
    fn entry(&mut self) {
        let mut key = String::new();
        while let Some(byte) = self.peek() {
            if byte.is_ascii_alphanumeric() || byte == b'-' {
                key.push(char::from(byte.to_ascii_lowercase()));
                self.at += 1;
            } else {
                break;
            }
        }
        self.skip_blanks();
        let value = match self.peek() {
            Some(b'=') => {
                self.at += 1;
                Some(self.value())
            }
            None | Some(b'\n' | b'\r' | b'#' | b';') => {
                self.skip_line();
                None
            }
            Some(_) => {
                self.skip_line();
                return;
            }
        };
        if let Some((section, subsection)) = &self.section {
            self.entries.push(Entry {
                section: section.clone(),
                subsection: subsection.clone(),
                key,
                value,
            });
        }
    }

    /// A value up to the end of its (possibly continued) line: leading and
    /// trailing blanks dropped, inner ones kept, `"` quoting, `\` escapes
    /// and line continuations resolved, a comment ending it outside quotes.
    fn value(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut quoted = false;
        let mut blanks = 0_usize;
        while let Some(byte) = self.peek() {
            self.at += 1;
            match byte {
                b'\n' => break,
                b' ' | b'\t' | b'\r' if !quoted => {
                    if !out.is_empty() {
                        blanks += 1;
                    }
                }
                b'#' | b';' if !quoted => {
                    self.skip_line();
                    break;
                }
                b'"' => {
                    out.extend(std::iter::repeat_n(b' ', blanks));
                    blanks = 0;
                    quoted = !quoted;
                }
                b'\\' => {
                    let escaped = self.peek();
                    self.at += 1;
                    let resolved = match escaped {
                        // A continuation: the value goes on on the next line.
                        Some(b'\n') => continue,
                        Some(b'n') => b'\n',
                        Some(b't') => b'\t',
                        Some(b'b') => 0x08,
                        Some(other) => other,
                        None => break,
                    };
                    out.extend(std::iter::repeat_n(b' ', blanks));
                    blanks = 0;
                    out.push(resolved);
                }
                other => {
                    out.extend(std::iter::repeat_n(b' ', blanks));
                    blanks = 0;
                    out.push(other);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(section: &str, subsection: Option<&str>, key: &str, value: Option<&str>) -> Entry {
        Entry {
            section: section.into(),
            subsection: subsection.map(|text| text.as_bytes().to_vec()),
            key: key.into(),
            value: value.map(|text| text.as_bytes().to_vec()),
        }
    }

    #[test]
    fn sections_subsections_quotes_escapes_continuations_and_comments() {
        let text = b"# a comment\n[core]\n\thooksPath = .githooks ; trailing\n\
            \tbare\n[diff \"lock \\\"x\\\"\"] textconv = \"scripts/a b\" -x  # c\n\
            [Include]\n  path = ../shared.gitconfig\n[includeIf \"gitdir:/w/\"]\n\tpath = c\\\n.cfg\n\
            [branch.Main]\n\tremote = origin\n[bad\n\tkey = dropped\n[alias]\n\tx = !./run \\t\n";
        assert_eq!(
            parse(text),
            vec![
                entry("core", None, "hookspath", Some(".githooks")),
                entry("core", None, "bare", None),
                entry("diff", Some("lock \"x\""), "textconv", Some("scripts/a b -x")),
                entry("include", None, "path", Some("../shared.gitconfig")),
                entry("includeif", Some("gitdir:/w/"), "path", Some("c.cfg")),
                entry("branch", Some("main"), "remote", Some("origin")),
                entry("alias", None, "x", Some("!./run \t")),
            ]
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_stay_bytes() {
        let parsed = parse(b"[core]\n\thooksPath = hooks\xff\n");
        assert_eq!(parsed[0].value.as_deref(), Some(&b"hooks\xff"[..]));
    }

    #[test]
    fn what_git_runs_or_reads_is_named_by_the_keys_shape() {
        let cases = [
            (entry("include", None, "path", Some("x")), Named::Include),
            (
                entry("includeif", Some("onbranch:x"), "path", Some("x")),
                Named::Include,
            ),
            (entry("core", None, "hookspath", Some("x")), Named::Hooks),
            (entry("core", None, "fsmonitor", Some("x")), Named::Program),
            (entry("core", None, "sshcommand", Some("x")), Named::Program),
            (entry("core", None, "editor", Some("x")), Named::Program),
            (entry("sequence", None, "editor", Some("x")), Named::Program),
            (entry("diff", Some("d"), "textconv", Some("x")), Named::Program),
            (entry("filter", Some("f"), "process", Some("x")), Named::Program),
            (entry("merge", Some("m"), "driver", Some("x")), Named::Program),
            (
                entry("credential", Some("https://h"), "helper", Some("x")),
                Named::Program,
            ),
            (entry("gpg", Some("ssh"), "program", Some("x")), Named::Program),
            (entry("pager", None, "log", Some("x")), Named::Program),
            (entry("alias", None, "a", Some("!x")), Named::Program),
            (entry("alias", None, "a", Some("log --oneline")), Named::Nothing),
            (entry("core", None, "excludesfile", Some("x")), Named::Path),
            (entry("commit", None, "template", Some("x")), Named::Path),
            (entry("http", None, "sslcainfo", Some("x")), Named::Path),
            (entry("core", None, "worktree", Some("../..")), Named::Nothing),
            (
                entry("submodule", Some("lib"), "path", Some("lib")),
                Named::Nothing,
            ),
            (
                entry("remote", Some("origin"), "url", Some("../x")),
                Named::Nothing,
            ),
            (entry("user", None, "name", Some("src")), Named::Nothing),
        ];
        for (entry, expected) in cases {
            assert_eq!(named(&entry), expected, "{entry:?}");
        }
    }

    #[test]
    fn words_of_a_command_line() {
        assert_eq!(
            words(b"!sh -c 'scripts/x \"$1\"' -- --file=./y -oUserKnownHostsFile=/dev/null"),
            vec![
                &b"sh"[..],
                b"-c",
                b"scripts/x",
                b"1",
                b"--",
                b"--file",
                b"./y",
                b"-oUserKnownHostsFile",
                b"/dev/null"
            ]
        );
    }
}
