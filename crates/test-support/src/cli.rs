//! Running a command-line binary from a test and checking how it ended: the `omniprof` CLI's
//! tests run it dozens of ways, and each check (exit status, standard output and error as
//! text, the other stream shown when it fails) is written here once. The binary's path is a
//! parameter because only the tests of the crate that builds it know it
//! (`env!("CARGO_BIN_EXE_omniprof")`).

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// A binary to run, with the environment changes and working directory each run gets.
///
/// `new` is `const`, so a test file declares its binary once:
/// `const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));`, then
/// `OMNIPROF.ok(["summary", path])`, or `OMNIPROF.env("KEY", value).run(args)`.
#[derive(Clone, Debug)]
pub struct Cli {
    bin: &'static str,
    /// Set (`Some`) or removed (`None`), in order.
    envs: Vec<(OsString, Option<OsString>)>,
    dir: Option<PathBuf>,
}

impl Cli {
    /// The binary at `bin`, run with this process's environment and working directory.
    pub const fn new(bin: &'static str) -> Cli {
        Cli {
            bin,
            envs: Vec::new(),
            dir: None,
        }
    }

    /// Runs with `key` set to `value`.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cli {
        let value = value.as_ref().to_owned();
        self.envs.push((key.as_ref().to_owned(), Some(value)));
        self
    }

    /// Runs without `key` in the environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cli {
        self.envs.push((key.as_ref().to_owned(), None));
        self
    }

    /// Runs in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Cli {
        self.dir = Some(dir.into());
        self
    }

    /// The command that runs the binary with `args`, for a caller that spawns or measures
    /// it itself.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(self.bin);
        command.args(args);
        for (key, value) in &self.envs {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command
    }

    /// Runs the binary with `args` to its end, its standard input empty.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command(args)
            .output()
            .unwrap_or_else(|e| panic!("{} did not run: {e}", self.bin))
    }

    /// Runs the binary with `args` and `stdin` as its standard input.
    pub fn run_with_stdin<I, S>(&self, args: I, stdin: impl AsRef<[u8]>) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} did not start: {e}", self.bin));
        let mut input = child.stdin.take().expect("a piped standard input");
        // A binary that exits without reading its input closes the pipe early.
        let _ = input.write_all(stdin.as_ref());
        drop(input);
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("{} did not finish: {e}", self.bin))
    }

    /// Runs the binary with `args`, which must exit 0; its standard output.
    pub fn ok<I, S>(&self, args: I) -> String
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (args, out) = self.run_shown(args);
        assert!(
            out.status.success(),
            "{args} failed ({}): {}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Runs the binary with `args`, which must exit with `code`; its standard error.
    pub fn fails<I, S>(&self, code: i32, args: I) -> String
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (args, out) = self.run_shown(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stderr)
    }

    /// Runs the binary with `args`; the command line, for messages, and what it gave.
    fn run_shown<I, S>(&self, args: I) -> (String, Output)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let shown = std::iter::once(self.bin.as_ref())
            .chain(args.iter().map(OsString::as_os_str))
            .map(OsStr::to_string_lossy)
            .collect::<Vec<_>>()
            .join(" ");
        (shown, self.run(&args))
    }
}

/// A binary's output as text; it must be UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// `path` as an argument among text ones; it must be UTF-8 (every test's temporary paths are).
pub fn arg(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}
