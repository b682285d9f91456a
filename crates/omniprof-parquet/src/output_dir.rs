//! [`prepare`]: the directory the tables go to, made new or taken empty, never through
//! another user's link in a sticky directory (the rule of the trace save's
//! [`check_protected_links`]).

use std::fs;
use std::path::Path;

use omniprof_trace::check_protected_links;

use crate::error::ParquetError;

/// Makes `out_dir` (a new or empty directory), refusing another user's link in a sticky
/// world-writable directory, named with its owner.
pub(crate) fn prepare(out_dir: &Path) -> Result<(), ParquetError> {
    let refuse = |why: String| ParquetError::OutputRefused {
        path: out_dir.to_owned(),
        why,
    };
    check_protected_links(out_dir).map_err(|e| refuse(e.to_string()))?;
    fs::create_dir_all(out_dir).map_err(|e| ParquetError::io(out_dir, e))?;
    // Again, now that it exists: a link planted while it was being made is not followed.
    check_protected_links(out_dir).map_err(|e| refuse(e.to_string()))?;
    let mut entries = fs::read_dir(out_dir).map_err(|e| ParquetError::io(out_dir, e))?;
    if entries.next().is_some() {
        return Err(ParquetError::OutputNotEmpty(out_dir.to_owned()));
    }
    Ok(())
}
