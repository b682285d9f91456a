//! `omniprof run [options] -- COMMAND…`: profile an unmodified Python program, or a whole
//! `torchrun` job, and summarize it.
//!
//! The command runs as a child whose environment reaches every Python process it starts: a
//! state directory of this run (in the temp dir, removed at the end) holds a
//! `sitecustomize` module ([`SITECUSTOMIZE`]), put first on `PYTHONPATH`, and the options go
//! as JSON in `OMNIPROF_RUN`. That module hands over to any `sitecustomize` it hides and
//! starts `omniprof._run`, which profiles the process with the drop-in's `profile` (a
//! schedule for `--steps`, counting optimizer steps and `omniprof.step()`) and writes its
//! trace into the run directory, named by rank and pid. A Python process that lacks the
//! `omniprof` package is not profiled, and says so in the state directory. Each process
//! keeps a status file there (steps seen and recorded) for the one-line status this command
//! draws on standard error while the child runs.
//!
//! With `--flight-recorder`, each process runs the flight recorder instead (`omniprof._run`
//! switches it on as `OMNIPROF_FLIGHT_RECORDER` would, at the program's import of torch),
//! dumping into the run directory or `--dump-dir`; the end lists the dumps of the run's
//! processes (found by the pid in their names) and summarizes them as it does traces.
//!
//! Ctrl-C at a terminal reaches the child directly (same process group), so this process
//! forwards only the SIGINT and SIGTERM another process sent it; either way it waits for the
//! child, whose processes write the traces of what ran. At the end it names the run
//! directory, prints the job's summary (`summary`'s top rows, over all traces) and with
//! several ranks the `ranks` report, and writes the `report` page there: the same code as
//! those commands, given the same arguments a user would type.
//!
//! Exit status: the child's (128 + N when a signal N ended it); 127 when the command does
//! not exist, 126 when it cannot be run; 2 for bad arguments or a run directory that cannot
//! be made.

use std::ffi::{OsStr, OsString};
use std::io::{self, ErrorKind, IsTerminal, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniprof::clock::UtcTime;

use crate::job::trace_files;
use crate::output::print;
use crate::{ranks_cmd, report_cmd, summary_cmd};

/// The `sitecustomize` module each Python process of the run imports first.
const SITECUSTOMIZE: &str = include_str!("run_sitecustomize.py");
/// Where the options reach the profiled processes (JSON), as `omniprof._run.ENV` reads them.
const OPTIONS_ENV: &str = "OMNIPROF_RUN";
/// The state directory: status files and the `sitecustomize` module's directory.
const STATE_ENV: &str = "OMNIPROF_RUN_STATE";
/// How often the child is polled and the status line redrawn.
const POLL: Duration = Duration::from_millis(100);
/// The exit status of a command that does not exist, and of one that cannot run (a shell's).
const EXIT_NOT_FOUND: u8 = 127;
const EXIT_CANNOT_RUN: u8 = 126;
/// Bad arguments, or a run directory that cannot be made.
const EXIT_USAGE: u8 = 2;

/// Profile an unmodified Python program, or a whole `torchrun` job.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Record steps A to B, inclusive (`3:5` is three steps), counting from 0: each
    /// optimizer step, and each `omniprof.step()` call, ends one. Step A-1 is a warm-up.
    #[arg(long, value_name = "A:B", value_parser = parse_steps, conflicts_with_all = ["delay", "duration", "ondemand"])]
    steps: Option<(u64, u64)>,
    /// Start recording this many seconds after each process starts [default: at once].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, conflicts_with = "ondemand")]
    delay: Option<f64>,
    /// Record for this many seconds, then write the trace [default: until the process
    /// exits].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, conflicts_with = "ondemand")]
    duration: Option<f64>,
    /// Record nothing by itself: each process serves `omniprof trigger` (OMNIPROF_ONDEMAND=1).
    #[arg(long)]
    ondemand: bool,
    /// Run the flight recorder in each process instead of a profile: it keeps the last
    /// seconds of every op and writes them out when a step is slow, the process hangs
    /// (OMNIPROF_FLIGHT_HANG_S) or fails, or `omniprof trigger --pid P --dump` asks.
    #[arg(long, conflicts_with_all = [
        "steps", "delay", "duration", "ondemand", "activities", "with_stack", "with_flops",
        "with_modules", "dataloader_workers",
    ])]
    flight_recorder: bool,
    /// With --flight-recorder: the seconds it keeps [default: 30].
    #[arg(long, value_name = "SECS", value_parser = parse_window, requires = "flight_recorder")]
    seconds: Option<f64>,
    /// With --flight-recorder: where the dumps go [default: the run directory].
    #[arg(long, value_name = "DIR", requires = "flight_recorder")]
    dump_dir: Option<PathBuf>,
    /// What to record, comma-separated: ProfilerActivity names (CPU, CUDA, XPU, MTIA, HPU,
    /// PrivateUse1) or activity type names [default: torch.profiler's, CPU and the
    /// accelerator present].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    activities: Vec<String>,
    /// Record input shapes (torch.profiler's `record_shapes`).
    #[arg(long)]
    record_shapes: bool,
    /// Record the allocator's reports (torch.profiler's `profile_memory`).
    #[arg(long)]
    profile_memory: bool,
    /// Record Python stacks (torch.profiler's `with_stack`).
    #[arg(long)]
    with_stack: bool,
    /// Count FLOPs (torch.profiler's `with_flops`).
    #[arg(long)]
    with_flops: bool,
    /// Record the module hierarchy (torch.profiler's `with_modules`).
    #[arg(long)]
    with_modules: bool,
    /// Also write the traces of DataLoader workers that start a new interpreter (the
    /// `spawn` and `forkserver` start methods); forked workers are never profiled.
    #[arg(long)]
    dataloader_workers: bool,
    /// The run directory: created, or an empty one [default: omniprof-run-<UTC time> in
    /// the current directory].
    #[arg(short, long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Rows of the job summary printed at the end (the ops of most self CPU time).
    #[arg(long, value_name = "N", default_value_t = 10)]
    row_limit: usize,
    /// The command to run, after `--`.
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

