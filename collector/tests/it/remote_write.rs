//! The `prometheus_remote_write` output against the real receivers, on 127.0.0.1: Prometheus
//! (Debian's `prometheus`, `--web.enable-remote-write-receiver`) and a VictoriaMetrics single
//! node built from the Go module proxy (`scripts/victoriametrics-test.sh`, which
//! `scripts/test.sh` runs; `STORWATCH_VICTORIAMETRICS` names another binary).
//!
//! The lines are a real agent report (`fixtures/remote-write-ds01.lp`): `storwatch-agent once`
//! on the simulator's `md-rebuild` disk server (disk, disk_tunables, net, md, md_member, cpu,
//! mem, pressure), with the drive and multipath lines of the agent's fixture run on the
//! disk-server sys tree (`agent/tests/it/drive_agent.rs`'s stand-in smartctl) and one event line as
//! the agent writes it. Each test stamps them with times of its own.
//!
//! Without the VictoriaMetrics binary the tests that need it say so loudly and pass, except
//! under CI (`CI` set), where they fail.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use storwatch_agent::prometheus::Exposition;
use storwatch_test_support::{
    free_port, http, now_ms, scratch, skip_or_fail, urlencode, wait_for, workspace, Collector, Proc,
};

const TOKEN: &str = "remote-write-test-token";

fn fixture() -> String {
    std::fs::read_to_string(workspace().join("collector/tests/fixtures/remote-write-ds01.lp"))
        .unwrap()
}

/// The fixture's lines with time `ts_ns`.
fn report_at(ts_ns: i64) -> String {
    fixture()
        .lines()
        .map(|l| {
            let (rest, _) = l.rsplit_once(' ').unwrap();
            format!("{rest} {ts_ns}\n")
        })
        .collect()
}

/// A real remote-write receiver with its query API.
struct Receiver {
    kind: &'static str,
    port: u16,
    dir: PathBuf,
    proc: Option<Proc>,
}

impl Receiver {
    fn prometheus(dir: &Path) -> Receiver {
        Receiver::prometheus_with(dir, "")
    }

    /// Prometheus with `config` added to its prometheus.yml.
    fn prometheus_with(dir: &Path, config: &str) -> Receiver {
        let dir = dir.join("prometheus");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("prometheus.yml"),
            format!("global:\n  scrape_interval: 1h\n{config}"),
        )
        .unwrap();
        let mut r = Receiver {
            kind: "prometheus",
            port: free_port(),
            dir,
            proc: None,
        };
        r.start();
        r
    }

    /// VictoriaMetrics, or `None` (said loudly) when its binary is absent outside CI.
    fn victoriametrics(dir: &Path) -> Option<Receiver> {
        let bin = victoriametrics_bin();
        if !bin.is_file() {
            let msg = format!(
                "VictoriaMetrics is not built ({}): run scripts/victoriametrics-test.sh install",
                bin.display()
            );
            skip_or_fail("victoriametrics", &msg);
            return None;
        }
        let dir = dir.join("victoriametrics");
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Receiver {
            kind: "victoriametrics",
            port: free_port(),
            dir,
            proc: None,
        };
        r.start();
        Some(r)
    }

    fn start(&mut self) {
        let log = self.dir.join("log");
        let mut cmd = match self.kind {
            "prometheus" => {
                let mut c = Command::new("prometheus");
                c.arg(format!(
                    "--config.file={}",
                    self.dir.join("prometheus.yml").display()
                ))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    self.dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
                .arg("--web.enable-remote-write-receiver")
                .arg("--log.level=warn");
                c
            }
            _ => {
                let mut c = Command::new(victoriametrics_bin());
                c.arg(format!(
                    "-storageDataPath={}",
                    self.dir.join("data").display()
                ))
                .arg(format!("-httpListenAddr=127.0.0.1:{}", self.port))
                // a sample sent twice (a batch replayed after a crash) is one sample
                .arg("-dedup.minScrapeInterval=1ms")
                .arg("-search.disableCache")
                .arg("-loggerLevel=ERROR");
                c
            }
        };
        let proc = Proc::spawn(self.kind, &log, &mut cmd);
        let ready = self.url(if self.kind == "prometheus" {
            "/-/ready"
        } else {
            "/health"
        });
        let up = wait_for(Duration::from_secs(30), || {
            http(&ready, "GET", &[], b"").0 == 200
        });
        assert!(up, "{} did not start: {}", self.kind, proc.log_tail(20));
        self.proc = Some(proc);
    }

    /// kill -9: an outage (started again on the same data with [`Receiver::start`]).
    fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn write_url(&self) -> String {
        self.url("/api/v1/write")
    }

    /// `/api/v1/query` at `time_ms`: (labels with `__name__`, value) of every series.
    fn query(&self, q: &str, time_ms: i64) -> BTreeMap<BTreeMap<String, String>, f64> {
        self.query_json(q, time_ms)
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let value: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
                (labels_of(r), value)
            })
            .collect()
    }

    /// The times (ms) of every sample a range selector `q` holds at `time_ms`, per series.
    fn samples(&self, q: &str, time_ms: i64) -> BTreeMap<BTreeMap<String, String>, Vec<i64>> {
        self.query_json(q, time_ms)
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let times = r["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| (v[0].as_f64().unwrap() * 1000.0).round() as i64)
                    .collect();
                (labels_of(r), times)
            })
            .collect()
    }

    fn query_json(&self, q: &str, time_ms: i64) -> Json {
        if self.kind == "victoriametrics" {
            // what was just written becomes searchable at once
            http(&self.url("/internal/force_flush"), "GET", &[], b"");
        }
        let url = self.url(&format!(
            "/api/v1/query?query={}&time={}.{:03}",
            urlencode(q),
            time_ms / 1000,
            time_ms % 1000
        ));
        let (code, text) = http(&url, "GET", &[], b"");
        assert_eq!(code, 200, "{} {q}: {text}", self.kind);
        let mut v: Json = serde_json::from_str(&text).unwrap();
        v["data"]["result"].take()
    }
}

