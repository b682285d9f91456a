//! `omniprof daemon` as a user runs it, each test with a socket directory
//! (`KINETO_IPC_SOCKET_DIR`) and a runtime directory of its own: clients are this test
//! process (its polls built with the library's wire) and small `python3` processes that
//! speak the wire from their own code, so the daemon is checked against two writers of it.
//! dyno's RPC queues a config for the next poll; a poll of another shape, garbage, an
//! oversized datagram, a flood of clients, a stale or live socket, another user's socket:
//! the daemon refuses with a word on stderr and goes on serving. The end-to-end runs with
//! PyTorch's own client are `crates/omniprof-python/tests/test_daemon.py`.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use omniprof::on_demand::{
    on_demand_trace_dir, ConfigPoll, FabricMessage, FabricSocket, KinetoFabric, CONFIG_ACTIVITIES,
    KIND_CONTEXT, KIND_POLL,
};
use omniprof_test_support::cli::Cli;
use serde_json::{json, Value};

/// How long anything here may take on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// A running `omniprof daemon`, stopped (SIGTERM) on drop.
struct Daemon {
    child: Child,
    /// Its first line: where it serves.
    banner: String,
    /// Kept open: the daemon prints again as it stops.
    _stdout: BufReader<std::process::ChildStdout>,
    stderr: PathBuf,
}

/// This test's directories: the fabric's sockets and the trigger sockets.
struct Dirs {
    _tmp: tempfile::TempDir,
    ipc: PathBuf,
    xdg: PathBuf,
}

impl Dirs {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let (ipc, xdg) = (tmp.path().join("ipc"), tmp.path().join("xdg"));
        std::fs::create_dir(&ipc).unwrap();
        std::fs::create_dir(&xdg).unwrap();
        Self {
            ipc,
            xdg,
            _tmp: tmp,
        }
    }

    fn fabric(&self) -> KinetoFabric {
        KinetoFabric::Dir(self.ipc.clone())
    }

    /// `omniprof` with this test's directories.
    fn omniprof(&self) -> Cli {
        Cli::new(env!("CARGO_BIN_EXE_omniprof"))
            .env("KINETO_IPC_SOCKET_DIR", &self.ipc)
            .env("XDG_RUNTIME_DIR", &self.xdg)
    }

    /// Starts the daemon with `args`; waits for its banner.
    fn daemon(&self, args: &[&str]) -> Daemon {
        let stderr = self
            .ipc
            .with_file_name(format!("daemon-{}.err", args.len()));
        let mut child = self
            .omniprof()
            .command([&["daemon"][..], args].concat())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut banner = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut banner).unwrap();
        assert!(
            banner.starts_with("omniprof daemon: serving"),
            "{banner}{}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        Daemon {
            child,
            banner,
            _stdout: stdout,
            stderr,
        }
    }
}

