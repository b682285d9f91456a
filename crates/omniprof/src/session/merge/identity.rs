//! The process identity a trace carries: the job's `PT_PROFILER_JOB_*` variables, rank and
//! world size (`distributedInfo`), the process and host names and the trace id. Kept apart
//! from the merge proper because none of it depends on what was recorded.

use crate::clock;
use crate::keys::metadata;
use crate::Trace;
use crate::Value;

/// `PT_PROFILER_JOB_*` first (trace metadata with the same key wins later), then
/// `distributedInfo`, the first place a `"rank"` key appears, as HTA requires.
pub(super) fn add_environment_metadata(trace: &mut Trace) {
    for key in [
        "PT_PROFILER_JOB_NAME",
        "PT_PROFILER_JOB_VERSION",
        "PT_PROFILER_JOB_ATTEMPT_INDEX",
    ] {
        if let Ok(v) = std::env::var(key) {
            trace.set_metadata(key, Value::from(v));
        }
    }
    trace.set_metadata(metadata::DISTRIBUTED_INFO, distributed_info());
}

/// Rank and world size from torchrun's `RANK` / `WORLD_SIZE` (rank 0 of 1 otherwise); the
/// JSON writer spells the rank `"rank": <n>`, as HTA scans for.
fn distributed_info() -> Value {
    let read = |key: &str, default: u64| match std::env::var(key) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|_| {
            log::warn!(
                "omniprof: {key}={text:?} is not a non-negative integer; the trace says \
                 {key} {default}"
            );
            default
        }),
        Err(_) => default,
    };
    let rank = read("RANK", 0);
    let world_size = read("WORLD_SIZE", 1).max(rank + 1);
    [
        ("backend", Value::from("")),
        ("rank", Value::UInt(rank)),
        ("world_size", Value::UInt(world_size)),
    ]
    .into_iter()
    .collect()
}

/// The name of the host process's row: the program's file name.
pub(super) fn process_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "omniprof".to_owned())
}

/// This machine's name (empty when it cannot be read).
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `len` bytes; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// 32 upper-case hex digits, as PyTorch writes `trace_id`.
pub(super) fn new_trace_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hi = std::collections::hash_map::RandomState::new().build_hasher();
    hi.write_i64(clock::wall_now_ns());
    let mut lo = std::collections::hash_map::RandomState::new().build_hasher();
    lo.write_u32(std::process::id());
    format!("{:016X}{:016X}", hi.finish(), lo.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributed_info_spells_rank_for_hta() {
        let v = distributed_info().to_json();
        assert!(v.contains("\"rank\": "), "{v}");
        assert!(v.contains("\"world_size\": "), "{v}");
    }

    #[test]
    fn trace_ids_are_32_hex_digits() {
        let id = new_trace_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    }
}
