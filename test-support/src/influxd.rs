//! A throw-away InfluxDB 1.x on 127.0.0.1, through `scripts/influxd-test.sh` (which installs it
//! from the OS packages when missing and never touches the package's own service).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use tempfile::TempDir;

use crate::files::{scratch, workspace};
use crate::http::{http, post_form, urlencode};

/// A throw-away influxd, stopped on drop. The script binds `port` (HTTP) and `port + 1` (RPC):
/// tests that run at the same time use even ports at least two apart.
pub struct Influxd {
    /// Its data, config, pid and log.
    pub dir: PathBuf,
    pub port: u16,
    /// The scratch directory of [`Influxd::start_scratch`], removed after the server stopped.
    _owned: Option<TempDir>,
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
        // stopped with this process even when it cannot stop it (killed by an interrupted run)
        .env("STORWATCH_INFLUXD_OWNER", std::process::id().to_string())
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
    /// Starts influxd with its data in `dir`, HTTP on 127.0.0.1:`port`.
    pub fn start(dir: &Path, port: u16) -> Influxd {
        // a server left over from an aborted run would answer in place of ours
        assert!(
            TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "127.0.0.1:{port} is in use (a stale influxd?)"
        );
        start_influxd(dir, port);
        Influxd {
            dir: dir.to_path_buf(),
            port,
            _owned: None,
        }
    }

    /// Starts influxd with its data in a [`scratch`] directory of its own.
    pub fn start_scratch(port: u16) -> Influxd {
        let owned = scratch();
        let mut influxd = Influxd::start(owned.path(), port);
        influxd._owned = Some(owned);
        influxd
    }

    /// Stops it (an outage); [`Influxd::restart`] brings it back on the same data.
    pub fn stop(&self) {
        let out = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .output()
            .expect("run influxd-test.sh");
        assert!(
            out.status.success(),
            "influxd did not stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts again after [`Influxd::stop`], on the same data and port.
    pub fn restart(&self) {
        start_influxd(&self.dir, self.port);
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The write URL of database `db`.
    pub fn write_url(&self, db: &str) -> String {
        format!("{}/write?db={}", self.url(), urlencode(db))
    }

    /// The JSON answer to `q` (times as RFC 3339 strings); `Null` when the answer is not JSON.
    pub fn query(&self, db: &str, q: &str) -> Json {
        let (_, text) = post_form(&format!("{}/query", self.url()), &[("db", db), ("q", q)]);
        serde_json::from_str(&text).unwrap_or(Json::Null)
    }

    /// Like [`Influxd::query`], with times as nanoseconds since the epoch.
    pub fn query_ns(&self, db: &str, q: &str) -> Json {
        let (_, text) = post_form(
            &format!("{}/query", self.url()),
            &[("db", db), ("q", q), ("epoch", "ns")],
        );
        serde_json::from_str(&text).unwrap_or(Json::Null)
    }

    pub fn create_db(&self, db: &str) {
        let r = self.query(db, &format!("CREATE DATABASE \"{db}\""));
        assert!(r["results"][0]["error"].is_null() && !r.is_null(), "{r}");
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

    /// Writes line protocol straight into `db` (nanosecond timestamps), in requests of about
    /// 4 MB; every one must be accepted.
    pub fn write(&self, db: &str, lines: &str) {
        let url = format!("{}&precision=ns", self.write_url(db));
        let send = |chunk: &mut String| {
            let (code, text) = http(&url, "POST", &[], chunk.as_bytes());
            assert_eq!(code, 204, "write: {text}");
            chunk.clear();
        };
        let mut chunk = String::new();
        for line in lines.lines() {
            chunk.push_str(line);
            chunk.push('\n');
            if chunk.len() > 4_000_000 {
                send(&mut chunk);
            }
        }
        if !chunk.is_empty() {
            send(&mut chunk);
        }
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        // not `stop`: a failed stop must not turn a failing test's unwinding into an abort
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}
