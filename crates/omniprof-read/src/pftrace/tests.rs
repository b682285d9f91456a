//! The Perfetto reader against the Perfetto writer: what one writes, the other reads back
//! into the trace the JSON reads into.

use super::*;
use crate::TraceReader;
use omniprof_test_support::crafted_pftrace::{
    instant, interned_instant, interned_name, len_field, packets, slice_begin, slice_end,
    thread_track, varint_field,
};
use omniprof_test_support::data::{launch_and_kernel, op, sample_trace};
use omniprof_trace::Trace;
use omniprof_trace::{write_chrome, write_perfetto};

/// A trace with what the writer maps: host ops nested on a thread, a launch and its kernel
/// with a flow whose id has two ends, a GPU user annotation, an instant, a counter, rows, a
/// span, metadata, and two overlapping ops (a sibling lane).
fn trace() -> Trace {
    use ActivityType::*;
    let mut mm = op("aten::mm", 7, 1_100_000, 1_500_000);
    mm.correlation = 3;
    mm.args.push((
        "Input Dims".into(),
        Value::List(vec![Value::List(vec![Value::Int(2)])]),
    ));
    mm.args
        .push(("nested".into(), Value::Map(vec![("k".into(), Value::Null)])));
    let (mut launch, mut k1) = launch_and_kernel();
    launch.linked_correlation = Some(3);
    k1.linked_correlation = Some(3);
    let mut k2 = k1.clone();
    k2.name = "gemm2".into();
    (k2.start_ns, k2.end_ns) = (1_450_000, 1_460_000);
    let annotation = Activity::new(GpuUserAnnotation, "step", 0, 5, 1_300_000, 1_460_000);
    let mut memory = Activity::new(CpuInstantEvent, "[memory]", 7, 7, 1_150_000, 1_150_000);
    memory.args.push(("Bytes".into(), Value::Int(-64)));
    let mut t = sample_trace(vec![
        mm,
        op("aten::relu", 8, 1_100_000, 1_300_000),
        op("overlapping", 8, 1_200_000, 1_400_000),
        memory,
        launch,
        annotation,
        k1,
        k2,
    ]);
    t.trace_name = Some("t.pt.trace.json".into());
    t
}

fn pftrace(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    write_perfetto(t, &mut out).unwrap();
    out
}

fn json(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    write_chrome(t, "t.pt.trace.json", &mut out).unwrap();
    out
}

/// The activities sorted, so that two readers' orders compare.
fn sorted(mut acts: Vec<Activity>) -> Vec<Activity> {
    acts.sort_by(|a, b| (a.start_ns, b.end_ns, &*a.name).cmp(&(b.start_ns, a.end_ns, &*b.name)));
    acts
}

#[test]
fn a_pftrace_reads_back_into_the_trace_its_json_reads_into() {
    let t = trace();
    let (from_pf, pf_stats) = TraceReader::new()
        .read(&pftrace(&t)[..])
        .into_result()
        .unwrap();
    let (from_json, _) = TraceReader::new()
        .read(&json(&t)[..])
        .into_result()
        .unwrap();
    assert_eq!(pf_stats.skipped(), 0, "{pf_stats:?}");
    assert_eq!(
        sorted(from_pf.activities.clone()),
        sorted(from_json.activities.clone())
    );
    assert_eq!(
        sorted(from_pf.activities.clone()),
        sorted(t.activities.clone())
    );
    assert_eq!(from_pf.spans, from_json.spans);
    assert_eq!(from_pf.metadata, from_json.metadata);
    assert_eq!(from_pf.device_properties, from_json.device_properties);
    assert_eq!(from_pf.trace_name, from_json.trace_name);
    assert_eq!(from_pf.window, t.window);
    assert_eq!(from_pf.processes, t.processes);
    assert_eq!(from_pf.threads, t.threads);
    assert_eq!(from_pf.counters.series(), from_json.counters.series());
}

