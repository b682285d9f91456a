//! `omniprof summary TRACE`: PyTorch's `key_averages().table()` for any Kineto trace file,
//! plain or gzip, streamed: host ops are summed as soon as they are final, so that what is
//! kept is each thread's open ops and the rows, never the trace (a file whose profiler span
//! comes last is read twice; standard input, which cannot be, keeps every op). A trace
//! with memory records (`profile_memory`) or `flops` args (`with_flops`) gets PyTorch's
//! memory and FLOPs columns; `--flops` counts FLOPs from recorded inputs where an op has no
//! `flops` arg (torch.profiler's traces keep none). An event or
//! a header past `--max-event-mb` / `--max-header-mb` stops the read at its offset, so memory
//! is bounded by those limits and the read windows, whatever the file holds. With
//! `--metrics`, the per-kernel hardware metrics instead (a scope-profiler trace of omniprof,
//! or PyTorch's `cuda_profiler_range` events); with `--counters`, each counter track's
//! statistics; with `--steps`, where each step's time went (kernels, copies, fills,
//! communication, runtime, host-only work, idle: the report's overview), streamed. With `--group-by-stack N`, rows also group by the first N frames of their
//! Python stack (PyTorch's `group_by_stack_n`), which takes the whole trace in memory (an
//! op's stack may come from the `python_function` events around it).
//!
//! Several traces, or directories of them (a distributed job, one trace per rank), are read
//! in parallel ([`crate::job`]) and their rows summed exactly over the ranks, in name order;
//! `--by-rank` prints each rank's rows instead (`docs/ranks.md`).
//!
//! Exit status: 0 when the whole file was read; 1 when it could not be read or is not a
//! valid trace (with `--partial`, after printing the rows of what was read before the
//! error); 2 for bad arguments.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_analysis::counter_stats;
use omniprof_analysis::kernel_metrics;
use omniprof_analysis::StepTimeBuilder;
use omniprof_analysis::{
    KeyAverages, KeyAveragesOptions, Render, RenderFormat, Row, TableOptions, MAX_STACK_DEPTH,
};
use omniprof_read::TraceReader;

use crate::job::{read_all, shared_ranks, TracesArgs};
use crate::output::print;
use crate::progress::read_file;
use crate::reading::{report_skipped, summarize_file, TraceSummary};
use crate::rows::{RowArgs, RowLimitArgs};

/// Summarize a trace, or a job's traces, as PyTorch's `key_averages().table()`.
#[derive(Debug, clap::Args)]
pub(crate) struct SummaryArgs {
    #[command(flatten)]
    pub(crate) input: TracesArgs,
    /// With several traces, the rows of each rank (by `distributedInfo` rank) rather than
    /// the rows summed over all ranks.
    #[arg(long, conflicts_with_all = ["metrics", "counters"])]
    pub by_rank: bool,
    #[command(flatten)]
    pub(crate) rows: RowArgs,
    #[command(flatten)]
    pub(crate) row_limit: RowLimitArgs<100>,
    /// Also group ops by the first N frames of their Python stack (PyTorch's
    /// `group_by_stack_n`: the `Call stack` arg, else the enclosing `python_function`
    /// events), adding a `Source Location` column; 0: not. Reads the whole trace into memory.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub group_by_stack: usize,
    /// Also group ops by their overload name (PyTorch's `group_by_overload_name`:
    /// `aten::add.Tensor` apart from `aten::add.Scalar`), adding an `Overload Name` column
    /// where some row has one; the trace has them from
    /// `_ExperimentalConfig(capture_overload_names=True)`.
    #[arg(long)]
    pub group_by_overload_name: bool,
    /// Count each op's FLOPs as PyTorch's `with_flops` does, with the FLOPs column where
    /// some op has any (as PyTorch's table): its `flops` arg, else PyTorch's formula over its
    /// recorded inputs (`Input Dims`; a trace torch.profiler wrote keeps no `flops`, even
    /// with `with_flops=True`).
    #[arg(long)]
    pub flops: bool,
    /// Per kernel name: calls, total device time, and each hardware metric's sum, mean, min
    /// and max (from the scope profiler's kernel args, or `cuda_profiler_range` events).
    #[arg(long, conflicts_with_all = ["counters", "sort_by", "group_by_shapes", "group_by_stack", "group_by_overload_name", "flops"])]
    pub metrics: bool,
    /// Per counter track and value: samples, min, mean, max and time-weighted mean.
    #[arg(long, conflicts_with_all = ["sort_by", "group_by_shapes", "group_by_stack", "group_by_overload_name", "flops"])]
    pub counters: bool,
    /// Per `ProfilerStep#N` (or the whole trace without steps): its time in kernels, memory
    /// copies, memory fills, communication, runtime calls, host-only work and idle, each
    /// instant counted once, and the device's utilization (the report's overview).
    #[arg(long, conflicts_with_all = ["metrics", "counters", "by_rank", "sort_by", "group_by_shapes", "group_by_stack", "group_by_overload_name", "flops"])]
    pub steps: bool,
}