fn labels_of(r: &Json) -> BTreeMap<String, String> {
    r["metric"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

fn victoriametrics_bin() -> PathBuf {
    std::env::var_os("STORWATCH_VICTORIAMETRICS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/victoriametrics/victoria-metrics"))
}

/// A collector with one remote-write output per receiver (all at once, as a site migrating
/// runs them), quick retries.
fn collector(dir: &Path, receivers: &[&Receiver], extra: &str) -> Collector {
    let port = free_port();
    std::fs::write(dir.join("tokens"), format!("agents:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        dir.join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let mut cfg = format!(
        "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{}\"\ntoken_file = \"{}\"\n\
         [heartbeat]\ninterval_s = 0\n",
        dir.join("queue").display(),
        dir.join("tokens").display()
    );
    for r in receivers {
        cfg.push_str(&format!(
            "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"{}\"\nurl = \"{}\"\n\
             db = \"storwatch\"\nbackoff_min_ms = 50\nbackoff_max_s = 1\n{extra}\n",
            r.kind,
            r.write_url()
        ));
    }
    let config = dir.join("collector.toml");
    std::fs::write(&config, cfg).unwrap();
    Collector::start_with_config(&Collector::bin(), &config, port)
}

fn post(c: &Collector, body: &str) {
    let (code, text) = http(
        &c.url("/write?db=storwatch&precision=ns"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body.as_bytes(),
    );
    assert_eq!(code, 204, "{text}");
}

/// Waits until every output acknowledged the whole queue.
fn drained(c: &Collector) {
    let ok = wait_for(Duration::from_secs(30), || {
        let backlog = c.metrics("output_backlog_bytes");
        !backlog.is_empty() && backlog.iter().all(|(_, v)| *v == 0.0)
    });
    assert!(
        ok,
        "outputs did not drain: {:?}",
        c.metrics("output_backlog_bytes")
    );
}

/// The samples the agent's own `/metrics` shows for `report`: (labels with `__name__`, value),
/// read back from its text format.
fn exposition_samples(report: &str) -> BTreeMap<BTreeMap<String, String>, f64> {
    let mut e = Exposition::default();
    e.update(report);
    let mut out = BTreeMap::new();
    for line in e.render().lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, parse_labels(l.strip_suffix('}').unwrap())),
            None => (series, BTreeMap::new()),
        };
        let mut labels = labels;
        labels.insert("__name__".to_string(), name.to_string());
        out.insert(labels, value.parse().unwrap());
    }
    out
}

