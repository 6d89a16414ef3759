//! End-to-end test support across the storwatch binaries: finding the built binaries, a
//! throw-away influxd (through `scripts/influxd-test.sh`), the collector as a child process, a
//! fixture proc/sys root for the agent, and a small blocking HTTP client.
//!
//! The binaries are taken from the target directory the tests run from (`cargo build --bins`
//! or `cargo test --workspace` puts them there). When one is missing it is built with a nested
//! `cargo build` into a separate target directory, since the outer cargo holds the lock of its
//! own while tests run.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of a workspace binary, building it if it is not there.
pub fn binary(package: &str, name: &str) -> PathBuf {
    // Test executables live in <target>/<profile>/deps/.
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let candidate = profile_dir.join(name);
    if candidate.is_file() {
        return candidate;
    }
    let nested = profile_dir.join("e2e-bins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "-p", package, "--bin", name, "--target-dir"])
        .arg(&nested)
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cannot build {name}");
    nested.join("debug").join(name)
}

/// A throw-away influxd on 127.0.0.1, stopped on drop.
pub struct Influxd {
    pub dir: PathBuf,
    pub port: u16,
}

fn script() -> PathBuf {
    workspace().join("scripts/influxd-test.sh")
}

fn start_influxd(dir: &Path, port: u16) {
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

impl Influxd {
    pub fn start(dir: &Path, port: u16) -> Influxd {
        start_influxd(dir, port);
        Influxd {
            dir: dir.to_path_buf(),
            port,
        }
    }

    /// Stops it (an outage); [`Influxd::restart`] brings it back on the same data.
    pub fn stop(&self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }

    /// Starts again after [`Influxd::stop`], on the same data and port.
    pub fn restart(&self) {
        start_influxd(&self.dir, self.port);
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn query(&self, db: &str, q: &str) -> serde_json::Value {
        let (_, text) = post_form(&format!("{}/query", self.url()), &[("db", db), ("q", q)]);
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
    }

    pub fn create_db(&self, db: &str) {
        self.query(db, &format!("CREATE DATABASE \"{db}\""));
    }

    /// Sets the database up as a site does, with `deploy/influxdb/setup.sh`: the `raw` (default),
    /// `rp_1m` and `rp_1h` retention policies and the continuous queries that fill them.
    pub fn setup_site(&self, db: &str) {
        let out = Command::new("bash")
            .arg(workspace().join("deploy/influxdb/setup.sh"))
            .args(["--url", &self.url(), "--db", db])
            .output()
            .expect("run deploy/influxdb/setup.sh");
        assert!(
            out.status.success(),
            "setup.sh: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The first value of the first series of a query (0 when there is none).
    pub fn scalar(&self, db: &str, q: &str) -> f64 {
        self.query(db, q)["results"][0]["series"][0]["values"][0][1]
            .as_f64()
            .unwrap_or(0.0)
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A form POST (`application/x-www-form-urlencoded`) through [`http`]: (status, body).
pub fn post_form(url: &str, form: &[(&str, &str)]) -> (u16, String) {
    let body = form
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&");
    http(
        url,
        "POST",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
}

/// One HTTP/1.1 request with `Connection: close`: (status, body); status 0 when the
/// connection failed. A chunked answer (influxd's /query) is decoded.
pub fn http(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (hostport, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let Ok(mut s) = std::net::TcpStream::connect(hostport) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: {}\r\nConnection: close\r\n",
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
    let _ = s.read_to_end(&mut resp);
    let Some(split) = resp.windows(4).position(|w| w == b"\r\n\r\n") else {
        let head = String::from_utf8_lossy(&resp);
        return (status_of(&head), String::new());
    };
    let head = String::from_utf8_lossy(&resp[..split]);
    let body = &resp[split + 4..];
    let chunked = head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        })
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (
        status_of(&head),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn status_of(head: &str) -> u16 {
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The payload of a `Transfer-Encoding: chunked` body (as much of it as arrived).
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&rest[..eol]);
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        rest = rest.get(take + 2..).unwrap_or(&[]);
    }
    out
}

/// The collector as a child process, SIGKILLed on drop.
pub struct Collector {
    child: Child,
    pub port: u16,
    config: PathBuf,
    bin: PathBuf,
}

impl Collector {
    /// Writes a config with one v1 output and a token file holding `token`, and starts it.
    pub fn start(dir: &Path, port: u16, influx: &str, db: &str, token: &str) -> Collector {
        let config = dir.join("collector.toml");
        std::fs::write(dir.join("tokens"), format!("agents:{token}\n")).unwrap();
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
                 [heartbeat]\ninterval_s = 1\n\
                 [[outputs]]\nname = \"influx\"\nurl = \"{influx}\"\ndb = \"{db}\"\n\
                 backoff_min_ms = 50\nbackoff_max_s = 1\n",
                q = dir.join("queue").display(),
                t = dir.join("tokens").display(),
            ),
        )
        .unwrap();
        Collector::spawn(
            binary("storwatch-collector", "storwatch-collector"),
            config,
            port,
        )
    }

    /// Starts the collector binary `bin` on an existing config file whose listen port is
    /// `port`, and waits until it answers /ping.
    pub fn start_with_config(bin: &Path, config: &Path, port: u16) -> Collector {
        Collector::spawn(bin.to_path_buf(), config.to_path_buf(), port)
    }

    fn spawn(bin: PathBuf, config: PathBuf, port: u16) -> Collector {
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .expect("start the collector");
        let c = Collector {
            child,
            port,
            config,
            bin,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while http(&c.url("/ping"), "GET", &[], b"").0 != 204 {
            assert!(Instant::now() < deadline, "collector did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        c
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// kill -9, and stay down.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Start again after [`Collector::stop`], on the same queue.
    pub fn start_again(&mut self) {
        let fresh = Collector::spawn(self.bin.clone(), self.config.clone(), self.port);
        *self = fresh;
    }

    /// kill -9 and start again on the same queue.
    pub fn crash_and_restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// A value from its /metrics, `name` without the `storwatch_collector_` prefix and with
    /// its labels, e.g. `output_retries_total{output="influx"}` (0 when it is not there).
    pub fn metric(&self, name: &str) -> u64 {
        let (_, text) = http(&self.url("/metrics"), "GET", &[], b"");
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("storwatch_collector_{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process (a simulator, an agent) SIGKILLed and reaped on drop, with its output in a log
/// file to show when a test fails.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, log: &Path, cmd: &mut Command) -> Proc {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
        }
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// kill -9 and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A proc root made of the agent's real captured fixtures (provenance in agent/fixtures), and
/// the disk-server sys tree.
pub fn fixture_roots(dir: &Path) -> (PathBuf, PathBuf) {
    let fx = workspace().join("agent/fixtures");
    let proc_root = dir.join("proc");
    std::fs::create_dir_all(proc_root.join("net")).unwrap();
    std::fs::create_dir_all(proc_root.join("pressure")).unwrap();
    for (from, to) in [
        (
            "diskstats/build-machine-linux-6.18-20-field.txt",
            "diskstats",
        ),
        ("netdev/build-machine-linux-6.18.txt", "net/dev"),
        ("stat/build-machine-linux-6.18-2cpu.txt", "stat"),
        ("meminfo/build-machine-linux-6.18.txt", "meminfo"),
        ("pressure/build-machine-linux-6.18-io.txt", "pressure/io"),
        ("uptime/build-machine-linux-6.18.txt", "uptime"),
    ] {
        std::fs::copy(fx.join(from), proc_root.join(to)).unwrap();
    }
    (proc_root, fx.join("sysfs/disk-server/sys"))
}

/// Waits until `f` holds or the timeout passes.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}

/// Seconds since the Unix epoch.
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// gzip of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}