/// Runs `omniprof summary`.
pub(crate) fn run(args: &SummaryArgs) -> ExitCode {
    let files = match args.input.files() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.steps {
        let [file] = files.as_slice() else {
            eprintln!("error: --steps reads one trace; {} given", files.len());
            return ExitCode::from(2);
        };
        return run_steps(args, file);
    }
    if args.metrics || args.counters {
        let [file] = files.as_slice() else {
            eprintln!(
                "error: --metrics and --counters read one trace; {} given",
                files.len()
            );
            return ExitCode::from(2);
        };
        return run_whole(args, file);
    }
    if files.len() > 1 || args.by_rank {
        return run_job(args, &files);
    }
    let TraceSummary {
        summary, outcome, ..
    } = summarize(args, &files[0]);
    let mut code = 0;
    match &outcome {
        Ok(stats) => report_skipped(stats),
        Err(e) => {
            eprintln!("error: {e}");
            code = 1;
        }
    }
    if outcome.is_ok() || args.input.partial {
        notes(args, &summary);
        let options = report_options(args, None);
        if !print(&args.rows.format.render(&summary, &options)) {
            code = 1;
        }
    }
    ExitCode::from(code)
}

fn report_options(args: &SummaryArgs, header: Option<String>) -> TableOptions {
    TableOptions {
        sort_by: args.rows.sort_by,
        row_limit: args.row_limit.get(),
        header,
        ..Default::default()
    }
}

/// What the rows lack that the options asked for, said on standard error.
fn notes(args: &SummaryArgs, summary: &KeyAverages) {
    if summary.too_deep > 0 {
        eprintln!(
            "warning: {} host ops nested deeper than {MAX_STACK_DEPTH} were left out of the \
             rows; their time stays in their parent's self time",
            summary.too_deep
        );
    }
    if summary.rows.is_empty() {
        eprintln!("note: no host ops or device activities to summarize");
        return;
    }
    // A grouping asked of a trace where no row has what it groups by.
    let lacking = |asked: bool, has: fn(&Row) -> bool, note: &str| {
        if asked && !summary.rows.iter().any(has) {
            eprintln!("note: {note}");
        }
    };
    lacking(
        args.rows.group_by_shapes,
        |r| r.input_shapes.as_deref().is_some_and(|s| s != "[]"),
        "the trace has no input shapes (`Input Dims`; PyTorch records them with \
         record_shapes=True): every row's shapes are []",
    );
    lacking(
        args.group_by_overload_name,
        |r| r.overload_name.as_deref().is_some_and(|o| !o.is_empty()),
        "the trace has no overload names (`Overload Name`; PyTorch records them with \
         _ExperimentalConfig(capture_overload_names=True)): every row is its op's default \
         overload",
    );
    lacking(
        args.flops,
        |r| r.flops > 0,
        "no op has FLOPs: the trace has no `flops` args, nor the input shapes of an op \
         PyTorch counts FLOPs of (`Input Dims`; PyTorch records them with record_shapes=True)",
    );
    lacking(
        args.group_by_stack > 0,
        |r| r.stack.as_deref().is_some_and(|s| !s.is_empty()),
        "the trace has no Python stacks (no `Call stack` args or `python_function` events; \
         PyTorch records them with with_stack=True): no row has a source location",
    );
}

