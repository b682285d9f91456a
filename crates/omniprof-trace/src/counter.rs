//! Counters: the trace's one model of numbers sampled over time.
//!
//! A counter is a [`CounterSeries`]: a [`CounterTrack`] — what it measures (`kind`, written
//! as the `cat`; `name`) and the row that draws it (`device` = `pid`, `resource` = `tid`) —
//! with its timestamped [`CounterSample`]s, each carrying one or more named values. Every
//! source fills the same model: a backend or plugin through the sink
//! (`ActivitySink::add_counter`), the engine itself (the scope profiler's per-kernel
//! samples), the host's perf counters, and the reader of a trace file. Writers emit one
//! `"ph": "C"` event per sample (`hardware_counters`: one per value, Kineto's form), and
//! the Perfetto writer one counter track per (series, value name).
//!
//! A value that is not a finite number has no JSON or counter-track form: [`Counters::add`]
//! drops it and counts it ([`Counters::dropped_values`]); a sample left with no values is not
//! kept.
//!
//! ```
//! use omniprof_trace::{CounterTrack, Counters};
//! use omniprof_trace::ActivityType;
//!
//! let mut counters = Counters::default();
//! let track = CounterTrack::new(ActivityType::GpuPmCounter, "busy", 0, 0);
//! counters.add(&track, 1_000, [("busy_fraction".into(), 0.75)]);
//! counters.add(&track, 2_000, [("busy_fraction".into(), f64::NAN)]);
//! assert_eq!(counters.samples(), 1);
//! assert_eq!(counters.dropped_values(), 1);
//! assert_eq!(counters.series()[0].samples[0].value("busy_fraction"), Some(0.75));
//! ```

use std::sync::Arc;

use crate::activity::ActivityType;
use crate::hash::FastMap;

/// A sample's named values.
pub type CounterValues = Vec<(Arc<str>, f64)>;

/// What a series measures and where it is drawn.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterTrack {
    /// The counter type, written as the `cat` (`gpu_pm_counter`, `xpu_scope_profiler`,
    /// `hardware_counters`, ...).
    pub kind: ActivityType,
    /// The process row: the device index (the OS pid for host counters).
    pub device: i64,
    /// The thread row: a stream, a counter resource, or a host thread id.
    pub resource: i64,
    /// The counter's name (the event `name`).
    pub name: Arc<str>,
}

impl CounterTrack {
    /// A track of `kind` named `name` on row (`device`, `resource`).
    pub fn new(kind: ActivityType, name: impl Into<Arc<str>>, device: i64, resource: i64) -> Self {
        Self {
            kind,
            device,
            resource,
            name: name.into(),
        }
    }
}

/// One sample: a time and its named values (finite numbers, in the order given).
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSample {
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// The values, by name.
    pub values: CounterValues,
}

impl CounterSample {
    /// The value named `name`, if the sample has one.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(k, _)| &**k == name)
            .map(|&(_, v)| v)
    }
}

/// A track and its samples, in time order once the trace is complete.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSeries {
    /// The series' track.
    pub track: CounterTrack,
    /// The samples, in time order.
    pub samples: Vec<CounterSample>,
}

/// Every counter series of a trace, keyed by track.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    series: Vec<CounterSeries>,
    index: FastMap<CounterTrack, usize>,
    dropped_values: u64,
}

impl Counters {
    /// Adds a sample to `track`'s series (created on first use), keeping only the finite
    /// values. Returns whether a sample was kept (false when no value was left).
    pub fn add(
        &mut self,
        track: &CounterTrack,
        ts_ns: i64,
        values: impl IntoIterator<Item = (Arc<str>, f64)>,
    ) -> bool {
        let mut kept = Vec::new();
        for (name, value) in values {
            if value.is_finite() {
                kept.push((name, value));
            } else {
                self.dropped_values += 1;
            }
        }
        if kept.is_empty() {
            return false;
        }
        self.series_mut(track).samples.push(CounterSample {
            ts_ns,
            values: kept,
        });
        true
    }

    fn series_mut(&mut self, track: &CounterTrack) -> &mut CounterSeries {
        let i = match self.index.get(track) {
            Some(&i) => i,
            None => {
                self.index.insert(track.clone(), self.series.len());
                self.series.push(CounterSeries {
                    track: track.clone(),
                    samples: Vec::new(),
                });
                self.series.len() - 1
            }
        };
        &mut self.series[i]
    }

