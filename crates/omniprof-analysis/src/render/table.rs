//! The text table, laid out as PyTorch's `key_averages().table()` lays it out.
//!
//! - Columns: `Name`; `Self CPU %`, `Self CPU`, `CPU total %`, `CPU total`, `CPU time avg`;
//!   when any row has self device time, `Self <DEV>`, `Self <DEV> %`, `<DEV> total`,
//!   `<DEV> time avg`; when memory was profiled ([`KeyAverages::profile_memory`]),
//!   `CPU Mem`, `Self CPU Mem` and, when any row has self device memory > 0, `<DEV> Mem`,
//!   `Self <DEV> Mem`; `# of Calls`; when grouped by shapes, `Input Shapes` (also when no
//!   row has any, where PyTorch leaves the column out: the column of `[]`s says that the
//!   trace has none, as the CSV's does); with FLOPs ([`KeyAverages::with_flops`]) and a row
//!   with FLOPs > 0, `Total <unit>FLOPs`, scaled by PyTorch's `auto_scale_flops` of the
//!   smallest positive count (`%8.3f` cells, `--` for none); when some row has a stack
//!   ([`Row::stack`]), `Source Location`, left-aligned, placed before `Total FLOPs` in the
//!   header but after it in the rows (PyTorch's order: with both, each row's FLOPs print
//!   under `Source Location` and its first frame under `Total FLOPs`). Every other cell is
//!   right-aligned in its width; every cell is followed by two spaces.
//! - Stacks: a row's first frame is its `Source Location` cell; each further frame prints
//!   on a line of its own, in the last column with every other cell empty; then a line of
//!   empty cells ends the row (for every row, with a stack or not). A frame longer than the
//!   column prints as `...` and its last width − 3 characters.
//! - Control characters in names, shapes and frames print as `\u{1b}` ([`visible`]); widths
//!   count the escaped text, so a row stays one line and aligned.
//! - Widths: 12, except `Name` (longest name of *all* rows + 4, at most
//!   `max_name_column_width`, 55), `Input Shapes` (longest + 4, at most
//!   `max_shapes_column_width`, 80) and `Source Location` (longest frame of all rows + 4,
//!   at most `max_src_column_width`, 75). A name of the width less 3 or more prints as its first
//!   width − 3 characters and `...`; shapes are cut to the column width.
//! - Lines: with a [`header`](TableOptions::header), a rule of `=` as wide as the table and
//!   the header; with [`top_level_events_only`](TableOptions::top_level_events_only), a rule
//!   and `This report only display top-level ops statistics`; then separator, header,
//!   separator, rows, separator (each ending with two spaces), then
//!   `Self CPU time total: <t>` and, with device columns, `Self <DEV> time total: <t>`.
//! - Memory: `_format_memory`: `%.2f` in GB, MB or KB (of 1024) from 1 of them, else
//!   `<n> B`.
//! - Times: `%.3f` in s, ms or us (from 1 s, from 1 ms, below). Percentages: `%.2f%%` of
//!   the totals over all rows, `NaN` when that total is 0; async rows print `0` as
//!   `CPU total %`.

use std::fmt::Write;
use std::sync::Arc;

use super::visible::visible;
use crate::key_averages::{KeyAverages, Row, TableOptions};

const COLUMN_WIDTH: usize = 12;
/// The text after every cell.
const SPACING: &str = "  ";

/// A time in microseconds as PyTorch prints it (its `_format_time`): in `s`, `ms` or `us`
/// by size, with three decimals.
///
/// ```
/// assert_eq!(omniprof_analysis::format_time(65_250.634), "65.251ms");
/// ```
pub fn format_time(time_us: f64) -> String {
    if time_us >= 1_000_000.0 {
        format!("{:.3}s", time_us / 1_000_000.0)
    } else if time_us >= 1_000.0 {
        format!("{:.3}ms", time_us / 1_000.0)
    } else {
        format!("{time_us:.3}us")
    }
}

