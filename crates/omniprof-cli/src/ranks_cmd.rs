//! `omniprof ranks DIR`: the cross-rank report of a distributed job's traces (one per rank,
//! the rank from each trace's `distributedInfo`), read in parallel: each rank's step times
//! (`ProfilerStep#N`), the slowest rank of each step and its lag behind the median, and per
//! rank HTA's temporal breakdown (computation, communication, memory copies, idle) and the
//! overlap of communication with computation ([`omniprof_trace::ranks`];
//! `docs/ranks.md` gives the definitions).
//!
//! Exit status: 0 when every trace was read whole; 1 when one could not be read (with
//! `--partial`, after the report, in which that rank is flagged and left out of the step
//! statistics); 2 for bad arguments. Several traces of one rank are read as its steps
//! ([`RankTrace::absorb`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_analysis::{RankComparison, RankProfileBuilder, RankTrace};
use omniprof_read::{ArgFilter, TraceReader};

use crate::job::{read_all, shared_ranks, TracesArgs};
use crate::output::print;
use crate::progress::read_file;

/// Compare a job's ranks: step times, the slowest rank, where each rank's time went.
#[derive(Debug, clap::Args)]
pub(crate) struct RanksArgs {
    #[command(flatten)]
    input: TracesArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = RanksFormat::Table)]
    format: RanksFormat,
}

/// How the report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RanksFormat {
    /// Text: the traces, the step table, the slowest rank, the time per rank.
    Table,
    /// One JSON object: `ranks`, `steps`, `straggler`.
    Json,
}

impl RanksFormat {
    /// `report` in this format.
    fn render(self, report: &RankComparison) -> String {
        match self {
            Self::Table => report.text(),
            Self::Json => report.json() + "\n",
        }
    }
}

/// Runs `omniprof ranks`.
pub(crate) fn run(args: &RanksArgs) -> ExitCode {
    let files = match args.input.files() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if files.iter().any(|f| f.as_os_str() == "-") {
        eprintln!("error: `ranks` reads trace files, not standard input");
        return ExitCode::from(2);
    }
    let traces = read_all(&files, |file| profile(args, file));
    let claims = files
        .iter()
        .map(PathBuf::as_path)
        .zip(traces.iter().map(|t| t.profile.rank));
    shared_ranks(claims);
    let mut code = 0;
    for t in &traces {
        if let Some(e) = &t.error {
            eprintln!("error: {e}");
            code = 1;
        }
        if t.profile.rank.is_none() {
            log::warn!(
                "{}: no rank in distributedInfo: the report names it `trace #N` by its place",
                t.label
            );
        }
    }
    if code != 0 && !args.input.partial {
        return ExitCode::from(code);
    }
    let report = RankComparison::new(traces);
    if !print(&args.format.render(&report)) {
        code = 1;
    }
    ExitCode::from(code)
}

/// One trace streamed into its profile; on error, the profile of what was read before.
fn profile(args: &RanksArgs, file: &Path) -> RankTrace {
    let mut builder = RankProfileBuilder::new();
    // Names, kinds and times are all the report reads.
    let reader = TraceReader::new()
        .args(ArgFilter::none())
        .limits(args.input.limits());
    let outcome = read_file(file, |input| {
        reader.stream(input, |item| builder.add_item(&item))
    });
    RankTrace {
        label: file.display().to_string(),
        profile: builder.finish(),
        error: outcome.err().map(|e| e.to_string()),
    }
}
