//! Builds the test plugins of the dynamic plugin ABI into shared libraries: the C sample and
//! the corpus of broken C plugins under `plugins/` (with the system C compiler, `$CC` or
//! `cc`, warnings as errors, against `crates/omniprof-plugin-sys/include`), and the OpenReg
//! plugin crate `openreg-plugin` (with cargo).
//!
//! | Function | Result |
//! |---|---|
//! | [`build_sample`]`(out_dir)` | `out_dir/sample_plugin.so` from `plugins/sample-c`: profilers `MockPlugin` and `SampleCounters` |
//! | [`build_broken`]`(stem, out_dir)` | `out_dir/<stem>.so` from `plugins/broken/<stem>.c` |
//! | [`build_all`]`(out_dir)` | the sample and every broken plugin, in `out_dir` |
//! | [`openreg_plugin`]`()` | `<target dir>/<profile>/libopenreg_plugin.so`, built once per process |
//!
//! What each plugin emits or breaks is documented at the top of its source file and in
//! `plugins/README.md`. A compiler failure panics with the file and the compiler's output.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The flags every C plugin is built with: warnings are errors, so the corpus stays clean
/// C11 (`-pedantic`), and symbols are hidden unless exported, as the header's
/// `OMNIPROF_PLUGIN_EXPORT` does for `KinetoPlugin_register`.
const C_FLAGS: &[&str] = &[
    "-std=c11",
    "-pedantic",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-shared",
    "-fPIC",
    "-fvisibility=hidden",
];

/// The workspace root: two levels above this crate's manifest (`crates/test-support`).
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("../..");
    root.canonicalize()
        .unwrap_or_else(|e| panic!("workspace root {}: {e}", root.display()))
}

/// `crates/omniprof-plugin-sys/include`, which holds `omniprof_plugin.h`.
fn include_dir() -> PathBuf {
    workspace_root().join("crates/omniprof-plugin-sys/include")
}

/// `plugins/sample-c`, which holds `sample_plugin.c`.
fn sample_dir() -> PathBuf {
    workspace_root().join("plugins/sample-c")
}

/// `plugins/broken`: one `.c` file per broken plugin, and the header they share.
fn broken_dir() -> PathBuf {
    workspace_root().join("plugins/broken")
}

/// Every broken plugin's source, sorted by name.
fn broken_sources() -> Vec<PathBuf> {
    let dir = broken_dir();
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    let mut sources: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())))
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "c"))
        .collect();
    sources.sort();
    sources
}

/// The C compiler: `$CC`, else `cc`.
fn compiler() -> OsString {
    std::env::var_os("CC")
        .filter(|cc| !cc.is_empty())
        .unwrap_or_else(|| "cc".into())
}

/// Compiles the C plugin `source` into `out_dir/<stem>.so` (creating `out_dir`) and returns
/// that path. The library is written under a temporary name and renamed, so a concurrent
/// reader never sees half of it.
///
/// Panics, naming the file, when the compiler is missing or fails (with its output).
fn build_c_plugin(source: &Path, out_dir: &Path) -> PathBuf {
    build_c_plugin_with(source, out_dir, &[])
}

/// [`build_c_plugin`] with more compiler arguments (`-D` definitions).
fn build_c_plugin_with(source: &Path, out_dir: &Path, defines: &[&str]) -> PathBuf {
    let stem = source
        .file_stem()
        .unwrap_or_else(|| panic!("{} has no file name", source.display()));
    std::fs::create_dir_all(out_dir)
        .unwrap_or_else(|e| panic!("creating {}: {e}", out_dir.display()));
    let mut name = stem.to_owned();
    name.push(".so");
    let out = out_dir.join(&name);
    name.push(format!(".tmp{}", std::process::id()));
    let tmp = out_dir.join(name);

    let cc = compiler();
    let output = Command::new(&cc)
        .args(C_FLAGS)
        .args(defines)
        .arg("-I")
        .arg(include_dir())
        .arg("-o")
        .arg(&tmp)
        .arg(source)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the C compiler {cc:?} to build {}: {e}\n\
                 (the plugin tests need gcc or clang on PATH as `cc`, or set CC)",
                source.display()
            )
        });
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        panic!(
            "{cc:?} failed ({}) to build {}:\n{}{}",
            output.status,
            source.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("renaming {} to {}: {e}", tmp.display(), out.display()));
    out
}

/// Builds `plugins/sample-c/sample_plugin.c` into `out_dir/sample_plugin.so`.
pub fn build_sample(out_dir: &Path) -> PathBuf {
    build_c_plugin(&sample_dir().join("sample_plugin.c"), out_dir)
}

/// Builds the sample plugin into `out_dir/sample_plugin.so` with its `SampleCounters`
/// device (`"Sample device"`) numbered `device` instead of 3.
pub fn build_sample_on_device(out_dir: &Path, device: u32) -> PathBuf {
    let define = format!("-DSAMPLE_DEVICE={device}");
    build_c_plugin_with(&sample_dir().join("sample_plugin.c"), out_dir, &[&define])
}

/// Builds `plugins/broken/<stem>.c` into `out_dir/<stem>.so`.
pub fn build_broken(stem: &str, out_dir: &Path) -> PathBuf {
    let source = broken_dir().join(format!("{stem}.c"));
    assert!(
        source.is_file(),
        "no broken plugin {stem}: {} does not exist",
        source.display()
    );
    build_c_plugin(&source, out_dir)
}

/// Builds the sample and every broken plugin into `out_dir`, in parallel; returns the
/// libraries, the sample first, then the broken ones sorted by name.
pub fn build_all(out_dir: &Path) -> Vec<PathBuf> {
    let mut sources = vec![sample_dir().join("sample_plugin.c")];
    sources.extend(broken_sources());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = sources.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|source| build_c_plugin(source, out_dir))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// `libopenreg_plugin.so`, the OpenReg plugin crate built with
/// `cargo build -p openreg-plugin`, once per process. It goes into the target directory and
/// profile of the running test (`$CARGO_TARGET_DIR` when absolute, else the directory the
/// test executable runs from), so it is usually a no-op after the first time.
///
/// Panics with cargo's output when the build fails.
pub fn openreg_plugin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_openreg_plugin).clone()
}

/// The target directory and profile directory name (`debug`, `release`, …) of this test.
fn target_dir_and_profile() -> (PathBuf, String) {
    // A test executable runs from `<target dir>/<profile>/deps/`.
    let exe = std::env::current_exe().ok();
    let profile_dir = exe
        .as_deref()
        .and_then(Path::parent)
        .filter(|deps| deps.file_name().is_some_and(|name| name == "deps"))
        .and_then(Path::parent);
    let profile = profile_dir.and_then(Path::file_name).map_or_else(
        || "debug".to_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| profile_dir.and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(|| workspace_root().join("target"));
    (target_dir, profile)
}

fn build_openreg_plugin() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let (target_dir, profile) = target_dir_and_profile();
    let mut command = Command::new(&cargo);
    command
        .current_dir(workspace_root())
        .args(["build", "--quiet", "-p", "openreg-plugin", "--lib"])
        .arg("--target-dir")
        .arg(&target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build openreg-plugin: {e}"));
    assert!(
        output.status.success(),
        "`cargo build -p openreg-plugin` failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let library = target_dir.join(&profile).join("libopenreg_plugin.so");
    assert!(
        library.is_file(),
        "cargo built openreg-plugin but {} does not exist",
        library.display()
    );
    library
}
