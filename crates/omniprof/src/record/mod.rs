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

mod autograd;
mod buffer;
pub mod correlation;
mod memory;
mod name;
mod op_stack;
pub mod python;
mod stack;

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use autograd::Autograd;
pub use correlation::CorrelationListener;
pub use memory::{memory, out_of_memory, MemoryReport};
use name::Role;
pub use name::{IntoName, Name, StaticName};
pub use stack::{pop_op, pop_op_with_autograd, push_op, PushedOp};

use crate::activity::{Activity, ActivityType};
use crate::clock::TickConverter;
use crate::hash::FastMap;
use crate::keys::arg;
use crate::trace::{ThreadRow, Window};
use crate::value::Value;
use buffer::with_local;

/// Bit 0: a session is recording. Bits 1..: the session generation, so a thread notices a new
/// session with the same comparison that tells it whether to record at all.
static STATE: AtomicU64 = AtomicU64::new(0);
/// A tick taken when the last session stopped: the next session's records are all newer.
/// Never 0, so the zeroed slots of a fresh chunk are older than any session.
static LAST_STOP_TICK: AtomicU64 = AtomicU64::new(1);

// A record word: bits 0..=31 the range's sequence number (the one an end record closes),
// 32..=33 the kind, 34..=39 the session tag (the buffer's), 40..=63 the interned name. An end
// record written by another thread than the range's own (a foreign end, see [`OwnedRange`])
// holds the owning thread's index + 1 where a name would be; a local end holds 0 there.
const KIND_SHIFT: u32 = 32;
const KIND_MASK: u64 = 0x3;
const KIND_OP: u64 = 0;
const KIND_USER: u64 = 1;
const KIND_END: u64 = 2;
const KIND_INSTANT: u64 = 3;
const NAME_SHIFT: u32 = 40;

#[inline(always)]
fn word(kind: u64, name: Name) -> u64 {
    (kind << KIND_SHIFT) | ((name.id() as u64) << NAME_SHIFT)
}

/// The word of the record that ends range `seq`.
#[inline(always)]
fn end_word(seq: u32) -> u64 {
    (KIND_END << KIND_SHIFT) | seq as u64
}

/// The largest thread index a foreign end record can name.
const MAX_FOREIGN_OWNER: u32 = (1 << (64 - NAME_SHIFT)) - 2;

/// The word of the record that ends range `seq` of thread `owner`, written by another thread.
fn foreign_end_word(owner: u32, seq: u32) -> u64 {
    end_word(seq) | ((owner as u64 + 1) << NAME_SHIFT)
}

/// Ends a range when dropped. Returned by [`record_function`] and [`record_op`].
///
/// The guard stays on the thread that began the range (it is neither `Send` nor `Sync`):
/// its end is recorded in that thread's buffer, next to its beginning.
///
/// ```compile_fail,E0277
/// let guard = omniprof::record_function("step");
/// std::thread::spawn(move || drop(guard));
/// ```
#[must_use = "the range ends when the guard is dropped"]
pub struct RangeGuard {
    /// The session state the range began in; 0 when nothing was recorded.
    state: u64,
    seq: u32,
    /// A user range (true) or a host op.
    user: bool,
    _this_thread: ThisThread,
}

/// Keeps a guard on its thread.
type ThisThread = PhantomData<*const ()>;

impl RangeGuard {
    const INACTIVE: Self = Self {
        state: 0,
        seq: 0,
        user: false,
        _this_thread: PhantomData,
    };

    /// True when the range is being recorded.
    pub fn is_recording(&self) -> bool {
        self.state != 0
    }

    /// Attaches an `args` entry to the range (nothing happens when not recording).
    pub fn with_arg(self, key: &str, value: impl Into<Value>) -> Self {
        attach_arg(self.state, self.seq, key, value);
        self
    }

    /// Attaches the input shapes, written as `Input Dims` (`[[64, 64], [64, 64]]`).
    pub fn with_input_shapes(self, shapes: &[&[i64]]) -> Self {
        if self.state == 0 {
            return self;
        }
        self.with_arg(arg::INPUT_DIMS, input_dims(shapes))
    }

    /// The correlation id of this range (0 when not recording), as it appears in the trace's
    /// `External id`.
    pub fn correlation_id(&self) -> u64 {
        if self.state == 0 {
            return 0;
        }
        with_local(|l| l.correlation_id(self.seq))
    }
}

impl Drop for RangeGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.state != 0 {
            end(self);
        }
    }
}

/// A range held by an owner that may move between threads (the profiler's `ProfilerStep#N`,
/// a Python `record_function` object, a PyTorch op whose end callback runs on another thread):
/// unlike [`RangeGuard`] it is `Send`, and [`end`](Self::end) may run on any thread.
/// Dropping it without [`end`](Self::end) leaves the range open: the trace closes it at the
/// window's end, marked `"finished": false`.
///
/// Ended on the thread that began it, its end is recorded as a [`RangeGuard`]'s is. Ended on
/// another thread (an async op), the end is written into *the ending thread's* buffer as a
/// foreign end record naming the range (owning thread's index and sequence number): no thread
/// ever writes another's buffer, so the buffers' single-writer protocol is untouched, and the
/// hot path of ordinary ranges gains nothing. When buffers are drained, foreign ends close the
/// ranges they name (clocks are one timeline across threads). The owning thread's correlation
/// stack is not popped by a foreign end (its listeners are told only on their own thread):
/// device work launched later on that thread would still see the range as running, so
/// backends needing correlation should not rely on async ops.
///
/// ```
/// use omniprof::{OwnedRange, Profiler};
///
/// let mut profiler = Profiler::builder().build().unwrap();
/// profiler.start().unwrap();
/// let range = OwnedRange::begin("step").unwrap().with_arg("batch", 8i64);
/// assert!(range.end());
/// let trace = profiler.stop().unwrap();
/// assert!(trace.activities.iter().any(|a| &*a.name == "step"));
/// ```
#[derive(Debug)]
pub struct OwnedRange {
    state: u64,
    seq: u32,
    /// The index of the thread whose buffer holds the beginning.
    owner: u32,
    user: bool,
}

