//! `omniprof daemon`: serve dynolog's IPC fabric, so a PyTorch process started with
//! `KINETO_USE_DAEMON=1` (no omniprof inside) is traced by `omniprof trigger --pid`, and
//! dynolog's RPC, so `dyno gputrace` keeps working.
//!
//! In the foreground until SIGINT or SIGTERM. Each process that polls (`registry`) gets a
//! trigger socket in this user's runtime directory, served by the daemon on its behalf
//! (`proxy`), so `omniprof trigger --list` shows it beside omniprof's own processes.
//! Datagrams are taken only from processes of this user (any user's when the daemon runs as
//! root); garbage, oversized datagrams and a flood of registrations are logged (at most
//! one line per kind every few seconds) and change nothing.
//!
//! Exit status: 0 when stopped by a signal; 1 when it cannot start (the socket or the port
//! is taken, the runtime directory is refused).

mod proxy;
mod registry;
mod rpc;
mod tcp_peer;

use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omniprof::on_demand::{
    ConfigPoll, Datagram, FabricMessage, FabricSocket, GpuContext, KinetoFabric, RuntimeDir,
    ServerOptions, DAEMON_ENDPOINT, KIND_CONTEXT, KIND_POLL,
};

use proxy::KinetoProxy;
use registry::{PollRefused, Proxy, Registry, MAX_CLIENTS};

/// The daemon could not start.
const EXIT_FAILED: u8 = 1;
/// How long a receive waits before the loop looks at the stop flag and the table.
const TICK: Duration = Duration::from_millis(200);
/// How often the table is swept of processes that are gone.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// The least time between two warnings of one kind.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Serve PyTorch's Kineto clients (KINETO_USE_DAEMON=1) and dyno's RPC, as dynolog does.
#[derive(Debug, clap::Args)]
pub(crate) struct DaemonArgs {
    /// The directory of the fabric's socket files, as the traced processes'
    /// KINETO_IPC_SOCKET_DIR names it [default: $KINETO_IPC_SOCKET_DIR, else the abstract
    /// socket @dynolog].
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// The loopback TCP port of dynolog's RPC (`dyno gputrace`); 0 picks a free one.
    #[arg(long, value_name = "PORT", default_value_t = rpc::DYNOLOG_PORT)]
    pub port: u16,
    /// Serve no RPC, only the fabric.
    #[arg(long, conflicts_with = "port")]
    pub no_rpc: bool,
    /// The most processes served at once; a poll from one more is answered with nothing
    /// (and logged), so a flood of registrations cannot grow the daemon without bound.
    #[arg(long, value_name = "N", default_value_t = MAX_CLIENTS, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_processes: u16,
}

/// Set by SIGINT and SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

/// Runs `omniprof daemon`.
pub(crate) fn run(args: &DaemonArgs) -> ExitCode {
    let fabric = args
        .socket_dir
        .clone()
        .map_or_else(KinetoFabric::from_env, KinetoFabric::Dir);
    let fail = |what: String| {
        eprintln!("error: {what}");
        ExitCode::from(EXIT_FAILED)
    };
    if let KinetoFabric::Dir(dir) = &fabric {
        if let Err(why) = check_dir_length(dir) {
            return fail(why);
        }
    }
    let socket = match FabricSocket::bind_server(DAEMON_ENDPOINT, &fabric) {
        Ok(socket) => socket,
        Err(e) => {
            return fail(format!(
                "cannot serve {}: {e}",
                fabric.describe(DAEMON_ENDPOINT)
            ))
        }
    };
    let runtime = match RuntimeDir::user() {
        Ok(dir) => dir,
        Err(e) => return fail(format!("cannot set up trigger sockets: {e}")),
    };
    let registry = Arc::new(Registry::new(usize::from(args.max_processes)));
    let rpc = if args.no_rpc {
        "no RPC".to_owned()
    } else {
        match listen_rpc(args.port, &registry) {
            Ok(port) => format!("dyno RPC on localhost:{port}"),
            Err(e) => return fail(e),
        }
    };
    install_stop_handlers();
    println!(
        "omniprof daemon: serving {} ({rpc}); trigger sockets in {}",
        fabric.describe(DAEMON_ENDPOINT),
        runtime.path().display()
    );
    println!("  start PyTorch with KINETO_USE_DAEMON=1, then: omniprof trigger --list");
    let _ = std::io::stdout().flush();
    let mut daemon = Daemon {
        socket,
        registry,
        runtime,
        warnings: HashMap::new(),
    };
    daemon.serve();
    for proxy in daemon.registry.forget_all() {
        drop(proxy);
    }
    println!("omniprof daemon: stopped");
    ExitCode::SUCCESS
}

