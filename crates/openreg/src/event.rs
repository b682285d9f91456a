//! Events: markers recorded into a stream that take the time at which the stream reached
//! them, for synchronization and device-side timing, and streams waiting on them.
//!
//! Events are work queued on streams, so they sit above them; they sit on top of the
//! operations because timing kernels and copies is what they are for.

use std::borrow::Cow;
use std::sync::{Arc, Condvar, Mutex};

use crate::activity_api::{traced, Tag};
use crate::activity_records::{DeviceActivity, EventOrigin, RuntimeApi, SyncKind};
use crate::error::{OrError, Result};
use crate::lock::{lock, wait};
use crate::queue::Work;
use crate::stream::Stream;
use crate::sys::now_ns;

/// A device event. As in CUDA, waiting and timing use its most recent [`record`](Self::record);
/// an event never recorded counts as complete but has no time.
#[derive(Debug, Default)]
pub struct Event {
    latest: Mutex<Option<Arc<Marker>>>,
}

/// One record of an event: shared by the event and the stream work that completes it, so a
/// re-record never disturbs waiters of an earlier one.
#[derive(Debug)]
struct Marker {
    device: usize,
    stream: u32,
    record_correlation_id: Option<u64>,
    reached_ns: Mutex<Option<i64>>,
    reached: Condvar,
}

impl Marker {
    /// Called by the stream worker when the stream reaches the record.
    fn complete(&self, reached_ns: i64) {
        *lock(&self.reached_ns) = Some(reached_ns);
        self.reached.notify_all();
    }

    /// Blocks until the stream reached the record; returns when it did.
    fn wait(&self) -> i64 {
        let mut reached = lock(&self.reached_ns);
        loop {
            if let Some(ns) = *reached {
                return ns;
            }
            reached = wait(&self.reached, reached);
        }
    }

    fn is_reached(&self) -> bool {
        lock(&self.reached_ns).is_some()
    }

    fn origin(&self) -> EventOrigin {
        EventOrigin {
            stream: self.stream,
            record_correlation_id: self.record_correlation_id,
        }
    }
}

/// The stream work of [`Event::record`]: reaching the front of the stream completes it.
struct Reach(Arc<Marker>);

impl Work for Reach {
    // Completed in `finished`, once recorded.
    fn execute(&self) {}

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        ("Event Record".into(), DeviceActivity::EventRecord)
    }

    fn finished(&self, start_ns: i64) {
        self.0.complete(start_ns);
    }
}

/// The stream work of [`Stream::wait_event`]: holds the stream until the record completes.
struct WaitFor(Arc<Marker>);

impl Work for WaitFor {
    fn execute(&self) {
        self.0.wait();
    }

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        let kind = SyncKind::StreamWaitEvent;
        let waited = Some(self.0.origin());
        (kind.name().into(), DeviceActivity::Sync { kind, waited })
    }
}

impl Event {
    /// A new, unrecorded event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues this event on `stream` (`orEventRecord`): it completes, taking its timestamp,
    /// when the stream has finished all work queued before it.
    pub fn record(&self, stream: &Stream) {
        traced(RuntimeApi::EventRecord, |tag| {
            let marker = Arc::new(Marker {
                device: stream.device(),
                stream: stream.id(),
                record_correlation_id: tag.map(Tag::correlation_id),
                reached_ns: Mutex::new(None),
                reached: Condvar::new(),
            });
            // Queue first, publish second: a wait that finds this record must find it queued,
            // or a wait queued ahead of it on the same stream would never end.
            stream.submit(Reach(Arc::clone(&marker)), tag);
            *lock(&self.latest) = Some(marker);
        });
    }

    /// Whether the latest record has completed (true when never recorded), without blocking
    /// (`orEventQuery`).
    pub fn query(&self) -> bool {
        traced(RuntimeApi::EventQuery, |_| {
            self.latest().is_none_or(|m| m.is_reached())
        })
    }

    /// Blocks until the latest record has completed; returns at once when never recorded
    /// (`orEventSynchronize`).
    pub fn synchronize(&self) {
        match self.latest() {
            Some(marker) => {
                synchronize(&marker);
            }
            None => traced(RuntimeApi::EventSynchronize, |_| ()),
        }
    }

    /// When the stream reached the latest record, in Unix-epoch ns; blocks until it did.
    pub fn timestamp_ns(&self) -> Result<i64> {
        let marker = self.latest().ok_or(OrError::EventNotRecorded)?;
        Ok(synchronize(&marker))
    }

    /// Device time from `start` to `end` in milliseconds, waiting for both
    /// (`orEventElapsedTime`). Negative when `end` completed first.
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f64> {
        Ok(elapsed_ns(start, end)? as f64 / 1e6)
    }