/// `A:B` with A ≤ B.
fn parse_steps(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("expected A:B, steps A to B inclusive (e.g. 3:5), not {text:?}");
    let (a, b) = text.split_once(':').ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b {
        return Err(format!("the first step ({a}) comes after the last ({b})"));
    }
    Ok((a, b))
}

/// A finite, non-negative number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!(
            "expected seconds (a number, 0 or more), not {text:?}"
        )),
    }
}

/// A finite number of seconds above 0.
fn parse_window(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!("expected seconds (a number above 0), not {text:?}")),
    }
}

impl RunArgs {
    /// Where the flight recorder's dumps go, with --flight-recorder: `--dump-dir` (made
    /// absolute, since the child may change directory) or the run directory.
    fn dump_dir(&self, dir: &Path) -> Option<PathBuf> {
        let cwd = std::env::current_dir().unwrap_or_default();
        self.flight_recorder.then(|| {
            self.dump_dir
                .as_ref()
                .map_or_else(|| dir.to_owned(), |d| cwd.join(d))
        })
    }

    /// The options as `omniprof._run` reads them from `OMNIPROF_RUN`.
    fn options_json(&self, dir: &Path) -> String {
        let activities = (!self.activities.is_empty()).then_some(&self.activities);
        let flight = self
            .dump_dir(dir)
            .map(|dump_dir| serde_json::json!({"seconds": self.seconds, "dump_dir": dump_dir}));
        serde_json::json!({
            "dir": dir,
            "steps": self.steps.map(|(a, b)| [a, b]),
            "delay_s": self.delay,
            "duration_s": self.duration,
            "ondemand": self.ondemand,
            "flight_recorder": flight,
            "activities": activities,
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_flops": self.with_flops,
            "with_modules": self.with_modules,
            "dataloader_workers": self.dataloader_workers,
        })
        .to_string()
    }
}

