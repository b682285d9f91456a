//! `omniprof`: run the demo, check configs, and (in later commands) inspect traces and plugins.

mod config_cmd;
mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// omniprof: a device-agnostic accelerator profiler with Kineto-compatible traces.
#[derive(Debug, Parser)]
#[command(name = "omniprof", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Profile a sample multi-threaded workload and write its trace.
    Demo(demo::DemoArgs),
    /// Work with Kineto `KEY=VALUE` configs.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a config: exit 0 if valid, 2 with the line and reason if not.
    Check(config_cmd::CheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Config(ConfigCommand::Check(args)) => config_cmd::check(&args),
    }
}
