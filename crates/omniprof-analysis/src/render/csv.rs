//! The rows as CSV (RFC 4180): a header line, then one line per row. Times are
//! microseconds with three decimals (exact nanoseconds); averages are rounded to the same.
//! Memory usages are bytes; `flops` is the rows' FLOPs (0 without). Grouped by shapes, an
//! `input_shapes` column follows the name; grouped by stack, a `stack` column (the frames
//! innermost first, each followed by `;`, as PyTorch's `Call stack` arg spells them). A
//! leading column may be added, the same value on every line (a job's `rank`).

use std::fmt::Write;

use crate::key_averages::{us, KeyAverages, TableOptions};

const TIME_COLUMNS: &str = "count,self_cpu_time_total_us,cpu_time_total_us,cpu_time_avg_us,\
self_device_time_total_us,device_time_total_us,device_time_avg_us,on_device,user_annotation,\
cpu_memory_usage,self_cpu_memory_usage,device_memory_usage,self_device_memory_usage,flops";

/// A field, kept as it is (CSV is data: `-5` or `=x` stays what the trace holds), quoted
/// when it holds a comma, a quote (kernel names often do) or a control character (a line
/// break, or an ESC a terminal would obey were the file shown unquoted).
pub(crate) fn field(text: &str) -> String {
    if text.contains([',', '"']) || text.chars().any(char::is_control) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

impl KeyAverages {
    /// One line per row with a header; times in microseconds.
    pub fn csv(&self, options: &TableOptions) -> String {
        render(self, options, None)
    }

    /// [`csv`](Self::csv) with a first column `column` holding `value` on every line (the
    /// rank, when a job's traces are listed one after the other).
    pub fn csv_with_column(&self, options: &TableOptions, column: &str, value: &str) -> String {
        render(self, options, Some((column, value)))
    }
}

/// `lead`: a column (name, value) put before the others, the same on every line.
fn render(summary: &KeyAverages, options: &TableOptions, lead: Option<(&str, &str)>) -> String {
    let by_shapes = summary.rows.iter().any(|r| r.input_shapes.is_some());
    let by_stack = summary.rows.iter().any(|r| r.stack.is_some());
    let by_overload = summary.rows.iter().any(|r| r.overload_name.is_some());
    let mut out = String::new();
    if let Some((column, _)) = lead {
        out.push_str(&field(column));
        out.push(',');
    }
    out.push_str("name,");
    if by_shapes {
        out.push_str("input_shapes,");
    }
    if by_overload {
        out.push_str("overload_name,");
    }
    if by_stack {
        out.push_str("stack,");
    }
    out.push_str(TIME_COLUMNS);
    out.push('\n');
    for row in summary.select(options) {
        if let Some((_, value)) = lead {
            out.push_str(&field(value));
            out.push(',');
        }
        out.push_str(&field(&row.name));
        if by_shapes {
            out.push(',');
            out.push_str(&field(row.input_shapes.as_deref().unwrap_or("")));
        }
        if by_overload {
            out.push(',');
            out.push_str(&field(row.overload_name.as_deref().unwrap_or("")));
        }
        if by_stack {
            let frames: String = row
                .stack
                .iter()
                .flat_map(|s| s.iter())
                .map(|f| format!("{f};"))
                .collect();
            out.push(',');
            out.push_str(&field(&frames));
        }
        // Writing into a `String` cannot fail.
        let _ = writeln!(
            out,
            ",{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{}",
            row.count,
            us(row.self_cpu_time_total_ns),
            us(row.cpu_time_total_ns),
            row.cpu_time_avg_us(),
            us(row.self_device_time_total_ns),
            us(row.device_time_total_ns),
            row.device_time_avg_us(),
            row.on_device,
            row.is_user_annotation,
            row.cpu_memory_usage,
            row.self_cpu_memory_usage,
            row.device_memory_usage,
            row.self_device_memory_usage,
            row.flops,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(field("aten::mm"), "aten::mm");
        assert_eq!(field("k<int, 2>"), "\"k<int, 2>\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn fields_with_a_control_character_are_quoted_and_kept() {
        assert_eq!(field("a\u{1b}]0;x\u{7}b"), "\"a\u{1b}]0;x\u{7}b\"");
        assert_eq!(field("a\tb"), "\"a\tb\"");
        assert_eq!(field("=1+2"), "=1+2");
        assert_eq!(field("-5"), "-5");
    }
}
