//! The push/pop API: host ops kept on the recording thread's stack (the shape of NVTX's push and
//! pop), for a caller that sees an op's beginning and its end as two separate calls with nowhere to
//! keep a guard in between: the start and end callbacks of PyTorch's `RecordFunction`, which the
//! Python package's op observer forwards here.
//!
//! [`push_op`] begins an op under a key (the address of the caller's own record of it) and
//! [`pop_op`] with the same key on the same thread ends it. The op's name comes as the
//! address of a C string: a thread caches the names it saw by address, so a repeated name
//! costs one text compare instead of hashing, and both calls make a single thread-local
//! access. Ops end in reverse order of their beginnings, and a pop whose key is not on top
//! still ends the right op: one whose key is deeper ends it (the ops above it stay open and
//! are closed as unfinished), one whose key this thread never pushed ends nothing.
//!
//! ```
//! use omniprof::recording::{pop_op, push_op};
//! use omniprof::Profiler;
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! let (outer, inner) = (1, 2);
//! // SAFETY: the names are NUL-terminated strings.
//! unsafe { push_op(c"aten::linear".as_ptr(), outer) };
//! unsafe { push_op(c"aten::addmm".as_ptr(), inner).with_input_shapes(&[&[8, 16]]) };
//! assert!(pop_op(inner) && pop_op(outer));
//! let trace = profiler.stop().unwrap();
//! assert!(trace.activities.iter().any(|a| &*a.name == "aten::addmm"));
//! ```

use std::ffi::c_char;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use super::autograd::Autograd;
use super::buffer::{this_thread, with_local, Local};
use super::guard::{attach_arg, begin_on, input_dims, push_end, ThisThread};
use super::op_stack::OpStack;
use super::packed_args::UnpackArgs;
use super::state::STATE;
use super::word::KIND_OP;
use crate::keys::arg;
use crate::Value;

/// A pushed op, for attaching its input shapes on the thread that pushed it.
pub struct PushedOp {
    state: u64,
    seq: u32,
    _this_thread: ThisThread,
}

impl PushedOp {
    const INACTIVE: Self = Self {
        state: 0,
        seq: 0,
        _this_thread: PhantomData,
    };

    /// Attaches the input shapes, written as `Input Dims` (nothing happens when the op is
    /// not recorded).
    pub fn with_input_shapes(self, shapes: &[&[i64]]) -> Self {
        if self.state != 0 {
            attach_arg(self.state, self.seq, arg::INPUT_DIMS, input_dims(shapes));
        }
        self
    }

    /// Attaches what autograd knows of the op: written as its `Sequence number` and
    /// `Fwd thread id`, and joining a forward op to its backward node with a `fwdbwd` flow
    /// (see [`Autograd`]; nothing happens when the op is not recorded, or when the sequence
    /// number is negative: PyTorch's for an op autograd did not record).
    pub fn with_autograd(self, autograd: Autograd) -> Self {
        if self.state != 0 {
            with_local(|l| l.add_autograd(self.state, self.seq, autograd));
        }
        self
    }

    /// Attaches an `args` entry (nothing happens when the op is not recorded).
    pub fn with_arg(self, key: &str, value: impl Into<Value>) -> Self {
        attach_arg(self.state, self.seq, key, value);
        self
    }
}

/// Begins a host op (`cpu_op`) named by the NUL-terminated string at `name` on this thread,
/// to be ended by [`pop_op`] with the same `key` on this thread. Pushed while no session
/// records, it records nothing but still pairs with its pop.
///
/// # Safety
/// `name` points to a NUL-terminated string, readable for the duration of the call.
#[inline]
pub unsafe fn push_op(name: *const c_char, key: usize) -> PushedOp {
    let state = STATE.load(Ordering::Relaxed);
    // SAFETY: forwarded contract; the thread's `Local` is used within this call.
    unsafe { push_on(this_thread(), state, name, key) }
}

