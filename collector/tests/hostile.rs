//! The collector binary against what a hostile or careless world sends it: many large bodies at
//! once, a fleet reconnecting, control characters in lines, secrets other users can read.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use storwatch_test_support::{http, wait_for, Collector};

const TOKEN: &str = "hostile-agents-token-0123456789";

/// Starts the collector on `dir/collector.toml` (from [`Collector::write_config`], plus `extra`
/// appended) with its log in `dir/collector.log`, and waits for /ping.
fn start(dir: &Path, port: u16, extra: &str) -> Child {
    let config = Collector::write_config(dir, port, "http://127.0.0.1:9", "hostile", TOKEN);
    if !extra.is_empty() {
        let mut text = std::fs::read_to_string(&config).unwrap();
        // top-level keys and tables go before the [heartbeat] table
        text = text.replacen("[heartbeat]", &format!("{extra}\n[heartbeat]"), 1);
        std::fs::write(&config, text).unwrap();
    }
    let log = std::fs::File::create(dir.join("collector.log")).unwrap();
    let child = Command::new(Collector::bin())
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let up = wait_for(Duration::from_secs(20), || {
        http(&format!("http://127.0.0.1:{port}/ping"), "GET", &[], b"").0 == 204
    });
    assert!(
        up,
        "collector did not come up:\n{}",
        std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default()
    );
    child
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// One POST of `len` bytes of `fill` on a connection of its own; the status, or 0 when the
/// connection was closed first.
fn post_big(port: u16, len: usize, fill: u8) -> u16 {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "POST /write?db=hostile HTTP/1.1\r\nHost: x\r\nAuthorization: Token {TOKEN}\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(head.as_bytes()).is_err() {
        return 0;
    }
    let chunk = vec![fill; 64 << 10];
    let mut sent = 0;
    while sent < len {
        let n = chunk.len().min(len - sent);
        if s.write_all(&chunk[..n]).is_err() {
            break;
        }
        sent += n;
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// 400 clients each sending a 4 MiB body at once: the bodies in memory are bounded
/// (`max_inflight_body_bytes`), so the collector's peak RSS stays under 256 MiB and it gives
/// the memory back afterwards.
#[test]
fn four_hundred_large_bodies_at_once_stay_within_memory() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18610;
    let mut child = start(dir.path(), port, "");
    let pid = child.id();
    let before = status_kib(pid, "VmRSS:");
    let t = Instant::now();
    let clients: Vec<_> = (0..400)
        .map(|_| std::thread::spawn(move || post_big(port, 4 << 20, b'x')))
        .collect();
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = t.elapsed();
    let peak = status_kib(pid, "VmHWM:");
    // Bodies that are one 4 MiB line of "x" are refused as line protocol (400) once read;
    // those that found no room in time are asked to come back (503).
    let read = statuses.iter().filter(|s| **s == 400).count();
    let later = statuses.iter().filter(|s| **s == 503).count();
    assert_eq!(read + later, 400, "answers: {statuses:?}");
    assert!(read > 0, "no body was read at all");
    std::thread::sleep(Duration::from_secs(3));
    let after = status_kib(pid, "VmRSS:");
    println!(
        "400 x 4 MiB in {:.1} s: {read} read, {later} told to retry; RSS {} MiB before, peak {} MiB, {} MiB after",
        took.as_secs_f64(),
        before / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(peak <= 256 << 10, "peak RSS {} MiB", peak / 1024);
    assert!(after <= 128 << 10, "RSS after {} MiB", after / 1024);
    // still serving
    assert_eq!(
        http(&format!("http://127.0.0.1:{port}/ping"), "GET", &[], b"").0,
        204
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The listen queue is sized for a fleet reconnecting at once, not std's 128.
#[test]
fn listen_backlog_is_sized_for_a_site() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18611;
    let mut child = start(dir.path(), port, "[limits]\nlisten_backlog = 2048\n");
    let out = Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    // State Recv-Q Send-Q Local Peer: for a listener Send-Q is the backlog
    let backlog: u32 = text
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .map(|v| v.trim().parse().unwrap_or(4096))
        .unwrap_or(4096);
    assert_eq!(backlog, 2048.min(somaxconn), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}

/// A line carrying ESC, CR and NUL is refused and logged with those bytes escaped: a client
/// cannot forge log lines or drive an operator's terminal.
#[test]
fn control_characters_in_refused_lines_are_escaped_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18612;
    let mut child = start(dir.path(), port, "");
    let body = b"ok,host=a v=1i\nbad\x1b[31m,host=a v=\r\n2023-01-01 INFO forged\x00 x\n";
    let (status, answer) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body,
    );
    assert_eq!(status, 400, "{answer}");
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read(dir.path().join("collector.log")).unwrap();
    let text = String::from_utf8_lossy(&log);
    assert!(text.contains("partial write"), "{text}");
    for bad in [b'\x1b', b'\0', b'\r'] {
        assert!(!log.contains(&bad), "raw {bad:#x} in the log:\n{text:?}");
    }
    assert!(text.contains("\\u{1b}"), "{text}");
}

/// A token file other users can read is refused with the fix named; what the collector
/// creates is its own.
#[test]
fn open_secrets_are_refused_and_state_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let port = 18613;
    let config = Collector::write_config(dir.path(), port, "http://127.0.0.1:9", "h", TOKEN);
    let tokens = dir.path().join("tokens");
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(Collector::bin())
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600"), "{err}");

    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut child = start(dir.path(), port, "");
    let (status, _) = http(
        &format!("http://127.0.0.1:{port}/write?db=h"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        b"m,host=a v=1i\n",
    );
    assert_eq!(status, 204);
    std::thread::sleep(Duration::from_millis(1500)); // a heartbeat saves hosts.json
    let _ = child.kill();
    let _ = child.wait();
    let mut open = Vec::new();
    let mut stack = vec![dir.path().join("queue")];
    while let Some(p) = stack.pop() {
        let meta = std::fs::metadata(&p).unwrap();
        if meta.permissions().mode() & 0o007 != 0 {
            open.push(format!("{} {:o}", p.display(), meta.permissions().mode()));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(open.is_empty(), "open to others: {open:?}");
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig}");
}

fn write_status(port: u16, token: &str) -> u16 {
    http(
        &format!("http://127.0.0.1:{port}/write?db=h"),
        "POST",
        &[("Authorization", &format!("Token {token}"))],
        b"m,host=a v=1i\n",
    )
    .0
}

/// SIGHUP rotates the tokens without a restart and names what needs one; SIGUSR1/2 are
/// harmless.
#[test]
fn sighup_reloads_tokens_and_usr_signals_are_harmless() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let port = 18614;
    let mut child = start(dir.path(), port, "");
    let pid = child.id();
    assert_eq!(write_status(port, TOKEN), 204);

    const NEW: &str = "rotated-agents-token-9876543210";
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("agents:{NEW}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.path().join("collector.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("interval_s = 1", "interval_s = 2");
    std::fs::write(&config, text).unwrap();
    signal(pid, "HUP");
    assert!(
        wait_for(Duration::from_secs(5), || write_status(port, NEW) == 204),
        "the new token is not accepted after SIGHUP"
    );
    assert_eq!(write_status(port, TOKEN), 401);

    // A token file made unusable: the tokens in use stay.
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    signal(pid, "HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(write_status(port, NEW), 204);

    signal(pid, "USR1");
    signal(pid, "USR2");
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the collector died");
    assert_eq!(write_status(port, NEW), 204);
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.path().join("collector.log")).unwrap();
    assert!(log.contains("tokens replaced"), "{log}");
    assert!(log.contains("heartbeat"), "{log}");
    assert!(log.contains("next restart"), "{log}");
    assert!(log.contains("chmod 600"), "{log}");
}

/// Raises the open-file limit of process `pid` when it is below `n` (best effort, within the
/// hard limit), so that the test and the collector can hold thousands of sockets.
fn raise_nofile(pid: u32, n: u32) {
    let _ = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={n}:{n}")])
        .status();
}

/// A site's fleet keeps connections open: 4,000 idle sockets are held and a write still goes
/// through; one request teaching 20,000 new field keys is stored, and so is the next.
#[test]
fn four_thousand_idle_sockets_and_twenty_thousand_new_fields() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18615;
    raise_nofile(std::process::id(), 10_000);
    let mut child = start(dir.path(), port, "");
    raise_nofile(child.id(), 10_000);
    let idle: Vec<TcpStream> = (0..4000)
        .map(|i| {
            TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("socket {i}: {e}"))
        })
        .collect();
    assert_eq!(write_status(port, TOKEN), 204);

    let body: String = (0..20_000)
        .map(|i| format!("wide,host=a f{i}={i}i\n"))
        .collect();
    let (status, text) = http(
        &format!("http://127.0.0.1:{port}/write?db=h"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body.as_bytes(),
    );
    assert_eq!(
        status,
        204,
        "{}",
        text.chars().take(300).collect::<String>()
    );
    let (status, text) = http(
        &format!("http://127.0.0.1:{port}/write?db=h"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        b"wide,host=a f1=2i,f20001=1i\n",
    );
    assert_eq!(
        status,
        204,
        "{}",
        text.chars().take(300).collect::<String>()
    );
    let journal = std::fs::read_to_string(dir.path().join("queue/types.log")).unwrap();
    let wide = journal
        .lines()
        .filter(|l| l.starts_with("[\"wide\""))
        .count();
    assert_eq!(wide, 20_001);
    drop(idle);
    assert!(child.try_wait().unwrap().is_none());
    let _ = child.kill();
    let _ = child.wait();
}
