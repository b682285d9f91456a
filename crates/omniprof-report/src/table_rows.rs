//! How many rows the page's long tables (Operators, Kernels, hardware metrics, Counters,
//! Diff) hold, which ones, and how many they leave out.

use std::cmp::Reverse;

use serde::Serialize;

use omniprof_analysis::{KernelMetrics, KeyAverages, Row};

/// The most rows each of the page's tables holds (Operators, Kernels, hardware metrics,
/// Counters, Diff).
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
    /// The hardware metrics' rows (one per kernel and metric).
    pub metrics: u64,
    /// The Counters table's rows (one per series and value).
    pub counters: u64,
    /// The counter lines not charted (beyond
    /// [`MAX_COUNTER_CHARTS`](crate::MAX_COUNTER_CHARTS)).
    pub counter_charts: u64,
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
    let left_out = heaviest(&mut rows, MAX_TABLE_ROWS, |r| {
        r.self_cpu_time_total_ns
            .saturating_add(r.self_device_time_total_ns)
    });
    (summary.json_of_rows(rows), left_out)
}

/// Keeps the `keep` rows of most `weight` (of rows of one weight, the first), in their
/// order; how many it left out.
pub(crate) fn heaviest<T, W: Ord>(rows: &mut Vec<T>, keep: usize, weight: impl Fn(&T) -> W) -> u64 {
    let left_out = rows.len().saturating_sub(keep);
    if left_out > 0 {
        let mut by_weight: Vec<usize> = (0..rows.len()).collect();
        // Stable: of rows of one weight, the first seen are kept.
        by_weight.sort_by_key(|&i| Reverse(weight(&rows[i])));
        let mut kept = vec![false; rows.len()];
        for &i in &by_weight[..keep] {
            kept[i] = true;
        }
        let mut place = 0;
        rows.retain(|_| {
            place += 1;
            kept[place - 1]
        });
    }
    left_out as u64
}

/// Cuts the hardware metrics to [`MAX_TABLE_ROWS`] rows of the page (one per kernel and
/// metric): the kernels of most device time, in their order, the last one kept perhaps
/// with only its first metrics; how many rows it cut.
pub(crate) fn metrics(metrics: &mut KernelMetrics) -> u64 {
    let total: usize = metrics.rows.iter().map(|r| r.metrics.len()).sum();
    if total <= MAX_TABLE_ROWS {
        return 0;
    }
    let mut by_time: Vec<usize> = (0..metrics.rows.len()).collect();
    by_time.sort_by_key(|&i| Reverse(metrics.rows[i].device_time_ns));
    let mut room = vec![0; metrics.rows.len()];
    let mut left = MAX_TABLE_ROWS;
    for i in by_time {
        room[i] = metrics.rows[i].metrics.len().min(left);
        left -= room[i];
    }
    let mut place = 0;
    metrics.rows.retain_mut(|row| {
        row.metrics.truncate(room[place]);
        place += 1;
        !row.metrics.is_empty()
    });
    (total - MAX_TABLE_ROWS) as u64
}

/// Cuts `rows` (in the view's order) to [`MAX_TABLE_ROWS`]; how many it cut.
pub(crate) fn cap<T>(rows: &mut Vec<T>) -> u64 {
    let left_out = rows.len().saturating_sub(MAX_TABLE_ROWS);
    rows.truncate(MAX_TABLE_ROWS);
    left_out as u64
}