impl OwnedRange {
    /// Begins a user range (`user_annotation`) on this thread; `None` when nothing records.
    #[inline]
    pub fn begin(name: impl IntoName) -> Option<Self> {
        begin(KIND_USER, name)
    }

    /// Begins a host op (`cpu_op`) on this thread; `None` when nothing records.
    #[inline]
    pub fn begin_op(name: impl IntoName) -> Option<Self> {
        begin(KIND_OP, name)
    }

    fn on_owner_thread(&self) -> bool {
        with_local(|l| l.index()) == Some(self.owner)
    }

    /// Attaches an `args` entry to the range; on another thread than its beginning nothing
    /// is attached (the args live with the range's records).
    pub fn with_arg(self, key: &str, value: impl Into<Value>) -> Self {
        if self.on_owner_thread() {
            attach_arg(self.state, self.seq, key, value);
        }
        self
    }

    /// Attaches the input shapes, written as `Input Dims`, as [`RangeGuard::with_input_shapes`]
    /// (on the thread that began the range only).
    pub fn with_input_shapes(self, shapes: &[&[i64]]) -> Self {
        self.with_arg(arg::INPUT_DIMS, input_dims(shapes))
    }

    /// Ends the range, on any thread. Returns whether the end was recorded: false when the
    /// session it began in has stopped (the trace already closed it as unfinished) or the
    /// ending thread can record nothing more (its cap is reached, or it is exiting).
    #[inline]
    pub fn end(self) -> bool {
        if STATE.load(Ordering::Relaxed) != self.state {
            return false;
        }
        with_local(|l| {
            if l.index() == Some(self.owner) {
                push_end(l, self.state, self.seq, self.user).is_some()
            } else if self.owner <= MAX_FOREIGN_OWNER {
                let word = foreign_end_word(self.owner, self.seq);
                l.push(self.state, word, false).is_some()
            } else {
                false
            }
        })
    }
}

/// Records the beginning of a range of `kind` (a user range or a host op) on this thread;
/// `None` when nothing records. One thread-local access for everything the range needs. A
/// [`RangeGuard`] takes the range over when its end is recorded by this thread.
#[inline(always)]
fn begin(kind: u64, name: impl IntoName) -> Option<OwnedRange> {
    let state = STATE.load(Ordering::Relaxed);
    if state & 1 == 0 {
        return None;
    }
    let name = name.into_name();
    with_local(|l| begin_on(l, state, kind, name))
}

/// [`begin`] on this thread's `l`, in session `state` (which records).
#[inline(always)]
fn begin_on(l: &buffer::Local, state: u64, kind: u64, name: Name) -> Option<OwnedRange> {
    let user = kind == KIND_USER;
    let seq = l.push(state, word(kind, name), true)?;
    let correlation = l.correlation_id(seq);
    if l.listening(state) {
        correlation::begin(correlation, name, user);
    }
    Some(OwnedRange {
        state,
        seq,
        owner: (correlation >> 32) as u32,
        user,
    })
}

/// Records the end of this thread's range `seq` and tells the listeners.
#[inline(always)]
fn push_end(l: &buffer::Local, state: u64, seq: u32, user: bool) -> Option<u32> {
    let pushed = l.push(state, end_word(seq), false);
    if l.listening(state) {
        correlation::end(l.correlation_id(seq), user);
    }
    pushed
}

#[inline(always)]
fn end(guard: &RangeGuard) {
    if STATE.load(Ordering::Relaxed) == guard.state {
        with_local(|l| push_end(l, guard.state, guard.seq, guard.user));
    }
}

impl RangeGuard {
    /// The guard of a range [`begin`] just began on this thread (not a public conversion: a
    /// guard ends its range as this thread's own, which only a range begun here is).
    #[inline(always)]
    fn take_over(begun: Option<OwnedRange>) -> Self {
        match begun {
            Some(range) => Self {
                state: range.state,
                seq: range.seq,
                user: range.user,
                _this_thread: PhantomData,
            },
            None => Self::INACTIVE,
        }
    }
}

/// Records a user range (`user_annotation`, like PyTorch's `record_function`) until the guard
/// is dropped.
#[inline(always)]
pub fn record_function(name: impl IntoName) -> RangeGuard {
    RangeGuard::take_over(begin(KIND_USER, name))
}

/// Records a host operator (`cpu_op`, like `aten::mm`) until the guard is dropped.
#[inline(always)]
pub fn record_op(name: impl IntoName) -> RangeGuard {
    RangeGuard::take_over(begin(KIND_OP, name))
}

/// Records a point event on this thread (`cpu_instant_event`); the returned handle attaches
/// args to it.
#[inline]
pub fn instant(name: impl IntoName) -> InstantGuard {
    let state = STATE.load(Ordering::Relaxed);
    if state & 1 == 0 {
        return InstantGuard::INACTIVE;
    }
    let name = name.into_name();
    let w = word(KIND_INSTANT, name);
    with_local(|l| {
        let Some(seq) = l.push(state, w, true) else {
            return InstantGuard::INACTIVE;
        };
        if l.listening(state) {
            correlation::instant(name);
        }
        InstantGuard {
            state,
            seq,
            _this_thread: PhantomData,
        }
    })
}

