//! The collector binary against what a hostile or careless world sends it: many large bodies at
//! once, a fleet reconnecting, control characters in lines, secrets other users can read.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use storwatch_test_support::process::signal;
use storwatch_test_support::{http, wait_for, Collector};

const TOKEN: &str = "hostile-agents-token-0123456789";

/// A collector process that is killed when the test ends, failed assertions included (a test
/// that panics must not leave a collector listening behind it).
struct Running(Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the collector on `dir/collector.toml` (from [`Collector::write_config`], plus `extra`
/// appended) with its log in `dir/collector.log`, and waits for /ping.
fn start(dir: &Path, port: u16, extra: &str) -> Running {
    // top-level keys and tables go before the [heartbeat] table
    start_edited(dir, port, |text| {
        text.replacen("[heartbeat]", &format!("{extra}\n[heartbeat]"), 1)
    })
}

/// Like [`start`], with the configuration's text passed through `edit`.
fn start_edited(dir: &Path, port: u16, edit: impl Fn(String) -> String) -> Running {
    let config = Collector::write_config(dir, port, "http://127.0.0.1:9", "hostile", TOKEN);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, edit(text)).unwrap();
    let log = std::fs::File::create(dir.join("collector.log")).unwrap();
    let child = Running(
        Command::new(Collector::bin())
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
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
    // given back once the bodies are dropped: waited for, a loaded machine takes its time
    let given_back = wait_for(Duration::from_secs(30), || {
        status_kib(pid, "VmRSS:") <= 128 << 10
    });
    let after = status_kib(pid, "VmRSS:");
    println!(
        "400 x 4 MiB in {:.1} s: {read} read, {later} told to retry; RSS {} MiB before, peak {} MiB, {} MiB after",
        took.as_secs_f64(),
        before / 1024,
        peak / 1024,
        after / 1024
    );
    assert!(peak <= 256 << 10, "peak RSS {} MiB", peak / 1024);
    assert!(given_back, "RSS after {} MiB", after / 1024);
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
    let config = Collector::write_config(dir.path(), port, "http://127.0.0.1:9", "hostile", TOKEN);
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
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        b"m,host=a v=1i\n",
    );
    assert_eq!(status, 204);
    // a heartbeat (every second here) saves hosts.json: its mode is checked too
    let hosts = dir.path().join("queue/hosts.json");
    assert!(
        wait_for(Duration::from_secs(30), || hosts.exists()),
        "no heartbeat saved {}",
        hosts.display()
    );
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

fn write_status(port: u16, token: &str) -> u16 {
    http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {token}"))],
        b"m,host=a v=1i\n",
    )
    .0
}

/// SIGHUP rotates the tokens and applies the request limits without a restart, and names what
/// needs one; SIGUSR1/2 are harmless.
#[test]
fn sighup_reloads_tokens_and_usr_signals_are_harmless() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let port = 18614;
    let mut child = start(dir.path(), port, "");
    let pid = child.id();
    assert_eq!(write_status(port, TOKEN), 204);
    let to_telegraf = |token: &str| {
        http(
            &format!("http://127.0.0.1:{port}/write?db=telegraf"),
            "POST",
            &[("Authorization", &format!("Token {token}"))],
            b"m,host=a v=1i\n",
        )
        .0
    };
    assert_eq!(to_telegraf(TOKEN), 403);

    const NEW: &str = "rotated-agents-token-9876543210";
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("agents:{NEW}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.path().join("collector.toml");
    // a smaller body limit and targets.allow apply at once; the connection limit and the
    // heartbeat's interval are named as waiting for a restart
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("interval_s = 1", "interval_s = 2")
        .replace(
            "[heartbeat]",
            "[limits]\nmax_body_bytes = 200\nmax_connections = 100\n\
             [targets]\nallow = [\"telegraf\"]\n[heartbeat]",
        );
    std::fs::write(&config, text).unwrap();
    signal(pid, "HUP");
    assert!(
        wait_for(Duration::from_secs(30), || write_status(port, NEW) == 204),
        "the new token is not accepted after SIGHUP"
    );
    assert_eq!(write_status(port, TOKEN), 401);
    assert_eq!(to_telegraf(NEW), 204);
    let (status, answer) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {NEW}"))],
        "m,host=a v=1i\n".repeat(20).as_bytes(),
    );
    assert_eq!(status, 413, "{answer}");

    // A token file made unusable: the tokens in use stay.
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let log = || std::fs::read_to_string(dir.path().join("collector.log")).unwrap();
    signal(pid, "HUP");
    assert!(
        wait_for(Duration::from_secs(30), || log()
            .contains("the tokens in use are kept")),
        "the second SIGHUP was not handled: {}",
        log()
    );
    assert_eq!(write_status(port, NEW), 204);

    signal(pid, "USR1");
    signal(pid, "USR2");
    assert!(
        wait_for(Duration::from_secs(30), || {
            let log = log();
            log.contains("SIGUSR1 ignored") && log.contains("SIGUSR2 ignored")
        }),
        "SIGUSR1/2 not handled: {}",
        log()
    );
    assert!(child.try_wait().unwrap().is_none(), "the collector died");
    assert_eq!(write_status(port, NEW), 204);
    let _ = child.kill();
    let _ = child.wait();
    let log = log();
    assert!(log.contains("tokens replaced"), "{log}");
    assert!(log.contains("limits.max_body_bytes"), "{log}");
    assert!(log.contains("applied targets.allow"), "{log}");
    assert!(
        log.contains("limits.max_connections, heartbeat.interval_s"),
        "{log}"
    );
    assert!(log.contains("next restart"), "{log}");
    assert!(log.contains("chmod 600"), "{log}");
}

