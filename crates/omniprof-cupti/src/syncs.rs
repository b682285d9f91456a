//! Synchronizations as Kineto writes them: the row each goes on, and, for a wait on a CUDA
//! event, the `cudaEventRecord` call it waited for.
//!
//! | sync | row (`tid`) | waited for |
//! |---|---|---|
//! | `Stream Sync` | the stream's sync row, stream + 1,000,000, `stream N (sync)` | |
//! | `Stream Wait Event` (of a stream that ran work, unless turned off) | its stream | the event's record |
//! | `Event Sync`, `Context Sync` (no stream: CUPTI's −1) | −1, written as `tid` 1 | `Event Sync`: the event's record |
//!
//! A `Stream Sync` spans the stream's work it waits for, so on the stream's own row it would
//! overlap that work; Kineto's writer gives it a row of its own, sorted with the stream.
//! CUPTI names the event a wait is on by id, and records each `cudaEventRecord` of it
//! (`CUPTI_ACTIVITY_KIND_CUDA_EVENT`) with the call's correlation id and the stream: Kineto
//! keeps the latest record per (context, event) and writes its stream and correlation id as
//! `wait_on_stream` and `wait_on_cuda_event_record_corr_id`, which HTA's critical path joins
//! to the `cudaEventRecord` call. Here the record is the latest one made before the wait's
//! call (by correlation id, which CUPTI counts up per process), so that records of one event
//! in buffers flushed out of order still find the right one.

use std::collections::HashMap;
use std::sync::Arc;

use omniprof::backends::ResourceInfo;
use omniprof::trace::Value;

use crate::names;
use crate::records::{self, Record};

/// CUPTI's stream (and event) id where none applies (`CUPTI_SYNCHRONIZATION_INVALID_VALUE`).
const NONE: u32 = u32::MAX;

/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE`.
const EVENT_SYNCHRONIZE: u32 = 1;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT`.
const STREAM_WAIT_EVENT: u32 = 2;
/// `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE`.
const STREAM_SYNCHRONIZE: u32 = 3;

/// What a stream's sync row adds to the stream id (Kineto's `kSyncStreamTidOffset`).
pub(crate) const SYNC_ROW_OFFSET: i64 = 1_000_000;

/// The row a sync goes on (the `tid` written is its absolute value).
pub(crate) fn row(s: &records::Sync) -> i64 {
    // CUPTI's "no stream" is -1 as Kineto reads it (a 32-bit signed id).
    let stream = i64::from(s.stream as i32);
    if s.sync_type == STREAM_SYNCHRONIZE && s.stream != NONE {
        stream + SYNC_ROW_OFFSET
    } else {
        stream
    }
}

/// Stream `stream`'s sync row on `device`: named for the stream and sorted with it, as
/// Kineto writes it.
pub(crate) fn sync_row(device: u32, stream: u32) -> ResourceInfo {
    ResourceInfo {
        device_id: device.into(),
        id: i64::from(stream) + SYNC_ROW_OFFSET,
        sort_index: stream.into(),
        name: format!("stream {stream} (sync)"),
    }
}

/// Whether a sync is a stream's wait on an event (`cudaStreamWaitEvent`): written only where
/// `ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS` is on and the stream ran work, as Kineto does.
pub(crate) fn is_stream_wait(s: &records::Sync) -> bool {
    s.sync_type == STREAM_WAIT_EVENT
}

/// Whether a sync waits on a CUDA event (and Kineto writes what it waited for).
fn waits_on_event(s: &records::Sync) -> bool {
    matches!(s.sync_type, EVENT_SYNCHRONIZE | STREAM_WAIT_EVENT)
}

/// The CUDA events recorded in a trace, by (context, event): each record's correlation id
/// and stream, in correlation order.
#[derive(Default)]
pub(crate) struct EventRecords(HashMap<(u32, u32), Vec<(u32, u32)>>);

impl EventRecords {
    /// The event records among `records`.
    pub(crate) fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Self {
        let mut map: HashMap<(u32, u32), Vec<(u32, u32)>> = HashMap::new();
        for r in records {
            if let Record::CudaEvent(e) = r {
                map.entry((e.context, e.event))
                    .or_default()
                    .push((e.correlation, e.stream));
            }
        }
        for recorded in map.values_mut() {
            recorded.sort_unstable();
        }
        Self(map)
    }

    /// The record `s` waited for, as (stream, correlation id): the latest record of its
    /// event made before its call, if any was recorded.
    fn waited_for(&self, s: &records::Sync) -> Option<(u32, u32)> {
        let recorded = self.0.get(&(s.context, s.event))?;
        let before = recorded.partition_point(|&(c, _)| c < s.correlation);
        let &(correlation, stream) = recorded.get(before.checked_sub(1)?)?;
        Some((stream, correlation))
    }
}

