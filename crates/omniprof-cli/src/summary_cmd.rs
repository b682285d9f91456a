//! `omniprof summary TRACE`: PyTorch's `key_averages().table()` for any Kineto trace file,
//! plain or gzip, streamed: host ops are summed as soon as they are final, so that what is
//! kept is each thread's open ops and the rows, never the trace (a file whose profiler span
//! comes last is read twice; standard input, which cannot be, keeps every op). A trace
//! with memory records (`profile_memory`) or `flops` args (`with_flops`) gets PyTorch's
//! memory and FLOPs columns. An event or
//! a header past `--max-event-mb` / `--max-header-mb` stops the read at its offset, so memory
//! is bounded by those limits and the read windows, whatever the file holds. With
//! `--metrics`, the per-kernel hardware metrics instead (a scope-profiler trace of omniprof,
//! or PyTorch's `cuda_profiler_range` events); with `--counters`, each counter track's
//! statistics. With `--group-by-stack N`, rows also group by the first N frames of their
//! Python stack (PyTorch's `group_by_stack_n`), which takes the whole trace in memory (an
//! op's stack may come from the `python_function` events around it).
//!
//! Exit status: 0 when the whole file was read; 1 when it could not be read or is not a
//! valid trace (with `--partial`, after printing the rows of what was read before the
//! error); 2 for bad arguments.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_trace::analysis::counters::counter_stats;
use omniprof_trace::analysis::metrics::kernel_metrics;
use omniprof_trace::analysis::{
    key_averages, KeyAverages, KeyAveragesBuilder, KeyAveragesOptions, ReportOptions, SortKey,
};
use omniprof_trace::import::{Limits, ReadError, ReadStats, TraceReader};
use omniprof_trace::Trace;

use crate::output::print;
use crate::progress::read_file;

/// Summarize a trace as PyTorch's `key_averages().table()`.
#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// The trace: Kineto / PyTorch Chrome JSON, plain or gzip; `-` reads standard input.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Sort rows by this column, descending: cpu_time_total, self_cpu_time_total, cpu_time,
    /// device_time_total, self_device_time_total, device_time, count, cpu_memory_usage,
    /// self_cpu_memory_usage, device_memory_usage, self_device_memory_usage (cuda / xpu /
    /// privateuse1 in place of device also work), flops. Default: order of first appearance.
    #[arg(long, value_name = "KEY")]
    pub sort_by: Option<SortKey>,
    /// Print at most N rows; -1 for all (as PyTorch's `row_limit`).
    #[arg(
        long,
        value_name = "N",
        default_value = "100",
        allow_negative_numbers = true,
        value_parser = row_limit
    )]
    pub row_limit: RowLimit,
    /// Also group ops by their input shapes (`Input Dims`), adding an `Input Shapes` column.
    #[arg(long)]
    pub group_by_shapes: bool,
    /// Also group ops by the first N frames of their Python stack (PyTorch's
    /// `group_by_stack_n`: the `Call stack` arg, else the enclosing `python_function`
    /// events), adding a `Source Location` column; 0: not. Reads the whole trace into memory.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub group_by_stack: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// On a truncated or malformed file, print the rows of what was read before the error
    /// (the error is still reported, and the exit status is still 1).
    #[arg(long)]
    pub partial: bool,
    /// The largest event read, in MiB; a larger one stops the read at its offset.
    #[arg(long, value_name = "MIB", default_value_t = Limits::default().event_bytes >> 20)]
    pub max_event_mb: usize,
    /// The most the header (every top-level value but `traceEvents`, together) may take,
    /// in MiB.
    #[arg(long, value_name = "MIB", default_value_t = Limits::default().header_bytes >> 20)]
    pub max_header_mb: usize,
    /// Per kernel name: calls, total device time, and each hardware metric's sum, mean, min
    /// and max (from the scope profiler's kernel args, or `cuda_profiler_range` events).
    #[arg(long, conflicts_with_all = ["counters", "sort_by", "group_by_shapes", "group_by_stack"])]
    pub metrics: bool,
    /// Per counter track and value: samples, min, mean, max and time-weighted mean.
    #[arg(long, conflicts_with_all = ["sort_by", "group_by_shapes", "group_by_stack"])]
    pub counters: bool,
}

/// How the rows are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A text table (for `summary`, PyTorch's).
    Table,
    Csv,
    Json,
}

/// `--row-limit`: at most this many rows (`None`: all).
#[derive(Clone, Copy, Debug)]
pub struct RowLimit(pub Option<usize>);