/// Identifies a recorded instant so args can be attached to it (on the recording thread).
pub struct InstantGuard {
    state: u64,
    seq: u32,
    _this_thread: ThisThread,
}

impl InstantGuard {
    const INACTIVE: Self = Self {
        state: 0,
        seq: 0,
        _this_thread: PhantomData,
    };

    /// Attaches an `args` entry to the instant.
    pub fn with_arg(self, key: &str, value: impl Into<Value>) -> Self {
        attach_arg(self.state, self.seq, key, value);
        self
    }
}

/// Input shapes as the value of `Input Dims` (`[[64, 64], [64, 64]]`).
fn input_dims(shapes: &[&[i64]]) -> Value {
    Value::List(shapes.iter().map(|s| Value::from(s.to_vec())).collect())
}

fn attach_arg(state: u64, seq: u32, key: &str, value: impl Into<Value>) {
    if state != 0 {
        with_local(|l| l.add_arg(state, seq, key.into(), value.into()));
    }
}

/// The OS thread ids of the threads that have recorded (a backend counting per recording
/// thread, as the host perf counters do, follows them).
pub fn recording_threads() -> Vec<i64> {
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
            static NAME: $crate::record::StaticName = $crate::record::StaticName::new($name);
            $crate::record_function(&NAME)
        };
    };
}

fn correlation_id(thread_index: u32, seq: u32) -> u64 {
    ((thread_index as u64) << 32) | seq as u64
}

/// What the recorder hands a session at stop.
pub(crate) struct HostRecording {
    pub(crate) activities: Vec<Activity>,
    pub(crate) threads: Vec<ThreadRow>,
    pub(crate) dropped_events: u64,
    pub(crate) unfinished_ranges: u64,
    /// Ranges whose name did not fit in the name table (named `<name table full>`).
    pub(crate) dropped_names: u64,
}

/// The recorder's side of a session, from [`start_session`] to [`collect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostSession {
    state: u64,
    /// [`name::dropped_names`] when the session started.
    dropped_names: u64,
    /// Older than every record of the session (see [`buffer::drain`]).
    floor_tick: u64,
    /// Taken once recording has stopped: a record newer than this was written by a thread
    /// that read the state just before the stop and is left out.
    stop_tick: u64,
}

/// Starts recording for a new session.
pub(crate) fn start_session(max_records_per_thread: u64) -> HostSession {
    buffer::set_max_records_per_thread(max_records_per_thread);
    // No session records now: names no session needs can go.
    name::reclaim();
    let next_generation = (STATE.load(Ordering::Relaxed) >> 1) + 1;
    let state = (next_generation << 1) | 1;
    let floor_tick = LAST_STOP_TICK.load(Ordering::Relaxed);
    STATE.store(state, Ordering::Release);
    HostSession {
        state,
        dropped_names: name::dropped_names(),
        floor_tick,
        stop_tick: u64::MAX,
    }
}

/// Stops recording (threads notice at their next event).
pub(crate) fn stop_session(session: &mut HostSession) {
    let state = session.state;
    if STATE
        .compare_exchange(state, state & !1, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        session.stop_tick = crate::clock::ticks().max(1);
        LAST_STOP_TICK.store(session.stop_tick, Ordering::Relaxed);
    }
}

/// Pre-faults enough chunks for the threads seen so far, plus headroom.
pub(crate) fn warm_up() {
    buffer::prefill_pool(2 * buffer::registered_threads() + 8);
}

