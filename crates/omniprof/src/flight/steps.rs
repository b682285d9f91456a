//! The steps as the flight recorder sees them: each one a `ProfilerStep#N` range in the
//! rings, its time against the median of the steps before it (a slow step), and the time
//! since the last one ended (a hang).
//!
//! Steps end at [`step`](crate::step), however it is called: by the program, by a
//! [`Profiler`](crate::Profiler)'s `step`, or by the Python package's optimizer hook.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::reason::DumpReason;
use crate::record::OwnedRange;

/// Steps whose times the median is taken over.
const MEDIAN_OF: usize = 64;

/// The step times seen so far and the open step's range.
pub(super) struct StepWatch {
    factor: f64,
    warmup: usize,
    times: VecDeque<Duration>,
    /// When the step now running began (the last step's end, or the recorder's start).
    began: Instant,
    /// Whether a step has ended (the hang watch starts then).
    stepped: bool,
    /// The step the hang watch last reported.
    hang_reported: Option<i64>,
    range: Option<OwnedRange>,
}

impl StepWatch {
    pub(super) fn new(factor: f64, warmup: usize) -> Self {
        Self {
            factor,
            warmup,
            times: VecDeque::with_capacity(MEDIAN_OF),
            began: Instant::now(),
            stepped: false,
            hang_reported: None,
            range: None,
        }
    }

    /// Opens step `step`'s range, closing the one open.
    pub(super) fn begin_range(&mut self, step: i64) {
        self.end_range();
        self.range = OwnedRange::begin(format!("ProfilerStep#{step}"));
    }

    pub(super) fn end_range(&mut self) {
        if let Some(range) = self.range.take() {
            range.end();
        }
    }

    /// Step `step` ended at `now`: its range closes, the next one's opens, and a slow step
    /// asks for a dump.
    pub(super) fn ended(&mut self, step: i64, now: Instant) -> Option<(DumpReason, i64)> {
        self.begin_range(step + 1);
        let took = now.duration_since(self.began);
        self.began = now;
        self.stepped = true;
        let slow = self.times.len() >= self.warmup.max(1)
            && took.as_secs_f64() > self.factor * median(&self.times).as_secs_f64();
        if self.times.len() == MEDIAN_OF {
            self.times.pop_front();
        }
        self.times.push_back(took);
        slow.then_some((DumpReason::SlowStep, step))
    }

    /// The step now running when it has run for `after` and was not reported yet.
    pub(super) fn hung(&mut self, after: Duration) -> Option<i64> {
        if !self.stepped || self.began.elapsed() < after {
            return None;
        }
        let step = crate::iteration::iteration() + 1;
        (self.hang_reported.replace(step) != Some(step)).then_some(step)
    }
}

fn median(times: &VecDeque<Duration>) -> Duration {
    let mut sorted: Vec<Duration> = times.iter().copied().collect();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_three_times_the_median_after_the_warm_up_is_slow_and_no_other() {
        let mut watch = StepWatch::new(3.0, 3);
        let start = Instant::now();
        watch.began = start;
        let ms = |n| start + Duration::from_millis(n);
        // Warm-up: even a long step is not judged.
        assert_eq!(watch.ended(0, ms(100)), None);
        assert_eq!(watch.ended(1, ms(110)), None);
        assert_eq!(watch.ended(2, ms(120)), None);
        assert_eq!(watch.ended(3, ms(130)), None);
        // The median is 10 ms: 29 ms is not slow, 31 ms is.
        assert_eq!(watch.ended(4, ms(159)), None);
        assert_eq!(watch.ended(5, ms(190)), Some((DumpReason::SlowStep, 5)));
        assert_eq!(watch.ended(6, ms(200)), None);
    }
}
