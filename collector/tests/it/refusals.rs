//! Every refusal reaches the client as an answer it can read, with its `Retry-After`, even when
//! the client sends its whole body before reading (Python's `http.client`, the agent's sink) and
//! the body is larger than the socket buffers: 401 (a stranger), 403 (a database not allowed),
//! 503 (the queue above its high watermark), 413 (a body declared too large) and 429 (the
//! per-token rate limit), each tried with Python's `http.client` and `requests`, and curl. The
//! same from Telegraf when a telegraf binary is found (`STORWATCH_TELEGRAF`, else `PATH`). The
//! agent's own sink against a refusing collector is in `tests/tests/it/agent_refusals.rs`.
//!
//! And the bound: what a refused client still sends is read and discarded only up to
//! `max_body_bytes` and for a few seconds; a stranger sending more is cut off, however much
//! it sends.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use storwatch_test_support::{http, skip_or_fail, telegraf, wait_for, Collector, Proc};

const TOKEN: &str = "refusals-agents-token-0123456789";
const STRANGER: &str = "not-a-token-of-this-collector-00";
/// Larger than what the kernel buffers on loopback between a client that does not read and a
/// server that does not either: sent whole before the answer is read, it meets a reset unless
/// the collector reads it.
const BIG: usize = 12 << 20;

/// A collector on `dir/collector.toml`, its one output unreachable (nothing listens on port 9
/// of loopback, so whatever it accepts stays in its queue), with `limits` and `queue` as the
/// bodies of its `[limits]` and `[queue]` tables.
fn collector(dir: &Path, port: u16, limits: &str, queue: &str) -> Collector {
    let config = Collector::write_config(dir, port, "http://127.0.0.1:9", "refusals", TOKEN);
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "[heartbeat]",
        &format!("[limits]\n{limits}\n[queue]\n{queue}\n[heartbeat]"),
        1,
    );
    std::fs::write(&config, text).unwrap();
    Collector::start_with_config(
        Path::new(env!("CARGO_BIN_EXE_storwatch-collector")),
        &config,
        port,
    )
}

/// A collector whose queue is above its high watermark (0 bytes: one accepted line is enough),
/// answering writes with 503 and `Retry-After: 3`; bodies up to 16 MiB.
fn full_collector(dir: &Path, port: u16) -> Collector {
    let c = collector(
        dir,
        port,
        "max_body_bytes = 16777216",
        "high_watermark_bytes = 0\nretry_after_s = 3",
    );
    c.fill_above_watermark("refusals", TOKEN);
    c
}

/// One request a client makes, and the answer it must read.
struct Case {
    what: &'static str,
    path: &'static str,
    token: &'static str,
    bytes: usize,
    status: u16,
    /// `Retry-After` expected: `""` none, `"*"` any number of seconds.
    retry_after: &'static str,
}

