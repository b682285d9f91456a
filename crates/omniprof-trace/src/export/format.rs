//! The trace file formats, named by extension, and [`save`]: the one way every caller
//! (sessions, the trace-directory handler, the CLI, the Python package) writes a trace, in
//! the format its path names, through [`save_with`].
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace};
//! use omniprof_trace::{save, Format};
//!
//! let mut trace = Trace::new(1_000_000, 2_000_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 1_100_000, 1_500_000));
//! let dir = tempfile::tempdir().unwrap();
//! assert_eq!(Format::from_path("run.pftrace".as_ref()).unwrap(), Format::Perfetto);
//! for name in ["t.pt.trace.json", "t.pt.trace.json.gz", "t.pftrace"] {
//!     let stats = save(&trace, dir.path().join(name)).unwrap();
//!     assert!(stats.bytes > 0);
//! }
//! let err = save(&trace, dir.path().join("t.txt")).unwrap_err();
//! assert!(err.to_string().contains(".json, .json.gz, .pftrace"));
//! ```

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::chrome::{self, ChromeStream};
use super::outcome::WriteStats;
use super::perfetto::{self, PerfettoLayout, PerfettoStream};
use super::save::{is_stream, save_with, WriteError};
use crate::trace::Trace;

/// Viewer limits worth a warning (`docs/performance.md`, section 5).
const CHROME_TRACING_LIMIT: u64 = 256 << 20;
const PERFETTO_UI_LIMIT: u64 = 1 << 30;
/// gzip level of `.json.gz`: most of level 9's ratio at a fraction of its time.
const GZIP_LEVEL: u32 = 5;

/// A trace file format, named by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Kineto's Chrome trace JSON (`.json`).
    Json,
    /// The same, gzip-compressed (`.json.gz`).
    JsonGz,
    /// Perfetto's native protobuf trace (`.pftrace`).
    Perfetto,
}

impl Format {
    /// Every format, in the order error messages list them.
    pub const ALL: [Format; 3] = [Self::Json, Self::JsonGz, Self::Perfetto];

    /// The extension that selects the format.
    pub const fn extension(self) -> &'static str {
        match self {
            Self::Json => ".json",
            Self::JsonGz => ".json.gz",
            Self::Perfetto => ".pftrace",
        }
    }

    /// The format a path's name ends with.
    pub fn from_path(path: &Path) -> Result<Self, UnknownFormat> {
        let name = path.file_name().map(|n| n.to_string_lossy());
        // `.json.gz` before `.json`: the longest extension that matches wins.
        [Self::JsonGz, Self::Json, Self::Perfetto]
            .into_iter()
            .find(|f| name.as_deref().is_some_and(|n| n.ends_with(f.extension())))
            .ok_or_else(|| UnknownFormat {
                path: path.to_owned(),
            })
    }

    /// The format [`save`] writes at `path`: the one its extension names, or Kineto's JSON
    /// for an existing FIFO or character device whose name names none (`/dev/stdout`,
    /// `/dev/null`), which is written in place. Callers that check a path before the work
    /// that fills it (the CLI) ask this, so that they accept what the save accepts.
    pub fn for_path(path: &Path) -> Result<Self, UnknownFormat> {
        match Self::from_path(path) {
            Err(_) if std::fs::metadata(path).is_ok_and(|m| is_stream(&m.file_type())) => {
                Ok(Self::Json)
            }
            format => format,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.extension())
    }
}

/// A path whose extension names no [`Format`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: unknown trace format; the file name must end in one of: {}", path.display(), supported())]
pub struct UnknownFormat {
    /// The path as given.
    pub path: PathBuf,
}

fn supported() -> String {
    Format::ALL.map(Format::extension).join(", ")
}

impl From<UnknownFormat> for WriteError {
    fn from(e: UnknownFormat) -> Self {
        let message = e.to_string();
        Self {
            path: e.path,
            stage: "format",
            source: io::Error::new(io::ErrorKind::InvalidInput, message),
        }
    }
}

/// Saves `trace` to `path` in the format its extension names ([`Format::from_path`]),
/// through [`save_with`]: the path ends up holding the whole trace
/// or what it held before, and a link, FIFO or device there is written through, never
/// replaced (a FIFO or device whose name has no known extension gets JSON), except another
/// user's link in a sticky world-writable directory, which is refused. Any other unknown
/// extension writes nothing.
pub fn save(trace: &Trace, path: impl AsRef<Path>) -> Result<WriteStats, WriteError> {
    let path = path.as_ref();
    // A stream (`/dev/stdout`, a FIFO) names no format: it gets Kineto's JSON.
    save_as(trace, path, Format::for_path(path)?)
}

/// [`save`], in `format` whatever `path`'s name says: for a caller with a rule of its own
/// (PyTorch's `export_chrome_trace` writes JSON under any name, gzip under a `.gz` one).
pub fn save_as(
    trace: &Trace,
    path: impl AsRef<Path>,
    format: Format,
) -> Result<WriteStats, WriteError> {
    let path = path.as_ref();
    let stats = save_with(path, |out| encode(trace, format, path, out))?;
    if format != Format::Perfetto {
        warn_about_viewers(path, stats.bytes);
    }
    Ok(stats)
}

/// Saves `trace` as `name` inside the directory handle `dir`, in the format `shown` (the
/// path the caller reports) names, through [`save_in_with`](super::save::save_in_with): only nothing
/// or a regular file of the saving user's own is replaced, and the write stays in `dir`
/// whatever happens to the path that named it. The on-demand writer saves this way.
#[cfg(unix)]
pub fn save_in(
    trace: &Trace,
    dir: &std::fs::File,
    name: &std::ffi::OsStr,
    shown: &Path,
) -> Result<WriteStats, WriteError> {
    let format = Format::from_path(shown)?;
    let stats =
        super::save::save_in_with(dir, name, shown, |out| encode(trace, format, shown, out))?;
    if format != Format::Perfetto {
        warn_about_viewers(shown, stats.bytes);
    }
    Ok(stats)
}

