//! The guards and handles of recorded ranges and instants, and the calls that begin them:
//! the recorder's hot path. While no session records, beginning a range costs one relaxed
//! load of the session state and a branch; while one does, one thread-local access and a
//! 16-byte record per beginning and per end.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use super::buffer::{self, with_local};
use super::correlation;
use super::name::{IntoName, Name};
use super::state::STATE;
use super::word::{
    end_word, foreign_end_word, word, KIND_INSTANT, KIND_OP, KIND_USER, MAX_FOREIGN_OWNER,
};
use crate::keys::arg;
use crate::Value;

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
    /// The range's sequence number in this thread's buffer.
    pub(super) seq: u32,
    /// A user range (true) or a host op.
    user: bool,
    _this_thread: ThisThread,
}

/// Keeps a guard on its thread.
pub(super) type ThisThread = PhantomData<*const ()>;

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
/// use omniprof::recording::OwnedRange;
/// use omniprof::Profiler;
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
    /// The range's sequence number in its thread's buffer.
    pub(super) seq: u32,
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
pub(super) fn begin_on(l: &buffer::Local, state: u64, kind: u64, name: Name) -> Option<OwnedRange> {
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
pub(super) fn push_end(l: &buffer::Local, state: u64, seq: u32, user: bool) -> Option<u32> {
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
pub(super) fn input_dims(shapes: &[&[i64]]) -> Value {
    Value::List(shapes.iter().map(|s| Value::from(s.to_vec())).collect())
}

pub(super) fn attach_arg(state: u64, seq: u32, key: &str, value: impl Into<Value>) {
    if state != 0 {
        with_local(|l| l.add_arg(state, seq, key.into(), value.into()));
    }
}
