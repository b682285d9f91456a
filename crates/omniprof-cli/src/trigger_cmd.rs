//! `omniprof trigger`: ask a running process for an on-demand trace, or list the processes
//! that listen for one.
//!
//! Exit status: 0 when the trace was written (its path on standard output, and on standard
//! error each note the process gave about it, such as an iteration-based request that fell
//! back to a time-based trace because the process had not stepped yet), the list was
//! printed, `--cancel` cancelled a request (what it was, on standard output), or `--dump`
//! had the process's flight recorder write its window (the dump's path, on standard
//! output); 1 when the process refused (also: nothing to cancel, no flight recorder, a dump
//! rate-limited), does not listen or did not answer; 2 when the
//! arguments or the config are invalid.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniprof::config_keys::{
    ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS, ACTIVITIES_LOG_FILE, ACTIVITY_TYPES,
    PROFILE_START_ITERATION, PROFILE_START_ITERATION_ROUNDUP,
};
use omniprof::on_demand::{on_demand_trace_dir, RuntimeDir, ONDEMAND_ENV, TRIGGER_MAX_BODY};
use omniprof::Config;

/// The trace was refused, or the process could not be reached.
const EXIT_FAILED: u8 = 1;
/// The arguments or the config are invalid.
const EXIT_USAGE: u8 = 2;
/// Added to a duration request's warmup and duration when waiting for its trace.
const WAIT_SLACK: Duration = Duration::from_secs(60);
/// How long to wait for an iteration-based trace: its length depends on the step rate.
const ITERATIONS_WAIT: Duration = Duration::from_secs(600);
/// How long `--cancel` waits for the process's answer.
const CANCEL_WAIT: Duration = Duration::from_secs(30);
/// How long `--dump` waits for the dump.
const DUMP_WAIT: Duration = Duration::from_secs(300);

/// Ask a running process (started with OMNIPROF_ONDEMAND=1) for an on-demand trace.
#[derive(Debug, clap::Args)]
pub(crate) struct TriggerArgs {
    /// The process to trace.
    #[arg(long, value_name = "PID", conflicts_with = "list")]
    pub pid: Option<u32>,
    /// Trace for this many milliseconds (after Kineto's warmup).
    #[arg(long, value_name = "N", conflicts_with = "iterations")]
    pub duration_ms: Option<u32>,
    /// Trace this many steps, starting at the next step.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u32>,
    /// Activity types to record, comma-separated (e.g. cpu_op,kernel).
    #[arg(long, value_name = "LIST")]
    pub activities: Option<String>,
    /// Where the trace goes; must lie inside the traced process's KINETO_ONDEMAND_TRACE_DIR
    /// (default the system temp dir: $TMPDIR, else /tmp).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// More Kineto config lines; the options above win over the same keys.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How long to wait for the trace, in seconds [default: warmup + duration + 60, or 600
    /// with --iterations].
    #[arg(long, value_name = "SECS")]
    pub timeout_s: Option<u64>,
    /// List the processes that listen for triggers: pid, state, command.
    #[arg(long, conflicts_with_all = ["duration_ms", "iterations", "activities", "output_dir", "config", "timeout_s"])]
    pub list: bool,
    /// Cancel the request pending or running in the process (with --pid); prints what was
    /// cancelled. A trace already being written is finished.
    #[arg(long, conflicts_with_all = ["list", "duration_ms", "iterations", "activities", "output_dir", "config"])]
    pub cancel: bool,
    /// Ask the process's flight recorder to write its last seconds now (with --pid), into its
    /// dump directory; prints the dump's path.
    #[arg(long, conflicts_with_all = ["list", "cancel", "duration_ms", "iterations", "activities", "output_dir", "config"])]
    pub dump: bool,
}

