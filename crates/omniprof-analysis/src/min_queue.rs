//! [`MinQueue`]: the smallest first, for items that mostly come in order or in reverse.
//!
//! The fold's queues see such items: a row's ops are placed by start, and its events are
//! mostly final in reverse (a parent after its children, and ops whose end the horizon
//! passes all at once, the latest tried first). A run kept sorted at both ends takes them
//! without the sifting of a heap, which holds only the items that fall inside the run: but
//! for an item that falls among the run's last few, which is put in its place there (the
//! ops of threads taking turns are placed a little out of order, as a thread's waiting ops
//! are placed only when its next op comes). Items are taken in the same order as from a
//! heap: the smallest first (equal items, in either order).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// How far from the run's back an item is still put in its place there.
const NEAR_BACK: usize = 8;

/// A min-priority queue; see the [module docs](self).
#[derive(Debug)]
pub(super) struct MinQueue<T: Ord> {
    /// Sorted, smallest first.
    run: VecDeque<T>,
    /// Items that came between the run's ends.
    rest: BinaryHeap<Reverse<T>>,
}

impl<T: Ord> Default for MinQueue<T> {
    fn default() -> Self {
        Self {
            run: VecDeque::new(),
            rest: BinaryHeap::new(),
        }
    }
}

impl<T: Ord + Copy> MinQueue<T> {
    /// Adds an item.
    pub(super) fn push(&mut self, item: T) {
        // The back first: items mostly come in order.
        match self.run.back() {
            Some(&last) if item < last => match self.run.front() {
                Some(&first) if item <= first => self.run.push_front(item),
                _ => {
                    // (`item` > the front: the run holds two items or more.)
                    let len = self.run.len();
                    if self.run[len.saturating_sub(NEAR_BACK)] <= item {
                        // Pushed, then moved back past the few larger ones.
                        self.run.push_back(item);
                        let mut at = len;
                        while self.run[at - 1] > item {
                            self.run.swap(at - 1, at);
                            at -= 1;
                        }
                    } else {
                        self.rest.push(Reverse(item));
                    }
                }
            },
            _ => self.run.push_back(item),
        }
    }

    /// The smallest item.
    pub(super) fn peek(&self) -> Option<T> {
        match (self.run.front(), self.rest.peek()) {
            (Some(&a), Some(&Reverse(b))) => Some(a.min(b)),
            (a, b) => a.copied().or(b.map(|r| r.0)),
        }
    }

    /// Takes the smallest item.
    pub(super) fn pop(&mut self) -> Option<T> {
        match (self.run.front(), self.rest.peek()) {
            (Some(a), Some(Reverse(b))) if b < a => self.rest.pop().map(|r| r.0),
            (Some(_), _) => self.run.pop_front(),
            (None, _) => self.rest.pop().map(|r| r.0),
        }
    }

    /// How many items it holds.
    pub(super) fn len(&self) -> usize {
        self.run.len() + self.rest.len()
    }

    /// Whether it holds no item.
    pub(super) fn is_empty(&self) -> bool {
        self.run.is_empty() && self.rest.is_empty()
    }

    /// Drops every item.
    pub(super) fn clear(&mut self) {
        self.run.clear();
        self.rest.clear();
    }

    /// Keeps the items `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.run.retain(&mut keep);
        self.rest.retain(|r| keep(&r.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_smallest_first_whatever_order_they_went_in() {
        let mut queue = MinQueue::default();
        let mut heap = BinaryHeap::new();
        // Ascending, descending and scattered stretches, with items taken in between.
        let mut state = 7u64;
        let mut taken = (Vec::new(), Vec::new());
        for round in 0..2000u64 {
            let item = match round % 300 {
                0..=99 => round,
                100..=199 => 10_000 - round,
                _ => {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                    state >> 52
                }
            };
            queue.push(item);
            heap.push(Reverse(item));
            if round % 3 == 0 {
                taken.0.push(queue.pop());
                taken.1.push(heap.pop().map(|r| r.0));
            }
            assert_eq!(queue.peek(), heap.peek().map(|r| r.0));
            assert_eq!(queue.len(), heap.len());
        }
        queue.retain(|&x| x % 2 == 0);
        heap.retain(|r| r.0 % 2 == 0);
        while !heap.is_empty() {
            taken.0.push(queue.pop());
            taken.1.push(heap.pop().map(|r| r.0));
        }
        assert!(queue.is_empty());
        assert_eq!(queue.pop(), None);
        assert_eq!(taken.0, taken.1);
    }

    #[test]
    fn items_a_little_out_of_order_come_out_smallest_first() {
        let mut queue = MinQueue::default();
        let mut heap = BinaryHeap::new();
        let mut taken = (Vec::new(), Vec::new());
        // Five threads taking turns, each a few items behind the others, and now and then
        // an item far behind.
        for round in 0..3000u64 {
            let item = match round % 97 {
                0 => round / 2,
                _ => round * 10 + 40 - (round % 5) * 13,
            };
            queue.push(item);
            heap.push(Reverse(item));
            if round % 4 == 0 {
                taken.0.push(queue.pop());
                taken.1.push(heap.pop().map(|r| r.0));
            }
            assert_eq!(queue.peek(), heap.peek().map(|r| r.0));
        }
        while !heap.is_empty() {
            taken.0.push(queue.pop());
            taken.1.push(heap.pop().map(|r| r.0));
        }
        assert!(queue.is_empty());
        assert_eq!(taken.0, taken.1);
    }
}
