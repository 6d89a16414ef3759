//! The workspace's binaries, and child processes killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::files::workspace;

/// `agent once` as host `host` on the trees `proc_root` and `sys_root` with `config`, sampling and
/// reporting at 1 s: the command, for the caller to run (`.output()`).
pub fn agent_once(
    agent: &Path,
    host: &str,
    proc_root: &Path,
    sys_root: &Path,
    config: &Path,
) -> Command {
    let mut c = Command::new(agent);
    c.args([
        "once",
        "--sample-interval",
        "1s",
        "--report-interval",
        "1s",
        "--host",
        host,
    ])
    .arg("--proc-root")
    .arg(proc_root)
    .arg("--sys-root")
    .arg(sys_root)
    .arg("--config")
    .arg(config);
    c
}

/// Path of a workspace binary, building it if it is not there.
///
/// The binaries are taken from the target directory the tests run from (`cargo build --bins` or
/// `cargo test --workspace` puts them there). When one is missing it is built with a nested
/// `cargo build` into a separate target directory, since the outer cargo holds the lock of its
/// own while tests run.
pub fn binary(package: &str, name: &str) -> PathBuf {
    // Test executables live in <target>/<profile>/deps/.
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let candidate = profile_dir.join(name);
    if candidate.is_file() {
        return candidate;
    }
    let nested = profile_dir.join("e2e-bins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "-p", package, "--bin", name, "--target-dir"])
        .arg(&nested)
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cannot build {name}");
    nested.join("debug").join(name)
}

/// A child process (a simulator, an agent) SIGKILLed and reaped on drop, with its output in a log
/// file to show when a test fails.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, log: &Path, cmd: &mut Command) -> Proc {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// kill -9 and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// libfaketime's multi-threaded library (Debian's `faketime` package: `scripts/test.sh`
/// installs it).
pub fn libfaketime() -> PathBuf {
    let mut dirs = vec![
        PathBuf::from("/usr/lib/faketime"),
        PathBuf::from("/usr/lib64/faketime"),
    ];
    // Debian's multiarch directories: /usr/lib/<triplet>/faketime
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
    }
    dirs.iter()
        .map(|d| d.join("libfaketimeMT.so.1"))
        .find(|p| p.is_file())
        .expect("libfaketime is not installed (apt-get install faketime; scripts/test.sh does)")
}

/// The Telegraf binary the real-client tests run: `STORWATCH_TELEGRAF` (`scripts/test.sh` sets it
/// to the one it builds from the Go module proxy), else `telegraf` on `PATH`; `None` when neither.
pub fn telegraf() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STORWATCH_TELEGRAF") {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("telegraf"))
        .find(|p| p.is_file())
}

/// `sh -c script sh ARGS…` in a mount namespace of its own with private propagation (`unshare
/// --mount`; for a user other than root in a user namespace too, `--user --map-root-user`), so
/// the mounts the script makes are seen by it and what it runs, never by the rest of the machine.
/// The caller adds the script's arguments and runs it.
pub fn in_private_mounts(script: &str) -> Command {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let mut cmd = Command::new("unshare");
    if !root {
        cmd.args(["--user", "--map-root-user"]);
    }
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ]);
    cmd
}

/// Sends signal `sig` (a name: `TERM`, `HUP`, `USR1`) to process `pid` with kill(1), failing the
/// test when it cannot.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}
