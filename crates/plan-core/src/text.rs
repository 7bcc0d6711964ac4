//! Which characters of agent-written text can take over a terminal.
//!
//! Title, question and Markdown are written by an agent and are untrusted. A
//! terminal obeys control characters (ESC starts cursor moves, erases,
//! hyperlinks and clipboard writes; C1 `U+009B` is a one-character CSI) and
//! reorders text around Unicode bidirectional controls, so a person could
//! read something other than what is recorded. This module is the one
//! definition of those characters: SubmitPlan refuses them in `title` and
//! `question`, and every human-readable frontend escapes them when it shows
//! agent text (the Markdown is kept byte for byte, so it is escaped when
//! shown instead). It only classifies; it formats nothing.

/// Whether `c` is a character a terminal would act on instead of showing:
///
/// - C0 controls `U+0000..=U+001F` (tab and newline included), DEL `U+007F`
///   and C1 controls `U+0080..=U+009F`;
/// - the bidirectional embeddings and overrides `U+202A..=U+202E`, the
///   isolates `U+2066..=U+2069`, and the invisible direction marks
///   `U+200E`, `U+200F` and `U+061C`;
/// - the line and paragraph separators `U+2028` and `U+2029`.
pub fn is_terminal_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// Whether a SubmitPlan `title` or `question` may hold `text`: no
/// [`is_terminal_control`] character at all. A tab is refused too: a title
/// is one line of a table and a question one line of a prompt, and a tab's
/// width is up to the terminal, so it would break the alignment a reviewer
/// relies on. A newline is refused for the same reason.
pub fn is_plain_line(text: &str) -> bool {
    !text.chars().any(is_terminal_control)
}
