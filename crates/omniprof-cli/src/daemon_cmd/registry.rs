//! The daemon's table of the processes that poll it, and the requests waiting for them.
//!
//! A process is known by the pid the kernel gave its datagrams (not the pid it claims), and
//! holds at most one request: waiting for its next poll that can take it (pending), then,
//! for a trigger that waits for the trace, taken (delivered) until its file appears. A
//! process stays known while it polls; one silent for [`KEEP_ALIVE`] (dynolog's), or whose
//! pid is gone, is forgotten.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use omniprof::on_demand::{
    ConfigPoll, FabricAddr, SenderCredentials, TriggerServer, CONFIG_ACTIVITIES,
    OMNIPROF_CLIENT_PREFIX,
};

/// How long a silent process stays known (dynolog's keep-alive).
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(60);
/// The most processes known at once by default; a poll from one more is answered with
/// nothing.
pub(super) const MAX_CLIENTS: u16 = 256;
/// The most endpoints a process polls from (Kineto's and omniprof's in one process).
const MAX_ENDPOINTS: usize = 4;

/// What listens for triggers of a known process.
pub(super) enum Proxy {
    /// Not set up yet.
    None,
    /// The daemon, on `<runtime dir>/<pid>.sock` (held for its drop, which removes it).
    Serving { _server: TriggerServer },
    /// The process itself (an omniprof process with `OMNIPROF_ONDEMAND=1`).
    SelfServing,
    /// Nothing: the socket could not be set up (logged).
    Failed,
}

/// Who asked for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// `omniprof trigger`, which waits for the trace.
    Trigger,
    /// dyno's RPC, which does not.
    Rpc,
}

struct Pending {
    id: u64,
    text: String,
    origin: Origin,
    since: Instant,
}

struct Delivered {
    id: u64,
    at: Instant,
    /// The endpoint that took it: only its polls say whether its profiler is idle again.
    endpoint: String,
    /// When that endpoint first polled as idle after taking it.
    idle_since: Option<Instant>,
}

struct Endpoint {
    addr: FabricAddr,
    name: String,
    last_poll: Instant,
}

impl Endpoint {
    fn is_omniprof(&self) -> bool {
        self.name.starts_with(OMNIPROF_CLIENT_PREFIX)
    }
}

struct Client {
    uid: u32,
    job_id: i64,
    chain: Vec<i32>,
    command: String,
    endpoints: Vec<Endpoint>,
    last_poll: Instant,
    /// Whether a poll since the last request was not idle (its profiler was busy).
    busy_polls: u32,
    pending: Option<Pending>,
    delivered: Option<Delivered>,
    proxy: Proxy,
}

impl Client {
    /// Whether a poll from `endpoint` may take the pending request: the poll is idle, and
    /// an omniprof endpoint of the process, when one polls, is preferred to Kineto's.
    fn takes_from(&self, endpoint: &str, idle: bool, now: Instant) -> bool {
        let omniprof_polls = self.endpoints.iter().any(|e| {
            e.is_omniprof()
                && now.duration_since(e.last_poll) < 2 * omniprof::on_demand::DAEMON_POLL_INTERVAL
        });
        idle && (endpoint.starts_with(OMNIPROF_CLIENT_PREFIX) || !omniprof_polls)
    }

    fn kind(&self) -> &'static str {
        if self.endpoints.iter().any(Endpoint::is_omniprof) {
            "omniprof"
        } else {
            "Kineto"
        }
    }
}

/// What a poll is answered with.
pub(super) struct PollAnswer {
    /// The config text for the process ("" when nothing waits).
    pub reply: String,
    /// Whether the process was not known before (its trigger socket is to be set up).
    pub new_client: bool,
}

/// Why a poll was not taken into the table.
pub(super) enum PollRefused {
    /// As many processes as the table holds are known.
    Full(usize),
}

