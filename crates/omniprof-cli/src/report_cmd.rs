//! `omniprof report TRACE… [-o report.html] [--base BASE]`: the views TensorBoard's
//! profiler plugin gave (overview of each step, operators, kernels, memory, the ranks of a
//! job, the trace, a diff), as one self-contained HTML file that opens from disk with no
//! network: the page ([`ReportModel::html`]) holds the report model as JSON, its CSS and
//! script, and uPlot (a small charting library without dependencies, vendored at a pinned
//! version and checksum) inlined.
//!
//! Each trace is streamed once, as `summary` streams it ([`summarize_file_watching`]): the
//! key averages' builder and the report's builder take the same items, with only the args
//! they read; a trace with kernel metrics (any arg may be one) is read a second time, with
//! every arg, for them. Several traces, or
//! directories of them, are read in parallel ([`crate::job`]). A trace that cannot be read
//! writes no file and names the file and offset; with `--partial`, the report is written
//! of what was read and its first view says the trace was cut. The page is saved as traces
//! are ([`save_with`]): written aside and renamed, never through another user's link in a
//! sticky directory.
//!
//! Exit status: 0 when the report was written of traces read whole; 1 when a trace could
//! not be read (with `--partial`, after writing the report) or the file not written; 2 for
//! bad arguments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_analysis::KernelMetricsBuilder;
use omniprof_analysis::KeyAveragesOptions;
use omniprof_read::TraceReader;
use omniprof_report::{ReportInput, ReportModel, TraceReportBuilder};
use omniprof_trace::save_with;

use crate::job::{read_all, shared_ranks, TracesArgs};
use crate::progress::read_file;
use crate::reading::{key_averages_of, report_skipped, summarize_file_watching};

/// Write the report of traces as one HTML file.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    input: TracesArgs,
    /// The HTML file to write.
    #[arg(short, long, value_name = "HTML", default_value = "report.html")]
    output: PathBuf,
    /// A trace to compare against (the Diff view): its rows beside the traces'.
    #[arg(long, value_name = "TRACE")]
    base: Option<PathBuf>,
    /// Also group the Operators view's rows by input shapes (`Input Dims`).
    #[arg(long)]
    group_by_shapes: bool,
    /// Also group the Operators view's rows by the first N frames of their Python stack
    /// (as `summary --group-by-stack N`); reads each trace whole into memory.
    #[arg(long, value_name = "N", default_value_t = 0)]
    group_by_stack: usize,
}

/// Runs `omniprof report`.
pub(crate) fn run(args: &ReportArgs) -> ExitCode {
    let files = match args.input.files() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let options = KeyAveragesOptions {
        group_by_input_shapes: args.group_by_shapes,
        group_by_stack_n: args.group_by_stack,
        ..Default::default()
    };
    let limits = args.input.limits();
    let base = match &args.base {
        None => None,
        Some(path) => match key_averages_of(path, options.clone(), limits) {
            (summary, Ok(stats)) => {
                report_skipped(&stats);
                Some(summary)
            }
            (_, Err(e)) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let inputs = read_all(&files, |file| read(file, &options, args));
    shared_ranks(
        files
            .iter()
            .map(PathBuf::as_path)
            .zip(inputs.iter().map(|i| i.parts.rank.rank)),
    );
    let mut code = 0;
    for input in &inputs {
        if let Some(e) = &input.error {
            eprintln!("error: {e}");
            code = 1;
        }
    }
    if code != 0 && !args.input.partial {
        eprintln!(
            "error: no report written (--partial writes one of what was read, flagged as cut)"
        );
        return ExitCode::from(code);
    }
    let model = ReportModel::new(inputs, base.as_ref());
    let html = model.html();
    // The one save path: no half-written page, and no link of another user's followed.
    if let Err(e) = save_with(&args.output, |out| out.write_all(html.as_bytes())) {
        eprintln!(
            "error: cannot write {}: {}",
            args.output.display(),
            e.source
        );
        return ExitCode::from(1);
    }
    eprintln!("wrote {}", args.output.display());
    ExitCode::from(code)
}

/// One trace streamed once into its key averages and the rest of its report.
fn read(file: &Path, options: &KeyAveragesOptions, args: &ReportArgs) -> ReportInput {
    let mut builder = TraceReportBuilder::default();
    let summary = summarize_file_watching(
        file,
        options.clone(),
        args.input.limits(),
        &TraceReportBuilder::ARGS,
        &mut |item| match item {
            Some(item) => builder.add_item(item),
            // Read again from the start: what was gathered would count twice.
            None => builder = TraceReportBuilder::default(),
        },
    );
    if let Ok(stats) = &summary.outcome {
        report_skipped(stats);
    }
    if builder.has_metrics() {
        if file.as_os_str() == "-" {
            log::warn!(
                "standard input cannot be read twice: the kernels' hardware metrics are left out"
            );
            builder.set_metrics(KernelMetricsBuilder::default());
        } else {
            // Kernel metrics may be any arg: read again with every arg, for them alone.
            let mut metrics = KernelMetricsBuilder::default();
            let reader = TraceReader::new().limits(args.input.limits());
            let _ = read_file(file, |input| {
                reader.stream(input, |item| metrics.add_item(&item))
            });
            builder.set_metrics(metrics);
        }
    }
    ReportInput {
        label: file.display().to_string(),
        summary: summary.summary,
        parts: builder.finish(),
        error: summary.outcome.err().map(|e| e.to_string()),
    }
}
