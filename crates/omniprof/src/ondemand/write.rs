//! Writing an on-demand trace where its request was allowed to put it, and nowhere else.
//!
//! A request's `ACTIVITIES_LOG_FILE` is checked against the allowed directory
//! ([`crate::config::on_demand_trace_dir`]) when the request arrives
//! (`crates/omniprof/src/config/on_demand.rs`), but the trace is written seconds or minutes
//! later: by then a directory on the path may have been swapped for a symlink, and a link,
//! a FIFO or another user's file may have been planted at the file's name. So the writer
//! checks again, on handles rather than names:
//!
//! 1. It opens the allowed directory and walks down to the trace's directory one component at
//!    a time, relative to the handle of the one above (`openat` with `O_NOFOLLOW`), creating
//!    what is missing (`mkdirat`). A component that is a symlink is followed only if the
//!    directory it leads to lies inside the allowed directory (checked on the opened handle
//!    by walking up `..` to the allowed directory's device and inode), as the request check
//!    allowed.
//! 2. It saves the file relative to the handle it ends on
//!    ([`crate::save_in`]), which replaces only nothing or a regular
//!    file of this user's own and never opens what is at the name: a link is not followed,
//!    and a FIFO cannot block the profiler thread (which would leave the engine busy for
//!    good).
//!
//! A path outside the allowed directory (Kineto's default log file, or one from the base
//! config, which no request chose) has its own directory held the same way, without the
//! walk.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};

use super::error::TraceFailed;
use crate::Trace;

/// `..` levels climbed, at most, to find the allowed directory above a followed link.
const MAX_DEPTH: usize = 4096;

/// Saves `trace` at `path` (see the [module docs](self)).
pub(super) fn save(trace: &Trace, path: &Path) -> Result<(), TraceFailed> {
    let fail = |error: String| TraceFailed::Write {
        path: path.to_owned(),
        error,
    };
    let name = path
        .file_name()
        .ok_or_else(|| fail("the path names no file".to_owned()))?;
    let parent = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let allowed = crate::config::on_demand_trace_dir();
    let dir = match parent.strip_prefix(&allowed) {
        Ok(below) => hold_inside(Path::new(&allowed), below).map_err(fail)?,
        Err(_) => {
            std::fs::create_dir_all(parent)
                .map_err(|e| fail(format!("cannot create directory {}: {e}", parent.display())))?;
            open_dir(parent)
                .map_err(|e| fail(format!("cannot open directory {}: {e}", parent.display())))?
        }
    };
    crate::save_in(trace, &dir, name, path).map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// The directory `below` inside `allowed`, opened and held; see the [module docs](self).
fn hold_inside(allowed: &Path, below: &Path) -> Result<File, String> {
    std::fs::create_dir_all(allowed)
        .map_err(|e| format!("cannot create directory {}: {e}", allowed.display()))?;
    let root = open_dir(allowed).map_err(|e| {
        format!(
            "cannot open the allowed directory {}: {e}",
            allowed.display()
        )
    })?;
    let root_id = id(&root).map_err(|e| format!("{}: {e}", allowed.display()))?;
    let mut dir = root;
    let mut walked = allowed.to_path_buf();
    for component in below.components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::CurDir => continue,
            _ => {
                return Err(format!(
                    "{} does not stay inside the allowed directory {}",
                    below.display(),
                    allowed.display()
                ))
            }
        };
        walked.push(name);
        dir = step(&dir, name, root_id)
            .map_err(|why| format!("cannot create directory {}: {why}", walked.display()))?
            .ok_or_else(|| {
                format!(
                    "{} resolves (through a symbolic link) outside the allowed directory {}: \
                     it changed after the request was checked; nothing was written",
                    walked.display(),
                    allowed.display()
                )
            })?;
    }
    Ok(dir)
}

/// The directory `name` in `dir`, created if missing: `None` when it is a link to a
/// directory outside the one identified by `root`.
fn step(dir: &File, name: &OsStr, root: (u64, u64)) -> io::Result<Option<File>> {
    match open_at(dir, name, false) {
        Ok(sub) => return Ok(Some(sub)),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            make_dir_at(dir, name)?;
            return open_at(dir, name, false).map(Some);
        }
        // `O_NOFOLLOW` on a link: `ELOOP` (Linux) or `ENOTDIR` (`O_DIRECTORY` checked first).
        Err(e) if !is_link_at(dir, name) => return Err(e),
        Err(_) => {}
    }
    let sub = open_at(dir, name, true)?;
    Ok(is_inside(&sub, root)?.then_some(sub))
}

/// Whether `dir` is the directory identified by `root` or lies below it.
fn is_inside(dir: &File, root: (u64, u64)) -> io::Result<bool> {
    let mut current = dir.try_clone()?;
    for _ in 0..MAX_DEPTH {
        let here = id(&current)?;
        if here == root {
            return Ok(true);
        }
        let parent = open_at(&current, OsStr::new(".."), false)?;
        if id(&parent)? == here {
            // The filesystem root, whose `..` is itself.
            return Ok(false);
        }
        current = parent;
    }
    Ok(false)
}

/// A directory's device and inode.
fn id(dir: &File) -> io::Result<(u64, u64)> {
    let meta = dir.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

fn open_dir(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(ErrorKind::InvalidInput, "a NUL byte in the path"))
}

/// The directory `name` in `dir`, following a link there only with `follow`.
fn open_at(dir: &File, name: &OsStr, follow: bool) -> io::Result<File> {
    let name = c_name(name)?;
    let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Creates the directory `name` in `dir` (one made meanwhile by someone else is fine).
fn make_dir_at(dir: &File, name: &OsStr) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.kind() == ErrorKind::AlreadyExists {
        Ok(())
    } else {
        Err(e)
    }
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link_at(dir: &File, name: &OsStr) -> bool {
    let Ok(name) = c_name(name) else {
        return false;
    };
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is an open descriptor, `name` a NUL-terminated string and `st` a
    // writable `stat` that outlives the call.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK
}
