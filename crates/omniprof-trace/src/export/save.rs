//! Saving a file so that a save can neither corrupt nor clobber, nor be redirected by another
//! user; documented on [`save_with`].

use std::ffi::{OsStr, OsString};
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
    /// The I/O error.
    pub source: io::Error,
}

/// Symbolic links followed before giving up, as the kernel's own limit (`ELOOP`).
const MAX_LINKS: usize = 40;
/// Temporary names tried before giving up (each taken one is skipped, never reused).
const MAX_TEMP_ATTEMPTS: u64 = 1000;
/// Output buffering between the writer and the file.
const BUFFER_BYTES: usize = 1 << 20;

/// Writes the file at `path` with `write`, which gets a buffered writer and returns what it
/// wrote (its statistics); see below for what happens to what is at
/// `path`.
///
/// Saving a file so that a save can neither corrupt nor clobber, nor be redirected by
/// another user: every writer's `save` goes through [`save_with`], or, where the caller holds
/// the directory (the on-demand writer, which must stay inside its allowed directory), through
/// [`save_in_with`].
///
/// What is at the path decides how [`save_with`] writes it:
///
/// - nothing, or a regular file: the content goes to a temporary file of this save's own,
///   created exclusively (never opened through a link, never reused) next to the target,
///   then renamed over it. Concurrent saves to one path each rename a complete file, so the
///   last rename wins and the path always holds one whole file; a failed save removes only
///   its own temporary file and leaves the old content. A replaced file keeps its
///   permissions only when it belongs to the saving user (its effective uid); another user's
///   file (a 0666 file planted in `/tmp`) is replaced by one with the default mode.
/// - a symbolic link: followed to its final target, which is saved as above; the link stays.
///   A link in a sticky world-writable directory (`/tmp`) is followed only when it belongs to
///   the saving user or to the directory's owner: the rule of the kernel's
///   `fs.protected_symlinks`, which a save that resolves links itself would otherwise
///   bypass. Another user's link there is refused, naming it and its owner.
/// - a FIFO or a character device (`/dev/null`, `/dev/stdout`): written directly, in place,
///   opened with `O_NOFOLLOW` (a link swapped in after the check is not followed) and
///   checked to still be a FIFO or device once open.
/// - anything else (a directory, a block device, a socket): refused with a message naming
///   what it is; nothing is written.
///
/// [`save_in_with`] writes the name relative to a directory handle the caller holds, so the
/// directory cannot be swapped for a link between the caller's check and the write. It is
/// stricter: only nothing or a regular file of the saving user's own is replaced there; a
/// link, a FIFO, a device or another user's file is refused without being opened (a FIFO
/// with no reader would block the writer for good).
///
/// ```
/// use std::io::Write;
/// use omniprof_trace::save_with;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("notes.txt");
/// let bytes = save_with(&path, |out| out.write_all(b"hello").map(|()| 5)).unwrap();
/// assert_eq!((bytes, std::fs::read(&path).unwrap()), (5, b"hello".to_vec()));
///
/// let err = save_with(dir.path(), |out| out.write_all(b"x")).unwrap_err();
/// assert!(err.to_string().contains("it is a directory"), "{err}");
/// ```
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
            let file = open_stream(&stream).map_err(fail("create"))?;
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

