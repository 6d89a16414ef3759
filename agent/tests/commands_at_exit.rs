//! What the agent undoes when it ends on SIGTERM: storcli's private working directory
//! (`$TMPDIR/storwatch-storcli-<pid>-<n>`) is removed, between calls and during one, with a
//! stand-in `storcli64` on a sys tree where a MegaRAID controller's host is.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use storwatch_test_support::process::signal;
use storwatch_test_support::wait_for;

/// A proc root of real captured files and a sys tree with one `megaraid_sas` host.
fn roots(dir: &Path) -> (PathBuf, PathBuf) {
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir);
    let sys = dir.join("sys");
    fs::create_dir_all(sys.join("block")).unwrap();
    fs::create_dir_all(sys.join("class/scsi_host/host0")).unwrap();
    fs::write(
        sys.join("class/scsi_host/host0/proc_name"),
        "megaraid_sas\n",
    )
    .unwrap();
    (proc_root, sys)
}

/// The working directories of storcli in `tmp`.
fn workdirs(tmp: &Path) -> Vec<String> {
    fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("storwatch-storcli-"))
        .collect()
}

/// Runs the agent with a stand-in storcli whose body is `body` (it first logs its working
/// directory to `calls`), waits until `ready` holds, sends SIGTERM, and checks that the agent's
/// storcli working directory is gone once it has exited.
fn workdir_is_removed_on_sigterm(body: &str, ready: &dyn Fn(&Path) -> bool) {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = roots(dir.path());
    let tmp = dir.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let storcli = dir.path().join("storcli64");
    fs::write(
        &storcli,
        format!(
            "#!/bin/sh\npwd >> '{}'\n{body}\n",
            dir.path().join("calls").display()
        ),
    )
    .unwrap();
    fs::set_permissions(&storcli, fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("agent.toml");
    fs::write(
        &config,
        format!(
            "[drive]\nenabled = false\n[hwraid]\nstorcli = \"{}\"\ntimeout = \"1h\"\n",
            storcli.display()
        ),
    )
    .unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .args([
            "run",
            "--sample-interval",
            "250ms",
            "--report-interval",
            "1s",
        ])
        .args(["--host", "ds01"])
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(&sys_root)
        .arg("--config")
        .arg(&config)
        .arg("--output")
        .arg(format!("file:{}", dir.path().join("out.lp").display()))
        .env("TMPDIR", &tmp)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = wait_for(Duration::from_secs(20), || ready(dir.path()));
    let calls = fs::read_to_string(dir.path().join("calls")).unwrap_or_default();
    let before = workdirs(&tmp);
    signal(agent.id(), "TERM");
    let stopping = Instant::now();
    let mut exited = false;
    while !exited && stopping.elapsed() < Duration::from_secs(20) {
        exited = agent.try_wait().unwrap().is_some();
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = agent.kill();
    let status = agent.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut agent.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(started, "storcli never ran: {stderr}");
    assert!(exited, "the agent did not stop: {stderr}");
    assert!(status.success(), "{status:?}: {stderr}");
    // storcli ran in the private directory, which existed until the agent stopped.
    assert_eq!(before.len(), 1, "{before:?}");
    assert!(calls.contains(&before[0]), "storcli ran in {calls:?}");
    let after = workdirs(&tmp);
    assert!(after.is_empty(), "left behind: {after:?}\n{stderr}");
}

#[test]
fn storclis_working_directory_is_removed_when_the_agent_ends_between_calls() {
    workdir_is_removed_on_sigterm("echo '{}'", &|dir| {
        // a call made and answered, the monitor idle until its next round
        fs::read_to_string(dir.join("calls")).is_ok_and(|c| !c.is_empty()) && {
            std::thread::sleep(Duration::from_millis(500));
            true
        }
    });
}

#[test]
fn storclis_working_directory_is_removed_when_the_agent_ends_during_a_call() {
    workdir_is_removed_on_sigterm("trap '' TERM\nsleep 1000 & wait", &|dir| {
        fs::read_to_string(dir.join("calls")).is_ok_and(|c| !c.is_empty())
    });
}

/// What every way out calls (the end of `run`, `once`'s signals and end, an error from `main`,
/// the panic hook), in a process of its own test binary: it kills a running command that
/// ignores SIGTERM, with what it started, removes the registered directory, refuses new commands
/// after, and finds nothing to do the second time. (The other tests of this file run the agent
/// binary, not commands of this process.)
#[test]
fn cleanup_kills_running_commands_removes_directories_and_refuses_new_ones() {
    use storwatch_agent::command::{at_exit, CommandError, Spawned};
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let script = format!(
        "trap '' TERM; sleep 1000 & echo \"$$ $!\" > '{}'; wait",
        pidfile.display()
    );
    let mut running = Spawned::start(Path::new("/bin/sh"), &["-c", &script], 1024).unwrap();
    assert!(wait_for(Duration::from_secs(10), || fs::read_to_string(
        &pidfile
    )
    .is_ok_and(|t| t.split_whitespace().count() == 2)));
    let pids: Vec<u32> = fs::read_to_string(&pidfile)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let private = dir.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::write(private.join("storcli.log"), "log\n").unwrap();
    at_exit::remove_at_exit(&private);

    let t = Instant::now();
    let done = at_exit::cleanup(at_exit::EXIT_WAIT);
    assert!(t.elapsed() < at_exit::EXIT_WAIT, "{:?}", t.elapsed());
    assert_eq!((done.killed, done.left, done.dirs), (1, 0, 1), "{done:?}");
    assert!(!private.exists());
    let running_state = |p: u32| {
        fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|s| Some(!s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
            .unwrap_or(false)
    };
    assert!(
        wait_for(Duration::from_secs(5), || !pids
            .iter()
            .any(|p| running_state(*p))),
        "still running: {pids:?}"
    );
    // The owner of the killed command hears that the agent is stopping.
    let r = running.poll();
    assert!(
        matches!(r, Some(Err(CommandError::Stopping { .. }))),
        "{r:?}"
    );
    let r = Spawned::start(Path::new("true"), &[], 1024);
    assert!(matches!(r, Err(CommandError::Stopping { .. })), "{r:?}");
    assert_eq!(
        at_exit::cleanup(at_exit::EXIT_WAIT),
        at_exit::Cleaned::default()
    );
}
