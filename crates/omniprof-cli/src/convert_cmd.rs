//! `omniprof convert IN -o OUT`: any trace the reader reads (omniprof's or PyTorch's Chrome
//! JSON, or a Perfetto trace, plain or gzip) to any format `export::save` writes, chosen by
//! OUT's extension.
//!
//! The input is streamed into the trace model (memory grows with the events, not the file's
//! text), then saved the way every trace is saved: written aside and renamed, so a failed
//! read or write leaves nothing at OUT. A FIFO or device without a known extension
//! (`/dev/stdout`) gets JSON, and the summary line then goes to standard error.
//!
//! Exit status: 0 converted; 1 the input could not be read (the reader's error, with byte
//! offset and event index) or the output not written; 2 bad arguments, an unknown output
//! extension included (checked before reading).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use omniprof_trace::export::{self, Format};
use omniprof_trace::import::TraceReader;

use crate::progress::read_file;
use crate::summary_cmd::report_skipped;

/// Convert a trace to another format.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The trace to read: Kineto / PyTorch Chrome JSON or a Perfetto trace, plain or gzip.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// Where to write it; the extension names the format: .json, .json.gz, .pftrace.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

/// Runs `omniprof convert`.
pub fn run(args: &ConvertArgs) -> ExitCode {
    // A FIFO or device without a known extension (`/dev/stdout`) gets JSON, as in the save.
    if let Err(e) = Format::for_path(&args.output) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let read = read_file(&args.input, |reader| {
        TraceReader::new().read(reader).into_result()
    });
    let (trace, stats) = match read {
        Ok(read) => read,
        Err(e) => {
            eprintln!(
                "error: {e}; nothing was written to {}",
                args.output.display()
            );
            return ExitCode::FAILURE;
        }
    };
    report_skipped(&stats);
    let saved = export::save(&trace, &args.output);
    // The process ends next: a big trace is millions of small allocations, which the OS
    // takes back at once, where freeing them one by one takes a tenth of the conversion.
    std::mem::forget(trace);
    match saved {
        Ok(written) => {
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
                args.input.display(),
                stats.events,
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