/// A share of a total as PyTorch prints it.
fn format_share(time_us: f64, total_us: f64) -> String {
    if total_us == 0.0 {
        "NaN".to_string()
    } else {
        format!("{:.2}%", time_us * 100.0 / total_us)
    }
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// PyTorch's `auto_scale_flops`: the factor FLOPs are multiplied by and the header's unit,
/// chosen by the thousands in `flops` (at least 1; `PFLOPs` at most).
pub(crate) fn auto_scale_flops(flops: u64) -> (f64, &'static str) {
    const UNITS: [&str; 6] = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"];
    let log = ((flops as f64).log10() / 3.0)
        .min((UNITS.len() - 1) as f64)
        .max(0.0);
    (10f64.powf(log.floor() * -3.0), UNITS[log as usize])
}

/// A FLOPs cell: `%8.3f` of the scaled count, `--` for none.
pub(crate) fn format_flops(flops: u64, scale: f64) -> String {
    if flops == 0 {
        "--".to_string()
    } else {
        format!("{:8.3}", flops as f64 * scale)
    }
}

/// `nbytes` as PyTorch's `_format_memory` prints it (`64.00 KB`, `-4 B`; 1 KB = 1024 B).
pub(crate) fn format_memory(nbytes: i64) -> String {
    const KB: f64 = 1024.0;
    const MB: f64 = 1024.0 * KB;
    const GB: f64 = 1024.0 * MB;
    let abs = nbytes.unsigned_abs() as f64;
    let v = nbytes as f64;
    if abs >= GB {
        format!("{:.2} GB", v / GB)
    } else if abs >= MB {
        format!("{:.2} MB", v / MB)
    } else if abs >= KB {
        format!("{:.2} KB", v / KB)
    } else {
        format!("{nbytes} B")
    }
}

/// A name, its control characters made [`visible`], cut to fit the name column (`None`: no
/// limit).
pub(crate) fn fit_name(name: &str, max_width: Option<usize>) -> String {
    let name = visible(name);
    let Some(max_width) = max_width else {
        return name.to_string();
    };
    let keep = max_width.saturating_sub(3);
    if char_len(&name) >= keep {
        let cut: String = name.chars().take(keep).collect();
        cut + "..."
    } else {
        name.into_owned()
    }
}

/// The input shapes of a row, when the table shows them ("[]" means none).
fn shapes(row: &Row) -> Option<&str> {
    row.input_shapes.as_deref()
}

/// The overload name of a row (`""`: the default overload, or not grouped by overload).
fn overload(row: &Row) -> &str {
    row.overload_name.as_deref().unwrap_or("")
}

/// The frames of a row's stack (none when it has none).
fn frames(row: &Row) -> &[Arc<str>] {
    row.stack.as_deref().unwrap_or(&[])
}

/// PyTorch's `trim_path`: a frame (made [`visible`]) longer than `width` as its last
/// `width` characters, the first three of which become `...`.
fn trim_frame(frame: &str, width: usize) -> String {
    let frame = visible(frame);
    let len = char_len(&frame);
    if len <= width {
        return frame.into_owned();
    }
    let tail: String = frame.chars().skip(len - width).collect();
    if width > 3 {
        format!("...{}", tail.chars().skip(3).collect::<String>())
    } else {
        tail
    }
}

impl KeyAverages {
    /// The text PyTorch's `key_averages().table(sort_by, row_limit)` prints for these rows,
    /// character for character (empty when there are no rows, as in PyTorch).
    pub fn table(&self, options: &TableOptions) -> String {
        render(self, options)
    }
}

fn render(summary: &KeyAverages, options: &TableOptions) -> String {
    let rows = &summary.rows;
    if rows.is_empty() {
        return String::new();
    }
    let device = summary.device_label();
    let time = |time_us: f64| match options.time_unit {
        Some(unit) => unit.format(time_us),
        None => format_time(time_us),
    };
    let has_device = summary.has_device_time();
    let has_shapes = rows.iter().any(|r| shapes(r).is_some());
    // PyTorch's `Overload Name` column: when some row's is not the default overload's.
    let has_overloads = rows.iter().any(|r| !overload(r).is_empty());
    let has_device_memory = rows.iter().any(|r| r.self_device_memory_usage > 0);
    let flops_scale = rows
        .iter()
        .map(|r| r.flops)
        .filter(|&f| f > 0)
        .min()
        .filter(|_| summary.with_flops)
        .map(auto_scale_flops);

    let name_width = rows
        .iter()
        .map(|r| char_len(&visible(&r.name)) + 4)
        .max()
        .unwrap_or(0)
        .min(options.max_name_column_width.unwrap_or(usize::MAX));
    let shapes_width = rows
        .iter()
        .map(|r| shapes(r).map_or(0, |s| char_len(&visible(s))) + 4)
        .max()
        .unwrap_or(0)
        .min(options.max_shapes_column_width.unwrap_or(usize::MAX));
    let has_stack = rows.iter().any(|r| !frames(r).is_empty());
    let src_width = rows
        .iter()
        .flat_map(|r| frames(r).iter().map(|f| char_len(&visible(f)) + 4))
        .max()
        .unwrap_or(0)
        .min(options.max_src_column_width.unwrap_or(usize::MAX));

    let mut headers = vec!["Name".to_string()];
    if has_overloads {
        headers.push("Overload Name".into());
    }
    headers.extend([
        "Self CPU %".into(),
        "Self CPU".into(),
        "CPU total %".into(),
        "CPU total".into(),
        "CPU time avg".into(),
    ]);
    if has_device {
        headers.extend([
            format!("Self {device}"),
            format!("Self {device} %"),
            format!("{device} total"),
            format!("{device} time avg"),
        ]);
    }
    if summary.profile_memory {
        headers.extend(["CPU Mem".to_string(), "Self CPU Mem".into()]);
        if has_device_memory {
            headers.extend([format!("{device} Mem"), format!("Self {device} Mem")]);
        }
    }
    headers.push("# of Calls".into());
    let mut widths = vec![COLUMN_WIDTH; headers.len()];
    widths[0] = name_width;
    if has_overloads {
        // As wide as the names, as in PyTorch.
        widths[1] = name_width;
    }
    if has_shapes {
        headers.push("Input Shapes".into());
        widths.push(shapes_width);
    }
    // The one left-aligned column.
    let src_column = has_stack.then_some(headers.len());
    if has_stack {
        headers.push("Source Location".into());
        widths.push(src_width);
    }
    if let Some((_, unit)) = flops_scale {
        headers.push(format!("Total {unit}"));
        widths.push(COLUMN_WIDTH);
    }
    let line_length = widths.iter().map(|w| w + SPACING.len()).sum::<usize>() - SPACING.len();

    let sorted = summary.sorted(options.sort_by);
    let (cpu_total, device_total) = KeyAverages::self_time_totals_us(&sorted);
    let separator: String = widths.iter().map(|&w| "-".repeat(w) + SPACING).collect();
    let line = |cells: &[String]| -> String {
        let mut out = String::new();
        for (i, (cell, &width)) in cells.iter().zip(&widths).enumerate() {
            // Writing into a `String` cannot fail.
            let _ = if src_column == Some(i) {
                write!(out, "{cell:<width$}{SPACING}")
            } else {
                write!(out, "{cell:>width$}{SPACING}")
            };
        }
        out
    };

    let mut out = String::new();
    if let Some(header) = &options.header {
        let _ = writeln!(out, "{}\n{header}", "=".repeat(line_length));
    }
    if options.top_level_events_only {
        let _ = writeln!(
            out,
            "{}\nThis report only display top-level ops statistics",
            "=".repeat(line_length)
        );
    }
    for text in [separator.clone(), line(&headers), separator.clone()] {
        out.push_str(&text);
        out.push('\n');
    }
    for row in KeyAverages::narrow(sorted, options) {
        let mut cells = vec![fit_name(&row.name, options.max_name_column_width)];
        if has_overloads {
            cells.push(fit_name(overload(row), options.max_name_column_width));
        }
        cells.extend([
            format_share(row.self_cpu_time_total_us, cpu_total),
            time(row.self_cpu_time_total_us),
            format_share(row.cpu_time_total_us, cpu_total),
            time(row.cpu_time_total_us),
            time(row.cpu_time_avg_us()),
        ]);
        if has_device {
            cells.extend([
                time(row.self_device_time_total_us),
                format_share(row.self_device_time_total_us, device_total),
                time(row.device_time_total_us),
                time(row.device_time_avg_us()),
            ]);
        }
        if summary.profile_memory {
            cells.extend([
                format_memory(row.cpu_memory_usage),
                format_memory(row.self_cpu_memory_usage),
            ]);
            if has_device_memory {
                cells.extend([
                    format_memory(row.device_memory_usage),
                    format_memory(row.self_device_memory_usage),
                ]);
            }
        }
        cells.push(row.count.to_string());
        if has_shapes {
            cells.push(
                visible(shapes(row).unwrap_or(""))
                    .chars()
                    .take(shapes_width)
                    .collect(),
            );
        }
        if let Some((scale, _)) = flops_scale {
            cells.push(format_flops(row.flops, scale));
        }
        if has_stack {
            let first = frames(row).first().map(|f| trim_frame(f, src_width));
            cells.push(first.unwrap_or_default());
        }
        out.push_str(&line(&cells));
        out.push('\n');
        if has_stack {
            let mut cells = vec![String::new(); headers.len()];
            for frame in frames(row).iter().skip(1) {
                cells[headers.len() - 1] = trim_frame(frame, src_width);
                out.push_str(&line(&cells));
                out.push('\n');
            }
            cells[headers.len() - 1].clear();
            out.push_str(&line(&cells));
            out.push('\n');
        }
    }
    out.push_str(&separator);
    out.push('\n');
    let _ = writeln!(out, "Self CPU time total: {}", time(cpu_total));
    if has_device {
        let _ = writeln!(out, "Self {device} time total: {}", time(device_total));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_shares_format_as_in_pytorch() {
        assert_eq!(format_time(602.183), "602.183us");
        assert_eq!(format_time(65_250.634), "65.251ms");
        assert_eq!(format_time(108.353 / 3.0), "36.118us");
        assert_eq!(format_time(999.9996), "1000.000us");
        assert_eq!(format_time(1_000.0), "1.000ms");
        assert_eq!(format_time(2_500_000.0), "2.500s");
        assert_eq!(format_time(0.0), "0.000us");
        assert_eq!(format_time(-3.0), "-3.000us");
        assert_eq!(format_share(602.183, 127_392.143), "0.47%");
        assert_eq!(format_share(1.0, 1.0), "100.00%");
        assert_eq!(format_share(0.0, 0.0), "NaN");
    }

    #[test]
    fn long_frames_keep_their_end_as_pytorchs_trim_path() {
        assert_eq!(trim_frame("abcdef", 6), "abcdef");
        assert_eq!(trim_frame("abcdefgh", 6), "...fgh");
        assert_eq!(trim_frame("abcdefgh", 3), "fgh");
        assert_eq!(trim_frame("ééééé", 4), "...é");
    }

    #[test]
    fn long_names_are_cut_at_52_characters() {
        let max = Some(55);
        let name = "n".repeat(60);
        assert_eq!(fit_name(&name, max), format!("{}...", "n".repeat(52)));
        assert_eq!(fit_name(&"n".repeat(52), max).len(), 55);
        assert_eq!(fit_name(&"n".repeat(51), max), "n".repeat(51));
        assert_eq!(fit_name(&"é".repeat(60), max).chars().count(), 55);
        assert_eq!(
            fit_name(&"n".repeat(20), Some(20)),
            format!("{}...", "n".repeat(17))
        );
        assert_eq!(fit_name(&name, None), name);
    }
}
