//! Delivery end to end: the HTTP sink and its spool against a real InfluxDB 1.x started on
//! 127.0.0.1 by `scripts/influxd-test.sh`, and against a small in-test HTTP server for the
//! answers InfluxDB 1.x cannot give (429 with Retry-After, v2/v3 error shapes, 401).
//!
//! Each InfluxDB test has its own data directory and port (18300 to 18307, even numbers: the
//! script also binds PORT+1).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storwatch_agent::sink::http::{HttpConfig, HttpSink};
use storwatch_agent::sink::spool::{Spool, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use storwatch_agent::sink::{self, OutputSpec, Sink};

const DB: &str = "storwatch_test";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/influxd-test.sh")
}

/// A throw-away influxd, stopped when dropped.
struct Influx {
    dir: tempfile::TempDir,
    port: u16,
}

impl Influx {
    fn start(port: u16) -> Self {
        // a server left over from an aborted run would answer in place of ours
        assert!(
            TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "127.0.0.1:{port} is in use (a stale influxd?)"
        );
        let influx = Self {
            dir: tempfile::tempdir().unwrap(),
            port,
        };
        influx.up();
        let r = ureq::post(format!("{}/query", influx.base()))
            .query("q", format!("CREATE DATABASE {DB}"))
            .send_empty()
            .unwrap();
        assert_eq!(r.status(), 200);
        influx
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn write_url(&self) -> String {
        format!("{}/write?db={DB}", self.base())
    }

    fn up(&self) {
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "influxd start: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn down(&self) {
        let out = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
    }

    /// Every point of measurement `m` as (host, time ns) -> v.
    fn points(&self) -> BTreeMap<(String, i64), i64> {
        let mut r = ureq::get(format!("{}/query", self.base()))
            .query("db", DB)
            .query("epoch", "ns")
            .query("q", "SELECT host, v FROM m")
            .call()
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        let mut out = BTreeMap::new();
        let rows = v["results"][0]["series"][0]["values"].as_array().cloned();
        for row in rows.unwrap_or_default() {
            let t = row[0].as_i64().unwrap();
            let host = row[1].as_str().unwrap().to_owned();
            let val = row[2].as_i64().unwrap();
            assert!(
                out.insert((host, t), val).is_none(),
                "duplicate point at {t}"
            );
        }
        out
    }
}

impl Drop for Influx {
    fn drop(&mut self) {
        self.down();
    }
}

/// Settings that keep the tests fast: short timeouts and backoff.
fn fast_config(spool_dir: &Path) -> HttpConfig {
    HttpConfig {
        spool_dir: spool_dir.to_owned(),
        timeout_s: 2.0,
        backoff_min_s: 0.05,
        backoff_max_s: 0.2,
        ..HttpConfig::default()
    }
}

/// One report: `hosts` lines of `m` at time `t` (ns), value derived from both.
fn report(t: i64, hosts: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for h in 0..hosts {
        out.extend_from_slice(format!("m,host=h{h} v={}i {t}\n", t / 1000 + h as i64).as_bytes());
    }
    out
}

fn expected(times: &[i64], hosts: usize) -> BTreeMap<(String, i64), i64> {
    let mut m = BTreeMap::new();
    for &t in times {
        for h in 0..hosts {
            m.insert((format!("h{h}"), t), t / 1000 + h as i64);
        }
    }
    m
}

const T0: i64 = 1_700_000_000_000_000_000;

fn times(n: usize) -> Vec<i64> {
    (0..n as i64).map(|i| T0 + i * 10_000_000_000).collect()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lines_land_in_influxdb_and_a_resend_overwrites() {
    let influx = Influx::start(18300);
    let spool = tempfile::tempdir().unwrap();
    let spec: OutputSpec = influx.write_url().parse().unwrap();
    let mut s = sink::open(&spec, &fast_config(spool.path())).unwrap();
    let ts = times(5);
    for &t in &ts {
        s.send(&report(t, 3)).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(s.stats().spool_bytes, 0);
    assert_eq!(influx.points(), expected(&ts, 3));
    // the same report again (as after a crash before the cursor was saved): no duplicates
    s.send(&report(ts[2], 3)).unwrap();
    s.flush().unwrap();
    assert_eq!(influx.points(), expected(&ts, 3));
    assert_eq!(s.stats().dropped_lines, 0);
}

#[test]
fn influxdb_outage_spools_and_everything_arrives_once() {
    let influx = Influx::start(18302);
    let spool = tempfile::tempdir().unwrap();
    let mut s = HttpSink::open(&influx.write_url(), &fast_config(spool.path())).unwrap();
    let ts = times(40);
    let (before, rest) = ts.split_at(10);
    let (during, after) = rest.split_at(20);
    for &t in before {
        s.send(&report(t, 4)).unwrap();
    }
    assert!(s.wait_drained(Duration::from_secs(5)));

    influx.down();
    let started = Instant::now();
    for &t in during {
        s.send(&report(t, 4)).unwrap();
    }
    // spooling is local: 20 sends with an fsync each, nothing waits for the dead server
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    let d = s.delivery_stats();
    assert_eq!(d.spool.pending_lines, 20 * 4);
    assert!(d.failed_requests > 0);
    assert!(s.stats().spool_bytes > 0);

    influx.up();
    for &t in after {
        s.send(&report(t, 4)).unwrap();
    }
    assert!(
        s.wait_drained(Duration::from_secs(10)),
        "{:?}",
        s.delivery_stats()
    );
    assert_eq!(influx.points(), expected(&ts, 4));
    let d = s.delivery_stats();
    assert_eq!(d.delivered_lines, 40 * 4);
    assert_eq!(s.stats().dropped_lines, 0);
    // the backlog went out in fewer requests than reports
    assert!(d.delivered_requests < 40, "{d:?}");
}

#[test]
fn agent_restart_keeps_undelivered_data() {
    let influx = Influx::start(18304);
    let spool = tempfile::tempdir().unwrap();
    influx.down();
    let ts = times(12);
    {
        let mut s = HttpSink::open(&influx.write_url(), &fast_config(spool.path())).unwrap();
        for &t in &ts {
            s.send(&report(t, 2)).unwrap();
        }
        // the agent stops while the server is away: flush does not wait for a failing server
        wait_until("a failed attempt", Duration::from_secs(5), || {
            s.delivery_stats().failed_requests > 0
        });
        let t = Instant::now();
        s.flush().unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        let d = s.delivery_stats();
        assert_eq!(d.spool.pending_lines, 24, "{d:?} {:?}", influx.points());
    }
    influx.up();
    let s = HttpSink::open(&influx.write_url(), &fast_config(spool.path())).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(10)),
        "{:?}",
        s.delivery_stats()
    );
    assert_eq!(influx.points(), expected(&ts, 2));
    drop(s);
    // and a third start has nothing left to send
    let s = HttpSink::open(&influx.write_url(), &fast_config(spool.path())).unwrap();
    assert_eq!(s.delivery_stats().spool.pending_lines, 0);
}

#[test]
fn malformed_lines_are_dropped_and_counted_without_wedging() {
    let influx = Influx::start(18306);
    let spool = tempfile::tempdir().unwrap();
    let mut s = HttpSink::open(&influx.write_url(), &fast_config(spool.path())).unwrap();
    let ts = times(3);
    let mut bad = report(ts[0], 2);
    bad.extend_from_slice(b"m,host=broken v=\n");
    s.send(&bad).unwrap();
    s.send(&report(ts[1], 2)).unwrap();
    // a field type conflict: v is an integer in this database
    s.send(format!("m,host=h0 v=1.5 {}\n", ts[2]).as_bytes())
        .unwrap();
    s.send(&report(ts[2], 2)).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    assert_eq!(influx.points(), expected(&ts, 2));
    let d = s.delivery_stats();
    assert_eq!(d.rejected_lines, 2, "{d:?}");
    assert_eq!(s.stats().dropped_lines, 2);
}

/// A scripted HTTP/1.1 server: answers requests in order from a script (then 204), records them.
struct FakeServer {
    url_base: String,
    requests: Arc<Mutex<Vec<Seen>>>,
}

#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: Vec::new(),
        body: body.to_owned(),
    }
}

