//! A process as a client of the daemon, the way PyTorch's Kineto is one: a thread polls the
//! daemon's endpoint every [`DAEMON_POLL_INTERVAL`] with the process's pid chain and job id,
//! and hands the config text of a non-empty reply to the process's profiler (omniprof's
//! on-demand engine: `crate::ondemand` starts the poller with it, so this module needs
//! nothing of the engine), which writes its own trace. So a fleet's dynolog (or `omniprof
//! daemon`) triggers an omniprof process with no change on its side.
//!
//! Like Kineto's, the poll says whether the profiler could start a trace now
//! ([`CONFIG_ACTIVITIES`] only while it is idle), so a daemon holds a request until the
//! process can take it. The client's endpoint is named
//! `omniprofclient<random>` (Kineto's is `dynoconfigclient<uuid>`): a daemon that knows the
//! prefix sends a request for a process to omniprof rather than to the Kineto that PyTorch
//! may run in the same process (dynolog does not, and gives it to whichever polls first).

use std::io::{self, ErrorKind};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::endpoint::{current_uid, FabricSocket, KinetoFabric};
use super::wire::{ConfigPoll, FabricMessage, CONFIG_ACTIVITIES, KIND_POLL};
use crate::lock;

/// The environment variable that makes Kineto (and omniprof) poll the daemon.
pub const KINETO_USE_DAEMON_ENV: &str = "KINETO_USE_DAEMON";
/// The daemon's name in the fabric.
pub const DAEMON_ENDPOINT: &str = "dynolog";
/// The start of the name of an omniprof process's endpoint.
pub const OMNIPROF_CLIENT_PREFIX: &str = "omniprofclient";
/// How often a client polls: Kineto's interval (its first poll comes as it starts).
pub const DAEMON_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long a poll waits for the daemon's reply. Kineto waits 50 ms; a loaded machine can
/// take longer to schedule the daemon, and the poll thread has nothing else to do.
const REPLY_WAIT: Duration = Duration::from_secs(1);
/// The environment variable of the job id Kineto reports (Slurm's).
const JOB_ID_ENV: &str = "SLURM_JOB_ID";
/// The longest pid chain walked (a process and its ancestors).
const MAX_ANCESTORS: usize = 64;

/// The pid that started the poll thread: a forked child does not poll (it has no thread).
static POLLING: Mutex<Option<u32>> = Mutex::new(None);

/// Whether `KINETO_USE_DAEMON` is set to anything but the empty string, as PyTorch tests it.
pub fn kineto_daemon_opted_in() -> bool {
    std::env::var_os(KINETO_USE_DAEMON_ENV).is_some_and(|v| !v.is_empty())
}

/// What the poller asks of the process's profiler.
pub(crate) struct Profiler {
    /// Whether it could start a trace now.
    pub(crate) idle: fn() -> bool,
    /// Runs a config text the daemon handed over.
    pub(crate) run: fn(&str),
}

/// Starts polling the daemon from this process, in the fabric `KINETO_IPC_SOCKET_DIR` names
/// (else the abstract namespace), for `profiler`; idempotent. Fails only when the client's
/// socket cannot be bound; a daemon that is not running is polled again at the next
/// interval.
pub(crate) fn start_polling(profiler: Profiler) -> io::Result<()> {
    let me = std::process::id();
    let mut polling = lock(&POLLING);
    if *polling == Some(me) {
        return Ok(());
    }
    let fabric = KinetoFabric::from_env();
    let name = format!("{OMNIPROF_CLIENT_PREFIX}{:016x}", random_u64());
    let socket = FabricSocket::bind(&name, &fabric).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot bind the daemon client's socket {}: {e}",
                fabric.describe(&name)
            ),
        )
    })?;
    socket.set_read_timeout(Some(REPLY_WAIT))?;
    std::thread::Builder::new()
        .name("omniprof daemon poll".into())
        .spawn(move || poll_loop(&socket, &fabric, &profiler))?;
    log::info!(
        "omniprof: polling the daemon at {} every {:?}",
        KinetoFabric::from_env().describe(DAEMON_ENDPOINT),
        DAEMON_POLL_INTERVAL
    );
    *polling = Some(me);
    Ok(())
}

fn poll_loop(socket: &FabricSocket, fabric: &KinetoFabric, profiler: &Profiler) {
    let pids = pid_chain();
    let job_id = job_id();
    let mut unreachable_said = false;
    loop {
        let idle = (profiler.idle)();
        let poll = ConfigPoll {
            config_type: if idle { CONFIG_ACTIVITIES } else { 0 },
            job_id,
            pids: pids.clone(),
        };
        let message = FabricMessage::new(KIND_POLL, poll.encode()).encode();
        match socket.send_to_name(DAEMON_ENDPOINT, fabric, &message) {
            Ok(()) => {
                unreachable_said = false;
                if let Some(text) = await_reply(socket) {
                    (profiler.run)(&text);
                }
            }
            Err(e) if !unreachable_said => {
                log::debug!(
                    "omniprof: no daemon at {}: {e}",
                    fabric.describe(DAEMON_ENDPOINT)
                );
                unreachable_said = true;
            }
            Err(_) => {}
        }
        std::thread::sleep(DAEMON_POLL_INTERVAL);
    }
}

/// The config text of the daemon's reply, if one comes in time and says anything.
fn await_reply(socket: &FabricSocket) -> Option<String> {
    let until = Instant::now() + REPLY_WAIT;
    while Instant::now() < until {
        let datagram = match socket.recv() {
            Ok(d) => d,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("omniprof: the daemon client's socket failed: {e}");
                return None;
            }
        };
        // Only a daemon of this user, or root's, may hand this process a request.
        let trusted = datagram
            .sender
            .is_some_and(|s| s.uid == current_uid() || s.uid == 0);
        if !trusted {
            log::warn!(
                "omniprof: ignored a datagram from {:?}: only a daemon of this user or root is heard",
                datagram.sender
            );
            continue;
        }
        match FabricMessage::decode(&datagram.bytes) {
            Ok(reply) if reply.kind == KIND_POLL => {
                let text = String::from_utf8_lossy(&reply.body).into_owned();
                return (!text.trim().is_empty()).then_some(text);
            }
            Ok(other) => log::warn!(
                "omniprof: the daemon replied {:?}, not a config",
                other.kind
            ),
            Err(e) => log::warn!("omniprof: an unreadable reply from the daemon: {e}"),
        }
    }
    None
}

/// This process, then each ancestor up to the first whose parent is 0, as Kineto sends them.
fn pid_chain() -> Vec<i32> {
    let mut chain = vec![i32::try_from(std::process::id()).unwrap_or(i32::MAX)];
    while chain.len() < MAX_ANCESTORS {
        let Some(parent) = chain.last().and_then(|&pid| parent_of(pid)) else {
            break;
        };
        if parent <= 0 {
            break;
        }
        chain.push(parent);
    }
    chain
}

/// The parent pid from `/proc/<pid>/stat` (after the command, which may hold spaces).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `SLURM_JOB_ID`'s leading digits, else 0 (as Kineto reads it).
fn job_id() -> i64 {
    std::env::var(JOB_ID_ENV).map_or(0, |id| {
        let digits: String = id.trim().chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or(0)
    })
}

/// 64 bits to make the endpoint's name unique.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_chain_starts_with_this_process_and_climbs_to_its_parent() {
        let chain = pid_chain();
        assert_eq!(chain[0] as u32, std::process::id());
        assert_eq!(chain.get(1).copied(), parent_of(chain[0]));
    }
}
