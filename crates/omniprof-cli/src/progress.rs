//! A progress bar over the bytes of a large input file, shown while someone watches standard
//! error; `summary`, `diff`, `convert` and `flamegraph` read through it.

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use omniprof_read::ReadError;

/// Files larger than this get a progress bar (when standard error is a terminal).
const PROGRESS_MIN_BYTES: u64 = 50 * 1024 * 1024;

/// An opened input file, read through a progress bar when it is large.
pub(crate) struct Input {
    pub reader: Box<dyn Read>,
    bar: Option<ProgressBar>,
}

impl Input {
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let bar = progress_bar(&file);
        let reader: Box<dyn Read> = match &bar {
            Some(bar) => Box::new(bar.wrap_read(file)),
            None => Box::new(file),
        };
        Ok(Self { reader, bar })
    }

    /// Removes the bar, once reading is over.
    pub(crate) fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Runs `read` over the file at `path` (through a progress bar when it is large); a file that
/// does not open, and any error `read` returns, name `path`.
pub(crate) fn read_file<T>(
    path: &Path,
    read: impl FnOnce(&mut dyn Read) -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    Input::open(path)
        .map_err(|e| ReadError {
            location: Box::default(),
            kind: e.into(),
        })
        .and_then(|mut input| {
            let read = read(&mut input.reader);
            input.done();
            read
        })
        .map_err(|mut e| {
            e.location.path = Some(path.to_owned());
            e
        })
}

fn progress_bar(file: &File) -> Option<ProgressBar> {
    let len = file.metadata().ok()?.len();
    if len < PROGRESS_MIN_BYTES || !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} reading {bytes}/{total_bytes} [{wide_bar}] {bytes_per_sec}, {eta} left",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}