type Decide = dyn Fn(&Seen) -> Option<Answer> + Send + Sync;

impl FakeServer {
    /// `decide` may answer a request from its content; otherwise the next scripted answer, then 204.
    fn start(script: Vec<Answer>, decide: Box<Decide>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url_base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let mut script: VecDeque<Answer> = script.into();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let Some(req) = read_request(&stream) else {
                    continue;
                };
                let ans = decide(&req)
                    .or_else(|| script.pop_front())
                    .unwrap_or_else(|| answer(204, ""));
                seen.lock().unwrap().push(req);
                write_answer(stream, &ans);
            }
        });
        Self { url_base, requests }
    }

    fn requests(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(stream: impl Read) -> Option<Seen> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut raw = vec![0; len];
    r.read_exact(&mut raw).ok()?;
    let body = if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .ok()?;
        out
    } else {
        raw
    };
    Some(Seen {
        at: Instant::now(),
        headers,
        body,
    })
}

fn write_answer(mut stream: impl Write, a: &Answer) {
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nContent-Type: application/json\r\nConnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (k, v) in &a.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(a.body.as_bytes());
}

fn no_decision() -> Box<Decide> {
    Box::new(|_| None)
}

/// Lines of every request the server accepted with a 2xx, in order.
fn bodies(reqs: &[Seen]) -> Vec<u8> {
    reqs.iter().flat_map(|r| r.body.clone()).collect()
}