#[test]
fn the_whole_session_report_reads_back_from_a_pftrace() {
    use omniprof_trace::{
        BackendCall, BackendFailure, Contribution, FailureKind, ScopeProfiling,
        UnavailablePerfEvent,
    };
    let mut t = trace();
    let report = &mut t.health;
    report.stub_errors = Some(2);
    report.stub_error_messages = vec!["begin: no device".into()];
    report.unavailable_perf_events = vec![UnavailablePerfEvent {
        name: "cycles".into(),
        reason: "Permission denied (os error 13)".into(),
    }];
    report.scope_profiler = Some(ScopeProfiling {
        metrics: vec!["flops".into()],
        max_scopes: 10,
        kernels: 2,
    });
    report.plugin_errors = vec!["libx.so: not a Kineto plugin".into()];
    report.dropped_events = Some(3);
    report.out_of_window_events = Some(4);
    report.backends = vec![Contribution {
        name: "openreg".into(),
        activities: 12,
        out_of_window: 2,
        before_ns: 0,
        after_ns: 300,
    }];
    report.backend_errors = vec![BackendFailure {
        backend: "a".into(),
        kind: FailureKind::Failed {
            call: BackendCall::ProcessTrace,
            reason: "no device".into(),
        },
    }];
    report.refused_links = Some(5);
    let read = TraceReader::new().read(&pftrace(&t)[..]);
    assert!(
        read.health_problems.is_empty(),
        "{:?}",
        read.health_problems
    );
    assert_eq!(read.into_trace().unwrap().health, t.health);
}

#[test]
fn activities_come_in_the_order_their_slices_began() {
    let t = trace();
    let mut names = Vec::new();
    TraceReader::new()
        .stream(&pftrace(&t)[..], |item| {
            if let TraceItem::Activity(a) = item {
                names.push(a.name.to_string());
            }
        })
        .unwrap();
    assert_eq!(
        names,
        [
            "aten::mm",
            "aten::relu",
            "[memory]",
            // Both start at 1.2 ms: the longer first, as the writer wrote them.
            "overlapping",
            "cudaLaunchKernel",
            "step",
            "gemm",
            "gemm2"
        ]
    );
}

#[test]
fn a_cut_pftrace_is_an_error_at_its_last_packet_and_keeps_what_came_before() {
    let bytes = pftrace(&trace());
    let cut = &bytes[..bytes.len() - 3];
    let outcome = TraceReader::new().read(cut);
    let e = outcome.error.expect("a cut trace");
    let (index, offset) = e.location.packet.expect("the packet is named");
    assert!(offset < cut.len() as u64 && index > 10, "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("packet {index} (byte {offset}): ")),
        "{e}"
    );
    assert_eq!(outcome.trace.activities.len(), 8);
}

#[test]
fn packets_that_map_to_nothing_are_counted() {
    // A `TracePacket` with only an ftrace bundle (field 1), then a slice on a track never
    // described.
    let mut bytes = vec![0x0a, 4, 0x0a, 2, 0x08, 1];
    let event = [0x50, 1, 0x5a, 4, 0x48, 1, 0x58, 9];
    bytes.extend([0x0a, event.len() as u8]);
    bytes.extend(event);
    let (trace, stats) = TraceReader::new().read(&bytes[..]).into_result().unwrap();
    assert!(trace.activities.is_empty());
    assert_eq!((stats.foreign_packets, stats.unsupported_id), (1, 1));
    assert_eq!(stats.skipped(), 2);
}

#[test]
fn json_text_and_protobuf_packets_are_told_apart_by_their_first_bytes() {
    for json in [
        &b"{\"traceEvents\": []}"[..],
        b"\n{\"a\": 1}",
        b"\n\n  [\n{",
        b"\n[]",
        b"\n[1]",
    ] {
        assert!(!is_pftrace(json), "{:?}", String::from_utf8_lossy(json));
    }
    // Packets of 9, 10, 13 and 32 bytes (their length a whitespace byte), 91 and 123 bytes
    // (`[` and `{`), each followed by a field key (`trusted_packet_sequence_id`, 0x50).
    for len in [9u8, 10, 13, 32, 91, 123] {
        assert!(is_pftrace(&[0x0a, len, 0x50, 1]), "{len}");
    }
    assert!(is_pftrace(&pftrace(&trace())));
    assert!(!is_pftrace(b"\n  "));
}