/// Writes the file `name` in the directory `dir` (a handle the caller opened and checked)
/// with `write`, as [`save_with`] does for a regular file, and names it `shown` in errors.
/// Only nothing or a regular file of the saving user's own is replaced: a link, a FIFO, a
/// device or another user's file at `name` is refused without being opened, and `name`
/// must be one path component. The temporary file is created with `O_CREAT | O_EXCL |
/// O_NOFOLLOW` and renamed over `name` inside `dir`, so a change to the path that named
/// `dir` (a directory swapped for a link) cannot move the write elsewhere.
///
/// ```
/// use std::io::Write;
/// use omniprof_trace::save_in_with;
///
/// let dir = tempfile::tempdir().unwrap();
/// let handle = std::fs::File::open(dir.path()).unwrap();
/// let shown = dir.path().join("t.json");
/// save_in_with(&handle, "t.json".as_ref(), &shown, |out| out.write_all(b"{}")).unwrap();
/// assert_eq!(std::fs::read(&shown).unwrap(), b"{}");
///
/// std::os::unix::fs::symlink("t.json", dir.path().join("link.json")).unwrap();
/// let err = save_in_with(&handle, "link.json".as_ref(), &shown, |out| out.write_all(b"x"));
/// assert!(err.unwrap_err().to_string().contains("it is a symbolic link"));
/// ```
#[cfg(unix)]
pub fn save_in_with<T>(
    dir: &File,
    name: &OsStr,
    shown: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> Result<T, WriteError> {
    let fail = |stage| {
        move |source| WriteError {
            path: shown.to_owned(),
            stage,
            source,
        }
    };
    let permissions = at::check_replaceable(dir, name).map_err(fail("refused"))?;
    let (tmp, handle) = at::create_temporary(dir, name).map_err(fail("create"))?;
    if let Some(permissions) = permissions {
        // Best effort, as in `save_with`.
        let _ = handle.set_permissions(permissions);
    }
    let written = fill(handle, true, write).map_err(fail("write"));
    let renamed = written.and_then(|stats| {
        at::rename(dir, &tmp, name)
            .map(|()| stats)
            .map_err(fail("rename"))
    });
    if renamed.is_err() {
        // Ours alone: created exclusively by this save.
        at::remove(dir, &tmp);
    }
    renamed
}

/// The calls relative to a directory handle that [`save_in_with`] makes.
#[cfg(unix)]
mod at {
    use std::ffi::{CString, OsStr, OsString};
    use std::fs::{File, Permissions};
    use std::io::{self, ErrorKind};
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    use super::{effective_uid, temporary_name, MAX_TEMP_ATTEMPTS};

    /// `name` as a C string; one component, never `.`, `..` or empty.
    fn c_name(name: &OsStr) -> io::Result<CString> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                format!("{name:?} is not a file name (one path component)"),
            ));
        }
        CString::new(bytes).map_err(|_| {
            io::Error::new(ErrorKind::InvalidInput, "the file name contains a NUL byte")
        })
    }

    /// What is at `name` in `dir`, not following a link: `None` when nothing is.
    fn stat(dir: &File, name: &CString) -> io::Result<Option<libc::stat>> {
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
        if rc == 0 {
            return Ok(Some(st));
        }
        let e = io::Error::last_os_error();
        if e.kind() == ErrorKind::NotFound {
            Ok(None)
        } else {
            Err(e)
        }
    }

    /// Whether `name` in `dir` may be replaced, and the permissions its replacement keeps
    /// (those of a regular file of the saving user's own).
    pub(super) fn check_replaceable(dir: &File, name: &OsStr) -> io::Result<Option<Permissions>> {
        let Some(st) = stat(dir, &c_name(name)?)? else {
            return Ok(None);
        };
        let refuse = |what: String| Err(io::Error::new(ErrorKind::InvalidInput, what));
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG if st.st_uid == effective_uid() => {
                Ok(Some(Permissions::from_mode(st.st_mode & 0o7777)))
            }
            libc::S_IFREG => refuse(format!(
                "it is a file of uid {}, not of this process's user (uid {}): only a file of \
                 one's own is replaced here (another user may have planted it)",
                st.st_uid,
                effective_uid()
            )),
            libc::S_IFLNK => refuse(
                "it is a symbolic link, which is never followed here (it could lead outside \
                 the directory)"
                    .to_owned(),
            ),
            libc::S_IFIFO => refuse(
                "it is a FIFO, which is never opened here (with no reader it would block the \
                 writer for good)"
                    .to_owned(),
            ),
            libc::S_IFDIR => refuse("it is a directory, not a file".to_owned()),
            libc::S_IFCHR => refuse("it is a character device, not a file".to_owned()),
            libc::S_IFBLK => refuse("it is a block device, not a file".to_owned()),
            libc::S_IFSOCK => refuse("it is a socket, not a file".to_owned()),
            _ => refuse("it is neither a file nor a stream".to_owned()),
        }
    }

    /// A new file in `dir`, created exclusively (and never through a link) under a name of
    /// its own, and that name.
    pub(super) fn create_temporary(dir: &File, name: &OsStr) -> io::Result<(OsString, File)> {
        c_name(name)?;
        let mut last = None;
        for _ in 0..MAX_TEMP_ATTEMPTS {
            let tmp = temporary_name(name);
            let c_tmp = c_name(&tmp)?;
            let flags =
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: `dir` is an open descriptor and `c_tmp` a NUL-terminated string; the
            // mode is passed as the variadic argument `O_CREAT` reads.
            let fd = unsafe {
                libc::openat(
                    dir.as_raw_fd(),
                    c_tmp.as_ptr(),
                    flags,
                    0o666 as libc::c_uint,
                )
            };
            if fd >= 0 {
                // SAFETY: `fd` was just opened and is owned by nothing else.
                return Ok((tmp, unsafe { File::from_raw_fd(fd) }));
            }
            let e = io::Error::last_os_error();
            if e.kind() != ErrorKind::AlreadyExists {
                return Err(e);
            }
            last = Some(e);
        }
        Err(last.unwrap_or_else(|| ErrorKind::AlreadyExists.into()))
    }

    /// Renames `from` to `to`, both in `dir`.
    pub(super) fn rename(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = dir.as_raw_fd();
        // SAFETY: `fd` is an open descriptor and both names are NUL-terminated strings.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Removes `name` from `dir`, best effort (a failed save's own temporary file).
    pub(super) fn remove(dir: &File, name: &OsStr) {
        if let Ok(name) = c_name(name) {
            // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string.
            unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
        }
    }
}

