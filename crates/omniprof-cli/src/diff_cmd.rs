//! `omniprof diff BASE TRACE`: the key-averages rows of two traces side by side, largest
//! regression first: what got slower between two runs.
//!
//! Exit status: 0 when both files were read (traces with no op in common included, with a
//! note); 1 when either could not be read; 2 for bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use omniprof_analysis::diff_top;
use omniprof_analysis::KeyAveragesOptions;
use omniprof_trace::Limits;

use crate::output::print;
use crate::reading::{key_averages_of, report_skipped};
use crate::rows::{RowArgs, RowLimitArgs};

/// Compare two traces op by op.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The trace to compare against (the earlier run): Kineto / PyTorch JSON or a Perfetto
    /// trace, plain or gzip.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The trace to compare (the later run).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    #[command(flatten)]
    pub(crate) rows: RowArgs,
    #[command(flatten)]
    pub(crate) row_limit: RowLimitArgs<{ -1 }>,
}

/// Runs `omniprof diff`.
pub(crate) fn run(args: &DiffArgs) -> ExitCode {
    let mut summaries = Vec::new();
    for path in [&args.base, &args.trace] {
        let options = KeyAveragesOptions {
            group_by_input_shapes: args.rows.group_by_shapes,
            ..Default::default()
        };
        match key_averages_of(path, options, Limits::default()) {
            (summary, Ok(stats)) => {
                report_skipped(&stats);
                summaries.push(summary);
            }
            (_, Err(e)) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // Only the rows printed are kept (all of them by default).
    let row_limit = args.row_limit.get();
    let (d, _) = diff_top(
        &summaries[0],
        &summaries[1],
        args.rows.sort_by,
        row_limit.unwrap_or(usize::MAX),
    );
    let common = d.has_common_rows();
    drop(summaries);
    if !common {
        eprintln!(
            "note: {} and {} have no ops in common: every row is new or vanished",
            args.base.display(),
            args.trace.display()
        );
    }
    if print(&args.rows.format.render(&d, &row_limit)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
