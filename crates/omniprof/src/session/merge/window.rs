//! Where a backend's activities and counter samples stand against the capture window: in
//! it, in the warm-up before it (dropped as intended), or outside it (dropped and counted,
//! with how far the farthest lay, as an anomaly).

use crate::Activity;
use crate::Window;

/// The capture window, and the warm-up before it.
#[derive(Clone, Copy)]
pub(super) struct Captured {
    pub(super) window: Window,
    /// When the backends started, if they warmed up before the window opened.
    pub(super) warm_start_ns: Option<i64>,
}

impl Captured {
    /// Started during warm-up: before the window, not before the backends started.
    pub(super) fn in_warmup(&self, a: &Activity) -> bool {
        a.start_ns < self.window.start_ns && self.warm_start_ns.is_some_and(|w| a.start_ns >= w)
    }

    /// Lies wholly in the window.
    pub(super) fn contains(&self, a: &Activity) -> bool {
        a.start_ns >= self.window.start_ns && a.end_ns <= self.window.end_ns
    }

    /// Where a counter sample at `ts` stands: kept, warm-up or out of the window.
    pub(super) fn place(&self, ts: i64) -> Placed {
        if ts < self.window.start_ns && self.warm_start_ns.is_some_and(|w| ts >= w) {
            Placed::Warmup
        } else if ts < self.window.start_ns || ts > self.window.end_ns {
            Placed::Out
        } else {
            Placed::In
        }
    }
}

/// Where a counter sample stands against the capture window.
pub(super) enum Placed {
    In,
    Warmup,
    Out,
}

/// A backend's activities outside the capture window: how many, and how far the farthest lay
/// before the window's start and after its end (what `omniprof plugins check` words its
/// warning by: microseconds at an edge, or decades from a clock that is not the host's).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Outside {
    pub(super) count: u64,
    pub(super) before_ns: u64,
    pub(super) after_ns: u64,
}

impl Outside {
    /// Counts `a`, which lies outside `window`.
    pub(super) fn add(&mut self, a: &Activity, window: Window) {
        let before = window.start_ns.saturating_sub(a.start_ns);
        let after = a.end_ns.saturating_sub(window.end_ns);
        self.count += 1;
        self.before_ns = self.before_ns.max(u64::try_from(before).unwrap_or(0));
        self.after_ns = self.after_ns.max(u64::try_from(after).unwrap_or(0));
    }
}