/// A sync's `args`, in Kineto's order (the writer adds `correlation`): for a wait on an
/// event, the stream and correlation id of the record it waited for (−1 each where none was
/// recorded) and the event.
pub(crate) fn args(
    s: &records::Sync,
    device: u32,
    events: &EventRecords,
) -> Vec<(Arc<str>, Value)> {
    let kind = names::sync(s.sync_type);
    let mut args: Vec<(Arc<str>, Value)> = vec![("cuda_sync_kind".into(), Value::from(kind))];
    if waits_on_event(s) {
        let (stream, correlation) = events
            .waited_for(s)
            .map_or((-1, -1), |(stream, c)| (stream as i32, c as i32));
        args.push(("wait_on_stream".into(), Value::from(stream)));
        args.push((
            "wait_on_cuda_event_record_corr_id".into(),
            Value::from(correlation),
        ));
        args.push(("wait_on_cuda_event_id".into(), Value::from(s.event)));
    }
    args.push(("stream".into(), Value::from(s.stream as i32)));
    args.push(("device".into(), Value::from(device)));
    args.push(("context".into(), Value::from(s.context)));
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::CudaEvent;

    fn sync(sync_type: u32, stream: u32, event: u32, correlation: u32) -> records::Sync {
        records::Sync {
            sync_type,
            start: 0,
            end: 1,
            correlation,
            context: 1,
            stream,
            event,
        }
    }

    fn recorded(event: u32, stream: u32, correlation: u32) -> Record {
        Record::CudaEvent(CudaEvent {
            correlation,
            context: 1,
            stream,
            event,
        })
    }

    #[test]
    fn a_stream_sync_goes_on_its_streams_sync_row_and_a_sync_on_no_stream_on_row_minus_one() {
        assert_eq!(row(&sync(STREAM_SYNCHRONIZE, 7, NONE, 5)), 1_000_007);
        assert_eq!(row(&sync(STREAM_WAIT_EVENT, 7, 3, 5)), 7);
        assert_eq!(row(&sync(EVENT_SYNCHRONIZE, NONE, 3, 5)), -1);
        assert_eq!(row(&sync(4, NONE, NONE, 5)), -1);
        let r = sync_row(0, 7);
        assert_eq!((r.device_id, r.id, r.sort_index), (0, 1_000_007, 7));
        assert_eq!(r.name, "stream 7 (sync)");
    }

    #[test]
    fn a_wait_names_the_latest_record_of_its_event_made_before_its_call() {
        // Event 3 recorded on stream 7 (call 10), then on stream 9 (call 20); event 4 once.
        let records = [recorded(3, 9, 20), recorded(3, 7, 10), recorded(4, 11, 12)];
        let events = EventRecords::of(&records);
        let waited = |s: records::Sync| events.waited_for(&s);
        assert_eq!(waited(sync(STREAM_WAIT_EVENT, 13, 3, 15)), Some((7, 10)));
        assert_eq!(waited(sync(EVENT_SYNCHRONIZE, NONE, 3, 25)), Some((9, 20)));
        assert_eq!(waited(sync(EVENT_SYNCHRONIZE, NONE, 3, 5)), None);
        assert_eq!(waited(sync(EVENT_SYNCHRONIZE, NONE, 8, 25)), None);
    }

    #[test]
    fn only_waits_on_events_write_what_they_waited_for_and_none_found_is_minus_one() {
        let events = EventRecords::of(&[recorded(3, 7, 10)]);
        let keys = |s: records::Sync| -> Vec<(String, Value)> {
            args(&s, 0, &events)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
        };
        let pair = |k: &str, v: Value| (k.to_owned(), v);
        assert_eq!(
            keys(sync(STREAM_WAIT_EVENT, 13, 3, 15)),
            [
                pair("cuda_sync_kind", Value::from("Stream Wait Event")),
                pair("wait_on_stream", Value::from(7)),
                pair("wait_on_cuda_event_record_corr_id", Value::from(10)),
                pair("wait_on_cuda_event_id", Value::from(3u32)),
                pair("stream", Value::from(13)),
                pair("device", Value::from(0u32)),
                pair("context", Value::from(1u32)),
            ]
        );
        assert_eq!(
            keys(sync(EVENT_SYNCHRONIZE, NONE, 5, 15))[1..4],
            [
                pair("wait_on_stream", Value::from(-1)),
                pair("wait_on_cuda_event_record_corr_id", Value::from(-1)),
                pair("wait_on_cuda_event_id", Value::from(5u32)),
            ]
        );
        assert_eq!(
            keys(sync(STREAM_SYNCHRONIZE, 7, NONE, 15)),
            [
                pair("cuda_sync_kind", Value::from("Stream Sync")),
                pair("stream", Value::from(7)),
                pair("device", Value::from(0u32)),
                pair("context", Value::from(1u32)),
            ]
        );
    }
}
