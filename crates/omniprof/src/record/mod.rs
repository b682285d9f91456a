//! The host recorder: named ranges, host ops and instants on application threads.
//!
//! Each thread writes 16-byte records (a raw clock tick and a word holding the kind, the
//! interned name and a sequence number) into its own pre-faulted buffer: no lock, allocation
//! or syscall after the thread's first event. While no session records, a call costs one
//! relaxed atomic load and a branch. A range is two records (32 bytes).
//!
//! ```
//! use omniprof::{record_function, scope, Profiler};
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! {
//!     let _step = record_function("train_step").with_arg("batch", 32i64);
//!     scope!("forward");
//!     omniprof::instant("checkpoint");
//! }
//! let trace = profiler.stop().unwrap();
//! let names: Vec<_> = trace.activities.iter().map(|a| &*a.name).collect();
//! assert!(names.contains(&"train_step") && names.contains(&"forward"));
//! ```
//!
//! Inside, in the order a record travels: `guard` begins and ends ranges and instants (the
//! hot path; `push_pop` does the same for a caller that cannot hold a guard, keeping its ops
//! on the thread's `op_stack`), writing records whose bits `word` lays out, in one place,
//! into per-thread `buffer`s under the session `state`; at stop, `decode` turns the drained
//! records into activities. Beside them: interned `name`s, the [`correlation`] hooks that
//! backends listen on, [`python`] frames, `memory` events, `autograd` links and the
//! `packed_args` an op keeps as words until the drain, the side tables taking their blocks
//! from `spare_blocks` that the `refill` thread faults in.

mod autograd;
mod buffer;
pub(crate) mod correlation;
mod decode;
mod guard;
mod memory;
mod memory_usage;
mod name;
mod op_stack;
mod packed_args;
mod push_pop;
pub(crate) mod python;
mod refill;
mod ring_session;
mod spare_blocks;
mod state;
#[cfg(test)]
mod tests;
mod word;

pub use autograd::Autograd;
pub use correlation::CorrelationListener;
pub(crate) use decode::{collect, HostRecording};
pub use guard::{instant, record_function, record_op, InstantGuard, OwnedRange, RangeGuard};
pub use memory::{record_memory, record_out_of_memory};
pub use memory_usage::MemoryUsage;
pub use name::{IntoName, Name, StaticName};
pub use packed_args::UnpackArgs;
pub use push_pop::{pop_op, pop_op_with_autograd, push_op, push_op_packed, PushedOp};
pub(crate) use ring_session::{
    ring_window, rings_use, start_rings, start_session, stop_rings, stop_session, RingBounds,
    RingsRefused, CHUNK_BYTES,
};
#[cfg(test)]
pub(crate) use state::is_recording;
pub(crate) use state::{warm_up, HostSession};

/// The OS thread ids of the threads that have recorded (a backend counting per recording
/// thread, as the host perf counters do, follows them).
pub(crate) fn recording_threads() -> Vec<i64> {
    buffer::thread_ids()
}

/// Names the calling thread's row in traces (`thread <tid> (<name>)`).
pub fn set_thread_name(name: &str) {
    buffer::set_current_thread_name(name);
}

/// Records a range over the rest of the enclosing block, with a name interned once per call
/// site.
///
/// ```
/// fn forward() {
///     omniprof::scope!("forward");
///     // ... work ...
/// }
/// # forward();
/// ```
#[macro_export]
macro_rules! scope {
    ($name:expr) => {
        let _omniprof_scope = {
            static NAME: $crate::recording::StaticName = $crate::recording::StaticName::new($name);
            $crate::record_function(&NAME)
        };
    };
}
