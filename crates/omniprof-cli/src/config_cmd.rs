//! `omniprof config check [FILE|-] [--json]`: checks a Kineto `KEY=VALUE` config the way the
//! profiler would read it, reporting every warning and the first error with its line.
//!
//! Exit status: 0 when the config is accepted (warnings allowed), 2 when it is rejected (text
//! that is not UTF-8 included), 1 when the input cannot be read or the output cannot be
//! written.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use omniprof::{Config, ConfigError};

/// The config was read but rejected.
const EXIT_INVALID: u8 = 2;
/// The input could not be read, or the report could not be written.
const EXIT_IO: u8 = 1;

/// Check a Kineto `KEY=VALUE` config: print its warnings, or its first error with the line.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The config file to check; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    pub file: Option<PathBuf>,
    /// Print the resolved config as JSON on standard output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `omniprof config check`: `ok: <file>` and any warnings on standard error (or, with
/// `--json`, the resolved config on standard output), or `error: <file>:<line>: ...`.
pub(crate) fn check(args: &CheckArgs) -> ExitCode {
    let status = run(
        args,
        &mut io::stdin().lock(),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    ExitCode::from(status.unwrap_or_else(|e| {
        // A reader that stopped reading (`| head`) needs no message; for anything else,
        // standard error may be the stream that failed, but nothing better is left to try.
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("error: cannot write the report: {e}");
        }
        EXIT_IO
    }))
}

/// [`check`] over explicit streams, so it can be tested. Errors are write failures only.
fn run(
    args: &CheckArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<u8> {
    let path = args.file.as_deref().filter(|p| *p != Path::new("-"));
    let name = path.map_or_else(|| "<stdin>".to_owned(), |p| p.display().to_string());
    let bytes = match read_bytes(path, stdin) {
        Ok(bytes) => bytes,
        Err(e) => {
            writeln!(stderr, "error: {name}: {e}")?;
            return Ok(EXIT_IO);
        }
    };
    // Text that is not UTF-8 is an invalid config like any other: named by its line.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..valid]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            writeln!(
                stderr,
                "error: {name}:{line}: not valid UTF-8 (byte {valid})"
            )?;
            return Ok(EXIT_INVALID);
        }
    };

    let mut config = Config::default();
    // The warnings are reported below, with the file's name; the library's log of them
    // would say each twice.
    let level = log::max_level();
    log::set_max_level(level.min(log::LevelFilter::Error));
    let applied = config.apply(&text);
    log::set_max_level(level);
    match applied {
        Ok(warnings) => {
            for w in &warnings {
                writeln!(
                    stderr,
                    "warning: {name}:{}: {}: {}",
                    w.line, w.key, w.message
                )?;
            }
            if args.json {
                serde_json::to_writer_pretty(&mut *stdout, &config.to_json())?;
                writeln!(stdout)?;
            } else {
                writeln!(stderr, "ok: {name}")?;
            }
            Ok(0)
        }
        Err(err) => {
            writeln!(stderr, "error: {name}:{}", located(&err))?;
            Ok(EXIT_INVALID)
        }
    }
}

fn read_bytes(path: Option<&Path>, stdin: &mut dyn Read) -> io::Result<Vec<u8>> {
    match path {
        Some(path) => fs::read(path),
        None => {
            let mut bytes = Vec::new();
            stdin.read_to_end(&mut bytes)?;
            Ok(bytes)
        }
    }
}

/// `<line>: <key>: <reason>`, or `<line>: <reason>` for a line without a key.
fn located(err: &ConfigError) -> String {
    match &err.key {
        Some(key) => format!("{}: {key}: {}", err.line, err.reason),
        None => format!("{}: {}", err.line, err.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the command on `input` (as stdin, or as a file when `file` is set) and returns
    /// (status, stdout, stderr).
    fn check_text(input: &str, as_file: bool, json: bool) -> (u8, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let file = as_file.then(|| {
            let path = dir.path().join("kineto.conf");
            fs::write(&path, input).unwrap();
            path
        });
        let args = CheckArgs { file, json };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = run(&args, &mut input.as_bytes(), &mut out, &mut err).unwrap();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        let dir_prefix = format!("{}/", dir.path().display());
        (status, text(out), text(err).replace(&dir_prefix, ""))
    }

    #[test]
    fn accepted_with_warnings() {
        let (status, out, err) = check_text("ACTIVITY_TYPES=cpu_op\n\nEVENTS=x\n", false, false);
        assert_eq!(status, 0);
        assert_eq!(out, "");
        assert_eq!(
            err,
            "warning: <stdin>:3: EVENTS: unrecognized config key; line ignored\nok: <stdin>\n"
        );
    }

    #[test]
    fn rejected_names_file_line_and_key() {
        let (status, out, err) = check_text("# c\nACTIVITY_TYPES=memcopy\n", true, false);
        assert_eq!(status, EXIT_INVALID);
        assert_eq!(out, "");
        assert_eq!(
            err,
            "error: kineto.conf:2: ACTIVITY_TYPES: invalid activity type \"memcopy\"\n"
        );
        let (status, _, err) = check_text("foo", false, false);
        assert_eq!(status, EXIT_INVALID);
        assert_eq!(
            err,
            "error: <stdin>:1: invalid config line \"foo\" (expected KEY=VALUE)\n"
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_rejected_with_its_line() {
        let args = CheckArgs {
            file: None,
            json: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let input = b"ACTIVITY_TYPES=cpu_op\n# ok\nREQUEST_TRACE_ID=\xff\xfe\n";
        let status = run(&args, &mut &input[..], &mut out, &mut err).unwrap();
        assert_eq!(status, EXIT_INVALID);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "error: <stdin>:3: not valid UTF-8 (byte 44)\n"
        );
    }

    #[test]
    fn json_goes_to_stdout() {
        let (status, out, err) = check_text("ACTIVITY_TYPES=driver", true, true);
        assert_eq!(status, 0);
        assert_eq!(err, "");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(json["activity_types"], serde_json::json!(["cuda_driver"]));
        assert_eq!(
            json["enabled"],
            serde_json::json!(["cuda_driver", "xpu_driver", "privateuse1_driver"])
        );
    }

    #[test]
    fn dash_reads_stdin_and_read_errors_name_the_file() {
        let args = CheckArgs {
            file: Some(PathBuf::from("-")),
            json: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = run(&args, &mut "foo=1".as_bytes(), &mut out, &mut err).unwrap();
        assert_eq!(status, 0);
        assert!(String::from_utf8(err).unwrap().ends_with("ok: <stdin>\n"));

        let args = CheckArgs {
            file: Some(PathBuf::from("/nonexistent/omniprof.conf")),
            json: false,
        };
        let mut err = Vec::new();
        let status = run(&args, &mut io::empty(), &mut out, &mut err).unwrap();
        assert_eq!(status, EXIT_IO);
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.starts_with("error: /nonexistent/omniprof.conf: "),
            "{err}"
        );
    }
}
