//! Stream queues: an in-order queue of [`Work`] and the worker thread that runs it, stamping
//! each item with its real start and end and recording it for the call that queued it.
//!
//! This is the execution core. It knows work only through the [`Work`] trait, so the
//! operations that queue work (copies, kernels, events) sit above it, and so do the device
//! registry, which keeps each device's queues for device-wide synchronization, and the
//! [`Stream`](crate::Stream) handle.
//!
//! Kernels, copies and fills last at least [`MIN_WORK_NS`], as on a real device, where even
//! a launch-bound kernel or a copy of a few bytes takes a microsecond or more. A simulated
//! fill of 64 bytes is done in a fraction of that, and a trace of such sub-microsecond work
//! is one no device gives: HolisticTraceAnalysis rounds starts up and ends down to whole
//! microseconds, so shorter work gets a negative duration and its temporal breakdown fails
//! (`assert non_compute_time >= 0`; `crates/omniprof-cli/tests/demo_device.rs` checks the
//! demo's trace against it).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::activity_api::Tag;
use crate::activity_records::DeviceActivity;
use crate::device_usage;
use crate::error::{OrError, Result};
use crate::hardware::MemcpyKind;
use crate::lock::{lock, wait};
use crate::sys::now_ns;

/// One unit of stream work.
pub(crate) trait Work: Send {
    /// Does the work, on the stream's worker thread.
    fn execute(&self);

    /// The name and activity of the work's device record; asked only while recording.
    fn describe(&self) -> (Cow<'static, str>, DeviceActivity);

    /// Called after the work ran and its record is stored; `start_ns` is when it started.
    fn finished(&self, _start_ns: i64) {}

    /// What the work copied, for a copy: counted by the device's performance monitor.
    fn copied(&self) -> Option<(MemcpyKind, u64)> {
        None
    }

    /// Whether the work is device work that takes time (a kernel, copy or fill), which
    /// lasts at least [`MIN_WORK_NS`]; event records and stream waits do not.
    fn takes_device_time(&self) -> bool {
        false
    }
}

/// The least a kernel, copy or fill lasts on the simulated device, in nanoseconds: a real
/// device's launch-bound kernels and smallest copies take a microsecond or more.
pub const MIN_WORK_NS: i64 = 1_000;

/// Owns a queue's worker thread; the worker itself only holds the queue, so dropping this
/// is what ends it.
pub(crate) struct Worker {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

/// The part of a stream shared with its worker thread and with device-wide sync.
pub(crate) struct Queue {
    device: usize,
    id: u32,
    state: Mutex<QueueState>,
    /// Signalled when work is queued or the stream closes.
    work_ready: Condvar,
    /// Signalled when a work item has finished.
    progress: Condvar,
}

struct QueueState {
    pending: VecDeque<Item>,
    submitted: u64,
    completed: u64,
    closing: bool,
}

struct Item {
    work: Box<dyn Work>,
    tag: Option<Tag>,
}

impl Worker {
    /// A new queue for stream `id` of `device`, run by a thread named `openreg-d<device>s<id>`.
    pub(crate) fn spawn(device: usize, id: u32) -> Result<Self> {
        let queue = Arc::new(Queue {
            device,
            id,
            state: Mutex::new(QueueState {
                pending: VecDeque::new(),
                submitted: 0,
                completed: 0,
                closing: false,
            }),
            work_ready: Condvar::new(),
            progress: Condvar::new(),
        });
        let worker_queue = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name(format!("openreg-d{device}s{id}"))
            .spawn(move || worker_queue.run())
            .map_err(OrError::ThreadSpawn)?;
        Ok(Self {
            queue,
            thread: Some(thread),
        })
    }

    pub(crate) fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// Queues `work`; with a tag, its device record is stored once it has run.
    pub(crate) fn submit(&self, work: impl Work + 'static, tag: Option<Tag>) {
        let queue = &self.queue;
        let mut state = lock(&queue.state);
        state.pending.push_back(Item {
            work: Box::new(work),
            tag,
        });
        state.submitted += 1;
        queue.work_ready.notify_one();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        lock(&self.queue.state).closing = true;
        self.queue.work_ready.notify_all();
        if let Some(thread) = self.thread.take() {
            // The worker never panics on its own; a join error could only repeat a panic
            // already reported on that thread.
            let _ = thread.join();
        }
    }
}

impl Queue {
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    fn run(&self) {
        while let Some(item) = self.next() {
            let start_ns = now_ns();
            let started = Instant::now();
            device_usage::work_started(self.device, start_ns);
            item.work.execute();
            let mut end_ns = now_ns();
            if item.work.takes_device_time() {
                // Spun on the monotonic clock: the wall clock the records use may step.
                let least = Duration::from_nanos(MIN_WORK_NS as u64);
                while started.elapsed() < least {
                    std::hint::spin_loop();
                }
                end_ns = now_ns().max(start_ns + MIN_WORK_NS);
            }
            device_usage::work_finished(self.device, end_ns, item.work.copied());
            if let Some(tag) = item.tag {
                let (name, activity) = item.work.describe();
                let stream = Some(self.id);
                tag.record_device(name, activity, self.device, stream, start_ns, end_ns);
            }
            // Completion becomes visible only after the record is stored, so whoever waits
            // for this work and then drains finds its record.
            item.work.finished(start_ns);
            // Buffers the work held are released before a synchronize can return.
            drop(item);
            lock(&self.state).completed += 1;
            self.progress.notify_all();
        }
    }

    /// The next item in order; `None` once the stream is closing and drained.
    fn next(&self) -> Option<Item> {
        let mut state = lock(&self.state);
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some(item);
            }
            if state.closing {
                return None;
            }
            state = wait(&self.work_ready, state);
        }
    }

    /// Blocks until everything submitted so far has finished.
    pub(crate) fn wait_idle(&self) {
        let mut state = lock(&self.state);
        let target = state.submitted;
        while state.completed < target {
            state = wait(&self.progress, state);
        }
    }
}
