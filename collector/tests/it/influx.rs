//! The collector binary against a real influxd (scripts/influxd-test.sh): crashes, outages,
//! damaged queue files and slow clients.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use storwatch_test_support::{http, now_s, wait_for, Collector, Influxd};
use storwatch_wire::log::{RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC};

/// Writes a collector config (open on loopback, one v1 output, quick retries).
fn write_config(dir: &Path, port: u16, output_url: &str, db: &str, extra: &str) -> PathBuf {
    let path = dir.join("collector.toml");
    let text = format!(
        r#"listen = "127.0.0.1:{port}"
queue_dir = "{q}"
token_file = "{q}/no-such-file"
insecure_open = true
{extra}
[[outputs]]
name = "influx"
url = "{output_url}"
db = "{db}"
backoff_min_ms = 50
backoff_max_s = 1
auth_retry_s = 1
timeout_s = 5
"#,
        q = dir.join("queue").display(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// This package's collector binary on `config`, listening on `port`.
fn start_collector(config: &Path, port: u16) -> Collector {
    Collector::start_with_config(
        Path::new(env!("CARGO_BIN_EXE_storwatch-collector")),
        config,
        port,
    )
}

/// POSTs line protocol; returns the status.
fn post_lines(url: &str, body: &[u8]) -> u16 {
    http(url, "POST", &[("Content-Type", "text/plain")], body).0
}

/// Sends `batches` batches of `lines` lines as sender `k`, retrying each batch until it is
/// acknowledged (a retried batch carries the same points, so it overwrites, never duplicates).
fn sender(url: String, k: usize, batches: usize, lines: usize, base_ns: u64) -> u64 {
    let mut acked = 0;
    for b in 0..batches {
        let mut body = String::new();
        for i in 0..lines {
            let n = b * lines + i;
            body.push_str(&format!(
                "acked,sender=s{k} v={n}i,f={n}.5 {}\n",
                base_ns + n as u64
            ));
        }
        loop {
            let status = post_lines(&url, body.as_bytes());
            if status == 204 {
                acked += lines as u64;
                break;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    acked
}

fn check_sender(influx: &Influxd, db: &str, k: usize, total: usize) -> (f64, f64) {
    let count = influx.scalar(
        db,
        &format!("SELECT count(v) FROM acked WHERE sender='s{k}'"),
    );
    let sum = influx.scalar(db, &format!("SELECT sum(v) FROM acked WHERE sender='s{k}'"));
    let _ = total;
    (count, sum)
}

#[test]
fn acked_equals_stored_across_repeated_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18110);
    influx.create_db("kill");
    let cfg = write_config(dir.path(), 18120, &influx.url(), "kill", "");
    let mut collector = start_collector(&cfg, 18120);
    let url = collector.url("/write?db=kill");
    let base = now_s() * 1_000_000_000;
    let (senders, batches, lines) = (4, 40, 250);
    let handles: Vec<_> = (0..senders)
        .map(|k| {
            let url = url.clone();
            std::thread::spawn(move || sender(url, k, batches, lines, base))
        })
        .collect();
    // kill -9 the collector five times while the senders push.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(300 + fastrand::u64(0..400)));
        collector.crash_and_restart();
    }
    let acked: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(acked, (senders * batches * lines) as u64);
    let per = batches * lines;
    let expected_sum = (per * (per - 1) / 2) as f64;
    let drained = wait_for(Duration::from_secs(60), || {
        (0..senders).all(|k| check_sender(&influx, "kill", k, per) == (per as f64, expected_sum))
    });
    for k in 0..senders {
        assert_eq!(
            check_sender(&influx, "kill", k, per),
            (per as f64, expected_sum),
            "sender {k}: every acknowledged line stored once with its value"
        );
    }
    assert!(drained);
    // The float field came through identical too.
    let fsum = influx.scalar("kill", "SELECT sum(f) FROM acked");
    assert_eq!(fsum, senders as f64 * (expected_sum + per as f64 * 0.5));
}

#[test]
fn influxdb_outage_under_load_loses_nothing_and_the_backlog_drains() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18130);
    influx.create_db("outage");
    let cfg = write_config(dir.path(), 18140, &influx.url(), "outage", "");
    let collector = start_collector(&cfg, 18140);
    let url = collector.url("/write?db=outage");
    let base = now_s() * 1_000_000_000;
    let (senders, batches, lines) = (3, 60, 200);
    let handles: Vec<_> = (0..senders)
        .map(|k| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut acked = 0;
                for chunk in 0..3 {
                    // pace the senders so part of the load lands during the outage
                    acked += sender(url.clone(), k * 10 + chunk, batches / 3, lines, base);
                    std::thread::sleep(Duration::from_millis(700));
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    influx.stop();
    std::thread::sleep(Duration::from_secs(3));
    // While influxd is down the collector keeps acknowledging into its queue.
    let backlog_during = collector.metric("queue_end_bytes");
    influx.restart();
    let acked: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(acked, (senders * batches * lines) as u64);
    assert!(backlog_during > 0);
    let total = acked as f64;
    let ok = wait_for(Duration::from_secs(60), || {
        influx.scalar("outage", "SELECT count(v) FROM acked") == total
    });
    assert!(
        ok,
        "stored {} of {total}",
        influx.scalar("outage", "SELECT count(v) FROM acked")
    );
    assert!(
        collector.metric("output_retries_total{output=\"influx\"}") > 0,
        "the outage was seen and retried"
    );
}

/// Lines for a database of `targets.allow` are acknowledged while influxd is down, survive a
/// kill -9 of the collector, and reach that database (created by the collector on the first
/// 404) — not the output's own, where the default-target lines go.
#[test]
fn named_databases_survive_a_crash_and_reach_their_own_database() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18220);
    influx.create_db("own");
    let cfg = write_config(
        dir.path(),
        18230,
        &influx.url(),
        "own",
        "[targets]\nallow = [\"site\", \"other/autogen\"]\n",
    );
    let mut collector = start_collector(&cfg, 18230);
    influx.stop();
    let t = now_s();
    let send = |c: &Collector, q: &str, m: &str, n: u64| {
        let body: String = (0..n).map(|i| format!("{m},i={i} v={i}i {t}\n")).collect();
        let url = c.url(&format!("/write?precision=s&{q}"));
        assert_eq!(post_lines(&url, body.as_bytes()), 204, "{q}");
    };
    send(&collector, "db=site", "site_m", 5);
    send(&collector, "db=own", "own_m", 3);
    send(&collector, "", "own_m2", 2);
    send(&collector, "db=other&rp=autogen", "other_m", 4);
    assert_eq!(
        post_lines(&collector.url("/write?db=elsewhere"), b"m v=1\n"),
        403
    );
    collector.crash_and_restart();
    send(&collector, "db=site", "site_m2", 1);
    influx.restart();
    for (db, m, n) in [
        ("site", "site_m", 5.0),
        ("site", "site_m2", 1.0),
        ("own", "own_m", 3.0),
        ("own", "own_m2", 2.0),
        ("other", "other_m", 4.0),
    ] {
        let q = format!("SELECT count(v) FROM {m}");
        let ok = wait_for(Duration::from_secs(30), || influx.scalar(db, &q) == n);
        assert!(ok, "{db}.{m}: {} of {n}", influx.scalar(db, &q));
    }
    for m in ["site_m", "site_m2", "other_m"] {
        let q = format!("SELECT count(v) FROM {m}");
        assert_eq!(influx.scalar("own", &q), 0.0, "{m} leaked into own");
    }
}

/// Frames of a segment file (the segment log's format: a segment header, then records of
/// magic, length, CRC and payload): (offset of the record, payload length).
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let header = SEGMENT_HEADER_BYTES as usize;
    let record = RECORD_HEADER_BYTES as usize;
    assert_eq!(bytes.get(..header), Some(&SEGMENT_MAGIC[..]));
    let mut out = vec![];
    let mut p = header;
    while p + record <= bytes.len() {
        let len = u32::from_le_bytes(bytes[p + 4..p + 8].try_into().unwrap()) as usize;
        if p + record + len > bytes.len() {
            break;
        }
        out.push((p, len));
        p += record + len;
    }
    out
}

