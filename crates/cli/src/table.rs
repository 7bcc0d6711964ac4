//! Tables for people: columns aligned by display width (CJK and emoji take
//! two columns), sized to the terminal, written as rows arrive.
//!
//! A table lays itself out from its first rows (up to [`LAYOUT_ROWS`]) and
//! then streams every further row with the same widths, so a whole history
//! can be listed without holding it. On a terminal that is too narrow it
//! drops the least important columns first, then cuts the one flexible
//! column (marking the cut with `…`); a column marked whole (ids, which must
//! stay pasteable) is never cut. Into a pipe nothing is cut. Every cell is
//! escaped ([`crate::escape::line`]) before it is measured, so agent text
//! can neither move the cursor nor throw the alignment off. This module
//! knows nothing about approvals; any command's rows fit it.

use anstyle::Style;
use unicode_width::UnicodeWidthStr;

use crate::Failure;
use crate::escape;
use crate::render::write_stdout;
use crate::terminal::{Terminal, heading_style};

/// Rows a table looks at before it fixes its column widths.
pub(crate) const LAYOUT_ROWS: usize = 200;

/// Bytes collected before they are written to stdout.
const FLUSH_BYTES: usize = 64 * 1024;

/// The space between two columns.
const GAP: &str = "  ";

/// One column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// The header.
    pub(crate) header: &'static str,
    /// When the terminal is too narrow, columns with the highest rank go
    /// first; rank 0 is never dropped.
    pub(crate) drop_rank: u8,
    /// The column that gives up width when the row is still too wide.
    pub(crate) flexible: bool,
    /// Never cut (the text must stay usable as it is, e.g. an id).
    pub(crate) whole: bool,
}

impl Column {
    /// A column kept at its natural width, dropped at `drop_rank`.
    pub(crate) const fn new(header: &'static str, drop_rank: u8) -> Column {
        Column {
            header,
            drop_rank,
            flexible: false,
            whole: false,
        }
    }

    /// The column that shrinks to fit (never dropped).
    pub(crate) const fn flexible(header: &'static str) -> Column {
        Column {
            header,
            drop_rank: 0,
            flexible: true,
            whole: false,
        }
    }

    /// A column never cut and never dropped.
    pub(crate) const fn whole(header: &'static str) -> Column {
        Column {
            header,
            drop_rank: 0,
            flexible: false,
            whole: true,
        }
    }
}

/// One cell: its text (raw; the table escapes it) and its style.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    /// Unstyled text.
    pub(crate) fn plain(text: impl Into<String>) -> Cell {
        Cell::styled(text, Style::new())
    }

    /// Styled text (the style shows only when colouring).
    pub(crate) fn styled(text: impl Into<String>, style: Style) -> Cell {
        Cell {
            text: escape::line(&text.into()).into_owned(),
            style,
        }
    }
}

/// The narrowest a flexible column gets before other columns are dropped.
const FLEXIBLE_MIN: usize = 12;

/// Which columns show, and how wide.
#[derive(Debug)]
struct Layout {
    shown: Vec<usize>,
    widths: Vec<usize>,
}

/// A table being written.
pub(crate) struct Table {
    columns: Vec<Column>,
    term: Terminal,
    waiting: Vec<Vec<Cell>>,
    layout: Option<Layout>,
    out: String,
    rows: u64,
}

impl Table {
    /// A table with these columns, for this terminal.
    pub(crate) fn new(columns: Vec<Column>, term: Terminal) -> Table {
        Table {
            columns,
            term,
            waiting: Vec::new(),
            layout: None,
            out: String::new(),
            rows: 0,
        }
    }

    /// Adds a row (one cell per column).
    pub(crate) fn push(&mut self, row: Vec<Cell>) -> Result<(), Failure> {
        self.rows += 1;
        match &self.layout {
            Some(_) => self.render(&row),
            None => {
                self.waiting.push(row);
                if self.waiting.len() >= LAYOUT_ROWS {
                    self.lay_out();
                }
            }
        }
        if self.out.len() >= FLUSH_BYTES {
            write_stdout(self.out.as_bytes())?;
            self.out.clear();
        }
        Ok(())
    }

    /// How many rows were pushed.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes what is left (the header too, when fewer rows than
    /// [`LAYOUT_ROWS`] came). A table without rows writes nothing.
    pub(crate) fn finish(mut self) -> Result<(), Failure> {
        if self.layout.is_none() && !self.waiting.is_empty() {
            self.lay_out();
        }
        write_stdout(self.out.as_bytes())
    }

