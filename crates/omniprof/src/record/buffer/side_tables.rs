//! What a record carries beside its 16 bytes (a range's args, what autograd knows of an op,
//! packed args: an op's inputs, an allocator report), kept in per-thread tables under locks
//! off the hot path, and joined to their records by sequence number at the drain. All but a
//! range's args are [staged](super::staged) first without a lock and moved into their table
//! a batch at a time.
//!
//! The "module docs" cited below are the [buffer's](super): its ownership protocol.

use std::sync::{Arc, Mutex};

use super::block_list::BlockList;
use super::local::Local;
use super::registry::ThreadBuffer;
use super::staged::Staged;
use crate::lock;
use crate::record::autograd::Autograd;
use crate::record::memory_usage::{self, REPORT_WORDS};
use crate::record::packed_args::{PackedArgs, UnpackArgs};
use crate::Value;

/// Words staged per kind (each entry takes one more, its header): 32 allocator reports, 64
/// ops' autograd numbers, and packed args of about 50 ops with their shapes.
pub(super) const STAGED_REPORT_WORDS: usize = 32 * (1 + REPORT_WORDS);
pub(super) const STAGED_AUTOGRAD_WORDS: usize = 64 * 4;
pub(super) const STAGED_PACKED_WORDS: usize = 1024;

/// A thread's autograd table, as its staged numbers are kept there.
type AutogradTable = BlockList<(u32, Autograd)>;

fn keep_report(packed: &mut PackedArgs, seq: u32, words: &[u64]) {
    packed.push(seq, words, memory_usage::unpack);
}

fn keep_autograd(table: &mut AutogradTable, seq: u32, words: &[u64]) {
    if let &[sequence_number, forward_thread, thread] = words {
        let numbers = Autograd {
            sequence_number: sequence_number as i64,
            forward_thread,
            thread,
        };
        table.push((seq, numbers));
    }
}

/// Stages `words` of record `seq` in `staged`; when they do not fit, moves what it holds
/// into `side_table` with `keep` first, under the table's lock, and keeps there directly
/// what is more than the array holds.
#[inline]
fn stage<const W: usize, T>(
    staged: &Staged<W>,
    seq: u32,
    words: &[u64],
    side_table: &Mutex<T>,
    keep: impl Fn(&mut T, u32, &[u64]),
) {
    if staged.push(seq, words) {
        return;
    }
    // Held through the move, its forgetting included (the staging's protocol).
    let mut held = lock(side_table);
    staged.move_into(|s, w| keep(&mut held, s, w));
    if !staged.push(seq, words) {
        keep(&mut held, seq, words);
    }
}

impl ThreadBuffer {
    /// Hands this thread's staged entries to its side tables, whose locks the caller holds,
    /// marking them taken (a drain at `stop`: [`Staged::take_into`]) or leaving them
    /// staged (a snapshot: [`Staged::copy_into`]).
    pub(super) fn staged_into(
        &self,
        autograd: &mut AutogradTable,
        packed: &mut PackedArgs,
        take: bool,
    ) {
        let ops_unpack = self.staged_unpack.get().copied();
        let mut keep_op = |seq, words: &[u64]| {
            if let Some(unpack) = ops_unpack {
                packed.push(seq, words, unpack);
            }
        };
        if take {
            self.staged_autograd
                .take_into(|s, w| keep_autograd(autograd, s, w));
            self.staged_packed.take_into(&mut keep_op);
            self.staged_reports
                .take_into(|s, w| keep_report(packed, s, w));
        } else {
            self.staged_autograd
                .copy_into(|s, w| keep_autograd(autograd, s, w));
            self.staged_packed.copy_into(&mut keep_op);
            self.staged_reports
                .copy_into(|s, w| keep_report(packed, s, w));
        }
    }
}

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
    #[inline]
    pub(crate) fn add_autograd(&self, state: u64, seq: u32, autograd: Autograd) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            let words = [
                autograd.sequence_number as u64,
                autograd.forward_thread,
                autograd.thread,
            ];
            stage(
                &buffer.staged_autograd,
                seq,
                &words,
                &buffer.autograd,
                keep_autograd,
            );
        }
    }

    /// Attaches args packed as `words`, unpacked by `unpack` at the drain, to record `seq`.
    /// Staged while `unpack` is the first unpacker this thread staged with (a process has
    /// one or two); another's are kept under the lock at once.
    #[inline]
    pub(crate) fn add_packed(&self, state: u64, seq: u32, words: &[u64], unpack: UnpackArgs) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            let staged_unpack = *buffer.staged_unpack.get_or_init(|| unpack);
            if std::ptr::fn_addr_eq(staged_unpack, unpack) {
                stage(
                    &buffer.staged_packed,
                    seq,
                    words,
                    &buffer.packed,
                    |packed: &mut PackedArgs, s, w| packed.push(s, w, unpack),
                );
            } else {
                lock(&buffer.packed).push(seq, words, unpack);
            }
        }
    }

    /// Attaches an allocator report's words to record `seq`.
    #[inline]
    pub(crate) fn add_memory(&self, state: u64, seq: u32, words: &[u64; REPORT_WORDS]) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            stage(
                &buffer.staged_reports,
                seq,
                words,
                &buffer.packed,
                keep_report,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::memory_usage::MemoryUsage;

    #[test]
    fn a_staged_report_unpacks_to_its_words() {
        let usage = MemoryUsage {
            addr: 0x1000,
            bytes: -256,
            total_allocated: 512,
            total_reserved: 1024,
            device_type: 0,
            device_index: -1,
        };
        let staged = Staged::<STAGED_REPORT_WORDS>::default();
        staged.push(5, &usage.words());
        let mut packed = PackedArgs::default();
        staged.move_into(|s, w| keep_report(&mut packed, s, w));
        let mut all = Vec::new();
        packed.unpack(|seq, args| all.push((seq, args)));
        let mut expected = Vec::new();
        memory_usage::unpack(&usage.words(), &mut expected);
        assert_eq!(all, [(5, expected)]);
    }

    #[test]
    fn staged_autograd_numbers_come_out_as_they_went_in() {
        let staged = Staged::<STAGED_AUTOGRAD_WORDS>::default();
        staged.push(7, &[-1_i64 as u64, 0, 3]);
        staged.push(8, &[42, 9, 3]);
        let mut table = AutogradTable::default();
        staged.move_into(|s, w| keep_autograd(&mut table, s, w));
        let numbers: Vec<_> = table
            .into_iter()
            .map(|(seq, a)| (seq, a.sequence_number, a.forward_thread, a.thread))
            .collect();
        assert_eq!(numbers, [(7, -1, 0, 3), (8, 42, 9, 3)]);
    }
}
