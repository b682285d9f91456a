//! `omniprof`: run the demo, check configs, inspect plugins, summarize, convert and compare
//! traces, compare a job's ranks, write an HTML report, draw flame graphs, trigger a running
//! process, serve Kineto's daemon clients, profile a program.
//!
//! This file holds the clap definitions and the dispatch. Each subcommand lives in a module
//! of its own (`demo`, `*_cmd`); the rest is what several of them share: the traces a job
//! reads and how (`job`, `reading`, `progress`), the row options (`rows`), the formats a
//! result prints in (`render`), where output goes (`output`), and the logger (`logger`).

mod config_cmd;
mod convert_cmd;
mod daemon_cmd;
mod demo;
mod diff_cmd;
mod flamegraph_cmd;
mod job;
mod logger;
mod output;
mod parquet_cmd;
mod plugins_cmd;
mod progress;
mod ranks_cmd;
mod reading;
mod render;
mod report_cmd;
mod rows;
mod run_cmd;
mod summary_cmd;
mod trigger_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// omniprof: a device-agnostic accelerator profiler with Kineto-compatible traces.
#[derive(Debug, Parser)]
#[command(name = "omniprof", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Say more on stderr: -v info, -vv debug, -vvv trace (default: warnings; RUST_LOG may
    /// name a level).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Say only errors on stderr, no warnings.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Profile a sample multi-threaded workload and write its trace.
    Demo(demo::DemoArgs),
    /// Work with Kineto `KEY=VALUE` configs.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Inspect and validate dynamic profiler plugins (Kineto's plugin C ABI).
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Summarize a trace per op name, as PyTorch's `key_averages().table()` does; of several
    /// traces (a job's ranks, or a directory of them), the rows summed over all ranks.
    Summary(summary_cmd::SummaryArgs),
    /// Compare a distributed job's ranks: step times, the slowest rank per step and its lag
    /// behind the median, and per rank the time in computation, communication, memory
    /// copies and idle (HTA's definitions).
    Ranks(ranks_cmd::RanksArgs),
    /// Write one self-contained HTML file with the views of TensorBoard's profiler plugin:
    /// steps, operators, kernels, memory, ranks, the trace and, with --base, a diff.
    Report(report_cmd::ReportArgs),
    /// Convert a trace (Kineto / PyTorch JSON or a Perfetto trace, plain or gzip) to the
    /// format OUT's extension names: .json, .json.gz or .pftrace (Perfetto); or traces to
    /// Parquet tables (--format parquet).
    Convert(convert_cmd::ConvertArgs),
    /// Draw a flame graph (SVG, or folded stacks) of a trace's host self time, or with
    /// --device of its device time by launching op.
    Flamegraph(flamegraph_cmd::FlamegraphArgs),
    /// Compare two traces op by op: calls, host and device time, their change, largest
    /// regression first.
    Diff(diff_cmd::DiffArgs),
    /// Ask a running process (started with OMNIPROF_ONDEMAND=1) for an on-demand trace and
    /// print its path; `--list` shows the processes that listen.
    Trigger(trigger_cmd::TriggerArgs),
    /// Serve PyTorch processes started with KINETO_USE_DAEMON=1 (and omniprof's), as dynolog
    /// does, so `omniprof trigger` and `dyno gputrace` trace them; in the foreground.
    Daemon(daemon_cmd::DaemonArgs),
    /// Profile an unmodified Python program, or a whole torchrun job: one trace per process
    /// in a run directory, then the job's summary and report.
    Run(run_cmd::RunArgs),
}

#[derive(Debug, Subcommand)]
enum PluginsCommand {
    /// List what would load from a plugin directory: names and supported types.
    List(plugins_cmd::ListArgs),
    /// Load plugins, run a short session against them and print a verdict per profiler;
    /// exit 1 if any fails.
    Check(plugins_cmd::CheckArgs),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a config: exit 0 if valid, 2 with the line and reason if not.
    Check(config_cmd::CheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logger::install(cli.verbose, cli.quiet);
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Config(ConfigCommand::Check(args)) => config_cmd::check(&args),
        Command::Plugins(PluginsCommand::List(args)) => plugins_cmd::list(&args),
        Command::Plugins(PluginsCommand::Check(args)) => plugins_cmd::check(&args),
        Command::Summary(args) => summary_cmd::run(&args),
        Command::Ranks(args) => ranks_cmd::run(&args),
        Command::Report(args) => report_cmd::run(&args),
        Command::Convert(args) => convert_cmd::run(&args),
        Command::Flamegraph(args) => flamegraph_cmd::run(&args),
        Command::Diff(args) => diff_cmd::run(&args),
        Command::Trigger(args) => trigger_cmd::run(&args),
        Command::Daemon(args) => daemon_cmd::run(&args),
        Command::Run(args) => run_cmd::run(&args),
    }
}