/// How the file at a path is written.
enum Target {
    /// Through a temporary file renamed over `file` (the final target of any link), with
    /// the permissions of the file it replaces when that belongs to the writer.
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
            check_protected_link(&current, &meta)?;
            let link = fs::read_link(&current)?;
            current = match current.parent() {
                Some(dir) => dir.join(link),
                None => link,
            };
        } else if kind.is_file() {
            return Ok(Target::Replace {
                permissions: owned_by_writer(&meta).then(|| meta.permissions()),
                file: current,
            });
        } else if is_stream(&kind) {
            if let Some(shared) = foreign_in_shared_dir(&current, &meta)? {
                return Err(shared.refusal(
                    &current,
                    describe(&kind),
                    "its owner would read what is written (and the write waits until they \
                     do), as the kernel's fs.protected_fifos would refuse",
                ));
            }
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

/// Checks an output directory as [`save_with`] checks a file's path: follows the links from
/// `path` as it does, refusing one that it refuses (in a sticky world-writable directory
/// such as `/tmp`, a link that belongs neither to the saving user nor to the directory's
/// owner), and refuses, by the same rule, a directory there that belongs to another user,
/// whose owner could swap what is written into it for links (a file there is replaced by
/// one of the saving user; a directory cannot be). For writers that make a directory rather
/// than a file (the Parquet tables). Ok when nothing, or a directory that passes, is at the
/// end; the error names the link or directory, its owner and the directory holding it.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tables-{}", std::process::id()));
/// std::fs::create_dir(&dir).unwrap();
/// // This user's own directory, wherever it is.
/// omniprof_trace::check_output_dir(&dir).unwrap();
/// std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn check_output_dir(path: &Path) -> io::Result<()> {
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        let Ok(meta) = fs::symlink_metadata(&current) else {
            return Ok(());
        };
        if meta.is_dir() {
            return match foreign_in_shared_dir(&current, &meta)? {
                None => Ok(()),
                Some(shared) => Err(shared.refusal(
                    &current,
                    "a directory",
                    "its owner could swap what is written into it for links",
                )),
            };
        }
        if !meta.file_type().is_symlink() {
            return Ok(());
        }
        check_protected_link(&current, &meta)?;
        let link = fs::read_link(&current)?;
        current = match current.parent() {
            Some(dir) => dir.join(link),
            None => link,
        };
    }
    Err(io::Error::new(
        ErrorKind::InvalidInput,
        format!("more than {MAX_LINKS} levels of symbolic links"),
    ))
}

/// An entry of another user in a shared directory: what refusing it names.
struct Foreign {
    owner: u32,
    dir: PathBuf,
    dir_owner: u32,
    writer: u32,
}

impl Foreign {
    /// The error refusing `entry`, which is `what` (`a symbolic link`), because `why`.
    fn refusal(&self, entry: &Path, what: &str, why: &str) -> io::Error {
        io::Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "{} is {what} of uid {} in the sticky world-writable directory {} (owned by \
                 uid {}), and this process runs as uid {}: {why}; remove it or save elsewhere",
                entry.display(),
                self.owner,
                self.dir.display(),
                self.dir_owner,
                self.writer
            ),
        )
    }
}

