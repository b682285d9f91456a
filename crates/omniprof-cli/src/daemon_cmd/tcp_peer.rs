//! Who is on the other end of a loopback TCP connection. TCP carries no credentials, but on
//! Linux the peer's socket is in this machine's `/proc/net/tcp` (or `tcp6`), with the uid
//! that owns it: the entry whose local address is the peer's and whose remote address is
//! ours. dynolog's RPC trusts anyone who connects; this lets the daemon hold its RPC to the
//! same rule as its Unix sockets (same user or root).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The uid owning the socket at `peer` connected to our `local`, both on this machine.
pub(super) fn loopback_peer_uid(local: SocketAddr, peer: SocketAddr) -> io::Result<u32> {
    if !peer.ip().is_loopback() && !is_mapped_loopback(peer.ip()) {
        return Err(io::Error::other(format!("{peer} is not on this machine")));
    }
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(uid) = find_uid(&text, local, peer) {
            return Ok(uid);
        }
    }
    Err(io::Error::other(format!(
        "no socket at {peer} connected to {local} in /proc/net/tcp"
    )))
}

/// The uid column of the entry of `text` (a `/proc/net/tcp*` table) for the socket at
/// `peer` connected to `local`.
fn find_uid(text: &str, local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (from, to, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (same(parse(from)?, peer) && same(parse(to)?, local)).then(|| uid.parse().ok())?
    })
}

/// Two addresses alike, an IPv4 one and its IPv4-mapped IPv6 form included.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

fn is_mapped_loopback(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
}

/// `0100007F:06F2` (IPv4) or 32 hex digits and a port (IPv6): the address in the kernel's
/// memory order, printed as 32-bit words in this machine's byte order.
fn parse(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<[u8; 4]> = (0..addr.len() / 8)
        .map(|i| u32::from_str_radix(addr.get(8 * i..8 * i + 8)?, 16).ok())
        .map(|w| w.map(u32::to_ne_bytes))
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(*w)),
        [a, b, c, d] => IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from([*a, *b, *c, *d].concat()).ok()?,
        )),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    #[test]
    fn the_uid_of_a_loopback_peer_is_our_own() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server_end, peer) = listener.accept().unwrap();
        let uid = loopback_peer_uid(server_end.local_addr().unwrap(), peer).unwrap();
        // SAFETY: geteuid has no preconditions.
        assert_eq!(uid, unsafe { libc::geteuid() });
    }

    #[test]
    fn an_entry_is_found_by_both_ends_and_a_remote_peer_is_refused() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                     0: 0100007F:06F2 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n\
                     1: 0100007F:A000 0100007F:06F2 01 00000000:00000000 00:00000000 00000000  1000        0 2\n";
        let daemon: SocketAddr = "127.0.0.1:1778".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:40960".parse().unwrap();
        assert_eq!(find_uid(table, daemon, peer), Some(1000));
        assert_eq!(find_uid(table, peer, daemon), None);
        let far: SocketAddr = "10.0.0.1:40960".parse().unwrap();
        assert!(loopback_peer_uid(daemon, far).is_err());
    }
}
