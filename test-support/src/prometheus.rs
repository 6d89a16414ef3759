//! A throw-away Prometheus (Debian's `prometheus`) on 127.0.0.1, for the tests that have one
//! scrape the agent or receive the collector's remote write, and ask it what it stored.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::{free_port, http, urlencode, wait_for, Proc};

/// A Prometheus started in `dir` on a free port, stopped on drop.
pub struct Prometheus {
    pub port: u16,
    _proc: Proc,
}

impl Prometheus {
    /// Writes `config` (prometheus.yml) into `dir`, starts Prometheus on it with `extra`
    /// arguments (`--web.enable-remote-write-receiver`) and waits up to 30 s for it to be ready.
    pub fn start(dir: &Path, config: &str, extra: &[&str]) -> Prometheus {
        std::fs::create_dir_all(dir).unwrap();
        let conf = dir.join("prometheus.yml");
        std::fs::write(&conf, config).unwrap();
        let port = free_port();
        let proc = Proc::spawn(
            "prometheus",
            &dir.join("log"),
            Command::new("prometheus")
                .arg(format!("--config.file={}", conf.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn")
                .args(extra),
        );
        let ready = format!("http://127.0.0.1:{port}/-/ready");
        assert!(
            wait_for(Duration::from_secs(30), || http(&ready, "GET", &[], b"").0
                == 200),
            "Prometheus was not ready within 30 s (log: {})",
            dir.join("log").display()
        );
        Prometheus { port, _proc: proc }
    }

    /// The values of an instant query's answer, one per series.
    pub fn query(&self, q: &str) -> Vec<f64> {
        let (code, text) = http(
            &format!(
                "http://127.0.0.1:{}/api/v1/query?query={}",
                self.port,
                urlencode(q)
            ),
            "GET",
            &[],
            b"",
        );
        assert_eq!(code, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
            .collect()
    }
}
