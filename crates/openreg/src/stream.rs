//! Streams: in-order work queues, each executed by its own worker thread, and the calling
//! thread's current stream.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::device::{current_device, runtime, Device};
use crate::event::{Event, Marker};
use crate::kernel::Kernel;
use crate::memory::{Fill, Transfer};
use crate::profiling::{self, DeviceActivity, RuntimeApi, SyncKind, Tag};
use crate::sys::now_ns;
use crate::{lock, wait, OrError, Result};

/// A handle to a stream. Work queued on one stream runs in order on the stream's worker
/// thread (named `openreg-d<device>s<id>`); work on different streams runs concurrently.
///
/// Handles are cheap clones. Dropping the last handle of a stream made by [`Stream::new`]
/// lets queued work finish, then joins the worker; pooled streams live for the process.
#[derive(Clone)]
pub struct Stream {
    inner: Arc<Worker>,
}

/// Owns the worker thread; the worker itself only holds the queue, so the last [`Stream`]
/// handle going away is what ends it.
struct Worker {
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
    work: Work,
    tag: Option<Tag>,
}

/// One unit of stream work.
pub(crate) enum Work {
    Kernel(Kernel),
    Memcpy(Transfer),
    Memset(Fill),
    RecordEvent(Arc<Marker>),
    WaitEvent(Arc<Marker>),
}

impl Work {
    fn execute(&self) {
        match self {
            Self::Kernel(kernel) => kernel.execute(),
            Self::Memcpy(copy) => copy.execute(),
            Self::Memset(fill) => fill.execute(),
            // Completed by the worker after recording, see `Queue::run`.
            Self::RecordEvent(_) => {}
            Self::WaitEvent(marker) => {
                marker.wait();
            }
        }
    }

    fn record(&self, tag: Tag, device: usize, stream: u32, start_ns: i64, end_ns: i64) {
        let (name, activity): (Cow<'static, str>, _) = match self {
            Self::Kernel(kernel) => (kernel.name(), kernel.activity()),
            Self::Memcpy(copy) => (copy.name().into(), copy.activity()),
            Self::Memset(fill) => ("Memset".into(), fill.activity()),
            Self::RecordEvent(_) => ("Event Record".into(), DeviceActivity::EventRecord),
            Self::WaitEvent(marker) => {
                let (kind, origin) = (SyncKind::StreamWaitEvent, Some(marker.origin()));
                return tag.record_sync(kind, origin, device, Some(stream), start_ns, end_ns);
            }
        };
        tag.record_device(name, activity, device, Some(stream), start_ns, end_ns);
    }
}

