//! Reading a trace file for a command: its key averages, streamed (read whole when grouping
//! by stack), the rank it claims, every item for another analysis on the same read (the
//! report's), and the note on what the reader skipped.

use std::io;
use std::path::Path;

use omniprof_analysis::claimed_rank;
use omniprof_analysis::{key_averages, KeyAverages, KeyAveragesBuilder, KeyAveragesOptions};
use omniprof_read::{ArgFilter, ReadError, ReadStats, TraceReader};
use omniprof_trace::keys::metadata;
use omniprof_trace::Trace;
use omniprof_trace::{Limits, TraceItem};

use crate::progress::read_file;

/// One trace summarized: its rows, how the read went, and the rank it claims.
pub(crate) struct TraceSummary {
    pub(crate) summary: KeyAverages,
    pub(crate) outcome: Result<ReadStats, ReadError>,
    /// `distributedInfo.rank`.
    pub(crate) rank: Option<u64>,
}

/// The summary of a trace file (`-`: standard input); see [`summarize_file`].
pub(crate) fn key_averages_of(
    path: &Path,
    options: KeyAveragesOptions,
    limits: Limits,
) -> (KeyAverages, Result<ReadStats, ReadError>) {
    let TraceSummary {
        summary, outcome, ..
    } = summarize_file(path, options, limits);
    (summary, outcome)
}

/// The summary of a trace file (`-`: standard input), streamed (read whole when grouping
/// by stack, which needs every event of a thread), with a progress bar on big files; on
/// error, the summary of what was read before, and the error naming the file.
///
/// A streamed file is read again when its builder asks
/// ([`ReadAgain`](omniprof_analysis::ReadAgain): an item came too late for the
/// ops it had folded, such as the profiler's span that PyTorch and omniprof write last);
/// standard input, which cannot be read twice, keeps every host op instead.
pub(crate) fn summarize_file(
    path: &Path,
    options: KeyAveragesOptions,
    limits: Limits,
) -> TraceSummary {
    summarize_file_watching(path, options, limits, &[], &mut |_| {})
}

/// [`summarize_file`], with every item read also given to `watch` (`None` before a file
/// is read again: what it gathered is to be dropped), read with the args `extra_args` names
/// besides the summary's (which reads only those it needs, for speed); one read serves the
/// summary and another analysis (`report`).
pub(crate) fn summarize_file_watching(
    path: &Path,
    options: KeyAveragesOptions,
    limits: Limits,
    extra_args: &[&str],
    watch: &mut dyn FnMut(Option<&TraceItem>),
) -> TraceSummary {
    let stdin = path.as_os_str() == "-";
    let mut rank = None;
    let reader_of = |builder: &KeyAveragesBuilder| {
        let keys = builder
            .arg_keys()
            .into_iter()
            .chain(extra_args.iter().copied());
        TraceReader::new()
            .args(ArgFilter::Only(keys.map(String::from).collect()))
            .limits(limits)
    };
    let mut see = |item: &TraceItem, watch: &mut dyn FnMut(Option<&TraceItem>)| {
        if let TraceItem::Metadata(key, value) = item {
            if key == metadata::DISTRIBUTED_INFO {
                rank = claimed_rank(value);
            }
        }
        watch(Some(item));
    };
    if options.group_by_stack_n > 0 {
        let reader = reader_of(&KeyAveragesBuilder::new(options.clone()));
        let mut trace = Trace::new(0, 0);
        let mut read = |input: &mut dyn io::Read| {
            let outcome = reader.read(input);
            trace = outcome.trace;
            match outcome.error {
                None => Ok(outcome.stats),
                Some(e) => Err(e),
            }
        };
        let outcome = if stdin {
            read(&mut io::stdin().lock())
        } else {
            read_file(path, read)
        };
        // The items the stream would have given, from the trace read whole.
        for (key, value) in &trace.metadata {
            watch(Some(&TraceItem::Metadata(key.clone(), value.clone())));
        }
        for a in &trace.activities {
            watch(Some(&TraceItem::Activity(a.clone())));
        }
        for series in trace.counters.series() {
            for sample in &series.samples {
                watch(Some(&TraceItem::Counter(
                    series.track.clone(),
                    sample.clone(),
                )));
            }
        }
        watch(Some(&TraceItem::Window(trace.window)));
        let rank = trace
            .metadata
            .iter()
            .find(|(k, _)| k == metadata::DISTRIBUTED_INFO)
            .and_then(|(_, v)| claimed_rank(v));
        return TraceSummary {
            summary: key_averages(&trace, &options),
            outcome,
            rank,
        };
    }
    let mut builder = if stdin {
        KeyAveragesBuilder::keeping_every_op(options)
    } else {
        KeyAveragesBuilder::new(options)
    };
    // At most three reads: the last builder keeps every op, which always finishes.
    loop {
        let outcome = if stdin {
            reader_of(&builder).stream(io::stdin().lock(), |item| {
                see(&item, watch);
                builder.add_item(&item)
            })
        } else {
            read_file(path, |reader| {
                reader_of(&builder).stream(reader, |item| {
                    see(&item, watch);
                    builder.add_item(&item)
                })
            })
        };
        match builder.finish() {
            Ok(summary) => {
                return TraceSummary {
                    summary,
                    outcome,
                    rank,
                }
            }
            Err(again) => {
                log::debug!("{}: {again}", path.display());
                builder = again.builder();
                watch(None);
            }
        }
    }
}

