//! Side words staged without a lock: a thread's newest autograd numbers, kept in a small
//! array of atomics of its [`ThreadBuffer`](super::registry::ThreadBuffer) and moved into
//! their side table (under that table's lock) a batch at a time.
//!
//! Nearly every PyTorch op carries autograd's numbers; taking the table's lock for each (an
//! atomic exchange to lock and another to unlock, uncontended until the drain) cost an op
//! 3–4 ns of its 31 (criterion `record/op_packed_autograd`). An op's packed args and an
//! allocator report go to the thread's [`open_block`](super::open_block) by the same
//! protocol, written once there (staged here, they were copied twice, which cost more).
//! Only the owning thread stages and moves; a drainer copies the staged entries under the
//! table's lock, which also orders it with every move:
//!
//! - the owner writes an entry's words, then publishes the new count (Release); a drainer
//!   reads the count (Acquire), then only the entries below it, which no longer change;
//! - the owner empties the array (a move, or a new session) only while holding the lock;
//! - a drain at `stop` marks what it took, so that a later move leaves those entries out.
//!
//! A batch moves in after what was added since its first entry: the tables need not be in
//! record order (the drain finds each record's side words by sequence number, and a ring
//! forgets a block only once every record in it is gone).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::lock;

/// Entries staged before a move: a table's lock is then taken once per this many.
const CAPACITY: usize = 32;

/// An entry's slot: its record's sequence number and its words.
struct Slot<const N: usize> {
    seq: AtomicU32,
    words: [AtomicU64; N],
}

/// One thread's staged entries of `N` words each (see the module docs).
pub(crate) struct Staged<const N: usize> {
    slots: [Slot<N>; CAPACITY],
    /// Entries staged: written by the owner only.
    len: AtomicUsize,
    /// The leading entries a drain already took (written under the table's lock).
    taken: AtomicUsize,
}

impl<const N: usize> Default for Staged<N> {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| Slot {
                seq: AtomicU32::new(0),
                words: std::array::from_fn(|_| AtomicU64::new(0)),
            }),
            len: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        }
    }
}

/// Staged entries being copied out: each record's sequence number and words.
pub(crate) struct Entries<'a, const N: usize>(std::slice::Iter<'a, Slot<N>>);

