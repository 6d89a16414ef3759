//! A big `/metrics` page scraped by a real Prometheus (Debian's `prometheus`): the agent on a
//! proc tree with 1,200 disks (`/proc/diskstats` only), and a long tag value on every line: a page of some 11 MB. With the
//! listener's 32 KiB send buffer the kernel waited for the client's delayed ACK after every
//! ~64 KB, and such a page could not be sent within the 5 s a client gets: Prometheus saw the
//! scrape cut (`up` 0). Every scrape must now bring the whole page; the scrape durations are
//! printed (docs/prometheus.md quotes them), not held to a time.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use storwatch_test_support::{binary, free_port, http, scratch, wait_for, Proc, Prometheus};

const DISKS: usize = 1200;
/// A long `[tags]` value on every sample makes the page large with few samples, so that the
/// time Prometheus spends on the samples stays small beside the transfer.
const SITE: &str = "a-site-whose-tag-values-are-long";

#[test]
fn prometheus_gets_a_page_of_11_mb_whole_at_every_scrape() {
    let dir = scratch();
    let proc_root = dir.path().join("proc");
    let sys_root = dir.path().join("sys");
    std::fs::create_dir_all(&proc_root).unwrap();
    std::fs::create_dir_all(sys_root.join("block")).unwrap();
    // the 14 fields of kernels before 4.18, the same counters for every disk
    let diskstats: String = (0..DISKS)
        .map(|i| {
            format!(
                "   8 {} disk{i} 1000 10 20000 300 2000 20 40000 600 0 900 1200\n",
                i * 16
            )
        })
        .collect();
    std::fs::write(proc_root.join("diskstats"), diskstats).unwrap();
    let agent_port = free_port();
    std::fs::write(
        dir.path().join("agent.toml"),
        format!("[prometheus]\nlisten = \"127.0.0.1:{agent_port}\"\n[jobs]\nenabled = false\n"),
    )
    .unwrap();
    let _agent = Proc::spawn(
        "agent",
        &dir.path().join("agent.log"),
        Command::new(binary("storwatch-agent", "storwatch-agent"))
            .arg("run")
            .arg("--config")
            .arg(dir.path().join("agent.toml"))
            .arg("--proc-root")
            .arg(&proc_root)
            .arg("--sys-root")
            .arg(&sys_root)
            .args([
                "--sample-interval",
                "1s",
                "--report-interval",
                "2s",
                "--host",
                "big-page",
                "--tag",
                &format!("site={}", SITE.repeat(6)),
                "--output",
                "file:/dev/null",
            ]),
    );
    let page_url = format!("http://127.0.0.1:{agent_port}/metrics");
    // the page once the first report is in: its samples are what each scrape must bring
    let mut samples = 0;
    let mut bytes = 0;
    assert!(wait_for(Duration::from_secs(60), || {
        let (code, page) = http(&page_url, "GET", &[], b"");
        bytes = page.len();
        samples = page
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .count();
        code == 200 && samples > DISKS * 10
    }));

    let prom = Prometheus::start(
        &dir.path().join("prometheus"),
        &format!(
            "global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\n\
             scrape_configs:\n  - job_name: storwatch\n    honor_labels: true\n    \
             static_configs:\n      - targets: ['127.0.0.1:{agent_port}']\n"
        ),
        &[],
    );
    // four scrapes, each given the 5 s the agent gives a client
    let scrapes = "count_over_time(up{job=\"storwatch\"}[1h])";
    assert!(
        wait_for(Duration::from_secs(90), || prom
            .query(scrapes)
            .first()
            .is_some_and(|n| *n >= 4.0)),
        "Prometheus did not scrape four times"
    );
    let up = prom.query("min_over_time(up{job=\"storwatch\"}[1h])");
    let got = prom.query("min_over_time(scrape_samples_scraped{job=\"storwatch\"}[1h])");
    let durations =
        prom.query("quantile_over_time(0.5, scrape_duration_seconds{job=\"storwatch\"}[1h])");
    let max = prom.query("max_over_time(scrape_duration_seconds{job=\"storwatch\"}[1h])");
    eprintln!(
        "page {:.1} MB, {samples} samples; scrape_duration_seconds median {:?}, max {:?}",
        bytes as f64 / 1e6,
        durations,
        max
    );
    assert_eq!(up, vec![1.0], "a scrape was cut");
    // every scrape brought the whole page (its samples are the same at every report)
    assert_eq!(got, vec![samples as f64]);
}