#[test]
fn torn_and_corrupt_queue_files_recover_and_deliver_the_intact_records() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18150);
    influx.create_db("torn");
    // First run: the output points at a closed port, so everything stays in the queue.
    let cfg = write_config(dir.path(), 18160, "http://127.0.0.1:9", "torn", "");
    let mut collector = start_collector(&cfg, 18160);
    let base = now_s() * 1_000_000_000;
    for r in 0..10u64 {
        let body: String = (0..100u64)
            .map(|i| format!("acked,sender=r{r} v={i}i {}\n", base + r * 1000 + i))
            .collect();
        let s = post_lines(&collector.url("/write?db=torn"), body.as_bytes());
        assert_eq!(s, 204);
    }
    collector.stop();
    let seg = std::fs::read_dir(dir.path().join("queue/segments"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&seg).unwrap();
    let fr = frames(&bytes);
    assert_eq!(fr.len(), 10);
    // Flip a byte inside the 4th record's payload, and add half a record at the end.
    let (off, _) = fr[3];
    bytes[off + RECORD_HEADER_BYTES as usize + 20] ^= 0x5a;
    bytes.extend_from_slice(&[b'S', b'W', b'R', b'1', 40, 0, 0, 0, b'a', b'c']);
    std::fs::write(&seg, &bytes).unwrap();
    let cfg = write_config(dir.path(), 18160, &influx.url(), "torn", "");
    let collector = start_collector(&cfg, 18160);
    assert_eq!(collector.metric("queue_torn_bytes_total"), 10);
    let ok = wait_for(Duration::from_secs(30), || {
        influx.scalar("torn", "SELECT count(v) FROM acked") == 900.0
    });
    assert!(
        ok,
        "stored {}",
        influx.scalar("torn", "SELECT count(v) FROM acked")
    );
    assert_eq!(
        influx.scalar("torn", "SELECT count(v) FROM acked WHERE sender='r3'"),
        0.0
    );
    assert_eq!(collector.metric("queue_corrupt_records_total"), 1);
    // New writes after the recovery go through as usual.
    let s = post_lines(
        &collector.url("/write?db=torn"),
        format!("acked,sender=after v=1i {}\n", base).as_bytes(),
    );
    assert_eq!(s, 204);
    assert!(wait_for(Duration::from_secs(20), || influx
        .scalar("torn", "SELECT count(v) FROM acked")
        == 901.0));
}