#[test]
fn too_many_requests_waits_for_retry_after() {
    let busy = Answer {
        status: 429,
        headers: vec![("Retry-After", "1".into())],
        body: r#"{"code":"too many requests"}"#.into(),
    };
    let server = FakeServer::start(vec![busy], no_decision());
    let spool = tempfile::tempdir().unwrap();
    let url = format!("{}/api/v2/write?org=o&bucket=b", server.url_base);
    let mut s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    s.send(&report(T0, 2)).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    // the backoff alone would retry after at most 0.2 s
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    assert!(gap < Duration::from_secs(3), "{gap:?}");
    assert_eq!(reqs[1].body, report(T0, 2));
    assert_eq!(s.delivery_stats().last_status, 204);
}

#[test]
fn partial_write_drops_only_the_named_lines() {
    let partial = answer(
        400,
        r#"{"error":"partial write of line protocol occurred","data":[{"original_line":"m,host=x v=","line_number":3,"error_message":"invalid field value"}]}"#,
    );
    let server = FakeServer::start(vec![partial], no_decision());
    let spool = tempfile::tempdir().unwrap();
    let url = format!("{}/api/v3/write_lp?db=x", server.url_base);
    let mut s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    let mut first = report(T0, 2);
    first.extend_from_slice(b"m,host=x v=\n");
    s.send(&first).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    s.send(&report(T0 + 1, 2)).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    let reqs = server.requests();
    // the partially written batch is not sent again
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body, first);
    assert_eq!(reqs[1].body, report(T0 + 1, 2));
    let d = s.delivery_stats();
    assert_eq!((d.rejected_lines, d.delivered_lines), (1, 4), "{d:?}");
    assert_eq!(s.stats().dropped_lines, 1);
}