/// Runs `omniprof run`.
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let dir = match make_run_dir(args.output_dir.as_deref()) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let state = match State::new() {
        Ok(state) => state,
        Err(e) => {
            eprintln!("error: cannot make the run's state directory: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let program = &args.command[0];
    let mut command = Command::new(program);
    command
        .args(&args.command[1..])
        .env("PYTHONPATH", state.python_path())
        .env(OPTIONS_ENV, args.options_json(&dir))
        .env(STATE_ENV, &state.dir);
    if args.ondemand {
        command.env(omniprof::on_demand::ONDEMAND_ENV, "1");
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let (code, why) = match e.kind() {
                ErrorKind::NotFound => (EXIT_NOT_FOUND, "no such command".to_owned()),
                ErrorKind::PermissionDenied => (EXIT_CANNOT_RUN, "not executable".to_owned()),
                _ => (EXIT_CANNOT_RUN, e.to_string()),
            };
            eprintln!("error: cannot run {}: {why}", quoted(program));
            remove_if_empty(&dir);
            return ExitCode::from(code);
        }
    };
    let signals = Forwarding::to(child.id());
    let mut line = StatusLine::new();
    let dump_dir = args.dump_dir(&dir);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        let mut status = state.status(&dir);
        match &dump_dir {
            Some(dump_dir) => {
                status.traces = dumps_of(dump_dir, &state.pids()).len();
                line.draw_flight(&status);
            }
            None => line.draw(&status),
        }
        std::thread::sleep(POLL);
    };
    line.clear();
    let forwarded = signals.stop();
    let code = match status {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("error: cannot wait for {}: {e}", quoted(program));
            1
        }
    };
    if let Some(signal) = forwarded {
        eprintln!("omniprof run: forwarded {signal} to the command");
    }
    finish(args, &dir, &state);
    ExitCode::from(code)
}

/// The child's exit status as this process's: its code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    }
}

/// After the child: what kept processes from being profiled, then the run directory, the
/// job summary, the ranks report and the report page.
fn finish(args: &RunArgs, dir: &Path, state: &State) {
    for note in state.notes() {
        eprintln!(
            "warning: {} (install omniprof into that Python's environment to profile it)",
            note.trim_end()
        );
    }
    let status = state.status(dir);
    let dump_dir = args.dump_dir(dir);
    let traces = match &dump_dir {
        Some(dump_dir) => dumps_of(dump_dir, &state.pids()),
        None => trace_files(&[dir.to_owned()]).unwrap_or_default(),
    };
    let what = if dump_dir.is_some() {
        "flight recorder dump"
    } else {
        "trace"
    };
    if traces.is_empty() {
        remove_if_empty(dir);
        eprintln!(
            "omniprof run: no {what} was written: {}",
            why_none(args, &status)
        );
        return;
    }
    match &dump_dir {
        Some(dump_dir) => {
            eprintln!(
                "omniprof run: {} in {}:",
                count(traces.len(), what, "flight recorder dumps"),
                dump_dir.display()
            );
            for dump in &traces {
                eprintln!("  {}", name_of(dump));
            }
        }
        None => eprintln!(
            "omniprof run: {} in {}",
            count(traces.len(), what, "traces"),
            dir.display()
        ),
    }
    let (workers, main): (Vec<&PathBuf>, Vec<&PathBuf>) = traces
        .iter()
        .partition(|t| name_of(t).contains("-worker-") || name_of(t).starts_with("worker-"));
    if !workers.is_empty() {
        eprintln!(
            "omniprof run: {} of DataLoader workers, left out of the summary and report",
            count(workers.len(), "trace", "traces")
        );
    }
    let main = if main.is_empty() { workers } else { main };
    // A job's ranks claim one rank each and go together; processes of no job all claim
    // rank 0 (as torch.profiler's traces do), so each goes alone.
    let jobs: Vec<Vec<&PathBuf>> = if main.iter().all(|t| name_of(t).starts_with("rank")) {
        vec![main]
    } else {
        main.into_iter().map(|t| vec![t]).collect()
    };
    for job in &jobs {
        let report = if jobs.len() == 1 {
            dir.join("report.html")
        } else {
            let stem = name_of(job[0]);
            print(&format!("{stem}:\n"));
            dir.join(format!(
                "report-{}.html",
                stem.trim_end_matches(".pt.trace.json")
            ))
        };
        summarize(args, job, &report);
    }
}

