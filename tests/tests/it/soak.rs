//! The site-scale soak: a fleet of simulated agents (`storwatch-sim agents`: one HTTP sink and
//! spool per host, the agent's own delivery code) → a TCP balancer → two collectors with TLS on
//! → a real InfluxDB, with faults on a schedule:
//!
//! * kill -9 of collector A, started again on its queue;
//! * InfluxDB stopped (3 min in the full soak);
//! * collector B's queue filesystem filled (a tmpfs in a private mount namespace around B, filled
//!   by a file, then freed);
//! * a quarter of the fleet (the "rack", on its own balancer port) cut off: its port closed and its
//!   connections reset (5 min);
//! * a twentieth of the fleet's clocks stepped forward by more than a report interval, then back.
//!
//! Then: every spool drained, every collector queue drained, and every report the fleet logged is
//! in InfluxDB exactly once — the same timestamps per host, the same number of lines, and the
//! field values of a sample of reports as produced — with the collectors' answer latency (timed at
//! the balancer), peak RSS and CPU seconds reported.
//!
//! `short_soak` (60 hosts, 3 minutes, faults scaled to a tenth) runs in the default suite;
//! `site_scale_soak` (600 hosts, 30 minutes by default) is `#[ignore]`d and run by
//! `scripts/soak.sh`, which sets `SOAK_HOSTS`, `SOAK_MINUTES`, `SOAK_REPORT` (a file for the
//! figures) and builds the release binaries. Both use the binaries of the target directory the
//! test runs from (`cargo build -p storwatch-sim -p storwatch-collector` first when running this
//! file alone).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use storwatch_agent::sink::spool::Spool;
use storwatch_sim::agents::{report, HostShape};
use storwatch_test_support::*;

const TOKEN: &str = "soak-agents-token-0123456789";
const DB: &str = "soak";
const PREFIX: &str = "soak";

/// One soak's size and schedule.
#[derive(Debug, Clone)]
struct Plan {
    name: &'static str,
    hosts: usize,
    /// Seconds the fleet produces reports.
    run_s: f64,
    /// Fault times and durations are the full soak's times this.
    scale: f64,
    /// The sinks' longest retry delay.
    backoff_max_s: f64,
    /// The collectors' longest retry delay towards InfluxDB.
    output_backoff_max_s: u64,
    /// How long the fleet may take to drain its spools once it stops producing.
    drain_timeout_s: f64,
    /// Size of collector B's queue filesystem.
    queue_fs_mb: u64,
    /// First of six ports: influxd (and +1), collectors A and B, the balancer's two fronts.
    port_base: u16,
    /// Where the figures go (markdown), besides stderr.
    report: Option<PathBuf>,
    /// Reports to compare field by field.
    samples: usize,
}

impl Plan {
    fn short() -> Plan {
        Plan {
            name: "short soak",
            hosts: 60,
            run_s: 180.0,
            scale: 0.1,
            backoff_max_s: 5.0,
            output_backoff_max_s: 2,
            drain_timeout_s: 120.0,
            queue_fs_mb: 64,
            port_base: 18920,
            report: std::env::var_os("SOAK_SHORT_REPORT").map(PathBuf::from),
            samples: 30,
        }
    }

