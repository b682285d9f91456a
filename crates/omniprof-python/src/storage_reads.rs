//! The storages PyTorch ops read (each tensor input's storage: its data pointer, byte size
//! and device), which `export_memory_timeline` needs to count the tensors that were there
//! before the window, as torch.profiler counts those its ops read.
//!
//! torch.profiler keeps them in its own records, not in the Chrome trace, and so does
//! omniprof: the op observer packs them only while a synchronous `omniprof.profile()` with
//! `record_shapes` and `profile_memory` runs ([`Wanted`]; the op's cost with `record_shapes`
//! alone is unchanged), and then only for a session that asks for both ([`asked`]). The
//! op's unpacker carries them as one arg under a private key ([`arg`]), and [`take`]
//! removes that arg from every op when the trace of such a session is handed to Python,
//! before anything can write it, keeping them beside the trace. The trace of any other
//! session holds none, so its ops are not looked over.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use omniprof::Config;
use omniprof_analysis::StorageRead;
use omniprof_trace::{Trace, Value};

/// The arg's key: never written, [`take`] removes it.
const KEY: &str = "omniprof.storage_reads";

/// The synchronous profiles that want storages, running now.
static WANTED: AtomicUsize = AtomicUsize::new(0);

/// Whether a profile that wants storages runs: the observer attached now packs them.
pub(crate) fn wanted() -> bool {
    WANTED.load(Ordering::Relaxed) > 0
}

/// Whether a session's ops may carry their storages: it records shapes and memory
/// (`record_shapes` and `profile_memory`, for `export_memory_timeline`). The observer
/// packs them only for such a session, so only its traces need [`take`].
pub(crate) fn asked(config: &Config) -> bool {
    config.report_input_shapes() && config.profile_memory()
}

/// Whether the observer is to pack storages for a session configured with `config` now:
/// it [`asked`] for them while a profile that wants them runs.
pub(crate) fn packed_for(config: &Config) -> bool {
    asked(config) && wanted()
}

/// Held while a profile that wants storages runs.
pub(crate) struct Wanted(());

impl Wanted {
    pub(crate) fn new() -> Self {
        WANTED.fetch_add(1, Ordering::Relaxed);
        Wanted(())
    }
}

impl Drop for Wanted {
    fn drop(&mut self) {
        WANTED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The fields of a storage in the arg: address, bytes, device type and index.
const FIELDS: usize = 4;

/// One storage as the observer packed it (`table.h`): its address, bytes, and device (type
/// in bits 0..7, index as an int8 in bits 8..15), as the arg's [`FIELDS`] values.
pub(crate) fn packed(address: u64, bytes: u64, device: u64) -> [Value; FIELDS] {
    [
        Value::Int(address as i64),
        Value::Int(bytes as i64),
        Value::Int((device & 0xff) as i64),
        Value::Int(i64::from((device >> 8) as u8 as i8)),
    ]
}

/// The arg's key, made once: each op that read storages carries it.
fn key() -> &'static Arc<str> {
    static KEY_TEXT: OnceLock<Arc<str>> = OnceLock::new();
    KEY_TEXT.get_or_init(|| KEY.into())
}

/// The arg an op's storages ride in until [`take`]: their [`packed`] fields one storage
/// after another, in one list (a list per storage was an allocation more each).
pub(crate) fn arg(fields: Vec<Value>) -> (Arc<str>, Value) {
    (key().clone(), Value::List(fields))
}

/// Removes the storages' arg from every op of `trace`: the storages each read, at its start.
pub(crate) fn take(trace: &mut Trace) -> Vec<StorageRead> {
    let mut reads = Vec::new();
    for a in &mut trace.activities {
        let Some(i) = a.args.iter().position(|(k, _)| &**k == KEY) else {
            continue;
        };
        let (_, Value::List(fields)) = a.args.remove(i) else {
            continue;
        };
        for storage in fields.chunks_exact(FIELDS) {
            let [address, bytes, device_type, device_index] = storage else {
                continue;
            };
            let field = |v: &Value| v.as_i64().unwrap_or(0);
            reads.push(StorageRead {
                time_ns: a.start_ns,
                device_type: field(device_type),
                device_index: field(device_index),
                address: field(address),
                bytes: field(bytes),
            });
        }
    }
    reads
}