impl<const N: usize> Iterator for Entries<'_, N> {
    type Item = (u32, [u64; N]);

    fn next(&mut self) -> Option<Self::Item> {
        let slot = self.0.next()?;
        let words = std::array::from_fn(|i| slot.words[i].load(Ordering::Relaxed));
        Some((slot.seq.load(Ordering::Relaxed), words))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<const N: usize> ExactSizeIterator for Entries<'_, N> {}

impl<const N: usize> Staged<N> {
    /// Stages the words of record `seq`; false when the array is full (nothing staged:
    /// [`move_into`](Self::move_into) first). Owner only.
    #[inline]
    pub(super) fn push(&self, seq: u32, words: &[u64; N]) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        let Some(slot) = self.slots.get(len) else {
            return false;
        };
        slot.seq.store(seq, Ordering::Relaxed);
        for (to, &word) in slot.words.iter().zip(words) {
            to.store(word, Ordering::Relaxed);
        }
        // Publishes the words above to a drainer that reads this count.
        self.len.store(len + 1, Ordering::Release);
        true
    }

    /// Stages the words of record `seq`, first moving the staged entries into `table` by
    /// `append` when the array is full. Owner only.
    #[inline]
    pub(super) fn stage<T>(
        &self,
        seq: u32,
        words: &[u64; N],
        table: &Mutex<T>,
        append: fn(&mut T, Entries<'_, N>),
    ) {
        if !self.push(seq, words) {
            self.move_with(table, append);
            self.push(seq, words);
        }
    }

    /// Moves the staged entries into `table` by `append`, under its lock. Owner only.
    #[cold]
    #[inline(never)]
    fn move_with<T>(&self, table: &Mutex<T>, append: fn(&mut T, Entries<'_, N>)) {
        let mut held = lock(table);
        self.move_into(|staged| append(&mut held, staged));
    }

    /// Hands every staged entry a drain did not take to `append`, and empties the array.
    /// Owner only, with the lock of the table `append` adds to held across the call.
    pub(super) fn move_into(&self, append: impl FnOnce(Entries<'_, N>)) {
        self.copy_into(append);
        self.forget();
    }

    /// Hands the staged entries a drain did not take to `append`, leaving them staged (a ring
    /// session's snapshot). Any thread, with the table's lock held.
    pub(super) fn copy_into(&self, append: impl FnOnce(Entries<'_, N>)) {
        append(self.below(self.len.load(Ordering::Acquire)));
    }

    /// [`copy_into`](Self::copy_into), marking the entries taken: a drain at `stop`, which
    /// takes the table away with them. Any thread, with the table's lock held.
    pub(super) fn take_into(&self, append: impl FnOnce(Entries<'_, N>)) {
        // One read of the count for both: the owner may stage more meanwhile, and an entry
        // copied here but not marked taken would be moved in again later.
        let len = self.len.load(Ordering::Acquire);
        append(self.below(len));
        self.taken.store(len, Ordering::Relaxed);
    }

    /// `table` taken whole, with the staged entries a drain did not take appended by
    /// `append` (a drain at `stop`). Any thread.
    pub(super) fn take_with<T: Default>(
        &self,
        table: &Mutex<T>,
        append: fn(&mut T, Entries<'_, N>),
    ) -> T {
        let mut held = lock(table);
        self.take_into(|staged| append(&mut held, staged));
        std::mem::take(&mut *held)
    }

    /// A copy of `table`, with the staged entries a drain did not take appended by `append`
    /// (a ring session's snapshot). Any thread.
    pub(super) fn copy_with<T: Clone>(
        &self,
        table: &Mutex<T>,
        append: fn(&mut T, Entries<'_, N>),
    ) -> T {
        let held = lock(table);
        let mut copy = held.clone();
        self.copy_into(|staged| append(&mut copy, staged));
        copy
    }

    /// The staged entries from the first a drain did not take up to `len` (a count read
    /// with Acquire).
    fn below(&self, len: usize) -> Entries<'_, N> {
        Entries(self.slots[self.taken.load(Ordering::Relaxed)..len].iter())
    }

    /// Forgets every staged entry (a move, or a new session). Owner only, with the table's
    /// lock held.
    pub(super) fn forget(&self) {
        self.taken.store(0, Ordering::Relaxed);
        self.len.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs<const N: usize>(entries: Entries<'_, N>) -> Vec<u32> {
        entries.map(|(seq, _)| seq).collect()
    }

    #[test]
    fn a_full_array_refuses_until_its_entries_are_moved() {
        let staged = Staged::<2>::default();
        for seq in 0..CAPACITY as u32 {
            assert!(staged.push(seq, &[u64::from(seq); 2]));
        }
        assert!(!staged.push(99, &[99; 2]));
        let mut moved = Vec::new();
        staged.move_into(|e| moved.extend(seqs(e)));
        assert_eq!(staged.len.load(Ordering::Relaxed), 0);
        assert!(staged.push(99, &[99; 2]));
        staged.move_into(|e| moved.extend(seqs(e)));
        let mut expected: Vec<u32> = (0..CAPACITY as u32).collect();
        expected.push(99);
        assert_eq!(moved, expected);
    }

    #[test]
    fn an_entry_comes_out_with_its_words() {
        let staged = Staged::<3>::default();
        staged.push(5, &[1, u64::MAX, 3]);
        staged.push(6, &[4, 5, 6]);
        let mut out = Vec::new();
        staged.copy_into(|e| out.extend(e));
        assert_eq!(out, [(5, [1, u64::MAX, 3]), (6, [4, 5, 6])]);
    }

    #[test]
    fn a_drain_takes_the_staged_entries_once_and_a_snapshot_leaves_them() {
        let staged = Staged::<1>::default();
        staged.push(1, &[1]);
        staged.push(2, &[2]);
        let (mut snapshot, mut drained, mut later) = (Vec::new(), Vec::new(), Vec::new());
        staged.copy_into(|e| snapshot.extend(seqs(e)));
        assert_eq!(snapshot, [1, 2]);
        staged.take_into(|e| drained.extend(seqs(e)));
        assert_eq!(drained, [1, 2]);
        staged.push(3, &[3]);
        staged.move_into(|e| later.extend(seqs(e)));
        assert_eq!(later, [3]);
    }

    #[test]
    fn entries_staged_while_drains_take_them_are_recorded_once_each() {
        // The owner stages and moves while another thread drains as often as it can, as a
        // session's stop may while the owner still records: every entry must come out
        // exactly once, whichever side took it.
        const ENTRIES: u32 = 200_000;
        let staged = Staged::<2>::default();
        let table = std::sync::Mutex::new(Vec::new());
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut all = std::thread::scope(|s| {
            let drainer = s.spawn(|| {
                let mut taken = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let mut held = table.lock().unwrap();
                    staged.take_into(|e| held.extend(seqs(e)));
                    taken.append(&mut held);
                }
                taken
            });
            for seq in 0..ENTRIES {
                let words = [u64::from(seq); 2];
                if !staged.push(seq, &words) {
                    let mut held = table.lock().unwrap();
                    staged.move_into(|e| held.extend(seqs(e)));
                    drop(held);
                    assert!(staged.push(seq, &words));
                }
            }
            let mut held = table.lock().unwrap();
            staged.move_into(|e| held.extend(seqs(e)));
            drop(held);
            done.store(true, Ordering::Relaxed);
            drainer.join().unwrap()
        });
        all.append(&mut table.lock().unwrap());
        all.sort_unstable();
        assert_eq!(all.len(), ENTRIES as usize, "each entry once");
        assert!(all.iter().copied().eq(0..ENTRIES));
    }
}