/// Where a request stands, for the trigger waiting on it.
pub(super) enum Progress {
    /// The process is no longer known.
    Gone,
    /// Not taken yet; `busy_polls` polls came while its profiler was busy.
    Waiting { since: Instant, busy_polls: u32 },
    /// Taken; idle again since then, if so.
    Delivered { idle_since: Option<Instant> },
    /// Another request took its place (it was cancelled or withdrawn).
    Replaced,
}

/// What a dyno RPC request did, in dynolog's terms.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RpcOutcome {
    pub matched: Vec<u32>,
    pub triggered: Vec<u32>,
    pub busy: u32,
    /// Processes that matched but belong to another user than the requester.
    pub other_users: u32,
}

/// The table and the condition its waiters wait on.
pub(super) struct Registry {
    clients: Mutex<Table>,
    changed: Condvar,
    max_clients: usize,
}

#[derive(Default)]
struct Table {
    clients: BTreeMap<u32, Client>,
    next_id: u64,
    /// Processes per (job, GPU), from context registrations.
    contexts: BTreeMap<(i64, i32), Vec<i32>>,
}

impl Registry {
    /// An empty table that knows at most `max_clients` processes.
    pub(super) fn new(max_clients: usize) -> Self {
        Self {
            clients: Mutex::new(Table::default()),
            changed: Condvar::new(),
            max_clients,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a poll of `sender` from `from`: registers or refreshes the process and returns
    /// the config text waiting for it, if this poll may take it.
    pub(super) fn poll(
        &self,
        sender: SenderCredentials,
        from: FabricAddr,
        poll: &ConfigPoll,
        now: Instant,
    ) -> Result<PollAnswer, PollRefused> {
        let mut table = self.table();
        let new_client = !table.clients.contains_key(&sender.pid);
        if new_client && table.clients.len() >= self.max_clients {
            return Err(PollRefused::Full(self.max_clients));
        }
        let client = table.clients.entry(sender.pid).or_insert_with(|| Client {
            uid: sender.uid,
            job_id: poll.job_id,
            chain: chain_of(sender.pid, &poll.pids),
            command: command_of(sender.pid),
            endpoints: Vec::new(),
            last_poll: now,
            busy_polls: 0,
            pending: None,
            delivered: None,
            proxy: Proxy::None,
        });
        client.last_poll = now;
        client.job_id = poll.job_id;
        let name = from.name();
        match client.endpoints.iter_mut().find(|e| e.name == name) {
            Some(endpoint) => {
                endpoint.last_poll = now;
                endpoint.addr = from;
            }
            None => {
                if client.endpoints.len() >= MAX_ENDPOINTS {
                    // The endpoint polled longest ago makes room.
                    client.endpoints.sort_by_key(|e| e.last_poll);
                    client.endpoints.remove(0);
                }
                client.endpoints.push(Endpoint {
                    addr: from,
                    name: name.clone(),
                    last_poll: now,
                });
            }
        }
        let idle = poll.config_type & CONFIG_ACTIVITIES != 0;
        if let Some(delivered) = client.delivered.as_mut().filter(|d| d.endpoint == name) {
            if idle && delivered.idle_since.is_none() {
                delivered.idle_since = Some(now);
            }
        }
        let mut reply = String::new();
        if client.pending.is_some() {
            if client.takes_from(&name, idle, now) {
                let pending = client.pending.take().unwrap_or_else(|| unreachable!());
                if pending.origin == Origin::Trigger {
                    client.delivered = Some(Delivered {
                        id: pending.id,
                        at: now,
                        endpoint: name,
                        idle_since: None,
                    });
                }
                reply = pending.text;
            } else if !idle {
                client.busy_polls += 1;
            }
        }
        self.changed.notify_all();
        Ok(PollAnswer { reply, new_client })
    }

    /// Registers a GPU context of `pid` in `job_id`; returns how many processes have one on
    /// that GPU (what Kineto's `registerInstance` asks).
    pub(super) fn context(&self, job_id: i64, gpu: i32, pid: i32) -> i32 {
        let mut table = self.table();
        let pids = table.contexts.entry((job_id, gpu)).or_default();
        if !pids.contains(&pid) {
            pids.push(pid);
        }
        i32::try_from(pids.len()).unwrap_or(i32::MAX)
    }

    /// Sets what listens for triggers of `pid`.
    pub(super) fn set_proxy(&self, pid: u32, proxy: Proxy) {
        if let Some(client) = self.table().clients.get_mut(&pid) {
            client.proxy = proxy;
        }
    }

    /// Forgets the processes that are gone or silent, and returns their trigger servers, to
    /// be dropped outside the lock (dropping one joins its accept thread).
    pub(super) fn forget_gone(&self, now: Instant, alive: impl Fn(u32) -> bool) -> Vec<Proxy> {
        let mut table = self.table();
        let gone: Vec<u32> = table
            .clients
            .iter()
            .filter(|(&pid, c)| now.duration_since(c.last_poll) > KEEP_ALIVE || !alive(pid))
            .map(|(&pid, _)| pid)
            .collect();
        let proxies = gone
            .iter()
            .filter_map(|pid| table.clients.remove(pid))
            .map(|c| {
                log::info!("daemon: forgot process {} ({})", c.chain[0], c.command);
                c.proxy
            })
            .collect();
        for pids in table.contexts.values_mut() {
            pids.retain(|&p| u32::try_from(p).is_ok_and(&alive));
        }
        table.contexts.retain(|_, pids| !pids.is_empty());
        if !gone.is_empty() {
            self.changed.notify_all();
        }
        proxies
    }

    /// Forgets every process; returns their trigger servers.
    pub(super) fn forget_all(&self) -> Vec<Proxy> {
        let mut table = self.table();
        let proxies = std::mem::take(&mut table.clients)
            .into_values()
            .map(|c| c.proxy)
            .collect();
        self.changed.notify_all();
        proxies
    }

    /// Queues `text` for `pid`'s next poll; refused when the process is unknown or already
    /// has a request.
    pub(super) fn submit(&self, pid: u32, text: &str, origin: Origin) -> Result<u64, String> {
        let mut table = self.table();
        table.next_id += 1;
        let id = table.next_id;
        let client = table
            .clients
            .get_mut(&pid)
            .ok_or_else(|| format!("process {pid} no longer polls the daemon"))?;
        if let Some(busy) = busy_with(client) {
            return Err(format!("process {pid} is busy: {busy}"));
        }
        client.busy_polls = 0;
        client.pending = Some(Pending {
            id,
            text: text.to_owned(),
            origin,
            since: Instant::now(),
        });
        Ok(id)
    }

    /// Where request `id` of `pid` stands; waits up to `wait` for a change first.
    pub(super) fn progress(&self, pid: u32, id: u64, wait: Duration) -> Progress {
        let table = self.table();
        let (table, _) = self
            .changed
            .wait_timeout(table, wait)
            .unwrap_or_else(|e| e.into_inner());
        let Some(client) = table.clients.get(&pid) else {
            return Progress::Gone;
        };
        match (&client.pending, &client.delivered) {
            (Some(p), _) if p.id == id => Progress::Waiting {
                since: p.since,
                busy_polls: client.busy_polls,
            },
            (_, Some(d)) if d.id == id => Progress::Delivered {
                idle_since: d.idle_since,
            },
            _ => Progress::Replaced,
        }
    }

    /// Drops request `id` of `pid`, pending or delivered (its trigger is answered).
    pub(super) fn finish(&self, pid: u32, id: u64) {
        let mut table = self.table();
        if let Some(client) = table.clients.get_mut(&pid) {
            if client.pending.as_ref().is_some_and(|p| p.id == id) {
                client.pending = None;
            }
            if client.delivered.as_ref().is_some_and(|d| d.id == id) {
                client.delivered = None;
            }
        }
    }

    /// The `--list` line of `pid`: what its request does (or `idle`), what polls, and how
    /// long it has been silent when that is longer than two polls.
    pub(super) fn state_line(&self, pid: u32, now: Instant) -> String {
        let table = self.table();
        let Some(client) = table.clients.get(&pid) else {
            return "gone (no longer polls the daemon)".to_owned();
        };
        let what = match (&client.pending, &client.delivered) {
            (Some(p), _) => format!("request #{} queued", p.id),
            (None, Some(d)) => format!("request #{} taken", d.id),
            (None, None) => "idle".to_owned(),
        };
        let silent = now.duration_since(client.last_poll);
        let silent = if silent > 2 * omniprof::on_demand::DAEMON_POLL_INTERVAL {
            format!(", silent {} s", silent.as_secs())
        } else {
            String::new()
        };
        format!("{what}, {} via daemon{silent}", client.kind())
    }

    /// The command line of `pid`, as read when it first polled.
    pub(super) fn command(&self, pid: u32) -> Option<String> {
        self.table().clients.get(&pid).map(|c| c.command.clone())
    }

    /// Queues `text` for the processes of `job_id` whose pid chain holds one of `pids` (all
    /// of the job's with no pids, or the single pid 0, as dynolog does), at most `limit`,
    /// each only when it belongs to `requester` (or the requester is root).
    pub(super) fn rpc_request(
        &self,
        job_id: i64,
        pids: &[i64],
        text: &str,
        limit: usize,
        requester: u32,
    ) -> RpcOutcome {
        let mut table = self.table();
        let all = pids.is_empty() || pids == [0];
        let mut outcome = RpcOutcome::default();
        let mut next_id = table.next_id;
        for (&pid, client) in table.clients.iter_mut() {
            let hit = client.job_id == job_id
                && (all || client.chain.iter().any(|p| pids.contains(&i64::from(*p))));
            if !hit {
                continue;
            }
            if requester != 0 && requester != client.uid {
                outcome.other_users += 1;
                continue;
            }
            outcome.matched.push(pid);
            if outcome.triggered.len() >= limit {
                continue;
            }
            if busy_with(client).is_some() {
                outcome.busy += 1;
                continue;
            }
            next_id += 1;
            client.busy_polls = 0;
            client.pending = Some(Pending {
                id: next_id,
                text: text.to_owned(),
                origin: Origin::Rpc,
                since: Instant::now(),
            });
            outcome.triggered.push(pid);
        }
        table.next_id = next_id;
        outcome
    }
}

/// What `client`'s request is doing, if it has one.
fn busy_with(client: &Client) -> Option<String> {
    if let Some(p) = &client.pending {
        return Some(format!(
            "request #{} waits for its next idle poll (queued {} s ago)",
            p.id,
            p.since.elapsed().as_secs()
        ));
    }
    client.delivered.as_ref().map(|d| {
        format!(
            "request #{} taken {} s ago, its trace not written yet",
            d.id,
            d.at.elapsed().as_secs()
        )
    })
}

/// The pid chain a process is matched by: its own pid (the kernel's), then the ancestors it
/// reported when its first claimed pid is that one (else they may not be its own: a
/// process in another pid namespace, or one claiming another's pid).
fn chain_of(pid: u32, claimed: &[i32]) -> Vec<i32> {
    let own = i32::try_from(pid).unwrap_or(i32::MAX);
    match claimed.split_first() {
        Some((&first, ancestors)) if first == own => [&[own][..], ancestors].concat(),
        _ => {
            log::warn!(
                "daemon: process {pid} claims the pid chain {claimed:?}; it is matched by its \
                 own pid only"
            );
            vec![own]
        }
    }
}

/// A process's command line from `/proc`, arguments joined by spaces.
fn command_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline")).map_or_else(
        |_| String::new(),
        |bytes| {
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .replace('\0', " ")
        },
    )
}