/// Whether `entry` (whose metadata is `meta`) is another user's where the kernel's
/// `fs.protected_symlinks` would refuse to follow it were it a link: in a sticky
/// world-writable directory, belonging neither to the saving user nor to the directory's
/// owner.
#[cfg(unix)]
fn foreign_in_shared_dir(entry: &Path, meta: &fs::Metadata) -> io::Result<Option<Foreign>> {
    use std::os::unix::fs::MetadataExt;
    const STICKY_AND_WORLD_WRITABLE: u32 = 0o1002;
    let dir = match entry.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir_meta = fs::metadata(dir)?;
    let writer = effective_uid();
    if dir_meta.mode() & STICKY_AND_WORLD_WRITABLE != STICKY_AND_WORLD_WRITABLE
        || meta.uid() == writer
        || meta.uid() == dir_meta.uid()
    {
        return Ok(None);
    }
    Ok(Some(Foreign {
        owner: meta.uid(),
        dir: dir.to_owned(),
        dir_owner: dir_meta.uid(),
        writer,
    }))
}

#[cfg(not(unix))]
fn foreign_in_shared_dir(_: &Path, _: &fs::Metadata) -> io::Result<Option<Foreign>> {
    Ok(None)
}

/// Refuses to follow the link at `link` (whose metadata is `meta`) where the kernel's
/// `fs.protected_symlinks` would: in a sticky world-writable directory, a link that belongs
/// neither to the saving user nor to the directory's owner.
fn check_protected_link(link: &Path, meta: &fs::Metadata) -> io::Result<()> {
    match foreign_in_shared_dir(link, meta)? {
        None => Ok(()),
        Some(shared) => Err(shared.refusal(
            link,
            "a symbolic link",
            "it is not followed, as the kernel's fs.protected_symlinks would refuse",
        )),
    }
}

/// The user a save writes as (the effective uid, which the kernel checks).
#[cfg(unix)]
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether the file of `meta` belongs to the saving user, so that its replacement may keep
/// its permissions.
#[cfg(unix)]
fn owned_by_writer(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == effective_uid()
}

#[cfg(not(unix))]
fn owned_by_writer(_: &fs::Metadata) -> bool {
    true
}

/// Opens the FIFO or device at `path` for writing without following a link (one swapped in
/// since [`target`] looked is refused), and checks that what opened is still a stream (a
/// regular file swapped in would be written in place, over its content).
fn open_stream(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return io::Error::new(
                ErrorKind::InvalidInput,
                "it became a symbolic link while being opened; not followed",
            );
        }
        e
    })?;
    let kind = file.metadata()?.file_type();
    if !is_stream(&kind) {
        return Err(io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "it was a FIFO or a device, and is {} once opened; nothing was written",
                describe(&kind)
            ),
        ));
    }
    Ok(file)
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
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "neither a file nor a stream"
    }
}

/// A temporary name for a save of `name` that no save of this process used before:
/// `.<name>.<pid>-<n>.tmp`.
fn temporary_name(name: &OsStr) -> OsString {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    tmp_name
}

/// A new file next to `file`, created exclusively under a name of its own, and its path.
fn create_temporary(file: &Path) -> io::Result<(PathBuf, File)> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    let name = file.file_name().unwrap_or(file.as_os_str());
    let mut last = None;
    for _ in 0..MAX_TEMP_ATTEMPTS {
        let tmp_name = temporary_name(name);
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_became_a_link_before_it_opened_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "kept").unwrap();
        let link = dir.path().join("was-a-fifo");
        std::os::unix::fs::symlink(&victim, &link).unwrap();

        let err = open_stream(&link).unwrap_err();

        assert_eq!(
            err.to_string(),
            "it became a symbolic link while being opened; not followed"
        );
        assert_eq!(fs::read_to_string(&victim).unwrap(), "kept");
    }

    #[test]
    fn a_stream_that_became_a_regular_file_before_it_opened_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("was-a-fifo");
        fs::write(&file, "kept").unwrap();

        let err = open_stream(&file).unwrap_err();

        assert_eq!(
            err.to_string(),
            "it was a FIFO or a device, and is a regular file once opened; nothing was written"
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "kept");
    }

    #[test]
    fn a_character_device_still_opens_as_a_stream() {
        assert!(open_stream(Path::new("/dev/null")).is_ok());
    }
}