/// [`push_op`], with args packed as `words`, which `unpack` turns into `args` entries when
/// the session stops (see [`UnpackArgs`]): for a caller whose args cost more to build than to
/// pack, such as PyTorch's input shapes (the words are dropped when the op is not recorded).
/// One call, so that the thread's state is looked up once.
///
/// # Safety
/// As [`push_op`].
#[inline]
pub unsafe fn push_op_packed(
    name: *const c_char,
    key: usize,
    words: &[u64],
    unpack: UnpackArgs,
) -> PushedOp {
    let state = STATE.load(Ordering::Relaxed);
    // SAFETY: forwarded contract; the thread's `Local` is used within this call.
    let l = unsafe { this_thread() };
    // SAFETY: forwarded contract.
    let op = unsafe { push_on(l, state, name, key) };
    if op.state != 0 {
        l.add_packed(op.state, op.seq, words, unpack);
    }
    op
}

/// [`push_op`] on this thread's `l`, in session `state`.
///
/// # Safety
/// As [`push_op`].
#[inline(always)]
unsafe fn push_on(l: &Local, state: u64, name: *const c_char, key: usize) -> PushedOp {
    let mut ops = l.op_stack();
    if ops.is_null() {
        match l.allocate_op_stack() {
            Some(allocated) => ops = allocated,
            None => return PushedOp::INACTIVE,
        }
    }
    // Each borrow of the thread's stack ends before anything else can run on this thread
    // (`begin_on` may call correlation listeners, which may push: they take the slots
    // above this one).
    let (slot, name) = {
        // SAFETY: only this thread uses its stack, and no other borrow is live.
        let ops = unsafe { &mut *ops };
        let Some(slot) = ops.reserve() else {
            return PushedOp::INACTIVE;
        };
        if state & 1 == 0 {
            ops.fill(slot, key, 0, 0);
            return PushedOp::INACTIVE;
        }
        // SAFETY: `name` is NUL-terminated (the contract).
        (slot, unsafe { ops.name(name) })
    };
    let (state, seq) = match begin_on(l, state, KIND_OP, name) {
        Some(range) => (state, range.seq),
        None => (0, 0),
    };
    // SAFETY: as above.
    unsafe { (*ops).fill(slot, key, state, seq) };
    PushedOp {
        state,
        seq,
        _this_thread: PhantomData,
    }
}

/// Ends the op [`push_op`] began under `key` on this thread. Returns whether its end was
/// recorded: false when it recorded nothing, its session has stopped, or no op was pushed
/// under `key` here.
#[inline]
pub fn pop_op(key: usize) -> bool {
    pop(key, None)
}

/// [`pop_op`], attaching what autograd knows of the op first, as
/// [`PushedOp::with_autograd`] does: for a caller that learns the numbers only by the op's
/// end (PyTorch sets some of them after its start callbacks ran). Numbers with a negative
/// sequence number (PyTorch's for an op autograd did not record) are not attached: the op
/// ends as by [`pop_op`], so that a caller can end every op through this one call.
#[inline]
pub fn pop_op_with_autograd(key: usize, autograd: Autograd) -> bool {
    pop(key, Some(autograd))
}

