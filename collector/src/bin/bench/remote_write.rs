//! The bench's remote-write receivers (`--remote-write`): a Prometheus (Debian's `prometheus`,
//! `--web.enable-remote-write-receiver`) and a VictoriaMetrics (`scripts/victoriametrics-test.sh
//! install` builds it) per collector build compared, each on a free port in the bench's
//! directory, and what they hold afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};

use super::Proc;

/// One Prometheus and one VictoriaMetrics.
pub(crate) struct Receivers {
    _prom: Proc,
    _vm: Proc,
    pub(crate) prom: String,
    pub(crate) vm: String,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn victoriametrics() -> anyhow::Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/victoriametrics-test.sh");
    let out = Command::new("bash").arg(script).arg("path").output()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !path.is_file() {
        bail!("no VictoriaMetrics: scripts/victoriametrics-test.sh install builds it");
    }
    Ok(path)
}

impl Receivers {
    pub(crate) async fn start(
        client: &storwatch_collector::client::Client,
        dir: &Path,
    ) -> anyhow::Result<Receivers> {
        std::fs::create_dir_all(dir)?;
        let (pp, vp) = (free_port()?, free_port()?);
        std::fs::write(
            dir.join("prometheus.yml"),
            "global:\n  scrape_interval: 1h\n",
        )?;
        let prom = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prom").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{pp}"))
            .arg("--web.enable-remote-write-receiver")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start prometheus (apt-get install prometheus)")?;
        let prom = Proc(prom);
        let vm = Command::new(victoriametrics()?)
            .arg(format!("-storageDataPath={}", dir.join("vm").display()))
            .arg(format!("-httpListenAddr=127.0.0.1:{vp}"))
            .arg("-dedup.minScrapeInterval=1ms")
            .arg("-loggerLevel=ERROR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start victoria-metrics")?;
        let vm = Proc(vm);
        let r = Receivers {
            _prom: prom,
            _vm: vm,
            prom: format!("http://127.0.0.1:{pp}"),
            vm: format!("http://127.0.0.1:{vp}"),
        };
        for (url, what) in [
            (format!("{}/-/ready", r.prom), "prometheus"),
            (format!("{}/health", r.vm), "victoria-metrics"),
        ] {
            let mut up = false;
            for _ in 0..300 {
                if matches!(client.get(&url).send().await, Ok(a) if a.status().is_success()) {
                    up = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if !up {
                bail!("{what} did not start");
            }
        }
        Ok(r)
    }
}

/// A remote-write output named `out` to `base`'s `/api/v1/write`; `extra` adds settings.
pub(crate) fn output(base: &str, extra: &str) -> String {
    format!(
        "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"out\"\n\
         url = \"{base}/api/v1/write\"\nbackoff_min_ms = 50\nbackoff_max_s = 1\n{extra}\n"
    )
}

/// The samples of `metric` a receiver holds in the 3 h before `at_s`.
pub(crate) async fn stored(
    client: &storwatch_collector::client::Client,
    base: &str,
    metric: &str,
    at_s: u64,
) -> anyhow::Result<u64> {
    // VictoriaMetrics makes what it took searchable within a second or so; this makes it so now
    let _ = client
        .get(format!("{base}/internal/force_flush"))
        .send()
        .await;
    let q = format!("sum(count_over_time({metric}[3h]))");
    let text = client
        .get(format!("{base}/api/v1/query"))
        .query(&[("query", q.as_str()), ("time", &at_s.to_string())])
        .send()
        .await?
        .text()
        .await?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| text.clone())?;
    Ok(v.pointer("/data/result/0/value/1")
        .and_then(|v| v.as_str())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0) as u64)
}
