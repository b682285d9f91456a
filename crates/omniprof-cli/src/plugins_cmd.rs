//! `omniprof plugins list [DIR]` and `omniprof plugins check PATH... [--trace OUT]`: what a
//! vendor runs in CI to see that a plugin loads, registers, records and emits valid events.
//!
//! `check` loads each library, runs one short real session with every activity type
//! selected (without OpenReg, which this binary carries, unless `--with-openreg`: two
//! backends reporting one device id share its row), and prints a verdict per profiler:
//!
//! - FAIL when the library or the profiler was rejected, a call reported errors or did not
//!   return within `--timeout` (the plugin is then abandoned, and the check goes on without
//!   it), or the library called the registry or the trace builder after the call that lent
//!   it had returned (refused by the host and counted by
//!   `omniprof::plugins::late_plugin_calls`: the CLI guide, `docs/cli.md`: a refused call is a
//!   FAIL);
//! - WARN when its events fell outside the capture window, said with how far before or after
//!   it (a clock that is not Unix-epoch nanoseconds only when seconds away; the session
//!   holds [`HOST_WORK`] of host ops, so that times a plugin takes during its own session are
//!   inside), or the trace doubts what it delivered (`backend_warnings`: e.g. event ids that
//!   are not the ids it was pushed);
//! - PASS otherwise.
//!
//! Exit status 1 when anything failed.

use std::path::PathBuf;
use std::process::ExitCode;

use omniprof::config_keys::OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS;
use omniprof::plugins::{LoadedPlugin, PluginError};
use omniprof::{record_function, record_op, Config, Profiler};
use omniprof_trace::{ActivitySet, Contribution, Trace};

/// List the plugins a directory (default: the plugin directories of the environment) holds.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// A directory of `*.so` plugins; default: `KINETO_PLUGIN_LIB_DIR_PATH` and
    /// `OMNIPROF_PLUGIN_DIR`.
    pub dir: Option<PathBuf>,
}

/// Load plugins, run a short session against them, and validate what they emit.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Plugin libraries (`.so`) to check.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Also write the session's trace here.
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Also run OpenReg, the simulated device this binary carries, beside the plugins (its
    /// device 0 then shares a row with a plugin's device 0).
    #[arg(long)]
    pub with_openreg: bool,
    /// How long one call into a plugin may run before the plugin is abandoned and fails
    /// (default: 10, the `OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS` default).
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: Option<u32>,
    /// Internal: check one plugin alone and print only how many of its calls were refused as
    /// late (`late N`); what a check of several plugins runs to tell whose they were.
    #[arg(long, hide = true)]
    pub count_late_calls: bool,
}

/// A positive number of seconds, as whole milliseconds.
fn parse_timeout(text: &str) -> Result<u32, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s * 1000.0 <= f64::from(u32::MAX) => Ok((s * 1000.0).ceil() as u32),
        _ => Err(format!("{text:?} is not a positive number of seconds")),
    }
}