#[test]
fn slow_clients_are_cut_off_and_others_still_write() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18170);
    influx.create_db("slow");
    // idle_timeout_s well above the 1.5 s pause below, for a loaded machine's late wake-ups
    let extra = "[limits]\nheader_read_timeout_s = 1\nbody_timeout_s = 1\nidle_timeout_s = 4\nmax_connections = 64\n";
    let cfg = write_config(dir.path(), 18180, &influx.url(), "slow", extra);
    let collector = start_collector(&cfg, 18180);
    // 20 clients that send half a header and stop.
    let mut slow: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect("127.0.0.1:18180").unwrap();
            s.write_all(b"POST /write?db=slow HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    // One that sends headers but only part of its body.
    let mut partial = TcpStream::connect("127.0.0.1:18180").unwrap();
    partial
        .write_all(
            b"POST /write?db=slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nacked v=1",
        )
        .unwrap();
    // Meanwhile a normal client is served at once.
    let t = Instant::now();
    let s = post_lines(
        &collector.url("/write?db=slow"),
        format!("acked,sender=fast v=1i {}\n", now_s() * 1_000_000_000).as_bytes(),
    );
    assert_eq!(s, 204);
    assert!(t.elapsed() < Duration::from_millis(900));
    // The header-slow clients are disconnected after about a second.
    for s in slow.iter_mut() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 256];
        let t = Instant::now();
        let n = s.read(&mut buf).unwrap_or(0);
        assert!(
            n == 0 || String::from_utf8_lossy(&buf[..n]).contains("408"),
            "expected a close"
        );
        assert!(t.elapsed() < Duration::from_secs(4));
    }
    // The body-slow client gets a 408.
    partial
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut resp = String::new();
    let _ = partial.read_to_string(&mut resp);
    assert!(resp.starts_with("HTTP/1.1 408"), "{resp}");
    assert_eq!(collector.metric("body_timeouts_total"), 1);
    // A keep-alive connection that waits between two requests longer than the header timeout
    // (an agent between two reports) is still served: only idle_timeout_s closes it.
    let mut keep = TcpStream::connect("127.0.0.1:18180").unwrap();
    keep.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ping = |s: &mut TcpStream| {
        s.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert!(ping(&mut keep).starts_with("HTTP/1.1 204"));
    std::thread::sleep(Duration::from_millis(1500));
    let again = ping(&mut keep);
    assert!(again.starts_with("HTTP/1.1 204"), "{again:?}");
    // A client that trickles its headers a byte at a time (never idle) is cut off by the header
    // timeout long before it would finish.
    let mut trickle = TcpStream::connect("127.0.0.1:18180").unwrap();
    let header = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let sent = header
        .iter()
        .take_while(|b| {
            std::thread::sleep(Duration::from_millis(200));
            trickle.write_all(&[**b]).is_ok()
        })
        .count();
    assert!(sent < header.len(), "all {sent} bytes accepted");
    assert!(collector.metric("header_timeouts_total") >= 1);
    // An idle keep-alive connection is closed too.
    let mut idle = TcpStream::connect("127.0.0.1:18180").unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t = Instant::now();
    let mut b = [0u8; 16];
    assert_eq!(idle.read(&mut b).unwrap_or(0), 0);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert!(wait_for(Duration::from_secs(20), || influx
        .scalar("slow", "SELECT count(v) FROM acked")
        == 1.0));
}

