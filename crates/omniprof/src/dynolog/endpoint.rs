//! One named datagram socket of the fabric, and the names it lives under.
//!
//! A name lives in Linux's abstract namespace unless `KINETO_IPC_SOCKET_DIR` names a
//! directory, where it is a socket file. Kineto's address of an abstract name ends with a
//! NUL that is part of the name (`"\0dynolog\0"`, an address length of 2 + 9): a daemon
//! bound to `"\0dynolog"` alone never hears from it, so [`sockaddr`] adds it too.
//!
//! The receiving socket asks the kernel for each sender's credentials (`SO_PASSCRED`): the
//! pid and uid that come with a datagram are the kernel's word, not the message's.

use std::ffi::OsStr;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::wire::FABRIC_MAX_DATAGRAM;

/// The environment variable naming the directory of the fabric's socket files (else the
/// abstract namespace); Kineto's client and dynolog read the same one.
pub const KINETO_IPC_SOCKET_DIR_ENV: &str = "KINETO_IPC_SOCKET_DIR";
/// The longest name: `sun_path` holds 108 bytes, two of them the NULs around an abstract
/// name.
const MAX_NAME: usize = 106;

/// Where the fabric's names live.
///
/// ```
/// use omniprof::on_demand::KinetoFabric;
///
/// let fabric = KinetoFabric::Dir("/run/user/1000/kineto".into());
/// assert_eq!(fabric.describe("dynolog"), "/run/user/1000/kineto/dynolog");
/// assert_eq!(KinetoFabric::Abstract.describe("dynolog"), "@dynolog");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KinetoFabric {
    /// Linux's abstract socket namespace (no files, no permissions).
    Abstract,
    /// Socket files in this directory.
    Dir(PathBuf),
}

impl KinetoFabric {
    /// `KINETO_IPC_SOCKET_DIR` when set and not empty, else the abstract namespace.
    pub fn from_env() -> Self {
        match std::env::var_os(KINETO_IPC_SOCKET_DIR_ENV).filter(|d| !d.is_empty()) {
            Some(dir) => Self::Dir(dir.into()),
            None => Self::Abstract,
        }
    }

    /// How `name` reads in messages: `@name` (abstract, as `ss -x` shows it) or its path.
    pub fn describe(&self, name: &str) -> String {
        match self {
            Self::Abstract => format!("@{name}"),
            Self::Dir(dir) => dir.join(name).display().to_string(),
        }
    }
}

/// The address a datagram came from, to reply to.
#[derive(Clone, Copy)]
pub struct FabricAddr {
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
}

impl FabricAddr {
    /// The sender's name: an abstract name without its NULs, or a socket file's name; empty
    /// for an unnamed sender (which cannot be replied to).
    pub fn name(&self) -> String {
        let bytes = self.path_bytes();
        let bytes = match bytes.split_first() {
            Some((0, rest)) => rest,
            _ => bytes,
        };
        let bytes = bytes.split(|&b| b == 0).next().unwrap_or_default();
        let name = match bytes.iter().rposition(|&b| b == b'/') {
            Some(slash) => &bytes[slash + 1..],
            None => bytes,
        };
        String::from_utf8_lossy(name).into_owned()
    }

    /// Whether the sender has a name to reply to.
    pub fn is_named(&self) -> bool {
        !self.path_bytes().is_empty()
    }

    fn path_bytes(&self) -> &[u8] {
        let family = std::mem::size_of::<libc::sa_family_t>();
        let len = (self.len as usize).saturating_sub(family).min(108);
        // SAFETY: `sun_path` is an array of `c_char` (one byte each) of 108 elements, and
        // `len` is at most 108.
        unsafe { std::slice::from_raw_parts(self.addr.sun_path.as_ptr().cast::<u8>(), len) }
    }
}

impl std::fmt::Debug for FabricAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FabricAddr({:?})", self.name())
    }
}

