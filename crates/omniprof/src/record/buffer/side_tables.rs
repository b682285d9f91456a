//! What a record carries beside its 16 bytes (a range's args, what autograd knows of an op,
//! packed args: an op's inputs, an allocator report), kept in per-thread tables under locks
//! off the hot path (allocator reports staged first without one), and joined to their
//! records by sequence number at the drain.
//!
//! The "module docs" cited below are the [buffer's](super): its ownership protocol.

use std::sync::Arc;

use super::local::Local;
use crate::lock;
use crate::record::autograd::Autograd;
use crate::record::memory_usage::REPORT_WORDS;
use crate::record::packed_args::UnpackArgs;
use crate::Value;

impl Local {
    /// Attaches an arg to the range or instant `seq` of the current session.
    pub(crate) fn add_arg(&self, state: u64, seq: u32, key: Arc<str>, value: Value) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.args).push((seq, key, value));
        }
    }

    /// Attaches what autograd knows of op `seq`.
    pub(crate) fn add_autograd(&self, state: u64, seq: u32, autograd: Autograd) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.autograd).push((seq, autograd));
        }
    }

    /// Attaches args packed as `words`, unpacked by `unpack` at the drain, to record `seq`.
    pub(crate) fn add_packed(&self, state: u64, seq: u32, words: &[u64], unpack: UnpackArgs) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            // (The staged reports stay staged: the packed args need not be in record order.)
            lock(&buffer.packed).push(seq, words, unpack);
        }
    }

    /// Attaches an allocator report's words to record `seq`: staged without a lock, moved
    /// into the packed args a batch at a time ([`staged_reports`](super::staged_reports)).
    #[inline]
    pub(crate) fn add_memory(&self, state: u64, seq: u32, words: &[u64; REPORT_WORDS]) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            if !buffer.staged.push(seq, words) {
                buffer.staged.move_into(&mut lock(&buffer.packed));
                buffer.staged.push(seq, words);
            }
        }
    }
}
