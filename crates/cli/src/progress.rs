//! Progress for long work (`approvals verify` over many approvals, `db
//! migrate`), drawn on stderr only when stderr is a terminal: into a pipe
//! or a log file nothing is written. Progress never carries agent text.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Fewer steps than this finish before a bar is worth drawing.
pub(crate) const BAR_FROM_STEPS: u64 = 1000;

/// A bar counting `len` steps of `what` (e.g. "approvals verified"), or
/// nothing for fewer than [`BAR_FROM_STEPS`] steps.
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    if len < BAR_FROM_STEPS {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{bar:30}} {{human_pos}}/{{human_len}} {what} ({{eta}} left)"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A spinner with a message, for work that cannot count its steps.
pub(crate) fn spinner(message: &str) -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.set_message(message.to_owned());
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}
