//! The rows as one JSON object:
//! `{"device": "CUDA", "self_cpu_time_total_us": .., "self_device_time_total_us": ..,
//! "rows": [{"name", ["input_shapes",] ["stack",] "count", "self_cpu_time_total_us",
//! "cpu_time_total_us", "cpu_time_avg_us", "self_device_time_total_us",
//! "device_time_total_us", "device_time_avg_us", "on_device", "user_annotation",
//! "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
//! "self_device_memory_usage", "flops"}], "profile_memory", "with_flops"}`.
//! Times are microseconds, memory bytes; `input_shapes` is present when grouping by shapes,
//! `stack` (a list of frames, innermost first; empty for a row without one) when grouping
//! by stack.

use serde::Serialize;

use crate::key_averages::{us, KeyAverages, Row, TableOptions};

#[derive(Serialize)]
struct Document<'a> {
    device: String,
    self_cpu_time_total_us: f64,
    self_device_time_total_us: f64,
    profile_memory: bool,
    with_flops: bool,
    rows: Vec<JsonRow<'a>>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_shapes: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    overload_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack: Option<Vec<&'a str>>,
    count: u64,
    self_cpu_time_total_us: f64,
    cpu_time_total_us: f64,
    cpu_time_avg_us: f64,
    self_device_time_total_us: f64,
    device_time_total_us: f64,
    device_time_avg_us: f64,
    on_device: bool,
    user_annotation: bool,
    cpu_memory_usage: i64,
    self_cpu_memory_usage: i64,
    device_memory_usage: i64,
    self_device_memory_usage: i64,
    flops: u64,
}

impl<'a> From<&'a Row> for JsonRow<'a> {
    fn from(row: &'a Row) -> Self {
        Self {
            name: &row.name,
            input_shapes: row.input_shapes.as_deref(),
            overload_name: row.overload_name.as_deref(),
            stack: row
                .stack
                .as_deref()
                .map(|frames| frames.iter().map(|f| &**f).collect()),
            count: row.count,
            self_cpu_time_total_us: us(row.self_cpu_time_total_ns),
            cpu_time_total_us: us(row.cpu_time_total_ns),
            cpu_time_avg_us: row.cpu_time_avg_us(),
            self_device_time_total_us: us(row.self_device_time_total_ns),
            device_time_total_us: us(row.device_time_total_ns),
            device_time_avg_us: row.device_time_avg_us(),
            on_device: row.on_device,
            user_annotation: row.is_user_annotation,
            cpu_memory_usage: row.cpu_memory_usage,
            self_cpu_memory_usage: row.self_cpu_memory_usage,
            device_memory_usage: row.device_memory_usage,
            self_device_memory_usage: row.self_device_memory_usage,
            flops: row.flops,
        }
    }
}

impl KeyAverages {
    /// `{"device": ..., "rows": [{"name", "count", "self_cpu_time_total_us", ...}]}`.
    pub fn json(&self, options: &TableOptions) -> String {
        render(self, self.select(options))
    }

    /// [`Self::json`] of these rows (some of this summary's), with the totals of every row:
    /// a page that holds only some rows still says what all of them add up to.
    pub fn json_of_rows(&self, rows: Vec<&Row>) -> String {
        render(self, rows)
    }
}

fn render(summary: &KeyAverages, rows: Vec<&Row>) -> String {
    let document = Document {
        device: summary.device_label(),
        self_cpu_time_total_us: us(summary.self_cpu_time_total_ns()),
        self_device_time_total_us: us(summary.self_device_time_total_ns()),
        profile_memory: summary.profile_memory,
        with_flops: summary.with_flops,
        rows: rows.into_iter().map(JsonRow::from).collect(),
    };
    serde_json::to_string(&document).expect("strings, numbers and booleans always serialize")
}
