//! [`Listing`]: the summary's events as [`SummedEvent`]s
//! ([`KeyAveragesBuilder::list_events`](super::KeyAveragesBuilder::list_events)), each with
//! a parent that is itself listed.
//!
//! When folding, an op that is its parent's first child and has its name may be absorbed
//! into that parent (PyTorch's collapse), which is decided only when the parent ends; its
//! own children are final, and may be listed, before that. So the events whose parent's
//! fate is open wait here, and go out with the parent that stays: the op itself when it
//! gets a sibling, else the op that absorbed it. What waits is the children of ops whose
//! fate is open (the folder holds those ops, and a sum per such child, too).

use super::fold::Fate;
use super::summed_events::SummedEvent;
use crate::hash::FastMap;

/// The events listed and not yet taken, and those waiting for their parent's fate.
#[derive(Default)]
pub(super) struct Listing {
    ready: Vec<SummedEvent>,
    /// By the `seq` of an op that may yet be absorbed: the events whose parent it is.
    open: FastMap<u64, Vec<SummedEvent>>,
    /// Absorbed op → the op that absorbed it, for children still to come (a final event
    /// may wait in the folder for an earlier one of its row).
    absorbed: FastMap<u64, u64>,
}

impl Listing {
    /// What became of a same-named first child (given before the events final with it).
    pub(super) fn fate(&mut self, fate: Fate) {
        match fate {
            Fate::Held(op) => {
                self.open.insert(op, Vec::new());
            }
            Fate::Kept(op) => {
                if let Some(children) = self.open.remove(&op) {
                    self.ready.extend(children);
                }
            }
            Fate::Absorbed { op, into } => {
                self.absorbed.insert(op, into);
                let children = self.open.remove(&op).unwrap_or_default();
                for mut e in children {
                    e.parent = Some(into);
                    self.push(e);
                }
            }
        }
    }

    /// One more event: listed now, or when its parent's fate is known.
    pub(super) fn push(&mut self, mut e: SummedEvent) {
        if let Some(mut parent) = e.parent {
            while let Some(&into) = self.absorbed.get(&parent) {
                parent = into;
            }
            e.parent = Some(parent);
            if let Some(waiting) = self.open.get_mut(&parent) {
                waiting.push(e);
                return;
            }
        }
        self.ready.push(e);
    }

    /// Every final event has been pushed: no child of an absorbed op is still to come.
    pub(super) fn forget_absorbed(&mut self) {
        if !self.absorbed.is_empty() {
            self.absorbed.clear();
        }
    }

    /// The events listed since the last call.
    pub(super) fn drain(&mut self) -> std::vec::Drain<'_, SummedEvent> {
        self.ready.drain(..)
    }

    /// Every event not yet taken (at the end, no fate is open).
    pub(super) fn finish(mut self) -> Vec<SummedEvent> {
        for (_, children) in self.open.drain() {
            self.ready.extend(children);
        }
        self.ready
    }
}
