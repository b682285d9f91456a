//! Allocator reports staged without a lock: a thread's newest reports, kept in a small
//! array of atomics of its [`ThreadBuffer`](super::registry::ThreadBuffer) and moved into
//! its packed args (under their lock) a batch at a time.
//!
//! With `profile_memory` every allocation and every free is a report, as many as the ops
//! or more; taking the packed args' lock for each (an atomic exchange to lock and another to
//! unlock, uncontended until the drain) cost each report more than the rest of its work. Only
//! the owning thread stages and moves reports; a drainer copies the staged ones under the
//! packed args' lock, which also orders it with every move:
//!
//! - the owner writes a report's words, then publishes the new count (Release); a drainer
//!   reads the count (Acquire), then only the reports below it, which no longer change;
//! - the owner empties the array (a move, or a new session) only while holding the lock;
//! - a drain at `stop` marks what it took, so that a later move leaves those reports out.
//!
//! A batch moves in after the ops packed since its first report: the packed args are not in
//! record order (the drain finds each record's args by sequence number, and a ring forgets a
//! block only once every record in it is gone). Moving the staged reports in ahead of each op's
//! args cost an op with shapes under `profile_memory` a move per op, not per 32 reports.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::record::memory_usage::{self, REPORT_WORDS};
use crate::record::packed_args::PackedArgs;

/// Reports staged before a move: the lock is then taken once per this many reports.
const CAPACITY: usize = 32;

/// A report's slot: its record's sequence number, then its words.
type ReportSlot = [AtomicU64; 1 + REPORT_WORDS];

/// One thread's staged reports (see the module docs).
pub(crate) struct StagedReports {
    slots: [ReportSlot; CAPACITY],
    /// Reports staged: written by the owner only.
    len: AtomicUsize,
    /// The leading reports a drain already took (written under the packed args' lock).
    taken: AtomicUsize,
}

impl Default for StagedReports {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            len: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        }
    }
}

