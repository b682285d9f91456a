//! What the tests of writes in shared directories plant: FIFOs, sticky world-writable
//! directories (as `/tmp` is), and files and links that belong to another user.
//!
//! Another user is a second uid, which root gives a file with `lchown`: the tests need a
//! second owner, not a login, so no account is created (nothing in `/etc/passwd` changes,
//! and parallel test binaries do not contend for its lock). Not running as root, a test
//! that needs one skips, saying why ([`crate::skip`]).

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The uid given to "another user's" files: `nobody`'s on most systems.
pub const OTHER_UID: u32 = 65534;

/// [`OTHER_UID`] when this process may give files to it (it runs as root); else `None`,
/// after skipping `check` with the reason.
pub fn other_owner(check: &str) -> Option<u32> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        Some(OTHER_UID)
    } else {
        crate::skip::skip(
            check,
            crate::skip::Needs::Root,
            "giving a file to another uid needs root (CI runs the tests as root)",
        );
        None
    }
}

/// Gives `path` (a link itself, not its target) to `uid`, group and owner.
pub fn give_to(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
        .unwrap_or_else(|e| panic!("lchown {} to {uid}: {e}", path.display()));
}

/// Makes `dir` sticky and world-writable (mode 01777), as `/tmp` is.
pub fn make_sticky(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))
        .unwrap_or_else(|e| panic!("chmod 1777 {}: {e}", dir.display()));
}

/// Creates a FIFO at `path` (mode 0666 less the umask).
pub fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    if unsafe { libc::mkfifo(name.as_ptr(), 0o666) } != 0 {
        panic!("mkfifo {}: {}", path.display(), io::Error::last_os_error());
    }
}

/// Reads everything written into the FIFO at `path`, on a thread of its own: open it before
/// the writer does (a writer blocks until a reader comes) and join the handle for the bytes
/// once the writer has closed it.
pub fn read_fifo_on_a_thread(path: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let path = path.to_owned();
    std::thread::spawn(move || {
        std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
    })
}
