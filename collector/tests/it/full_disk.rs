//! The collector with its queue on a filesystem that fills up: a 16 MiB tmpfs, half of it taken
//! by a filler file, mounted in a private mount namespace around the collector process only
//! (`unshare`, as root or through a user namespace), so nothing is mounted on the host.
//!
//! With its output down nothing is delivered, so the queue fills the filesystem. A client then
//! gets 503 with `Retry-After` (never 500), `/health` says "fail" for as long as that write
//! would be refused again (the collector's small heartbeat still fitting does not change that),
//! and once space is back (the filler removed from inside the namespace) writes are acknowledged
//! again by themselves.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use storwatch_test_support::{
    free_port, in_private_mounts, now_s, skip_or_fail, wait_for, Collector,
};

const TOKEN: &str = "agents-token-0123456789";

/// One HTTP/1.1 request on its own connection: (status, headers, body), lower-case headers.
fn request(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Token {TOKEN}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// Whether a collector answers `/ping` on `port` within a second or two (not whatever else
/// might listen there).
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let head = String::from_utf8_lossy(&out).to_ascii_lowercase();
    head.starts_with("http/1.1 204") && head.contains("x-influxdb-version: storwatch-collector")
}

fn body(n: usize, base: u64) -> Vec<u8> {
    (0..6000u64)
        .map(|i| format!("fill,host=h{n},part=p{} v={i}i {}\n", i % 7, base + i))
        .collect::<String>()
        .into_bytes()
}

/// Starts the collector on a port of its own inside a private mount namespace with a tmpfs on
/// its queue directory; creating `free` in `ctl` later removes the filler. None when namespaces
/// are not available; a collector that exits once the tmpfs is there fails the test with its
/// log, unless another process took its port first (then it is started on another one).
fn start_on_small_fs(dir: &Path, ctl: &Path) -> Option<(u16, KillOnDrop)> {
    for _ in 0..3 {
        match start_once(dir, ctl) {
            Started::Up(port, child) => return Some((port, child)),
            Started::NoNamespace => return None,
            Started::PortTaken => continue,
        }
    }
    panic!("three free ports were taken before the collector could listen on them")
}

enum Started {
    Up(u16, KillOnDrop),
    NoNamespace,
    PortTaken,
}

fn start_once(dir: &Path, ctl: &Path) -> Started {
    // The kernel's pick, free now; other tests of this binary open connections meanwhile, and
    // one may take it as its own port before the collector listens.
    let port = free_port();
    let config = Collector::write_config(dir, port, "http://127.0.0.1:9", "full", TOKEN);
    let queue = dir.join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    let _ = std::fs::remove_file(ctl.join("mounted"));
    // The filler goes when `free` appears, or when the test is over (`ctl` gone).
    let script = r#"mount -t tmpfs -o size=16m storwatch-test "$1" || exit 97
dd if=/dev/zero of="$1/filler" bs=1M count=8 2>/dev/null || exit 98
: > "$2/mounted"
(while [ -d "$2" ] && [ ! -e "$2/free" ]; do sleep 0.1; done; rm -f "$1/filler") &
exec "$3" --config "$4""#;
    let log = dir.join("collector.log");
    // Killed however the test ends: a failed assertion must not leave the collector running.
    let mut child = KillOnDrop(
        in_private_mounts(script)
            .arg(&queue)
            .arg(ctl)
            .arg(Collector::bin())
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            if !ctl.join("mounted").exists() {
                skip_or_fail(
                    "mount-namespace",
                    &format!("cannot mount a tmpfs in a private namespace here ({status}): {log}"),
                );
                return Started::NoNamespace;
            }
            if log.contains(&format!("cannot listen on 127.0.0.1:{port}")) {
                return Started::PortTaken;
            }
            panic!("the collector exited ({status}) on the small filesystem: {log}");
        }
        if answers_ping(port) {
            return Started::Up(port, child);
        }
        assert!(Instant::now() < deadline, "collector did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn full_queue_filesystem_answers_503_and_writes_resume_when_space_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let ctl = tempfile::tempdir().unwrap();
    let Some((port, _child)) = start_on_small_fs(dir.path(), ctl.path()) else {
        return;
    };
    let base = now_s() * 1_000_000_000;
    // About 8 MiB free: 250 KiB bodies fill it within some 40 requests.
    let mut acked = 0;
    let refused = loop {
        let (status, head, text) = request(port, "POST", "/write?db=full", &body(acked, base));
        match status {
            204 => acked += 1,
            503 => break (head, text),
            other => panic!("write {acked}: {other} {text}"),
        }
        assert!(acked < 200, "the queue never filled up");
    };
    let (head, text) = refused;
    assert!(acked >= 20, "only {acked} writes before the disk was full");
    assert!(head.contains("retry-after:"), "{head}");
    assert!(text.contains("full"), "{text}");
    let (status, _, health) = request(port, "GET", "/health", b"");
    assert_eq!(status, 503, "{health}");
    assert!(health.contains("\"status\":\"fail\""), "{health}");
    let (_, _, metrics) = request(port, "GET", "/metrics", b"");
    assert!(
        metrics.contains("\nstorwatch_collector_queue_full 1\n"),
        "{metrics}"
    );
    // The collector's own heartbeat (every second here) is small enough to fit in what the
    // refused write left, and is stored. That must not turn `/health` green while the write it
    // refused would still be: `/health` says full until one is seen stored after the refusal
    // (or 5 s pass: when not even it fits, nothing was stored), with no write in between.
    let heartbeat_lines = || {
        let (_, _, metrics) = request(port, "GET", "/metrics", b"");
        metric(&metrics, "storwatch_collector_heartbeat_lines_total")
    };
    let heartbeats_before = heartbeat_lines();
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let heartbeat_stored = heartbeat_lines() > heartbeats_before;
        let (status, _, health) = request(port, "GET", "/health", b"");
        assert_eq!(
            status, 503,
            "heartbeat stored since the refusal: {heartbeat_stored}; /health says {health}"
        );
        assert!(health.contains("\"queue_full\":true"), "{health}");
        if heartbeat_stored || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // And it is so: the refused body, sent again, is still refused (503, never 500).
    let (status, _, text) = request(port, "POST", "/write?db=full", &body(acked, base));
    assert_eq!(status, 503, "{text}");

    // Space comes back: the next write is stored, without a restart.
    std::fs::write(ctl.path().join("free"), b"").unwrap();
    assert!(
        wait_for(Duration::from_secs(30), || request(
            port,
            "POST",
            "/write?db=full",
            &body(1000, base)
        )
        .0 == 204),
        "writes did not resume once space was back"
    );
    let (status, _, health) = request(port, "GET", "/health", b"");
    assert_eq!(status, 200, "{health}");
    assert!(health.contains("\"status\":\"pass\""), "{health}");
    assert!(health.contains("\"queue_full\":false"), "{health}");
}

/// The value of metric `name` (no labels) in a Prometheus text page; 0 when absent.
fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A child process killed and reaped when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