/// Drains `session` into activities on process `pid`, within `window`. Ranges still open at
/// the stop are closed at the window's end and marked `"finished": false`; a range whose end
/// was dropped past the per-thread cap is left out (its end counted in `dropped_events`), as
/// its duration is unknown.
pub(crate) fn collect(
    session: HostSession,
    pid: i64,
    conv: &TickConverter,
    window: Window,
) -> HostRecording {
    let resolve = name::resolver();
    // The clamp only absorbs the calibration's rounding: every record lies between the
    // session's start and its stop tick.
    let time = |tick| conv.to_unix_ns(tick).clamp(window.start_ns, window.end_ns);
    let drained = buffer::drain(session.state, session.floor_tick, session.stop_tick);
    // One activity per begin or instant record: reserved up front, so building the trace
    // never copies it to grow.
    let events = drained
        .iter()
        .flat_map(|t| &t.records)
        .filter(|&&(w, _)| (w >> KIND_SHIFT) & KIND_MASK != KIND_END)
        .count();
    // Ends recorded by other threads than the range's own, by (owning thread, sequence).
    let mut foreign_ends: FastMap<(u32, u32), u64> = FastMap::default();
    for thread in &drained {
        for &(w, tick) in &thread.records {
            let owner = (w >> NAME_SHIFT) as u32;
            if (w >> KIND_SHIFT) & KIND_MASK == KIND_END && owner != 0 {
                foreign_ends.insert((owner - 1, w as u32), tick);
            }
        }
    }
    // Ranges whose end was dropped past the cap, by (owning thread, sequence): their
    // duration is unknown, so they are left out (each already counted as one dropped event,
    // its end) rather than closed at the window's end.
    let mut lost_ends: FastMap<(u32, u32), ()> = FastMap::default();
    for thread in &drained {
        for &w in &thread.dropped_ends {
            let owner = match (w >> NAME_SHIFT) as u32 {
                0 => thread.index,
                foreign => foreign - 1,
            };
            lost_ends.insert((owner, w as u32), ());
        }
    }
    let mut out = HostRecording {
        activities: Vec::with_capacity(events),
        threads: Vec::new(),
        dropped_events: 0,
        unfinished_ranges: 0,
        dropped_names: name::dropped_names() - session.dropped_names,
    };
    let mut left_out = Vec::new();
    let mut stacks = CallStacks::default();
    let mut links = autograd::Links::default();
    // PyTorch numbers Python frames from 1 across the trace.
    let mut python_ids = 0;
    for thread in drained {
        out.dropped_events += thread.dropped;
        if thread.records.is_empty() {
            continue;
        }
        out.threads.push(ThreadRow {
            pid,
            tid: thread.tid,
            name: format!("thread {} ({})", thread.tid, thread.name),
            sort_index: thread.tid,
        });
        let mut args: FastMap<u32, Vec<(Arc<str>, Value)>> = FastMap::default();
        for (seq, key, value) in thread.args {
            args.entry(seq).or_default().push((key, value));
        }
        let mut autograd: FastMap<u32, Autograd> = thread.autograd.into_iter().collect();
        // Ranges begun and not yet ended. Guards end in reverse order of their beginnings
        // almost always, so the one an end record closes is found at or near the top.
        let mut open: Vec<Open> = Vec::new();
        for &(w, tick) in &thread.records {
            let seq = w as u32;
            let kind = (w >> KIND_SHIFT) & KIND_MASK;
            if kind == KIND_END {
                if w >> NAME_SHIFT != 0 {
                    // A foreign end: it closes a range of another thread, below.
                    continue;
                }
                if let Some(at) = open.iter().rposition(|o| o.seq == seq) {
                    let a = &mut out.activities[open.remove(at).index];
                    a.end_ns = time(tick).max(a.start_ns);
                }
                continue;
            }
            let t = time(tick);
            let (name, role) = resolve((w >> NAME_SHIFT) as u32);
            let kind_type = match (kind, role) {
                (_, Role::PythonFunction | Role::PythonModule(_)) => ActivityType::PythonFunction,
                (KIND_OP, _) => ActivityType::CpuOp,
                (KIND_USER, _) => ActivityType::UserAnnotation,
                _ => ActivityType::CpuInstantEvent,
            };
            let mut a = Activity::new(kind_type, name, pid, thread.tid, t, t);
            a.correlation = correlation_id(thread.index, seq);
            if !args.is_empty() {
                a.args = args.remove(&seq).unwrap_or_default();
            }
            // As for args: most threads have none, and a lookup per record would hash anyway.
            let numbers = if autograd.is_empty() {
                None
            } else {
                autograd.remove(&seq)
            };
            if let Some(numbers) = numbers {
                a.args.extend(numbers.args());
                links.add(out.activities.len(), numbers);
            }
            let outer = open.last().map_or(Frames::OUTSIDE, |o| o.frames);
            let frames = match role {
                Role::Range => {
                    if let Some(stack) = stacks.call_stack(outer.node) {
                        a.args.push((arg::CALL_STACK.into(), Value::Str(stack)));
                    }
                    outer
                }
                Role::PythonFunction | Role::PythonModule(_) => {
                    // A frame is known by its Python id; no device work links to it.
                    a.correlation = 0;
                    python_ids += 1;
                    a.args
                        .push((arg::PYTHON_ID.into(), Value::UInt(python_ids)));
                    if outer.python_id != 0 {
                        a.args
                            .push((arg::PYTHON_PARENT_ID.into(), Value::UInt(outer.python_id)));
                    }
                    if let Role::PythonModule(id) = role {
                        a.args
                            .push((arg::PYTHON_MODULE_ID.into(), Value::UInt(u64::from(id))));
                    }
                    Frames {
                        node: stacks.enter(outer.node, &a.name),
                        python_id: python_ids,
                    }
                }
            };
            if kind != KIND_INSTANT {
                open.push(Open {
                    seq,
                    index: out.activities.len(),
                    frames,
                });
            }
            out.activities.push(a);
        }
        for Open { seq, index, .. } in open {
            let a = &mut out.activities[index];
            if let Some(tick) = foreign_ends.remove(&(thread.index, seq)) {
                a.end_ns = time(tick).max(a.start_ns);
                continue;
            }
            if lost_ends.contains_key(&(thread.index, seq)) {
                left_out.push(index);
                continue;
            }
            a.end_ns = window.end_ns;
            // A Python frame open at the stop (the one that stopped the profiler, and its
            // callers) ends with the window, as PyTorch ends it.
            if a.kind != ActivityType::PythonFunction {
                out.unfinished_ranges += 1;
                a.args.push((arg::FINISHED.into(), Value::Bool(false)));
            }
        }
    }
    links.draw(&mut out.activities);
    if !left_out.is_empty() {
        left_out.sort_unstable();
        let mut index = 0;
        out.activities.retain(|_| {
            index += 1;
            left_out.binary_search(&(index - 1)).is_err()
        });
    }
    out
}

/// A range begun and not yet ended, at the drain.
struct Open {
    seq: u32,
    /// Its index in the activities.
    index: usize,
    /// The Python frames around what begins inside it (itself, when it is a frame).
    frames: Frames,
}

/// Where a range stands among the Python frames of its thread.
#[derive(Clone, Copy)]
struct Frames {
    /// The innermost frame's node in [`CallStacks`] (0: outside every frame).
    node: u32,
    /// The innermost frame's `Python id` (0: none).
    python_id: u64,
}

impl Frames {
    const OUTSIDE: Frames = Frames {
        node: 0,
        python_id: 0,
    };
}

