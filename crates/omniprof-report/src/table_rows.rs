//! How many rows the page's long tables (Operators, Kernels, Diff) hold, which ones, and
//! how many they leave out.

use serde::Serialize;

use omniprof_analysis::{KeyAverages, Row};

/// The most rows the Operators, Kernels and Diff views' tables each hold.
///
/// A name per op instance (an id in it) makes a row per event: 100,000 ops and 100,000
/// kernels made an 82 MB page of 300,031 rows that headless Chromium took 27–32 s to
/// open, about 0.1 ms a row. 1,000 rows keep each table near 0.1 s to draw and well under
/// 1 MB of JSON (a row takes 100–500 bytes), while a trace with repeated names, the common
/// case (tens to hundreds of distinct ops and kernels), loses none. The rows left out are
/// counted in [`LeftOut`]; `summary` and `diff` print every row.
pub const MAX_TABLE_ROWS: usize = 1000;

/// Per table, the rows the page leaves out (beyond [`MAX_TABLE_ROWS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// The Operators view's key-averages rows.
    pub operators: u64,
    /// The Kernels view's kernel names.
    pub kernels: u64,
    /// The Diff view's rows.
    pub diff: u64,
}

/// The Operators view's [`KeyAverages::json`], of at most [`MAX_TABLE_ROWS`] rows, and
/// how many it left out. With more, it keeps those with the most self host plus self
/// device time (the diff's ranking; the first events' order says nothing of weight, and
/// one key alone would drop all the host ops or all the kernels), in the order of first
/// events; its totals are still of every row.
pub(crate) fn operators(summary: &KeyAverages) -> (String, u64) {
    let mut rows: Vec<&Row> = summary.rows.iter().collect();
    let left_out = rows.len().saturating_sub(MAX_TABLE_ROWS);
    if left_out > 0 {
        let weight = |r: &Row| {
            r.self_cpu_time_total_ns
                .saturating_add(r.self_device_time_total_ns)
        };
        let mut by_weight: Vec<usize> = (0..rows.len()).collect();
        // Stable: of rows of one weight, the first seen are kept.
        by_weight.sort_by_key(|&i| std::cmp::Reverse(weight(rows[i])));
        by_weight.truncate(MAX_TABLE_ROWS);
        by_weight.sort_unstable();
        rows = by_weight.into_iter().map(|i| rows[i]).collect();
    }
    (summary.json_of_rows(rows), left_out as u64)
}

/// Cuts `rows` (in the view's order) to [`MAX_TABLE_ROWS`]; how many it cut.
pub(crate) fn cap<T>(rows: &mut Vec<T>) -> u64 {
    let left_out = rows.len().saturating_sub(MAX_TABLE_ROWS);
    rows.truncate(MAX_TABLE_ROWS);
    left_out as u64
}
