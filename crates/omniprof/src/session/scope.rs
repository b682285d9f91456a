//! The engine's half of the scope profiler (`scope_profiler`): what it does with the
//! per-kernel metric values a backend reports (`ActivitySink::add_kernel_metrics`).
//!
//! For each kernel, up to `SCOPE_PROFILER_MAX_SCOPES` of them in delivery order, it keeps
//! the selected metrics (`SCOPE_PROFILER_METRICS`; none named = every offered one), puts
//! them in the kernel's `args`, and draws each metric group as a square wave on the kernel's
//! device row: a counter sample with the values at the kernel's start and one of zeros at its
//! end, on a track named `<group> (stream <s>)` (viewers key counter tracks by process and
//! name, so each stream needs its own). Kernels past the limit get nothing and are counted.

use std::sync::Arc;

use crate::backend::ScopeMetric;
use crate::config::Config;
use crate::Value;
use crate::{Activity, ActivityType};
use crate::{CounterTrack, CounterValues, Counters};
use crate::{ScopeProfiling, Trace};

/// Kineto's client defaults for the scope buffer, used when no size is set.
const PER_KERNEL_SCOPES: u64 = 1500;
const RANGE_SCOPES: u64 = 10;

pub(super) struct ScopeProfiler {
    /// The metrics named by the config (empty = all offered).
    selected: Vec<String>,
    max_scopes: u64,
    profiled: u64,
    unprofiled: u64,
}

impl ScopeProfiler {
    pub(super) fn new(config: &Config) -> Self {
        let max_scopes = match config.scope_profiler_max_scopes() {
            0 if config.scope_profiler_per_kernel() => PER_KERNEL_SCOPES,
            0 => RANGE_SCOPES,
            n => n,
        };
        Self {
            selected: config.scope_profiler_metrics().to_vec(),
            max_scopes,
            profiled: 0,
            unprofiled: 0,
        }
    }

    fn wanted(&self, metric: &str) -> bool {
        self.selected.is_empty() || self.selected.iter().any(|m| m == metric)
    }

    /// Applies one kernel's reported `values`: args on `kernel`, samples in `counters`.
    pub(super) fn kernel(
        &mut self,
        kernel: &mut Activity,
        values: CounterValues,
        offered: &[ScopeMetric],
        counters: &mut Counters,
    ) {
        if self.profiled >= self.max_scopes {
            self.unprofiled += 1;
            return;
        }
        self.profiled += 1;
        // Groups in the order the backend offers them; each with its selected values.
        let mut groups: Vec<(&str, CounterValues)> = Vec::new();
        for (name, value) in values {
            let Some(metric) = offered.iter().find(|m| *m.name == *name) else {
                continue;
            };
            if !self.wanted(&name) || !value.is_finite() {
                continue;
            }
            kernel.args.push((Arc::clone(&name), arg_value(value)));
            match groups.iter_mut().find(|(g, _)| *g == metric.group) {
                Some((_, group)) => group.push((name, value)),
                None => groups.push((&metric.group, vec![(name, value)])),
            }
        }
        for (group, values) in groups {
            let track = CounterTrack::new(
                ActivityType::XpuScopeProfiler,
                format!("{group} (stream {})", kernel.resource),
                kernel.device,
                kernel.resource,
            );
            let zeros: Vec<_> = values.iter().map(|(k, _)| (Arc::clone(k), 0.0)).collect();
            counters.add(&track, kernel.start_ns, values);
            counters.add(&track, kernel.end_ns, zeros);
        }
    }

    /// The scope profiler's part of the report: what it collected, and the kernels it had to
    /// skip.
    pub(super) fn finish(self, trace: &mut Trace) {
        trace.health.scope_profiler = Some(ScopeProfiling {
            metrics: self.selected,
            max_scopes: self.max_scopes,
            kernels: self.profiled,
        });
        if self.unprofiled > 0 {
            log::warn!(
                "omniprof: {} kernels past SCOPE_PROFILER_MAX_SCOPES ({}) got no metrics",
                self.unprofiled,
                self.max_scopes
            );
            trace.health.scope_profiler_unprofiled_kernels = Some(self.unprofiled);
        }
    }
}

/// A whole number as an integer arg (how a count reads best), anything else as a float.
fn arg_value(v: f64) -> Value {
    if v.fract() == 0.0 && (0.0..9.0e15).contains(&v) {
        Value::UInt(v as u64)
    } else {
        Value::Float(v)
    }
}