/// `a="x",b="y\"z"` of the text format.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() {
            return out;
        }
        assert_eq!(chars.next(), Some('"'));
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(o) => value.push(o),
                    None => {}
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.insert(name.trim_start_matches(',').to_string(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

#[test]
fn agent_lines_read_back_from_prometheus_and_victoriametrics_as_the_agent_names_them() {
    let dir = scratch();
    let prom = Receiver::prometheus(dir.path());
    let vm = Receiver::victoriametrics(dir.path());
    let mut receivers = vec![&prom];
    receivers.extend(vm.as_ref());
    let c = collector(dir.path(), &receivers, "");
    // well in the past: VictoriaMetrics answers for the last 30 s only later
    let t_ms = now_ms() - 120_000;
    let report = report_at(t_ms * 1_000_000);
    post(&c, &report);
    drained(&c);

    let want = exposition_samples(&report);
    assert!(want.len() > 500, "{} samples", want.len());
    for r in &receivers {
        let got = r.query("{__name__=~\"storwatch_.+\"}", t_ms);
        let events: Vec<_> = got
            .keys()
            .filter(|l| l["__name__"] == "storwatch_event_info")
            .cloned()
            .collect();
        // the agent's /metrics has no events; remote write keeps them as an _info series
        assert_eq!(events.len(), 1, "{}: {events:?}", r.kind);
        let ev = &events[0];
        assert_eq!(ev["source"], "md");
        assert_eq!(ev["to_state"], "degraded");
        assert_eq!(ev["text"], "md0 lost a member: 1 of 2 parity left");
        let got: BTreeMap<_, _> = got
            .into_iter()
            .filter(|(l, _)| l["__name__"] != "storwatch_event_info")
            .collect();
        let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
        let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}: missing {missing:?}\nextra {extra:?}",
            r.kind
        );
        for (labels, v) in &want {
            let g = got[labels];
            // VictoriaMetrics keeps 12 significant decimal digits; Prometheus the float itself
            let close = if r.kind == "prometheus" {
                g == *v
            } else {
                (g - v).abs() <= v.abs() * 1e-11
            };
            assert!(close, "{}: {labels:?} is {g}, the agent shows {v}", r.kind);
        }
        // stamped with the line's time, to the millisecond
        let before = r.query("{__name__=~\"storwatch_.+\"}", t_ms - 1);
        assert!(before.is_empty(), "{}: {} before", r.kind, before.len());
    }
    let sent = c.metric("output_samples_sent_total{output=\"prometheus\"}");
    assert_eq!(sent as usize, want.len() + 1, "samples counted");
}

/// Every acknowledged sample is stored, each series holding exactly the samples sent. A batch in
/// flight at a kill -9 is sent again after the restart (at least once, not exactly once): the
/// receivers fold the copy — Prometheus keeps one of identical samples, VictoriaMetrics
/// deduplicates with `-dedup.minScrapeInterval` (docs/collector.md) — so this test proves no
/// loss and no second value, not that nothing was sent twice.
#[test]
fn everything_acknowledged_is_stored_across_kill_9_and_a_receiver_outage() {
    let dir = scratch();
    let mut prom = Receiver::prometheus(dir.path());
    let vm = Receiver::victoriametrics(dir.path());
    let mut receivers = vec![&prom];
    receivers.extend(vm.as_ref());
    let mut c = collector(dir.path(), &receivers, "");
    let reports = 6;
    let t0 = now_ms() - 600_000;
    let at = |k: i64| (t0 + k * 10_000) * 1_000_000;

    post(&c, &report_at(at(0)));
    post(&c, &report_at(at(1)));
    // kill -9 right after the acknowledgement: what was in flight is sent again
    c.crash_and_restart();
    post(&c, &report_at(at(2)));
    drained(&c);
    // Prometheus goes away: its output retries while VictoriaMetrics's goes on
    prom.kill();
    post(&c, &report_at(at(3)));
    post(&c, &report_at(at(4)));
    std::thread::sleep(Duration::from_millis(500));
    c.crash_and_restart();
    assert!(c.metric("output_backlog_bytes{output=\"prometheus\"}") > 0);
    prom.start();
    post(&c, &report_at(at(5)));
    drained(&c);

    let series = exposition_samples(&report_at(at(0))).len() + 1;
    let end = t0 + reports * 10_000;
    let mut all: Vec<&Receiver> = vec![&prom];
    all.extend(vm.as_ref());
    for r in all {
        let got = r.samples("{__name__=~\"storwatch_.+\"}[15m]", end);
        assert_eq!(got.len(), series, "{}: series", r.kind);
        let want: Vec<i64> = (0..reports).map(|k| at(k) / 1_000_000).collect();
        let wrong: Vec<_> = got.iter().filter(|(_, times)| **times != want).collect();
        assert!(
            wrong.is_empty(),
            "{}: series without exactly the {reports} samples sent: {wrong:?}",
            r.kind
        );
    }
}