impl StagedReports {
    /// Stages the report of record `seq`; false when the array is full (nothing staged:
    /// [`move_into`](Self::move_into) first). Owner only.
    #[inline]
    pub(super) fn push(&self, seq: u32, words: &[u64; REPORT_WORDS]) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        let Some(slot) = self.slots.get(len) else {
            return false;
        };
        slot[0].store(u64::from(seq), Ordering::Relaxed);
        for (to, &word) in slot[1..].iter().zip(words) {
            to.store(word, Ordering::Relaxed);
        }
        // Publishes the words above to a drainer that reads this count.
        self.len.store(len + 1, Ordering::Release);
        true
    }

    /// Moves every staged report a drain did not take into `packed`, whose lock the caller
    /// holds, and empties the array. Owner only.
    pub(super) fn move_into(&self, packed: &mut PackedArgs) {
        self.copy_into(packed);
        self.forget();
    }

    /// Copies the staged reports a drain did not take into `packed`, whose lock the caller
    /// holds, leaving them staged (a ring session's snapshot). Any thread.
    pub(super) fn copy_into(&self, packed: &mut PackedArgs) {
        self.copy_below(self.len.load(Ordering::Acquire), packed);
    }

    /// [`copy_into`](Self::copy_into), marking the copied reports taken: a drain at `stop`,
    /// which takes `packed` away with them. Any thread, with the packed args' lock held.
    pub(super) fn take_into(&self, packed: &mut PackedArgs) {
        // One read of the count for both: the owner may stage more meanwhile, and a report
        // copied here but not marked taken would be moved in again later.
        let len = self.len.load(Ordering::Acquire);
        self.copy_below(len, packed);
        self.taken.store(len, Ordering::Relaxed);
    }

    /// Copies the staged reports from the first a drain did not take up to `len` (a count
    /// read with Acquire) into `packed`.
    fn copy_below(&self, len: usize, packed: &mut PackedArgs) {
        let staged = self.slots[self.taken.load(Ordering::Relaxed)..len].iter();
        let reports = staged.map(|slot| {
            let seq = slot[0].load(Ordering::Relaxed) as u32;
            let words = std::array::from_fn(|i| slot[1 + i].load(Ordering::Relaxed));
            (seq, words)
        });
        packed.push_each::<REPORT_WORDS>(reports, memory_usage::unpack);
    }

    /// Forgets every staged report (a move, or a new session). Owner only, with the packed
    /// args' lock held.
    pub(super) fn forget(&self) {
        self.taken.store(0, Ordering::Relaxed);
        self.len.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(packed: PackedArgs) -> Vec<u32> {
        let mut seqs = Vec::new();
        packed.unpack(|seq, _| seqs.push(seq));
        seqs
    }

    fn report(n: u64) -> [u64; REPORT_WORDS] {
        [n; REPORT_WORDS]
    }

    #[test]
    fn a_full_array_refuses_until_its_reports_are_moved() {
        let staged = StagedReports::default();
        for seq in 0..CAPACITY as u32 {
            assert!(staged.push(seq, &report(u64::from(seq))));
        }
        assert!(!staged.push(99, &report(99)));
        let mut packed = PackedArgs::default();
        staged.move_into(&mut packed);
        assert_eq!(staged.len.load(Ordering::Relaxed), 0);
        assert!(staged.push(99, &report(99)));
        staged.move_into(&mut packed);
        let mut expected: Vec<u32> = (0..CAPACITY as u32).collect();
        expected.push(99);
        assert_eq!(seqs(packed), expected);
    }

    #[test]
    fn a_drain_takes_the_staged_reports_once_and_a_snapshot_leaves_them() {
        let staged = StagedReports::default();
        staged.push(1, &report(1));
        staged.push(2, &report(2));
        let mut snapshot = PackedArgs::default();
        staged.copy_into(&mut snapshot);
        assert_eq!(seqs(snapshot), [1, 2]);
        let mut drained = PackedArgs::default();
        staged.take_into(&mut drained);
        assert_eq!(seqs(drained), [1, 2]);
        staged.push(3, &report(3));
        let mut later = PackedArgs::default();
        staged.move_into(&mut later);
        assert_eq!(seqs(later), [3]);
    }

    #[test]
    fn reports_staged_while_drains_take_them_are_recorded_once_each() {
        // The owner stages and moves while another thread drains as often as it can, as a
        // session's stop may while the owner still records: every report must come out
        // exactly once, whichever side took it.
        const REPORTS: u32 = 200_000;
        let staged = StagedReports::default();
        let packed = std::sync::Mutex::new(PackedArgs::default());
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut all = std::thread::scope(|s| {
            let drainer = s.spawn(|| {
                let mut taken = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let mut held = packed.lock().unwrap();
                    staged.take_into(&mut held);
                    taken.extend(seqs(std::mem::take(&mut *held)));
                }
                taken
            });
            for seq in 0..REPORTS {
                if !staged.push(seq, &report(u64::from(seq))) {
                    staged.move_into(&mut packed.lock().unwrap());
                    assert!(staged.push(seq, &report(u64::from(seq))));
                }
            }
            staged.move_into(&mut packed.lock().unwrap());
            done.store(true, Ordering::Relaxed);
            drainer.join().unwrap()
        });
        all.extend(seqs(std::mem::take(&mut *packed.lock().unwrap())));
        all.sort_unstable();
        assert_eq!(all.len(), REPORTS as usize, "each report once");
        assert!(all.iter().copied().eq(0..REPORTS));
    }

    #[test]
    fn a_staged_report_unpacks_to_its_words() {
        let staged = StagedReports::default();
        let usage = memory_usage::MemoryUsage {
            addr: 0x1000,
            bytes: -256,
            total_allocated: 512,
            total_reserved: 1024,
            device_type: 0,
            device_index: -1,
        };
        staged.push(5, &usage.words());
        let mut packed = PackedArgs::default();
        staged.move_into(&mut packed);
        let mut all = Vec::new();
        packed.unpack(|seq, args| all.push((seq, args)));
        let mut expected = Vec::new();
        memory_usage::unpack(&usage.words(), &mut expected);
        assert_eq!(all, [(5, expected)]);
    }
}