/// Several traces (a job's ranks): read in parallel, then the rows summed over the ranks
/// read whole (`--by-rank`: each rank's rows). A trace read in part (`--partial`) is left
/// out of the sums, and said so.
fn run_job(args: &SummaryArgs, files: &[PathBuf]) -> ExitCode {
    let mut parts = read_all(files, |file| summarize(args, file));
    let shared = shared_ranks(
        files
            .iter()
            .map(PathBuf::as_path)
            .zip(parts.iter().map(|p| p.rank)),
    );
    let mut code = 0;
    for part in &parts {
        match &part.outcome {
            Ok(stats) => report_skipped(stats),
            Err(e) => {
                eprintln!("error: {e}");
                code = 1;
            }
        }
    }
    if code != 0 && !args.input.partial {
        return ExitCode::from(code);
    }
    // What `--by-rank` names each part by: its file, or the files of its rank.
    let mut names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    if args.by_rank {
        // A rank's traces are one part, the first, whose rows are theirs summed.
        for traces in shared.values() {
            let (&first, rest) = traces.split_first().expect("shared by two traces or more");
            let merged = KeyAverages::merged(traces.iter().map(|&i| &parts[i].summary));
            parts[first].summary = merged;
            for &i in rest {
                if parts[first].outcome.is_ok() && parts[i].outcome.is_err() {
                    parts[first].outcome =
                        std::mem::replace(&mut parts[i].outcome, Ok(Default::default()));
                }
            }
            names[first] = traces
                .iter()
                .map(|&i| names[i].clone())
                .collect::<Vec<_>>()
                .join(" + ");
            order.retain(|i| !rest.contains(i));
        }
        // In name order too, so that each rank's rows line up with the job's.
        for part in &mut parts {
            part.summary = KeyAverages::merged([&part.summary]);
        }
    }
    // By rank; traces without one after, in the order given.
    order.sort_by_key(|&i| (parts[i].rank.is_none(), parts[i].rank, i));
    let label = |i: usize| match parts[i].rank {
        Some(rank) => format!("rank {rank}"),
        None => format!("{} (no distributedInfo rank)", files[i].display()),
    };
    let text = if args.by_rank {
        let by_rank = ByRank {
            args,
            names: &names,
            parts: &parts,
            order: &order,
            label: &label,
        };
        args.rows.format.render(&by_rank, &())
    } else {
        let whole: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| parts[i].outcome.is_ok())
            .collect();
        for &i in order.iter().filter(|&&i| parts[i].outcome.is_err()) {
            let name = match parts[i].rank {
                Some(rank) => format!("rank {rank} ({})", files[i].display()),
                None => label(i),
            };
            log::warn!(
                "{name} was read only in part: left out of the rows over all ranks \
                 (--by-rank shows its rows)"
            );
        }
        let job = KeyAverages::merged(whole.iter().map(|&i| &parts[i].summary));
        notes(args, &job);
        let header = format!(
            "{} traces ({}): rows summed over all of them",
            whole.len(),
            whole
                .iter()
                .map(|&i| label(i))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let options = report_options(args, Some(header));
        args.rows.format.render(&job, &options)
    };
    if !print(&text) {
        code = 1;
    }
    ExitCode::from(code)
}

/// `--by-rank`: per trace, its rows (in name order); tables one after the other under a
/// line naming the rank, CSV with a leading `rank` column (empty for a trace without one),
/// JSON as `{"ranks": [{"rank", "trace", "partial", "summary"}]}`.
struct ByRank<'a> {
    args: &'a SummaryArgs,
    /// What each part is read from: its file, or its rank's files.
    names: &'a [String],
    parts: &'a [TraceSummary],
    /// The parts' indices, in the order printed.
    order: &'a [usize],
    /// What the table's line names part `i` by.
    label: &'a dyn Fn(usize) -> String,
}

impl ByRank<'_> {
    /// Whether part `i` was read only up to an error.
    fn partial(&self, i: usize) -> bool {
        self.parts[i].outcome.is_err()
    }
}

impl Render for ByRank<'_> {
    type Options = ();

    fn render(&self, format: RenderFormat, _: &()) -> String {
        match format {
            RenderFormat::Table => self.table(),
            RenderFormat::Csv => self.csv(),
            RenderFormat::Json => self.json(),
        }
    }
}

