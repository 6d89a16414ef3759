//! Helpers for the tests that run the real collector binary and the real influxd.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A throw-away influxd started by `scripts/influxd-test.sh`, stopped on drop.
pub(crate) struct Influxd {
    pub(crate) dir: PathBuf,
    pub(crate) port: u16,
}

fn run_script_start(dir: &Path, port: u16) {
    let out = Command::new("bash")
        .arg(script())
        .arg("start")
        .arg(dir)
        .arg(port.to_string())
        .output()
        .expect("run influxd-test.sh");
    assert!(
        out.status.success(),
        "influxd did not start: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/influxd-test.sh")
}

impl Influxd {
    pub(crate) fn start(dir: &Path, port: u16) -> Influxd {
        run_script_start(dir, port);
        Influxd {
            dir: dir.to_path_buf(),
            port,
        }
    }

    pub(crate) fn stop(&self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }

    /// Starts again on the same data.
    pub(crate) fn restart(&self) {
        run_script_start(&self.dir, self.port);
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn query(&self, db: &str, q: &str) -> serde_json::Value {
        let url = format!("{}/query", self.url());
        let resp = blocking_post_form(&url, &[("db", db), ("q", q)]);
        serde_json::from_str(&resp).unwrap_or(serde_json::Value::Null)
    }

    pub(crate) fn create_db(&self, db: &str) {
        self.query(db, &format!("CREATE DATABASE \"{db}\""));
    }

    /// A single number from `SELECT <agg> FROM …` (0 when there is no data).
    pub(crate) fn scalar(&self, db: &str, q: &str) -> f64 {
        let v = self.query(db, q);
        v["results"][0]["series"][0]["values"][0][1]
            .as_f64()
            .unwrap_or(0.0)
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A minimal blocking HTTP POST (form body) over std TcpStream: the helpers stay free of an
/// async runtime so they work from any test.
pub(crate) fn blocking_post_form(url: &str, form: &[(&str, &str)]) -> String {
    let body: String = form
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect::<Vec<_>>()
        .join("&");
    http_request(
        url,
        "POST",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
        &[],
    )
    .1
}

pub(crate) fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One HTTP/1.1 request with `Connection: close`; returns (status, body). Status 0 when the
/// connection failed.
pub(crate) fn http_request(
    url: &str,
    method: &str,
    ctype: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let Ok(mut s) = std::net::TcpStream::connect(hostport) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    if s.write_all(req.as_bytes())
        .and_then(|_| s.write_all(body))
        .is_err()
    {
        return (0, String::new());
    }
    let mut resp = Vec::new();
    if s.read_to_end(&mut resp).is_err() && resp.is_empty() {
        return (0, String::new());
    }
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match text.find("\r\n\r\n") {
        Some(i) => text[i + 4..].to_string(),
        None => String::new(),
    };
    // Chunked bodies (influxd's /query) are not decoded; take the JSON object out of them.
    let body = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if b >= a && body.contains("\r\n") => body[a..=b].to_string(),
        _ => body,
    };
    (status, body)
}

/// The collector binary, killed (SIGKILL) on drop.
pub(crate) struct CollectorProc {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) config: PathBuf,
}

impl CollectorProc {
    pub(crate) fn start(config: &Path, port: u16) -> CollectorProc {
        let child = Command::new(env!("CARGO_BIN_EXE_storwatch-collector"))
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn storwatch-collector");
        let p = CollectorProc {
            child,
            port,
            config: config.to_path_buf(),
        };
        p.wait_ready();
        p
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if http_request(&self.url("/ping"), "GET", "text/plain", b"", &[]).0 == 204 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("collector did not answer /ping on port {}", self.port);
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// kill -9.
    pub(crate) fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn restart(&mut self) {
        self.kill9();
        *self = CollectorProc::start(&self.config.clone(), self.port);
    }

    /// A counter from /metrics.
    pub(crate) fn metric(&self, name: &str) -> u64 {
        let (_, text) = http_request(&self.url("/metrics"), "GET", "text/plain", b"", &[]);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("storwatch_collector_{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for CollectorProc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Writes a collector config (open on loopback, one v1 output, quick retries).
pub(crate) fn write_config(
    dir: &Path,
    port: u16,
    output_url: &str,
    db: &str,
    extra: &str,
) -> PathBuf {
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

pub(crate) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Polls `f` until it returns true or the timeout passes.
pub(crate) fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}