/// Says on standard error how many events were skipped, and why.
pub(crate) fn report_skipped(stats: &ReadStats) {
    let reasons = [
        (stats.unknown_phase, "an unknown `ph`"),
        (stats.unknown_category, "an unknown `cat`"),
        (stats.unknown_metadata, "unknown metadata"),
        (stats.unsupported_id, "a non-integer pid or tid"),
        (stats.unmatched_flow, "a flow with no event"),
        (
            stats.foreign_packets,
            "a Perfetto packet of no kind the model holds",
        ),
        (
            stats.sequence_overflow,
            "a Perfetto sequence past the cap on sequences held",
        ),
    ];
    let parts: Vec<String> = reasons
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} with {why}"))
        .collect();
    if !parts.is_empty() {
        eprintln!(
            "note: skipped {} of {} events ({})",
            stats.skipped(),
            stats.events,
            parts.join(", ")
        );
    }
    if stats.too_deep_args > 0 {
        eprintln!(
            "note: skipped {} arg values nested deeper than {} levels",
            stats.too_deep_args,
            omniprof_trace::MAX_VALUE_DEPTH
        );
    }
    if stats.malformed_args > 0 {
        eprintln!(
            "note: skipped {} arg values whose JSON text does not parse",
            stats.malformed_args
        );
    }
    if stats.reserved_header_keys > 0 {
        eprintln!(
            "note: skipped {} header entries named as the JSON's own top-level keys",
            stats.reserved_header_keys
        );
    }
    if stats.dropped_interned > 0 {
        eprintln!(
            "note: dropped {} Perfetto interned strings past the {} MiB held; events naming \
             them lack that name or category",
            stats.dropped_interned,
            omniprof_read::INTERNED_BYTES_HELD >> 20
        );
    }
    if stats.dropped_tracks > 0 {
        eprintln!(
            "note: dropped {} Perfetto track descriptors past the {} held; events on those \
             tracks were skipped",
            stats.dropped_tracks,
            omniprof_read::TRACKS_HELD
        );
    }
    if stats.negative_durations > 0 {
        eprintln!(
            "note: read {} complete events with a negative `dur` as lasting 0",
            stats.negative_durations
        );
    }
    if stats.cut_slices > 0 {
        eprintln!(
            "note: cut {} Perfetto slices still open when {} were open or {} activities \
             waited for them: each ends at the latest time read then, marked unfinished",
            stats.cut_slices,
            omniprof_read::OPEN_HELD,
            omniprof_read::ENDED_HELD
        );
    }
}
