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

use super::buffer::{backdated_tick, with_local};
use super::name::Name;
use super::state::{start_tick, STATE};
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

    /// Begins a frame that was already running when the session's window opened, stamped
    /// with the window's start (in a flight recorder's rings, whose copies read a thread's
    /// records in time order, when it is begun): for a tracer that started before the recorder did (at a
    /// schedule's warm-up) and begins the frames on a thread's stack at that thread's first
    /// event in the window, as PyTorch's tracer, which starts with the window, records the
    /// frames it finds then. `None` when nothing records.
    ///
    /// ```
    /// use omniprof::recording::{Name, PythonFrame};
    /// use omniprof::{record_op, Profiler};
    ///
    /// let mut profiler = Profiler::builder().build().unwrap();
    /// profiler.start().unwrap();
    /// drop(record_op("aten::mm"));
    /// // The caller of `aten::mm`, found running only now.
    /// let main = PythonFrame::begin_at_window_start(Name::python("train.py(3): main", None));
    /// main.map(PythonFrame::end);
    /// let trace = profiler.stop().unwrap();
    /// let mm = trace.activities.iter().find(|a| &*a.name == "aten::mm").unwrap();
    /// assert_eq!(mm.arg("Call stack").and_then(|v| v.as_str()), Some("train.py(3): main;"));
    /// ```
    pub fn begin_at_window_start(name: Name) -> Option<PythonFrame> {
        let state = STATE.load(Ordering::Acquire);
        if state & 1 == 0 {
            return None;
        }
        let w = word(KIND_USER, name);
        let seq = with_local(|l| match backdated_tick(state, start_tick()) {
            Some(tick) => l.push_at(state, w, true, tick),
            None => l.push(state, w, true),
        });
        seq.map(|seq| PythonFrame { state, seq })
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