#[test]
fn out_of_order_samples_are_dead_lettered_counted_and_not_retried() {
    let dir = scratch();
    let prom = Receiver::prometheus(dir.path());
    let c = collector(dir.path(), &[&prom], "");
    let t = now_ms() - 300_000;
    let ns = |ms: i64| ms * 1_000_000;
    post(&c, &format!("ooo,host=a v=2 {}\n", ns(t + 2000)));
    drained(&c);
    // host=a's sample is older than the one Prometheus holds: Prometheus refuses the request
    // whole (400 out of order sample); host=b's sample beside it must still arrive
    post(
        &c,
        &format!(
            "ooo,host=a v=1 {}\nooo,host=b v=5 {}\n",
            ns(t + 1000),
            ns(t + 1000)
        ),
    );
    post(&c, &format!("ooo,host=a v=3 {}\n", ns(t + 3000)));
    drained(&c);

    assert_eq!(
        c.metric("output_out_of_order_total{output=\"prometheus\"}"),
        1
    );
    assert_eq!(
        c.metric("output_dead_lettered_total{output=\"prometheus\"}"),
        1
    );
    let dead = std::fs::read_to_string(dir.path().join("queue/dead-letter/prometheus.lp")).unwrap();
    let lines: Vec<&str> = dead.lines().collect();
    assert_eq!(lines.len(), 2, "{dead}");
    assert!(lines[0].contains("out of order"), "{dead}");
    assert_eq!(lines[1], format!("ooo,host=a v=1 {}", ns(t + 1000)));

    let b = prom.query("storwatch_ooo_v{host=\"b\"}", t + 1000);
    assert_eq!(b.values().copied().collect::<Vec<_>>(), vec![5.0]);
    let a = prom.query("storwatch_ooo_v{host=\"a\"}", t + 3000);
    assert_eq!(a.values().copied().collect::<Vec<_>>(), vec![3.0]);
    // the refused batch is not retried: the request count stops growing
    let sent = c.metric("output_batches_sent_total{output=\"prometheus\"}");
    let retries = c.metric("output_retries_total{output=\"prometheus\"}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        c.metric("output_batches_sent_total{output=\"prometheus\"}"),
        sent
    );
    assert_eq!(retries, 0);
}

#[test]
fn a_sample_older_than_the_out_of_order_window_is_not_retried_for_ever() {
    let dir = scratch();
    // Prometheus 2.x answers 500 "too old sample" to a sample beyond its out-of-order window: a
    // 5xx that retrying can never cure
    let prom = Receiver::prometheus_with(
        dir.path(),
        "storage:\n  tsdb:\n    out_of_order_time_window: 10m\n",
    );
    let c = collector(dir.path(), &[&prom], "");
    let now = now_ms();
    let ns = |ms: i64| ms * 1_000_000;
    post(&c, &format!("late,host=a v=1 {}\n", ns(now - 60_000)));
    drained(&c);
    // within the window: stored although older than the newest sample
    post(&c, &format!("late,host=a v=2 {}\n", ns(now - 120_000)));
    // beyond it: refused
    post(&c, &format!("late,host=a v=3 {}\n", ns(now - 1_800_000)));
    post(&c, &format!("late,host=a v=4 {}\n", ns(now - 30_000)));
    drained(&c);
    assert_eq!(
        c.metric("output_out_of_order_total{output=\"prometheus\"}"),
        1
    );
    assert_eq!(c.metric("output_retries_total{output=\"prometheus\"}"), 0);
    let dead = std::fs::read_to_string(dir.path().join("queue/dead-letter/prometheus.lp")).unwrap();
    assert!(dead.contains("too old sample"), "{dead}");
    assert!(dead.contains("late,host=a v=3 "), "{dead}");
    let got = prom.samples("storwatch_late_v[1h]", now);
    let times: Vec<i64> = got.values().flatten().copied().collect();
    assert_eq!(times, vec![now - 120_000, now - 60_000, now - 30_000]);
}

