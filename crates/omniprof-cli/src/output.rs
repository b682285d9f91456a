//! Output: paths checked before the work that fills them (a run that cannot write its
//! result says so at once, naming the path, instead of after minutes of profiling), and
//! results printed to standard output or written to files.
//!
//! A trace path is accepted when the save would accept it: a name with a known extension,
//! or an existing FIFO or character device (`/dev/stdout`, `/dev/null`), which gets JSON
//! (`Format::for_path` in `crates/omniprof-trace/src/export/format.rs`), as `docs/cli.md`
//! says.

use std::fs::OpenOptions;
use std::io::{self, ErrorKind, Write};
use std::path::Path;

use omniprof_trace::Format;

/// Prints `text` to standard output; false (with a message) when it cannot be written. A
/// reader that stopped reading (`| head`) needs no message.
pub(crate) fn print(text: &str) -> bool {
    match io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => true,
        Err(e) => {
            if e.kind() != ErrorKind::BrokenPipe {
                eprintln!("error: cannot write to standard output: {e}");
            }
            false
        }
    }
}

/// Whether a trace can be written at `path`: the file is [writable](check_writable) and
/// either its extension names a format or it is a FIFO or character device, which gets
/// JSON ([`Format::for_path`], what the save itself decides).
pub(crate) fn check_trace_output(path: &Path) -> Result<(), String> {
    check_writable(path)?;
    Format::for_path(path).map(drop).map_err(|e| e.to_string())
}

/// Whether `path` is this process's standard output (`/dev/stdout`, `/proc/self/fd/1`, or
/// the terminal or file that standard output is): what the command says then goes to
/// standard error, as with `-o -`, so that it does not follow the trace into the stream.
pub(crate) fn is_standard_output(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(target) = std::fs::metadata(path) else {
            return false;
        };
        let Ok(stdout) = io::stdout().as_fd().try_clone_to_owned() else {
            return false;
        };
        let Ok(stdout) = std::fs::File::from(stdout).metadata() else {
            return false;
        };
        (target.dev(), target.ino()) == (stdout.dev(), stdout.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Whether a file can be written at `path`: not a directory, in a directory that exists and
/// takes new files (probed by creating and removing an empty file), or an existing file
/// that opens for writing (left as it is). Other existing things (a FIFO, a device) are left
/// to the save, unopened.
///
/// The error reads `cannot write PATH: <why>`.
pub(crate) fn check_writable(path: &Path) -> Result<(), String> {
    let fail = |why: String| Err(format!("cannot write {}: {why}", path.display()));
    if path.is_dir() {
        return fail("it is a directory".to_owned());
    }
    if path.exists() {
        if !path.is_file() {
            // A FIFO or device is written in place by the save, and anything else refused
            // there naming it; opening a FIFO here would block until a reader comes and
            // take that reader from the real write.
            return Ok(());
        }
        return match OpenOptions::new().append(true).open(path) {
            Ok(_) => Ok(()),
            Err(e) => fail(e.to_string()),
        };
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return fail(format!("{} is not a directory", parent.display()));
    }
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => {
            // Only the probe's own empty file goes.
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => fail(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_missing_parents_and_read_only_places_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_writable(dir.path()).unwrap_err();
        assert_eq!(
            err,
            format!("cannot write {}: it is a directory", dir.path().display())
        );
        let orphan = dir.path().join("no/such/x.json");
        assert!(check_writable(&orphan)
            .unwrap_err()
            .contains("is not a directory"));
        let fine = dir.path().join("x.json");
        assert_eq!(check_writable(&fine), Ok(()));
        assert!(!fine.exists(), "the probe leaves nothing");
        std::fs::write(&fine, "kept").unwrap();
        assert_eq!(check_writable(&fine), Ok(()));
        assert_eq!(std::fs::read_to_string(&fine).unwrap(), "kept");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_left_unopened_for_the_save() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("trace.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
        // Opening a FIFO with no reader for writing would block this test forever.
        assert_eq!(check_writable(&fifo), Ok(()));
    }
}
