//! The hot path: the owning thread's view of its buffer, and [`Local::push`], which appends
//! one record to it. Everything a record needs is in the thread's own [`Local`]; what it
//! does when it runs out of room is in [`slow_path`](super::slow_path). The "module docs" the
//! SAFETY comments cite are the [buffer's](super): its ownership protocol.

use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

use super::chunk_pool::Slot;
use super::prefetch;
use super::registry::ThreadBuffer;
use crate::record::op_stack::OpStack;

/// The owning thread's view of its buffer; const-initialized and without `Drop`, so the
/// hot path pays no lazy-initialization check.
pub(crate) struct Local {
    pub(super) pos: Cell<*mut Slot>,
    pub(super) end: Cell<*mut Slot>,
    pub(super) state: Cell<u64>,
    /// The session's tag, already in place in a record word.
    pub(super) tag: Cell<u64>,
    /// Where the chunk being written starts, and how many records the earlier chunks of this
    /// session hold: the count the cap is checked against, kept off the per-event path.
    pub(super) chunk_start: Cell<*mut Slot>,
    pub(super) filled: Cell<usize>,
    pub(super) seq: Cell<u32>,
    /// This thread's index, shifted into the high half of its correlation ids.
    pub(super) id_base: Cell<u64>,
    /// Whether the session has correlation listeners (see
    /// [`correlation`](crate::record::correlation)).
    pub(super) listening: Cell<bool>,
    pub(super) buffer: Cell<*const ThreadBuffer>,
    /// The thread's pushed ops ([`push_op`](crate::record::push_op)), allocated on its first push.
    pub(super) op_stack: Cell<*mut OpStack>,
    pub(super) exiting: Cell<bool>,
}

thread_local! {
    pub(super) static LOCAL: Local = const {
        Local {
            pos: Cell::new(null_mut()),
            end: Cell::new(null_mut()),
            state: Cell::new(0),
            tag: Cell::new(0),
            chunk_start: Cell::new(null_mut()),
            filled: Cell::new(0),
            seq: Cell::new(0),
            id_base: Cell::new(0),
            listening: Cell::new(false),
            buffer: Cell::new(std::ptr::null()),
            op_stack: Cell::new(null_mut()),
            exiting: Cell::new(false),
        }
    };
    pub(super) static EXIT: ExitGuard = const { ExitGuard };
}

/// Runs `f` on the calling thread's [`Local`]. `LocalKey::with` is taken only for the
/// address, so it stays small enough to inline on the hot path whatever `f` does.
#[inline(always)]
pub(crate) fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    // SAFETY: used by this thread within this call only.
    f(unsafe { this_thread() })
}

/// The calling thread's [`Local`], for a hot path called from several places: its body is
/// then inlined into each, where a closure passed to [`with_local`] stays one function (a
/// call and a frame more per event).
///
/// # Safety
/// The reference is used by the calling thread only, within the call that took it.
#[inline(always)]
pub(crate) unsafe fn this_thread<'a>() -> &'a Local {
    let local: *const Local = LOCAL.with(|l| l as *const Local);
    // SAFETY: `LOCAL` is const-initialized and has no destructor, so its storage lives as
    // long as the thread; the caller keeps the reference on this thread, within its call.
    unsafe { &*local }
}

/// Marks the thread's buffer as exited when the thread ends, so it can be freed once drained.
pub(super) struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            l.exiting.set(true);
            l.pos.set(null_mut());
            l.end.set(null_mut());
            l.state.set(0);
            let ops = l.op_stack.replace(null_mut());
            if !ops.is_null() {
                // SAFETY: made by `allocate_op_stack` from a box, freed once (it was taken
                // out of the cell); `exiting` keeps another from being allocated.
                drop(unsafe { Box::from_raw(ops) });
            }
            let buffer = l.buffer.get();
            if !buffer.is_null() {
                // SAFETY: the registry keeps the buffer alive until `exited` is set and the
                // buffer drained; this is the last use of the pointer by its thread.
                unsafe { (*buffer).exited.store(true, Ordering::Release) };
            }
        });
    }
}

impl Local {
    /// Appends one record for session `state`; false when it was dropped (cap reached or the
    /// thread is exiting). `word` gets the sequence number when `begins_range`.
    #[inline(always)]
    pub(crate) fn push(&self, state: u64, word: u64, begins_range: bool) -> Option<u32> {
        self.write(state, word, begins_range, crate::clock::ticks)
    }

    /// [`push`](Self::push), stamped `tick` instead of now: for what began before this
    /// thread could record it (a Python frame running when the window opened). `tick` is one
    /// the drain keeps ([`backdated_tick`](super::backdated_tick)); the thread's records are
    /// then out of tick order, which the decoder puts right.
    pub(crate) fn push_at(
        &self,
        state: u64,
        word: u64,
        begins_range: bool,
        tick: u64,
    ) -> Option<u32> {
        self.write(state, word, begins_range, || tick)
    }

    #[inline(always)]
    fn write(
        &self,
        state: u64,
        word: u64,
        begins_range: bool,
        tick: impl FnOnce() -> u64,
    ) -> Option<u32> {
        if state != self.state.get() || self.pos.get() == self.end.get() {
            self.make_room(state, word, begins_range)?;
        }
        let seq = if begins_range {
            let seq = self.seq.get().wrapping_add(1);
            self.seq.set(seq);
            seq
        } else {
            word as u32
        };
        let tick = tick();
        let pos = self.pos.get();
        prefetch::ahead_of(pos);
        // SAFETY: `make_room` guarantees `pos < end` inside a chunk this thread owns (see the
        // module docs).
        unsafe {
            (*pos)
                .word
                .store(word | self.tag.get() | seq as u64, Ordering::Relaxed);
            // Stored last: a drainer that sees this tick sees the word above.
            (*pos).tick.store(tick, Ordering::Release);
            self.pos.set(pos.add(1));
        }
        Some(seq)
    }

    /// This thread's stack of pushed ops, or null before its first push (and once it is
    /// exiting).
    #[inline(always)]
    pub(crate) fn op_stack(&self) -> *mut OpStack {
        self.op_stack.get()
    }

    /// This thread's index (the high half of its correlation ids), once it has recorded.
    #[inline(always)]
    pub(crate) fn index(&self) -> Option<u32> {
        let buffer = self.buffer.get();
        // SAFETY: non-null buffers are alive while their thread lives (module docs).
        (!buffer.is_null()).then(|| unsafe { (*buffer).index })
    }

    /// The correlation id of this thread's range `seq`.
    #[inline(always)]
    pub(crate) fn correlation_id(&self, seq: u32) -> u64 {
        self.id_base.get() | seq as u64
    }

    /// True when the current session's backends want correlation pushes.
    #[inline(always)]
    pub(crate) fn listening(&self, state: u64) -> bool {
        self.listening.get() && self.state.get() == state
    }
}
