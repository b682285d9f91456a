//! `omniprof convert TRACE… -o OUT_DIR --format parquet`: traces, and directories of traces,
//! to Parquet tables under OUT_DIR, partitioned by rank (the `omniprof-parquet` crate;
//! docs/parquet.md). A directory gives the traces `summary` reads from it ([`crate::job`]),
//! its other entries named in a warning and skipped; several traces of one rank are, as
//! for `summary`, that rank's steps (each a part file of the rank), named in a note.
//!
//! Exit status: 0 converted; 1 a trace could not be read (without `--partial`), or the
//! tables could not be written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof_parquet::{convert, ConvertOptions};

use crate::job::{shared_ranks, trace_files};
use crate::reading::report_skipped;

/// Runs the Parquet conversion.
pub(crate) fn run(inputs: &[PathBuf], out_dir: &Path, partial: bool) -> ExitCode {
    let options = ConvertOptions {
        partial,
        ..Default::default()
    };
    // The directory rule of `summary` and `ranks`: one listing for every command.
    let converted = trace_files(inputs)
        .and_then(|traces| convert(&traces, out_dir, options).map_err(|e| e.to_string()));
    match converted {
        Ok(traces) => {
            // A negative rank (no job numbers one so) goes without the note.
            shared_ranks(
                traces
                    .iter()
                    .map(|t| (t.path.as_path(), u64::try_from(t.rank).ok())),
            );
            for t in &traces {
                let events = match &t.stats {
                    Some(stats) => {
                        report_skipped(stats);
                        format!("{} events", stats.events)
                    }
                    None => "cut short".to_owned(),
                };
                let rows: Vec<String> = t
                    .rows
                    .iter()
                    .map(|(table, n)| format!("{n} {table}"))
                    .collect();
                println!(
                    "wrote rank {} of {} ({events}): {}",
                    t.rank,
                    t.path.display(),
                    rows.join(", ")
                );
            }
            println!("tables in {}", out_dir.display());
            // With --partial, the cut traces were converted, yet the error stands.
            match traces.iter().any(|t| t.error.is_some()) {
                true => ExitCode::FAILURE,
                false => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