/// Refuses a socket directory too long for Kineto's clients: each binds
/// `DIR/dynoconfigclient<36-character uuid>`, and a socket path holds at most 107 bytes, so
/// in a longer directory every client fails ("FabricManager not initialized") and none is
/// ever heard.
fn check_dir_length(dir: &std::path::Path) -> Result<(), String> {
    const SUN_PATH: usize = 107;
    const CLIENT_NAME: usize = "dynoconfigclient".len() + 36;
    let len = dir.as_os_str().len();
    if len + 1 + CLIENT_NAME > SUN_PATH {
        return Err(format!(
            "the socket directory {} is {len} bytes long: Kineto's clients cannot bind their \
             sockets in it (at most {} bytes leave room for their names); use a shorter one",
            dir.display(),
            SUN_PATH - 1 - CLIENT_NAME
        ));
    }
    Ok(())
}

/// Listens for the RPC on 127.0.0.1 and, where there is IPv6, on ::1 (`localhost` may name
/// either); returns the port.
fn listen_rpc(port: u16, registry: &Arc<Registry>) -> Result<u16, String> {
    let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(|e| {
        format!(
            "cannot listen for dyno's RPC on 127.0.0.1:{port}: {e} (a dynolog? --port N, or \
             --no-rpc)"
        )
    })?;
    let port = v4.local_addr().map_err(|e| e.to_string())?.port();
    rpc::serve(v4, Arc::clone(registry)).map_err(|e| e.to_string())?;
    match TcpListener::bind((Ipv6Addr::LOCALHOST, port)) {
        Ok(v6) => rpc::serve(v6, Arc::clone(registry)).map_err(|e| e.to_string())?,
        Err(e) => log::info!("daemon: no RPC on [::1]:{port}: {e}"),
    }
    Ok(port)
}

/// Sets [`STOP`] on SIGINT and SIGTERM.
fn install_stop_handlers() {
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::SeqCst);
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is fully initialized (zeroed, then the handler set).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The fabric's side of the daemon: the receive loop.
struct Daemon {
    socket: FabricSocket,
    registry: Arc<Registry>,
    runtime: RuntimeDir,
    /// When each kind of warning was last given, and how many were held back since.
    warnings: HashMap<&'static str, (Instant, u64)>,
}

impl Daemon {
    fn serve(&mut self) {
        if let Err(e) = self.socket.set_read_timeout(Some(TICK)) {
            log::warn!("daemon: cannot set the receive timeout: {e}");
        }
        let mut swept = Instant::now();
        while !STOP.load(Ordering::SeqCst) {
            match self.socket.recv() {
                Ok(datagram) => self.take(&datagram),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => {
                    self.warn("recv", format!("receiving failed: {e}"));
                    std::thread::sleep(TICK);
                }
            }
            if swept.elapsed() >= SWEEP_EVERY {
                swept = Instant::now();
                for proxy in self.registry.forget_gone(swept, is_alive) {
                    drop(proxy);
                }
            }
        }
    }

