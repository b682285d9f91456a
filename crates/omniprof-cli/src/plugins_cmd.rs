//! `omniprof plugins list [DIR]` and `omniprof plugins check PATH... [--trace OUT]`: what a
//! vendor runs in CI to see that a plugin loads, registers, records and emits valid events.
//!
//! `check` loads each library, runs one short real session with every activity type
//! selected, and prints a verdict per profiler: FAIL when the library or the profiler was
//! rejected, a call reported errors or did not return within `--timeout` (the plugin is then
//! abandoned, and the check goes on without it), or the library called the registry or the
//! trace builder after the call that lent it had returned (refused by the host, and counted
//! by `omniprof::plugin::late_calls`: the README's "a refused call is a FAIL"), WARN when its events fell outside the
//! capture window (usually a clock that is not Unix-epoch nanoseconds) or the trace doubts
//! what it delivered (`backend_warnings`: e.g. event ids that are not the ids it was pushed),
//! PASS otherwise. Exit status 1 when
//! anything failed.

use std::path::PathBuf;
use std::process::ExitCode;

use omniprof::config::OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS;
use omniprof::keys::metadata;
use omniprof::plugin::{self, LoadedPlugin, PluginError};
use omniprof::session::Contribution;
use omniprof::{record_function, record_op, ActivitySet, Config, Profiler, Trace, Value};

/// List the plugins a directory (default: the plugin directories of the environment) holds.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// A directory of `*.so` plugins; default: `KINETO_PLUGIN_LIB_DIR_PATH` and
    /// `OMNIPROF_PLUGIN_DIR`.
    pub dir: Option<PathBuf>,
}

/// Load plugins, run a short session against them, and validate what they emit.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Plugin libraries (`.so`) to check.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Also write the session's trace here.
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
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

pub fn list(args: &ListArgs) -> ExitCode {
    let dirs = match &args.dir {
        Some(dir) => vec![dir.clone()],
        None => plugin::plugin_dirs(),
    };
    if dirs.is_empty() {
        eprintln!(
            "no plugin directory: give one, or set {}",
            plugin::DIR_VARIABLES.join(" or ")
        );
        return ExitCode::from(2);
    }
    let mut ok = true;
    for dir in dirs {
        let files = match plugin::plugin_files(&dir) {
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
            match plugin::load_plugin(&file) {
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

pub fn check(args: &CheckArgs) -> ExitCode {
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
            let before = plugin::late_calls();
            let result = plugin::load_plugin(p);
            late.push(plugin::late_calls() - before);
            (p.clone(), result)
        })
        .collect();
    let before = plugin::late_calls();
    let trace = match run_session(args.timeout) {
        Ok(trace) => trace,
        Err(e) => {
            eprintln!("error: the check session failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let in_session = plugin::late_calls() - before;
    if args.count_late_calls {
        println!("late {}", late.iter().sum::<u64>() + in_session);
        return ExitCode::SUCCESS;
    }
    if in_session > 0 {
        attribute_late_calls(&loaded, &mut late, in_session, args.timeout);
    }
    let rows = verdicts(&loaded, &late, &trace);
    print_table(&rows);
    if let Some(out) = &args.trace {
        match omniprof::export::save(&trace, out) {
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

/// A short session with every type selected and a little host work, so plugins that react to
/// correlation pushes see some; each call into a plugin may take `timeout_ms`.
fn run_session(timeout_ms: Option<u32>) -> Result<Trace, omniprof::SessionError> {
    let mut builder = Profiler::builder().activities(ActivitySet::all());
    if let Some(ms) = timeout_ms {
        let text = format!("{OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS}={ms}");
        builder = builder.config(Config::parse(&text).expect("a valid timeout line"));
    }
    let mut profiler = builder.build()?;
    profiler.start()?;
    for step in 0..3 {
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
    let backends = Contribution::of(trace);
    let messages = |key| match trace.metadata(key) {
        Some(Value::List(list)) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let errors: Vec<String> = messages(metadata::BACKEND_ERRORS);
    let warnings: Vec<String> = messages(metadata::BACKEND_WARNINGS);
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
            let (events, out_of_window) = backends
                .iter()
                .find(|b| b.name == prof.name)
                .map_or((0, 0), |b| (b.activities, b.out_of_window));
            let prefix = format!("{}: ", prof.name);
            let mut errs: Vec<String> = errors
                .iter()
                .filter_map(|e| e.strip_prefix(&prefix).map(str::to_owned))
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
                    warnings
                        .iter()
                        .filter_map(|w| w.strip_prefix(&prefix).map(str::to_owned)),
                );
                if out_of_window > 0 {
                    errs.push(format!(
                        "{out_of_window} events outside the capture window: are times \
                         Unix-epoch ns?"
                    ));
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