/// A debug annotation named `name` holding an int nested in `levels` arrays, encoded
/// without recursion.
fn nested_annotation(name: &str, levels: usize) -> Vec<u8> {
    let mut value = varint_field(4, 7);
    for _ in 0..levels {
        value = len_field(12, &value);
    }
    [len_field(10, name.as_bytes()), value].concat()
}

#[test]
fn an_annotation_nested_too_deep_is_skipped_and_counted_and_the_rest_is_read() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let bytes = packets(&[
        thread_track(1, 1, 1),
        instant(
            1,
            10,
            "deep",
            &[
                nested_annotation("deep", 100_000),
                nested_annotation("edge", omniprof_trace::MAX_VALUE_DEPTH),
                nested_annotation("over", omniprof_trace::MAX_VALUE_DEPTH + 1),
                [len_field(10, b"legacy"), len_field(9, deep.as_bytes())].concat(),
                [len_field(10, b"bad"), len_field(9, b"{")].concat(),
                [len_field(10, b"kept"), varint_field(4, 5)].concat(),
            ],
        ),
        instant(1, 20, "after", &[]),
    ]);
    let (trace, stats) = TraceReader::new().read(&bytes[..]).into_result().unwrap();
    let names: Vec<_> = trace.activities.iter().map(|a| &*a.name).collect();
    assert_eq!(names, ["deep", "after"]);
    let keys: Vec<_> = trace.activities[0].args.iter().map(|(k, _)| &**k).collect();
    assert_eq!(keys, ["edge", "kept"]);
    assert_eq!(
        trace.activities[0].arg("edge").unwrap().to_json(),
        format!("{}7{}", "[".repeat(32), "]".repeat(32))
    );
    assert_eq!((stats.too_deep_args, stats.malformed_args), (3, 1));
}

#[test]
fn header_annotations_named_as_the_jsons_own_keys_are_skipped_and_counted() {
    let spans = len_field(60, &[varint_field(1, 2), len_field(2, b"Spans")].concat());
    let entry =
        |key: &str, value: u64| [len_field(10, key.as_bytes()), varint_field(4, value)].concat();
    let bytes = packets(&[
        spans,
        instant(
            2,
            30,
            "Record Window End",
            &[
                entry("traceEvents", 1),
                entry("schemaVersion", 2),
                entry("displayTimeUnit", 3),
                entry("metadata:traceName", 4),
                entry("rank", 5),
            ],
        ),
    ]);
    let (trace, stats) = TraceReader::new().read(&bytes[..]).into_result().unwrap();
    assert_eq!(trace.metadata, [("rank".to_string(), Value::Int(5))]);
    assert_eq!(stats.reserved_header_keys, 4);
    // The JSON written from it reads back.
    let (again, _) = TraceReader::new()
        .read(&json(&trace)[..])
        .into_result()
        .unwrap();
    assert_eq!(again.metadata, trace.metadata);
}

#[test]
fn metadata_named_as_the_pftrace_headers_own_keys_reads_back() {
    let mut t = trace();
    let own = [
        ("windowStartNanoseconds", 5),
        ("metadata:windowStartNanoseconds", 6),
        ("metadata:x", 7),
    ];
    for (key, value) in own {
        t.metadata.push((key.to_string(), Value::Int(value)));
    }
    let (read, stats) = TraceReader::new()
        .read(&pftrace(&t)[..])
        .into_result()
        .unwrap();
    assert_eq!(read.metadata, t.metadata);
    assert_eq!(read.window, t.window);
    assert_eq!(stats.reserved_header_keys, 0);
}