impl ByRank<'_> {
    fn table(&self) -> String {
        self.order
            .iter()
            .map(|&i| {
                let mut header = format!("{}: {}", (self.label)(i), self.names[i]);
                if self.partial(i) {
                    header.push_str(" (PARTIAL: read up to an error)");
                }
                self.parts[i]
                    .summary
                    .table(&report_options(self.args, Some(header)))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn json(&self) -> String {
        let ranks: Vec<String> = self
            .order
            .iter()
            .map(|&i| {
                format!(
                    "{{\"rank\":{},\"trace\":{},\"partial\":{},\"summary\":{}}}",
                    self.parts[i]
                        .rank
                        .map_or("null".to_owned(), |r| r.to_string()),
                    serde_json::Value::from(self.names[i].clone()),
                    self.partial(i),
                    self.parts[i].summary.json(&report_options(self.args, None))
                )
            })
            .collect();
        format!("{{\"ranks\":[{}]}}", ranks.join(","))
    }

    fn csv(&self) -> String {
        let mut out = String::new();
        for (n, &i) in self.order.iter().enumerate() {
            let rank = self.parts[i]
                .rank
                .map(|r| r.to_string())
                .unwrap_or_default();
            let csv = self.parts[i].summary.csv_with_column(
                &report_options(self.args, None),
                RANK_COLUMN,
                &rank,
            );
            // One header for all.
            let body = if n == 0 {
                &csv[..]
            } else {
                csv.split_once('\n').map_or("", |(_, b)| b)
            };
            out.push_str(body);
        }
        out
    }
}

/// The column `--by-rank --format csv` adds first.
const RANK_COLUMN: &str = "rank";

/// `--steps`: the trace streamed into a [`StepTimeBuilder`], the one split the report draws.
fn run_steps(args: &SummaryArgs, file: &Path) -> ExitCode {
    let mut builder = StepTimeBuilder::default();
    let reader = TraceReader::new().limits(args.input.limits());
    let outcome = if file.as_os_str() == "-" {
        reader.stream(io::stdin().lock(), |item| builder.add_item(&item))
    } else {
        read_file(file, |input| {
            reader.stream(input, |item| builder.add_item(&item))
        })
    };
    let mut code = 0;
    match &outcome {
        Ok(stats) => report_skipped(stats),
        Err(e) => {
            eprintln!("error: {e}");
            code = 1;
            if !args.input.partial {
                return ExitCode::from(code);
            }
        }
    }
    let steps = builder.finish();
    if steps.steps.is_empty() {
        eprintln!("note: the trace has no step and no work to split");
    }
    if !print(&args.rows.format.render(&steps, &())) {
        code = 1;
    }
    ExitCode::from(code)
}

/// `--metrics` and `--counters`, which read the whole trace (they need its counters and
/// every kernel's args).
fn run_whole(args: &SummaryArgs, file: &Path) -> ExitCode {
    let reader = TraceReader::new().limits(args.input.limits());
    let outcome = if file.as_os_str() == "-" {
        reader.read(io::stdin().lock())
    } else {
        reader.read_path(file)
    };
    let mut code = 0;
    if let Some(e) = &outcome.error {
        eprintln!("error: {e}");
        code = 1;
        if !args.input.partial {
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
        args.rows.format.render(&summary, &())
    } else {
        let summary = counter_stats(trace);
        if summary.rows.is_empty() {
            eprintln!("note: the trace has no counters");
        }
        args.rows.format.render(&summary, &())
    };
    if !print(&text) {
        code = 1;
    }
    ExitCode::from(code)
}

/// Streams the file into the summary; on error, the summary holds what was read before.
fn summarize(args: &SummaryArgs, file: &Path) -> TraceSummary {
    let options = KeyAveragesOptions {
        group_by_input_shapes: args.rows.group_by_shapes,
        group_by_stack_n: args.group_by_stack,
        group_by_overload_name: args.group_by_overload_name,
        with_flops: args.flops,
        ..Default::default()
    };
    summarize_file(file, options, args.input.limits())
}
