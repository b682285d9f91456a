//! [`OpenStacks`]: what began on each track and has not ended yet, innermost last, with
//! the oldest of all at hand, so that the reader can bound what it holds open by cutting
//! the oldest: a slice that never ends (or ends only after a whole file of others) must
//! not make the reader hold everything that began after it.
//!
//! An item cut is gone from its stack, but its track remembers how many were cut below
//! what is still open there, so that the end that would have closed it (ends close the
//! innermost open item of their track) closes nothing else.

use std::collections::{BTreeMap, VecDeque};

use omniprof_trace::FastMap;

/// One track's open items, oldest first, and how many were cut below them.
struct Stack<T> {
    open: VecDeque<(u64, T)>,
    cut: u64,
}

/// What an end closed.
pub(super) enum Closed<T> {
    /// The innermost open item of its track, with its order.
    Open(u64, T),
    /// An item cut while open.
    Cut,
    /// Nothing: no item of its track was open.
    Nothing,
}

/// Open items by track; each has an order, given by the caller, increasing.
pub(super) struct OpenStacks<T> {
    tracks: FastMap<u64, Stack<T>>,
    /// Order → track of every open item.
    by_age: BTreeMap<u64, u64>,
}

impl<T> Default for OpenStacks<T> {
    fn default() -> Self {
        Self {
            tracks: FastMap::default(),
            by_age: BTreeMap::new(),
        }
    }
}

impl<T> OpenStacks<T> {
    /// How many items are open.
    pub(super) fn len(&self) -> usize {
        self.by_age.len()
    }

    /// The order of the oldest open item.
    pub(super) fn oldest(&self) -> Option<u64> {
        self.by_age.keys().next().copied()
    }

    /// Opens `item` on `track`; `order` is above that of every item pushed before.
    pub(super) fn push(&mut self, track: u64, order: u64, item: T) {
        self.by_age.insert(order, track);
        self.tracks
            .entry(track)
            .or_insert_with(|| Stack {
                open: VecDeque::new(),
                cut: 0,
            })
            .open
            .push_back((order, item));
    }

    /// Closes the innermost open item of `track`.
    pub(super) fn pop(&mut self, track: u64) -> Closed<T> {
        let Some(stack) = self.tracks.get_mut(&track) else {
            return Closed::Nothing;
        };
        let closed = if let Some((order, item)) = stack.open.pop_back() {
            self.by_age.remove(&order);
            Closed::Open(order, item)
        } else {
            stack.cut -= 1;
            Closed::Cut
        };
        if stack.open.is_empty() && stack.cut == 0 {
            self.tracks.remove(&track);
        }
        closed
    }

    /// Cuts the oldest open item (the outermost of its track): it is returned, and the end
    /// that would close it will close nothing.
    pub(super) fn cut_oldest(&mut self) -> Option<(u64, T)> {
        let (_, track) = self.by_age.pop_first()?;
        let stack = self.tracks.get_mut(&track).expect("an open item's track");
        stack.cut += 1;
        stack.open.pop_front()
    }

    /// Every open item, by track, oldest first within each; nothing is open after.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (u64, T)> + '_ {
        self.by_age.clear();
        self.tracks.drain().flat_map(|(_, stack)| stack.open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_after_a_cut_closes_the_items_above_then_the_cut_one_then_nothing() {
        let mut stacks = OpenStacks::default();
        stacks.push(7, 0, "outer");
        stacks.push(8, 1, "other");
        stacks.push(7, 2, "inner");
        assert_eq!(stacks.cut_oldest(), Some((0, "outer")));
        assert_eq!((stacks.len(), stacks.oldest()), (2, Some(1)));
        assert!(matches!(stacks.pop(7), Closed::Open(2, "inner")));
        assert!(matches!(stacks.pop(7), Closed::Cut));
        assert!(matches!(stacks.pop(7), Closed::Nothing));
        assert_eq!(stacks.drain().collect::<Vec<_>>(), [(1, "other")]);
        assert_eq!(stacks.len(), 0);
    }
}
