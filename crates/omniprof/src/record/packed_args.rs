//! Args packed as words: what an op carries that would cost text and allocations to build
//! while it runs (PyTorch's input shapes, dtypes and scalar values, its FLOPs, its module
//! hierarchy), kept as the numbers they are on the recording thread and turned into `args`
//! entries at the drain, off the op's path.
//!
//! The caller packs the words its own way and names the function that unpacks them
//! ([`UnpackArgs`]); the recorder only stores them beside the op's record (one lock of the
//! thread's own, uncontended until the drain, and a copy of the words into a vector that
//! is reused from session to session) and calls that function at `stop`.
//!
//! ```
//! use std::sync::Arc;
//! use omniprof::recording::push_op;
//! use omniprof::trace::Value;
//! use omniprof::Profiler;
//!
//! // Unpacks one word as the op's `Batch` arg.
//! fn batch(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
//!     args.push((Arc::from("Batch"), Value::UInt(words[0])));
//! }
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! // SAFETY: the name is NUL-terminated.
//! unsafe { push_op(c"aten::mm".as_ptr(), 1) }.with_packed_args(&[32], batch);
//! omniprof::recording::pop_op(1);
//! let trace = profiler.stop().unwrap();
//! let mm = trace.activities.iter().find(|a| &*a.name == "aten::mm").unwrap();
//! assert_eq!(mm.arg("Batch"), Some(&Value::UInt(32)));
//! ```

use std::sync::Arc;

use crate::Value;

/// Turns the words an op's packer wrote into its `args` entries, appended to `args`: called
/// once per op at the drain, on the thread that stops the session. It must not panic on
/// words its own packer wrote; a panic loses that op's packed args, not the trace.
pub type UnpackArgs = fn(words: &[u64], args: &mut Vec<(Arc<str>, Value)>);

/// One thread's packed args of the current session: every op's words one after another,
/// and where each op's end.
#[derive(Default)]
pub(crate) struct PackedArgs {
    words: Vec<u64>,
    ops: Vec<PackedOp>,
}

struct PackedOp {
    seq: u32,
    end: usize,
    unpack: UnpackArgs,
}

impl PackedArgs {
    /// Keeps `words` for record `seq`, to be unpacked by `unpack`.
    pub(crate) fn push(&mut self, seq: u32, words: &[u64], unpack: UnpackArgs) {
        self.words.extend_from_slice(words);
        self.ops.push(PackedOp {
            seq,
            end: self.words.len(),
            unpack,
        });
    }

    /// Forgets every op (a new session), keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.words.clear();
        self.ops.clear();
    }

    /// Each op's args, unpacked, with its record's sequence number. An unpacker that panics
    /// costs its op these args.
    pub(crate) fn unpack(self) -> impl Iterator<Item = (u32, Vec<(Arc<str>, Value)>)> {
        let mut start = 0;
        self.ops.into_iter().map(move |op| {
            let words = &self.words[start..op.end];
            start = op.end;
            let mut args = Vec::new();
            let unpacked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (op.unpack)(words, &mut args)
            }));
            if unpacked.is_err() {
                args.clear();
            }
            (op.seq, args)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("count"), Value::UInt(words.len() as u64)));
    }

    fn panics(_: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("half"), Value::Bool(true)));
        panic!("a broken unpacker");
    }

    #[test]
    fn each_op_unpacks_its_own_words_in_order() {
        let mut packed = PackedArgs::default();
        packed.push(7, &[1, 2, 3], count);
        packed.push(9, &[], count);
        packed.push(11, &[4], count);
        let unpacked: Vec<_> = packed.unpack().collect();
        let counts: Vec<_> = unpacked
            .iter()
            .map(|(seq, args)| (*seq, args[0].1.clone()))
            .collect();
        assert_eq!(
            counts,
            [
                (7, Value::UInt(3)),
                (9, Value::UInt(0)),
                (11, Value::UInt(1))
            ]
        );
    }

    #[test]
    fn a_panicking_unpacker_costs_its_op_its_args_only() {
        let mut packed = PackedArgs::default();
        packed.push(1, &[5], panics);
        packed.push(2, &[5, 6], count);
        let unpacked: Vec<_> = packed.unpack().collect();
        assert_eq!(unpacked[0], (1, vec![]));
        assert_eq!(unpacked[1].1, vec![(Arc::from("count"), Value::UInt(2))]);
    }
}
