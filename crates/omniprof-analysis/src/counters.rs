//! Each counter track's numbers (`omniprof summary --counters`): per series and value name,
//! the sample count, min, mean, max and time-weighted mean. A sample's value holds until the
//! next sample of its series (the last one until the capture window's end), which is how
//! viewers draw it; the time-weighted mean is the plain mean when the samples span no time.
//!
//! ```
//! use omniprof_analysis::counter_stats;
//! use omniprof_trace::{ActivityType, CounterTrack, Trace};
//!
//! let mut trace = Trace::new(0, 100);
//! let track = CounterTrack::new(ActivityType::GpuPmCounter, "busy", 0, 0);
//! trace.counters.add(&track, 0, [("fraction".into(), 1.0)]);
//! trace.counters.add(&track, 75, [("fraction".into(), 0.0)]);
//! let row = &counter_stats(&trace).rows[0];
//! assert_eq!((row.samples, row.mean, row.time_weighted_mean), (2, 0.5, 0.75));
//! ```

use serde::Serialize;

use crate::render::csv::field;
use crate::render::grid::{number, render};
use omniprof_trace::CounterSeries;
use omniprof_trace::Trace;

/// One value of one counter series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterStats {
    /// The counter type (`cat`).
    pub kind: &'static str,
    /// The counter's name.
    pub counter: String,
    /// The process row (the device).
    pub device: i64,
    /// The thread row.
    pub resource: i64,
    /// The value's name.
    pub value: String,
    /// How many samples hold the value.
    pub samples: u64,
    /// The smallest sample.
    pub min: f64,
    /// The mean of the samples.
    pub mean: f64,
    /// The largest sample.
    pub max: f64,
    /// The mean weighted by how long each sample held.
    pub time_weighted_mean: f64,
}

/// The rows, series by series.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CounterSummary {
    /// One row per value of each series.
    pub rows: Vec<CounterStats>,
}

/// The statistics of every counter series of `trace`.
pub fn counter_stats(trace: &Trace) -> CounterSummary {
    let mut rows = Vec::new();
    for series in trace.counters.series() {
        let mut names: Vec<&str> = Vec::new();
        for sample in &series.samples {
            for (name, _) in &sample.values {
                if !names.contains(&&**name) {
                    names.push(name);
                }
            }
        }
        for name in names {
            rows.push(stats(series, name, trace.window.end_ns));
        }
    }
    CounterSummary { rows }
}

fn stats(series: &CounterSeries, name: &str, end_ns: i64) -> CounterStats {
    let points: Vec<(i64, f64)> = series
        .samples
        .iter()
        .filter_map(|s| Some((s.ts_ns, s.value(name)?)))
        .collect();
    let n = points.len() as f64;
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    let (mut weighted, mut span) = (0.0, 0i64);
    for (i, &(ts, v)) in points.iter().enumerate() {
        min = min.min(v);
        max = max.max(v);
        sum += v;
        let until = points.get(i + 1).map_or(end_ns, |&(next, _)| next);
        let held = (until - ts).max(0);
        weighted += v * held as f64;
        span += held;
    }
    let mean = sum / n;
    let track = &series.track;
    CounterStats {
        kind: track.kind.name(),
        counter: track.name.to_string(),
        device: track.device,
        resource: track.resource,
        value: name.to_owned(),
        samples: points.len() as u64,
        min,
        mean,
        max,
        time_weighted_mean: if span > 0 {
            weighted / span as f64
        } else {
            mean
        },
    }
}

impl CounterSummary {
    /// The rows as a text table.
    pub fn table(&self) -> String {
        let headers = [
            "Counter",
            "Type",
            "Device",
            "Row",
            "Value",
            "Samples",
            "Min",
            "Mean",
            "Max",
            "Time-weighted mean",
        ];
        let numeric = [
            false, false, true, true, false, true, true, true, true, true,
        ];
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.counter.clone(),
                    r.kind.to_owned(),
                    r.device.to_string(),
                    r.resource.to_string(),
                    r.value.clone(),
                    r.samples.to_string(),
                    number(r.min),
                    number(r.mean),
                    number(r.max),
                    number(r.time_weighted_mean),
                ]
            })
            .collect();
        render(&headers, &numeric, &rows)
    }

    /// `counter,type,device,row,value,samples,min,mean,max,time_weighted_mean`.
    pub fn csv(&self) -> String {
        let mut out =
            String::from("counter,type,device,row,value,samples,min,mean,max,time_weighted_mean\n");
        for r in &self.rows {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                field(&r.counter),
                r.kind,
                r.device,
                r.resource,
                field(&r.value),
                r.samples,
                number(r.min),
                number(r.mean),
                number(r.max),
                number(r.time_weighted_mean)
            ));
        }
        out
    }

    /// `{"rows": [{"kind", "counter", "device", "resource", "value", "samples", "min",
    /// "mean", "max", "time_weighted_mean"}]}`.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes")
    }
}
