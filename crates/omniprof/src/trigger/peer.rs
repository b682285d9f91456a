//! Who is on the other end of a connection: the kernel's word for it, not the file mode of
//! the socket (a mode can be loosened; the credentials cannot be forged).

use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;

/// The effective uid of the process that connected `stream`, as the kernel recorded it at
/// `connect()`.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a live socket owned by `stream`; `cred` and `len` are valid for
    // writes and `len` holds the size of `cred`, as SO_PEERCRED requires.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// The effective uid of the process that connected `stream` (BSD and macOS).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: the fd is a live socket owned by `stream`; both out-pointers are valid.
    let rc = unsafe { libc::getpeereid(stream.as_raw_fd(), &mut uid, &mut gid) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(uid)
}

/// Allows a peer only when it runs as the same uid as this process (no exception for root:
/// root can read the socket directory anyway, and refusing it costs nothing).
pub(super) fn check_peer(peer_uid: u32, own_uid: u32) -> Result<(), String> {
    if peer_uid == own_uid {
        Ok(())
    } else {
        Err(format!(
            "peer uid {peer_uid} may not trigger this process (only uid {own_uid} may)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_uid_passes() {
        assert!(check_peer(1000, 1000).is_ok());
        assert!(check_peer(0, 0).is_ok());
        let err = check_peer(1001, 1000).unwrap_err();
        assert!(
            err.contains("peer uid 1001") && err.contains("uid 1000"),
            "{err}"
        );
        assert!(check_peer(0, 1000).is_err(), "root gets no exception");
        assert!(check_peer(1000, 0).is_err());
    }

    #[test]
    fn a_socket_pair_reports_our_own_uid() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(
            peer_uid(&a).unwrap(),
            super::super::runtime_dir::current_uid()
        );
    }
}
