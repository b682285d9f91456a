//! The per-user directory that holds the trigger sockets, and the rules that make it private.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The environment variable naming the per-user runtime directory (XDG base directories).
const XDG_RUNTIME_DIR_ENV: &str = "XDG_RUNTIME_DIR";
/// The name of omniprof's directory inside `$XDG_RUNTIME_DIR`.
const XDG_SUBDIR: &str = "omniprof";
/// The mode the directory is created with; any group or other bit on an existing one refuses it.
const DIR_MODE: u32 = 0o700;
/// Suffix of a socket file; the stem is the listening process's pid.
pub(super) const SOCKET_SUFFIX: &str = ".sock";

/// The directory the trigger sockets of one user live in: `$XDG_RUNTIME_DIR/omniprof` when
/// `$XDG_RUNTIME_DIR` is set and owned by this user, else `<temp dir>/omniprof-<uid>`.
///
/// It is created with mode 0700. An existing directory is used only when it is a real
/// directory (not a symlink), owned by this user, with no group or other permission bits;
/// otherwise it is refused (never repaired: a directory someone else could write to may
/// already hold their sockets), and the error names the path, its owner and its mode, and
/// the remedy. So any user who creates `/tmp/omniprof-<uid>` first disables that user's
/// on-demand tracing until the directory is removed or `XDG_RUNTIME_DIR` names a private
/// directory of the user; the error says so.
///
/// ```no_run
/// let dir = omniprof::on_demand::RuntimeDir::user()?;
/// println!("trigger sockets live in {}", dir.path().display());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDir {
    path: PathBuf,
}

impl RuntimeDir {
    /// This user's runtime directory (see [`RuntimeDir`]), created if missing.
    pub fn user() -> io::Result<Self> {
        Self::at(default_path())
    }

    /// The directory at `path` under the same rules as [`RuntimeDir::user`]: created with
    /// mode 0700 if missing (its parent must exist), refused if it is not a private
    /// directory of this user.
    pub fn at(path: impl Into<PathBuf>) -> io::Result<Self> {
        let path = path.into();
        match DirBuilder::new().mode(DIR_MODE).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create trigger directory {}: {e}", path.display()),
                ))
            }
        }
        check_private(&path, current_uid())?;
        Ok(Self { path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the process `pid` listens: `<dir>/<pid>.sock`.
    pub fn socket_path(&self, pid: u32) -> PathBuf {
        self.path.join(format!("{pid}{SOCKET_SUFFIX}"))
    }
}

/// The effective uid of this process.
pub(super) fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `$XDG_RUNTIME_DIR/omniprof` when that directory exists and is ours, else
/// `<temp>/omniprof-<uid>`.
fn default_path() -> PathBuf {
    let uid = current_uid();
    if let Some(xdg) = std::env::var_os(XDG_RUNTIME_DIR_ENV).filter(|v| !v.is_empty()) {
        let xdg = PathBuf::from(xdg);
        // A runtime dir of another user (e.g. inherited through sudo) is not ours to use.
        if fs::metadata(&xdg).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
            return xdg.join(XDG_SUBDIR);
        }
    }
    std::env::temp_dir().join(format!("omniprof-{uid}"))
}

/// Refuses `path` unless it is a directory (not a symlink to one) owned by `uid` with no
/// group or other permission bits.
pub(super) fn check_private(path: &Path, uid: u32) -> io::Result<()> {
    let meta = fs::symlink_metadata(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot inspect trigger directory {}: {e}", path.display()),
        )
    })?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing trigger directory {}: {why}; it is never repaired, so on-demand \
                 tracing of uid {uid} stays off while it is there (another user who creates it \
                 first disables it): remove it (as its owner or root), or set XDG_RUNTIME_DIR \
                 to a directory of uid {uid} (its omniprof subdirectory is used instead)",
                path.display()
            ),
        ))
    };
    if !meta.file_type().is_dir() {
        return refuse("not a directory (symlinks are not followed)".to_owned());
    }
    if meta.uid() != uid {
        return refuse(format!("owned by uid {}, not {uid}", meta.uid()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return refuse(format!("mode {mode:04o} lets other users in"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// The uid of `nobody` on Linux.
    const NOBODY: u32 = 65534;

    #[test]
    fn creates_the_directory_with_mode_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RuntimeDir::at(tmp.path().join("rt")).unwrap();
        let meta = fs::metadata(dir.path()).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(dir.socket_path(42), tmp.path().join("rt/42.sock"));
        // A second open of the same private directory is fine.
        RuntimeDir::at(dir.path()).unwrap();
    }

    #[test]
    fn refuses_a_loose_mode_without_repairing_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rt");
        for mode in [0o777, 0o1777, 0o750, 0o701] {
            fs::create_dir_all(&path).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            let err = RuntimeDir::at(&path).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(&format!("{mode:04o}")), "{err}");
            let left = fs::metadata(&path).unwrap().mode() & 0o7777;
            assert_eq!(left, mode, "the mode was changed");
        }
    }

    #[test]
    fn refuses_a_directory_of_another_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let err = check_private(tmp.path(), current_uid() + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("owned by uid {}", current_uid())),
            "{err}"
        );
        assert!(err.contains(&tmp.path().display().to_string()), "{err}");

        // As root the real case can be built: a directory that belongs to `nobody`.
        if current_uid() == 0 {
            let path = tmp.path().join("theirs");
            fs::create_dir(&path).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&path, Some(NOBODY), None).unwrap();
            let err = RuntimeDir::at(&path).unwrap_err().to_string();
            assert!(err.contains(&format!("owned by uid {NOBODY}")), "{err}");
        } else {
            println!("not root: the foreign-owned directory is checked by uid only");
        }
    }

    #[test]
    fn refuses_a_symlink_and_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let real = RuntimeDir::at(tmp.path().join("real")).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(real.path(), &link).unwrap();
        let err = RuntimeDir::at(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(RuntimeDir::at(&file).is_err());
    }
}