/// Through [`this_thread`], not [`with_local`], so that the whole pop inlines into each
/// caller (a closure would stay one function: a call and a frame more per op).
#[inline(always)]
fn pop(key: usize, autograd: Option<Autograd>) -> bool {
    // SAFETY: the thread's `Local` is used within this call.
    let l = unsafe { this_thread() };
    let ops: *mut OpStack = l.op_stack();
    if ops.is_null() {
        return false;
    }
    // SAFETY: only this thread uses its stack, and no other borrow is live.
    let Some((state, seq)) = (unsafe { &mut *ops }).pop(key) else {
        return false;
    };
    if state == 0 || STATE.load(Ordering::Relaxed) != state {
        return false;
    }
    if let Some(autograd) = autograd {
        l.add_autograd(state, seq, autograd);
    }
    push_end(l, state, seq, false).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::op_stack;
    use crate::ActivityType;
    use crate::Value;
    use crate::{Profiler, Trace};
    use omniprof_test_support::lock::serial;

    fn record(work: impl FnOnce()) -> Trace {
        let mut p = Profiler::builder().build().unwrap();
        p.start().unwrap();
        work();
        p.stop().unwrap()
    }

    fn span<'a>(t: &'a Trace, name: &str) -> &'a crate::Activity {
        t.activities
            .iter()
            .find(|a| &*a.name == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", t.activities))
    }

    #[test]
    fn pushed_ops_nest_and_carry_their_shapes() {
        let _g = serial();
        let t = record(|| {
            // SAFETY: literals are NUL-terminated.
            unsafe { push_op(c"stack_outer".as_ptr(), 10) };
            unsafe { push_op(c"stack_inner".as_ptr(), 20) }.with_input_shapes(&[&[2, 3]]);
            assert!(pop_op(20));
            assert!(pop_op(10));
            assert!(!pop_op(10), "popped twice");
        });
        let (outer, inner) = (span(&t, "stack_outer"), span(&t, "stack_inner"));
        assert_eq!(outer.kind, ActivityType::CpuOp);
        assert!(outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns);
        assert_eq!(inner.arg(arg::INPUT_DIMS).unwrap().to_json(), "[[2, 3]]");
        assert!(outer.arg(arg::FINISHED).is_none() && inner.arg(arg::FINISHED).is_none());
    }

    #[test]
    fn a_name_rebuilt_at_the_same_address_is_told_apart() {
        let _g = serial();
        let t = record(|| {
            let mut buf = *b"stack_first\0";
            for key in 0..2 {
                // SAFETY: `buf` is NUL-terminated.
                unsafe { push_op(buf.as_ptr().cast(), key) };
                assert!(pop_op(key));
                buf[6..11].copy_from_slice(b"other");
            }
        });
        span(&t, "stack_first");
        span(&t, "stack_other");
    }

    #[test]
    fn a_long_name_is_recorded_whole() {
        let _g = serial();
        let long = c"autograd::engine::evaluate_function: ConvolutionBackward0 (a long name)";
        let t = record(|| {
            for key in 0..2 {
                // SAFETY: a `CStr` is NUL-terminated.
                unsafe { push_op(long.as_ptr(), key) };
                assert!(pop_op(key));
            }
        });
        let whole = long.to_str().unwrap();
        assert_eq!(t.activities.iter().filter(|a| &*a.name == whole).count(), 2);
    }

    #[test]
    fn a_pop_below_the_top_ends_its_op_and_leaves_the_ones_above_open() {
        let _g = serial();
        let t = record(|| {
            // SAFETY: literals are NUL-terminated.
            unsafe { push_op(c"stack_parent".as_ptr(), 1) };
            unsafe { push_op(c"stack_lost".as_ptr(), 2) };
            assert!(!pop_op(3), "never pushed");
            assert!(pop_op(1));
            assert!(!pop_op(2), "discarded with its parent's pop");
        });
        assert!(span(&t, "stack_parent").arg(arg::FINISHED).is_none());
        assert_eq!(
            span(&t, "stack_lost").arg(arg::FINISHED),
            Some(&Value::Bool(false))
        );
    }

    #[test]
    fn pushes_past_the_depth_limit_still_pair_with_their_pops() {
        let _g = serial();
        let depth = op_stack::MAX_DEPTH + 10;
        let t = record(|| {
            for key in 0..depth {
                // SAFETY: the literal is NUL-terminated.
                unsafe { push_op(c"stack_deep".as_ptr(), key) };
            }
            let recorded = (0..depth).rev().filter(|&key| pop_op(key)).count();
            assert_eq!(recorded, op_stack::MAX_DEPTH);
        });
        let deep = t.activities.iter().filter(|a| &*a.name == "stack_deep");
        assert_eq!(deep.clone().count(), op_stack::MAX_DEPTH);
        assert!(deep.clone().all(|a| a.arg(arg::FINISHED).is_none()));
    }

    #[test]
    fn an_op_pushed_before_a_session_records_nothing_but_keeps_the_pairing() {
        let _g = serial();
        // SAFETY: the literals are NUL-terminated.
        unsafe { push_op(c"stack_before".as_ptr(), 1) };
        let t = record(|| {
            unsafe { push_op(c"stack_during".as_ptr(), 2) };
            assert!(pop_op(2));
            assert!(!pop_op(1), "began outside the session");
        });
        assert!(t.activities.iter().all(|a| &*a.name != "stack_before"));
        assert!(span(&t, "stack_during").arg(arg::FINISHED).is_none());
    }
}
