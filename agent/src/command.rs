//! Running external tools (`zpool`, `dmsetup`, `multipathd`) with a timeout.
//!
//! `zpool status` can hang for minutes on a pool with a dead device, so every command runs with a
//! deadline and is killed when it passes it; the sampling loop never waits on one (collectors that
//! use commands run them on their own thread at their own interval). Tests replace the tool with
//! captured output through [`CapturedRunner`], and whole-agent tests point the configured tool path
//! at a script that prints a fixture — the real [`SystemRunner`] then runs unchanged.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why a command produced no usable output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program is not installed (the subsystem is absent: not an error for the caller).
    #[error("{0}: not found")]
    NotFound(PathBuf),
    /// It could not be started or read.
    #[error("{program}: {source}")]
    Io {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// It ran past its deadline and was killed.
    #[error("{program}: no answer within {timeout:?}, killed")]
    Timeout {
        /// The program.
        program: PathBuf,
        /// The deadline it missed.
        timeout: Duration,
    },
    /// It exited non-zero.
    #[error("{program}: exit status {status}: {stderr}")]
    Failed {
        /// The program.
        program: PathBuf,
        /// Its exit code (-1 when killed by a signal).
        status: i32,
        /// The first 300 bytes of its standard error.
        stderr: String,
    },
}

/// Runs a program and returns its standard output.
pub trait CommandRunner: Send + Sync {
    /// Runs `program args…`, killing it after `timeout`.
    fn run(&self, program: &Path, args: &[&str], timeout: Duration)
        -> Result<String, CommandError>;
}

/// Runs real processes.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> Result<String, CommandError> {
        let io = |source| CommandError::Io {
            program: program.to_owned(),
            source,
        };
        let mut child = match Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("LC_ALL", "C")
            .spawn()
        {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CommandError::NotFound(program.to_owned()))
            }
            Err(e) => return Err(io(e)),
        };
        // Drain the pipes on their own threads so a chatty tool cannot block on a full pipe
        // while we wait for it to exit.
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let out_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut buf);
            }
            buf
        });
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(4096).read_to_end(&mut buf);
            }
            buf
        });
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait().map_err(io)? {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(CommandError::Timeout {
                        program: program.to_owned(),
                        timeout,
                    });
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let out = out_reader.join().unwrap_or_default();
        let err = err_reader.join().unwrap_or_default();
        if !status.success() {
            let mut stderr = String::from_utf8_lossy(&err).into_owned();
            stderr.truncate(
                stderr
                    .char_indices()
                    .nth(300)
                    .map_or(stderr.len(), |(i, _)| i),
            );
            return Err(CommandError::Failed {
                program: program.to_owned(),
                status: status.code().unwrap_or(-1),
                // One log line per failure: the tool's lines joined.
                stderr: stderr
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" / "),
            });
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// Answers from captured output, keyed by `"program arg arg"` (program by file name only).
/// For tests of collectors that use commands.
#[derive(Debug, Default, Clone)]
pub struct CapturedRunner {
    outputs: BTreeMap<String, String>,
}

impl CapturedRunner {
    /// An empty runner: every command is "not found".
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `output` as the answer to `command` (e.g. `"zpool status -p"`).
    pub fn with(mut self, command: &str, output: impl Into<String>) -> Self {
        self.outputs.insert(command.to_owned(), output.into());
        self
    }
}

impl CommandRunner for CapturedRunner {
    fn run(
        &self,
        program: &Path,
        args: &[&str],
        _timeout: Duration,
    ) -> Result<String, CommandError> {
        let name = program
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let mut key = name.to_owned();
        for a in args {
            key.push(' ');
            key.push_str(a);
        }
        self.outputs
            .get(&key)
            .cloned()
            .ok_or_else(|| CommandError::NotFound(program.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_captures_stdout() {
        let out = SystemRunner.run(
            Path::new("/bin/sh"),
            &["-c", "echo hello"],
            Duration::from_secs(5),
        );
        assert_eq!(out.ok().as_deref(), Some("hello\n"));
    }

    #[test]
    fn missing_program_is_not_found() {
        let r = SystemRunner.run(Path::new("/nonexistent/zpool"), &[], Duration::from_secs(1));
        assert!(matches!(r, Err(CommandError::NotFound(_))));
    }

    #[test]
    fn nonzero_exit_is_failed_with_stderr() {
        let r = SystemRunner.run(
            Path::new("/bin/sh"),
            &["-c", "echo broken >&2; echo badly >&2; exit 3"],
            Duration::from_secs(5),
        );
        match r {
            Err(CommandError::Failed { status, stderr, .. }) => {
                assert_eq!(status, 3);
                assert_eq!(stderr, "broken / badly");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn hung_program_is_killed_at_the_deadline() {
        let r = SystemRunner.run(Path::new("/bin/sleep"), &["30"], Duration::from_millis(200));
        assert!(matches!(r, Err(CommandError::Timeout { .. })));
    }

    #[test]
    fn captured_runner_answers_by_command_line() {
        let r = CapturedRunner::new().with("zpool status -p", "pool: tank\n");
        let out = r.run(
            Path::new("/sbin/zpool"),
            &["status", "-p"],
            Duration::from_secs(1),
        );
        assert_eq!(out.ok().as_deref(), Some("pool: tank\n"));
        assert!(r
            .run(Path::new("zpool"), &["list"], Duration::from_secs(1))
            .is_err());
    }
}
