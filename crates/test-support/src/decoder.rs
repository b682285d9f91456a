//! The independent decoder of `.pftrace` files: Perfetto's own schema (the PyPI `perfetto`
//! wheel's `perfetto_trace_pb2`, with `protobuf`) run by `python/perfetto_compare.py`. It
//! checks the rules of a valid trace (every track declared before use, slices nested per
//! track, times never going backwards on a track, interned ids defined, the sequence's first
//! packet clearing its state) and, given the Chrome JSON of the same trace, that every
//! slice, instant, counter sample and flow of the JSON is there with the same names, rows,
//! times and args.
//!
//! The Python is `$OMNIPROF_PERFETTO_PYTHON` (CI installs the wheel into `target/perfetto-venv`
//! and sets it), else `target/perfetto-venv/bin/python` of the workspace when it exists. Without
//! one a check is skipped, saying why ([`skip`](crate::skip)).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip::{skip, Needs};

const PYTHON_ENV: &str = "OMNIPROF_PERFETTO_PYTHON";
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/perfetto_compare.py");

/// What the decoder reported.
#[derive(Debug)]
pub struct DecodedReport {
    /// Slices decoded.
    pub slices: u64,
    /// Instants decoded.
    pub instants: u64,
    /// Counter values decoded.
    pub counters: u64,
    /// Flows decoded.
    pub flows: u64,
    /// Broken rules (at most 20, `violations_count` in `json`).
    pub violations: Vec<String>,
    /// Events of the JSON trace the protobuf trace lacks, and the other way round (empty
    /// without a JSON trace to compare with).
    pub missing: Vec<serde_json::Value>,
    /// Anything else the decoder reported.
    pub extra: Vec<serde_json::Value>,
    /// The whole report.
    pub json: serde_json::Value,
}

fn python() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(PYTHON_ENV) {
        return Ok(PathBuf::from(path));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = workspace.join("target/perfetto-venv/bin/python");
    if venv.is_file() {
        return Ok(venv);
    }
    Err(format!(
        "{PYTHON_ENV} is unset and there is no {}",
        venv.display()
    ))
}

/// Decodes `pftrace` and compares it with `json` (the Chrome JSON of the same trace) when
/// given. `None`: skipped, see the module docs.
pub fn decode(pftrace: &Path, json: Option<&Path>) -> Option<DecodedReport> {
    let python = match python() {
        Ok(python) => python,
        Err(reason) => {
            skip("Perfetto protobuf decode", Needs::PerfettoSchema, &reason);
            return None;
        }
    };
    let out = Command::new(&python)
        .arg(SCRIPT)
        .arg(pftrace)
        .args(json)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the decoder failed on {} ({}):\n{stdout}\n{}",
        pftrace.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("decoder output is not JSON ({e}): {stdout}"));
    let count = |key: &str| json[key].as_u64().unwrap_or(0);
    let list = |key: &str| json[key].as_array().cloned().unwrap_or_default();
    Some(DecodedReport {
        slices: count("slices"),
        instants: count("instants"),
        counters: count("counters"),
        flows: count("flows"),
        violations: list("violations")
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        missing: list("missing"),
        extra: list("extra"),
        json,
    })
}

/// Asserts that `pftrace` decodes with no broken rule and, given `json`, holds exactly its
/// events. Returns the report; `None`: skipped.
pub fn assert_matches_json(pftrace: &Path, json: Option<&Path>) -> Option<DecodedReport> {
    let report = decode(pftrace, json)?;
    assert!(
        report.violations.is_empty() && report.missing.is_empty() && report.extra.is_empty(),
        "{} does not decode to the events of {:?}: {}",
        pftrace.display(),
        json,
        report.json
    );
    Some(report)
}
