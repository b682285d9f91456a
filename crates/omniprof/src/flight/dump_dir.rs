//! Where triggered dumps go: their names, and writing them only into a directory that is
//! the user's own, never through a link.
//!
//! A dump is named `flight_<reason>_step<N>_rank<R>_pid<P>_<n>.pt.trace.json`: the step and
//! the rank (torchrun's `RANK`, 0 without) put the ranks' dumps of one step side by side for
//! `omniprof ranks`. The directory is created when missing (mode 0700); one that is a
//! symbolic link, not a directory, another user's, or not writable is refused, and the dump
//! with it (the job goes on). The file is created anew (`O_EXCL | O_NOFOLLOW`, mode 0600),
//! so a link planted under its name is not followed; a write that fails (a full disk)
//! removes what it wrote.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::reason::DumpReason;
use crate::Trace;

/// The dump directory, as the builder named it.
pub(super) struct DumpDir {
    path: PathBuf,
    /// A refusal was reported (one warning per recorder).
    refused: AtomicBool,
}

/// This process's rank in its job: torchrun's `RANK`, 0 without.
pub(super) fn rank() -> u64 {
    std::env::var("RANK")
        .ok()
        .and_then(|r| r.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// The file name of dump `count` of this process, for `reason` at `step`.
pub(super) fn file_name(reason: DumpReason, step: i64, count: u64) -> String {
    let rank = rank();
    format!(
        "flight_{}_step{step}_rank{rank}_pid{}_{count}.pt.trace.json",
        reason.as_str(),
        std::process::id()
    )
}

impl DumpDir {
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            refused: AtomicBool::new(false),
        }
    }

    /// True the first time a dump is refused (the one time it is reported).
    pub(super) fn first_refusal(&self) -> bool {
        !self.refused.swap(true, Ordering::Relaxed)
    }

    /// The steps other ranks' dumps in the directory ask this rank for (see
    /// [`DumpReason::asks_peers`]), each once: `answered` keeps the names seen. Only dumps
    /// made since `since` count; a directory that is not a plain one is not read.
    pub(super) fn peers_asking(
        &self,
        since: std::time::SystemTime,
        answered: &mut std::collections::HashSet<String>,
    ) -> Vec<i64> {
        if !std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.is_dir()) {
            return Vec::new();
        }
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let me = rank();
        let mut steps = Vec::new();
        let mut present = std::collections::HashSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((reason, step, rank)) = DumpReason::of_file_name(&name) else {
                continue;
            };
            present.insert(name.clone());
            if rank == me || !reason.asks_peers() || answered.contains(&name) {
                continue;
            }
            let recent = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at >= since);
            if recent {
                steps.push(step);
            }
            answered.insert(name);
        }
        // Bounded by what the directory holds (the ranks' last dumps).
        answered.retain(|name| present.contains(name));
        steps
    }

    /// Creates the new file `name` in the directory, after checking the directory; the
    /// error names why it was refused.
    pub(super) fn create(&self, name: &str) -> Result<(PathBuf, File), String> {
        self.check()?;
        let path = self.path.join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map(|file| (path.clone(), file))
            .map_err(|e| format!("cannot create {}: {e}", path.display()))
    }

    fn check(&self) -> Result<(), String> {
        let dir = self.path.display();
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.path)
                    .map_err(|e| {
                        format!("the dump directory {dir} is missing and cannot be created: {e}")
                    })?;
                std::fs::symlink_metadata(&self.path)
                    .map_err(|e| format!("the dump directory {dir}: {e}"))?
            }
            Err(e) => return Err(format!("the dump directory {dir}: {e}")),
        };
        if meta.file_type().is_symlink() {
            return Err(format!(
                "the dump directory {dir} is a symbolic link (nothing is written through a link)"
            ));
        }
        if !meta.is_dir() {
            return Err(format!("the dump directory {dir} is not a directory"));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!(
                "the dump directory {dir} belongs to another user (uid {}, this process runs \
                 as {me})",
                meta.uid()
            ));
        }
        let c_path = std::ffi::CString::new(self.path.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("the dump directory {dir} has a NUL byte in its name"))?;
        // As the process's effective user, the one that would write.
        // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
        let access = unsafe {
            libc::faccessat(
                libc::AT_FDCWD,
                c_path.as_ptr(),
                libc::W_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        };
        if access != 0 {
            return Err(format!(
                "the dump directory {dir} is not writable: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

/// Writes `trace` as Chrome JSON into `file`, created as `path`; removes it on failure.
pub(super) fn write(trace: &Trace, path: &Path, file: File) -> Result<(), String> {
    let mut out = BufWriter::new(file);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let written = crate::trace::write_chrome(trace, &name, &mut out)
        .and_then(|_| out.flush())
        .and_then(|()| out.get_ref().sync_data());
    written.map_err(|e| {
        let _ = std::fs::remove_file(path);
        format!("writing {} failed: {e}", path.display())
    })
}
