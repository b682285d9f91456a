//! dynolog's RPC, so `dyno gputrace` (and scripts that speak its protocol) trigger traces
//! through `omniprof daemon`: on loopback TCP, a request is a 4-byte length in the host's
//! byte order and that many bytes of JSON naming its function (`"fn"`); the response is
//! framed the same way. `setKinetOnDemandRequest` queues its `config` for the matching
//! processes and answers with dynolog's counts; `getStatus` and `getVersion` answer as
//! dynolog does.
//!
//! Unlike dynolog's, the requester must be the user who owns the processes, or root (its
//! uid read from `/proc/net/tcp`), and the config is checked as a trigger's is (an output
//! path outside the on-demand directory is refused): a refusal is the response's `status`,
//! with nothing matched.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omniprof::on_demand::check_trigger_config;
use serde_json::{json, Value};

use super::registry::Registry;
use super::tcp_peer::loopback_peer_uid;

/// dynolog's port, which `dyno` connects to by default.
pub(super) const DYNOLOG_PORT: u16 = 1778;
/// The largest request read, in bytes.
const MAX_REQUEST: usize = 64 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 8;
/// dynolog's `process_limit` default.
const DEFAULT_PROCESS_LIMIT: usize = 1000;

/// Serves the RPC on `listener` until the process exits, one thread per connection.
pub(super) fn serve(listener: TcpListener, registry: Arc<Registry>) -> io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("omniprof daemon rpc".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    active.fetch_sub(1, Ordering::SeqCst);
                    log::warn!("daemon: rpc: too many connections at once; one was closed");
                    continue;
                }
                let registry = Arc::clone(&registry);
                let active = Arc::clone(&active);
                let spawned = std::thread::Builder::new()
                    .name("omniprof daemon rpc conn".into())
                    .spawn(move || {
                        connection(&stream, &registry);
                        active.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    log::warn!("daemon: rpc: cannot start a connection thread");
                }
            }
        })?;
    Ok(())
}

/// One request, one response.
fn connection(stream: &TcpStream, registry: &Registry) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let response = match read_request(stream) {
        Ok(request) => {
            let requester = stream
                .local_addr()
                .and_then(|local| loopback_peer_uid(local, stream.peer_addr()?));
            match requester {
                Ok(uid) => answer(&request, uid, registry),
                Err(e) => failed(&format!("cannot tell who is asking: {e}")),
            }
        }
        Err(e) => {
            log::warn!("daemon: rpc: {e}");
            failed(&e.to_string())
        }
    };
    let body = response.to_string();
    let mut frame = i32::try_from(body.len())
        .unwrap_or(0)
        .to_ne_bytes()
        .to_vec();
    frame.extend_from_slice(body.as_bytes());
    if let Err(e) = (&mut &*stream).write_all(&frame) {
        log::debug!("daemon: rpc: cannot send the response: {e}");
    }
}

/// Reads one framed JSON object.
fn read_request(mut stream: &TcpStream) -> io::Result<Value> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_ne_bytes(len);
    let len = usize::try_from(len)
        .ok()
        .filter(|n| (1..=MAX_REQUEST).contains(n))
        .ok_or_else(|| {
            bad(format!(
                "a request of {len} bytes (1 to {MAX_REQUEST} expected)"
            ))
        })?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| bad(format!("the request is not JSON: {e}")))?;
    if !value.get("fn").is_some_and(Value::is_string) {
        return Err(bad(
            "the request is not a JSON object with a \"fn\"".to_owned()
        ));
    }
    Ok(value)
}

/// The response to `request` from `requester`.
fn answer(request: &Value, requester: u32, registry: &Registry) -> Value {
    match request["fn"].as_str().unwrap_or_default() {
        "getStatus" => json!({ "status": 1 }),
        "getVersion" => json!({ "version": format!("omniprof {}", env!("CARGO_PKG_VERSION")) }),
        "setKinetOnDemandRequest" => on_demand_request(request, requester, registry),
        other => failed(&format!("unknown function {other:?}")),
    }
}

fn on_demand_request(request: &Value, requester: u32, registry: &Registry) -> Value {
    let Some(config) = request["config"].as_str() else {
        return failed("setKinetOnDemandRequest needs a \"config\" string");
    };
    let Some(pids) = request["pids"]
        .as_array()
        .and_then(|pids| pids.iter().map(Value::as_i64).collect::<Option<Vec<_>>>())
    else {
        return failed("setKinetOnDemandRequest needs \"pids\", an array of integers");
    };
    let job_id = request.get("job_id").map_or(Some(0), Value::as_i64);
    let limit = request
        .get("process_limit")
        .map_or(Some(DEFAULT_PROCESS_LIMIT as u64), Value::as_u64);
    let (Some(job_id), Some(limit)) = (job_id, limit) else {
        return failed("\"job_id\" and \"process_limit\" must be integers");
    };
    if let Err(refused) = check_trigger_config(config) {
        log::warn!("daemon: rpc: refused a request from uid {requester}: {refused}");
        return failed(refused.reason());
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let outcome = registry.rpc_request(job_id, &pids, config, limit, requester);
    log::info!(
        "daemon: rpc: uid {requester} asked job {job_id} pids {pids:?}: {} matched, {} triggered, \
         {} busy",
        outcome.matched.len(),
        outcome.triggered.len(),
        outcome.busy
    );
    let mut response = json!({
        "processesMatched": outcome.matched,
        "eventProfilersTriggered": [],
        "activityProfilersTriggered": outcome.triggered,
        "eventProfilersBusy": 0,
        "activityProfilersBusy": outcome.busy,
    });
    if outcome.other_users > 0 {
        response["status"] = format!(
            "{} matching processes of other users were left alone (uid {requester} may trigger \
             only its own)",
            outcome.other_users
        )
        .into();
    }
    response
}

/// A refusal: the reason as `status`, and nothing matched (so `dyno` prints that).
fn failed(reason: &str) -> Value {
    json!({
        "status": format!("failed: {reason}"),
        "processesMatched": [],
        "eventProfilersTriggered": [],
        "activityProfilersTriggered": [],
        "eventProfilersBusy": 0,
        "activityProfilersBusy": 0,
    })
}
