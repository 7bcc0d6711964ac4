//! What stdout is: a terminal or not, whether to colour, how wide it is.
//!
//! Decided once per run from `--color`, `NO_COLOR`, `TERM` and the file
//! descriptors, then passed to whatever prints. Two hidden environment
//! variables exist for tests: `PLAN_CHECKPOINT_ASSUME_TERMINAL=1` makes the
//! CLI treat stdout as a terminal (escaping, colour under `auto`, prefixes
//! of ids, progress stays off: it is drawn on stderr), and `COLUMNS` (the
//! usual shell variable) sets the width. Nothing here formats or decides
//! anything about approvals.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};
use plan_core::{ApprovalStatus, CommandState};

/// The hidden environment variable that makes stdout count as a terminal.
pub(crate) const ASSUME_TERMINAL_ENV: &str = "PLAN_CHECKPOINT_ASSUME_TERMINAL";

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always colour, even into a pipe.
    Always,
    /// Never colour.
    Never,
}

/// How to write to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terminal {
    /// Stdout is a terminal (a person reads it): agent text is escaped even
    /// where a pipe would get exact bytes.
    pub(crate) is_terminal: bool,
    /// Write ANSI colours.
    pub(crate) color: bool,
    /// The width to fit tables to; `None` (a pipe) means do not cut.
    pub(crate) width: Option<usize>,
}

impl Terminal {
    /// Looks at the environment and stdout once.
    pub(crate) fn detect(choice: ColorChoice) -> Terminal {
        let assumed = std::env::var_os(ASSUME_TERMINAL_ENV).is_some_and(|value| value == "1");
        let is_terminal = assumed || std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|value| value == "dumb");
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color && !dumb,
        };
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok())
            .filter(|columns| *columns > 0);
        let width = if is_terminal {
            columns.or_else(|| {
                console::Term::stdout()
                    .size_checked()
                    .map(|(_, columns)| usize::from(columns))
            })
        } else {
            None
        };
        Terminal {
            is_terminal,
            color,
            width,
        }
    }

    /// A terminal of this width without colour (tests).
    #[cfg(test)]
    pub(crate) fn sized(width: Option<usize>) -> Terminal {
        Terminal {
            is_terminal: width.is_some(),
            color: false,
            width,
        }
    }

    /// `text` in `style` when colouring, else as it is.
    pub(crate) fn paint(&self, style: Style, text: &str) -> String {
        if self.color && style != Style::new() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }
}

/// The colour of each status word.
pub(crate) fn status_style(status: ApprovalStatus) -> Style {
    let color = match status {
        ApprovalStatus::Pending => AnsiColor::Yellow,
        ApprovalStatus::Approved => AnsiColor::Green,
        ApprovalStatus::Rejected => AnsiColor::Red,
        ApprovalStatus::Expired => AnsiColor::Magenta,
        ApprovalStatus::Interrupted => AnsiColor::Cyan,
    };
    Style::new().fg_color(Some(color.into())).bold()
}

/// The colour of a command run's state: a refused start red, a run still
/// going yellow, an exit green, a stop by a person or a restart cyan (as
/// an interrupted approval), a timeout or a failed start magenta.
pub(crate) fn command_state_style(state: CommandState, refused: bool) -> Style {
    let color = match (refused, state) {
        (true, _) => AnsiColor::Red,
        (false, CommandState::Running) => AnsiColor::Yellow,
        (false, CommandState::Exited) => AnsiColor::Green,
        (false, CommandState::Cancelled | CommandState::Interrupted) => AnsiColor::Cyan,
        (false, CommandState::TimedOut | CommandState::FailedToStart) => AnsiColor::Magenta,
    };
    Style::new().fg_color(Some(color.into())).bold()
}

/// Headers and labels.
pub(crate) fn heading_style() -> Style {
    Style::new().bold()
}

/// Secondary text (relative times, hints).
pub(crate) fn dim_style() -> Style {
    Style::new().dimmed()
}

/// A problem (verification findings).
pub(crate) fn problem_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Red.into())).bold()
}

/// A removed line of a diff.
pub(crate) fn removed_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Red.into()))
}

/// A hunk header (`@@ … @@`) of a diff.
pub(crate) fn hunk_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Cyan.into()))
}

/// A good result (an added line of a diff too).
pub(crate) fn good_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Green.into()))
}
