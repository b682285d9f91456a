//! [`convert`]: traces to Parquet tables, each trace a part file in its rank's folder, each
//! trace streamed (read once, twice when the summary's builder asks for it, never held).
//!
//! A trace's files are written in hidden staging folders (`<table>/.pending-<n>/`, which
//! Spark and Hive readers skip) and moved to `<table>/rank=<N>/part-<k>.parquet` once it
//! was read, so that a trace that fails leaves nothing under a rank, and its rank, which a
//! trace's header may give after its events, is known before the files are placed.
//!
//! Several traces may claim one rank, as `omniprof summary` reads them (one per profiling
//! cycle): each is a part of the rank, `k` its place among the rank's traces, and its ids
//! continue the earlier parts' ([`IdShift`]). A trace whose rank came after its events had
//! its ids numbered from 0; when its rank has earlier parts it is read again with theirs.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use omniprof_analysis::{KeyAveragesBuilder, KeyAveragesOptions};
use omniprof_read::{ReadError, ReadStats};
use omniprof_trace::{Limits, TraceItem};

use crate::error::ParquetError;
use crate::rank_ids::{IdShift, RankIds};
use crate::schema::{Table, METADATA, OPS, RANK_PARTITION, TABLES};
use crate::table_writer::TableWriter;
use crate::trace_tables::{part_file, part_path, write_op, RankPending, RowCounts, TraceTables};

/// How traces are converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// A trace that cannot be read to its end (truncated, malformed) gives the rows read
    /// before the error, with a warning, instead of failing the conversion.
    pub partial: bool,
    /// The reader's limits on one event and the header.
    pub limits: Limits,
}

/// What one trace became.
#[derive(Debug)]
pub struct ConvertedTrace {
    /// The trace file.
    pub path: PathBuf,
    /// The rank its rows are under.
    pub rank: i64,
    /// What the reader read and skipped (`None` when an error cut the read short).
    pub stats: Option<ReadStats>,
    /// Rows written per table.
    pub rows: RowCounts,
    /// With [`ConvertOptions::partial`], the error that cut the trace short.
    pub error: Option<ReadError>,
}

/// Converts `traces` (files, read in this order) into Parquet tables under `out_dir`,
/// which must be new or empty: `out_dir/<table>/rank=<N>/part-<k>.parquet` per table and
/// trace, `k` the trace's place among its rank's traces, from 0. A trace's rank is its
/// `distributedInfo.rank`, which several traces may claim (one rank's profiling cycles, as
/// `omniprof summary` takes them): a later one's slice, instant and op ids continue the
/// earlier ones', so that ids stay unique within a rank. A trace without one claims none,
/// as in `omniprof summary`: it goes, once every trace was read, under its position in
/// `traces`, or when a trace claims that rank the first number no trace claims (said in a
/// warning). Another user's link at `out_dir` in a sticky world-writable directory (`/tmp`)
/// is not followed, as a trace's save would not follow it ([`ParquetError::OutputRefused`]).
///
/// Fails on the first trace that cannot be read (unless [`ConvertOptions::partial`]); the
/// traces converted before it stay.
pub fn convert(
    traces: &[PathBuf],
    out_dir: &Path,
    options: ConvertOptions,
) -> Result<Vec<ConvertedTrace>, ParquetError> {
    if traces.is_empty() {
        return Err(ParquetError::NoTrace);
    }
    crate::output_dir::prepare(out_dir)?;
    // Per rank a trace claimed: its parts so far, and where the next one's ids start.
    let mut ranks: HashMap<i64, (usize, RankIds)> = HashMap::new();
    let mut converted = Vec::with_capacity(traces.len());
    let mut rankless = Vec::new();
    for (position, path) in traces.iter().enumerate() {
        let staging = |t: Table| out_dir.join(t.name).join(format!(".pending-{position}"));
        for t in TABLES {
            let dir = staging(t);
            fs::create_dir_all(&dir).map_err(|e| ParquetError::io(&dir, e))?;
        }
        let start = |rank: i64| ranks.get(&rank).map_or(RankIds::default(), |r| r.1);
        let result = convert_one(path, &staging, &start, IdShift::default(), options).and_then(
            |(read, pending, ids)| match read.rank.map(start) {
                Some(known) if known != ids.start() => {
                    log::debug!("{}: its rank came after its events", path.display());
                    drop(pending);
                    convert_one(path, &staging, &start, IdShift::from(known), options)
                }
                _ => Ok((read, pending, ids)),
            },
        );
        let (mut trace, pending, ids) = match result {
            Ok(read) => read,
            Err(e) => {
                for t in TABLES {
                    // Best effort: the error being reported matters more than the cleanup.
                    let _ = fs::remove_dir_all(staging(t));
                }
                // The traces converted before it stay, those without a rank included.
                if let Err(placing) = place_rankless(out_dir, &mut converted, rankless, &ranks) {
                    log::warn!("{placing}");
                }
                return Err(e);
            }
        };
        match trace.rank {
            Some(rank) => {
                let (parts, next) = ranks.entry(rank).or_default();
                place(out_dir, position, &mut trace, pending, rank, *parts, true)?;
                *parts += 1;
                *next = ids.next();
            }
            None => rankless.push((converted.len(), position, pending)),
        }
        converted.push(trace);
    }
    place_rankless(out_dir, &mut converted, rankless, &ranks)?;
    Ok(converted
        .into_iter()
        .map(|t| ConvertedTrace {
            path: t.path,
            rank: t.rank.expect("every trace was placed under a rank"),
            stats: t.stats,
            rows: t.rows,
            error: t.error,
        })
        .collect())
}