pub(crate) fn list(args: &ListArgs) -> ExitCode {
    let dirs = match &args.dir {
        Some(dir) => vec![dir.clone()],
        None => omniprof::plugins::plugin_dirs(),
    };
    if dirs.is_empty() {
        eprintln!(
            "no plugin directory: give one, or set {}",
            omniprof::plugins::DIR_VARIABLES.join(" or ")
        );
        return ExitCode::from(2);
    }
    let mut ok = true;
    for dir in dirs {
        let files = match omniprof::plugins::plugin_files(&dir) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
                continue;
            }
        };
        if files.is_empty() {
            println!("{}: no *.so files", dir.display());
        }
        for file in files {
            match omniprof::plugins::load_plugin(&file) {
                Ok(p) => print_loaded(&p),
                Err(e) => {
                    println!("{}: REJECTED: {}", file.display(), e.reason());
                    ok = false;
                }
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_loaded(p: &LoadedPlugin) {
    if p.profilers.is_empty() {
        println!("{}: registered no profiler", p.path.display());
    }
    for prof in &p.profilers {
        match &prof.rejected {
            None => println!(
                "{}: {} [{}]",
                p.path.display(),
                prof.name,
                types(prof.supported)
            ),
            Some(why) => println!("{}: {}: REJECTED: {why}", p.path.display(), prof.name),
        }
    }
}

fn types(set: ActivitySet) -> String {
    set.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

/// One line of the verdict table.
struct Row {
    plugin: String,
    profiler: String,
    events: u64,
    out_of_window: u64,
    errors: Vec<String>,
    verdict: &'static str,
}

pub(crate) fn check(args: &CheckArgs) -> ExitCode {
    if let Some(out) = &args.trace {
        if let Err(e) = crate::output::check_trace_output(out) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    // Late calls made while a library registers are its own: libraries load one at a time.
    let mut late = Vec::new();
    let loaded: Vec<(PathBuf, Result<LoadedPlugin, PluginError>)> = args
        .paths
        .iter()
        .map(|p| {
            let before = omniprof::plugins::late_plugin_calls();
            let result = omniprof::plugins::load_plugin(p);
            late.push(omniprof::plugins::late_plugin_calls() - before);
            (p.clone(), result)
        })
        .collect();
    let before = omniprof::plugins::late_plugin_calls();
    openreg::take_part_in_sessions(args.with_openreg);
    let trace = match run_session(args.timeout) {
        Ok(trace) => trace,
        Err(e) => {
            eprintln!("error: the check session failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let in_session = omniprof::plugins::late_plugin_calls() - before;
    if args.count_late_calls {
        println!("late {}", late.iter().sum::<u64>() + in_session);
        return ExitCode::SUCCESS;
    }
    if in_session > 0 {
        attribute_late_calls(&loaded, &mut late, in_session, args.timeout);
    }
    let rows = verdicts(&loaded, &late, &trace);
    print_table(&rows);
    if args.with_openreg {
        println!(
            "note: OpenReg ran beside the plugins: a device id both report (OpenReg's: 0 to {}) \
             is drawn as one row, named by whichever backend came last",
            openreg::device_count().saturating_sub(1)
        );
    } else {
        println!(
            "note: OpenReg, the simulated device this binary carries, was left out of the \
             session, so the plugins' devices have their rows to themselves \
             (--with-openreg runs it beside them)"
        );
    }
    if let Some(out) = &args.trace {
        match omniprof_trace::save(&trace, out) {
            Ok(stats) => println!("wrote {} ({} trace events)", out.display(), stats.events),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if rows.iter().any(|r| r.verdict == "FAIL") {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Adds the `in_session` late calls of the shared session to the libraries that made them:
/// all to the one library with usable profilers when there is one, else to each as counted
/// by a check of it alone in a child process (this binary with `--count-late-calls`), since
/// a refused call carries no trace of who made it (`crates/omniprof/src/plugin/lend.rs`).
fn attribute_late_calls(
    loaded: &[(PathBuf, Result<LoadedPlugin, PluginError>)],
    late: &mut [u64],
    in_session: u64,
    timeout_ms: Option<u32>,
) {
    let usable: Vec<usize> = (0..loaded.len())
        .filter(|&i| {
            loaded[i]
                .1
                .as_ref()
                .is_ok_and(|p| p.usable().next().is_some())
        })
        .collect();
    if let [only] = usable[..] {
        late[only] += in_session;
        return;
    }
    let exe = std::env::current_exe();
    for i in usable {
        let mut child = match &exe {
            Ok(exe) => std::process::Command::new(exe),
            Err(_) => continue,
        };
        child
            .args(["plugins", "check", "--count-late-calls"])
            .arg(&loaded[i].0)
            .stderr(std::process::Stdio::null());
        if let Some(ms) = timeout_ms {
            child.arg(format!("--timeout={}", f64::from(ms) / 1000.0));
        }
        let counted = child.output().ok().and_then(|out| {
            let text = String::from_utf8(out.stdout).ok()?;
            text.trim().strip_prefix("late ")?.parse::<u64>().ok()
        });
        // Alone, registration is counted too: only what its session made is added.
        if let Some(n) = counted {
            late[i] += n.saturating_sub(late[i]);
        }
    }
}

/// Host ops each step of the check session records: enough that small ids a plugin makes up
/// (1, 42, ...) are ids of host ops too, so a plugin passing its own ids off as pushed ones
/// gets links the merge can refute.
const OPS_PER_STEP: usize = 50;

/// How long the check session's host work lasts at least. Each call into a plugin runs on a
/// thread of its own (`crates/omniprof/src/plugin/deadline.rs`), so a plugin's start runs a
/// little after the capture window opens and its stop a little after it closes (0.2 ms
/// here, up to 3 ms on a loaded machine): in a window of microseconds, a plugin that
/// timestamps its events across its own session had them all outside; in a window as long
/// as an application's step (tens of ms), those before its last moments are inside.
const HOST_WORK: std::time::Duration = std::time::Duration::from_millis(20);

/// A session with every type selected and at least [`HOST_WORK`] of host ops in steps, so
/// plugins that react to correlation pushes see some; each call into a plugin may take
/// `timeout_ms`.
fn run_session(timeout_ms: Option<u32>) -> Result<Trace, omniprof::SessionError> {
    let mut builder = Profiler::builder().activities(ActivitySet::all());
    if let Some(ms) = timeout_ms {
        let text = format!("{OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS}={ms}");
        builder = builder.config(Config::parse(&text).expect("a valid timeout line"));
    }
    let mut profiler = builder.build()?;
    profiler.start()?;
    let begun = std::time::Instant::now();
    for step in 0.. {
        if step >= 3 && begun.elapsed() >= HOST_WORK {
            break;
        }
        let _step = record_function(format!("ProfilerStep#{step}"));
        for _ in 0..OPS_PER_STEP {
            let _op = record_op("plugin_check::op");
            std::hint::black_box((0..1_000u64).sum::<u64>());
        }
    }
    profiler.stop()
}

fn verdicts(
    loaded: &[(PathBuf, Result<LoadedPlugin, PluginError>)],
    late: &[u64],
    trace: &Trace,
) -> Vec<Row> {
    let report = &trace.health;
    let mut rows = Vec::new();
    for ((path, result), &late) in loaded.iter().zip(late) {
        let plugin = path.display().to_string();
        let p = match result {
            Ok(p) => p,
            Err(e) => {
                rows.push(Row {
                    plugin,
                    profiler: "-".into(),
                    events: 0,
                    out_of_window: 0,
                    errors: vec![e.reason()],
                    verdict: "FAIL",
                });
                continue;
            }
        };
        if p.profilers.is_empty() {
            rows.push(Row {
                plugin: plugin.clone(),
                profiler: "-".into(),
                events: 0,
                out_of_window: 0,
                errors: vec!["registered no profiler".into()],
                verdict: "FAIL",
            });
        }
        for prof in &p.profilers {
            let contribution = report.backends.iter().find(|b| b.name == prof.name);
            let (events, out_of_window) =
                contribution.map_or((0, 0), |b| (b.activities, b.out_of_window));
            let mut errs: Vec<String> = report
                .backend_errors
                .iter()
                .filter(|e| e.backend == prof.name)
                .map(|e| e.kind.to_string())
                .collect();
            errs.extend(prof.rejected.iter().cloned());
            if late > 0 && prof.rejected.is_none() {
                // Counted per library: a refused call does not say which profiler made it.
                errs.push(format!(
                    "{late} call(s) through a registry or trace builder handle after the call \
                     that lent it returned: refused"
                ));
            }
            let verdict = if !errs.is_empty() {
                "FAIL"
            } else {
                errs.extend(
                    report
                        .backend_warnings
                        .iter()
                        .filter(|w| w.backend == prof.name)
                        .map(|w| w.kind.to_string()),
                );
                if let Some(b) = contribution.filter(|b| b.out_of_window > 0) {
                    errs.push(outside_the_window(b, trace));
                }
                if errs.is_empty() {
                    "PASS"
                } else {
                    "WARN"
                }
            };
            rows.push(Row {
                plugin: plugin.clone(),
                profiler: prof.name.clone(),
                events,
                out_of_window,
                errors: errs,
                verdict,
            });
        }
    }
    rows
}

/// Farther than this from the window, an event's time is not one taken a little early or
/// late (a call's thread starting, a device's queue draining) but from another clock.
const ANOTHER_CLOCK_NS: u64 = 1_000_000_000;

/// The warning for a backend's events dropped outside the window, worded by what was
/// measured: how many, how far the farthest lay before the window's start and after its
/// end, and the window's length. Only a distance past [`ANOTHER_CLOCK_NS`] suggests a clock
/// other than Unix-epoch nanoseconds; a nearer one says where such times come from.
fn outside_the_window(b: &Contribution, trace: &Trace) -> String {
    let window_ns = (trace.window.end_ns - trace.window.start_ns).max(0) as u64;
    let mut sides = Vec::new();
    if b.before_ns > 0 {
        sides.push(format!("up to {} before its start", duration(b.before_ns)));
    }
    if b.after_ns > 0 {
        sides.push(format!("up to {} after its end", duration(b.after_ns)));
    }
    let why = if b.before_ns.max(b.after_ns) > ANOTHER_CLOCK_NS {
        "are times Unix-epoch ns (CLOCK_REALTIME), as the host's?"
    } else {
        "times taken before profilerStart was called or after profilerStop was called"
    };
    format!(
        "{} of {} events outside the {} capture window ({}), dropped: {why}",
        b.out_of_window,
        b.out_of_window + b.activities,
        duration(window_ns),
        sides.join(", "),
    )
}

/// `ns` in the largest unit that keeps it at least 1: ns, µs, ms, s, or days past one.
fn duration(ns: u64) -> String {
    const DAY: u64 = 86_400_000_000_000;
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ if ns < DAY => format!("{:.1} s", ns as f64 / 1e9),
        _ => format!("{:.0} days", ns as f64 / DAY as f64),
    }
}

fn print_table(rows: &[Row]) {
    let width = |f: &dyn Fn(&Row) -> usize, title: &str| {
        rows.iter().map(f).max().unwrap_or(0).max(title.len())
    };
    let wp = width(&|r| r.plugin.len(), "PLUGIN");
    let wn = width(&|r| r.profiler.len(), "PROFILER");
    println!(
        "{:wp$}  {:wn$}  {:>7}  {:>13}  {:>6}  VERDICT",
        "PLUGIN", "PROFILER", "EVENTS", "OUT OF WINDOW", "ERRORS"
    );
    for r in rows {
        println!(
            "{:wp$}  {:wn$}  {:>7}  {:>13}  {:>6}  {}",
            r.plugin,
            r.profiler,
            r.events,
            r.out_of_window,
            r.errors.len(),
            r.verdict
        );
    }
    for r in rows.iter().filter(|r| !r.errors.is_empty()) {
        for e in &r.errors {
            println!("{} {} ({}): {e}", r.verdict, r.profiler, r.plugin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outside(before_ns: u64, after_ns: u64) -> String {
        let b = Contribution {
            name: "P".into(),
            activities: 5,
            out_of_window: 3,
            before_ns,
            after_ns,
        };
        outside_the_window(&b, &Trace::new(1_000_000_000, 1_020_000_000))
    }

    #[test]
    fn events_just_past_the_window_are_said_to_be_times_taken_outside_the_session() {
        assert_eq!(
            outside(0, 210_000),
            "3 of 8 events outside the 20.0 ms capture window (up to 210.0 µs after its end), \
             dropped: times taken before profilerStart was called or after profilerStop was \
             called"
        );
        assert_eq!(
            outside(1_500, 2_500_000),
            "3 of 8 events outside the 20.0 ms capture window (up to 1.5 µs before its start, \
             up to 2.5 ms after its end), dropped: times taken before profilerStart was called \
             or after profilerStop was called"
        );
    }

    #[test]
    fn events_seconds_or_decades_away_are_said_to_come_from_another_clock() {
        assert_eq!(
            outside(1_790_000_000_000_000_000, 0),
            "3 of 8 events outside the 20.0 ms capture window (up to 20718 days before its \
             start), dropped: are times Unix-epoch ns (CLOCK_REALTIME), as the host's?"
        );
        assert_eq!(
            outside(0, 3_000_000_000),
            "3 of 8 events outside the 20.0 ms capture window (up to 3.0 s after its end), \
             dropped: are times Unix-epoch ns (CLOCK_REALTIME), as the host's?"
        );
    }
}
