//! The application's iteration count, process-wide: [`step`] marks the end of one iteration.
//!
//! It sits below both engines: the synchronous [`Profiler::step`](crate::Profiler::step)
//! counts here, and the on-demand engine ([`crate::ondemand`]) times iteration-based
//! requests by it, installing the slow path that tells it when a request's iteration comes.
//! Neither engine imports the other for it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::OnceLock;

/// The application's iteration; the first `step()` makes it 0.
static ITERATION: AtomicI64 = AtomicI64::new(-1);
/// The iteration from which `step()` must call [`WATCHER`]; never reached while none is set.
static NEXT_WATCHED: AtomicI64 = AtomicI64::new(i64::MAX);
/// Told of each iteration at or after [`NEXT_WATCHED`] (the on-demand engine).
static WATCHER: OnceLock<fn(i64)> = OnceLock::new();

/// Marks the end of one application iteration and the start of the next; returns the new
/// iteration number (the first call returns 0). Iteration-based on-demand requests count
/// these. Cheap: one atomic add and one compare while no request needs this iteration.
///
/// ```
/// let first = omniprof::step();
/// assert_eq!(omniprof::step(), first + 1);
/// ```
#[inline]
pub fn step() -> i64 {
    let iteration = ITERATION.fetch_add(1, Ordering::Relaxed) + 1;
    if EVERY_STEP_ON.load(Ordering::Relaxed) {
        tell_every_step(iteration);
    }
    if iteration >= NEXT_WATCHED.load(Ordering::Acquire) {
        tell_watcher(iteration);
    }
    iteration
}

/// What runs at every step while on: the flight recorder's step watch, installed by it (so
/// the step count does not depend on it).
static EVERY_STEP: OnceLock<fn(i64)> = OnceLock::new();
static EVERY_STEP_ON: AtomicBool = AtomicBool::new(false);

/// Installs `hook` to run at every step (the first one installed stays), and turns it on or
/// off.
pub(crate) fn every_step(hook: fn(i64), on: bool) {
    let _ = EVERY_STEP.set(hook);
    EVERY_STEP_ON.store(on, Ordering::Release);
}

#[cold]
#[inline(never)]
fn tell_every_step(iteration: i64) {
    if let Some(hook) = EVERY_STEP.get() {
        hook(iteration);
    }
}

#[cold]
#[inline(never)]
fn tell_watcher(iteration: i64) {
    if let Some(watcher) = WATCHER.get() {
        watcher(iteration);
    }
}

/// The current iteration: −1 before the first [`step`].
pub fn iteration() -> i64 {
    ITERATION.load(Ordering::Relaxed)
}

/// Installs the watcher of iterations (once per process; a second call keeps the first).
pub(crate) fn watch(watcher: fn(i64)) {
    let _ = WATCHER.set(watcher);
}

/// From which iteration on `step()` calls the watcher.
pub(crate) fn watch_from(iteration: i64) {
    NEXT_WATCHED.store(iteration, Ordering::Release);
}