    /// Answers one datagram, or says why it is refused.
    fn take(&mut self, datagram: &Datagram) {
        let Some(sender) = datagram.sender else {
            self.warn(
                "credentials",
                "a datagram without credentials was ignored".to_owned(),
            );
            return;
        };
        let own = own_uid();
        if sender.uid != own && own != 0 {
            self.warn(
                "uid",
                format!(
                    "refused a datagram of process {} of uid {}: this daemon serves only uid \
                     {own} (run it as root to serve every user)",
                    sender.pid, sender.uid
                ),
            );
            return;
        }
        let from_pid = sender.pid;
        if datagram.truncated {
            self.warn(
                "oversized",
                format!(
                    "refused an oversized datagram of process {from_pid} (over {} bytes)",
                    datagram.bytes.len()
                ),
            );
            return;
        }
        if !datagram.from.is_named() {
            self.warn(
                "unnamed",
                format!("refused a datagram of process {from_pid}: it has no address to reply to"),
            );
            return;
        }
        let message = match FabricMessage::decode(&datagram.bytes) {
            Ok(message) => message,
            Err(e) => {
                self.warn(
                    "header",
                    format!("refused a datagram of process {from_pid}: {e}"),
                );
                return;
            }
        };
        let reply = match message.kind.as_str() {
            KIND_POLL => match ConfigPoll::decode(&message.body) {
                Ok(poll) => self.poll(datagram, &poll),
                Err(e) => {
                    self.warn("body", format!("refused a poll of process {from_pid}: {e}"));
                    return;
                }
            },
            KIND_CONTEXT => match GpuContext::decode(&message.body) {
                Ok(context) => {
                    let count = self
                        .registry
                        .context(context.job_id, context.gpu, context.pid);
                    FabricMessage::new(KIND_CONTEXT, count.to_ne_bytes().to_vec())
                }
                Err(e) => {
                    self.warn(
                        "body",
                        format!("refused a datagram of process {from_pid}: {e}"),
                    );
                    return;
                }
            },
            other => {
                self.warn(
                    "kind",
                    format!("refused a datagram of process {from_pid}: unknown kind {other:?}"),
                );
                return;
            }
        };
        if let Err(e) = self.socket.send_to(&datagram.from, &reply.encode()) {
            log::debug!("daemon: cannot reply to process {from_pid}: {e}");
        }
    }

    /// Answers a poll: the config text waiting for the process, or nothing; sets up the
    /// trigger socket of a process polling for the first time.
    fn poll(&mut self, datagram: &Datagram, poll: &ConfigPoll) -> FabricMessage {
        let Some(sender) = datagram.sender else {
            return FabricMessage::new(KIND_POLL, Vec::new());
        };
        let answer = match self
            .registry
            .poll(sender, datagram.from, poll, Instant::now())
        {
            Ok(answer) => answer,
            Err(PollRefused::Full(max)) => {
                self.warn(
                    "full",
                    format!(
                        "refused process {}: {max} processes already poll this daemon, the \
                         most it serves (--max-processes)",
                        sender.pid
                    ),
                );
                return FabricMessage::new(KIND_POLL, Vec::new());
            }
        };
        if answer.new_client {
            self.add_proxy(sender.pid);
        }
        if !answer.reply.is_empty() {
            log::info!("daemon: handed process {} its request", sender.pid);
        }
        FabricMessage::new(KIND_POLL, answer.reply.into_bytes())
    }

    /// Listens for triggers of `pid` on its behalf, unless the process listens itself.
    fn add_proxy(&mut self, pid: u32) {
        let handler = Arc::new(KinetoProxy {
            registry: Arc::clone(&self.registry),
            pid,
        });
        let proxy = match self
            .runtime
            .listen_for(pid, handler, ServerOptions::default())
        {
            Ok(server) => {
                log::info!("daemon: process {pid} registered; trigger it with --pid {pid}");
                Proxy::Serving { _server: server }
            }
            Err(e) if e.kind() == ErrorKind::AddrInUse => Proxy::SelfServing,
            Err(e) => {
                self.warn(
                    "proxy",
                    format!("cannot listen for triggers of process {pid}: {e}"),
                );
                Proxy::Failed
            }
        };
        self.registry.set_proxy(pid, proxy);
    }

    /// Logs a warning of `kind`, at most one every [`WARN_EVERY`], with the count held back.
    fn warn(&mut self, kind: &'static str, message: String) {
        let now = Instant::now();
        match self.warnings.get_mut(kind) {
            Some((last, held)) if now.duration_since(*last) < WARN_EVERY => *held += 1,
            Some((last, held)) => {
                match *held {
                    0 => log::warn!("daemon: {message}"),
                    n => log::warn!("daemon: {message} ({n} more like it held back)"),
                }
                *last = now;
                *held = 0;
            }
            None => {
                log::warn!("daemon: {message}");
                self.warnings.insert(kind, (now, 0));
            }
        }
    }
}

/// Whether process `pid` exists.
fn is_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The daemon's effective uid.
fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