#[test]
fn whole_batch_refusal_is_narrowed_to_the_bad_record() {
    let server = FakeServer::start(
        Vec::new(),
        Box::new(|req: &Seen| {
            let text = String::from_utf8_lossy(&req.body);
            text.contains("host=bad").then(|| {
                answer(
                    400,
                    r#"{"code":"invalid","message":"failed to parse line protocol"}"#,
                )
            })
        }),
    );
    let spool = tempfile::tempdir().unwrap();
    // a backlog of three reports, the middle one refused by the server
    {
        let mut sp = Spool::open(spool.path(), 1 << 20).unwrap();
        sp.append(&report(T0, 2)).unwrap();
        sp.append(format!("m,host=bad v=1i {T0}\n").as_bytes())
            .unwrap();
        sp.append(&report(T0 + 1, 2)).unwrap();
    }
    let url = format!("{}/api/v2/write?org=o&bucket=b", server.url_base);
    let s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = server.requests();
    let ok: Vec<Seen> = reqs
        .iter()
        .filter(|r| !String::from_utf8_lossy(&r.body).contains("host=bad"))
        .cloned()
        .collect();
    assert_eq!(bodies(&ok), [report(T0, 2), report(T0 + 1, 2)].concat());
    // whole batch, then one record at a time: 1 + 3 requests
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    let d = s.delivery_stats();
    assert_eq!((d.rejected_lines, d.delivered_lines), (1, 4), "{d:?}");
}

#[test]
fn unauthorized_keeps_data_until_the_token_is_fixed() {
    let server = FakeServer::start(
        Vec::new(),
        Box::new(|req: &Seen| {
            (req.headers.get("authorization").map(String::as_str) != Some("Token good-token")).then(
                || {
                    answer(
                        401,
                        r#"{"code":"unauthorized","message":"unauthorized access"}"#,
                    )
                },
            )
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "stale-token\n").unwrap();
    let cfg = HttpConfig {
        token_file: Some(token.clone()),
        ..fast_config(&dir.path().join("spool"))
    };
    let url = format!("{}/write?db=x", server.url_base);
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    s.send(&report(T0, 3)).unwrap();
    wait_until("three refusals", Duration::from_secs(5), || {
        server.requests().len() >= 3
    });
    let d = s.delivery_stats();
    assert_eq!(d.last_status, 401);
    assert_eq!(d.spool.pending_lines, 3);
    assert_eq!(s.stats().dropped_lines, 0);
    // the operator fixes the token file; the sink picks it up on the next refusal
    std::fs::write(&token, "good-token\n").unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = server.requests();
    let last = reqs.last().unwrap();
    assert_eq!(last.body, report(T0, 3));
    assert_eq!(last.headers.get("content-encoding").unwrap(), "gzip");
    assert!(last.headers["user-agent"].starts_with("storwatch-agent/"));
    assert!(reqs[0].headers["authorization"] == "Token stale-token");
}

#[test]
fn corrupt_spool_on_restart_delivers_the_intact_records() {
    let server = FakeServer::start(Vec::new(), no_decision());
    let spool = tempfile::tempdir().unwrap();
    let records = [report(T0, 2), report(T0 + 1, 3), report(T0 + 2, 2)];
    {
        let mut sp = Spool::open(spool.path(), 1 << 20).unwrap();
        for r in &records {
            sp.append(r).unwrap();
        }
    }
    // flip a payload byte of the middle record
    let seg = std::fs::read_dir(spool.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = (SEGMENT_HEADER_BYTES + 2 * RECORD_HEADER_BYTES) as usize + records[0].len() + 5;
    bytes[at] ^= 0x20;
    // and leave a torn record at the end, as a crash mid-append would
    bytes.extend_from_slice(b"SWR1\x40\x00\x00\x00\x00\x00");
    std::fs::write(&seg, bytes).unwrap();

    let url = format!("{}/write?db=x", server.url_base);
    let s = HttpSink::open(&url, &fast_config(spool.path())).unwrap();
    assert!(s.wait_drained(Duration::from_secs(5)));
    assert_eq!(
        bodies(&server.requests()),
        [records[0].clone(), records[2].clone()].concat()
    );
    let d = s.delivery_stats();
    assert_eq!((d.spool.corrupt_records, d.spool.corrupt_lines), (1, 3));
    assert_eq!(d.spool.torn_bytes, 10);
    assert_eq!(s.stats().dropped_lines, 3);
}

#[test]
fn a_server_that_never_answers_does_not_block_send() {
    // accepts connections and never replies
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/write?db=x", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        timeout_s: 1.0,
        ..fast_config(spool.path())
    };
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let t = Instant::now();
        s.send(&report(T0 + i, 50)).unwrap();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    // an append plus fdatasync; far below the 1 s request timeout the worker is stuck in
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    assert_eq!(s.delivery_stats().spool.pending_lines, 20 * 50);
    assert!(!held.lock().unwrap().is_empty());
}

#[test]
fn full_spool_drops_the_oldest_and_counts_it() {
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        spool_max_bytes: 64 << 10,
        ..fast_config(spool.path())
    };
    // nothing listens on port 9 of loopback: connection refused
    let mut s = HttpSink::open("http://127.0.0.1:9/write?db=x", &cfg).unwrap();
    let total = 400;
    for i in 0..total {
        s.send(&report(T0 + i, 5)).unwrap();
    }
    assert!(s.wait_spooled(Duration::from_secs(60)));
    let st = s.stats();
    let d = s.delivery_stats();
    assert!(d.spool.file_bytes <= 64 << 10, "{d:?}");
    assert!(st.dropped_lines > 0);
    assert_eq!(st.dropped_lines + d.spool.pending_lines, total as u64 * 5);
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it.
fn make_pki(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("agent", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let subj = format!("/CN={name}");
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &pem,
                "-extfile",
                &extfile,
            ],
        );
    }
}