#[test]
fn refuses_to_start_open_on_a_public_address_or_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_storwatch-collector"))
            .args(args)
            .output()
            .unwrap()
    };
    let q = dir.path().join("q");
    let q = q.to_str().unwrap();
    let out = run(&[
        "--listen",
        "0.0.0.0:18190",
        "--insecure-open",
        "--queue-dir",
        q,
        "--output",
        "http://127.0.0.1:9",
        "--db",
        "x",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only allowed on a loopback address"));
    let out = run(&[
        "--listen",
        "127.0.0.1:18190",
        "--token-file",
        "/nonexistent",
        "--queue-dir",
        q,
        "--output",
        "http://127.0.0.1:9",
        "--db",
        "x",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("token file"));
    let out = run(&["--print-default-config"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("[limits]"));
}

#[test]
fn influx_type_conflicts_dead_letter_only_that_line_and_heartbeats_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18200);
    influx.create_db("conf");
    let ts = now_s() * 1_000_000_000;
    // The database already holds `f` as an integer; the collector's type map has never seen it.
    let s = post_lines(
        &format!("{}/write?db=conf", influx.url()),
        format!("disk,host=old f=1i {ts}\n").as_bytes(),
    );
    assert_eq!(s, 204);
    let cfg = write_config(
        dir.path(),
        18210,
        &influx.url(),
        "conf",
        "[heartbeat]\ninterval_s = 1\n",
    );
    let collector = start_collector(&cfg, 18210);
    let body = format!(
        "disk,host=n1 g=1i {ts}\ndisk,host=n1 f=2.5 {}\ndisk,host=n2 g=3i {}\n",
        ts + 1,
        ts + 2
    );
    let s = post_lines(&collector.url("/write?db=conf"), body.as_bytes());
    assert_eq!(s, 204, "valid as far as the collector can tell");
    assert!(wait_for(Duration::from_secs(20), || influx
        .scalar("conf", "SELECT count(g) FROM disk")
        == 2.0));
    let dl = dir.path().join("queue/dead-letter/influx.lp");
    assert!(wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&dl).is_ok_and(|t| t.contains("f=2.5"))
    }));
    let text = std::fs::read_to_string(&dl).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines, vec![format!("disk,host=n1 f=2.5 {}", ts + 1)]);
    assert!(text.contains("field type conflict"), "{text}");
    assert!(wait_for(Duration::from_secs(10), || collector
        .metric("output_dead_lettered_total{output=\"influx\"}")
        == 1));
    // Heartbeats name both hosts with their last-seen time.
    let ok = wait_for(Duration::from_secs(10), || {
        influx.scalar(
            "conf",
            "SELECT count(last_seen_s) FROM collector_heartbeat WHERE host='n2'",
        ) >= 1.0
    });
    assert!(ok);
    let seen = influx.scalar(
        "conf",
        "SELECT last(last_seen_s) FROM collector_heartbeat WHERE host='n1'",
    );
    assert!((seen - now_s() as f64).abs() < 30.0, "{seen}");
}

