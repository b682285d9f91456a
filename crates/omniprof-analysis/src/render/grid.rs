//! Plain aligned text tables and the number format shared by the metric and counter
//! summaries: a title row, a rule, then the rows, each column as wide as its widest cell
//! (text left-aligned, numbers right-aligned), control characters printed as `\u{1b}`
//! ([`visible`]) and counted so.

use std::fmt::Write;

use super::visible::visible;

/// A number as written in summaries: the shortest text that reads back as the same `f64`
/// (so integers print without a fraction, and hand-entered values print as entered).
pub(crate) fn number(v: f64) -> String {
    format!("{v}")
}

/// Renders `rows` under `headers`; `numeric[i]` right-aligns column `i`.
pub(crate) fn render(headers: &[&str], numeric: &[bool], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<std::borrow::Cow<str>>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| visible(cell)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, cell) in cells.enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if numeric[i] {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(&mut headers.iter().copied());
    out.push('\n');
    let rule: usize = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    out.push_str(&"-".repeat(rule));
    out.push('\n');
    for row in &rows {
        // Writing into a `String` cannot fail.
        let _ = writeln!(out, "{}", line(&mut row.iter().map(|cell| &**cell)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_print_exactly() {
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number(1.5e-7), "0.00000015");
        let text = render(
            &["Name", "Sum"],
            &[false, true],
            &[
                vec!["a".into(), "1".into()],
                vec!["long".into(), "12.5".into()],
            ],
        );
        assert_eq!(text, "Name   Sum\n----------\na        1\nlong  12.5\n");
    }
}