/// Saves a trace that `feed` delivers item by item to a [`ChromeStream`] (as the reader
/// streams it), to `path` as [`save`] does: JSON or gzip JSON only (a `.pftrace` is
/// streamed with [`save_perfetto_streamed`]). What `feed` returns stops the save when it is an
/// error; a stream that [`NeedsWholeTrace`](super::NeedsWholeTrace) fails with it as the
/// source of the [`WriteError`].
pub fn save_streamed(
    path: impl AsRef<Path>,
    feed: impl FnOnce(&mut ChromeStream<&mut dyn Write>) -> io::Result<()>,
) -> Result<WriteStats, WriteError> {
    let path = path.as_ref();
    let format = Format::for_path(path)?;
    let name = path.to_string_lossy().into_owned();
    let stats = save_with(path, |out| match format {
        Format::Json => {
            let mut stream = ChromeStream::new(out, &name);
            feed(&mut stream)?;
            stream.finish()
        }
        Format::JsonGz => {
            let level = flate2::Compression::new(GZIP_LEVEL);
            let mut enc = flate2::write::GzEncoder::new(out, level);
            let mut stream = ChromeStream::new(&mut enc as &mut dyn Write, &name);
            feed(&mut stream)?;
            let stats = stream.finish()?;
            enc.finish()?;
            Ok(stats)
        }
        Format::Perfetto => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a .pftrace is streamed with save_perfetto_streamed",
        )),
    })?;
    warn_about_viewers(path, stats.bytes);
    Ok(stats)
}

/// Saves a trace read a second time, item by item, to a [`PerfettoStream`] made from what
/// the first read found (`layout`), to `path` as [`save`] does; `path` must name a
/// `.pftrace`. What `feed` returns stops the save when it is an error.
pub fn save_perfetto_streamed(
    path: impl AsRef<Path>,
    layout: PerfettoLayout,
    feed: impl FnOnce(&mut PerfettoStream<&mut dyn Write>) -> io::Result<()>,
) -> Result<WriteStats, WriteError> {
    let path = path.as_ref();
    let format = Format::for_path(path)?;
    save_with(path, |out| match format {
        Format::Perfetto => {
            let mut stream = PerfettoStream::new(layout, out)?;
            feed(&mut stream)?;
            stream.finish()
        }
        Format::Json | Format::JsonGz => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a streamed Perfetto trace is written to a .pftrace only",
        )),
    })
}

/// Writes `trace` to `out` in `format`; `path` names a JSON trace that names nothing.
fn encode(
    trace: &Trace,
    format: Format,
    path: &Path,
    out: &mut dyn Write,
) -> io::Result<WriteStats> {
    match format {
        Format::Json => write_json(trace, path, out),
        Format::JsonGz => {
            let level = flate2::Compression::new(GZIP_LEVEL);
            let mut enc = flate2::write::GzEncoder::new(out, level);
            let stats = write_json(trace, path, &mut enc)?;
            enc.finish()?;
            Ok(stats)
        }
        Format::Perfetto => perfetto::write_perfetto(trace, out),
    }
}

/// Chrome JSON, its `traceName` the path unless the trace names itself.
fn write_json(trace: &Trace, path: &Path, out: impl Write) -> io::Result<WriteStats> {
    let trace_name = match &trace.trace_name {
        Some(name) => name.clone(),
        None => path.to_string_lossy().into_owned(),
    };
    chrome::write_chrome(trace, &trace_name, out)
}

fn warn_about_viewers(path: &Path, bytes: u64) {
    if bytes > PERFETTO_UI_LIMIT {
        log::warn!(
            "{}: {} MB of JSON is more than the Perfetto UI loads comfortably (~1 GB); \
             consider .pftrace or a shorter capture",
            path.display(),
            bytes >> 20
        );
    } else if bytes > CHROME_TRACING_LIMIT {
        log::warn!(
            "{}: {} MB of JSON is more than chrome://tracing opens (~256 MB); use ui.perfetto.dev",
            path.display(),
            bytes >> 20
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_names_the_format() {
        let f = |p: &str| Format::from_path(Path::new(p));
        assert_eq!(f("a/run.pt.trace.json"), Ok(Format::Json));
        assert_eq!(f("run.pt.trace.json.gz"), Ok(Format::JsonGz));
        assert_eq!(f("run.pftrace"), Ok(Format::Perfetto));
        for bad in ["run.gz", "run.json.txt", "run", "json"] {
            let err = f(bad).unwrap_err();
            assert!(
                err.to_string()
                    .ends_with("must end in one of: .json, .json.gz, .pftrace"),
                "{err}"
            );
            assert!(err.to_string().starts_with(bad), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_device_or_fifo_without_an_extension_is_json_and_a_missing_file_is_not() {
        assert_eq!(Format::for_path(Path::new("/dev/null")), Ok(Format::Json));
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
        assert_eq!(Format::for_path(&fifo), Ok(Format::Json));
        let gz = dir.path().join("pipe.json.gz");
        assert_eq!(Format::for_path(&gz), Ok(Format::JsonGz));
        let missing = dir.path().join("plain");
        assert_eq!(
            Format::for_path(&missing),
            Err(UnknownFormat { path: missing })
        );
    }

    #[test]
    fn an_unknown_extension_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        let err = save(&Trace::new(0, 1), &path).unwrap_err();
        assert_eq!(err.stage, "format");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