/// The kernel's word on who sent a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderCredentials {
    /// The sending process (in this process's pid namespace).
    pub pid: u32,
    /// Its effective uid.
    pub uid: u32,
}

/// One received datagram.
#[derive(Debug)]
pub struct Datagram {
    /// Its bytes; at most [`FABRIC_MAX_DATAGRAM`].
    pub bytes: Vec<u8>,
    /// Whether it was longer than [`FABRIC_MAX_DATAGRAM`] and cut off.
    pub truncated: bool,
    /// Where it came from.
    pub from: FabricAddr,
    /// Who sent it (absent only if the kernel attached no credentials).
    pub sender: Option<SenderCredentials>,
}

/// A bound datagram socket of the fabric. A socket file it created is removed on drop.
///
/// ```no_run
/// use omniprof::on_demand::{FabricMessage, FabricSocket, KinetoFabric};
///
/// let fabric = KinetoFabric::from_env();
/// let me = FabricSocket::bind("myclient", &fabric)?;
/// me.send_to_name("dynolog", &fabric, &FabricMessage::new("req", Vec::new()).encode())?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FabricSocket {
    fd: OwnedFd,
    file: Option<PathBuf>,
}

impl FabricSocket {
    /// Binds `name` in `fabric`. A socket file is given mode 0600 (0666 for root, whose
    /// daemon serves every user), and a name already taken fails with
    /// [`ErrorKind::AddrInUse`].
    pub fn bind(name: &str, fabric: &KinetoFabric) -> io::Result<Self> {
        let fd = new_socket()?;
        let (addr, len) = sockaddr(name, fabric)?;
        // SAFETY: `addr` is a valid `sockaddr_un` of which `len` bytes are meaningful.
        let rc = unsafe { libc::bind(fd.as_raw_fd(), std::ptr::addr_of!(addr).cast(), len) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let file = match fabric {
            KinetoFabric::Abstract => None,
            KinetoFabric::Dir(dir) => Some(dir.join(name)),
        };
        if let Some(path) = &file {
            let mode = if current_uid() == 0 { 0o666 } else { 0o600 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(Self { fd, file })
    }

    /// Binds `name` for a daemon, the one server of the name: a socket file left by a
    /// daemon that is gone (nothing answers on it) is replaced when it is this user's; a live
    /// one, another user's, or something that is not a socket is refused, and the error
    /// says whose it is and what to do.
    pub fn bind_server(name: &str, fabric: &KinetoFabric) -> io::Result<Self> {
        let refuse = |why: String| io::Error::new(ErrorKind::AddrInUse, why);
        match (Self::bind(name, fabric), fabric) {
            (Err(e), KinetoFabric::Abstract) if e.kind() == ErrorKind::AddrInUse => {
                Err(refuse(format!(
                    "the abstract socket {} is taken by another process (a dynolog, or another \
                     omniprof daemon): stop it, or give this daemon and the traced processes \
                     {KINETO_IPC_SOCKET_DIR_ENV}=<a directory of yours>",
                    fabric.describe(name)
                )))
            }
            (Err(e), KinetoFabric::Dir(dir)) if e.kind() == ErrorKind::AddrInUse => {
                let path = dir.join(name);
                let meta = std::fs::symlink_metadata(&path)?;
                if !meta.file_type().is_socket() {
                    return Err(refuse(format!(
                        "{} exists and is not a socket; remove it or choose another {}",
                        path.display(),
                        KINETO_IPC_SOCKET_DIR_ENV
                    )));
                }
                if meta.uid() != current_uid() {
                    return Err(refuse(format!(
                        "{} belongs to uid {}, not {}: another user's daemon serves this \
                         directory; use a directory of your own in {}",
                        path.display(),
                        meta.uid(),
                        current_uid(),
                        KINETO_IPC_SOCKET_DIR_ENV
                    )));
                }
                if is_served(&path) {
                    return Err(refuse(format!(
                        "another daemon already serves {}; stop it first",
                        path.display()
                    )));
                }
                log::info!("daemon: replacing the stale socket {}", path.display());
                std::fs::remove_file(&path)?;
                Self::bind(name, fabric)
            }
            (other, _) => other,
        }
    }

    /// The socket file, when the fabric is a directory.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// How long [`FabricSocket::recv`] waits; `None` waits for ever.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let tv = match timeout {
            Some(t) => libc::timeval {
                tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
                // A zero timeval would mean "no timeout": a zero timeout waits 1 µs.
                tv_usec: libc::suseconds_t::from(t.subsec_micros())
                    .max(libc::suseconds_t::from(t.is_zero())),
            },
            None => libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
        };
        // SAFETY: the fd is a live socket, `tv` a valid timeval of the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::addr_of!(tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for one datagram (up to the read timeout: then [`ErrorKind::WouldBlock`]).
    pub fn recv(&self) -> io::Result<Datagram> {
        let mut buf = vec![0u8; FABRIC_MAX_DATAGRAM];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid value of these plain C structs.
        let mut from: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        // Room for one SCM_CREDENTIALS message, u64-aligned as cmsg headers need.
        let mut control = [0u64; 8];
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = std::ptr::addr_of_mut!(from).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: every pointer in `msg` points at a live buffer of the length it gives.
        let got = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
        buf.truncate(got);
        let sender = credentials(&msg);
        Ok(Datagram {
            bytes: buf,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            from: FabricAddr {
                addr: from,
                len: msg.msg_namelen,
            },
            sender,
        })
    }

    /// Sends `bytes` to `to` without waiting: a receiver whose queue is full loses it
    /// ([`ErrorKind::WouldBlock`]).
    pub fn send_to(&self, to: &FabricAddr, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: `bytes` is valid for its length; `to.addr` holds `to.len` meaningful bytes.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                std::ptr::addr_of!(to.addr).cast(),
                to.len,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sends `bytes` to the socket named `name` in `fabric`.
    pub fn send_to_name(&self, name: &str, fabric: &KinetoFabric, bytes: &[u8]) -> io::Result<()> {
        let (addr, len) = sockaddr(name, fabric)?;
        self.send_to(&FabricAddr { addr, len }, bytes)
    }
}

impl Drop for FabricSocket {
    fn drop(&mut self) {
        if let Some(path) = &self.file {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A datagram socket that hears its senders' credentials.
fn new_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let on: libc::c_int = 1;
    // SAFETY: the fd is a live socket, `on` a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            std::ptr::addr_of!(on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The address of `name` in `fabric`, as Kineto builds it (see the module docs).
fn sockaddr(name: &str, fabric: &KinetoFabric) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    let invalid = |why: String| io::Error::new(ErrorKind::InvalidInput, why);
    if name.is_empty() || name.len() > MAX_NAME || name.contains(['\0', '/']) {
        return Err(invalid(format!("invalid fabric name {name:?}")));
    }
    // The bytes of sun_path: NUL, name, NUL; or the path and its NUL.
    let path: Vec<u8> = match fabric {
        KinetoFabric::Abstract => [&[0u8][..], name.as_bytes(), &[0]].concat(),
        KinetoFabric::Dir(dir) => {
            let full = dir.join(name);
            [OsStr::as_bytes(full.as_os_str()), &[0]].concat()
        }
    };
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() > addr.sun_path.len() {
        return Err(invalid(format!(
            "the socket path {} is longer than {} bytes",
            fabric.describe(name),
            addr.sun_path.len() - 1
        )));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (slot, byte) in addr.sun_path.iter_mut().zip(&path) {
        *slot = *byte as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + path.len();
    Ok((addr, len as libc::socklen_t))
}

/// The credentials the kernel attached to a received message.
fn credentials(msg: &libc::msghdr) -> Option<SenderCredentials> {
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer within
    // `msg_controllen`, and the data of an SCM_CREDENTIALS message is a `ucred`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
            {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::ucred>());
                return Some(SenderCredentials {
                    pid: u32::try_from(cred.pid).ok()?,
                    uid: cred.uid,
                });
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// Whether a process is bound to the datagram socket file at `path` (connecting to a file
/// nobody is bound to is refused).
fn is_served(path: &Path) -> bool {
    std::os::unix::net::UnixDatagram::unbound().is_ok_and(|probe| probe.connect(path).is_ok())
}

/// The effective uid of this process.
pub(crate) fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abstract_name_carries_kinetos_trailing_nul() {
        let (addr, len) = sockaddr("dynolog", &KinetoFabric::Abstract).unwrap();
        assert_eq!(len as usize, 2 + 1 + 7 + 1);
        assert_eq!(addr.sun_path[0], 0);
        assert_eq!(addr.sun_path[8], 0);
        let from = FabricAddr { addr, len };
        assert_eq!(from.name(), "dynolog");
        assert!(from.is_named());
        let (_, len) = sockaddr("dynolog", &KinetoFabric::Dir("/tmp/k".into())).unwrap();
        assert_eq!(len as usize, 2 + "/tmp/k/dynolog".len() + 1);
        for bad in ["", "a/b", &"x".repeat(107)] {
            assert!(sockaddr(bad, &KinetoFabric::Abstract).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_datagram_carries_the_senders_pid_and_uid() {
        let dir = tempfile::tempdir().unwrap();
        let fabric = KinetoFabric::Dir(dir.path().to_owned());
        let server = FabricSocket::bind("server", &fabric).unwrap();
        let client = FabricSocket::bind("client", &fabric).unwrap();
        client.send_to_name("server", &fabric, b"hello").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let got = server.recv().unwrap();
        assert_eq!(got.bytes, b"hello");
        assert!(!got.truncated);
        assert_eq!(got.from.name(), "client");
        assert_eq!(
            got.sender,
            Some(SenderCredentials {
                pid: std::process::id(),
                uid: current_uid()
            })
        );
        server.send_to(&got.from, b"back").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(client.recv().unwrap().bytes, b"back");
        let path = dir.path().join("server");
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, if current_uid() == 0 { 0o666 } else { 0o600 });
        drop(server);
        assert!(!path.exists(), "the socket file is removed on drop");
    }

    #[test]
    fn a_server_replaces_a_stale_socket_and_refuses_a_live_one_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let fabric = KinetoFabric::Dir(dir.path().to_owned());
        let live = FabricSocket::bind_server("dynolog", &fabric).unwrap();
        let err = FabricSocket::bind_server("dynolog", &fabric).unwrap_err();
        assert!(
            err.to_string().contains("another daemon already serves"),
            "{err}"
        );
        // A daemon killed without cleaning up leaves its file behind: closed, not removed.
        let mut live = live;
        live.file = None;
        drop(live);
        FabricSocket::bind_server("dynolog", &fabric).unwrap();
        let stale = dir.path().join("stale");
        drop(std::os::unix::net::UnixDatagram::bind(&stale).unwrap());
        assert!(stale.exists());
        FabricSocket::bind_server("stale", &fabric).unwrap();
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        let err = FabricSocket::bind_server("plain", &fabric).unwrap_err();
        assert!(err.to_string().contains("is not a socket"), "{err}");
    }

    #[test]
    fn an_oversized_datagram_is_marked_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let fabric = KinetoFabric::Dir(dir.path().to_owned());
        let server = FabricSocket::bind("s", &fabric).unwrap();
        let client = std::os::unix::net::UnixDatagram::unbound().unwrap();
        client
            .send_to(&vec![7u8; FABRIC_MAX_DATAGRAM + 10], dir.path().join("s"))
            .unwrap();
        let got = server.recv().unwrap();
        assert!(got.truncated);
        assert_eq!(got.bytes.len(), FABRIC_MAX_DATAGRAM);
        assert!(
            !got.from.is_named(),
            "an unbound sender has no name to reply to"
        );
    }
}
