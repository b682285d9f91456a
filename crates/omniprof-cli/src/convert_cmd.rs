//! `omniprof convert IN -o OUT`: any trace the reader reads (omniprof's or PyTorch's Chrome
//! JSON, or a Perfetto trace, plain or gzip) to any format `omniprof_trace::save` writes, chosen by
//! OUT's extension.
//!
//! To JSON (`.json`, `.json.gz`) the input is streamed into the writer item by item, so that
//! memory is bounded by the reader's windows, the open events of each row's lanes and the
//! rows, not by the trace; an input whose activities come out of order on a row (the lanes
//! need each row in order) is then read again whole. To `.pftrace` the input is read twice
//! (`PerfettoSurvey`, `PerfettoStream`): a first read finds the rows, lanes, flow ends and
//! counter tracks that the Perfetto writer declares before its first event, a second streams
//! the activities into it, so that memory is bounded as for JSON, plus the counter samples
//! (written last in time order) and, during the first read, a few words per flow start. It
//! is read whole instead when the survey says it cannot be streamed (activities out of order
//! on a row, a base time after the events, flow ids with several ends in a file not in time
//! order), and when the input is not a regular file, which cannot be read twice. Either way it is saved the way every trace is saved: written
//! aside and renamed, so a failed read or write leaves nothing at OUT. A FIFO or device
//! without a known extension (`/dev/stdout`) gets JSON, and the summary line then goes to
//! standard error.
//!
//! With `--format parquet`, any number of traces (or directories of them) become Parquet
//! tables under the directory OUT, partitioned by rank (`parquet_cmd.rs`).
//!
//! Exit status: 0 converted; 1 the input could not be read (the reader's error, with byte
//! offset and event index) or the output not written; 2 bad arguments, an unknown output
//! extension included (checked before reading).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_read::{ArgFilter, ReadError, ReadStats, TraceReader};
use omniprof_trace::{
    save_perfetto_streamed, Format, NeedsWholeTrace, PerfettoSurvey, TraceItem, WriteError,
    WriteStats,
};

use crate::progress::read_file;
use crate::reading::report_skipped;

/// Convert a trace to another format.
#[derive(Debug, clap::Args)]
pub(crate) struct ConvertArgs {
    /// The trace to read: Kineto / PyTorch Chrome JSON or a Perfetto trace, plain or gzip.
    /// With `--format parquet`, any number of traces and directories of traces.
    #[arg(value_name = "IN", required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Where to write it; the extension names the format: .json, .json.gz, .pftrace. With
    /// `--format parquet`, a new or empty directory.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// `parquet`: Parquet tables, partitioned by rank, under the directory OUT (docs/parquet.md).
    #[arg(long, value_enum)]
    pub format: Option<TableFormat>,
    /// With `--format parquet`: a truncated or malformed trace gives the rows read before
    /// the error (with a warning) instead of failing.
    #[arg(long)]
    pub partial: bool,
}

/// A format written as a directory of tables rather than one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    /// Parquet tables partitioned by rank.
    Parquet,
}

