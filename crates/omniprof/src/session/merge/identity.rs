//! The process identity a trace carries: the job's `PT_PROFILER_JOB_*` variables, rank and
//! world size (`distributedInfo`), the process and host names and the trace id. Kept apart
//! from the merge proper because none of it depends on what was recorded.

use crate::clock;
use crate::keys::metadata;
use crate::Trace;
use crate::Value;

/// `PT_PROFILER_JOB_*` first (trace metadata with the same key wins later), then, in a
/// distributed job, `distributedInfo`: the first place a `"rank"` key appears, as HTA
/// requires.
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
    let var = |key: &str| std::env::var(key).ok();
    if let Some(info) = distributed_info(var("RANK"), var("WORLD_SIZE")) {
        trace.set_metadata(metadata::DISTRIBUTED_INFO, info);
    }
}

/// Rank and world size from torchrun's `RANK` / `WORLD_SIZE`; the JSON writer spells the
/// rank `"rank": <n>`, as HTA scans for. `None` outside a job (no `RANK`), as
/// `torch.profiler` writes no `distributedInfo` there: traces of unrelated processes in one
/// directory must not read as one rank's steps. A `RANK` that is not a number names no
/// rank either (warned about).
fn distributed_info(rank: Option<String>, world_size: Option<String>) -> Option<Value> {
    let number = |key: &str, text: &str, instead: &str| {
        let n = text.trim().parse::<u64>().ok();
        if n.is_none() {
            log::warn!("omniprof: {key}={text:?} is not a non-negative integer; {instead}");
        }
        n
    };
    let rank = number(
        "RANK",
        &rank?,
        "the trace names no rank (no distributedInfo)",
    )?;
    let world_size = world_size
        .and_then(|text| number("WORLD_SIZE", &text, "the trace says the rank plus one"))
        .unwrap_or(1)
        .max(rank + 1);
    Some(
        [
            ("backend", Value::from("")),
            ("rank", Value::UInt(rank)),
            ("world_size", Value::UInt(world_size)),
        ]
        .into_iter()
        .collect(),
    )
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
        let info = distributed_info(Some("3".into()), Some("8".into())).unwrap();
        assert_eq!(
            info.to_json(),
            r#"{"backend": "", "rank": 3, "world_size": 8}"#
        );
    }

    #[test]
    fn a_process_outside_a_job_writes_no_distributed_info() {
        assert_eq!(distributed_info(None, None), None);
        assert_eq!(distributed_info(None, Some("4".into())), None);
        assert_eq!(distributed_info(Some("abc".into()), Some("4".into())), None);
    }

    #[test]
    fn a_world_size_missing_or_below_the_rank_is_the_rank_plus_one() {
        let world_size = |info: Option<Value>| info.unwrap().to_json();
        assert_eq!(
            world_size(distributed_info(Some("2".into()), None)),
            r#"{"backend": "", "rank": 2, "world_size": 3}"#
        );
        assert_eq!(
            world_size(distributed_info(Some("2".into()), Some("x".into()))),
            r#"{"backend": "", "rank": 2, "world_size": 3}"#
        );
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
