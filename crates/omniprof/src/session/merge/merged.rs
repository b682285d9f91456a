//! What every backend delivered, gathered before it joins the trace: each backend's
//! activities filtered to the capture window and the selection, linked by flows, projected
//! into user ranges and, for kernels with scope-profiler metrics, given their metrics; its
//! counter samples filtered alike; and the counts of what was dropped, which go into the
//! trace's [report](crate::SessionHealth).

use super::flows;
use super::projection::Projections;
use super::window::{Captured, Outside, Placed};
use crate::backend::ScopeMetric;
use crate::session::backends::Collected;
use crate::session::scope::ScopeProfiler;
use crate::session::toggles::Switched;
use crate::FastMap;
use crate::Trace;
use crate::{Activity, ActivitySet, ActivityType};
use crate::{CounterValues, Counters};

/// The backends' activities and counters so far, and what was dropped of them.
#[derive(Default)]
pub(super) struct Merged {
    activities: Vec<Activity>,
    counters: Counters,
    /// Set when the trace enables the scope profiler.
    scope: Option<ScopeProfiler>,
    projections: Projections,
    out_of_window: u64,
    out_of_window_samples: u64,
    warmup: u64,
    duplicate_flow_starts: u64,
    /// The flow ids used so far, and how many a backend had to renumber.
    flow_ids: flows::Taken,
    renumbered_flow_ids: u64,
    /// What `toggle_collection` left out.
    toggled: Switched,
}

impl Merged {
    /// Nothing merged yet into a trace whose host recording is `host`; `scope` when the
    /// trace enables the scope profiler.
    pub(super) fn new(host: &[Activity], scope: Option<ScopeProfiler>, toggled: Switched) -> Self {
        Self {
            scope,
            flow_ids: flows::Taken::of(host),
            toggled,
            ..Self::default()
        }
    }

    /// Filters one backend's activities to the window and the selection, draws its flows and
    /// collects its user-range projections. Returns how many activities it kept and what
    /// lay outside the window.
    pub(super) fn add(
        &mut self,
        backend: u64,
        output: Collected,
        offered: &[ScopeMetric],
        window: Captured,
        selection: ActivitySet,
        name: &str,
    ) -> (u64, Outside) {
        let Collected {
            mut activities,
            user_links,
            counters,
            kernel_metrics,
            warmup,
            ..
        } = output;
        self.warmup += warmup;
        let mut user_of: FastMap<usize, u64> = user_links.into_iter().collect();
        let mut metrics_of: FastMap<usize, CounterValues> = kernel_metrics.into_iter().collect();
        self.add_counters(counters, window, selection);
        // A kernel measured by the scope profiler is kept for its metrics.
        let scope = self.scope.is_some();
        let measured = |i: usize| scope && metrics_of.contains_key(&i);
        let mut keep = vec![true; activities.len()];
        let mut outside = Outside::default();
        for (i, a) in activities.iter().enumerate() {
            if window.in_warmup(a) {
                keep[i] = false;
                self.warmup += 1;
            } else if !window.contains(a) {
                keep[i] = false;
                outside.add(a, window.window);
            } else if !(selection.enabled(a.kind) || measured(i))
                || self.toggled.leaves_out(a.kind, a.start_ns)
            {
                keep[i] = false;
            }
        }
        if outside.count > 0 {
            log::warn!(
                "omniprof: {name}: {} activities outside the capture window were dropped",
                outside.count
            );
        }
        self.out_of_window += outside.count;
        let drawn = flows::draw(&mut activities, &keep, backend, &mut self.flow_ids);
        self.duplicate_flow_starts += drawn.duplicate_starts;
        if drawn.renumbered > 0 {
            log::warn!(
                "omniprof: {name}: {} flow ids were already used in the trace (by the host \
                 or another backend); its flows with them were renumbered into its own \
                 namespace (renumbered_flow_ids)",
                drawn.renumbered
            );
            self.renumbered_flow_ids += drawn.renumbered;
        }

        let project = selection.enabled(ActivityType::GpuUserAnnotation);
        for (i, mut a) in activities.drain(..).enumerate() {
            if !keep[i] {
                continue;
            }
            if let (Some(scope), Some(values)) = (self.scope.as_mut(), metrics_of.remove(&i)) {
                scope.kernel(&mut a, values, offered, &mut self.counters);
            }
            if let Some(user) = user_of.remove(&i).filter(|_| project) {
                self.projections.add(&a, user);
            }
            self.activities.push(a);
        }
        (keep.iter().filter(|&&k| k).count() as u64, outside)
    }

    /// Keeps a backend's counter samples that lie in the window and whose type the trace
    /// selected; counts the others. (Apart from activities: a sampler runs until its backend
    /// stops, after the window closed, so samples past the window are expected.)
    fn add_counters(&mut self, mut counters: Counters, window: Captured, selection: ActivitySet) {
        let (mut out, mut warmup) = (0, 0);
        counters.retain(|_, sample| match window.place(sample.ts_ns) {
            Placed::In => true,
            Placed::Warmup => {
                warmup += 1;
                false
            }
            Placed::Out => {
                out += 1;
                false
            }
        });
        let toggled = &self.toggled;
        counters.retain(|track, sample| {
            selection.enabled(track.kind) && !toggled.leaves_out(track.kind, sample.ts_ns)
        });
        self.warmup += warmup;
        self.out_of_window_samples += out;
        self.counters.append(counters);
    }

    /// Adds the merged activities, the projections and the counters to `trace`, and what was
    /// dropped to its report. The default rows come after this: they are drawn for what the
    /// trace now holds.
    pub(super) fn finish(self, trace: &mut Trace) {
        let mut projected = self.projections.into_activities(&trace.activities);
        trace.activities.extend(self.activities);
        trace.activities.append(&mut projected);
        trace.counters.append(self.counters);
        trace.counters.sort();
        let report = &mut trace.health;
        let samples = trace.counters.samples() as u64;
        report.counter_samples = (!trace.counters.is_empty()).then_some(samples);
        report.out_of_window_counter_samples =
            (self.out_of_window_samples > 0).then_some(self.out_of_window_samples);
        let dropped_values = trace.counters.dropped_values();
        if dropped_values > 0 {
            log::warn!(
                "omniprof: {dropped_values} counter values that were not finite numbers were \
                 dropped"
            );
            report.dropped_counter_values = Some(dropped_values);
        }
        if let Some(scope) = self.scope {
            scope.finish(trace);
        }
        let report = &mut trace.health;
        report.out_of_window_events = Some(self.out_of_window);
        report.warmup_events = (self.warmup > 0).then_some(self.warmup);
        if self.duplicate_flow_starts > 0 {
            log::warn!(
                "omniprof: {} duplicate flow starts (two launches with one correlation id)",
                self.duplicate_flow_starts
            );
            report.duplicate_flow_starts = Some(self.duplicate_flow_starts);
        }
        report.renumbered_flow_ids =
            (self.renumbered_flow_ids > 0).then_some(self.renumbered_flow_ids);
    }
}