    fn from_env() -> Plan {
        let num = |k: &str, d: f64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(d)
        };
        let minutes = num("SOAK_MINUTES", 30.0);
        Plan {
            name: "site-scale soak",
            hosts: num("SOAK_HOSTS", 600.0) as usize,
            run_s: minutes * 60.0,
            scale: minutes / 30.0,
            // the agent's default
            backoff_max_s: 60.0,
            output_backoff_max_s: 10,
            drain_timeout_s: 900.0,
            queue_fs_mb: 512,
            port_base: num("SOAK_PORT_BASE", 18940.0) as u16,
            report: std::env::var_os("SOAK_REPORT").map(PathBuf::from),
            samples: 200,
        }
    }

    /// The schedule, in seconds since the fleet started: the full soak's times (for 30 minutes)
    /// times `scale`.
    fn faults(&self) -> Vec<(f64, Fault)> {
        let s = self.scale;
        let step = (120.0 * s).round() as i64;
        vec![
            (120.0 * s, Fault::KillA),
            (150.0 * s, Fault::RestartA),
            (300.0 * s, Fault::StopInflux),
            (480.0 * s, Fault::StartInflux),
            (600.0 * s, Fault::FillB),
            (780.0 * s, Fault::FreeB),
            (900.0 * s, Fault::CutRack),
            (1200.0 * s, Fault::RestoreRack),
            (1320.0 * s, Fault::StepClocks(step)),
            (1500.0 * s, Fault::StepClocks(0)),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    KillA,
    RestartA,
    StopInflux,
    StartInflux,
    FillB,
    FreeB,
    CutRack,
    RestoreRack,
    StepClocks(i64),
}

// ------------------------------------------------------------------------------- balancer

/// A TCP balancer (HAProxy's `mode tcp`) in front of the collectors: each connection goes to
/// the next collector that accepts it, TLS passes through. It times each request as the time from
/// the last byte of a client burst of at least 1 KiB (a write request; handshake messages are
/// smaller) to the first byte back: the collector's answer latency.
struct Balancer {
    backends: Vec<u16>,
    next: AtomicUsize,
    fronts: Vec<Arc<Front>>,
    started: Instant,
    /// Per backend: (seconds since start, answer latency in µs).
    latency: Mutex<Vec<Vec<(u32, u32)>>>,
    stop: AtomicBool,
}

struct Front {
    port: u16,
    listener: Mutex<Option<TcpListener>>,
    cut: AtomicBool,
    conns: Mutex<HashMap<u64, TcpStream>>,
    ids: AtomicU64,
}

impl Front {
    fn bind(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpListener::bind(("127.0.0.1", self.port)) {
                Ok(l) => {
                    l.set_nonblocking(true).unwrap();
                    *self.listener.lock().unwrap() = Some(l);
                    return;
                }
                Err(e) => {
                    assert!(Instant::now() < deadline, "bind {}: {e}", self.port);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// Closes the port (connects are refused) and resets every connection through it.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        drop(self.listener.lock().unwrap().take());
        for (_, c) in self.conns.lock().unwrap().drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.bind();
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Balancer {
    fn start(front_ports: &[u16], backends: Vec<u16>) -> Arc<Balancer> {
        let fronts: Vec<Arc<Front>> = front_ports
            .iter()
            .map(|&port| {
                Arc::new(Front {
                    port,
                    listener: Mutex::new(None),
                    cut: AtomicBool::new(false),
                    conns: Mutex::new(HashMap::new()),
                    ids: AtomicU64::new(0),
                })
            })
            .collect();
        let b = Arc::new(Balancer {
            latency: Mutex::new(vec![Vec::new(); backends.len()]),
            backends,
            next: AtomicUsize::new(0),
            fronts,
            started: Instant::now(),
            stop: AtomicBool::new(false),
        });
        for f in &b.fronts {
            f.bind();
            let (b, f) = (Arc::clone(&b), Arc::clone(f));
            std::thread::spawn(move || b.accept_loop(&f));
        }
        b
    }

    fn accept_loop(self: &Arc<Self>, front: &Arc<Front>) {
        while !self.stop.load(Ordering::Relaxed) {
            let accepted = match front.listener.lock().unwrap().as_ref() {
                Some(l) => l.accept().ok(),
                None => None,
            };
            let Some((client, _)) = accepted else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let (b, f) = (Arc::clone(self), Arc::clone(front));
            let spawned = std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || b.proxy(&f, client));
            if let Err(e) = spawned {
                eprintln!("balancer: cannot start a thread: {e}");
            }
        }
    }

    fn proxy(&self, front: &Front, client: TcpStream) {
        client.set_nonblocking(false).unwrap();
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.backends.len();
        let server = (0..n).find_map(|i| {
            let b = (first + i) % n;
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.backends[b]));
            TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .ok()
                .map(|s| (b, s))
        });
        // no collector accepts: the client's connection is closed, as HAProxy does
        let Some((backend, server)) = server else {
            return;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let id = front.ids.fetch_add(1, Ordering::Relaxed);
        if front.cut.load(Ordering::SeqCst) {
            return;
        }
        front
            .conns
            .lock()
            .unwrap()
            .insert(id, client.try_clone().unwrap());
        // (last byte from the client, bytes since the last answer)
        let pending = Arc::new(Mutex::new((Instant::now(), 0usize)));
        let up = {
            let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let pending = Arc::clone(&pending);
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut buf = vec![0u8; 16 << 10];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        {
                            let mut p = pending.lock().unwrap();
                            p.0 = Instant::now();
                            p.1 += n;
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                })
        };
        let (mut from, mut to) = (server.try_clone().unwrap(), client.try_clone().unwrap());
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            {
                let mut p = pending.lock().unwrap();
                if p.1 >= 1024 {
                    let us = p.0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    let at = self.started.elapsed().as_secs() as u32;
                    self.latency.lock().unwrap()[backend].push((at, us));
                }
                p.1 = 0;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        // the collector closed or died: so does the client's connection
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        if let Ok(up) = up {
            let _ = up.join();
        }
        front.conns.lock().unwrap().remove(&id);
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ----------------------------------------------------------------------------- collectors

/// Writes a collector's config: TLS with the test PKI, its queue in `queue`, v1 output to `db`.
fn collector_config(dir: &Path, pki: &Path, port: u16, queue: &Path, influx: &str, plan: &Plan) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("collector.toml"),
        format!(
            "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
             [tls]\ncert_file = \"{p}/server.pem\"\nkey_file = \"{p}/server.key\"\n\
             [queue]\nsegment_bytes = 4194304\n\
             [heartbeat]\ninterval_s = 10\n\
             [[outputs]]\nname = \"influx\"\nurl = \"{influx}\"\ndb = \"{DB}\"\n\
             backoff_min_ms = 100\nbackoff_max_s = {b}\n",
            q = queue.display(),
            t = pki.join("tokens").display(),
            p = pki.display(),
            b = plan.output_backoff_max_s,
        ),
    )
    .unwrap();
}

/// GET `path` of the collector on `port` over TLS (curl, trusting the test CA): (status, body).
fn collector_get(pki: &Path, port: u16, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
            "--cacert",
        ])
        .arg(pki.join("ca.pem"))
        .args(["-H", &format!("Authorization: Token {TOKEN}")])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// A metric of the collector on `port` (its name without `storwatch_collector_`, with labels).
fn collector_metric(pki: &Path, port: u16, name: &str) -> Option<f64> {
    let (code, text) = collector_get(pki, port, "/metrics");
    if code != 200 {
        return None;
    }
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("storwatch_collector_{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

fn wait_up(pki: &Path, port: u16, child: &mut Child, what: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!("{what} exited: {status}");
            return false;
        }
        if collector_get(pki, port, "/ping").0 == 204 {
            return true;
        }
        assert!(Instant::now() < deadline, "{what} did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A collector process, SIGKILLed on drop (a failing soak leaves nothing running).
struct Killed(Child);

impl Killed {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        kill(&mut self.0);
    }
}

fn spawn_collector(dir: &Path, pki: &Path, port: u16) -> Killed {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("collector.log"))
        .unwrap();
    let child = Command::new(binary("storwatch-collector", "storwatch-collector"))
        .arg("--config")
        .arg(dir.join("collector.toml"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start collector A");
    let mut child = Killed(child);
    assert!(wait_up(pki, port, &mut child.0, "collector A"));
    child
}

/// Collector B with its queue on a tmpfs of `mb` MiB in a private mount namespace (`unshare`,
/// as root or through a user namespace): while `ctl/fill` exists a file is grown to fill it, ten
/// times a second, so that what the collector frees (it gives up delivered segments when full) is
/// taken again, as by a runaway log (`ctl/filled` says when it first was full); `ctl/free`
/// removes the file (`ctl/freed`). None when namespaces are not available.
fn spawn_collector_on_small_fs(
    dir: &Path,
    pki: &Path,
    port: u16,
    ctl: &Path,
    mb: u64,
) -> Option<Killed> {
    let queue = dir.join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    // $$ stays the collector's pid after the exec: the filler loop ends with it
    let script = r#"mount -t tmpfs -o size="$5"m storwatch-soak "$1" || exit 97
(while kill -0 $$ 2>/dev/null; do
  if [ -e "$2/fill" ]; then
    dd if=/dev/zero bs=64k 2>/dev/null >>"$1/filler"; touch "$2/filled"
  fi
  if [ -e "$2/free" ]; then rm -f "$2/fill" "$2/free" "$1/filler"; touch "$2/freed"; fi
  sleep 0.1
done) &
exec "$3" --config "$4""#;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("collector.log"))
        .unwrap();
    let child = in_private_mounts(script)
        .arg(&queue)
        .arg(ctl)
        .arg(binary("storwatch-collector", "storwatch-collector"))
        .arg(dir.join("collector.toml"))
        .arg(mb.to_string())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    wait_up(pki, port, &mut child.0, "collector B").then_some(child)
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

// ------------------------------------------------------------------------------ resources

/// Peak RSS and CPU time of the processes of each role, sampled once a second from /proc.
#[derive(Default)]
struct Usage {
    /// role -> pid -> (VmHWM kB, utime + stime in clock ticks)
    seen: BTreeMap<String, BTreeMap<u32, (u64, u64)>>,
}

fn proc_usage(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command (which may hold spaces) end at the last ')'
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((hwm, ticks))
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn start_sampler(
    pids: Arc<Mutex<Vec<(String, u32)>>>,
    usage: Arc<Mutex<Usage>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let list = pids.lock().unwrap().clone();
            for (role, pid) in list {
                if let Some(u) = proc_usage(pid) {
                    usage
                        .lock()
                        .unwrap()
                        .seen
                        .entry(role)
                        .or_default()
                        .insert(pid, u);
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

fn set_pid(pids: &Mutex<Vec<(String, u32)>>, role: &str, pid: u32) {
    pids.lock().unwrap().push((role.to_owned(), pid));
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

// -------------------------------------------------------------------------------- checker

/// One report the fleet logged: (seq, lines).
type Produced = BTreeMap<String, BTreeMap<i64, Vec<(u64, u64)>>>;

fn read_produced(path: &Path) -> Produced {
    let mut out = Produced::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "produced.log: {line:?}");
        out.entry(f[0].to_owned())
            .or_default()
            .entry(f[1].parse().unwrap())
            .or_default()
            .push((f[2].parse().unwrap(), f[3].parse().unwrap()));
    }
    out
}

fn series(r: &Json) -> Vec<Json> {
    r["results"][0]["series"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A mandatory field of each measurement the fleet writes, to count its points by.
const COUNTED: [(&str, &str); 6] = [
    ("disk", "util_pct"),
    ("net", "rx_bytes_per_s"),
    ("cpu", "user_pct"),
    ("mem", "dirty_kb"),
    ("pressure", "io_some_avg10"),
    ("agent", "seq"),
];

/// Compares InfluxDB with the fleet's log; returns the problems found and (reports, lines) found.
fn check_influx(
    influx: &Influxd,
    produced: &Produced,
    window: (i64, i64),
    samples: usize,
) -> (Vec<String>, u64, u64, usize) {
    let mut problems = Vec::new();
    let (lo, hi) = window;
    let time = format!("time >= {lo} AND time <= {hi}");
    // every logged timestamp of every host, its seq, and nothing else
    let mut found_reports = 0u64;
    for (host, reports) in produced {
        let r = influx.query_ns(
            DB,
            &format!("SELECT \"seq\" FROM \"agent\" WHERE \"host\" = '{host}' AND {time}"),
        );
        let rows = series(&r)
            .first()
            .and_then(|s| s["values"].as_array().cloned())
            .unwrap_or_default();
        let got: BTreeMap<i64, i64> = rows
            .iter()
            .map(|v| (v[0].as_i64().unwrap(), v[1].as_i64().unwrap_or(-1)))
            .collect();
        assert!(
            got.len() < 10_000,
            "{host}: the answer may be cut at InfluxDB's row limit"
        );
        found_reports += got.len() as u64;
        let want: BTreeSet<i64> = reports.keys().copied().collect();
        let have: BTreeSet<i64> = got.keys().copied().collect();
        let missing: Vec<_> = want.difference(&have).collect();
        let extra: Vec<_> = have.difference(&want).collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{host}: {} reports missing: {missing:?}",
                missing.len()
            ));
        }
        if !extra.is_empty() {
            problems.push(format!(
                "{host}: {} reports never produced: {extra:?}",
                extra.len()
            ));
        }
        // a timestamp produced twice (the clock stepped back) holds the later report: the sim
        // numbers a host's reports in the order it makes them and hands them to its sink in
        // that order, and InfluxDB keeps the last point written
        for (ts, seq) in &got {
            if let Some(last) = reports
                .get(ts)
                .and_then(|made| made.iter().map(|m| m.0).max())
            {
                if last as i64 != *seq {
                    let made = &reports[ts];
                    problems.push(format!(
                        "{host} @{ts}: seq {seq}, the last produced {last} (all: {made:?})"
                    ));
                }
            }
        }
    }
    // the lines of every report: points per host over the measurements
    let mut lines_by_host: BTreeMap<String, u64> = BTreeMap::new();
    for (m, field) in COUNTED {
        let r = influx.query_ns(
            DB,
            &format!("SELECT count(\"{field}\") FROM \"{m}\" WHERE {time} GROUP BY \"host\""),
        );
        for s in series(&r) {
            let host = s["tags"]["host"].as_str().unwrap_or("").to_owned();
            let n = s["values"][0][1].as_u64().unwrap_or(0);
            *lines_by_host.entry(host).or_default() += n;
        }
    }
    let mut found_lines = 0;
    for (host, reports) in produced {
        // a timestamp produced twice (a clock stepped back) is one set of points
        let want: u64 = reports.values().map(|v| v[0].1).sum();
        let have = lines_by_host.remove(host).unwrap_or(0);
        found_lines += have;
        if want != have {
            problems.push(format!("{host}: {have} lines in InfluxDB, {want} produced"));
        }
    }
    lines_by_host.retain(|h, _| h.starts_with(PREFIX));
    if !lines_by_host.is_empty() {
        problems.push(format!("hosts never produced: {lines_by_host:?}"));
    }
    // field by field, a sample of the reports produced once, spread over hosts and time
    let once: Vec<(&String, i64, u64)> = produced
        .iter()
        .flat_map(|(h, r)| {
            r.iter()
                .filter(|(_, v)| v.len() == 1)
                .map(move |(ts, v)| (h, *ts, v[0].0))
        })
        .collect();
    let step = (once.len() / samples.max(1)).max(1);
    let mut compared = 0;
    for (host, ts, seq) in once.iter().step_by(step).take(samples) {
        problems.extend(compare_report(influx, host, *ts, *seq));
        compared += 1;
    }
    (problems, found_reports, found_lines, compared)
}

/// The report `seq` of `host` as the fleet made it, against what InfluxDB holds at `ts`.
fn compare_report(influx: &Influxd, host: &str, ts: i64, seq: u64) -> Vec<String> {
    let index: usize = host
        .rsplit('-')
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap()
        - 1;
    let shape = HostShape::new(PREFIX, index);
    let tags = [("site".to_owned(), "soak".to_owned())];
    let text = String::from_utf8(report(&shape, &tags, seq, ts, 0, 0)).unwrap();
    let r = influx.query_ns(
        DB,
        &format!(
            "SELECT * FROM \"disk\",\"net\",\"cpu\",\"mem\",\"pressure\",\"agent\" \
             WHERE \"host\" = '{host}' AND time = {ts}"
        ),
    );
    // measurement -> rows as column -> value
    let mut rows: BTreeMap<String, Vec<BTreeMap<String, Json>>> = BTreeMap::new();
    for s in series(&r) {
        let cols: Vec<String> = s["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect();
        for v in s["values"].as_array().unwrap() {
            let row = cols
                .iter()
                .cloned()
                .zip(v.as_array().unwrap().iter().cloned())
                .collect();
            rows.entry(s["name"].as_str().unwrap().to_owned())
                .or_default()
                .push(row);
        }
    }
    let mut problems = Vec::new();
    for line in text.lines() {
        let key = line.split(' ').next().unwrap();
        let mut parts = key.split(',');
        let m = parts.next().unwrap();
        let tags: Vec<(&str, &str)> = parts.filter_map(|kv| kv.split_once('=')).collect();
        let candidates = rows.get(m).cloned().unwrap_or_default();
        let Some(row) = candidates.iter().find(|row| {
            tags.iter()
                .all(|(k, v)| row.get(*k).and_then(|x| x.as_str()) == Some(*v))
        }) else {
            problems.push(format!("{host} @{ts}: no point for {key}"));
            continue;
        };
        for (k, v) in storwatch_test_support::lp::fields(line) {
            if k == "spool_bytes" || k == "dropped_lines" {
                continue;
            }
            let want: f64 = v.trim_end_matches('i').parse().unwrap();
            let have = row.get(&k).and_then(Json::as_f64);
            if have != Some(want) {
                problems.push(format!("{host} @{ts} {key} {k}: {have:?}, produced {want}"));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------- soak

fn soak(plan: &Plan) {
    let t_start = Instant::now();
    // SOAK_KEEP=1 keeps the directory (logs, spools, queues) for a look afterwards
    let scratch = scratch();
    let (dir, _scratch) = if std::env::var_os("SOAK_KEEP").is_some() {
        let kept = scratch.keep();
        eprintln!("{}: everything in {}", plan.name, kept.display());
        (kept, None)
    } else {
        (scratch.path().to_path_buf(), Some(scratch))
    };
    let dir = dir.as_path();
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    pki::make_site(&pki);
    std::fs::write(pki.join("tokens"), format!("agents:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        pki.join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(pki.join("agent.token"), TOKEN).unwrap();

    let p = plan.port_base;
    let (port_a, port_b, port_main, port_rack) = (p + 2, p + 3, p + 4, p + 5);
    let influx = Influxd::start(&dir.join("influx"), p);
    influx.create_db(DB);
    let influx_pid = || {
        std::fs::read_to_string(dir.join("influx/influxd.pid"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
    };

    let (dir_a, dir_b, ctl) = (dir.join("a"), dir.join("b"), dir.join("ctl"));
    std::fs::create_dir_all(&ctl).unwrap();
    collector_config(
        &dir_a,
        &pki,
        port_a,
        &dir_a.join("queue"),
        &influx.url(),
        plan,
    );
    collector_config(
        &dir_b,
        &pki,
        port_b,
        &dir_b.join("queue"),
        &influx.url(),
        plan,
    );
    let mut a = spawn_collector(&dir_a, &pki, port_a);
    let (b, fill_possible) =
        match spawn_collector_on_small_fs(&dir_b, &pki, port_b, &ctl, plan.queue_fs_mb) {
            Some(b) => (b, true),
            None => {
                eprintln!(
                    "NOTE: no private mount namespace here: collector B's queue is not filled"
                );
                (spawn_collector(&dir_b, &pki, port_b), false)
            }
        };
    let balancer = Balancer::start(&[port_main, port_rack], vec![port_a, port_b]);

    let pids = Arc::new(Mutex::new(Vec::new()));
    let usage = Arc::new(Mutex::new(Usage::default()));
    let sampling = Arc::new(AtomicBool::new(false));
    set_pid(&pids, "collector A", a.id());
    set_pid(&pids, "collector B", b.id());
    if let Some(pid) = influx_pid() {
        set_pid(&pids, "influxd", pid);
    }

    let state = dir.join("fleet");
    let control = ctl.join("clock");
    std::fs::write(&control, "clock_offset_s 0\n").unwrap();
    let url = |port: u16| format!("https://127.0.0.1:{port}/write?db={DB}");
    let rack_hosts = plan.hosts / 4;
    let stepped_hosts = (plan.hosts / 20).max(1);
    let window_lo = now_ns() - 3_600_000_000_000;
    let fleet_log = dir.join("fleet.log");
    let mut fleet = Fleet::spawn(
        &fleet_log,
        Command::new(binary("storwatch-sim", "storwatch-sim"))
            .arg("agents")
            .args(["--hosts", &plan.hosts.to_string(), "--prefix", PREFIX])
            .args(["--url", &url(port_main), "--rack-url", &url(port_rack)])
            .args(["--rack-hosts", &rack_hosts.to_string()])
            .args(["--stepped-hosts", &stepped_hosts.to_string()])
            .arg("--control")
            .arg(&control)
            .arg("--state")
            .arg(&state)
            .arg("--token-file")
            .arg(pki.join("agent.token"))
            .arg("--ca-file")
            .arg(pki.join("ca.pem"))
            .args(["--backoff-max-s", &plan.backoff_max_s.to_string()])
            .args(["--duration", &plan.run_s.to_string()])
            .args(["--drain-timeout", &plan.drain_timeout_s.to_string()])
            .args(["--tag", "site=soak"]),
    );
    let fleet_started = Instant::now();
    set_pid(&pids, "fleet", fleet.child.id());
    let sampler = start_sampler(Arc::clone(&pids), Arc::clone(&usage), Arc::clone(&sampling));

    // the faults, on schedule
    let mut timeline = Vec::new();
    let mut refusals_b = 0.0;
    for (at, fault) in plan.faults() {
        let wait = Duration::from_secs_f64(at).saturating_sub(fleet_started.elapsed());
        std::thread::sleep(wait);
        if let Some(code) = fleet.exited() {
            panic!("the fleet exited early ({code}): {}", fleet.log_tail(20));
        }
        match fault {
            Fault::KillA => kill(&mut a.0),
            Fault::RestartA => {
                a = spawn_collector(&dir_a, &pki, port_a);
                set_pid(&pids, "collector A", a.id());
            }
            Fault::StopInflux => influx.stop(),
            Fault::StartInflux => {
                influx.restart();
                if let Some(pid) = influx_pid() {
                    set_pid(&pids, "influxd", pid);
                }
            }
            Fault::FillB if fill_possible => {
                std::fs::write(ctl.join("fill"), b"").unwrap();
                wait_until("B's queue filesystem full", Duration::from_secs(60), || {
                    ctl.join("filled").exists()
                });
            }
            Fault::FreeB if fill_possible => {
                // Filling the filesystem can take most of the window on a loaded machine: the
                // disk stays full until B has refused a write, for at most 30 s more (if it never
                // does, the soak reports it below).
                let until = Instant::now() + Duration::from_secs(30);
                loop {
                    refusals_b =
                        collector_metric(&pki, port_b, "queue_full_refusals_total").unwrap_or(0.0);
                    if refusals_b > 0.0 || Instant::now() > until {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
                std::fs::write(ctl.join("free"), b"").unwrap();
                wait_until(
                    "B's queue filesystem freed",
                    Duration::from_secs(60),
                    || ctl.join("freed").exists(),
                );
            }
            Fault::FillB | Fault::FreeB => {}
            Fault::CutRack => balancer.fronts[1].cut(),
            Fault::RestoreRack => balancer.fronts[1].restore(),
            Fault::StepClocks(s) => {
                storwatch_test_support::files::write_replacing(
                    &control,
                    &format!("clock_offset_s {s}\n"),
                );
            }
        }
        let line = format!("{:7.1} s  {fault:?}", fleet_started.elapsed().as_secs_f64());
        eprintln!("{}: {line}", plan.name);
        timeline.push(line);
    }

    // the fleet stops producing, drains its spools and exits
    let deadline = Instant::now()
        + Duration::from_secs_f64(
            (plan.run_s - fleet_started.elapsed().as_secs_f64()).max(0.0)
                + plan.drain_timeout_s
                + 60.0,
        );
    let exit = loop {
        if let Some(code) = fleet.exited() {
            break code;
        }
        assert!(
            Instant::now() < deadline,
            "the fleet did not finish: {}",
            fleet.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let drained_after = fleet_started.elapsed().as_secs_f64() - plan.run_s;
    let status: Json =
        serde_json::from_str(&std::fs::read_to_string(state.join("status.json")).unwrap()).unwrap();
    let mut problems = Vec::new();
    if exit != 0 || status["drained"] != Json::Bool(true) {
        problems.push(format!(
            "the fleet's spools did not drain (exit {exit:?}): {status}\n{}",
            fleet.log_tail(20)
        ));
    }
    if status["dropped_lines"].as_u64() != Some(0) {
        problems.push(format!("the sinks dropped lines: {status}"));
    }
    // every spool, reopened as the agent opens it, is empty
    let mut spooled = 0;
    for e in std::fs::read_dir(state.join("spool")).unwrap() {
        let e = e.unwrap();
        let s = Spool::open(&e.path(), 256 << 20).unwrap().stats();
        spooled += s.pending_lines;
    }
    if spooled > 0 {
        problems.push(format!("{spooled} lines still in the spools"));
    }
    // every collector queue drained into InfluxDB
    for (name, port) in [("A", port_a), ("B", port_b)] {
        let drained = wait_for(Duration::from_secs(300), || {
            collector_metric(&pki, port, "output_backlog_bytes{output=\"influx\"}") == Some(0.0)
        });
        if !drained {
            problems.push(format!("collector {name}'s queue did not drain"));
        }
        for m in [
            "lines_rejected_total",
            "output_dead_lettered_total{output=\"influx\"}",
        ] {
            let v = collector_metric(&pki, port, m).unwrap_or(-1.0);
            if v != 0.0 {
                problems.push(format!("collector {name}: {m} = {v}"));
            }
        }
    }
    if fill_possible && refusals_b == 0.0 {
        problems.push("collector B never refused a write while its queue disk was full".into());
    }
    let queue_drained_after = fleet_started.elapsed().as_secs_f64() - plan.run_s;
    sampling.store(true, Ordering::Relaxed);
    sampler.join().unwrap();

    let produced = read_produced(&state.join("produced.log"));
    let reports: usize = produced.values().map(BTreeMap::len).sum();
    let twice: usize = produced
        .values()
        .flat_map(|r| r.values())
        .filter(|v| v.len() > 1)
        .count();
    let lines: u64 = produced
        .values()
        .flat_map(|r| r.values().map(|v| v[0].1))
        .sum();
    if produced.len() != plan.hosts {
        problems.push(format!(
            "{} hosts produced, of {}",
            produced.len(),
            plan.hosts
        ));
    }
    let window = (window_lo, now_ns() + 3_600_000_000_000);
    let (found, found_reports, found_lines, compared) =
        check_influx(&influx, &produced, window, plan.samples);
    let found_count = found.len();
    for f in found.iter().take(40) {
        problems.push(f.clone());
    }
    if found_count > 40 {
        problems.push(format!("… and {} more", found_count - 40));
    }

    // figures
    let ticks = clock_ticks();
    let usage = usage.lock().unwrap();
    let latency = balancer.latency.lock().unwrap();
    let mut fig = String::new();
    let w = &mut fig;
    let _ = writeln!(
        w,
        "{}: {} hosts, {:.0} s of reports, faults at 1/{:.0} of the full soak's times",
        plan.name,
        plan.hosts,
        plan.run_s,
        1.0 / plan.scale
    );
    let _ = writeln!(
        w,
        "produced {reports} reports ({twice} timestamps twice, after a clock stepped back), \
         {lines} lines; found {found_reports} reports and {found_lines} lines in InfluxDB; \
         {compared} reports compared field by field; {} problems",
        problems.len()
    );
    let _ = writeln!(
        w,
        "sinks: {} failed requests retried; collector B refused {refusals_b} writes while its \
         queue disk was full; spools drained {:.0} s after the last report, collector queues \
         {:.0} s after",
        status["failed_requests"], drained_after, queue_drained_after
    );
    let _ = writeln!(
        w,
        "\n| process | answers timed | p50 ms | p99 ms | max ms | peak RSS MiB | CPU s |"
    );
    let _ = writeln!(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for role in ["collector A", "collector B", "fleet", "influxd"] {
        let procs = usage.seen.get(role);
        let rss = procs
            .map(|p| p.values().map(|u| u.0).max().unwrap_or(0))
            .unwrap_or(0);
        let cpu: u64 = procs.map(|p| p.values().map(|u| u.1).sum()).unwrap_or(0);
        let lat = match role {
            "collector A" => Some(&latency[0]),
            "collector B" => Some(&latency[1]),
            _ => None,
        };
        let (n, p50, p99, max) = match lat {
            Some(l) => {
                let mut v: Vec<u32> = l.iter().map(|x| x.1).collect();
                v.sort_unstable();
                (
                    v.len().to_string(),
                    format!("{:.1}", f64::from(percentile(&v, 0.5)) / 1e3),
                    format!("{:.1}", f64::from(percentile(&v, 0.99)) / 1e3),
                    format!("{:.1}", f64::from(v.last().copied().unwrap_or(0)) / 1e3),
                )
            }
            None => ("".into(), "".into(), "".into(), "".into()),
        };
        let _ = writeln!(
            w,
            "| {role} | {n} | {p50} | {p99} | {max} | {:.0} | {:.1} |",
            rss as f64 / 1024.0,
            cpu as f64 / ticks
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(
        w,
        "\nwhole run {:.0} s; load average at the end {}",
        t_start.elapsed().as_secs_f64(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(w, "\nfaults (seconds after the fleet started):");
    for t in &timeline {
        let _ = writeln!(w, "    {t}");
    }
    eprintln!("{fig}");
    if let Some(path) = &plan.report {
        std::fs::write(path, &fig).unwrap();
    }
    drop(latency);
    drop(usage);
    drop(a);
    drop(b);
    assert!(
        problems.is_empty(),
        "{}:\n{}",
        plan.name,
        problems.join("\n")
    );
}

/// The fleet process, its output in a log file, killed on drop.
struct Fleet {
    child: Child,
    log: PathBuf,
}

impl Fleet {
    fn spawn(log: &Path, cmd: &mut Command) -> Fleet {
        let out = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start storwatch-sim agents");
        Fleet {
            child,
            log: log.to_path_buf(),
        }
    }

    /// None while it runs, else its exit code (-1 for a signal).
    fn exited(&mut self) -> Option<i32> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(st.code().unwrap_or(-1)),
            _ => None,
        }
    }

    fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

/// 60 hosts for 3 minutes through two TLS collectors into InfluxDB, with every fault of the
/// site-scale soak at a tenth of its time: every report arrives exactly once.
#[test]
fn short_soak() {
    soak(&Plan::short());
}

/// The site-scale soak (`scripts/soak.sh`): 600 hosts for 30 minutes by default.
#[test]
#[ignore]
fn site_scale_soak() {
    soak(&Plan::from_env());
}
