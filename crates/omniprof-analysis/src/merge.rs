//! The key averages of several traces as one (the ranks of a job): rows with the same key
//! (name, input shapes, overload name, stack, and the host / device, legacy and user-range
//! flags) add up
//! exactly, counts, nanosecond totals, memory and FLOPs, and PyTorch's float sums in the
//! order the traces are given; nothing is an average of averages, which the averages
//! divide out of the sums at print time.

use std::sync::Arc;

use crate::key_averages::{KeyAverages, Row};
use crate::stacks::Stack;
use omniprof_trace::FastMap;

/// What makes two rows of different traces the same row.
type RowKey = (
    Arc<str>,
    Option<Arc<str>>,
    Option<Arc<str>>,
    Option<Stack>,
    bool, // on_device
    bool, // is_legacy
    bool, // is_user_annotation
);

fn row_key(row: &Row) -> RowKey {
    (
        row.name.clone(),
        row.input_shapes.clone(),
        row.overload_name.clone(),
        row.stack.clone(),
        row.on_device,
        row.is_legacy,
        row.is_user_annotation,
    )
}

impl KeyAverages {
    /// Adds `other`'s rows to these: a row with the same key is summed into this one (its
    /// `is_async` and `has_cpu_parent` stay this one's, as a row keeps its first event's),
    /// a new row is appended. The memory and FLOPs columns are shown if either side shows
    /// them; the device name stays this one's (`other`'s when this has no rows).
    ///
    /// ```
    /// use omniprof_analysis::{key_averages, KeyAveragesOptions};
    /// use omniprof_trace::{Activity, ActivityType, Trace};
    ///
    /// let rank = |ns: i64| {
    ///     let mut trace = Trace::new(0, 1_000_000);
    ///     trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, ns));
    ///     key_averages(&trace, &KeyAveragesOptions::default())
    /// };
    /// let mut job = rank(100_000);
    /// job.merge(&rank(300_000));
    /// assert_eq!(job.rows[0].count, 2);
    /// assert_eq!(job.rows[0].cpu_time_total_ns, 400_000);
    /// assert_eq!(job.rows[0].cpu_time_avg_us(), 200.0);
    /// ```
    pub fn merge(&mut self, other: &KeyAverages) {
        if self.rows.is_empty() {
            self.device_name = other.device_name.clone();
        }
        self.profile_memory |= other.profile_memory;
        self.with_flops |= other.with_flops;
        self.too_deep += other.too_deep;
        let mut index: FastMap<RowKey, usize> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| (row_key(r), i))
            .collect();
        for row in &other.rows {
            let key = row_key(row);
            match index.get(&key) {
                Some(&i) => self.rows[i].add(row),
                None => {
                    index.insert(key, self.rows.len());
                    self.rows.push(row.clone());
                }
            }
        }
    }

    /// The rows of several traces summed ([`merge`](Self::merge) in the order given), then
    /// ordered by name (then shapes, stack, host before device), so that a job's summary
    /// reads the same whatever the traces' clocks: a sort by a column keeps that order
    /// among equal values.
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a KeyAverages>) -> KeyAverages {
        let mut job = KeyAverages {
            rows: Vec::new(),
            device_name: "cuda".to_owned(),
            profile_memory: false,
            with_flops: false,
            too_deep: 0,
        };
        for part in parts {
            job.merge(part);
        }
        job.rows.sort_by_key(row_key);
        job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, count: u64, ns: i64, on_device: bool) -> Row {
        Row {
            name: Arc::from(name),
            count,
            self_cpu_time_total_ns: ns,
            cpu_time_total_ns: ns,
            cpu_time_total_us: ns as f64 / 1000.0,
            self_cpu_time_total_us: ns as f64 / 1000.0,
            on_device,
            ..Row::default()
        }
    }

    fn averages(rows: Vec<Row>) -> KeyAverages {
        KeyAverages {
            rows,
            device_name: "cuda".to_owned(),
            profile_memory: false,
            with_flops: false,
            too_deep: 0,
        }
    }

    #[test]
    fn merged_rows_sum_counts_and_totals_and_keep_host_and_device_apart() {
        let a = averages(vec![row("b", 1, 1_000, false), row("a", 2, 3_000, false)]);
        let b = averages(vec![row("a", 3, 1_500, false), row("a", 1, 700, true)]);
        let job = KeyAverages::merged([&a, &b]);
        let got: Vec<(&str, u64, i64, bool)> = job
            .rows
            .iter()
            .map(|r| (&*r.name, r.count, r.cpu_time_total_ns, r.on_device))
            .collect();
        assert_eq!(
            got,
            [
                ("a", 5, 4_500, false),
                ("a", 1, 700, true),
                ("b", 1, 1_000, false)
            ]
        );
        // The average of the sums (900 ns), not the mean of the two averages (1,000).
        assert_eq!(job.rows[0].cpu_time_avg_us(), 0.9);
    }
}
