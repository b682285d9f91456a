//! OpenReg's profiler stubs (`docs/stubs-and-summary.md`, section 3): events on the
//! current stream of the current device, timed from their real completion times. This is
//! the whole integration a device needs for per-op device time in omniprof's summary
//! (`ProfilerBuilder::stubs("OpenReg")`), without a device timeline.
//!
//! ```
//! use omniprof::{record_op, Profiler};
//!
//! let stream = openreg::current_stream().unwrap();
//! let mut profiler = Profiler::builder().stubs("OpenReg").build().unwrap();
//! profiler.start().unwrap();
//! {
//!     let _op = record_op("busy");
//!     openreg::launch_kernel(openreg::Kernel::Busy(std::time::Duration::from_millis(2)), &stream).unwrap();
//! }
//! let trace = profiler.stop().unwrap();
//! let op = trace.activities.iter().find(|a| &*a.name == "busy").unwrap();
//! let us = op.arg("device_time_us").and_then(|v| v.as_i64()).unwrap();
//! assert!(us >= 2_000, "{us}");
//! ```

use omniprof::backends::{ProfilerStubs, RecordOut, StubError, StubEvent};

use crate::device::{current_device, device_count, device_synchronize, set_device};
use crate::error::OrError;
use crate::event::Event;
use crate::omniprof_backend::DEVICE_TYPE;
use crate::stream::current_stream;
use crate::sys::now_ns;

/// The stubs, registered for the device name `OpenReg`.
#[derive(Default)]
pub struct OpenRegStubs;

omniprof::register_stubs!(DEVICE_TYPE, OpenRegStubs);

fn stub_error(e: OrError) -> StubError {
    StubError::Backend(format!("OpenReg error: {e}"))
}

impl ProfilerStubs for OpenRegStubs {
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
        let stream = current_stream().map_err(stub_error)?;
        if let Some(device) = out.device {
            *device = current_device() as i32;
        }
        let event = Event::new();
        if let Some(cpu_ns) = out.cpu_ns {
            *cpu_ns = now_ns();
        }
        event.record(&stream);
        if let Some(slot) = out.event {
            *slot = Some(Box::new(event));
        }
        Ok(())
    }

    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
        let (Some(start), Some(end)) = (start.downcast_ref::<Event>(), end.downcast_ref::<Event>())
        else {
            return Ok(0.0);
        };
        Event::elapsed_us(start, end)
            .map(|us| us as f32)
            .map_err(stub_error)
    }

    fn mark(&self, _name: &str) {}

    fn range_push(&self, _name: &str) {}

    fn range_pop(&self) {}

    fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
        let current = current_device();
        for device in 0..device_count() {
            if set_device(device).is_ok() {
                op(device as i32);
            }
        }
        let _ = set_device(current);
    }

    fn synchronize(&self) -> Result<(), StubError> {
        device_synchronize().map_err(stub_error)
    }
}
