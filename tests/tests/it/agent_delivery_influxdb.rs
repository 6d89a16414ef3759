//! The agent's HTTP sink and its spool (the library, `storwatch_agent::sink`) against a real
//! InfluxDB 1.x on 127.0.0.1: lines land and a resend overwrites, an outage is spooled and
//! everything arrives once, an agent restart keeps what was undelivered, malformed lines are
//! dropped and counted. The answers InfluxDB 1.x cannot give are in the agent's own
//! `agent/tests/it/delivery.rs`, against in-test servers.
//!
//! Each test has its own influxd and port (18300 to 18309, even numbers: the script also binds
//! PORT+1).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use storwatch_agent::sink::http::{HttpConfig, HttpSink};
use storwatch_agent::sink::{self, OutputSpec, Sink};
use storwatch_test_support::reports::{expected, report, times, T0};
use storwatch_test_support::{scratch, wait_until, Influxd};

const DB: &str = "storwatch_test";

/// A throw-away influxd with database [`DB`].
fn influxd(port: u16) -> Influxd {
    let influx = Influxd::start_scratch(port);
    influx.create_db(DB);
    influx
}

/// Every point of measurement `m` as (host, time ns) -> v.
fn points(influx: &Influxd) -> BTreeMap<(String, i64), i64> {
    let v = influx.query_ns(DB, "SELECT host, v FROM m");
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

/// The agent's settings as a site would write them, with short timeouts and backoff to keep
/// the tests fast.
fn fast_config(spool_dir: &Path) -> HttpConfig {
    let mut cfg: HttpConfig =
        toml::from_str("timeout_s = 2.0\nbackoff_min_s = 0.05\nbackoff_max_s = 0.2\n").unwrap();
    cfg.spool_dir = spool_dir.to_owned();
    cfg
}

#[test]
fn lines_land_in_influxdb_and_a_resend_overwrites() {
    let influx = influxd(18300);
    let spool = scratch();
    let spec: OutputSpec = influx.write_url(DB).parse().unwrap();
    let mut s = sink::open(&spec, &fast_config(spool.path()), &Default::default()).unwrap();
    let ts = times(5);
    for &t in &ts {
        s.send(&report(t, 3)).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(s.stats().spool_bytes, 0);
    assert_eq!(points(&influx), expected(&ts, 3));
    // the same report again (as after a crash before the cursor was saved): no duplicates
    s.send(&report(ts[2], 3)).unwrap();
    s.flush().unwrap();
    assert_eq!(points(&influx), expected(&ts, 3));
    assert_eq!(s.stats().dropped_lines, 0);
}

#[test]
fn influxdb_outage_spools_and_everything_arrives_once() {
    let influx = influxd(18302);
    let spool = scratch();
    let mut s = HttpSink::open(&influx.write_url(DB), &fast_config(spool.path())).unwrap();
    let ts = times(40);
    let (before, rest) = ts.split_at(10);
    let (during, after) = rest.split_at(20);
    for &t in before {
        s.send(&report(t, 4)).unwrap();
    }
    assert!(s.wait_drained(Duration::from_secs(5)));

    influx.stop();
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

    influx.restart();
    for &t in after {
        s.send(&report(t, 4)).unwrap();
    }
    assert!(
        s.wait_drained(Duration::from_secs(10)),
        "{:?}",
        s.delivery_stats()
    );
    assert_eq!(points(&influx), expected(&ts, 4));
    let d = s.delivery_stats();
    assert_eq!(d.delivered_lines, 40 * 4);
    assert_eq!(s.stats().dropped_lines, 0);
    // the backlog went out in fewer requests than reports
    assert!(d.delivered_requests < 40, "{d:?}");
}

#[test]
fn agent_restart_keeps_undelivered_data() {
    let influx = influxd(18304);
    let spool = scratch();
    influx.stop();
    let ts = times(12);
    {
        let mut s = HttpSink::open(&influx.write_url(DB), &fast_config(spool.path())).unwrap();
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
        assert_eq!(d.spool.pending_lines, 24, "{d:?} {:?}", points(&influx));
    }
    influx.restart();
    let s = HttpSink::open(&influx.write_url(DB), &fast_config(spool.path())).unwrap();
    assert!(
        s.wait_drained(Duration::from_secs(10)),
        "{:?}",
        s.delivery_stats()
    );
    assert_eq!(points(&influx), expected(&ts, 2));
    drop(s);
    // and a third start has nothing left to send
    let s = HttpSink::open(&influx.write_url(DB), &fast_config(spool.path())).unwrap();
    assert_eq!(s.delivery_stats().spool.pending_lines, 0);
}

#[test]
fn malformed_lines_are_dropped_and_counted_without_wedging() {
    let influx = influxd(18306);
    let spool = scratch();
    let mut s = HttpSink::open(&influx.write_url(DB), &fast_config(spool.path())).unwrap();
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
    assert_eq!(points(&influx), expected(&ts, 2));
    let d = s.delivery_stats();
    assert_eq!(d.rejected_lines, 2, "{d:?}");
    assert_eq!(s.stats().dropped_lines, 2);
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
/// `cargo test --release -p storwatch-tests --test it -- --ignored --nocapture agent_delivery_influxdb::measure`
#[test]
#[ignore = "measurement; run by hand with --release"]
fn measure_send_and_backlog_drain() {
    // on disk, as at a site: the figures include the spool's fsyncs and influxd's
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(dir.path(), 18308);
    influx.create_db(DB);
    let spool = tempfile::tempdir().unwrap();
    let reports = 360; // one hour at one report per 10 s
    let cfg = fast_config(spool.path());
    let mut s = HttpSink::open(&influx.write_url(DB), &cfg).unwrap();
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

    influx.stop();
    let mut s = HttpSink::open(&influx.write_url(DB), &cfg).unwrap();
    for i in 0..reports {
        s.send(&big_report(T0 + (50 + i) * 10_000_000_000)).unwrap();
        // an agent hands over one report per 10 s: never more than the queue's bound at once
        assert!(s.wait_spooled(Duration::from_secs(30)));
    }
    let spooled = s.delivery_stats().spool;
    influx.restart();
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
    assert_eq!(
        influx.scalar(DB, "SELECT count(util_pct) FROM disk"),
        ((50 + reports) * 200) as f64
    );
}
