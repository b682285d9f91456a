//! The traces of a job, as `summary` and `ranks` take them: paths of traces and of
//! directories holding them (one per rank), found, then read in parallel, one trace per
//! worker thread and as many workers as cores, so that at most that many traces are in
//! memory at once, each streamed in the memory its reader bounds. A directory's other files
//! are named and skipped; several traces claiming the same rank are that rank's steps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use omniprof_trace::Limits;

/// The traces to read and how: shared by `summary` and `ranks`.
#[derive(Debug, clap::Args)]
pub(crate) struct TracesArgs {
    /// Traces (Kineto / PyTorch Chrome JSON or Perfetto traces, plain or gzip), or directories
    /// of them (one per rank: every `.json`, `.json.gz` and `.pftrace` file directly inside;
    /// other files are named and skipped). `-` reads one trace from standard input.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    pub(crate) traces: Vec<PathBuf>,
    /// On a truncated or malformed file, use what was read before the error (the error is
    /// still reported, the trace flagged, and the exit status is still 1).
    #[arg(long)]
    pub(crate) partial: bool,
    /// The largest event read, in MiB; a larger one stops the read at its offset.
    #[arg(long, value_name = "MIB", default_value_t = Limits::default().event_bytes >> 20)]
    pub(crate) max_event_mb: usize,
    /// The most the header (every top-level value but `traceEvents`, together) may take,
    /// in MiB.
    #[arg(long, value_name = "MIB", default_value_t = Limits::default().header_bytes >> 20)]
    pub(crate) max_header_mb: usize,
}

impl TracesArgs {
    /// The read limits `--max-event-mb` and `--max-header-mb` set.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            event_bytes: self.max_event_mb.saturating_mul(1 << 20),
            header_bytes: self.max_header_mb.saturating_mul(1 << 20),
        }
    }

    /// The trace files the paths name ([`trace_files`]); `-` (standard input) only alone.
    pub(crate) fn files(&self) -> Result<Vec<PathBuf>, String> {
        let files = trace_files(&self.traces)?;
        if files.len() > 1 && files.iter().any(|f| f.as_os_str() == "-") {
            return Err("`-` (standard input) reads one trace, alone".to_owned());
        }
        Ok(files)
    }
}

/// The trace files `paths` name, the one rule of every command that takes directories:
/// files as given; a directory's regular files named like a trace ([`TRACE_SUFFIXES`]),
/// sorted by name. A directory's other entries are named on standard error with why they
/// were skipped: a FIFO or device named `*.json` is never opened, which could wait forever.
/// An error names a directory that cannot be listed or holds no trace.
pub(crate) fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| format!("{}: cannot list the directory: {e}", path.display()))?;
        let mut names: Vec<PathBuf> = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: cannot list the directory: {e}", path.display()))?;
        names.sort();
        let before = files.len();
        for name in names {
            match not_a_trace(&name) {
                None => files.push(name),
                Some(why) => log::warn!("{}: skipped: {why}", name.display()),
            }
        }
        if files.len() == before {
            return Err(format!(
                "{}: no trace in the directory (no file ending in {})",
                path.display(),
                suffixes()
            ));
        }
    }
    Ok(files)
}

/// Why a directory's entry is not read as a trace, if it is not.
fn not_a_trace(path: &Path) -> Option<String> {
    // Follows links: a link to a trace is read, a dangling one named.
    let kind = match std::fs::metadata(path) {
        Ok(meta) => meta.file_type(),
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    if !kind.is_file() {
        return Some(format!("not a regular file ({})", kind_name(kind)));
    }
    if !is_trace_name(path) {
        return Some(format!(
            "not a trace (a trace's name ends in {})",
            suffixes()
        ));
    }
    None
}

/// What a file that is not a regular file is, as a message says it.
fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// The ends of the names of the files a directory's traces are read from.
pub(crate) const TRACE_SUFFIXES: [&str; 3] = [".json", ".json.gz", ".pftrace"];

/// The suffixes as a message lists them: `.json, .json.gz or .pftrace`.
fn suffixes() -> String {
    match TRACE_SUFFIXES.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => TRACE_SUFFIXES.join(""),
    }
}

fn is_trace_name(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy());
    name.is_some_and(|n| TRACE_SUFFIXES.iter().any(|s| n.ends_with(s)))
}

/// `read` of every file, in the files' order, run by as many worker threads as cores (at
/// most one per file), each taking the next file when done with its last.
pub(crate) fn read_all<T: Send>(files: &[PathBuf], read: impl Fn(&Path) -> T + Sync) -> Vec<T> {
    let workers = thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new(files.iter().map(|_| None).collect());
    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else { break };
                let value = read(file);
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(value);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|v| v.expect("every file was read: the workers stop only past the last"))
        .collect()
}

/// Says on standard error which ranks several traces claim: they are read as that rank's
/// steps (the cycles a scheduled profiler wrote into one directory, or a restarted job's
/// traces). `ranks` pairs each trace's path with the rank it claims; returns, by rank, the
/// positions of the traces of each rank claimed more than once.
pub(crate) fn shared_ranks<'a>(
    ranks: impl IntoIterator<Item = (&'a Path, Option<u64>)>,
) -> BTreeMap<u64, Vec<usize>> {
    let mut by_rank: BTreeMap<u64, Vec<(usize, &Path)>> = BTreeMap::new();
    for (i, (path, rank)) in ranks.into_iter().enumerate() {
        if let Some(rank) = rank {
            by_rank.entry(rank).or_default().push((i, path));
        }
    }
    by_rank.retain(|_, traces| traces.len() > 1);
    for (rank, traces) in &by_rank {
        let names: Vec<String> = traces
            .iter()
            .map(|(_, p)| p.display().to_string())
            .collect();
        eprintln!(
            "note: rank {rank} has {} traces ({}): read as that rank's steps",
            traces.len(),
            names.join(", ")
        );
    }
    by_rank
        .into_iter()
        .map(|(rank, traces)| (rank, traces.into_iter().map(|(i, _)| i).collect()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_read_once_and_results_keep_the_files_order() {
        let files: Vec<PathBuf> = (0..50).map(|i| PathBuf::from(i.to_string())).collect();
        let got = read_all(&files, |p| p.to_string_lossy().parse::<u32>().unwrap() * 2);
        assert_eq!(got, (0..50).map(|i| i * 2).collect::<Vec<u32>>());
    }

    #[test]
    fn the_traces_of_a_rank_claimed_twice_are_listed_under_it() {
        let (a, b, c) = (
            Path::new("a.json"),
            Path::new("b.json"),
            Path::new("c.json"),
        );
        let shared = shared_ranks([(a, Some(1)), (b, None), (c, Some(1))]);
        assert_eq!(shared.into_iter().collect::<Vec<_>>(), [(1, vec![0, 2])]);
        assert!(shared_ranks([(a, Some(0)), (b, None), (c, None)]).is_empty());
    }
}
