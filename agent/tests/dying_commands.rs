//! The bound on killed commands that have not exited yet ([`MAX_DYING`]): in a process of its
//! own, since the count is the whole process's and the other tests start commands.
//!
//! A command stuck in the kernel on a hung disk outlives `SIGKILL`; here the commands are held
//! by a tracer that never waits for them (a killed tracee is a zombie only its tracer may reap),
//! which keeps their parent from reaping them just as the kernel would, until it lets go.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use storwatch_agent::command::{
    dying, CommandError, CommandRunner, Spawned, SystemRunner, MAX_DYING,
};

/// Seizes every pid of its arguments, says so, and holds them until its standard input closes.
const TRACER: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
PTRACE_SEIZE = 0x4206
for pid in sys.argv[1:]:
    if libc.ptrace(ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(int(pid)), None, None) != 0:
        sys.exit("PTRACE_SEIZE %s: errno %d" % (pid, ctypes.get_errno()))
print("seized", flush=True)
sys.stdin.read()
"#;

#[test]
fn no_command_starts_while_too_many_killed_ones_have_not_exited() {
    let mut running: Vec<Spawned> = (0..MAX_DYING)
        .map(|_| Spawned::start(Path::new("sleep"), &["1000"], 1024).expect("started"))
        .collect();
    let pids: Vec<String> = running.iter().map(|s| s.id().to_string()).collect();
    let mut tracer = Command::new("python3")
        .arg("-c")
        .arg(TRACER)
        .args(&pids)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufReader::new(tracer.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("the tracer answers");
    assert_eq!(line.trim(), "seized");

    for s in &mut running {
        s.kill();
    }
    assert_eq!(dying(), MAX_DYING, "killed, none reaped yet");
    let r = Spawned::start(Path::new("true"), &[], 1024);
    assert!(
        matches!(r, Err(CommandError::TooManyDying { dying, .. }) if dying == MAX_DYING),
        "{r:?}"
    );
    let r = SystemRunner.run(Path::new("echo"), &["hi"], Duration::from_secs(5));
    let msg = r.expect_err("refused").to_string();
    assert!(
        msg.contains(&format!(
            "not started: {MAX_DYING} killed commands have not exited yet"
        )),
        "{msg}"
    );

    // The tracer lets go: the commands exit, are reaped, and commands start again.
    drop(tracer.stdin.take());
    let _ = tracer.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while dying() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(dying(), 0, "all reaped");
    for pid in &pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} left a zombie"
        );
    }
    let out = SystemRunner
        .run(Path::new("echo"), &["hi"], Duration::from_secs(5))
        .expect("runs again");
    assert_eq!(out, "hi\n");
}