/// An HTTPS server that demands a client certificate signed by the test CA; answers 204.
fn start_mtls_server(dir: &Path) -> (String, Arc<Mutex<Vec<Seen>>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // a failed handshake surfaces here as a read error: the request is simply not seen
            let Some(req) = read_request(&mut tls) else {
                continue;
            };
            seen.lock().unwrap().push(req);
            write_answer(&mut tls, &answer(204, ""));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (base, requests)
}

#[test]
fn https_with_a_site_ca_and_a_client_certificate() {
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    let (base, requests) = start_mtls_server(pki.path());
    let url = format!("{base}/write?db=x");
    let p = |f: &str| Some(pki.path().join(f));

    // without a client certificate the server refuses the handshake: data kept, retried
    let spool = tempfile::tempdir().unwrap();
    let cfg = HttpConfig {
        ca_file: p("ca.pem"),
        ..fast_config(spool.path())
    };
    let mut s = HttpSink::open(&url, &cfg).unwrap();
    s.send(&report(T0, 2)).unwrap();
    wait_until("refused handshakes", Duration::from_secs(5), || {
        s.delivery_stats().failed_requests >= 2
    });
    assert_eq!(s.delivery_stats().spool.pending_lines, 2);
    drop(s);

    // the built-in roots do not know the site CA either
    let cfg = HttpConfig {
        client_cert_file: p("agent.pem"),
        client_key_file: p("agent.key"),
        ..fast_config(spool.path())
    };
    let s = HttpSink::open(&url, &cfg).unwrap();
    wait_until("untrusted server", Duration::from_secs(5), || {
        s.delivery_stats().failed_requests >= 2
    });
    assert_eq!(s.delivery_stats().spool.pending_lines, 2);
    drop(s);
    assert!(requests.lock().unwrap().is_empty());

    // site CA and client certificate: the spooled report goes through
    let cfg = HttpConfig {
        ca_file: p("ca.pem"),
        client_cert_file: p("agent.pem"),
        client_key_file: p("agent.key"),
        ..fast_config(spool.path())
    };
    let s = HttpSink::open(&url, &cfg).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(5)),
        "{:?}",
        s.delivery_stats()
    );
    let reqs = requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body, report(T0, 2));
}

fn proc_status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// CPU time of this process so far (user + system), from getrusage-equivalent /proc/self/stat.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = stat.rsplit(')').next().unwrap();
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks * 10.0
}