/// The Python call stacks seen at the drain, as a tree of frame names (node 0 is the root),
/// so that every range under the same stack shares one `Call stack` string, made once.
#[derive(Default)]
struct CallStacks {
    /// Per node above the root: its parent, its name and its `Call stack`, once made.
    nodes: Vec<(u32, Arc<str>, Option<Arc<str>>)>,
    children: FastMap<(u32, Arc<str>), u32>,
}

impl CallStacks {
    /// The node for frame `name` called inside `parent`.
    fn enter(&mut self, parent: u32, name: &Arc<str>) -> u32 {
        if let Some(&node) = self.children.get(&(parent, name.clone())) {
            return node;
        }
        self.nodes.push((parent, name.clone(), None));
        let node = self.nodes.len() as u32;
        self.children.insert((parent, name.clone()), node);
        node
    }

    /// The `Call stack` of a range begun inside `node`: the frames' names innermost first,
    /// each followed by `;`. `None` outside every frame.
    fn call_stack(&mut self, node: u32) -> Option<Arc<str>> {
        let (_, _, made) = self.nodes.get(node.checked_sub(1)? as usize)?;
        if let Some(stack) = made {
            return Some(stack.clone());
        }
        let mut text = String::new();
        let mut at = node;
        while let Some((parent, name, _)) =
            at.checked_sub(1).and_then(|i| self.nodes.get(i as usize))
        {
            text.push_str(name);
            text.push(';');
            at = *parent;
        }
        let stack: Arc<str> = text.into();
        self.nodes[node as usize - 1].2 = Some(stack.clone());
        Some(stack)
    }
}

