//! CUPTI for tests that have no GPU: the installed CUPTI headers (for record layouts) and a
//! simulated CUPTI and CUDA driver built from `crates/omniprof-cupti/tests/sim` against them.
//!
//! The headers are looked for in `OMNIPROF_CUPTI_INCLUDE` (`:`-separated directories), else
//! in the directories `crates/omniprof-cupti/tests/sim/include-dirs.txt` lists, under the
//! site-packages of `target/py-venv` (PyTorch's CUDA build brings `nvidia-cuda-cupti`, and
//! `triton`, whose include directory has `cuda.h` and what it includes) or, for its absolute
//! lines, as written (a CUDA toolkit). The Python test reads the same list. Where they are
//! missing the caller is told to skip ([`Needs::CuptiHeaders`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip::{self, Needs};

/// The directories to look in, in order: the one list the Rust and Python tests share.
const SEARCH_ORDER: &str = include_str!("../../omniprof-cupti/tests/sim/include-dirs.txt");

/// Include directories holding `cupti_activity.h` and `cuda.h` (CUPTI's first), or `None`.
pub fn include_dirs() -> Option<Vec<PathBuf>> {
    if let Some(dirs) = std::env::var_os("OMNIPROF_CUPTI_INCLUDE") {
        return Some(std::env::split_paths(&dirs).collect());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let listed: Vec<&Path> = SEARCH_ORDER
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(Path::new)
        .collect();
    let (absolute, relative): (Vec<&Path>, Vec<&Path>) =
        listed.into_iter().partition(|d| d.is_absolute());
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(libs) = std::fs::read_dir(root.join("target/py-venv/lib")) {
        for lib in libs.flatten() {
            let site = lib.path().join("site-packages");
            candidates.extend(relative.iter().map(|sub| site.join(sub)));
        }
    }
    candidates.extend(absolute.into_iter().map(Path::to_path_buf));
    let with = |header: &str| {
        candidates
            .iter()
            .find(|d| d.join(header).is_file())
            .cloned()
    };
    let cupti = with("cupti_activity.h")?;
    // cuda.h's directory must hold the headers it includes too (a wheel's may not).
    let cuda = with("crt/host_defines.h")?;
    Some(vec![cupti, cuda])
}

/// Compiles `source` (a path under `crates/omniprof-cupti/tests`) with the CUPTI headers
/// into `out`, as a shared library when `soname` is given; `None` (after [`skip::skip`])
/// where the headers or the compiler are missing.
pub fn compile(check: &str, source: &str, out: &Path, soname: Option<&str>) -> Option<()> {
    let Some(dirs) = include_dirs() else {
        skip::skip(
            check,
            Needs::CuptiHeaders,
            "no cupti_activity.h and cuda.h found",
        );
        return None;
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut command = Command::new(&cc);
    command.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../omniprof-cupti/tests")
            .join(source),
    );
    for dir in &dirs {
        command.arg("-I").arg(dir);
    }
    if let Some(soname) = soname {
        command.args(["-shared", "-fPIC", "-pthread"]);
        command.arg(format!("-Wl,-soname,{soname}"));
    }
    let status = match command.arg("-o").arg(out).status() {
        Ok(status) => status,
        Err(e) => {
            skip::skip(check, Needs::CCompiler, &format!("{cc} did not run: {e}"));
            return None;
        }
    };
    assert!(
        status.success(),
        "{source} did not compile against {dirs:?}"
    );
    Some(())
}

/// The simulated libraries: `libcuda.so.1` in `dir` (for `LD_LIBRARY_PATH`) and the CUPTI at
/// `cupti` (for `OMNIPROF_CUPTI_LIBRARY`).
#[derive(Clone, Debug)]
pub struct Simulated {
    /// The directory holding `libcuda.so.1`.
    pub dir: PathBuf,
    /// The simulated `libcupti.so`.
    pub cupti: PathBuf,
}

/// Builds the simulated CUPTI and driver into `dir`, or `None` (after [`skip::skip`]).
pub fn build_simulated(check: &str, dir: &Path) -> Option<Simulated> {
    std::fs::create_dir_all(dir).unwrap();
    let cupti = dir.join("libcupti.so");
    compile(check, "sim/cupti.c", &cupti, Some("libcupti.so"))?;
    compile(
        check,
        "sim/cuda.c",
        &dir.join("libcuda.so.1"),
        Some("libcuda.so.1"),
    )?;
    Some(Simulated {
        dir: dir.to_owned(),
        cupti,
    })
}