    fn lay_out(&mut self) {
        let mut natural: Vec<usize> = self.columns.iter().map(|column| column.header.width()).collect();
        for row in &self.waiting {
            for (width, cell) in natural.iter_mut().zip(row) {
                *width = (*width).max(cell.text.width());
            }
        }
        let mut shown: Vec<usize> = (0..self.columns.len()).collect();
        let mut widths = natural.clone();
        if let Some(limit) = self.term.width {
            let total = |shown: &[usize], widths: &[usize]| {
                shown.iter().map(|&index| widths[index]).sum::<usize>()
                    + GAP.len() * shown.len().saturating_sub(1)
            };
            let flexible = self.columns.iter().position(|column| column.flexible);
            // Drop columns, least important first, while even a flexible
            // column at its minimum would not fit.
            loop {
                let mut squeezed = widths.clone();
                if let Some(index) = flexible {
                    squeezed[index] = squeezed[index].min(FLEXIBLE_MIN);
                }
                if total(&shown, &squeezed) <= limit {
                    break;
                }
                let droppable = shown
                    .iter()
                    .copied()
                    .filter(|&index| self.columns[index].drop_rank > 0)
                    .max_by_key(|&index| self.columns[index].drop_rank);
                match droppable {
                    Some(index) => shown.retain(|&kept| kept != index),
                    None => break,
                }
            }
            if let Some(index) = flexible {
                let rest = total(&shown, &widths) - widths[index];
                widths[index] =
                    widths[index].min(limit.saturating_sub(rest).max(FLEXIBLE_MIN.min(widths[index])));
            }
        }
        let layout = Layout {
            widths: shown.iter().map(|&index| widths[index]).collect(),
            shown,
        };
        let header: Vec<Cell> = self
            .columns
            .iter()
            .map(|column| Cell::styled(column.header, heading_style()))
            .collect();
        self.layout = Some(layout);
        self.render(&header);
        for row in std::mem::take(&mut self.waiting) {
            self.render(&row);
        }
    }

    fn render(&mut self, row: &[Cell]) {
        let Some(layout) = &self.layout else {
            return;
        };
        let mut line = String::new();
        let last = layout.shown.len().saturating_sub(1);
        for (position, (&index, &width)) in layout.shown.iter().zip(&layout.widths).enumerate() {
            let Some(cell) = row.get(index) else {
                continue;
            };
            let column = &self.columns[index];
            let text = if column.whole || self.term.width.is_none() {
                cell.text.clone()
            } else {
                fit(&cell.text, width)
            };
            let pad = width.saturating_sub(text.width());
            line.push_str(&self.term.paint(cell.style, &text));
            if position < last {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(GAP);
            }
        }
        self.out.push_str(line.trim_end());
        self.out.push('\n');
    }
}

/// Cuts `text` to at most `width` display columns, marking a cut with `…`.
pub(crate) fn fit(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut cut = String::new();
    let mut used = 0;
    for c in text.chars() {
        let char_width = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + char_width + 1 > width {
            break;
        }
        cut.push(c);
        used += char_width;
    }
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// The lines a table writes, without writing them.
    fn lines(term: Terminal, rows: &[[&str; 3]]) -> Vec<String> {
        let columns = vec![
            Column::whole("ID"),
            Column::new("WHEN", 1),
            Column::flexible("TITLE"),
        ];
        let mut table = Table::new(columns, term);
        for row in rows {
            table
                .waiting
                .push(row.iter().map(|text| Cell::plain(*text)).collect());
        }
        table.lay_out();
        table.out.lines().map(str::to_owned).collect()
    }

    #[test]
    fn narrow_terminals_drop_then_cut_and_pipes_keep_everything() {
        let rows = [
            ["id-1", "3 weeks ago", "Split the parser into lexer and parser"],
            ["id-22", "now", "解析器"],
        ];
        let piped = lines(Terminal::sized(None), &rows);
        assert_eq!(
            piped[1],
            "id-1   3 weeks ago  Split the parser into lexer and parser"
        );
        let wide = lines(Terminal::sized(Some(40)), &rows);
        assert_eq!(wide[1], "id-1   3 weeks ago  Split the parser in…");
        assert_eq!(wide[2], "id-22  now          解析器");
        // Too narrow for WHEN and a 12-column title: WHEN goes first.
        let narrow = lines(Terminal::sized(Some(20)), &rows);
        assert_eq!(narrow, ["ID     TITLE", "id-1   Split the pa…", "id-22  解析器"]);
        // Ids are never cut, even when nothing else fits.
        let tiny = lines(Terminal::sized(Some(4)), &rows);
        assert!(tiny[2].starts_with("id-22"), "{tiny:?}");
    }

    #[test]
    fn cutting_counts_display_columns() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        // Each CJK character is two columns wide.
        assert_eq!(fit("解析器を分割", 7), "解析器…");
        assert_eq!(fit("解析器を分割", 7).width(), 7);
        assert_eq!(fit("🚀🚀🚀", 4), "🚀…");
    }
}