    /// Device time from `start` to `end` in microseconds, waiting for both: the unit of the
    /// profiler stubs' `elapsed`.
    pub fn elapsed_us(start: &Event, end: &Event) -> Result<f64> {
        Ok(elapsed_ns(start, end)? as f64 / 1e3)
    }

    fn latest(&self) -> Option<Arc<Marker>> {
        lock(&self.latest).clone()
    }
}

impl Stream {
    /// Makes work queued on this stream from now on wait until `event`'s latest record has
    /// completed; no effect when it was never recorded (`orStreamWaitEvent`).
    pub fn wait_event(&self, event: &Event) {
        let marker = event.latest();
        traced(RuntimeApi::StreamWaitEvent, |tag| {
            if let Some(marker) = marker {
                self.submit(WaitFor(marker), tag);
            }
        });
    }
}

/// Waits for `marker` as one `orEventSynchronize` call.
fn synchronize(marker: &Marker) -> i64 {
    traced(RuntimeApi::EventSynchronize, |tag| {
        let start = now_ns();
        let reached = marker.wait();
        if let Some(tag) = tag {
            let (kind, origin) = (SyncKind::EventSynchronize, Some(marker.origin()));
            let stream = Some(marker.stream);
            tag.record_sync(kind, origin, marker.device, stream, start, now_ns());
        }
        reached
    })
}

fn elapsed_ns(start: &Event, end: &Event) -> Result<i64> {
    let start = start.latest().ok_or(OrError::EventNotRecorded)?;
    let end = end.latest().ok_or(OrError::EventNotRecorded)?;
    Ok(traced(RuntimeApi::EventElapsedTime, |_| {
        end.wait() - start.wait()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{launch_kernel, Kernel};
    use crate::memory::{malloc, memcpy_async, HostBuffer};
    use crate::test_support::shared;
    use std::time::Duration;

    #[test]
    fn elapsed_time_measures_a_busy_kernel() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let (start, end) = (Event::new(), Event::new());
        start.record(&stream);
        launch_kernel(Kernel::Busy(Duration::from_millis(2)), &stream).unwrap();
        end.record(&stream);
        let ms = Event::elapsed_ms(&start, &end).unwrap();
        assert!((2.0..50.0).contains(&ms), "{ms} ms");
        let us = Event::elapsed_us(&start, &end).unwrap();
        assert!((us - ms * 1e3).abs() < 1e-6, "{us} us vs {ms} ms");
        assert_eq!(
            end.timestamp_ns().unwrap() - start.timestamp_ns().unwrap(),
            (ms * 1e6).round() as i64
        );
    }

    #[test]
    fn unrecorded_events_are_complete_but_untimed() {
        let _guard = shared();
        let (event, recorded) = (Event::new(), Event::new());
        assert!(event.query());
        event.synchronize();
        assert!(matches!(
            event.timestamp_ns(),
            Err(OrError::EventNotRecorded)
        ));
        recorded.record(&Stream::new(0).unwrap());
        assert!(matches!(
            Event::elapsed_ms(&event, &recorded),
            Err(OrError::EventNotRecorded)
        ));
        assert!(matches!(
            Event::elapsed_us(&recorded, &event),
            Err(OrError::EventNotRecorded)
        ));
    }

    #[test]
    fn query_reports_pending_work_until_the_stream_reaches_the_event() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 16).unwrap();
        let event = Event::new();
        // Holding the buffer's lock stalls the fill, so the event is pending for certain.
        let held = lock(buf.bytes());
        let fill = Kernel::Fill {
            out: buf.clone(),
            value: 1.0,
        };
        launch_kernel(fill, &stream).unwrap();
        event.record(&stream);
        assert!(!event.query());
        drop(held);
        event.synchronize();
        assert!(event.query());
    }

    #[test]
    fn waits_and_timing_follow_the_latest_record() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let event = Event::new();
        event.record(&stream);
        let first = event.timestamp_ns().unwrap();
        launch_kernel(Kernel::Busy(Duration::from_millis(1)), &stream).unwrap();
        event.record(&stream);
        let second = event.timestamp_ns().unwrap();
        assert!(second - first >= 1_000_000, "{} ns apart", second - first);
    }

    #[test]
    fn wait_event_orders_work_across_streams() {
        let _guard = shared();
        let (producer, consumer) = (Stream::new(0).unwrap(), Stream::new(0).unwrap());
        let buf = malloc(0, 64).unwrap();
        let host = HostBuffer::zeroed(64);
        let ready = Event::new();
        launch_kernel(Kernel::Busy(Duration::from_millis(2)), &producer).unwrap();
        let fill = Kernel::Fill {
            out: buf.clone(),
            value: 7.0,
        };
        launch_kernel(fill, &producer).unwrap();
        ready.record(&producer);
        consumer.wait_event(&ready);
        memcpy_async(&host, &buf, 64, &consumer).unwrap();
        consumer.synchronize();
        assert!(host.to_f32s().iter().all(|&v| v == 7.0));
    }
}