#[test]
fn pids_and_tids_beyond_32_bits_read_back_as_they_were() {
    use ActivityType::*;
    let mut t = Trace::new(0, 1_000);
    let ids = [
        (1, 1),
        (4_294_967_297, 1),
        (i64::MAX, i64::MAX),
        (-3, 4_294_967_298),
    ];
    for (i, &(pid, tid)) in ids.iter().enumerate() {
        let name = format!("op{i}");
        t.activities
            .push(Activity::new(CpuOp, name.as_str(), pid, tid, 10, 20));
        t.processes.push(omniprof_trace::ProcessRow {
            pid,
            name: name.clone(),
            label: String::new(),
            sort_index: pid,
        });
        t.threads.push(omniprof_trace::ThreadRow {
            pid,
            tid,
            name,
            sort_index: tid,
        });
    }
    // A device keeps its index.
    t.activities
        .push(Activity::new(ConcurrentKernel, "k", 2, 5, 30, 40));
    let (read, _) = TraceReader::new()
        .read(&pftrace(&t)[..])
        .into_result()
        .unwrap();
    assert_eq!(sorted(read.activities), sorted(t.activities));
    assert_eq!(read.processes, t.processes);
    assert_eq!(read.threads, t.threads);
}

#[test]
fn sequences_past_the_cap_are_skipped_and_counted_and_the_kept_ones_read() {
    let n = SEQUENCES_HELD as u64 + 1000;
    let mut all = vec![thread_track(1, 1, 1)];
    for seq in 1..=n {
        all.push(interned_name(seq, 1, &format!("op{seq}")));
        all.push(interned_instant(seq, 1, seq, 1));
    }
    let (trace, stats) = TraceReader::new()
        .read(&packets(&all)[..])
        .into_result()
        .unwrap();
    assert_eq!(stats.sequence_overflow, 2000);
    assert_eq!(stats.skipped(), 2000);
    assert_eq!(stats.dropped_interned, 0);
    assert_eq!(trace.activities.len(), SEQUENCES_HELD);
    for (i, a) in trace.activities.iter().enumerate() {
        assert_eq!(
            (&*a.name, a.start_ns),
            (&*format!("op{}", i + 1), i as i64 + 1)
        );
    }
}

#[test]
fn track_descriptors_past_the_cap_are_dropped_and_counted_and_redescribing_adds_no_row() {
    let process = || {
        let p = [varint_field(1, 9), len_field(6, b"p")].concat();
        len_field(60, &[varint_field(1, 1), len_field(3, &p)].concat())
    };
    // Uuid 1 twice, as Perfetto describes a track again: one row.
    let mut all = vec![process(), process()];
    let last = TRACKS_HELD as u64 + 10;
    all.extend((2..=last).map(|uuid| thread_track(uuid, 1, uuid as i64)));
    all.push(instant(2, 5, "kept", &[]));
    all.push(instant(last, 6, "lost", &[]));
    let (trace, stats) = TraceReader::new()
        .read(&packets(&all)[..])
        .into_result()
        .unwrap();
    assert_eq!(stats.dropped_tracks, 10);
    assert_eq!(stats.unsupported_id, 1);
    let names: Vec<_> = trace.activities.iter().map(|a| &*a.name).collect();
    assert_eq!(names, ["kept"]);
    assert_eq!(trace.processes.len(), 1);
}

#[test]
fn a_slice_open_while_too_many_later_activities_ended_is_cut_unfinished_and_the_rest_keep_their_order(
) {
    let n = ENDED_HELD as u64 + 10;
    let mut all = vec![thread_track(1, 1, 1), slice_begin(1, 1, "open")];
    all.extend((0..n).map(|i| instant(1, 2 + i, "i", &[])));
    // The end that would have closed the cut slice closes nothing (and is no error).
    all.push(slice_end(1, n + 5));
    all.push(instant(1, n + 6, "last", &[]));
    let mut first = Vec::new();
    let mut count = 0;
    let mut last = None;
    let stats = TraceReader::new()
        .stream(&packets(&all)[..], |item| {
            if let TraceItem::Activity(a) = item {
                count += 1;
                if first.len() < 3 {
                    first.push(a.clone());
                }
                last = Some((a.name.to_string(), a.start_ns));
            }
        })
        .unwrap();
    assert_eq!((stats.cut_slices, stats.unsupported_id), (1, 0));
    // Cut when the (ENDED_HELD + 1)th instant ended, at its time.
    let open = &first[0];
    assert_eq!(
        (&*open.name, open.start_ns, open.end_ns),
        ("open", 1, 2 + ENDED_HELD as i64)
    );
    assert_eq!(open.arg(arg::FINISHED), Some(&Value::Bool(false)));
    let next: Vec<_> = first[1..].iter().map(|a| (&*a.name, a.start_ns)).collect();
    assert_eq!(next, [("i", 2), ("i", 3)]);
    assert_eq!(count, n + 2);
    assert_eq!(last, Some(("last".to_string(), n as i64 + 6)));
}

