//! Printing results to standard output and files.

use std::io::{self, Write};
use std::path::Path;

/// Prints `text` to standard output; false (with a message) when it cannot be written. A
/// reader that stopped reading (`| head`) needs no message.
pub fn print(text: &str) -> bool {
    match io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => true,
        Err(e) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("error: cannot write to standard output: {e}");
            }
            false
        }
    }
}

/// Writes `bytes` to `<path>.tmp` and renames it to `path`, so that a failed write leaves
/// nothing at `path`.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
