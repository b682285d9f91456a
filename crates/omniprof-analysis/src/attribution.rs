//! Which host op device work belongs to: the one rule every tool follows. The summary
//! applies it (and so `diff`, the report and the Parquet `ops` table's `host_op_id`, which
//! are the summary's own output), and the device flame graph; both find the op around a
//! launch with [`Receivers`].
//!
//! - Device work with an `External id` ([`Launcher::External`]) belongs to the host op whose
//!   correlation is that id, when that op [receives device work](receives_device_work).
//! - Device work without one ([`Launcher::Runtime`]) names, by its runtime correlation, the
//!   runtime or driver call that launched it; it belongs to the innermost op of that call's
//!   thread that encloses the call and is not a call itself ([`Receivers`]).
//!
//! The first is PyTorch's rule (`key_averages` gives a kernel to the op whose correlation it
//! carries, and to no op without one); the second is HTA's (its call graph gives a kernel to
//! the op around its launch), for traces whose work carries no `External id`. On PyTorch's
//! traces the two agree but where an `External id` names an op other than the innermost
//! around the launch; there the first decides, as in PyTorch's table.
//!
//! A GPU user annotation is the projection of a host range, not work of its own: it belongs
//! to no op (counting it would count the range's kernels twice).

use omniprof_trace::{Activity, ActivityClass, ActivityType};

/// What leads from device work to the host op that launched it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Launcher {
    /// The correlation of the launching op itself (the work's `External id`).
    External(u64),
    /// The correlation of the runtime or driver call that launched it.
    Runtime(u64),
}

/// What leads from device work `a` to its host op, if anything does.
pub(crate) fn launcher(a: &Activity) -> Option<Launcher> {
    if a.kind == ActivityType::GpuUserAnnotation {
        return None;
    }
    match (a.linked_correlation.filter(|&c| c != 0), a.correlation) {
        (Some(linked), _) => Some(Launcher::External(linked)),
        (None, 0) => None,
        (None, launch) => Some(Launcher::Runtime(launch)),
    }
}

/// Whether host op `a` is a runtime or driver call: device work names it by its
/// correlation, and passes through it to the op around it.
pub(crate) fn is_call(a: &Activity) -> bool {
    matches!(
        a.kind.class(),
        Some(ActivityClass::Runtime | ActivityClass::Driver)
    )
}

/// Whether host op `a` receives the device work launched from it: an op linked to no other
/// (as runtime calls are, through their `External id`), neither a call nor a Python
/// function, as in PyTorch.
pub(crate) fn receives_device_work(a: &Activity) -> bool {
    a.linked_correlation.unwrap_or(0) == 0 && a.kind != ActivityType::PythonFunction && !is_call(a)
}

/// The ops of one thread that may receive the device work of a call inside them, taken in
/// the thread's order (by start, the longer first): the innermost that encloses a call is
/// the one that receives its work. Each op is named by an id of the caller's (`T`).
#[derive(Debug)]
pub(crate) struct Receivers<T> {
    /// The ops open at the last start, innermost last: id and end.
    open: Vec<(T, i64)>,
}

impl<T> Default for Receivers<T> {
    fn default() -> Self {
        Self { open: Vec::new() }
    }
}

impl<T: Copy> Receivers<T> {
    /// Takes the next host op of the thread, from `start_ns` to `end_ns`: the call `id` is
    /// (`call`), or an op that may receive work. Returns, for a call, the op that receives
    /// its work, if one encloses it.
    pub(crate) fn take(&mut self, id: T, start_ns: i64, end_ns: i64, call: bool) -> Option<T> {
        while self.open.last().is_some_and(|&(_, end)| end <= start_ns) {
            self.open.pop();
        }
        if call {
            // The innermost op around it: started no later (the order), ends no earlier.
            return self
                .open
                .iter()
                .rev()
                .find(|&&(_, end)| end_ns <= end)
                .map(|&(op, _)| op);
        }
        self.open.push((id, end_ns));
        None
    }
}