impl Queue {
    fn run(&self) {
        while let Some(item) = self.next() {
            let start_ns = now_ns();
            item.work.execute();
            let end_ns = now_ns();
            if let Some(tag) = item.tag {
                item.work
                    .record(tag, self.device, self.id, start_ns, end_ns);
            }
            // Completion becomes visible only after the record is stored, so whoever waits
            // for this work and then drains finds its record.
            if let Work::RecordEvent(marker) = &item.work {
                marker.complete(start_ns);
            }
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

impl Stream {
    /// A new stream on `device` with its own worker thread.
    pub fn new(device: usize) -> Result<Self> {
        let device = runtime().device(device)?;
        Self::spawn(device, device.next_stream_id())
    }

    /// The default stream of `device` (pooled stream 0).
    pub fn default_for(device: usize) -> Result<Self> {
        Self::pooled(device, 0)
    }

    /// Pooled stream `index` of `device`, `index < Options::streams_per_device`; its id is
    /// `index`.
    pub fn pooled(device: usize, index: usize) -> Result<Self> {
        runtime().device(device)?.pooled_stream(index)
    }

    pub(crate) fn spawn(device: &Device, id: u32) -> Result<Self> {
        let queue = Arc::new(Queue {
            device: device.index(),
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
            .name(format!("openreg-d{}s{id}", device.index()))
            .spawn(move || worker_queue.run())
            .map_err(OrError::ThreadSpawn)?;
        device.register_stream(Arc::downgrade(&queue));
        Ok(Self {
            inner: Arc::new(Worker {
                queue,
                thread: Some(thread),
            }),
        })
    }

    /// The device the stream runs on.
    pub fn device(&self) -> usize {
        self.inner.queue.device
    }

    /// The stream's id, unique on its device; device records carry it.
    pub fn id(&self) -> u32 {
        self.inner.queue.id
    }

    /// Blocks until all work queued so far has finished (`orStreamSynchronize`).
    pub fn synchronize(&self) {
        let queue = &self.inner.queue;
        profiling::traced(RuntimeApi::StreamSynchronize, |tag| {
            let start = now_ns();
            queue.wait_idle();
            if let Some(tag) = tag {
                let (kind, stream) = (SyncKind::StreamSynchronize, Some(queue.id));
                tag.record_sync(kind, None, queue.device, stream, start, now_ns());
            }
        });
    }

    /// Makes work queued on this stream from now on wait until `event`'s latest record has
    /// completed; no effect when it was never recorded (`orStreamWaitEvent`).
    pub fn wait_event(&self, event: &Event) {
        let marker = event.latest();
        profiling::traced(RuntimeApi::StreamWaitEvent, |tag| {
            if let Some(marker) = marker {
                self.submit(Work::WaitEvent(marker), tag);
            }
        });
    }

    pub(crate) fn submit(&self, work: Work, tag: Option<Tag>) {
        let queue = &self.inner.queue;
        let mut state = lock(&queue.state);
        state.pending.push_back(Item { work, tag });
        state.submitted += 1;
        queue.work_ready.notify_one();
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Stream {}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.device())
            .field("id", &self.id())
            .finish()
    }
}

thread_local! {
    /// The calling thread's current stream per device index; `None`: the default stream.
    static CURRENT: RefCell<Vec<Option<Stream>>> = const { RefCell::new(Vec::new()) };
}

/// The calling thread's current stream on its current device: the one last passed to
/// [`set_current_stream`] for that device, else the device's default stream.
pub fn current_stream() -> Result<Stream> {
    let device = current_device();
    let chosen = CURRENT
        .try_with(|current| current.borrow().get(device).cloned().flatten())
        .ok()
        .flatten();
    match chosen {
        Some(stream) => Ok(stream),
        None => Stream::default_for(device),
    }
}

/// Makes `stream` the calling thread's current stream for the stream's device.
pub fn set_current_stream(stream: &Stream) {
    // During thread teardown there is no later call that could use it.
    let _ = CURRENT.try_with(|current| {
        let mut current = current.borrow_mut();
        let device = stream.device();
        if current.len() <= device {
            current.resize(device + 1, None);
        }
        current[device] = Some(stream.clone());
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::set_device;
    use crate::memory::{malloc, memcpy_async, HostBuffer};
    use crate::test_support::shared;
    use std::time::Duration;

    fn fill(out: &crate::DeviceBuffer, value: f32) -> Kernel {
        Kernel::Fill {
            out: out.clone(),
            value,
        }
    }

    #[test]
    fn work_runs_in_submission_order() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 64).unwrap();
        let snapshots: Vec<_> = (1..=3).map(|_| HostBuffer::zeroed(64)).collect();
        for (i, snapshot) in snapshots.iter().enumerate() {
            // A slow kernel first: later items must still wait for it.
            crate::launch_kernel(Kernel::Busy(Duration::from_micros(300)), &stream).unwrap();
            crate::launch_kernel(fill(&buf, i as f32 + 1.0), &stream).unwrap();
            memcpy_async(snapshot, &buf, 64, &stream).unwrap();
        }
        stream.synchronize();
        for (i, snapshot) in snapshots.iter().enumerate() {
            assert!(snapshot.to_f32s().iter().all(|&v| v == i as f32 + 1.0));
        }
    }

    #[test]
    fn wait_event_orders_work_across_streams() {
        let _guard = shared();
        let (producer, consumer) = (Stream::new(0).unwrap(), Stream::new(0).unwrap());
        let buf = malloc(0, 64).unwrap();
        let host = HostBuffer::zeroed(64);
        let ready = Event::new();
        crate::launch_kernel(Kernel::Busy(Duration::from_millis(2)), &producer).unwrap();
        crate::launch_kernel(fill(&buf, 7.0), &producer).unwrap();
        ready.record(&producer);
        consumer.wait_event(&ready);
        memcpy_async(&host, &buf, 64, &consumer).unwrap();
        consumer.synchronize();
        assert!(host.to_f32s().iter().all(|&v| v == 7.0));
    }

    #[test]
    fn current_stream_is_per_thread_and_per_device() {
        let _guard = shared();
        assert_eq!(current_stream().unwrap(), Stream::default_for(0).unwrap());
        assert_eq!(current_stream().unwrap().id(), 0);
        let mine = Stream::new(0).unwrap();
        set_current_stream(&mine);
        assert_eq!(current_stream().unwrap(), mine);
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(current_stream().unwrap(), Stream::default_for(0).unwrap()));
        });
        set_device(1).unwrap();
        assert_eq!(current_stream().unwrap(), Stream::default_for(1).unwrap());
        set_device(0).unwrap();
        assert_eq!(current_stream().unwrap(), mine);
    }

    #[test]
    fn pooled_streams_are_shared_and_bounded() {
        let _guard = shared();
        let pooled = Stream::pooled(1, 3).unwrap();
        assert_eq!((pooled.device(), pooled.id()), (1, 3));
        assert_eq!(pooled, Stream::pooled(1, 3).unwrap());
        assert!(matches!(
            Stream::pooled(1, 4),
            Err(OrError::InvalidStream {
                device: 1,
                index: 4,
                count: 4
            })
        ));
        let (a, b) = (Stream::new(1).unwrap(), Stream::new(1).unwrap());
        assert!(a.id() >= 4 && b.id() >= 4 && a.id() != b.id());
        assert_ne!(a, b);
    }

    #[test]
    fn dropping_the_last_handle_finishes_queued_work_and_joins_the_worker() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let thread = stream.inner.thread.as_ref().unwrap().thread().clone();
        assert_eq!(thread.name(), Some(&*format!("openreg-d0s{}", stream.id())));
        let done = Event::new();
        crate::launch_kernel(Kernel::Busy(Duration::from_millis(2)), &stream).unwrap();
        done.record(&stream);
        let clone = stream.clone();
        drop(stream);
        drop(clone);
        assert!(
            done.query(),
            "the drop waited for the worker to drain its queue"
        );
    }
}