/// Sends each case with Python's http.client (the whole body, then the answer is read) and with
/// requests; one line per client and case: `<client> <what> <status> <Retry-After or ->`, or
/// `<client> <what> ERROR <exception>`.
const PYTHON: &str = r#"
import http.client, os, sys
import requests
port = int(os.environ["PORT"])
for case in sys.argv[1:]:
    what, path, token, size = case.split(" ")
    body = (b"refusal,host=a v=1i\n" * (int(size) // 20 + 1))[: int(size)]
    headers = {"Authorization": "Token " + token, "Content-Type": "text/plain"}
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        c.request("POST", path, body=body, headers=headers)
        r = c.getresponse()
        r.read()
        print("http.client", what, r.status, r.getheader("Retry-After") or "-")
        c.close()
    except Exception as e:
        print("http.client", what, "ERROR", type(e).__name__, e)
    try:
        r = requests.post("http://127.0.0.1:%d%s" % (port, path), data=body, headers=headers,
                          timeout=20)
        print("requests", what, r.status_code, r.headers.get("Retry-After") or "-")
    except Exception as e:
        print("requests", what, "ERROR", type(e).__name__, e)
"#;

/// Runs the cases through both Python clients; their lines.
fn python(port: u16, cases: &[Case]) -> Vec<String> {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(PYTHON).env("PORT", port.to_string());
    for c in cases {
        cmd.arg(format!("{} {} {} {}", c.what, c.path, c.token, c.bytes));
    }
    let out = cmd.output().expect("run /usr/bin/python3");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// curl POSTs `file` (`--data-binary @file`); the status and Retry-After it printed. With
/// `expect` false, no `Expect: 100-continue`: the body goes at once, before any answer.
fn curl(url: &str, token: &str, file: &Path, expect: bool) -> String {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %header{retry-after}",
    ])
    .args(["-H", &format!("Authorization: Token {token}")])
    .arg("--data-binary")
    .arg(format!("@{}", file.display()));
    if !expect {
        cmd.args(["-H", "Expect:"]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn body_file(dir: &Path, bytes: usize) -> PathBuf {
    let path = dir.join(format!("body-{bytes}"));
    let line = b"refusal,host=a v=1i\n";
    let body: Vec<u8> = line.iter().copied().cycle().take(bytes).collect();
    std::fs::write(&path, body).unwrap();
    path
}

/// Checks every client's line for every case.
fn check(port: u16, dir: &Path, cases: &[Case]) {
    let lines = python(port, cases);
    let mut wrong = Vec::new();
    for c in cases {
        // "<status> <Retry-After>", the latter "-" when there is none
        let right = |got: &str| {
            let (status, after) = got.split_once(' ').unwrap_or((got, "-"));
            status == c.status.to_string()
                && match c.retry_after {
                    "" => after == "-",
                    "*" => after.parse::<u64>().is_ok_and(|s| s > 0),
                    exact => after == exact,
                }
        };
        for client in ["http.client", "requests"] {
            let prefix = format!("{client} {} ", c.what);
            let got = lines
                .iter()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or("no answer");
            if !right(got) {
                wrong.push(format!("{client} {}: {got}", c.what));
            }
        }
        let file = body_file(dir, c.bytes);
        let url = format!("http://127.0.0.1:{port}{}", c.path);
        for expect in [true, false] {
            let got = curl(&url, c.token, &file, expect);
            let got = if got.contains(' ') {
                got
            } else {
                format!("{got} -")
            };
            if !right(&got) {
                wrong.push(format!(
                    "curl {} (Expect: 100-continue {expect}): {got}",
                    c.what
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "wanted {}:\n{}",
        cases
            .iter()
            .map(|c| format!("{} {} {}", c.what, c.status, c.retry_after))
            .collect::<Vec<_>>()
            .join(", "),
        wrong.join("\n")
    );
}

#[test]
fn every_refusal_reaches_python_and_curl_as_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let c = full_collector(dir.path(), 18960);
    check(
        c.port,
        dir.path(),
        &[
            Case {
                what: "stranger",
                path: "/write?db=refusals",
                token: STRANGER,
                bytes: BIG,
                status: 401,
                retry_after: "",
            },
            Case {
                what: "not-allowed",
                path: "/api/v2/write?org=site&bucket=elsewhere",
                token: TOKEN,
                bytes: BIG,
                status: 403,
                retry_after: "",
            },
            Case {
                what: "full",
                path: "/write?db=refusals",
                token: TOKEN,
                bytes: BIG,
                status: 503,
                retry_after: "3",
            },
        ],
    );
    // each of them was refused by the collector, not lost on the way
    assert!(c.metric("unauthorized_total") >= 4, "401s");
    assert!(c.metric("overloaded_total") >= 4, "503s");

    // 413, and 429: the per-token rate limit, one line a second. The first body is let through whole
    // (the bucket was full) and leaves the token owing 10,000 lines: every later body waits.
    let dir = tempfile::tempdir().unwrap();
    let c = collector(
        dir.path(),
        18962,
        "max_body_bytes = 16777216\nrate_limit_lines_per_s = 1\nrate_limit_burst_lines = 1",
        "",
    );
    let auth = format!("Token {TOKEN}");
    let lines: String = (0..10_000).map(|i| format!("m,host=h{i} v=1i\n")).collect();
    let write = c.url("/write?db=refusals");
    let (code, text) = http(
        &write,
        "POST",
        &[("Authorization", &auth)],
        lines.as_bytes(),
    );
    assert_eq!(code, 204, "{text}");
    let (code, _) = http(
        &write,
        "POST",
        &[("Authorization", &auth)],
        b"m,host=a v=1i",
    );
    assert_eq!(code, 429);
    check(
        c.port,
        dir.path(),
        &[
            Case {
                what: "rate-limited",
                path: "/write?db=refusals",
                token: TOKEN,
                bytes: BIG,
                status: 429,
                retry_after: "*",
            },
            // declared over `max_body_bytes`: refused before a byte of it is read. One line over:
            // the lingering close reads at most `max_body_bytes`, so with a whole MiB over, what the
            // kernel had not yet taken when the bound was reached met a reset (a broken pipe in
            // http.client) whenever the machine was slow; past the bound is `what_a_refused_client_still_sends_is_read_only_up_to_a_bound`
            Case {
                what: "too-large",
                path: "/write?db=refusals",
                token: TOKEN,
                bytes: (16 << 20) + 20,
                status: 413,
                retry_after: "",
            },
        ],
    );
    assert!(c.metric("rate_limited_total") >= 5, "429s");
    assert!(c.metric("too_large_total") >= 4, "413s");
}

/// Sends `head` then up to `bytes` of body in 64 KiB writes, as fast as the collector takes
/// them, or one byte every `pace` when given; how many bytes went before the connection broke
/// (or all of them) and the answer read then, if any.
fn send_raw(port: u16, head: &str, bytes: usize, pace: Option<Duration>) -> (usize, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'x'; if pace.is_some() { 1 } else { 64 << 10 }];
    let mut sent = 0;
    while sent < bytes {
        match s.write(&chunk[..chunk.len().min(bytes - sent)]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
        if let Some(p) = pace {
            std::thread::sleep(p);
        }
    }
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    (sent, String::from_utf8_lossy(&answer).into_owned())
}

/// A stranger cannot make the collector read without bound: after the 401 it reads at most
/// `max_body_bytes` (1 MiB here) of what the stranger still sends, then closes; a stranger
/// sending slowly is cut off after `body_timeout_s` (2 s here).
#[test]
fn what_a_refused_client_still_sends_is_read_only_up_to_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let c = collector(
        dir.path(),
        18964,
        "max_body_bytes = 1048576\nbody_timeout_s = 2",
        "",
    );
    let total = 64 << 20;
    let head = format!(
        "POST /write?db=refusals HTTP/1.1\r\nHost: x\r\nAuthorization: Token {STRANGER}\r\n\
         Content-Length: {total}\r\n\r\n"
    );
    // What the client got off before the reset: what the collector read, plus at most what
    // the kernel buffers on either side (a few MiB on loopback).
    let (sent, _) = send_raw(c.port, &head, total, None);
    assert!(
        sent < 16 << 20,
        "the collector took {sent} bytes of a refused body"
    );

    // slowly: one byte every 50 ms; the connection is closed after about 2 s
    let t0 = Instant::now();
    let (_, answer) = send_raw(
        c.port,
        &head.replace("Content-Length: 67108864", "Content-Length: 1000"),
        400,
        Some(Duration::from_millis(50)),
    );
    let took = t0.elapsed();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        took < Duration::from_secs(15),
        "a slow stranger held its connection {took:?}"
    );
    // and the collector still answers
    assert_eq!(http(&c.url("/ping"), "GET", &[], b"").0, 204);
}

/// Telegraf's `influxdb` and `influxdb_v2` outputs against a full collector and with a token it
/// does not know: its log names each status the collector gave.
#[test]
fn telegraf_reads_the_refusals() {
    let Some(bin) = telegraf() else {
        return skip_or_fail(
            "telegraf",
            "no telegraf binary (set STORWATCH_TELEGRAF or put telegraf on PATH)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let c = full_collector(dir.path(), 18966);
    let conf = dir.path().join("telegraf.conf");
    std::fs::write(
        &conf,
        format!(
            r#"[agent]
  interval = "200ms"
  flush_interval = "500ms"
  omit_hostname = true
[[inputs.mem]]
[[outputs.influxdb]]
  urls = ["http://127.0.0.1:{port}"]
  database = "refusals"
  skip_database_creation = true
  username = "telegraf"
  password = "{TOKEN}"
[[outputs.influxdb_v2]]
  urls = ["http://127.0.0.1:{port}"]
  token = "{TOKEN}"
  organization = "site"
  bucket = "refusals"
[[outputs.influxdb]]
  urls = ["http://127.0.0.1:{port}"]
  database = "refusals"
  skip_database_creation = true
  username = "stranger"
  password = "{STRANGER}"
"#,
            port = c.port
        ),
    )
    .unwrap();
    let log = dir.path().join("telegraf.log");
    let mut tg = Proc::spawn(
        "telegraf",
        &log,
        Command::new(&bin).args(["--config", conf.to_str().unwrap()]),
    );
    // the v1 output prints the status and the collector's message; the v2 output reads the
    // Retry-After (3 s) and waits for it
    let seen = |text: &str| {
        text.contains("503 Service Unavailable: queue above its high watermark")
            && text.contains("401 Unauthorized): unauthorized access")
            && text.contains("will retry in 3s. (503 Service Unavailable)")
    };
    let ok = wait_for(Duration::from_secs(20), || {
        seen(&std::fs::read_to_string(&log).unwrap_or_default())
    });
    tg.kill();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        ok,
        "telegraf did not report the refusals:\n{}",
        tg.log_tail(30)
    );
    for broken in ["broken pipe", "connection reset", "EOF"] {
        assert!(
            !text.contains(broken),
            "telegraf saw {broken}:\n{}",
            tg.log_tail(30)
        );
    }
}
