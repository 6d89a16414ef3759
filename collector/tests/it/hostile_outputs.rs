//! The collector's outputs against a hostile receiver on 127.0.0.1: an InfluxDB output and a
//! remote-write output whose server answers every write 500 with a body of 100 MB (control
//! characters in it). The collector must read a bounded part of each answer, keep its memory
//! and log lines small, and keep the data to retry.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use storwatch_test_support::http::read_request;
use storwatch_test_support::{http, scratch, wait_for, Collector};

const TOKEN: &str = "hostile-outputs-token";
/// What the receiver claims, and sends as far as the collector reads.
const BODY_BYTES: usize = 100_000_000;

/// A collector process killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server answering every request `500` with [`BODY_BYTES`] of text (escape sequences and
/// newlines in it), writing until the client stops reading. Counts the requests per path prefix.
struct Hostile {
    port: u16,
    influx: Arc<AtomicUsize>,
    remote_write: Arc<AtomicUsize>,
    /// Bytes of answers the clients took before closing, summed.
    taken: Arc<AtomicUsize>,
}

fn hostile() -> Hostile {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let influx = Arc::new(AtomicUsize::new(0));
    let remote_write = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicUsize::new(0));
    let (i, r, t) = (influx.clone(), remote_write.clone(), taken.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (i, r, t) = (i.clone(), r.clone(), t.clone());
            std::thread::spawn(move || serve(stream, &i, &r, &t));
        }
    });
    Hostile {
        port,
        influx,
        remote_write,
        taken,
    }
}

fn serve(stream: TcpStream, influx: &AtomicUsize, rw: &AtomicUsize, taken: &AtomicUsize) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let Some(req) = read_request(reader) else {
        return;
    };
    if req
        .headers
        .contains_key("x-prometheus-remote-write-version")
    {
        rw.fetch_add(1, Ordering::Relaxed);
    } else {
        influx.fetch_add(1, Ordering::Relaxed);
    }
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\
         Content-Length: {BODY_BYTES}\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut piece = Vec::with_capacity(64 << 10);
    while piece.len() < 64 << 10 {
        piece.extend_from_slice(b"storage on fire \x1b[31mred\x1b[0m\r\nnext line\t");
    }
    let mut sent = 0;
    while sent < BODY_BYTES {
        let n = piece.len().min(BODY_BYTES - sent);
        if stream.write_all(&piece[..n]).is_err() {
            break;
        }
        sent += n;
    }
    taken.fetch_add(sent, Ordering::Relaxed);
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

fn start(dir: &Path, port: u16, receiver: u16) -> Running {
    let config = Collector::write_config(
        dir,
        port,
        &format!("http://127.0.0.1:{receiver}/write"),
        "hostile",
        TOKEN,
    );
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"rw\"\n\
         url = \"http://127.0.0.1:{receiver}/api/v1/write\"\nbackoff_min_ms = 50\nbackoff_max_s = 1\n"
    ));
    std::fs::write(&config, text).unwrap();
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
    assert!(up, "collector did not come up");
    child
}

/// Issue 30.8: a receiver answering 500 with 100 MB pushed the collector to 482 MiB and wrote
/// 100 MB log lines. Each answer is now read up to its bound (1 MiB InfluxDB, 64 KiB remote
/// write) and logged as a short escaped excerpt.
#[test]
fn an_error_answer_of_100_mb_is_read_up_to_a_bound_and_logged_short() {
    let dir = scratch();
    let receiver = hostile();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = start(dir.path(), port, receiver.port);
    let (code, text) = http(
        &format!("http://127.0.0.1:{port}/write?db=hostile"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        format!(
            "disk,host=n1,device=sda util_pct=50 {}\n",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        )
        .as_bytes(),
    );
    assert_eq!(code, 204, "{text}");
    // several answers read by each output (each retry reads one more)
    let answered = wait_for(Duration::from_secs(30), || {
        receiver.influx.load(Ordering::Relaxed) >= 4
            && receiver.remote_write.load(Ordering::Relaxed) >= 4
    });
    assert!(
        answered,
        "requests: influx {}, remote write {}",
        receiver.influx.load(Ordering::Relaxed),
        receiver.remote_write.load(Ordering::Relaxed)
    );
    let peak_kib = status_kib(c.0.id(), "VmHWM:");
    let answers =
        receiver.influx.load(Ordering::Relaxed) + receiver.remote_write.load(Ordering::Relaxed);
    let taken = receiver.taken.load(Ordering::Relaxed);
    eprintln!(
        "collector peak RSS {:.1} MiB after {answers} answers of 100 MB; {:.1} MB of them sent \
         before the collector closed",
        peak_kib as f64 / 1024.0,
        taken as f64 / 1e6
    );
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB reading 100 MB answers"
    );
    // the data is kept for the next try, not dead-lettered
    assert!(!dir.path().join("queue/dead-letter/rw.lp").exists());
    drop(c);
    let log = std::fs::read_to_string(dir.path().join("collector.log")).unwrap();
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 4096, "a log line of {longest} bytes");
    let rejected = log
        .lines()
        .find(|l| l.contains("remote write not accepted"))
        .unwrap_or_else(|| panic!("no log of the refusal:\n{}", &log[..log.len().min(4000)]));
    // an excerpt, its control characters escaped
    assert!(rejected.contains("storage on fire"), "{rejected}");
    assert!(!rejected.contains('\x1b'), "{rejected}");
}
