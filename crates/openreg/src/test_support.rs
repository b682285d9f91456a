//! What the crate's unit tests share: one lock over the process-wide recording state and
//! counters, taken after initializing the runtime with the default options, and stream work
//! that runs a closure.

use std::borrow::Cow;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::activity_records::DeviceActivity;
use crate::device::init;
use crate::options::Options;
use crate::queue::Work;

/// Recording state and memory counters are process-wide: tests that enable recording or
/// read counters run alone, the others share.
static RECORDING: RwLock<()> = RwLock::new(());

fn init_default() {
    init(Options::default()).expect("tests use the default options");
}

/// For tests that do not record.
pub(crate) fn shared() -> RwLockReadGuard<'static, ()> {
    init_default();
    RECORDING.read().unwrap_or_else(|e| e.into_inner())
}

/// For tests that enable recording or read device-wide counters.
pub(crate) fn exclusive() -> RwLockWriteGuard<'static, ()> {
    init_default();
    RECORDING.write().unwrap_or_else(|e| e.into_inner())
}

/// Stream work that runs a closure, so the queues, devices and streams are tested without
/// the kernels and copies that sit above them.
pub(crate) struct Task(Box<dyn Fn() + Send>);

impl Task {
    pub(crate) fn new(run: impl Fn() + Send + 'static) -> Self {
        Self(Box::new(run))
    }
}

impl Work for Task {
    fn execute(&self) {
        (self.0)();
    }

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        unreachable!("tasks are queued only by tests that do not record")
    }
}
