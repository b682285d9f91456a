//! What autograd knows of an op, and the forward-to-backward arrows PyTorch draws from it.
//!
//! PyTorch numbers each op that autograd records (its *sequence number*); the backward node
//! made for it carries the same number and the id of the thread the forward op ran on. Its
//! profiler writes both as args (`Sequence number`, `Fwd thread id`) and joins the two ops
//! with a `fwdbwd` flow: of the forward ops sharing a (thread, sequence number), the one that
//! began last (the innermost, which made the node), to the first backward op with that key
//! to end (the node itself, inside the engine's `evaluate_function` range).
//!
//! The observer hands the numbers over with the op ([`PushedOp::with_autograd`], or at its
//! end with [`pop_op_with_autograd`]); they are kept compact beside its record, and the args
//! and flows are made at the drain.
//!
//! ```
//! use omniprof::recording::{pop_op, push_op, Autograd};
//! use omniprof::trace::FlowKind;
//! use omniprof::Profiler;
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! // SAFETY: the names are NUL-terminated strings.
//! let forward = Autograd { sequence_number: 7, forward_thread: 0, thread: 1 };
//! unsafe { push_op(c"aten::mul".as_ptr(), 1) }.with_autograd(forward);
//! pop_op(1);
//! let backward = Autograd { sequence_number: 7, forward_thread: 1, thread: 2 };
//! unsafe { push_op(c"MulBackward0".as_ptr(), 2) }.with_autograd(backward);
//! pop_op(2);
//! let trace = profiler.stop().unwrap();
//! let flows: Vec<_> = trace.activities.iter().filter_map(|a| a.flow).collect();
//! assert_eq!(flows.len(), 2);
//! assert!(flows.iter().all(|f| f.kind == FlowKind::FwdBwd && f.id == flows[0].id));
//! ```
//!
//! [`PushedOp::with_autograd`]: super::PushedOp::with_autograd
//! [`pop_op_with_autograd`]: super::pop_op_with_autograd

use std::sync::Arc;

use crate::FastMap;
use crate::Value;
use crate::{Activity, Flow, FlowKind};

/// An op's autograd numbers, as PyTorch's `RecordFunction` gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Autograd {
    /// The sequence number autograd gave the op (`RecordFunction::seqNr`).
    pub sequence_number: i64,
    /// On a backward node, PyTorch's id of the thread its forward op ran on; 0 on a forward
    /// op (`RecordFunction::forwardThreadId`).
    pub forward_thread: u64,
    /// PyTorch's id of the thread the op runs on (`RecordFunction::threadId`).
    pub thread: u64,
}

/// The words an op's [`Autograd`] numbers are staged as on its thread.
pub(super) const AUTOGRAD_WORDS: usize = 3;

impl Autograd {
    /// The numbers as words, to stage without a lock.
    pub(super) fn words(&self) -> [u64; AUTOGRAD_WORDS] {
        [
            self.sequence_number as u64,
            self.forward_thread,
            self.thread,
        ]
    }

    /// The numbers [`words`](Self::words) gave.
    pub(super) fn from_words(
        [sequence_number, forward_thread, thread]: [u64; AUTOGRAD_WORDS],
    ) -> Self {
        Self {
            sequence_number: sequence_number as i64,
            forward_thread,
            thread,
        }
    }

    /// The args PyTorch writes for these numbers, under the keys given (`Sequence number`
    /// and `Fwd thread id`, made once by the caller).
    pub(super) fn args(
        &self,
        sequence_number: &Arc<str>,
        fwd_thread_id: &Arc<str>,
    ) -> [(Arc<str>, Value); 2] {
        [
            (sequence_number.clone(), Value::Int(self.sequence_number)),
            (fwd_thread_id.clone(), Value::UInt(self.forward_thread)),
        ]
    }
}

/// The ops of a drain that carry autograd numbers, to be joined by `fwdbwd` flows.
#[derive(Default)]
pub(super) struct Links {
    /// (index in the activities, numbers).
    ops: Vec<(usize, Autograd)>,
}

impl Links {
    pub(super) fn add(&mut self, index: usize, autograd: Autograd) {
        self.ops.push((index, autograd));
    }

    /// Draws the flows on `activities` (which `add` indexed), with ids from 1.
    pub(super) fn draw(self, activities: &mut [Activity]) {
        // Forward ops by (thread, sequence number): the one that began last.
        let mut forward: FastMap<(u64, i64), usize> = FastMap::default();
        let mut backward = Vec::new();
        for (index, a) in self.ops {
            let key = |thread| (thread, a.sequence_number);
            if a.forward_thread > 0 {
                backward.push((index, key(a.forward_thread)));
            } else if a.thread != 0 {
                let slot = forward.entry(key(a.thread)).or_insert(index);
                if activities[index].start_ns > activities[*slot].start_ns {
                    *slot = index;
                }
            }
        }
        // Backward ops in the order they ended: the node ends before the range around it.
        backward.sort_by_key(|&(index, _)| {
            let a = &activities[index];
            (a.end_ns, std::cmp::Reverse(a.start_ns))
        });
        let mut id = 0;
        for (index, key) in backward {
            if let Some(start) = forward.remove(&key) {
                id += 1;
                let flow = |start| Flow {
                    id,
                    kind: FlowKind::FwdBwd,
                    start,
                };
                activities[start].flow = Some(flow(true));
                activities[index].flow = Some(flow(false));
            }
        }
    }
}