/// Raises the open-file limit of process `pid` when it is below `n` (best effort, within the
/// hard limit), so that the test and the collector can hold thousands of sockets.
fn raise_nofile(pid: u32, n: u32) {
    let soft = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    if soft >= n {
        return;
    }
    let _ = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={n}:{n}")])
        .status();
}

/// A site's fleet holding 4,000 idle keep-alive connections (each has made a request, as an
/// agent between two reports): the collector keeps them all, an idle one still gets its answer,
/// and a fresh client is served beside them. One request then teaches 20,000 new fields at once
/// (one journal append); they are known after a restart.
#[test]
fn four_thousand_idle_connections_and_twenty_thousand_new_fields() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18615;
    raise_nofile(std::process::id(), 10_000);
    let mut child = start(dir.path(), port, "");
    let pid = child.id();
    raise_nofile(pid, 10_000);
    let sockets = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.to_string_lossy().starts_with("socket:"))
            .count()
    };
    let ping = |s: &mut TcpStream, close: bool| -> String {
        let connection = if close { "close" } else { "keep-alive" };
        s.write_all(
            format!("GET /ping HTTP/1.1\r\nHost: x\r\nConnection: {connection}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 512];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    };

    let t = Instant::now();
    let mut idle: Vec<TcpStream> = (0..4000)
        .map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", port))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let answer = ping(&mut s, false);
            assert!(
                answer.starts_with("HTTP/1.1 204"),
                "connection {i}: {answer:?}"
            );
            s
        })
        .collect();
    let opened = t.elapsed();
    // every one held by the collector (and its listener)
    assert!(sockets(pid) > 4000, "{} sockets", sockets(pid));

    // Beside them, one request teaching 20,000 new fields: 200 lines of 100 fields.
    let mut body = String::new();
    for line in 0..200 {
        body.push_str(&format!("wide,host=h{line} "));
        let fields: Vec<String> = (0..100)
            .map(|f| format!("f{}=1i", line * 100 + f))
            .collect();
        body.push_str(&fields.join(","));
        body.push('\n');
    }
    let t = Instant::now();
    let (status, answer) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body.as_bytes(),
    );
    let learned = t.elapsed();
    assert_eq!(status, 204, "{answer}");
    // durable before the 204: in the journal, or already folded into types.json
    let journal = std::fs::read_to_string(dir.path().join("queue/types.log")).unwrap();
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("queue/types.json")).unwrap())
            .unwrap();
    let in_map = map["wide"].as_object().map_or(0, |m| m.len());
    assert_eq!(in_map + journal.lines().count(), 20_000);

    // The first and the last idle connection still get their answers.
    for i in [0, idle.len() - 1] {
        let answer = ping(&mut idle[i], true);
        assert!(answer.starts_with("HTTP/1.1 204"), "{answer:?}");
    }
    // the other 3,998 are still open
    assert!(sockets(pid) > 3990, "{} sockets", sockets(pid));
    let rss = status_kib(pid, "VmHWM:");
    println!(
        "4000 idle connections opened in {:.2} s; 20,000 new fields learned in one request in {:.0} ms; peak RSS {} MiB",
        opened.as_secs_f64(),
        learned.as_secs_f64() * 1e3,
        rss / 1024
    );
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();

    // After a restart the journal is folded into types.json and the types still hold.
    let mut child = start(dir.path(), port, "");
    let (status, answer) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        b"wide,host=x f19999=\"text\"\n",
    );
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("field type conflict"), "{answer}");
    let _ = child.kill();
    let _ = child.wait();
    let folded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("queue/types.json")).unwrap())
            .unwrap();
    assert_eq!(folded["wide"].as_object().map(|m| m.len()), Some(20_000));
}

/// One request naming 100,000 hosts: its lines are stored, but only `heartbeat.max_hosts`
/// (10,000 by default) hosts get heartbeat lines, and a warning says how many were turned away.
#[test]
fn one_request_naming_a_hundred_thousand_hosts_gets_bounded_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let port = 18616;
    // the default cap; the heartbeat every second (the test configuration's)
    let mut child = start(dir.path(), port, "");
    let body: String = (0..100_000)
        .map(|i| format!("m,host=h{i} v=1i\n"))
        .collect();
    let (status, answer) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body.as_bytes(),
    );
    assert_eq!(status, 204, "{answer}");
    let heartbeat_lines = || -> u64 {
        let (_, text) = http(&format!("http://127.0.0.1:{port}/metrics"), "GET", &[], b"");
        text.lines()
            .find(|l| l.contains("heartbeat_lines_total") && !l.starts_with('#'))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_for(Duration::from_secs(30), || heartbeat_lines() >= 20_000),
        "{} heartbeat lines",
        heartbeat_lines()
    );
    let lines = heartbeat_lines();
    let _ = child.kill();
    let _ = child.wait();
    // each heartbeat carries 10,000 hosts, never 100,000
    // (unbounded, the first heartbeat alone had 100,000)
    assert!(
        lines % 10_000 == 0 && lines < 100_000,
        "{lines} heartbeat lines"
    );
    let log = std::fs::read_to_string(dir.path().join("collector.log")).unwrap();
    assert!(log.contains("refused_hosts=90000"), "{log}");
    assert!(log.contains("heartbeat.max_hosts"), "{log}");
    println!("100,000 hosts in one request: {lines} heartbeat lines over the first heartbeats (10,000 each)");
}