/// Runs `omniprof trigger`.
pub(crate) fn run(args: &TriggerArgs) -> ExitCode {
    if args.list {
        return list();
    }
    let Some(pid) = args.pid else {
        return usage("--pid PID is required (or --list)");
    };
    if args.cancel {
        let timeout = args.timeout_s.map_or(CANCEL_WAIT, Duration::from_secs);
        return printed(omniprof::on_demand::cancel_trigger(pid, timeout));
    }
    if args.dump {
        let timeout = args.timeout_s.map_or(DUMP_WAIT, Duration::from_secs);
        let dumped = omniprof::on_demand::request_flight_dump(pid, timeout);
        return printed(dumped.map(|path| path.display().to_string()));
    }
    let request = match build_request(args) {
        Ok(request) => request,
        Err(message) => return usage(&message),
    };
    let timeout = args.timeout_s.map_or(request.wait, Duration::from_secs);
    match omniprof::on_demand::send_trigger_traced(pid, &request.text, timeout) {
        Ok(traced) => {
            println!("{}", traced.path.display());
            for note in &traced.notes {
                eprintln!("note: {note}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Prints what the process answered, or the error.
fn printed(answer: Result<String, omniprof::on_demand::TriggerError>) -> ExitCode {
    match answer {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\nFor more information, try 'omniprof trigger --help'.");
    ExitCode::from(EXIT_USAGE)
}

/// The config text to send, and how long its trace may take.
struct Request {
    text: String,
    wait: Duration,
}

/// Builds the config text: iteration defaults (start at the next step), the `--config`
/// file, then the options, so that an option wins over the file. Each part is checked here
/// first, so a mistake is reported against what the user typed.
fn build_request(args: &TriggerArgs) -> Result<Request, String> {
    let mut text = String::new();
    let mut wait = ITERATIONS_WAIT;
    let mut config_len = 0;
    if args.iterations.is_some() {
        // As Dynolog sends it: start iteration 0 rounded up to the next step, so the trace
        // starts at the step after the request arrives.
        push_line(&mut text, PROFILE_START_ITERATION, 0);
        push_line(&mut text, PROFILE_START_ITERATION_ROUNDUP, 1);
    }
    if let Some(file) = &args.config {
        let lines = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read --config {}: {e}", file.display()))?;
        Config::parse(&lines).map_err(|e| format!("--config {}: {e}", file.display()))?;
        text.push_str(&lines);
        text.push('\n');
        config_len = lines.len();
    }
    match (args.duration_ms, args.iterations) {
        (Some(ms), _) => push_line(&mut text, ACTIVITIES_DURATION_MSECS, ms),
        (None, Some(n)) => push_line(&mut text, ACTIVITIES_ITERATIONS, n),
        (None, None) => return Err("one of --duration-ms N or --iterations N is required".into()),
    }
    if let Some(list) = &args.activities {
        Config::parse(&format!("{ACTIVITY_TYPES}={list}"))
            .map_err(|e| format!("--activities {list:?}: {}", e.reason))?;
        push_line(&mut text, ACTIVITY_TYPES, list);
    }
    let dir = output_dir(args.output_dir.as_deref())?;
    let name = default_trace_name();
    let log_file = dir.join(name);
    let log_file = log_file
        .to_str()
        .filter(|p| !p.contains(['#', '=', '\n']))
        .ok_or_else(|| {
            format!(
                "--output-dir {}: cannot be written in a config line",
                dir.display()
            )
        })?;
    push_line(&mut text, ACTIVITIES_LOG_FILE, log_file);

    let config = Config::parse(&text).map_err(|e| format!("the request: {e}"))?;
    // The server reads at most this much; checked here, before anything is sent.
    if text.len() > TRIGGER_MAX_BODY {
        let file = match &args.config {
            Some(file) => format!(" (--config {} gives {config_len} of them)", file.display()),
            None => String::new(),
        };
        return Err(format!(
            "the request is {} bytes, over the limit of {TRIGGER_MAX_BODY} bytes a trigger \
             takes{file}",
            text.len()
        ));
    }
    if args.duration_ms.is_some() {
        wait = config.warmup_duration() + config.activities_duration() + WAIT_SLACK;
    }
    Ok(Request { text, wait })
}

/// Appends the line `key=value`.
fn push_line(text: &mut String, key: &str, value: impl Display) {
    text.push_str(&format!("{key}={value}\n"));
}

/// The output directory as an absolute path the traced process can use (its working
/// directory is not ours): resolved when it exists, so `..` and symlinks are gone before the
/// process checks it against its allowed directory.
fn output_dir(dir: Option<&Path>) -> Result<PathBuf, String> {
    let dir = dir.map_or_else(|| PathBuf::from(on_demand_trace_dir()), Path::to_path_buf);
    std::fs::canonicalize(&dir)
        .or_else(|_| std::path::absolute(&dir))
        .map_err(|e| format!("--output-dir {}: {e}", dir.display()))
}

/// The trace's file name: `omniprof_trigger_<ms>_<16 hex digits>.pt.trace.json`, the time
/// to sort by and 64 random bits so that no other user can guess the path (in a shared
/// directory such as `/tmp`) and plant a link, a FIFO or a file there before the trace is
/// written. The traced process inserts `_<pid>` before `.pt.trace.json`.
fn default_trace_name() -> String {
    format!(
        "omniprof_trigger_{}_{:016x}.pt.trace.json",
        unix_ms(),
        random_u64()
    )
}

/// 64 bits from the kernel's random source; where it cannot be read, from the hasher keys
/// the standard library draws from the OS for each `RandomState`.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    match read {
        Ok(()) => u64::from_ne_bytes(bytes),
        Err(_) => {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(unix_ms());
            hasher.finish()
        }
    }
}

/// Milliseconds since the Unix epoch, to sort trace names by time.
fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Prints the listening processes of this user.
fn list() -> ExitCode {
    let listed = RuntimeDir::user().and_then(|dir| Ok((dir.list()?, dir)));
    let (listed, dir) = match listed {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: cannot list trigger sockets: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if listed.is_empty() {
        eprintln!(
            "no process listens for triggers in {}; start one with {ONDEMAND_ENV}=1",
            dir.path().display()
        );
        return ExitCode::SUCCESS;
    }
    println!("{:>8}  {:<24}  COMMAND", "PID", "STATE");
    for p in listed {
        println!("{:>8}  {:<24}  {}", p.pid, p.state, p.command);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file name of the `ACTIVITIES_LOG_FILE` line of a request built from `args`.
    fn log_file_name(args: &TriggerArgs) -> String {
        let request = build_request(args).unwrap();
        let line = request
            .text
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{ACTIVITIES_LOG_FILE}=")))
            .unwrap();
        Path::new(line)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn the_default_trace_name_carries_64_random_bits_so_no_other_user_can_guess_it() {
        let dir = tempfile::tempdir().unwrap();
        let args = TriggerArgs {
            pid: Some(1),
            duration_ms: Some(500),
            iterations: None,
            activities: None,
            output_dir: Some(dir.path().to_owned()),
            config: None,
            timeout_s: None,
            list: false,
            cancel: false,
            dump: false,
        };
        let names: Vec<String> = (0..2).map(|_| log_file_name(&args)).collect();
        for name in &names {
            let middle = name
                .strip_prefix("omniprof_trigger_")
                .and_then(|n| n.strip_suffix(".pt.trace.json"))
                .unwrap_or_else(|| panic!("{name}"));
            let (ms, random) = middle.split_once('_').unwrap_or_else(|| panic!("{name}"));
            assert!(ms.parse::<u128>().is_ok(), "{name}");
            assert_eq!(random.len(), 16, "{name}");
            assert!(random.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
        }
        // Two requests in the same millisecond still get two names.
        assert_ne!(names[0], names[1]);
    }
}
