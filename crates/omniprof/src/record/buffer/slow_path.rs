//! The recording path's slow side, kept out of line: registering a thread on its first
//! event, starting a new session's contents, taking the next chunk, and the per-thread cap
//! past which records are dropped and counted.
//!
//! The "module docs" cited below are the [buffer's](super): its ownership protocol.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::chunk_pool::{take_chunk, Chunk, POOL};
use super::fork::at_fork;
use super::local::{Local, EXIT};
use super::open_block::OpenBlock;
use super::registry::{ThreadBuffer, NEXT_THREAD_INDEX, REGISTRY};
use super::ring;
use super::side_tables::SPARE_AUTOGRAD;
use super::staged::Staged;
use super::thread_name::{current_tid, os_thread_name};
use crate::lock;
use crate::record::op_stack::OpStack;
use crate::record::word::session_tag;

/// The per-thread cap, in records.
static MAX_RECORDS: AtomicUsize = AtomicUsize::new(4 << 20);

/// Sets the per-thread cap in records for sessions started later.
pub(crate) fn set_max_records_per_thread(records: u64) {
    MAX_RECORDS.store(records.try_into().unwrap_or(usize::MAX), Ordering::Relaxed);
}

impl Local {
    /// The slow path: register the thread, start a new session's contents, or take a chunk.
    /// Past the cap the record (`word`) is dropped and counted, and remembered when it ends a
    /// range.
    #[cold]
    #[inline(never)]
    pub(super) fn make_room(&self, state: u64, word: u64, begins_range: bool) -> Option<()> {
        if self.exiting.get() {
            return None;
        }
        let buffer = self.buffer_or_register();
        if state != self.state.get() {
            let mut chunks = lock(&buffer.chunks);
            let mut old = std::mem::take(&mut *chunks);
            let first = if old.is_empty() {
                take_chunk()
            } else {
                old.swap_remove(0)
            };
            lock(&POOL).extend(old);
            chunks.push(first);
            buffer.dropped.store(0, Ordering::Relaxed);
            lock(&buffer.dropped_ends).clear();
            lock(&buffer.args).clear();
            let mut autograd = lock(&buffer.autograd);
            SPARE_AUTOGRAD.give_back(autograd.clear());
            buffer.staged_autograd.forget();
            drop(autograd);
            let mut packed = lock(&buffer.packed);
            packed.clear();
            buffer.open_packed.forget();
            drop(packed);
            buffer.state.store(state, Ordering::Release);
            self.filled.set(0);
            self.point_at(&mut chunks[0]);
            self.state.set(state);
            self.tag.set(session_tag(state));
            self.seq.set(0);
            self.listening
                .set(crate::record::correlation::refresh_thread());
            ring::note_first_chunk(state);
            if self.pos.get() != self.end.get() {
                return Some(());
            }
        }
        let mut chunks = lock(&buffer.chunks);
        if ring::is_ring(state) {
            return ring::next_chunk(self, buffer, &mut chunks, word, begins_range);
        }
        // SAFETY: both point into the chunk being written, `chunk_start` at its first slot.
        let in_chunk = unsafe { self.pos.get().offset_from(self.chunk_start.get()) } as usize;
        let recorded = self.filled.get() + in_chunk;
        if recorded >= MAX_RECORDS.load(Ordering::Relaxed) {
            buffer.dropped.fetch_add(1, Ordering::Relaxed);
            if !begins_range {
                lock(&buffer.dropped_ends).push(word);
            }
            return None;
        }
        self.filled.set(recorded);
        chunks.push(take_chunk());
        let last = chunks.len() - 1;
        self.point_at(&mut chunks[last]);
        Some(())
    }

    /// Writes go to `chunk` next, up to its end or to the cap, whichever comes first.
    pub(super) fn point_at(&self, chunk: &mut Chunk) {
        let room = MAX_RECORDS
            .load(Ordering::Relaxed)
            .saturating_sub(self.filled.get())
            .min(chunk.len());
        let start = chunk.as_mut_ptr();
        self.chunk_start.set(start);
        self.pos.set(start);
        // SAFETY: `room` ≤ the chunk's length, so the end stays within (or one past) it.
        self.end.set(unsafe { start.add(room) });
    }

    /// This thread's buffer, created and registered on first use.
    pub(crate) fn buffer_or_register(&self) -> &ThreadBuffer {
        if self.buffer.get().is_null() {
            let tid = current_tid();
            let name = std::thread::current()
                .name()
                .map(str::to_owned)
                .unwrap_or_else(|| os_thread_name(tid));
            let buffer = Arc::new(ThreadBuffer {
                index: NEXT_THREAD_INDEX.fetch_add(1, Ordering::Relaxed),
                tid,
                name: Mutex::new(name),
                chunks: Mutex::new(Vec::new()),
                state: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                overwritten: AtomicU64::new(0),
                view_epoch: AtomicU64::new(0),
                view_chunks: AtomicUsize::new(0),
                dropped_ends: Mutex::new(Vec::new()),
                args: Mutex::default(),
                autograd: Mutex::default(),
                packed: Mutex::default(),
                open_packed: OpenBlock::default(),
                staged_autograd: Staged::default(),
                exited: AtomicBool::new(false),
                pid: AtomicU32::new(std::process::id()),
            });
            at_fork();
            self.buffer.set(Arc::as_ptr(&buffer));
            self.id_base.set((buffer.index as u64) << 32);
            lock(&REGISTRY).push(buffer);
            EXIT.with(|_| ());
        }
        // SAFETY: set just above or earlier by this thread; the registry keeps it alive
        // until this thread has exited (module docs).
        unsafe { &*self.buffer.get() }
    }
    /// Allocates this thread's stack of pushed ops; `None` once it is exiting (it could not
    /// be freed).
    #[cold]
    #[inline(never)]
    pub(crate) fn allocate_op_stack(&self) -> Option<*mut OpStack> {
        if self.exiting.get() {
            return None;
        }
        // Registering arms the exit guard that frees it.
        self.buffer_or_register();
        let ops = Box::into_raw(OpStack::new());
        self.op_stack.set(ops);
        Some(ops)
    }
}