/// The job summary, the ranks report of several ranks, and the report page written at
/// `report`, of the traces of one job.
fn summarize(args: &RunArgs, job: &[&PathBuf], report: &Path) {
    let paths: Vec<OsString> = job.iter().map(|t| t.as_os_str().to_owned()).collect();
    let mut summary = paths.clone();
    summary.extend(["--sort-by", "self_cpu_time_total", "--row-limit"].map(OsString::from));
    summary.push(args.row_limit.to_string().into());
    if let Some(summary) = parsed::<summary_cmd::SummaryArgs>("summary", summary) {
        summary_cmd::run(&summary);
    }
    if job.len() > 1 {
        if let Some(ranks) = parsed::<ranks_cmd::RanksArgs>("ranks", paths.clone()) {
            ranks_cmd::run(&ranks);
        }
    }
    let mut page = paths;
    page.extend(["-o".into(), report.as_os_str().to_owned()]);
    if let Some(page) = parsed::<report_cmd::ReportArgs>("report", page) {
        report_cmd::run(&page);
    }
}

/// The flight recorder dumps in `dump_dir` of the run's processes (`pids`), by name: a
/// shared dump directory may hold other runs' too.
fn dumps_of(dump_dir: &Path, pids: &[u32]) -> Vec<PathBuf> {
    let ours = |name: &str| {
        name.starts_with("flight_") && pids.iter().any(|pid| name.contains(&format!("_pid{pid}_")))
    };
    trace_files(&[dump_dir.to_owned()])
        .unwrap_or_default()
        .into_iter()
        .filter(|t| ours(&name_of(t)))
        .collect()
}

/// A trace's file name.
fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Why a run wrote no trace, from what its processes said.
fn why_none(args: &RunArgs, status: &RunStatus) -> String {
    if args.ondemand {
        return "with --ondemand, traces are written where `omniprof trigger` asks".to_owned();
    }
    if args.flight_recorder && status.processes > 0 {
        return "nothing triggered one: no step was slow, and nothing hung, failed or asked \
                (`omniprof trigger --pid P --dump`)"
            .to_owned();
    }
    if status.processes == 0 {
        return format!(
            "{} started no Python process that imported omniprof (omniprof run profiles \
             Python programs: python, torchrun, or a script that runs them)",
            quoted(&args.command[0])
        );
    }
    match args.steps {
        Some((first, _)) if status.max_steps <= first => format!(
            "the program ended before step {first}: it ran {} (steps are optimizer steps \
             and omniprof.step() calls)",
            count(
                usize::try_from(status.max_steps).unwrap_or(usize::MAX),
                "step",
                "steps"
            )
        ),
        _ => "its processes ended before recording anything".to_owned(),
    }
}

/// `name ARGS…` parsed as a user's command line would be, for the code of that
/// subcommand; None (said) when clap refuses it, which only a bug here can cause.
fn parsed<T: clap::Args>(name: &'static str, args: Vec<OsString>) -> Option<T> {
    let command = T::augment_args(clap::Command::new(name));
    let argv = std::iter::once(OsString::from(name)).chain(args);
    match command
        .try_get_matches_from(argv)
        .and_then(|m| T::from_arg_matches(&m))
    {
        Ok(args) => Some(args),
        Err(e) => {
            eprintln!("error: cannot run `{name}` on the run's traces: {e}");
            None
        }
    }
}

