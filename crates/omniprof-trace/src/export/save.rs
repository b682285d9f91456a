//! Saving a file so that a save can neither corrupt nor clobber: every writer's `save` goes
//! through [`save_with`].
//!
//! What is at the path decides how it is written:
//!
//! - nothing, or a regular file: the content goes to a temporary file of this save's own,
//!   created exclusively (never opened through a link, never reused) next to the target,
//!   then renamed over it. Concurrent saves to one path each rename a complete file, so the
//!   last rename wins and the path always holds one whole file; a failed save removes only
//!   its own temporary file and leaves the old content. A replaced file keeps its
//!   permissions.
//! - a symbolic link: followed to its final target, which is saved as above; the link stays.
//! - a FIFO or a character device (`/dev/null`, `/dev/stdout`): written directly, in place.
//! - anything else (a directory, a block device, a socket): refused with a message naming
//!   what it is; nothing is written.
//!
//! ```
//! use std::io::Write;
//! use omniprof_trace::export::save::save_with;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("notes.txt");
//! let bytes = save_with(&path, |out| out.write_all(b"hello").map(|()| 5)).unwrap();
//! assert_eq!((bytes, std::fs::read(&path).unwrap()), (5, b"hello".to_vec()));
//!
//! let err = save_with(dir.path(), |out| out.write_all(b"x")).unwrap_err();
//! assert!(err.to_string().contains("it is a directory"), "{err}");
//! ```

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A trace could not be saved. The [`Trace`](crate::Trace) itself is untouched, so the
/// caller still holds everything that was recorded.
#[derive(Debug, thiserror::Error)]
#[error("cannot write trace to {path}: {stage}: {source}")]
pub struct WriteError {
    /// The path as the caller gave it.
    pub path: PathBuf,
    /// What failed: `refused` (the path is neither a file nor a stream), `create`, `write`
    /// or `rename`.
    pub stage: &'static str,
    #[source]
    pub source: io::Error,
}

/// Symbolic links followed before giving up, as the kernel's own limit (`ELOOP`).
const MAX_LINKS: usize = 40;
/// Temporary names tried before giving up (each taken one is skipped, never reused).
const MAX_TEMP_ATTEMPTS: u64 = 1000;
/// Output buffering between the writer and the file.
const BUFFER_BYTES: usize = 1 << 20;

/// Writes the file at `path` with `write`, which gets a buffered writer and returns what it
/// wrote (its statistics); see the [module docs](self) for what happens to what is at
/// `path`.
pub fn save_with<T>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> Result<T, WriteError> {
    let fail = |stage| {
        move |source| WriteError {
            path: path.to_owned(),
            stage,
            source,
        }
    };
    match target(path).map_err(fail("refused"))? {
        Target::Stream(stream) => {
            let file = OpenOptions::new()
                .write(true)
                .open(&stream)
                .map_err(fail("create"))?;
            fill(file, false, write).map_err(fail("write"))
        }
        Target::Replace { file, permissions } => {
            let (tmp, handle) = create_temporary(&file).map_err(fail("create"))?;
            if let Some(permissions) = permissions {
                // Best effort: a file we may not chmod is still replaced.
                let _ = handle.set_permissions(permissions);
            }
            let written = fill(handle, true, write).map_err(fail("write"));
            let renamed = written.and_then(|stats| {
                fs::rename(&tmp, &file)
                    .map(|()| stats)
                    .map_err(fail("rename"))
            });
            if renamed.is_err() {
                // Ours alone: created exclusively by this save.
                let _ = fs::remove_file(&tmp);
            }
            renamed
        }
    }
}

/// How the file at a path is written.
enum Target {
    /// Through a temporary file renamed over `file` (the final target of any link).
    Replace {
        file: PathBuf,
        permissions: Option<Permissions>,
    },
    /// In place (a FIFO or a character device).
    Stream(PathBuf),
}

/// Follows links from `path` to what it names, and decides how to write it.
fn target(path: &Path) -> io::Result<Target> {
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        let meta = match fs::symlink_metadata(&current) {
            Ok(meta) => meta,
            // Nothing there (or an unusable parent, which creating the file reports).
            Err(_) => {
                return Ok(Target::Replace {
                    file: current,
                    permissions: None,
                })
            }
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let link = fs::read_link(&current)?;
            current = match current.parent() {
                Some(dir) => dir.join(link),
                None => link,
            };
        } else if kind.is_file() {
            return Ok(Target::Replace {
                file: current,
                permissions: Some(meta.permissions()),
            });
        } else if is_stream(&kind) {
            return Ok(Target::Stream(current));
        } else {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                format!("it is {}, not a file", describe(&kind)),
            ));
        }
    }
    Err(io::Error::new(
        ErrorKind::InvalidInput,
        format!("more than {MAX_LINKS} levels of symbolic links"),
    ))
}

#[cfg(unix)]
pub(crate) fn is_stream(kind: &fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    kind.is_fifo() || kind.is_char_device()
}

#[cfg(not(unix))]
pub(crate) fn is_stream(_: &fs::FileType) -> bool {
    false
}

/// What a refused file is, for the message.
fn describe(kind: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "neither a file nor a stream"
    }
}

/// A new file next to `file`, created exclusively under a name of its own, and its path.
fn create_temporary(file: &Path) -> io::Result<(PathBuf, File)> {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    let name = file.file_name().unwrap_or(file.as_os_str());
    let mut last = None;
    for _ in 0..MAX_TEMP_ATTEMPTS {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".{}-{}.tmp",
            std::process::id(),
            SAVES.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = match dir {
            Some(dir) => dir.join(tmp_name),
            None => PathBuf::from(tmp_name),
        };
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(handle) => return Ok((tmp, handle)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| ErrorKind::AlreadyExists.into()))
}

/// Runs `write` into `file` through a buffer, then flushes (and syncs a regular file, so the
/// rename publishes data that is on disk).
fn fill<T>(
    file: File,
    sync: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> io::Result<T> {
    let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
    let stats = write(&mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    if sync {
        file.sync_data()?;
    }
    Ok(stats)
}