    /// The series, in the order their tracks were first used.
    pub fn series(&self) -> &[CounterSeries] {
        &self.series
    }

    /// The series of `track`, if it has samples.
    pub fn get(&self, track: &CounterTrack) -> Option<&CounterSeries> {
        self.index.get(track).map(|&i| &self.series[i])
    }

    /// Samples over all series.
    pub fn samples(&self) -> usize {
        self.series.iter().map(|s| s.samples.len()).sum()
    }

    /// True when the series has no sample.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Values dropped because they were not finite numbers.
    pub fn dropped_values(&self) -> u64 {
        self.dropped_values
    }

    /// Counts values dropped before they reached [`add`](Self::add) (e.g. a plugin's
    /// non-numeric counter metadata).
    pub fn count_dropped(&mut self, n: u64) {
        self.dropped_values += n;
    }

    /// Moves every sample of `other` into `self`.
    pub fn append(&mut self, other: Counters) {
        self.dropped_values += other.dropped_values;
        for s in other.series {
            self.series_mut(&s.track).samples.extend(s.samples);
        }
    }

    /// Keeps the samples `keep` accepts; returns how many were removed. Series left empty
    /// are removed.
    pub fn retain(&mut self, mut keep: impl FnMut(&CounterTrack, &CounterSample) -> bool) -> u64 {
        let mut removed = 0;
        for s in &mut self.series {
            let before = s.samples.len();
            s.samples.retain(|sample| keep(&s.track, sample));
            removed += (before - s.samples.len()) as u64;
        }
        if self.series.iter().any(|s| s.samples.is_empty()) {
            self.series.retain(|s| !s.samples.is_empty());
            self.reindex();
        }
        removed
    }

    /// Shifts every sample by `delta_ns` (the reader's late base time).
    pub fn shift(&mut self, delta_ns: i64) {
        for s in &mut self.series {
            for sample in &mut s.samples {
                sample.ts_ns = sample.ts_ns.saturating_add(delta_ns);
            }
        }
    }

    /// Puts each series' samples in time order (stable: samples at the same time keep the
    /// order they were added in, so a kernel's end sample stays before the next kernel's
    /// start sample) and the series in track order, so output is deterministic.
    pub fn sort(&mut self) {
        for s in &mut self.series {
            s.samples.sort_by_key(|sample| sample.ts_ns);
        }
        self.series.sort_by(|a, b| a.track.cmp(&b.track));
        self.reindex();
    }

    fn reindex(&mut self) {
        self.index = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (s.track.clone(), i))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(name: &str) -> CounterTrack {
        CounterTrack::new(ActivityType::GpuPmCounter, name, 0, 1)
    }

    #[test]
    fn samples_group_by_track_and_drop_non_finite_values() {
        let mut c = Counters::default();
        assert!(c.add(
            &track("a"),
            20,
            [("x".into(), 1.0), ("y".into(), f64::INFINITY)]
        ));
        assert!(c.add(&track("b"), 5, [("x".into(), 2.0)]));
        assert!(c.add(&track("a"), 10, [("x".into(), 3.0)]));
        assert!(!c.add(&track("a"), 30, [("x".into(), f64::NAN)]));
        assert!(!c.add(&track("a"), 30, []));
        assert_eq!(c.series().len(), 2);
        assert_eq!(c.samples(), 3);
        assert_eq!(c.dropped_values(), 2);
        c.sort();
        let a = c.get(&track("a")).unwrap();
        let ts: Vec<_> = a.samples.iter().map(|s| s.ts_ns).collect();
        assert_eq!(ts, [10, 20]);
        assert_eq!(a.samples[1].values.len(), 1);
    }

    #[test]
    fn retain_removes_empty_series_and_counts() {
        let mut c = Counters::default();
        c.add(&track("a"), 1, [("x".into(), 1.0)]);
        c.add(&track("b"), 100, [("x".into(), 1.0)]);
        assert_eq!(c.retain(|_, s| s.ts_ns >= 50), 1);
        assert!(c.get(&track("a")).is_none());
        assert_eq!(c.get(&track("b")).unwrap().samples.len(), 1);
        let mut other = Counters::default();
        other.add(&track("a"), 60, [("x".into(), 2.0)]);
        c.append(other);
        assert_eq!(c.samples(), 2);
    }
}
