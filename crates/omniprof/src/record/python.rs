//! Python frames: the ranges a Python tracer records for each function call it sees, written
//! as `python_function` events.
//!
//! A tracer (the Python package's, in its op observer) names each frame once with
//! [`Name::python`] and keeps the id; per call it begins a [`PythonFrame`] and ends it when the
//! function returns, on the same thread. A frame is two records, like any range, and unlike
//! an op it is not announced to correlation listeners: device work links to the op that
//! launched it, not to the Python line around that op.
//!
//! At the drain, each frame gets PyTorch's args (`Python id`, `Python parent id`, and
//! `Python module id` for an `nn.Module` call), and each host op or user range begun inside
//! frames gets the `Call stack` arg: the enclosing frames' names, innermost first, each
//! followed by `;`, as PyTorch writes it. Frames still open at the stop (the `<module>` frame
//! that started the profiler) end with the window, as PyTorch ends them, and are not counted
//! as unfinished ranges.
//!
//! ```
//! use omniprof::recording::PythonFrame;
//! use omniprof::{record_op, Profiler};
//! use omniprof::recording::Name;
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! let forward = PythonFrame::begin(Name::python("model.py(12): forward", None));
//! drop(record_op("aten::mm"));
//! forward.map(PythonFrame::end);
//! let trace = profiler.stop().unwrap();
//! let mm = trace.activities.iter().find(|a| &*a.name == "aten::mm").unwrap();
//! assert_eq!(
//!     mm.arg("Call stack").and_then(|v| v.as_str()),
//!     Some("model.py(12): forward;")
//! );
//! ```

use std::sync::atomic::Ordering;

use super::buffer::with_local;
use super::name::Name;
use super::state::STATE;
use super::word::{end_word, word, KIND_USER};

/// A Python frame being recorded; [`end`](Self::end) it on the thread that began it. Plain
/// data (`repr(C)`, 16 bytes), so a tracer written in C++ can keep it on its own stack.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PythonFrame {
    state: u64,
    seq: u32,
}

impl PythonFrame {
    /// Begins a frame named `name` (from [`Name::python`]) on this thread; `None` when
    /// nothing records.
    #[inline]
    pub fn begin(name: Name) -> Option<PythonFrame> {
        let state = STATE.load(Ordering::Relaxed);
        if state & 1 == 0 {
            return None;
        }
        let w = word(KIND_USER, name);
        with_local(|l| l.push(state, w, true)).map(|seq| PythonFrame { state, seq })
    }

    /// Ends the frame. Returns whether the end was recorded: false once its session stopped
    /// (the drain then ends it with the window).
    #[inline]
    pub fn end(self) -> bool {
        if STATE.load(Ordering::Relaxed) != self.state {
            return false;
        }
        with_local(|l| l.push(self.state, end_word(self.seq), false)).is_some()
    }
}