/// Runs `omniprof convert`.
pub(crate) fn run(args: &ConvertArgs) -> ExitCode {
    if args.format == Some(TableFormat::Parquet) {
        return crate::parquet_cmd::run(&args.inputs, &args.output, args.partial);
    }
    let [input] = args.inputs.as_slice() else {
        eprintln!("error: convert takes one trace, except with --format parquet");
        return ExitCode::from(2);
    };
    if args.partial {
        eprintln!("error: --partial applies to --format parquet only");
        return ExitCode::from(2);
    }
    // A FIFO or device without a known extension (`/dev/stdout`) gets JSON, as in the save.
    let format = match Format::for_path(&args.output) {
        Ok(format) => format,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let saved = match format {
        Format::Json | Format::JsonGz => match streamed(input, &args.output) {
            Err(Failed::NeedsWholeTrace(why)) => {
                log::info!("{why}; reading {} whole", input.display());
                whole(input, &args.output)
            }
            done => done,
        },
        Format::Perfetto if input.is_file() => match streamed_pftrace(input, &args.output) {
            Err(Failed::NeedsWholeTrace(why)) => {
                log::info!("{why}; reading {} whole", input.display());
                whole(input, &args.output)
            }
            done => done,
        },
        Format::Perfetto => whole(input, &args.output),
    };
    let (written, stats) = match saved {
        Ok(saved) => saved,
        Err(Failed::Read(e)) => {
            eprintln!(
                "error: {e}; nothing was written to {}",
                args.output.display()
            );
            return ExitCode::FAILURE;
        }
        Err(Failed::Write(e)) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        Err(Failed::NeedsWholeTrace(why)) => unreachable!("a whole trace is written: {why}"),
    };
    report_skipped(&stats);
    // With the trace on standard output, the summary goes to standard error.
    let mut say: Box<dyn Write> = match crate::output::is_standard_output(&args.output) {
        true => Box::new(std::io::stderr()),
        false => Box::new(std::io::stdout()),
    };
    let _ = writeln!(
        say,
        "wrote {} ({} events, {} bytes) from {} ({} events)",
        args.output.display(),
        written.events,
        written.bytes,
        input.display(),
        stats.events,
    );
    ExitCode::SUCCESS
}

/// Why a conversion stopped.
enum Failed {
    Read(ReadError),
    Write(WriteError),
    /// The streamed JSON writer met an activity out of order on its row, or the survey of
    /// a streamed `.pftrace` found the trace cannot be written as it is read.
    NeedsWholeTrace(String),
}

/// Streams the input into the JSON writer: memory bounded by the reader's windows, the
/// lanes' open events and the rows.
fn streamed(input: &Path, output: &Path) -> Result<(WriteStats, ReadStats), Failed> {
    let mut read = None;
    let saved = omniprof_trace::save_streamed(output, |stream| {
        read_inside_save(input, &mut read, |item| stream.add(item))
    });
    let read = read
        .unwrap_or_else(|| Ok(ReadStats::default()))
        .map_err(Failed::Read)?;
    match saved {
        Ok(written) => Ok((written, read)),
        Err(e) => match e
            .source
            .get_ref()
            .and_then(|s| s.downcast_ref::<NeedsWholeTrace>())
        {
            Some(why) => Err(Failed::NeedsWholeTrace(why.to_string())),
            None => Err(Failed::Write(e)),
        },
    }
}

/// Reads the input twice: a survey of its rows and tracks, then the activities streamed into
/// the Perfetto writer; memory bounded by the rows, lanes, names and flow starts.
fn streamed_pftrace(input: &Path, output: &Path) -> Result<(WriteStats, ReadStats), Failed> {
    let mut survey = PerfettoSurvey::default();
    read_file(input, |input| {
        // The survey reads no arg, which is most of a read's work.
        TraceReader::new()
            .args(ArgFilter::none())
            .stream(input, |item| survey.add(item))
    })
    .map_err(Failed::Read)?;
    let layout = survey
        .finish()
        .map_err(|why| Failed::NeedsWholeTrace(why.to_string()))?;
    let mut read = None;
    let saved = save_perfetto_streamed(output, layout, |stream| {
        read_inside_save(input, &mut read, |item| stream.add(item))
    });
    let read = read
        .unwrap_or_else(|| Ok(ReadStats::default()))
        .map_err(Failed::Read)?;
    let written = saved.map_err(Failed::Write)?;
    Ok((written, read))
}

/// Reads `input` into a streaming writer from inside its save, keeping the read's outcome in
/// `read`: a read that fails stops the save, so nothing is left at the output.
fn read_inside_save(
    input: &Path,
    read: &mut Option<Result<ReadStats, ReadError>>,
    add: impl FnMut(TraceItem),
) -> io::Result<()> {
    let result = read_file(input, |input| TraceReader::new().stream(input, add));
    let failed = result.is_err();
    *read = Some(result);
    match failed {
        true => Err(io::Error::other("the input could not be read")),
        false => Ok(()),
    }
}

/// Reads the input whole into the trace model, then saves it.
fn whole(input: &Path, output: &Path) -> Result<(WriteStats, ReadStats), Failed> {
    let read = read_file(input, |reader| {
        TraceReader::new().read(reader).into_result()
    });
    let (trace, stats) = read.map_err(Failed::Read)?;
    let saved = omniprof_trace::save(&trace, output);
    // The process ends next: a big trace is millions of small allocations, which the OS
    // takes back at once, where freeing them one by one takes a tenth of the conversion.
    std::mem::forget(trace);
    saved.map(|written| (written, stats)).map_err(Failed::Write)
}
