//! Streams: the handle through which work is queued on a device, and the calling thread's
//! current stream.
//!
//! A stream is a worker queue of a device, looked up in the device registry, so it sits
//! above both; the operations that queue work take a `Stream` and sit above it.

use std::cell::RefCell;
use std::sync::Arc;

use crate::activity_api::{traced, Tag};
use crate::activity_records::{RuntimeApi, SyncKind};
use crate::device::{current_device, runtime};
use crate::error::Result;
use crate::queue::{Work, Worker};
use crate::sys::now_ns;

/// A handle to a stream. Work queued on one stream runs in order on the stream's worker
/// thread (named `openreg-d<device>s<id>`); work on different streams runs concurrently.
///
/// Handles are cheap clones. Dropping the last handle of a stream made by [`Stream::new`]
/// lets queued work finish, then joins the worker; pooled streams live for the process.
#[derive(Clone)]
pub struct Stream {
    inner: Arc<Worker>,
}

impl Stream {
    /// A new stream on `device` with its own worker thread.
    pub fn new(device: usize) -> Result<Self> {
        let inner = runtime().device(device)?.new_stream()?;
        Ok(Self { inner })
    }

    /// The default stream of `device` (pooled stream 0).
    pub fn default_for(device: usize) -> Result<Self> {
        Self::pooled(device, 0)
    }

    /// Pooled stream `index` of `device`, `index < Options::streams_per_device`; its id is
    /// `index`.
    pub fn pooled(device: usize, index: usize) -> Result<Self> {
        let inner = runtime().device(device)?.pooled_stream(index)?;
        Ok(Self { inner })
    }

    /// The device the stream runs on.
    pub fn device(&self) -> usize {
        self.inner.queue().device()
    }

    /// The stream's id, unique on its device; device records carry it.
    pub fn id(&self) -> u32 {
        self.inner.queue().id()
    }

    /// Blocks until all work queued so far has finished (`orStreamSynchronize`).
    pub fn synchronize(&self) {
        let queue = self.inner.queue();
        traced(RuntimeApi::StreamSynchronize, |tag| {
            let start = now_ns();
            queue.wait_idle();
            if let Some(tag) = tag {
                let (kind, stream) = (SyncKind::StreamSynchronize, Some(queue.id()));
                tag.record_sync(kind, None, queue.device(), stream, start, now_ns());
            }
        });
    }

    pub(crate) fn submit(&self, work: impl Work + 'static, tag: Option<Tag>) {
        self.inner.submit(work, tag);
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
    use crate::error::OrError;
    use crate::test_support::{shared, Task};
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn work_runs_in_submission_order() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 1..=3 {
            // A slow item first: later items must still wait for it.
            let slow = || std::thread::sleep(Duration::from_micros(300));
            stream.submit(Task::new(slow), None);
            let order = Arc::clone(&order);
            stream.submit(Task::new(move || order.lock().unwrap().push(i)), None);
        }
        stream.synchronize();
        assert_eq!(*order.lock().unwrap(), [1, 2, 3]);
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
    fn streams_of_a_missing_device_are_errors() {
        let _guard = shared();
        let invalid = |r: Result<Stream>| {
            matches!(
                r,
                Err(OrError::InvalidDevice {
                    device: 2,
                    count: 2
                })
            )
        };
        assert!(invalid(Stream::new(2)));
        assert!(invalid(Stream::default_for(2)));
    }

    #[test]
    fn dropping_the_last_handle_finishes_queued_work_and_joins_the_worker() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let expected = format!("openreg-d0s{}", stream.id());
        let ran_on = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&ran_on);
        stream.submit(
            Task::new(move || {
                std::thread::sleep(Duration::from_millis(2));
                *seen.lock().unwrap() = std::thread::current().name().map(str::to_owned);
            }),
            None,
        );
        let clone = stream.clone();
        drop(stream);
        drop(clone);
        assert_eq!(
            ran_on.lock().unwrap().as_deref(),
            Some(&*expected),
            "the drop waited for the worker to drain its queue"
        );
    }
}
