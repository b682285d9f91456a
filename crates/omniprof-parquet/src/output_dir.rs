//! [`prepare`]: the directory the tables go to, made new or taken empty, never through
//! another user's link, nor another user's directory, in a sticky directory (the rule of
//! the trace save, [`check_output_dir`]).

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use omniprof_trace::check_output_dir;

use crate::error::ParquetError;

/// Makes `out_dir` (a new or empty directory), refusing what the tables must not go into:
/// another user's link or directory in a sticky world-writable directory, or something
/// that is not a directory, each named with what is wrong.
pub(crate) fn prepare(out_dir: &Path) -> Result<(), ParquetError> {
    let refuse = |why: String| ParquetError::OutputRefused {
        path: out_dir.to_owned(),
        why,
    };
    check_output_dir(out_dir).map_err(|e| refuse(e.to_string()))?;
    match fs::metadata(out_dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(refuse(format!("it is {}, not a directory", kind(&meta))));
        }
        Err(e) if e.kind() == ErrorKind::NotFound && fs::symlink_metadata(out_dir).is_ok() => {
            return Err(refuse(
                "it is a symbolic link to nothing (its target does not exist)".to_owned(),
            ));
        }
        _ => {}
    }
    fs::create_dir_all(out_dir).map_err(|e| ParquetError::io(out_dir, e))?;
    // Again, now that it exists: a link, or another user's directory, planted while it was
    // being made is not taken.
    check_output_dir(out_dir).map_err(|e| refuse(e.to_string()))?;
    let mut entries = fs::read_dir(out_dir).map_err(|e| ParquetError::io(out_dir, e))?;
    if entries.next().is_some() {
        return Err(ParquetError::OutputNotEmpty(out_dir.to_owned()));
    }
    Ok(())
}

/// What a path that is not a directory is, for the message.
fn kind(meta: &fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_file() {
        return "a regular file";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "neither a file nor a directory"
}
