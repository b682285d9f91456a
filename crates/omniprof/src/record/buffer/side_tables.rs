//! What a record carries beside its 16 bytes (a range's args, what autograd knows of an op,
//! packed args: an op's inputs, an allocator report), kept in per-thread tables under locks
//! off the hot path (autograd's numbers, which nearly every op carries,
//! [staged](super::staged) first without one, and packed args and allocator reports written
//! into an [open block](super::open_block) without one), and joined to their records by
//! sequence number at the drain.
//!
//! The "module docs" cited below are the [buffer's](super): its ownership protocol.

use std::sync::Arc;

use super::block_list::BlockList;
use super::local::Local;
use super::registry::ThreadBuffer;
use super::staged::Entries;
use crate::lock;
use crate::record::autograd::{Autograd, AUTOGRAD_WORDS};
use crate::record::memory_usage::{self, REPORT_WORDS};
use crate::record::packed_args::{PackedArgs, UnpackArgs};
use crate::record::spare_blocks::SpareBlocks;
use crate::{FastMap, Value};

impl Local {
    /// Attaches an arg to the range or instant `seq` of the current session.
    pub(crate) fn add_arg(&self, state: u64, seq: u32, key: Arc<str>, value: Value) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.args).push((seq, key, value));
        }
    }

    /// Attaches what autograd knows of op `seq`: staged without a lock, moved into the
    /// thread's table a batch at a time ([`staged`](super::staged)). Nothing is attached
    /// for a negative sequence number (an op autograd did not record).
    #[inline]
    pub(crate) fn add_autograd(&self, state: u64, seq: u32, autograd: Autograd) {
        if autograd.sequence_number >= 0
            && state == self.state.get()
            && !self.buffer.get().is_null()
        {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            let words = autograd.words();
            buffer
                .staged_autograd
                .stage(seq, &words, &buffer.autograd, append_autograd);
        }
    }

    /// Attaches args packed as `words`, unpacked by `unpack` at the drain, to record `seq`:
    /// written into the thread's open block without a lock ([`open_block`](super::open_block)).
    pub(crate) fn add_packed(&self, state: u64, seq: u32, words: &[u64], unpack: UnpackArgs) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            // (The staged reports stay staged: the packed args need not be in record order.)
            buffer.open_packed.push(seq, words, unpack, &buffer.packed);
        }
    }

    /// Attaches an allocator report's words to record `seq`: written into the thread's
    /// open block without a lock, as an op's packed args are.
    #[inline]
    pub(crate) fn add_memory(&self, state: u64, seq: u32, words: &[u64; REPORT_WORDS]) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            buffer
                .open_packed
                .push(seq, words, memory_usage::unpack, &buffer.packed);
        }
    }
}

impl ThreadBuffer {
    /// The thread's packed args, taken: its sealed blocks, then a copy of what its open
    /// block holds that no drain took (a drain at `stop`).
    pub(super) fn take_packed(&self) -> PackedArgs {
        let mut sealed = lock(&self.packed);
        let mut out = std::mem::take(&mut *sealed);
        self.open_packed.take_into(&mut out);
        out
    }

    /// A copy of the thread's packed args, as [`take_packed`](Self::take_packed) would take
    /// them, leaving them in place (a ring session's snapshot).
    pub(super) fn copy_packed(&self) -> PackedArgs {
        let sealed = lock(&self.packed);
        let mut out = sealed.clone();
        self.open_packed.copy_into(&mut out);
        out
    }
}

/// Blocks of the threads' autograd tables faulted in ahead of need ([`SpareBlocks`]): nearly
/// every op of a training step carries autograd's numbers, a block (64 KiB) every 2,048 ops.
pub(super) static SPARE_AUTOGRAD: SpareBlocks<(u32, Autograd)> = SpareBlocks::new(
    BlockList::<(u32, Autograd)>::PER_BLOCK,
    2,
    4,
    top_up_autograd,
);

fn top_up_autograd() {
    SPARE_AUTOGRAD.fill();
}

/// Frees spare autograd blocks past the pool's high mark (a ring session's start).
pub(crate) fn trim_spare_autograd() {
    SPARE_AUTOGRAD.trim();
}

/// Appends staged autograd numbers to a thread's table of them.
pub(super) fn append_autograd(
    table: &mut BlockList<(u32, Autograd)>,
    staged: Entries<'_, AUTOGRAD_WORDS>,
) {
    for (seq, words) in staged {
        table.push_from((seq, Autograd::from_words(words)), &SPARE_AUTOGRAD);
    }
}

/// A drained thread's autograd numbers by record sequence number; the table's blocks go back
/// to the spares.
pub(crate) fn autograd_by_seq(table: BlockList<(u32, Autograd)>) -> FastMap<u32, Autograd> {
    let blocks = table.into_blocks();
    let by_seq = blocks.iter().flatten().copied().collect();
    SPARE_AUTOGRAD.give_back(blocks);
    by_seq
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::buffer::staged::Staged;

    #[test]
    fn staged_autograd_numbers_come_back_whole() {
        let staged = Staged::<AUTOGRAD_WORDS>::default();
        let numbers = [
            Autograd {
                sequence_number: 7,
                forward_thread: 0,
                thread: 1,
            },
            Autograd {
                sequence_number: -1,
                forward_thread: u64::MAX,
                thread: 2,
            },
        ];
        let table = std::sync::Mutex::new(BlockList::default());
        for (seq, n) in (10..).zip(&numbers) {
            staged.stage(seq, &n.words(), &table, append_autograd);
        }
        let back: Vec<_> = staged
            .take_with(&table, append_autograd)
            .into_iter()
            .collect();
        assert_eq!(back, [(10, numbers[0]), (11, numbers[1])]);
    }

    #[test]
    fn autograd_numbers_past_a_block_come_back_by_sequence_number() {
        let per_block = BlockList::<(u32, Autograd)>::PER_BLOCK as u32;
        let numbers = |seq: u32| Autograd {
            sequence_number: i64::from(seq) - 3,
            forward_thread: u64::from(seq) * 2,
            thread: 9,
        };
        let mut table = BlockList::default();
        for seq in 0..per_block + 5 {
            table.push_from((seq, numbers(seq)), &SPARE_AUTOGRAD);
        }
        let by_seq = autograd_by_seq(table);
        assert_eq!(by_seq.len(), per_block as usize + 5);
        for seq in [0, per_block - 1, per_block, per_block + 4] {
            assert_eq!(by_seq[&seq], numbers(seq), "record {seq}");
        }
    }
}