/// Reads `--row-limit`: a count, or -1 for no limit; other negative numbers are refused.
pub fn row_limit(text: &str) -> Result<RowLimit, String> {
    match text.parse::<i64>() {
        Ok(-1) => Ok(RowLimit(None)),
        Ok(n) => usize::try_from(n)
            .map(|n| RowLimit(Some(n)))
            .map_err(|_| "a row count, or -1 for all rows".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// Runs `omniprof summary`.
pub fn run(args: &SummaryArgs) -> ExitCode {
    if args.metrics || args.counters {
        return run_whole(args);
    }
    let (summary, outcome) = summarize(args);
    let mut code = 0;
    match &outcome {
        Ok(stats) => report_skipped(stats),
        Err(e) => {
            eprintln!("error: {e}");
            code = 1;
        }
    }
    if outcome.is_ok() || args.partial {
        if summary.rows.is_empty() {
            eprintln!("note: no host ops or device activities to summarize");
        } else if args.group_by_shapes
            && summary
                .rows
                .iter()
                .all(|r| r.input_shapes.as_deref().is_none_or(|s| s == "[]"))
        {
            eprintln!(
                "note: the trace has no input shapes (`Input Dims`; PyTorch records them with \
                 record_shapes=True): every row's shapes are []"
            );
        }
        if args.group_by_stack > 0
            && !summary.rows.is_empty()
            && summary
                .rows
                .iter()
                .all(|r| r.stack.as_deref().is_none_or(<[_]>::is_empty))
        {
            eprintln!(
                "note: the trace has no Python stacks (no `Call stack` args or \
                 `python_function` events; PyTorch records them with with_stack=True): no \
                 row has a source location"
            );
        }
        let options = ReportOptions {
            sort_by: args.sort_by,
            row_limit: args.row_limit.0,
            ..Default::default()
        };
        let text = match args.format {
            Format::Table => summary.table(&options),
            Format::Csv => summary.csv(&options),
            Format::Json => summary.json(&options) + "\n",
        };
        if !print(&text) {
            code = 1;
        }
    }
    ExitCode::from(code)
}

/// `--metrics` and `--counters`, which read the whole trace (they need its counters and
/// every kernel's args).
fn run_whole(args: &SummaryArgs) -> ExitCode {
    let reader = TraceReader::new().limits(limits(args));
    let outcome = if args.trace.as_os_str() == "-" {
        reader.read(io::stdin().lock())
    } else {
        reader.read_path(&args.trace)
    };
    let mut code = 0;
    if let Some(e) = &outcome.error {
        eprintln!("error: {e}");
        code = 1;
        if !args.partial {
            return ExitCode::from(code);
        }
    }
    report_skipped(&outcome.stats);
    let trace = &outcome.trace;
    let text = if args.metrics {
        let summary = kernel_metrics(trace);
        if summary.rows.is_empty() {
            eprintln!("note: no kernel or cuda_profiler_range event carries metrics");
        }
        match args.format {
            Format::Table => summary.table(),
            Format::Csv => summary.csv(),
            Format::Json => summary.json() + "\n",
        }
    } else {
        let summary = counter_stats(trace);
        if summary.rows.is_empty() {
            eprintln!("note: the trace has no counters");
        }
        match args.format {
            Format::Table => summary.table(),
            Format::Csv => summary.csv(),
            Format::Json => summary.json() + "\n",
        }
    };
    if !print(&text) {
        code = 1;
    }
    ExitCode::from(code)
}

/// The read limits `--max-event-mb` and `--max-header-mb` set.
pub fn limits(args: &SummaryArgs) -> Limits {
    Limits {
        event_bytes: args.max_event_mb.saturating_mul(1 << 20),
        header_bytes: args.max_header_mb.saturating_mul(1 << 20),
    }
}

/// Streams the file into the summary; on error, the summary holds what was read before.
fn summarize(args: &SummaryArgs) -> (KeyAverages, Result<ReadStats, ReadError>) {
    let options = KeyAveragesOptions {
        group_by_input_shapes: args.group_by_shapes,
        group_by_stack_n: args.group_by_stack,
        ..Default::default()
    };
    key_averages_of(&args.trace, options, limits(args))
}

/// The summary of a trace file (`-`: standard input), streamed (read whole when grouping
/// by stack, which needs every event of a thread), with a progress bar on big files; on
/// error, the summary of what was read before, and the error naming the file.
///
/// A streamed file is read again when its builder asks
/// ([`ReadAgain`](omniprof_trace::analysis::ReadAgain): an item came too late for the
/// ops it had folded, such as the profiler's span that PyTorch and omniprof write last);
/// standard input, which cannot be read twice, keeps every host op instead.
pub fn key_averages_of(
    path: &Path,
    options: KeyAveragesOptions,
    limits: Limits,
) -> (KeyAverages, Result<ReadStats, ReadError>) {
    let stdin = path.as_os_str() == "-";
    if options.group_by_stack_n > 0 {
        let reader = KeyAveragesBuilder::new(options.clone())
            .reader()
            .limits(limits);
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
        return (key_averages(&trace, &options), outcome);
    }
    let mut builder = if stdin {
        KeyAveragesBuilder::keeping_every_op(options)
    } else {
        KeyAveragesBuilder::new(options)
    };
    // At most three reads: the last builder keeps every op, which always finishes.
    loop {
        let outcome = if stdin {
            builder
                .reader()
                .limits(limits)
                .stream(io::stdin().lock(), |item| builder.add_item(&item))
        } else {
            read_file(path, |reader| {
                builder
                    .reader()
                    .limits(limits)
                    .stream(reader, |item| builder.add_item(&item))
            })
        };
        match builder.finish() {
            Ok(summary) => return (summary, outcome),
            Err(again) => {
                log::debug!("{}: {again}", path.display());
                builder = again.builder();
            }
        }
    }
}

/// Says on standard error how many events were skipped, and why.
pub fn report_skipped(stats: &ReadStats) {
    let reasons = [
        (stats.unknown_phase, "an unknown `ph`"),
        (stats.unknown_category, "an unknown `cat`"),
        (stats.unknown_metadata, "unknown metadata"),
        (stats.unsupported_id, "a non-integer pid or tid"),
        (stats.unmatched_flow, "a flow with no event"),
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
            omniprof_trace::value::MAX_DEPTH
        );
    }
}
