//! [`finish_recording`], the activity API's end of a session, and the tests of activity
//! recording through the whole runtime.
//!
//! The rest of the activity API ([`activity_api`](crate::activity_api)) and its records
//! ([`activity_records`](crate::activity_records)) sit low in the crate, below the runtime
//! that records through them. Ending a session the way a profiler's `stop` does needs the
//! devices, to synchronize them, and so does testing what kernels, copies, events and streams
//! record: both sit here, above the runtime.

use crate::activity_api::{disable_recording, drain_records};
use crate::activity_records::Records;
use crate::device::{current_device, device_count, device_synchronize, set_device};
use crate::error::Result;

/// Ends a session the way a profiler's `stop` does: stops recording new calls, waits for the
/// work already launched on every device (restoring the calling thread's device), and takes
/// the records, so everything launched while enabled is in them.
pub fn finish_recording() -> Result<Records> {
    // First, so the synchronization below is not itself recorded.
    disable_recording();
    let current = current_device();
    for device in 0..device_count() {
        set_device(device)?;
        device_synchronize()?;
    }
    set_device(current)?;
    Ok(drain_records())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity_api::{
        enable_recording, pop_external_correlation, push_external_correlation, recording_kinds,
        set_record_budget, DEFAULT_RECORD_BUDGET,
    };
    use crate::activity_records::{
        DeviceActivity, EventOrigin, ExternalIds, ExternalKind, Kinds, RuntimeApi, RuntimeRecord,
        SyncKind,
    };
    use crate::event::Event;
    use crate::hardware::MemcpyKind;
    use crate::kernel::{launch_kernel, Kernel};
    use crate::lock::lock;
    use crate::memory::{malloc, memcpy_async, memset_async, HostBuffer};
    use crate::queue::MIN_WORK_NS;
    use crate::stream::Stream;
    use crate::test_support::exclusive;
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    /// Starts a clean session of `kinds` and returns what it recorded once `f` has run.
    fn session(kinds: Kinds, f: impl FnOnce()) -> Records {
        enable_recording(kinds);
        f();
        disable_recording();
        drain_records()
    }

    fn runtime_by_correlation(records: &Records) -> HashMap<u64, &RuntimeRecord> {
        let map: HashMap<_, _> = records
            .runtime
            .iter()
            .map(|r| (r.correlation_id, r))
            .collect();
        assert_eq!(
            map.len(),
            records.runtime.len(),
            "correlation ids are unique"
        );
        map
    }

    #[test]
    fn device_records_link_to_their_launch_and_lie_within_it() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let n = 16;
        let host = HostBuffer::from_f32s(&vec![1.0; n * n]);
        let (a, out) = (malloc(0, n * n * 4).unwrap(), malloc(0, n * n * 4).unwrap());
        let event = Event::new();
        let records = session(Kinds::ALL, || {
            memcpy_async(&a, &host, n * n * 4, &stream).unwrap();
            memset_async(&out, 0, 64, &stream).unwrap();
            let matmul = Kernel::Matmul {
                a: a.clone(),
                b: a.clone(),
                out: out.clone(),
                n,
            };
            launch_kernel(matmul, &stream).unwrap();
            event.record(&stream);
            memcpy_async(&host, &out, n * n * 4, &stream).unwrap();
            stream.synchronize();
        });
        assert_eq!(records.dropped, 0);
        let names: Vec<_> = records.runtime.iter().map(|r| r.api.name()).collect();
        assert_eq!(
            names,
            [
                "orMemcpyAsync",
                "orMemsetAsync",
                "orLaunchKernel",
                "orEventRecord",
                "orMemcpyAsync",
                "orStreamSynchronize"
            ]
        );
        let ids: Vec<_> = records.runtime.iter().map(|r| r.correlation_id).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids increase in call order"
        );
        let tid = crate::sys::thread_id();
        assert!(records
            .runtime
            .iter()
            .all(|r| r.thread_id == tid && r.start_ns <= r.end_ns));

        let sync_end = records.runtime.last().unwrap().end_ns;
        let launches = runtime_by_correlation(&records);
        let names: Vec<_> = records.device.iter().map(|d| &*d.name).collect();
        assert_eq!(
            names,
            [
                "Memcpy HtoD",
                "Memset",
                "matmul_16x16",
                "Event Record",
                "Memcpy DtoH",
                "Stream Sync"
            ]
        );
        for (device, runtime) in records.device.iter().zip(&records.runtime) {
            assert_eq!(launches[&device.correlation_id], runtime);
            assert_eq!((device.device, device.stream), (0, Some(stream.id())));
            assert!(
                runtime.start_ns <= device.start_ns,
                "{device:?} starts before its launch"
            );
            assert!(device.start_ns <= device.end_ns && device.end_ns <= sync_end);
        }
        // The host's wait overlaps the work it waits for; the stream's own work does not.
        for pair in records.device[..5].windows(2) {
            assert!(
                pair[0].end_ns <= pair[1].start_ns,
                "in order, one at a time"
            );
        }
        assert_eq!(
            records.device[0].activity,
            DeviceActivity::Memcpy {
                kind: MemcpyKind::HostToDevice,
                bytes: 1024
            }
        );
        assert_eq!(
            records.device[1].activity,
            DeviceActivity::Memset {
                value: 0,
                bytes: 64
            }
        );
        let matmul = Kernel::Matmul {
            a: a.clone(),
            b: a.clone(),
            out,
            n,
        };
        assert_eq!(
            records.device[2].activity,
            DeviceActivity::Kernel {
                launch: matmul.launch_dims(),
                metrics: matmul.metrics()
            }
        );
    }

    #[test]
    fn the_smallest_kernels_copies_and_fills_last_at_least_the_least_device_time() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let host = HostBuffer::from_f32s(&[1.0; 4]);
        let buf = malloc(0, 16).unwrap();
        let event = Event::new();
        let records = session(Kinds::ALL, || {
            for _ in 0..20 {
                memcpy_async(&buf, &host, 16, &stream).unwrap();
                memset_async(&buf, 0, 16, &stream).unwrap();
                launch_kernel(
                    Kernel::Fill {
                        out: buf.clone(),
                        value: 1.0,
                    },
                    &stream,
                )
                .unwrap();
                event.record(&stream);
            }
            stream.synchronize();
        });
        let mut lasted: HashMap<&str, i64> = HashMap::new();
        for d in &records.device {
            let least = lasted.entry(&d.name).or_insert(i64::MAX);
            *least = (*least).min(d.end_ns - d.start_ns);
        }
        for name in ["Memcpy HtoD", "Memset", "fill_f32"] {
            let least = lasted[name];
            assert!(least >= MIN_WORK_NS, "{name}: {least} ns");
        }
    }

    #[test]
    fn synchronization_records_name_what_they_waited_for() {
        let _guard = exclusive();
        let set_device = |d| set_device(d).unwrap();
        let (producer, consumer) = (Stream::new(1).unwrap(), Stream::new(1).unwrap());
        let event = Event::new();
        let records = session(Kinds::RUNTIME | Kinds::SYNC, || {
            launch_kernel(Kernel::Busy(Duration::from_micros(200)), &producer).unwrap();
            event.record(&producer);
            consumer.wait_event(&event);
            event.synchronize();
            set_device(1);
            device_synchronize().unwrap();
            set_device(0);
        });
        let runtime = runtime_by_correlation(&records);
        let record_call = records
            .runtime
            .iter()
            .find(|r| r.api == RuntimeApi::EventRecord);
        let origin = EventOrigin {
            stream: producer.id(),
            record_correlation_id: Some(record_call.unwrap().correlation_id),
        };
        let syncs: Vec<_> = records
            .device
            .iter()
            .map(|d| (runtime[&d.correlation_id].api, d.stream, d.activity.clone()))
            .collect();
        let sync = |kind, waited| DeviceActivity::Sync { kind, waited };
        assert_eq!(syncs.len(), 3, "{syncs:?}");
        for expected in [
            (
                RuntimeApi::StreamWaitEvent,
                Some(consumer.id()),
                sync(SyncKind::StreamWaitEvent, Some(origin)),
            ),
            (
                RuntimeApi::EventSynchronize,
                Some(producer.id()),
                sync(SyncKind::EventSynchronize, Some(origin)),
            ),
            (
                RuntimeApi::DeviceSynchronize,
                None,
                sync(SyncKind::DeviceSynchronize, None),
            ),
        ] {
            assert!(
                syncs.contains(&expected),
                "{expected:?} missing from {syncs:?}"
            );
        }
        assert!(records.device.iter().all(|d| d.device == 1));
    }

    #[test]
    fn external_correlation_stacks_are_per_thread_and_nest() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let launch = || launch_kernel(Kernel::Busy(Duration::ZERO), &stream).unwrap();
        let records = session(Kinds::RUNTIME | Kinds::KERNEL, || {
            push_external_correlation(ExternalKind::Default, 10);
            push_external_correlation(ExternalKind::User, 20);
            launch();
            push_external_correlation(ExternalKind::Default, 11);
            launch();
            std::thread::scope(|s| {
                s.spawn(|| {
                    push_external_correlation(ExternalKind::Default, 30);
                    launch();
                    assert_eq!(pop_external_correlation(ExternalKind::Default), Some(30));
                });
            });
            assert_eq!(pop_external_correlation(ExternalKind::Default), Some(11));
            launch();
            assert_eq!(pop_external_correlation(ExternalKind::Default), Some(10));
            assert_eq!(pop_external_correlation(ExternalKind::User), Some(20));
            assert_eq!(pop_external_correlation(ExternalKind::User), None);
            launch();
            stream.synchronize();
        });
        let ids = |default, user| ExternalIds { default, user };
        let seen: Vec<_> = records
            .runtime
            .iter()
            .filter(|r| r.api == RuntimeApi::LaunchKernel)
            .map(|r| r.external)
            .collect();
        assert_eq!(
            seen,
            [
                ids(Some(10), Some(20)),
                ids(Some(11), Some(20)),
                ids(Some(30), None),
                ids(Some(10), Some(20)),
                ids(None, None)
            ]
        );
        let runtime = runtime_by_correlation(&records);
        assert_eq!(records.device.len(), seen.len());
        for device in &records.device {
            assert_eq!(device.external, runtime[&device.correlation_id].external);
        }
    }

    #[test]
    fn concurrent_launches_are_recorded_exactly_once() {
        let _guard = exclusive();
        const THREADS: u64 = 4;
        const CALLS: usize = 40;
        let streams = [Stream::new(0).unwrap(), Stream::new(0).unwrap()];
        let records = session(Kinds::ALL, || {
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let stream = &streams[t as usize % 2];
                    s.spawn(move || {
                        let buf = malloc(0, 256).unwrap();
                        let host = HostBuffer::zeroed(256);
                        let event = Event::new();
                        push_external_correlation(ExternalKind::Default, 1000 + t);
                        for i in 0..CALLS {
                            match i % 4 {
                                0 => launch_kernel(
                                    Kernel::Fill {
                                        out: buf.clone(),
                                        value: 1.0,
                                    },
                                    stream,
                                )
                                .unwrap(),
                                1 => memset_async(&buf, 7, 256, stream).unwrap(),
                                2 => memcpy_async(&host, &buf, 256, stream).unwrap(),
                                _ => event.record(stream),
                            }
                        }
                        pop_external_correlation(ExternalKind::Default);
                    });
                }
            });
            streams.iter().for_each(Stream::synchronize);
        });
        assert_eq!(records.dropped, 0);
        let runtime = runtime_by_correlation(&records);
        let launches: Vec<_> = records
            .runtime
            .iter()
            .filter(|r| r.external.default.is_some())
            .collect();
        assert_eq!(launches.len(), THREADS as usize * CALLS);
        let work: Vec<_> = records
            .device
            .iter()
            .filter(|d| d.external.default.is_some())
            .collect();
        assert_eq!(work.len(), launches.len());
        let linked: HashSet<_> = work.iter().map(|d| d.correlation_id).collect();
        assert_eq!(linked.len(), work.len(), "one device record per launch");
        let mut tids: HashMap<u64, HashSet<i64>> = HashMap::new();
        for device in &work {
            let launch = runtime[&device.correlation_id];
            let thread = device.external.default.unwrap() - 1000;
            assert_eq!(launch.external, device.external);
            assert_eq!(device.stream, Some(streams[thread as usize % 2].id()));
            assert!(launch.start_ns <= device.start_ns);
            tids.entry(thread).or_default().insert(launch.thread_id);
        }
        assert_eq!(tids.len(), THREADS as usize);
        assert!(
            tids.values().all(|t| t.len() == 1),
            "each thread records its own tid"
        );
        for stream in &streams {
            let mut on_stream: Vec<_> = work
                .iter()
                .filter(|d| d.stream == Some(stream.id()))
                .collect();
            assert_eq!(on_stream.len(), 2 * CALLS);
            on_stream.sort_by_key(|d| d.start_ns);
            assert!(on_stream.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
        }
    }

    #[test]
    fn kinds_select_what_is_recorded() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 64).unwrap();
        let records = session(Kinds::KERNEL, || {
            memset_async(&buf, 1, 64, &stream).unwrap();
            launch_kernel(
                Kernel::Fill {
                    out: buf.clone(),
                    value: 0.0,
                },
                &stream,
            )
            .unwrap();
            stream.synchronize();
        });
        assert!(records.runtime.is_empty());
        assert_eq!(records.device.len(), 1);
        assert_eq!(records.device[0].name, "fill_f32");
        assert!(Kinds::ALL.contains(Kinds::SYNC | Kinds::EVENT));
        assert!(!Kinds::KERNEL.contains(Kinds::ALL));
        assert!(Kinds::NONE.is_empty());
    }

    #[test]
    fn disabled_recording_records_nothing() {
        let _guard = exclusive();
        let records = session(Kinds::NONE, || {
            let stream = Stream::new(0).unwrap();
            launch_kernel(Kernel::Busy(Duration::ZERO), &stream).unwrap();
            Event::new().query();
            stream.synchronize();
        });
        assert_eq!(records, Records::default());
        assert_eq!(recording_kinds(), Kinds::NONE);
    }

    #[test]
    fn work_in_flight_records_after_disable_but_not_into_a_new_session() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 16).unwrap();
        let fill = || Kernel::Fill {
            out: buf.clone(),
            value: 1.0,
        };
        // Holding the buffer's lock keeps the fill in flight across the state change.
        let held = lock(buf.bytes());
        enable_recording(Kinds::KERNEL);
        launch_kernel(fill(), &stream).unwrap();
        disable_recording();
        drop(held);
        stream.synchronize();
        assert_eq!(
            drain_records().device.len(),
            1,
            "launched while enabled: kept"
        );

        let held = lock(buf.bytes());
        enable_recording(Kinds::KERNEL);
        launch_kernel(fill(), &stream).unwrap();
        enable_recording(Kinds::KERNEL);
        drop(held);
        stream.synchronize();
        disable_recording();
        assert!(
            drain_records().device.is_empty(),
            "launched in an earlier session: discarded"
        );
    }

    #[test]
    fn records_beyond_the_budget_are_counted_not_kept() {
        let _guard = exclusive();
        set_record_budget(5);
        let records = session(Kinds::ALL, || {
            let event = Event::new();
            for _ in 0..12 {
                event.query();
            }
        });
        set_record_budget(DEFAULT_RECORD_BUDGET);
        assert_eq!((records.runtime.len(), records.dropped), (5, 7));
        assert!(records
            .runtime
            .iter()
            .all(|r| r.api == RuntimeApi::EventQuery));
        enable_recording(Kinds::ALL);
        disable_recording();
        assert_eq!(drain_records().dropped, 0, "enable resets the count");
    }
}