/// The run directory, made: the one given (which must be empty if it exists) or a new
/// `omniprof-run-<UTC time>` here; absolute, since the child may change directory.
fn make_run_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let dir = match given {
        Some(dir) => {
            let dir = cwd.join(dir);
            if let Ok(mut entries) = std::fs::read_dir(&dir) {
                if entries.next().is_some() {
                    return Err(format!(
                        "{}: the run directory is not empty (name a new or empty one)",
                        dir.display()
                    ));
                }
                return Ok(dir);
            }
            dir
        }
        None => {
            let stamp = utc_stamp(SystemTime::now());
            let mut dir = cwd.join(format!("omniprof-run-{stamp}"));
            let mut n = 1;
            while dir.exists() {
                n += 1;
                dir = cwd.join(format!("omniprof-run-{stamp}-{n}"));
            }
            dir
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make the run directory {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A run that wrote nothing leaves no directory behind.
fn remove_if_empty(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// `YYYYMMDD-HHMMSS` of `time`, in UTC.
fn utc_stamp(time: SystemTime) -> String {
    let ms = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let t = UtcTime::from_unix_ms(i64::try_from(ms).unwrap_or(i64::MAX));
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

fn quoted(program: &OsStr) -> String {
    format!("`{}`", program.to_string_lossy())
}

/// `n` and the noun, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The run's state directory, in the temp dir, mode 0700, removed when dropped: the
/// `sitecustomize` module's directory (`boot/`) and the processes' status files
/// (`status/<pid>`: `<steps seen> <steps recorded>`; `status/<pid>.error`: why it was not
/// profiled).
struct State {
    dir: PathBuf,
}

/// What the run's processes said so far.
#[derive(Debug, Default, PartialEq, Eq)]
struct RunStatus {
    /// Python processes that are profiled.
    processes: usize,
    /// Steps recorded, over all of them.
    recorded: u64,
    /// The most steps one of them ran.
    max_steps: u64,
    /// Traces in the run directory.
    traces: usize,
}

impl State {
    fn new() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("omniprof-run-{}-{nanos:09}", std::process::id()));
        // Made new (an existing path is an error), so no one else's directory is used.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let state = Self { dir };
        std::fs::create_dir(state.dir.join("status"))?;
        std::fs::create_dir(state.dir.join("boot"))?;
        std::fs::write(state.dir.join("boot/sitecustomize.py"), SITECUSTOMIZE)?;
        Ok(state)
    }

    /// `PYTHONPATH` for the child: the `sitecustomize` module's directory first, then the
    /// caller's.
    fn python_path(&self) -> OsString {
        let mut path = self.dir.join("boot").into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        path
    }

    fn status(&self, run_dir: &Path) -> RunStatus {
        let mut status = RunStatus::default();
        for (name, text) in self.status_files() {
            if name.contains('.') {
                continue; // a note, or a file being written
            }
            let mut numbers = text
                .split_whitespace()
                .map(|n| n.parse::<u64>().unwrap_or(0));
            let (steps, recorded) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
            status.processes += 1;
            status.recorded += recorded;
            status.max_steps = status.max_steps.max(steps);
        }
        status.traces = std::fs::read_dir(run_dir).map_or(0, |entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pt.trace.json"))
                .count()
        });
        status
    }

    /// The pids of the processes that are profiled.
    fn pids(&self) -> Vec<u32> {
        self.status_files()
            .into_iter()
            .filter_map(|(name, _)| name.parse().ok())
            .collect()
    }

    /// What the processes that could not be profiled said.
    fn notes(&self) -> Vec<String> {
        self.status_files()
            .into_iter()
            .filter(|(name, _)| name.ends_with(".error"))
            .map(|(_, text)| text)
            .collect()
    }

    /// Each status file's name and text, in name order.
    fn status_files(&self) -> Vec<(String, String)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("status")) else {
            return Vec::new();
        };
        let mut files: Vec<(String, String)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let text = std::fs::read_to_string(e.path()).ok()?;
                Some((e.file_name().to_string_lossy().into_owned(), text))
            })
            .collect();
        files.sort();
        files
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The one-line status on standard error: redrawn in place on a terminal, else a line
/// each time it changes.
struct StatusLine {
    terminal: bool,
    last: Option<String>,
}

impl StatusLine {
    fn new() -> Self {
        Self {
            terminal: io::stderr().is_terminal(),
            last: None,
        }
    }

    fn draw(&mut self, status: &RunStatus) {
        let text = format!(
            "omniprof run: {} profiled, {} recorded, {} written",
            count(status.processes, "process", "processes"),
            count(
                usize::try_from(status.recorded).unwrap_or(usize::MAX),
                "step",
                "steps"
            ),
            count(status.traces, "trace", "traces")
        );
        self.show(status, text);
    }