/// The dead-letter files of `dir` (`influx.lp`, `influx.lp.1`, …) with their text, newest first.
fn dead_letter_files(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(u32, String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("influx.lp"))
        .map(|n| {
            let k = n
                .strip_prefix("influx.lp.")
                .map_or(0, |k| k.parse().unwrap());
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            (k, n, text)
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, n, t)| (n, t)).collect()
}

/// Every kept file is within the cap, and holds whole entries only: a `# unix_s=…` comment,
/// then the refused line as sent, each ending in a newline.
fn assert_whole_and_capped(files: &[(String, String)], cap: usize) -> Vec<String> {
    let mut data = Vec::new();
    for (name, text) in files {
        assert!(text.len() <= cap, "{name}: {} bytes > {cap}", text.len());
        assert!(text.ends_with('\n'), "{name} ends in a torn line: {text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() % 2, 0, "{name}: {text}");
        for pair in lines.chunks(2) {
            assert!(pair[0].starts_with("# unix_s="), "{name}: {pair:?}");
            assert!(pair[1].starts_with("disk,host=n"), "{name}: {pair:?}");
            data.push(pair[1].to_string());
        }
    }
    data
}

/// Lines influxd refuses (a field type conflict) fill the dead-letter file past a small
/// `max_file_bytes`: it rotates to `.1`, `.2`, the oldest go, every kept file stays within the
/// cap with whole entries, the newest refused line is in the current file, rotations are
/// counted; a SIGHUP with a lower `keep_files` drops the surplus at the next rotation.
#[test]
fn dead_letter_files_rotate_at_the_cap_and_hold_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18240);
    influx.create_db("rot");
    let ts = now_s() * 1_000_000_000;
    let s = post_lines(
        &format!("{}/write?db=rot", influx.url()),
        format!("disk,host=old f=1i {ts}\n").as_bytes(),
    );
    assert_eq!(s, 204);
    let cap = 1500;
    let limits = format!("[dead_letter]\nmax_file_bytes = {cap}\nkeep_files = 2\n");
    let cfg = write_config(dir.path(), 18250, &influx.url(), "rot", &limits);
    let collector = start_collector(&cfg, 18250);
    let dl_dir = dir.path().join("queue/dead-letter");
    // one refused line per request, each dead-lettered before the next: ~230 bytes an entry
    let refuse = |i: u64| {
        let body = format!("disk,host=n{i} f=2.5 {}\n", ts + i);
        assert_eq!(
            post_lines(&collector.url("/write?db=rot"), body.as_bytes()),
            204
        );
        assert!(
            wait_for(Duration::from_secs(20), || collector
                .metric("output_dead_lettered_total{output=\"influx\"}")
                == i),
            "line {i} not dead-lettered"
        );
    };
    for i in 1..=30 {
        refuse(i);
    }
    let files = dead_letter_files(&dl_dir);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["influx.lp", "influx.lp.1", "influx.lp.2"]);
    let data = assert_whole_and_capped(&files, cap);
    let newest = format!("disk,host=n30 f=2.5 {}\n", ts + 30);
    assert!(files[0].1.ends_with(&newest), "{files:?}");
    assert!(data.len() < 30, "the oldest entries were dropped");
    assert!(!data.contains(&format!("disk,host=n1 f=2.5 {}", ts + 1)));
    let rotations = collector.metric("output_dead_letter_rotations_total{output=\"influx\"}");
    assert!(rotations >= 4, "{rotations}");

    // fewer kept files on reload; the extra one goes at the next rotation
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("keep_files = 2", "keep_files = 1");
    std::fs::write(&cfg, text).unwrap();
    storwatch_test_support::process::signal(collector.pid(), "HUP");
    std::thread::sleep(Duration::from_millis(500));
    for i in 31..=40 {
        refuse(i);
    }
    let files = dead_letter_files(&dl_dir);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["influx.lp", "influx.lp.1"]);
    assert_whole_and_capped(&files, cap);
    assert!(collector.metric("output_dead_letter_rotations_total{output=\"influx\"}") > rotations);
}