/// A 200-disk server's report: 200 `disk` lines and 4 `net` lines, ~70 KB.
fn big_report(t: i64) -> Vec<u8> {
    let mut out = String::new();
    for d in 0..200 {
        out.push_str(&format!(
            "disk,host=dcache-pool-017.site.example,device=sd{d},name=sd{d},kind=disk,rotational=1 \
             r_per_s={:.2},w_per_s={:.2},d_per_s=0,f_per_s=0.1,rkb_per_s={:.1},wkb_per_s={:.1},\
             rrqm_per_s=0.5,wrqm_per_s=12.25,r_await_ms={:.2},w_await_ms={:.2},aqu_sz=1.73,\
             util_pct={:.1},util_max_pct=100,util_p95_pct=98.5,saturated_s=3i,svctm_ms=4.1 {t}\n",
            12.3 + d as f64,
            88.1 + (d * 7 % 13) as f64,
            1532.4 + d as f64 * 3.3,
            40321.9 + d as f64 * 11.0,
            7.5 + (d % 5) as f64,
            21.25 + (d % 3) as f64,
            61.0 + (d % 39) as f64
        ));
    }
    for n in 0..4 {
        out.push_str(&format!(
            "net,host=dcache-pool-017.site.example,iface=ens{n} rx_bytes_per_s=1.25e9,\
             tx_bytes_per_s=3.1e8,rx_packets_per_s=812345,tx_packets_per_s=400012,speed_mbps=10000i,\
             util_pct=81.2,util_max_pct=97.9 {t}\n"
        ));
    }
    out.into_bytes()
}

/// Figures for docs/delivery.md, not a timed test:
/// `cargo test --release -p storwatch-agent --test delivery -- --ignored --nocapture measure`
#[test]
#[ignore = "measurement; run by hand with --release"]
fn measure_send_and_backlog_drain() {
    let influx = Influx::start(18308);
    let spool = tempfile::tempdir().unwrap();
    let reports = 360; // one hour at one report per 10 s
    let cfg = fast_config(spool.path());
    let mut s = HttpSink::open(&influx.write_url(), &cfg).unwrap();
    let (mut total, mut slowest) = (Duration::ZERO, Duration::ZERO);
    let c0 = cpu_ms();
    for i in 0..50 {
        let body = big_report(T0 + i * 10_000_000_000);
        let t = Instant::now();
        s.send(&body).unwrap();
        total += t.elapsed();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.wait_drained(Duration::from_secs(30)));
    println!(
        "live: 50 reports, send() mean {:.2} ms max {:.2} ms; {:.2} ms CPU per report \
         (building it, spooling, gzip, HTTP); VmHWM {} kB",
        total.as_secs_f64() * 1e3 / 50.0,
        slowest.as_secs_f64() * 1e3,
        (cpu_ms() - c0) / 50.0,
        proc_status("VmHWM:")
    );
    drop(s);

    influx.down();
    let mut s = HttpSink::open(&influx.write_url(), &cfg).unwrap();
    for i in 0..reports {
        s.send(&big_report(T0 + (50 + i) * 10_000_000_000)).unwrap();
        // an agent hands over one report per 10 s: never more than the queue's bound at once
        assert!(s.wait_spooled(Duration::from_secs(30)));
    }
    let spooled = s.delivery_stats().spool;
    influx.up();
    let (c0, t) = (cpu_ms(), Instant::now());
    assert!(s.wait_drained(Duration::from_secs(300)));
    let d = s.delivery_stats();
    println!(
        "backlog: {} lines, {} bytes spooled; drained in {:.2} s ({:.0} lines/s, {} requests), \
         {:.0} ms CPU; VmHWM {} kB",
        spooled.pending_lines,
        spooled.pending_bytes,
        t.elapsed().as_secs_f64(),
        d.delivered_lines as f64 / t.elapsed().as_secs_f64(),
        d.delivered_requests,
        cpu_ms() - c0,
        proc_status("VmHWM:")
    );
    let mut r = ureq::get(format!("{}/query", influx.base()))
        .query("db", DB)
        .query("q", "SELECT count(util_pct) FROM disk")
        .call()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(
        v["results"][0]["series"][0]["values"][0][1].as_i64(),
        Some((50 + reports) * 200)
    );
}