#[cfg(test)]
pub(crate) fn is_recording() -> bool {
    STATE.load(Ordering::Relaxed) & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::{Profiler, Trace};
    use omniprof_test_support::lock::serial;

    fn record(config: Config, work: impl FnOnce()) -> Trace {
        let mut p = Profiler::builder().config(config).build().unwrap();
        p.start().unwrap();
        work();
        p.stop().unwrap()
    }

    fn names(t: &Trace, tid: i64) -> Vec<&str> {
        t.activities
            .iter()
            .filter(|a| a.resource == tid)
            .map(|a| &*a.name)
            .collect()
    }

    #[test]
    fn nothing_is_recorded_without_a_session() {
        let _g = serial();
        let guard = record_function("outside");
        assert!(!guard.is_recording());
        assert_eq!(guard.correlation_id(), 0);
        drop(guard);
        let t = record(Config::default(), || {});
        assert!(t.activities.iter().all(|a| &*a.name != "outside"));
    }

    #[test]
    fn python_frames_become_python_functions_and_give_ops_their_call_stack() {
        use python::Frame;
        let _g = serial();
        let t = record(Config::default(), || {
            let module = Frame::begin(Name::python("<string>(1): <module>", None)).unwrap();
            for _ in 0..2 {
                let linear = Frame::begin(Name::python("nn.Module: Linear_0", Some(0))).unwrap();
                drop(record_op("aten::linear"));
                assert!(linear.end());
            }
            drop(record_function("step"));
            // Left open at the stop, as the frame that stops a profiler is.
            let _ = module;
        });
        let python: Vec<_> = t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityType::PythonFunction)
            .collect();
        let arg = |a: &Activity, k: &str| a.arg(k).cloned();
        assert_eq!(python.len(), 3);
        assert_eq!(&*python[0].name, "<string>(1): <module>");
        assert_eq!(arg(python[0], arg::PYTHON_ID), Some(Value::UInt(1)));
        assert_eq!(arg(python[0], arg::PYTHON_PARENT_ID), None);
        assert_eq!(python[0].end_ns, t.window.end_ns);
        assert_eq!(python[0].arg(arg::FINISHED), None);
        for (frame, id) in python[1..].iter().zip([2, 3]) {
            assert_eq!(&*frame.name, "nn.Module: Linear_0");
            assert_eq!(arg(frame, arg::PYTHON_ID), Some(Value::UInt(id)));
            assert_eq!(arg(frame, arg::PYTHON_PARENT_ID), Some(Value::UInt(1)));
            assert_eq!(arg(frame, arg::PYTHON_MODULE_ID), Some(Value::UInt(0)));
        }
        let stacks: Vec<_> = t
            .activities
            .iter()
            .filter(|a| a.kind != ActivityType::PythonFunction)
            .map(|a| (&*a.name, a.arg(arg::CALL_STACK).and_then(Value::as_str)))
            .collect();
        assert_eq!(
            stacks,
            [
                (
                    "aten::linear",
                    Some("nn.Module: Linear_0;<string>(1): <module>;")
                ),
                (
                    "aten::linear",
                    Some("nn.Module: Linear_0;<string>(1): <module>;")
                ),
                ("step", Some("<string>(1): <module>;")),
            ]
        );
        assert_eq!(t.report.unfinished_ranges, None);
    }

    #[test]
    fn a_fwdbwd_flow_joins_the_innermost_forward_op_to_the_first_backward_op_to_end() {
        let _g = serial();
        let numbers = |forward_thread, thread| Autograd {
            sequence_number: 3,
            forward_thread,
            thread,
        };
        let t = record(Config::default(), || {
            // SAFETY: literals are NUL-terminated.
            unsafe { push_op(c"aten::linear".as_ptr(), 1) };
            unsafe { push_op(c"aten::t".as_ptr(), 2) };
            assert!(pop_op_with_autograd(2, numbers(0, 1)));
            assert!(pop_op_with_autograd(1, numbers(0, 1)));
            // Another forward thread's op with the same sequence number: no flow.
            unsafe { push_op(c"aten::other".as_ptr(), 3) };
            assert!(pop_op_with_autograd(3, numbers(0, 9)));
            unsafe { push_op(c"evaluate_function: TBackward0".as_ptr(), 4) };
            unsafe { push_op(c"TBackward0".as_ptr(), 5) };
            assert!(pop_op_with_autograd(5, numbers(1, 2)));
            assert!(pop_op_with_autograd(4, numbers(1, 2)));
        });
        let flows: Vec<_> = t
            .activities
            .iter()
            .map(|a| (&*a.name, a.flow.map(|f| (f.id, f.start))))
            .collect();
        assert_eq!(
            flows,
            [
                ("aten::linear", None),
                ("aten::t", Some((1, true))),
                ("aten::other", None),
                ("evaluate_function: TBackward0", None),
                ("TBackward0", Some((1, false))),
            ]
        );
        let node = t
            .activities
            .iter()
            .find(|a| &*a.name == "TBackward0")
            .unwrap();
        assert_eq!(node.arg(arg::SEQUENCE_NUMBER), Some(&Value::Int(3)));
        assert_eq!(node.arg(arg::FWD_THREAD_ID), Some(&Value::UInt(1)));
    }

    #[test]
    fn a_frame_name_stays_apart_from_a_range_name_of_the_same_text() {
        let _g = serial();
        let text = "f.py(1): f";
        let t = record(Config::default(), || {
            drop(record_op(text));
            python::Frame::begin(Name::python(text, None)).map(python::Frame::end);
        });
        let kinds: Vec<_> = t.activities.iter().map(|a| (a.kind, &*a.name)).collect();
        assert_eq!(
            kinds,
            [
                (ActivityType::CpuOp, text),
                (ActivityType::PythonFunction, text)
            ]
        );
    }

    #[test]
    fn ranges_nest_and_carry_args_ids_and_kinds() {
        let _g = serial();
        let mut ids = (0, 0);
        let t = record(Config::default(), || {
            let outer = record_function("outer").with_arg("batch", 32i64);
            {
                let op = record_op("aten::mm").with_input_shapes(&[&[64, 64], &[64, 32]]);
                ids = (outer.correlation_id(), op.correlation_id());
                instant("mark").with_arg("note", "here");
            }
        });
        let by_name = |n: &str| t.activities.iter().find(|a| &*a.name == n).unwrap();
        let outer = by_name("outer");
        let op = by_name("aten::mm");
        let mark = by_name("mark");
        assert_eq!(outer.kind, ActivityType::UserAnnotation);
        assert_eq!(op.kind, ActivityType::CpuOp);
        assert_eq!(mark.kind, ActivityType::CpuInstantEvent);
        assert!(outer.start_ns <= op.start_ns && op.end_ns <= outer.end_ns);
        assert!(op.start_ns <= mark.start_ns && mark.start_ns <= op.end_ns);
        assert_eq!(outer.arg("batch"), Some(&Value::Int(32)));
        assert_eq!(
            op.arg(arg::INPUT_DIMS).unwrap().to_json(),
            "[[64, 64], [64, 32]]"
        );
        assert_eq!(mark.arg("note"), Some(&Value::from("here")));
        assert_eq!((outer.correlation, op.correlation), ids);
        assert_ne!(outer.correlation, op.correlation);
        assert!(t.window.start_ns <= outer.start_ns && outer.end_ns <= t.window.end_ns);
        let pid = std::process::id() as i64;
        assert!(t.activities.iter().all(|a| a.device == pid));
    }

    #[test]
    fn threads_that_exit_before_stop_are_kept_with_their_names() {
        let _g = serial();
        let t = record(Config::default(), || {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    std::thread::Builder::new()
                        .name(format!("worker-{i}"))
                        .spawn(move || {
                            for _ in 0..1000 {
                                let _r = record_function("tick");
                            }
                        })
                        .unwrap()
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        });
        let ticks = t.activities.iter().filter(|a| &*a.name == "tick").count();
        assert_eq!(ticks, 4000);
        for i in 0..4 {
            let name = format!("(worker-{i})");
            let row = t.threads.iter().find(|r| r.name.ends_with(&name)).unwrap();
            assert_eq!(names(&t, row.tid).len(), 1000);
        }
        assert_eq!(t.report.dropped_events, Some(0));
    }

    /// Records 10,000 ranges on a fresh thread under a cap of `cap` records; returns the
    /// ranges kept and the `dropped_events` count.
    fn ranges_under_cap(cap: u64) -> (usize, Option<u64>) {
        let _g = serial();
        let mut config = Config::default();
        config
            .apply(&format!("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD={cap}"))
            .unwrap();
        let t = record(config, || {
            std::thread::spawn(|| {
                for _ in 0..10_000 {
                    let _r = record_function("spin");
                }
            })
            .join()
            .unwrap();
        });
        let kept = t.activities.iter().filter(|a| &*a.name == "spin").count();
        (kept, t.report.dropped_events)
    }

    #[test]
    fn past_the_cap_events_are_counted_not_kept() {
        // 8192 records = 4096 ranges (two whole chunks); each later range is one dropped
        // event (its begin is refused, so its end is never attempted).
        assert_eq!(ranges_under_cap(8192), (4096, Some(5904)));
    }

    #[test]
    fn the_cap_is_exact_in_records() {
        // Not a multiple of the chunk size: the cap still holds to the record.
        assert_eq!(ranges_under_cap(5000), (2500, Some(7500)));
    }

    #[test]
    fn a_range_whose_end_falls_past_the_cap_is_left_out_not_stretched() {
        let _g = serial();
        let mut config = Config::default();
        config
            .apply("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=3")
            .unwrap();
        let mut p = Profiler::builder().config(config).build().unwrap();
        p.start().unwrap();
        std::thread::spawn(|| {
            // Record 1; never ended.
            std::mem::forget(record_function("open_at_stop"));
            let _lost = record_function("end_past_cap"); // record 2; its end is dropped
            drop(record_op("whole")); // record 3; its end (4) is dropped
        })
        .join()
        .unwrap();
        let t = p.stop().unwrap();
        let names: Vec<&str> = t.activities.iter().map(|a| &*a.name).collect();
        assert!(!names.contains(&"end_past_cap"), "{names:?}");
        // `whole` lost its end too (the cap fell between its records): left out as well.
        assert!(!names.contains(&"whole"), "{names:?}");
        let open = t
            .activities
            .iter()
            .find(|a| &*a.name == "open_at_stop")
            .expect("a range open at the stop is kept");
        assert_eq!(open.arg("finished"), Some(&Value::Bool(false)));
        assert_eq!(t.report.unfinished_ranges, Some(1));
        assert_eq!(t.report.dropped_events, Some(2));
    }

    #[test]
    fn range_names_are_bounded_reclaimed_between_sessions_and_reported() {
        let _g = serial();
        let names = |tag: &'static str, n: usize| {
            (0..n).map(move |i| format!("{tag}{i:06}{}", "x".repeat(1017)))
        };
        let named =
            |t: &Trace, name: &str| t.activities.iter().filter(|a| &*a.name == name).count();
        // More distinct 1 KiB names than a generation holds: the rest are counted.
        let t = record(Config::default(), || {
            for name in names("a", 20_000) {
                drop(record_function(name.as_str()));
            }
        });
        let full = named(&t, "<name table full>");
        assert!(full > 3_000, "{full}");
        assert_eq!(t.report.dropped_names, Some(full as u64));
        // The next session starts with room: its names are recorded as given.
        let t = record(Config::default(), || {
            for name in names("b", 5_000) {
                drop(record_function(name.as_str()));
            }
        });
        assert_eq!(t.report.dropped_names, None);
        assert_eq!(named(&t, "<name table full>"), 0);
        let first = names("b", 1).next().unwrap();
        assert_eq!(named(&t, &first), 1);
        // Once no session needs them, the first session's 16 MiB of names are freed.
        let t = record(Config::default(), || drop(record_function("after")));
        assert_eq!(named(&t, "after"), 1);
        let held = name::held_bytes();
        assert!(held < 12 << 20, "{} MiB of names held", held >> 20);
    }

    #[test]
    fn open_ranges_end_at_the_window_and_say_so() {
        let _g = serial();
        let mut p = Profiler::builder().build().unwrap();
        p.start().unwrap();
        let open = record_function("still_open");
        let t = p.stop().unwrap();
        drop(open);
        let a = t
            .activities
            .iter()
            .find(|a| &*a.name == "still_open")
            .unwrap();
        assert_eq!(a.end_ns, t.window.end_ns);
        assert_eq!(a.arg("finished"), Some(&Value::Bool(false)));
        assert_eq!(t.report.unfinished_ranges, Some(1));
    }

    #[test]
    fn a_guard_from_an_earlier_session_does_not_leak_into_the_next() {
        let _g = serial();
        let mut p = Profiler::builder().build().unwrap();
        p.start().unwrap();
        let old = record_function("old");
        p.stop().unwrap();
        let t = record(Config::default(), || {
            drop(old);
            let _n = record_function("new");
        });
        assert_eq!(names(&t, t.activities[0].resource), ["new"]);
    }

    fn count(t: &Trace, name: &str) -> usize {
        t.activities.iter().filter(|a| &*a.name == name).count()
    }

    #[test]
    fn recycled_chunks_never_show_records_of_earlier_sessions() {
        let _g = serial();
        // Several chunks' worth on a thread that exits (its chunks go back to the pool) and
        // on this one (it keeps its first chunk for the next session).
        let t = record(Config::default(), || {
            std::thread::spawn(|| (0..6000).for_each(|_| drop(record_function("first"))))
                .join()
                .unwrap();
            (0..3000).for_each(|_| drop(record_function("first")));
        });
        assert_eq!(count(&t, "first"), 9000);
        let t = record(Config::default(), || {
            std::thread::spawn(|| (0..10).for_each(|_| drop(record_function("second"))))
                .join()
                .unwrap();
            drop(record_function("second"));
        });
        assert_eq!(count(&t, "first"), 0);
        assert_eq!(count(&t, "second"), 11);
    }

    #[test]
    fn records_of_a_session_64_earlier_are_told_apart() {
        let _g = serial();
        // Session tags repeat every 64 sessions; what this thread wrote then is still in the
        // chunk it reuses, under the same tag, and only its age gives it away.
        let t = record(Config::default(), || {
            (0..3000).for_each(|_| drop(record_function("old")));
        });
        assert_eq!(count(&t, "old"), 3000);
        for _ in 0..63 {
            record(Config::default(), || {});
        }
        let t = record(Config::default(), || drop(record_function("new")));
        assert_eq!(count(&t, "old"), 0);
        assert_eq!(count(&t, "new"), 1);
    }

    #[test]
    fn ranges_ended_out_of_order_keep_their_own_ends() {
        let _g = serial();
        let t = record(Config::default(), || {
            let a = record_function("a");
            let b = record_function("b");
            drop(a);
            let c = record_function("c");
            drop(b);
            drop(c);
        });
        let by_name = |n: &str| t.activities.iter().find(|x| &*x.name == n).unwrap();
        let (a, b, c) = (by_name("a"), by_name("b"), by_name("c"));
        assert!(a.start_ns <= b.start_ns && b.start_ns <= a.end_ns);
        assert!(a.end_ns <= c.start_ns && c.start_ns <= b.end_ns && b.end_ns <= c.end_ns);
        assert_eq!(t.report.unfinished_ranges, None);
    }

    #[test]
    fn sessions_started_and_stopped_under_busy_threads_hold_only_their_own_ranges() {
        use std::sync::atomic::AtomicBool;
        let _g = serial();
        let done = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let done = done.clone();
                std::thread::spawn(move || {
                    while !done.load(Ordering::Relaxed) {
                        let _outer = record_function("busy_outer");
                        (0..50).for_each(|_| drop(record_op("busy_inner")));
                    }
                })
            })
            .collect();
        for _ in 0..20 {
            let t = record(Config::default(), || {
                std::thread::sleep(std::time::Duration::from_millis(2));
            });
            for a in &t.activities {
                assert!(
                    matches!(&*a.name, "busy_outer" | "busy_inner"),
                    "{}",
                    a.name
                );
                assert!(a.start_ns <= a.end_ns);
                assert!(t.window.start_ns <= a.start_ns && a.end_ns <= t.window.end_ns);
            }
        }
        done.store(true, Ordering::Relaxed);
        workers.into_iter().for_each(|w| w.join().unwrap());
    }

    #[test]
    fn records_written_after_the_stop_are_left_out() {
        let _g = serial();
        let start = crate::clock::CalibrationSample::take();
        let window_start_ns = crate::clock::wall_now_ns();
        let mut host = start_session(1 << 20);
        let ended_late = record_function("ended_late");
        drop(record_function("in_time"));
        // What a thread does when it read the state just before the stop and writes after
        // it: a range begins, and an open one ends, with the state it read.
        let state = STATE.load(Ordering::Relaxed);
        stop_session(&mut host);
        with_local(|l| {
            l.push(state, word(KIND_USER, Name::new("begun_late")), true);
            l.push(state, end_word(ended_late.seq), false);
        });
        drop(ended_late);
        let window = Window {
            start_ns: window_start_ns,
            end_ns: crate::clock::wall_now_ns(),
        };
        let conv = TickConverter::new(start, crate::clock::CalibrationSample::take());
        let host = collect(host, 1, &conv, window);
        let mut names: Vec<_> = host.activities.iter().map(|a| &*a.name).collect();
        names.sort_unstable();
        assert_eq!(names, ["ended_late", "in_time"]);
        let late = host.activities.iter().find(|a| &*a.name == "ended_late");
        assert_eq!(late.unwrap().arg("finished"), Some(&Value::Bool(false)));
        assert_eq!(host.unfinished_ranges, 1);
    }

    #[test]
    fn an_owned_range_ended_on_another_thread_keeps_its_end() {
        let _g = serial();
        let mut ended_at = (0, 0);
        let t = record(Config::default(), || {
            let outer = record_function("outer_on_owner");
            let range = OwnedRange::begin_op("async_op")
                .unwrap()
                .with_input_shapes(&[&[2, 3]]);
            let local = OwnedRange::begin("local_range").unwrap();
            // The async op ends on another thread, which records its own range too, while
            // the owner keeps recording: neither thread's ranges may be closed by it.
            let ender = std::thread::spawn(move || {
                let _other = record_function("on_ender");
                let before = crate::clock::wall_now_ns();
                assert!(range.end());
                (before, crate::clock::wall_now_ns())
            });
            ended_at = ender.join().unwrap();
            drop(record_op("after_join"));
            assert!(local.end());
            drop(outer);
        });
        let by_name = |n: &str| t.activities.iter().find(|a| &*a.name == n).unwrap();
        let op = by_name("async_op");
        let outer = by_name("outer_on_owner");
        assert_eq!(op.kind, ActivityType::CpuOp);
        assert_eq!(
            op.resource, outer.resource,
            "the op stays on its owning thread"
        );
        assert_eq!(op.arg("finished"), None);
        assert_eq!(op.arg(arg::INPUT_DIMS).unwrap().to_json(), "[[2, 3]]");
        // Its end is the other thread's moment, within the calibration's rounding.
        let slack = 1_000_000;
        assert!(op.end_ns + slack >= ended_at.0 && op.end_ns <= ended_at.1 + slack);
        assert!(op.end_ns <= by_name("after_join").start_ns);
        assert_eq!(by_name("local_range").kind, ActivityType::UserAnnotation);
        assert!(by_name("on_ender").resource != op.resource);
        assert_eq!(t.report.unfinished_ranges, None);
        // A range ended after its session stopped records nothing, on any thread.
        let mut p = Profiler::builder().build().unwrap();
        p.start().unwrap();
        let late = OwnedRange::begin_op("late").unwrap();
        p.stop().unwrap();
        assert!(!std::thread::spawn(move || late.end()).join().unwrap());
    }

    #[test]
    fn scope_macro_names_the_enclosing_block() {
        let _g = serial();
        let t = record(Config::default(), || {
            crate::scope!("block");
            let _inner = record_function(String::from("dynamic"));
        });
        let block = t.activities.iter().find(|a| &*a.name == "block").unwrap();
        let inner = t.activities.iter().find(|a| &*a.name == "dynamic").unwrap();
        assert!(block.start_ns <= inner.start_ns && inner.end_ns <= block.end_ns);
    }
}