impl Daemon {
    /// The RPC port from the banner (`dyno RPC on localhost:PORT`).
    fn port(&self) -> u16 {
        let at = self.banner.find("localhost:").unwrap() + "localhost:".len();
        let digits: String = self.banner[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap()
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Stops it with SIGTERM; its exit code.
    fn stop(&mut self) -> Option<i32> {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.child.wait().unwrap().code()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.running() {
            self.stop();
        }
    }
}

/// A Kineto-like client in this process: polls the daemon and returns the config text.
fn poll(client: &FabricSocket, fabric: &KinetoFabric, config_type: i32) -> String {
    let me = i32::try_from(std::process::id()).unwrap();
    poll_as(client, fabric, config_type, vec![me])
}

/// [`poll`], claiming the pid chain `pids`.
fn poll_as(
    client: &FabricSocket,
    fabric: &KinetoFabric,
    config_type: i32,
    pids: Vec<i32>,
) -> String {
    let poll = ConfigPoll {
        config_type,
        job_id: 0,
        pids,
    };
    let message = FabricMessage::new(KIND_POLL, poll.encode()).encode();
    client.send_to_name("dynolog", fabric, &message).unwrap();
    client.set_read_timeout(Some(DEADLINE)).unwrap();
    let reply = FabricMessage::decode(&client.recv().unwrap().bytes).unwrap();
    assert_eq!(reply.kind, KIND_POLL);
    String::from_utf8(reply.body).unwrap()
}

/// One RPC round trip, framed as dyno frames it.
fn rpc(port: u16, request: &[u8]) -> Value {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let len = i32::try_from(request.len()).unwrap();
    stream.write_all(&len.to_ne_bytes()).unwrap();
    stream.write_all(request).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; usize::try_from(i32::from_ne_bytes(len)).unwrap()];
    stream.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// Waits until `omniprof trigger --list` shows `pid`; that row.
fn listed(dirs: &Dirs, pid: u32) -> String {
    let started = Instant::now();
    loop {
        let list = dirs.omniprof().ok(["trigger", "--list"]);
        if let Some(row) = list
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        {
            return row.to_owned();
        }
        assert!(started.elapsed() < DEADLINE, "{pid} never listed:\n{list}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dynos_rpc_queues_a_config_for_the_next_poll_of_the_matching_process() {
    let dirs = Dirs::new();
    let mut daemon = dirs.daemon(&["--port", "0"]);
    let fabric = dirs.fabric();
    let client = FabricSocket::bind("dynoconfigclienttest", &fabric).unwrap();
    assert_eq!(poll(&client, &fabric, CONFIG_ACTIVITIES), "");
    let me = std::process::id();
    let row = listed(&dirs, me);
    assert!(row.contains(" idle, Kineto via daemon "), "{row}");

    let port = daemon.port();
    assert_eq!(rpc(port, br#"{"fn": "getStatus"}"#), json!({"status": 1}));
    let log_file = Path::new(&on_demand_trace_dir()).join("dyno_trace.json");
    let config = format!(
        "ACTIVITIES_LOG_FILE={}\nACTIVITIES_DURATION_MSECS=100",
        log_file.display()
    );
    let request = json!({"fn": "setKinetOnDemandRequest", "config": config, "job_id": 0,
                         "pids": [me], "process_limit": 3});
    let response = rpc(port, request.to_string().as_bytes());
    assert_eq!(
        response,
        json!({"processesMatched": [me], "eventProfilersTriggered": [],
               "activityProfilersTriggered": [me], "eventProfilersBusy": 0,
               "activityProfilersBusy": 0})
    );
    // A second request finds the first still waiting.
    let again = rpc(port, request.to_string().as_bytes());
    assert_eq!(again["activityProfilersBusy"], json!(1), "{again}");
    // A busy profiler does not take it; an idle one does, once.
    assert_eq!(poll(&client, &fabric, 0), "");
    assert_eq!(poll(&client, &fabric, CONFIG_ACTIVITIES), config);
    assert_eq!(poll(&client, &fabric, CONFIG_ACTIVITIES), "");

    let refused = json!({"fn": "setKinetOnDemandRequest", "config":
                         "ACTIVITIES_LOG_FILE=/etc/cron.d/x.json\nACTIVITIES_DURATION_MSECS=1",
                         "pids": [me]});
    let response = rpc(port, refused.to_string().as_bytes());
    let status = response["status"].as_str().unwrap();
    assert!(
        status.starts_with("failed: output path \"/etc/cron.d/x.json\" refused"),
        "{status}"
    );
    assert_eq!(response["processesMatched"], json!([]));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Another user (nobody) asks for this root-owned process: left alone, and told so.
        let ask = json!({"fn": "setKinetOnDemandRequest", "config": config, "pids": [me]});
        let asked = Command::new("python3")
            .args(["-c", PY_RPC, &port.to_string(), &ask.to_string()])
            .uid(65534)
            .output()
            .expect("python3 runs as nobody");
        let response: Value = serde_json::from_slice(&asked.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&asked.stderr)));
        assert_eq!(response["processesMatched"], json!([]), "{response}");
        let status = response["status"].as_str().unwrap();
        assert!(
            status.starts_with("1 matching processes of other users were left alone (uid 65534"),
            "{status}"
        );
    } else {
        println!("not root: a requester of another user cannot be made here");
    }
    let garbage = rpc(port, b"{not json");
    assert!(
        garbage["status"].as_str().unwrap().contains("not JSON"),
        "{garbage}"
    );
    assert_eq!(
        poll(&client, &fabric, CONFIG_ACTIVITIES),
        "",
        "nothing was queued"
    );
    assert!(daemon.running());
    assert_eq!(daemon.stop(), Some(0));
    assert!(!dirs.ipc.join("dynolog").exists(), "the socket is removed");
    assert!(
        !dirs.xdg.join(format!("omniprof/{me}.sock")).exists(),
        "the trigger socket is removed"
    );
}

#[test]
fn garbage_and_oversized_datagrams_are_refused_with_a_word_and_the_daemon_serves_on() {
    let dirs = Dirs::new();
    let mut daemon = dirs.daemon(&["--no-rpc"]);
    let fabric = dirs.fabric();
    let sender = FabricSocket::bind("garbage", &fabric).unwrap();
    let mut bad_count = ConfigPoll {
        config_type: 2,
        job_id: 0,
        pids: vec![1],
    }
    .encode();
    bad_count[4..8].copy_from_slice(&7i32.to_ne_bytes());
    let sends: [Vec<u8>; 5] = [
        b"abc".to_vec(),
        b"defg".to_vec(),
        vec![0xff; 70 * 1024],
        FabricMessage::new("launch", Vec::new()).encode(),
        FabricMessage::new(KIND_POLL, bad_count).encode(),
    ];
    for bytes in &sends {
        sender.send_to_name("dynolog", &fabric, bytes).unwrap();
    }
    // A datagram with no sender name cannot be answered.
    let unnamed = std::os::unix::net::UnixDatagram::unbound().unwrap();
    let good = FabricMessage::new(
        KIND_POLL,
        ConfigPoll {
            config_type: 2,
            job_id: 0,
            pids: vec![1],
        }
        .encode(),
    )
    .encode();
    unnamed.send_to(&good, dirs.ipc.join("dynolog")).unwrap();
    // The daemon still answers, and knows a poller by its kernel pid, not the one it claims.
    let client = FabricSocket::bind("after", &fabric).unwrap();
    assert_eq!(poll_as(&client, &fabric, CONFIG_ACTIVITIES, vec![1]), "");
    listed(&dirs, std::process::id());
    // A GPU context registration is answered with the processes on that GPU: this one.
    let context = [3i32.to_ne_bytes(), 77i32.to_ne_bytes(), [0; 4], [0; 4]].concat();
    let message = FabricMessage::new(KIND_CONTEXT, context).encode();
    client.send_to_name("dynolog", &fabric, &message).unwrap();
    let reply = FabricMessage::decode(&client.recv().unwrap().bytes).unwrap();
    assert_eq!(
        (reply.kind.as_str(), reply.body),
        (KIND_CONTEXT, 1i32.to_ne_bytes().to_vec())
    );
    assert!(daemon.running());
    let stderr = daemon.stderr();
    for want in [
        "refused a datagram of process",
        "3 bytes, shorter than the 40-byte header",
        "refused an oversized datagram of process",
        "unknown kind \"launch\"",
        "7 pids do not fill it",
        "it has no address to reply to",
        &format!("process {} claims the pid chain [1]", std::process::id()),
    ] {
        assert!(stderr.contains(want), "{want:?} not in:\n{stderr}");
    }
    // Throttled: a second unreadable header within seconds is held back, not logged.
    assert!(!stderr.contains("4 bytes"), "{stderr}");
    assert_eq!(daemon.stop(), Some(0));
}

/// A `python3` process that sends one RPC request (argv: port, JSON) as dyno frames it and
/// prints the response.
const PY_RPC: &str = r#"
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
request = sys.argv[2].encode()
s.sendall(struct.pack("=i", len(request)) + request)
size = struct.unpack("=i", s.recv(4))[0]
body = b""
while len(body) < size:
    body += s.recv(size - len(body))
print(body.decode())
"#;

/// A `python3` process that polls the daemon once, from its own implementation of the
/// wire, prints the reply's config text (`<none>` when empty), and sleeps until killed.
const PY_CLIENT: &str = r#"
import os, socket, struct, sys, time, uuid
d = os.environ["KINETO_IPC_SOCKET_DIR"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(os.path.join(d, "dynoconfigclient" + str(uuid.uuid4())))
body = struct.pack("=iiqi", 2, 1, 0, os.getpid())
s.sendto(struct.pack("=Q32s", len(body), b"req") + body, os.path.join(d, "dynolog"))
s.settimeout(60)
data = s.recv(70000)
size = struct.unpack("=Q", data[:8])[0]
print(data[40:40 + size].decode() or "<none>", flush=True)
time.sleep(600)
"#;

#[test]
fn a_flood_of_clients_beyond_the_limit_is_refused_and_the_known_ones_are_served() {
    let dirs = Dirs::new();
    let mut daemon = dirs.daemon(&["--no-rpc", "--max-processes", "2"]);
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut child = Command::new("python3")
            .args(["-c", PY_CLIENT])
            .env("KINETO_IPC_SOCKET_DIR", &dirs.ipc)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut reply = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut reply)
            .unwrap();
        assert_eq!(reply, "<none>\n");
        clients.push(child);
    }
    let third = clients[2].id();
    let stderr = daemon.stderr();
    assert!(
        stderr.contains(&format!(
            "refused process {third}: 2 processes already poll this daemon"
        )),
        "{stderr}"
    );
    for child in &clients[..2] {
        let row = listed(&dirs, child.id());
        assert!(row.contains("python3 -c"), "{row}");
    }
    let list = dirs.omniprof().ok(["trigger", "--list"]);
    assert!(!list.contains(&format!(" {third} ")), "{list}");
    // A client that went away is forgotten (and its trigger socket removed) within seconds.
    clients[0].kill().unwrap();
    clients[0].wait().unwrap();
    let gone = clients[0].id();
    let socket = dirs.xdg.join(format!("omniprof/{gone}.sock"));
    let started = Instant::now();
    while socket.exists() {
        assert!(started.elapsed() < DEADLINE, "{} stays", socket.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    for child in &mut clients[1..] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert!(daemon.running());
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_or_another_users_is_refused() {
    let dirs = Dirs::new();
    let socket = dirs.ipc.join("dynolog");
    // A daemon killed without cleaning up left its socket file.
    drop(std::os::unix::net::UnixDatagram::bind(&socket).unwrap());
    let mut first = dirs.daemon(&["--no-rpc"]);
    let stderr = dirs.omniprof().fails(1, ["daemon", "--no-rpc"]);
    assert!(
        stderr.contains(&format!(
            "another daemon already serves {}",
            socket.display()
        )),
        "{stderr}"
    );
    assert!(first.running(), "the first daemon is left alone");
    assert_eq!(first.stop(), Some(0));

    // A directory in which Kineto's clients could not bind their sockets is refused.
    let long = dirs.ipc.join("d".repeat(60));
    std::fs::create_dir(&long).unwrap();
    let long = long.to_str().unwrap();
    let stderr = dirs
        .omniprof()
        .fails(1, ["daemon", "--no-rpc", "--socket-dir", long]);
    assert!(
        stderr.contains("Kineto's clients cannot bind their sockets in it"),
        "{stderr}"
    );

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // A stale socket of another user (nobody) is theirs: not removed, refused.
        drop(std::os::unix::net::UnixDatagram::bind(&socket).unwrap());
        std::os::unix::fs::chown(&socket, Some(65534), None).unwrap();
        let stderr = dirs.omniprof().fails(1, ["daemon", "--no-rpc"]);
        assert!(stderr.contains("belongs to uid 65534, not 0"), "{stderr}");
        assert_eq!(std::fs::metadata(&socket).unwrap().uid(), 65534);
    } else {
        println!("not root: another user's socket cannot be made here");
    }
}

#[test]
fn a_trigger_through_the_daemon_is_refused_when_the_path_is_not_allowed_or_no_trace_comes() {
    let dirs = Dirs::new();
    let mut daemon = dirs.daemon(&["--no-rpc"]);
    let fabric = dirs.fabric();
    let client = FabricSocket::bind("dynoconfigclientnotrace", &fabric).unwrap();
    assert_eq!(poll(&client, &fabric, CONFIG_ACTIVITIES), "");
    let me = std::process::id();
    listed(&dirs, me);
    let pid = me.to_string();

    // An output directory outside the on-demand directory never reaches the process.
    let stderr = dirs.omniprof().fails(
        1,
        [
            "trigger",
            "--pid",
            &pid,
            "--duration-ms",
            "10",
            "--output-dir",
            "/etc",
        ],
    );
    assert!(
        stderr.contains(&format!("process {pid} refused")),
        "{stderr}"
    );
    assert!(stderr.contains("\"/etc/omniprof_trigger_"), "{stderr}");
    assert_eq!(
        poll(&client, &fabric, CONFIG_ACTIVITIES),
        "",
        "nothing was queued"
    );

    // The process takes the request, then polls idle again without writing the trace.
    let out = tempfile::tempdir_in(on_demand_trace_dir()).unwrap();
    let trigger = dirs
        .omniprof()
        .command([
            "trigger",
            "--pid",
            &pid,
            "--duration-ms",
            "10",
            "--output-dir",
            out.path().to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let config = loop {
        let config = poll(&client, &fabric, CONFIG_ACTIVITIES);
        if !config.is_empty() {
            break config;
        }
        assert!(started.elapsed() < DEADLINE, "the request never came");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        config.contains("ACTIVITIES_DURATION_MSECS=10\n"),
        "{config}"
    );
    let row = listed(&dirs, me);
    assert!(
        row.contains(" request #1 taken, Kineto via daemon "),
        "{row}"
    );
    assert_eq!(poll(&client, &fabric, CONFIG_ACTIVITIES), "");
    let output = trigger.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "process {pid} took the request but wrote no trace at {}",
            std::fs::canonicalize(out.path()).unwrap().display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("its profiler is idle again"), "{stderr}");
    assert!(daemon.running());
}