    /// The line of `--flight-recorder`, whose processes count no steps for it.
    fn draw_flight(&mut self, status: &RunStatus) {
        let text = format!(
            "omniprof run: {} with a flight recorder, {} written",
            count(status.processes, "process", "processes"),
            count(status.traces, "dump", "dumps")
        );
        self.show(status, text);
    }

    fn show(&mut self, status: &RunStatus, text: String) {
        if status.processes == 0 {
            return;
        }
        if self.last.as_ref() == Some(&text) {
            return;
        }
        let mut err = io::stderr().lock();
        let _ = if self.terminal {
            write!(err, "\r\x1b[K{text}")
        } else {
            writeln!(err, "{text}")
        };
        let _ = err.flush();
        self.last = Some(text);
    }

    /// Takes the line off a terminal before the end's output.
    fn clear(&self) {
        if self.terminal && self.last.is_some() {
            let _ = write!(io::stderr().lock(), "\r\x1b[K");
        }
    }
}

/// The child's pid, for the signal handler; 0 when there is none.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// The last signal forwarded; 0 when none was.
static FORWARDED: AtomicI32 = AtomicI32::new(0);
/// The signals forwarded to the child.
const FORWARDED_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// SIGINT and SIGTERM handled by forwarding them to the child while it runs.
struct Forwarding;

impl Forwarding {
    fn to(child: u32) -> Self {
        CHILD.store(i32::try_from(child).unwrap_or(0), Ordering::SeqCst);
        for signal in FORWARDED_SIGNALS {
            set_handler(signal, forward as *const () as libc::sighandler_t);
        }
        Self
    }

    /// Back to the default handlers; the signal forwarded last, by name, if one was.
    fn stop(self) -> Option<&'static str> {
        for signal in FORWARDED_SIGNALS {
            set_handler(signal, libc::SIG_DFL);
        }
        CHILD.store(0, Ordering::SeqCst);
        match FORWARDED.load(Ordering::SeqCst) {
            libc::SIGINT => Some("SIGINT"),
            libc::SIGTERM => Some("SIGTERM"),
            _ => None,
        }
    }
}

fn set_handler(signal: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: a zeroed sigaction is valid (no flags, an empty mask is then set); the
    // handler is either SIG_DFL or `forward`, which only does async-signal-safe work.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

/// Forwards a signal another process sent to the child. A terminal's Ctrl-C (sent by the
/// kernel to the whole foreground process group) reached the child already: sending it
/// again could interrupt the child's own handling of the first, the writing of its traces.
extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo_t.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 && !from_kernel {
        // SAFETY: kill is async-signal-safe; the child is ours and not yet reaped.
        unsafe { libc::kill(child, signal) };
        FORWARDED.store(signal, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_a_first_and_last_step_inclusive() {
        assert_eq!(parse_steps("3:5"), Ok((3, 5)));
        assert_eq!(parse_steps("0:0"), Ok((0, 0)));
        assert_eq!(
            parse_steps("5:3"),
            Err("the first step (5) comes after the last (3)".to_owned())
        );
        assert_eq!(
            parse_steps("3"),
            Err("expected A:B, steps A to B inclusive (e.g. 3:5), not \"3\"".to_owned())
        );
        assert!(parse_steps("-1:2").is_err());
    }

    #[test]
    fn seconds_are_finite_and_not_negative() {
        assert_eq!(parse_seconds("1.5"), Ok(1.5));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("NaN").is_err());
    }

    #[test]
    fn a_flight_recorder_window_is_finite_and_above_zero() {
        assert_eq!(parse_window("2.5"), Ok(2.5));
        assert_eq!(
            parse_window("0"),
            Err("expected seconds (a number above 0), not \"0\"".to_owned())
        );
        assert!(parse_window("inf").is_err());
    }

    #[test]
    fn the_run_directory_is_named_with_the_utc_time() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_544_123); // 2026-12-06 08:02:03 UTC
        assert_eq!(utc_stamp(t), "20261206-080203");
        assert_eq!(utc_stamp(UNIX_EPOCH), "19700101-000000");
    }

    #[test]
    fn a_signal_ends_the_run_with_128_plus_its_number() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGINT)), 130);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
    }
}
