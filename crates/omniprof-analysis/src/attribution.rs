//! Which host op device work belongs to: the one rule the summary (and so `diff`) and the
//! device flame graph follow, as HTA and PyTorch attribute device time.
//!
//! - Device work with an `External id` ([`Launcher::External`]) belongs to the host op whose
//!   correlation is that id, when that op [receives device work](receives_device_work).
//! - Device work without one ([`Launcher::Runtime`]) names, by its runtime correlation, the
//!   runtime or driver call that launched it; it belongs to the innermost op of that call's
//!   thread that encloses the call and is not a call itself.
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