#[test]
fn open_slices_past_the_cap_cut_the_oldest_and_each_end_closes_its_own_slice() {
    let n = OPEN_HELD as u64 + 2;
    let end_at = 10 * n;
    let mut all = vec![thread_track(1, 1, 1)];
    all.extend((0..n).map(|k| slice_begin(1, 1 + k, &format!("b{k}"))));
    all.extend((0..n).map(|j| slice_end(1, end_at + j)));
    let (trace, stats) = TraceReader::new()
        .read(&packets(&all)[..])
        .into_result()
        .unwrap();
    assert_eq!((stats.cut_slices, stats.unsupported_id), (2, 0));
    assert_eq!(trace.activities.len() as u64, n);
    for (k, a) in trace.activities.iter().enumerate() {
        let k = k as u64;
        assert_eq!((&*a.name, a.start_ns), (&*format!("b{k}"), 1 + k as i64));
        let (end, finished) = match k {
            // Cut as the 2^16 + 1st and 2^16 + 2nd began, at their times.
            0 | 1 => (1 + OPEN_HELD as u64 + k, Some(&Value::Bool(false))),
            _ => (end_at + (n - 1 - k), None),
        };
        assert_eq!(
            (a.end_ns, a.arg(arg::FINISHED)),
            (end as i64, finished),
            "b{k}"
        );
    }
}

#[test]
fn interned_strings_past_the_byte_cap_are_dropped_and_counted() {
    // Each counts for exactly 1 MiB: 32 fit.
    let long = |c: char| c.to_string().repeat((1 << 20) - INTERNED_ENTRY_BYTES);
    let fit = (INTERNED_BYTES_HELD >> 20) as u64;
    let mut all = vec![thread_track(1, 1, 1)];
    all.extend((1..=fit + 2).map(|iid| interned_name(1, iid, &long('a'))));
    // Interning an iid again gives up its old string's room first: it fits.
    all.push(interned_name(1, 1, &long('b')));
    all.extend((1..=fit + 2).map(|iid| interned_instant(1, 1, iid, iid)));
    let (trace, stats) = TraceReader::new()
        .read(&packets(&all)[..])
        .into_result()
        .unwrap();
    assert_eq!(stats.dropped_interned, 2);
    let lengths: Vec<_> = trace.activities.iter().map(|a| a.name.len()).collect();
    let mut expected = vec![(1 << 20) - INTERNED_ENTRY_BYTES; fit as usize];
    expected.extend([0, 0]);
    assert_eq!(lengths, expected);
    assert!(trace.activities[0].name.starts_with('b'));
}

#[test]
fn extra_flow_ids_past_the_cap_are_counted_as_unmatched() {
    // An `ac2g` flow (kind 2 in the top bits) with FLOWS_HELD + 3 extra ends (kind 3).
    let ids: Vec<u8> = (0..FLOWS_HELD as u64 + 4)
        .flat_map(|i| (if i == 0 { 2 << 62 | 5 } else { 3 << 62 | i }).to_le_bytes())
        .collect();
    let event = [
        varint_field(9, 1),
        varint_field(11, 1),
        len_field(22, b"cpu_op"),
        len_field(23, b"launch"),
        len_field(47, &ids),
    ]
    .concat();
    let bytes = packets(&[
        thread_track(1, 1, 1),
        [varint_field(8, 1), len_field(11, &event)].concat(),
        slice_end(1, 2),
    ]);
    let (trace, stats) = TraceReader::new().read(&bytes[..]).into_result().unwrap();
    assert_eq!(trace.activities.len(), 1);
    // The 3 past the cap at once, the FLOWS_HELD kept at the end (none of them ended).
    assert_eq!(stats.unmatched_flow, FLOWS_HELD as u64 + 3);
}