/// A trace read into its staging folders, its rank `None` until placed when it claims none.
struct Read {
    path: PathBuf,
    rank: Option<i64>,
    stats: Option<ReadStats>,
    rows: RowCounts,
    error: Option<ReadError>,
}

/// Closes the trace's `metadata` file with its rank and moves its files from their
/// staging folders (`.pending-<position>`) to `rank=<rank>/part-<part>.parquet`.
fn place(
    out_dir: &Path,
    position: usize,
    trace: &mut Read,
    pending: RankPending,
    rank: i64,
    part: usize,
    from_trace: bool,
) -> Result<(), ParquetError> {
    let metadata_rows = pending.close(rank, part, from_trace)?;
    // In the tables' order: after slices, instants, counters and flows.
    let at = trace.rows.len().min(4);
    trace.rows.insert(at, (METADATA.name, metadata_rows));
    trace.rank = Some(rank);
    for t in TABLES {
        let staging = out_dir.join(t.name).join(format!(".pending-{position}"));
        let dir = out_dir
            .join(t.name)
            .join(format!("{RANK_PARTITION}={rank}"));
        fs::create_dir_all(&dir).map_err(|e| ParquetError::io(&dir, e))?;
        let file = dir.join(part_file(part));
        fs::rename(part_path(&staging), &file).map_err(|e| ParquetError::io(&file, e))?;
        fs::remove_dir(&staging).map_err(|e| ParquetError::io(&staging, e))?;
    }
    Ok(())
}

/// Places the traces without a rank (index in `converted`, position among the inputs),
/// once every claim is known: each under its position, or when a trace claims it the first
/// number that no trace claims nor another took.
fn place_rankless(
    out_dir: &Path,
    converted: &mut [Read],
    rankless: Vec<(usize, usize, RankPending)>,
    claimed: &HashMap<i64, (usize, RankIds)>,
) -> Result<(), ParquetError> {
    let mut taken: BTreeSet<i64> = claimed.keys().copied().collect();
    for (i, position, pending) in rankless {
        let trace = &mut converted[i];
        let place_rank = position as i64;
        let rank = if taken.contains(&place_rank) {
            let free = (0..).find(|n| !taken.contains(n)).unwrap_or(place_rank);
            log::warn!(
                "{}: no distributedInfo.rank; its rows are rank {free}, the first number no \
                 trace claims (its place among the traces, {position}, is claimed)",
                trace.path.display()
            );
            free
        } else {
            log::warn!(
                "{}: no distributedInfo.rank; its rows are rank {position}, its place among \
                 the traces",
                trace.path.display()
            );
            place_rank
        };
        taken.insert(rank);
        // The only trace of its rank: its first part.
        place(out_dir, position, trace, pending, rank, 0, false)?;
    }
    Ok(())
}

/// Reads one trace into its staging folders, its ids moved by `ids`, whose start is its
/// rank's (`start`) when the rank comes before the events; the ids it used.
fn convert_one(
    path: &Path,
    staging: &dyn Fn(Table) -> PathBuf,
    start: &dyn Fn(i64) -> RankIds,
    mut ids: IdShift,
    options: ConvertOptions,
) -> Result<(Read, RankPending, IdShift), ParquetError> {
    let mut tables = TraceTables::create(path, staging)?;
    let ops_path = part_path(&staging(OPS));
    let mut ops = TableWriter::create(OPS, &ops_path)?;
    let mut builder = KeyAveragesBuilder::new(KeyAveragesOptions::default());
    builder.list_events();
    let mut failed = None;
    let reader = builder.reader().limits(options.limits);
    let read = reader.stream_path(path, |item: TraceItem| {
        if failed.is_some() {
            return;
        }
        let before = builder.next_event_id();
        builder.add_item(&item);
        let op_id = (builder.next_event_id() > before).then_some(before);
        let written = tables.add(&item, op_id, &mut ids).and_then(|()| {
            builder
                .drain_events()
                .try_for_each(|e| write_op(&mut ops, &e, &mut ids))
        });
        if let (TraceItem::Metadata(..), Some(rank)) = (&item, tables.rank) {
            ids.start_at(start(rank));
        }
        if let Err(e) = written {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let (stats, error) = match read {
        Ok(stats) => (Some(stats), None),
        Err(e) if options.partial => {
            log::warn!("{e}; converted what was read before it (--partial)");
            (None, Some(e))
        }
        Err(e) => return Err(e.into()),
    };
    // At most three reads: the last builder keeps every op, which always finishes.
    let events = loop {
        match builder.finish_listing() {
            Ok((_, events)) => break events,
            Err(again) => {
                log::debug!("{}: {again}", path.display());
                builder = again.builder();
                builder.list_events();
                // The ops of the stopped read are dropped with their file.
                ops = TableWriter::create(OPS, &ops_path)?;
                let mut failed = None;
                let reader = builder.reader().limits(options.limits);
                let read = reader.stream_path(path, |item: TraceItem| {
                    if failed.is_some() {
                        return;
                    }
                    builder.add_item(&item);
                    if let Err(e) = builder
                        .drain_events()
                        .try_for_each(|e| write_op(&mut ops, &e, &mut ids))
                    {
                        failed = Some(e);
                    }
                });
                if let Some(e) = failed {
                    return Err(e);
                }
                // The same file fails where it failed before (reported then).
                if let (Err(e), false) = (read, options.partial) {
                    return Err(e.into());
                }
            }
        }
    };
    for e in &events {
        write_op(&mut ops, e, &mut ids)?;
    }
    let op_rows = ops.close()?;
    let rank = tables.rank;
    let (mut rows, pending) = tables.close()?;
    rows.push((OPS.name, op_rows));
    let read = Read {
        path: path.to_owned(),
        rank,
        stats,
        rows,
        error,
    };
    Ok((read, pending, ids))
}