/// What real receivers here cannot be made to answer: 429 with `Retry-After` and a 503, from a
/// scripted server that also shows the request as sent.
#[test]
fn retry_after_is_honoured_and_the_request_is_remote_write_1_0() {
    use storwatch_collector::forward::remote_write::Samples;
    use storwatch_test_support::http::{answer, no_decision, FakeServer};

    let dir = scratch();
    let mut too_many = answer(429, "slow down");
    too_many.headers.push(("Retry-After", "1".to_string()));
    let fake = FakeServer::start(vec![too_many, answer(503, "busy")], no_decision());
    let port = free_port();
    std::fs::write(dir.path().join("tokens"), format!("agents:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        dir.path().join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(dir.path().join("rw.token"), "receiver-secret\n").unwrap();
    std::fs::set_permissions(
        dir.path().join("rw.token"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let config = dir.path().join("collector.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
             [heartbeat]\ninterval_s = 0\n\
             [[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"fake\"\n\
             url = \"{u}/api/v1/write\"\ndb = \"storwatch\"\ntoken_file = \"{rt}\"\n\
             backoff_min_ms = 50\nbackoff_max_s = 5\n",
            q = dir.path().join("queue").display(),
            t = dir.path().join("tokens").display(),
            u = fake.url_base,
            rt = dir.path().join("rw.token").display(),
        ),
    )
    .unwrap();
    let c = Collector::start_with_config(&Collector::bin(), &config, port);
    let line = format!(
        "disk,host=n1,device=sda util_pct=50,state=\"ok\" {}",
        now_ms() * 1_000_000
    );
    let line = line.as_str();
    post(&c, &format!("{line}\n"));
    drained(&c);

    let seen = fake.requests();
    assert_eq!(seen.len(), 3, "429, 503, then 204");
    assert!(
        seen[1].at - seen[0].at >= Duration::from_secs(1),
        "Retry-After: 1 waited for: {:?}",
        seen[1].at - seen[0].at
    );
    let want = Samples::of_lines(&[line], 0).unwrap().protobuf();
    for r in &seen {
        assert_eq!(r.headers["content-encoding"], "snappy");
        assert_eq!(r.headers["content-type"], "application/x-protobuf");
        assert_eq!(r.headers["x-prometheus-remote-write-version"], "0.1.0");
        assert_eq!(r.headers["authorization"], "Bearer receiver-secret");
        let body = snap::raw::Decoder::new().decompress_vec(&r.body).unwrap();
        assert_eq!(body, want);
    }
    assert_eq!(c.metric("output_retries_total{output=\"fake\"}"), 2);
    assert_eq!(c.metric("output_samples_sent_total{output=\"fake\"}"), 2);
}

/// Issue 29.10: the cost of one refused line in a full batch, counted in requests. The
/// receiver refuses any request holding the line (as Prometheus refuses a request whole for one
/// out-of-order sample, naming no line); the batch is bisected, and a half whose sibling was
/// accepted is split without being sent. docs/collector.md gives these figures. One shard
/// (`max_in_flight = 1`): the batch is one request, as the figures count it.
#[test]
fn one_refused_line_in_a_5000_line_batch_costs_the_requests_the_docs_give() {
    use storwatch_test_support::http::{answer, FakeServer};

    let dir = scratch();
    let fake = FakeServer::start(
        Vec::new(),
        Box::new(|seen| {
            let body = snap::raw::Decoder::new()
                .decompress_vec(&seen.body)
                .unwrap_or_default();
            body.windows(8)
                .any(|w| w == b"refused!")
                .then(|| answer(400, "out of order sample"))
        }),
    );
    let port = free_port();
    std::fs::write(dir.path().join("tokens"), format!("agents:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        dir.path().join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let config = dir.path().join("collector.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
             [heartbeat]\ninterval_s = 0\n\
             [[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"fake\"\n\
             url = \"{u}/api/v1/write\"\ndb = \"storwatch\"\n\
             max_in_flight = 1\n",
            q = dir.path().join("queue").display(),
            t = dir.path().join("tokens").display(),
            u = fake.url_base,
        ),
    )
    .unwrap();
    let c = Collector::start_with_config(&Collector::bin(), &config, port);
    let t = now_ms() * 1_000_000;
    // one batch of 5,000 lines, the refused one at `bad`
    let batch = |bad: usize| -> String {
        (0..5000)
            .map(|i| {
                let host = if i == bad {
                    "refused!".to_string()
                } else {
                    format!("h{i}")
                };
                format!("m,host={host} v={i} {t}\n")
            })
            .collect()
    };
    let mut costs = Vec::new();
    for bad in [4999, 0] {
        let before = fake.requests().len();
        post(&c, &batch(bad));
        drained(&c);
        costs.push(fake.requests().len() - before);
    }
    // the refused line last: 1 + 14 (one per halving: the accepted first halves); first:
    // 1 + 2 per halving but the last (every second half is sent too)
    assert_eq!(costs, vec![15, 25], "requests for one refused line");
    assert_eq!(c.metric("output_dead_lettered_total{output=\"fake\"}"), 2);
    assert_eq!(c.metric("output_lines_sent_total{output=\"fake\"}"), 9998);
}
