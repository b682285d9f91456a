//! The CLI's logger: the library's `log` records (rejected plugins, dropped events, backend
//! failures) go to stderr as `warning: …`, one line each.
//!
//! The level is `warn` unless `RUST_LOG` names one (`off`, `error`, `warn`, `info`,
//! `debug`, `trace`); `-v` raises it (`-v` info, `-vv` debug, `-vvv` trace) and `-q` keeps
//! errors only, over `RUST_LOG`.

use std::io::Write;

use log::{LevelFilter, Log, Metadata, Record};

/// The variable whose value, a level name, sets the level when no flag does.
const LEVEL_VARIABLE: &str = "RUST_LOG";

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                log::Level::Warn => "warning".to_owned(),
                other => other.as_str().to_ascii_lowercase(),
            };
            // A closed stderr has nowhere to say so.
            let _ = writeln!(std::io::stderr().lock(), "{level}: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger with the level `verbose` (`-v` count), `quiet` (`-q`) and
/// `RUST_LOG` select. An unreadable `RUST_LOG` is reported and the default kept.
pub(crate) fn install(verbose: u8, quiet: bool) {
    let level = if quiet {
        LevelFilter::Error
    } else if verbose > 0 {
        match verbose {
            1 => LevelFilter::Info,
            2 => LevelFilter::Debug,
            _ => LevelFilter::Trace,
        }
    } else {
        match std::env::var(LEVEL_VARIABLE) {
            Ok(text) if !text.trim().is_empty() => text.trim().parse().unwrap_or_else(|_| {
                eprintln!(
                    "warning: {LEVEL_VARIABLE}={text:?} is not a level (off, error, warn, \
                     info, debug, trace); using warn"
                );
                LevelFilter::Warn
            }),
            _ => LevelFilter::Warn,
        }
    };
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
}
