//! Many simulated agents in one process (`storwatch-sim agents`), for a site-scale soak on one
//! machine: each host produces a report every report interval, stamped on its own (possibly
//! stepped) wall clock as the agent stamps it, and hands it to **its own** [`HttpSink`] — the
//! agent's delivery code, each with its own spool directory and its own delivery thread.
//!
//! A report has the shape and size of a worker node's (docs/scaling.md: about 20 lines of `disk`,
//! `net`, `cpu`, `mem`, `pressure` and `agent`, ~6 kB), with values drawn from the host, the
//! report's sequence number and its timestamp alone ([`report`]), so a checker can recompute any
//! report it finds in InfluxDB. Only the `agent` line's `spool_bytes` and `dropped_lines` come from
//! the live sink, as in the agent. Reading 600 hosts' simulated `/proc` trees through the real
//! collectors every second would take more of two cores than the delivery path under test.
//!
//! Every report produced is logged, before it is handed to the sink, as one line
//! `host timestamp_ns seq lines` in `<state>/produced.log`; `<state>/status.json` is rewritten
//! every few seconds with the fleet's totals.
//!
//! Two fault hooks: the last `rack_hosts` hosts send to `rack_url` instead of `url` (a rack
//! behind its own switch, which a harness can cut off), and the first `stepped_hosts` hosts read a
//! clock offset from the control file (`clock_offset_s N`, re-read every 250 ms), applied to
//! their wall clock at once, as `chronyc makestep` or a wrong NTP server would.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use storwatch_agent::sink::http::{HttpConfig, HttpSink};
use storwatch_agent::sink::{Sink, SinkError};
use storwatch_wire::lp::LineWriter;

/// Failures of the fleet itself (a sink that cannot open, state files that cannot be written).
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A host's sink could not be opened (URL, TLS files, token, spool).
    #[error("host {host}: {source}")]
    Sink {
        /// The host.
        host: String,
        /// Why.
        source: SinkError,
    },
    /// A state file (log, status) could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The settings do not make sense.
    #[error("{0}")]
    Config(String),
}

/// How the fleet runs.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Number of hosts.
    pub hosts: usize,
    /// Host names are `<prefix>-0001`, `<prefix>-0002`, …
    pub prefix: String,
    /// Write URL of every host but the rack's.
    pub url: String,
    /// Write URL of the last `rack_hosts` hosts.
    pub rack_url: Option<String>,
    /// Hosts of the rack (the last ones).
    pub rack_hosts: usize,
    /// Hosts (the first ones) whose clock follows the control file's offset.
    pub stepped_hosts: usize,
    /// The control file (`clock_offset_s N`).
    pub control: Option<PathBuf>,
    /// Where the spools (`spool/<host>/`), `produced.log` and `status.json` go.
    pub state: PathBuf,
    /// The sinks' settings; `spool_dir` is replaced by each host's own.
    pub http: HttpConfig,
    /// Report interval.
    pub interval: Duration,
    /// Stop producing after this long (`None`: until `stop` is set).
    pub duration: Option<Duration>,
    /// After producing stops, how long to wait for every spool to drain.
    pub drain_timeout: Duration,
    /// Tags on every line besides `host` (`site`, `role`).
    pub tags: Vec<(String, String)>,
}

/// What the fleet did, as written to `status.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// Seconds since the fleet started.
    pub elapsed_s: u64,
    /// Hosts.
    pub hosts: usize,
    /// Still producing reports.
    pub producing: bool,
    /// Reports produced (handed to the sinks).
    pub reports: u64,
    /// Lines in them.
    pub lines: u64,
    /// Lines acknowledged by the server, over every sink.
    pub delivered_lines: u64,
    /// Lines waiting in spools.
    pub pending_lines: u64,
    /// Hosts with lines waiting.
    pub pending_hosts: usize,
    /// Lines lost by the sinks (spool overflow, refused, unspooled), over every sink.
    pub dropped_lines: u64,
    /// Requests that failed and were retried (or kept), over every sink.
    pub failed_requests: u64,
    /// After the end: every spool was drained within the drain timeout.
    pub drained: Option<bool>,
    /// After the end: hosts whose spool was not drained.
    pub undrained_hosts: Vec<String>,
}

/// The fixed shape of simulated host number `index` (0-based): a worker node with 8 to 16 SAS
/// disks and an NVMe scratch device, two NICs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostShape {
    /// Host name.
    pub name: String,
    /// Its number in the fleet.
    pub index: usize,
    /// SAS disks (`sda`…).
    pub disks: usize,
}

impl HostShape {
    /// The shape of host `index` of a fleet named `prefix`.
    pub fn new(prefix: &str, index: usize) -> Self {
        Self {
            name: host_name(prefix, index),
            index,
            disks: 8 + index % 9,
        }
    }

    /// Lines in each of its reports.
    pub fn lines(&self) -> u64 {
        // disks + nvme + 2 NICs + cpu, mem, pressure, agent
        self.disks as u64 + 1 + 2 + 4
    }
}

/// Name of host `index` (0-based) of a fleet named `prefix`: `prefix-0001` for index 0.
pub fn host_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-{:04}", index + 1)
}

/// A value in `[0, 1)` drawn from the host, report, line and field alone (splitmix64).
fn draw(host: usize, seq: u64, line: u64, field: u64) -> f64 {
    let mut z = (host as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(seq.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(line.wrapping_mul(0x94D0_49BB_1331_11EB))
        .wrapping_add(field.wrapping_add(1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// `draw` scaled to `[0, max)` and rounded to two decimals, as the agent rounds its rates.
fn val(host: usize, seq: u64, line: u64, field: u64, max: f64) -> f64 {
    (draw(host, seq, line, field) * max * 100.0).round() / 100.0
}

/// The `disk` fields, in the agent's order, with the range of each value.
const DISK_FIELDS: [(&str, f64); 16] = [
    ("r_per_s", 400.0),
    ("w_per_s", 900.0),
    ("d_per_s", 5.0),
    ("f_per_s", 10.0),
    ("rkb_per_s", 200_000.0),
    ("wkb_per_s", 400_000.0),
    ("rrqm_per_s", 50.0),
    ("wrqm_per_s", 80.0),
    ("r_await_ms", 40.0),
    ("w_await_ms", 60.0),
    ("aqu_sz", 32.0),
    ("util_pct", 100.0),
    ("util_max_pct", 100.0),
    ("util_p95_pct", 100.0),
    ("saturated_s", 10.0),
    ("svctm_ms", 12.0),
];

/// The `net` fields.
const NET_FIELDS: [(&str, f64); 12] = [
    ("rx_bytes_per_s", 1.2e9),
    ("tx_bytes_per_s", 1.2e9),
    ("rx_packets_per_s", 8e5),
    ("tx_packets_per_s", 8e5),
    ("rx_multicast_per_s", 10.0),
    ("rx_errors_per_s", 1.0),
    ("tx_errors_per_s", 1.0),
    ("rx_drops_per_s", 2.0),
    ("tx_drops_per_s", 2.0),
    ("speed_mbps", 0.0),
    ("util_pct", 100.0),
    ("util_max_pct", 100.0),
];

/// The report of `shape` numbered `seq` (1 for the first), stamped `ts_ns`, as line protocol.
/// `spool_bytes` and `dropped_lines` are the sink's counters for the `agent` line; every other
/// value follows from (host, seq) alone.
pub fn report(
    shape: &HostShape,
    tags: &[(String, String)],
    seq: u64,
    ts_ns: i64,
    spool_bytes: u64,
    dropped_lines: u64,
) -> Vec<u8> {
    let h = shape.index;
    let mut w = LineWriter::new(&shape.name, tags);
    let mut n = 0u64;
    let devices = (0..shape.disks)
        .map(|d| (disk_name(d), "disk", "1"))
        .chain(std::iter::once(("nvme0n1".to_owned(), "nvme", "0")));
    for (dev, kind, rot) in devices {
        let mut l = w
            .line("disk", ts_ns)
            .tag("device", &dev)
            .tag("kind", kind)
            .tag("rotational", rot);
        for (f, (key, max)) in DISK_FIELDS.iter().enumerate() {
            l = l.field(key, val(h, seq, n, f as u64, *max));
        }
        l.field("interval_s", 10i64).write();
        n += 1;
    }
    for iface in ["eth0", "eth1"] {
        let mut l = w.line("net", ts_ns).tag("iface", iface);
        for (f, (key, max)) in NET_FIELDS.iter().enumerate() {
            l = if *key == "speed_mbps" {
                l.field(key, 10_000i64)
            } else {
                l.field(key, val(h, seq, n, f as u64, *max))
            };
        }
        l.write();
        n += 1;
    }
    w.line("cpu", ts_ns)
        .field("user_pct", val(h, seq, n, 0, 80.0))
        .field("system_pct", val(h, seq, n, 1, 15.0))
        .field("iowait_pct", val(h, seq, n, 2, 30.0))
        .field("iowait_max_pct", val(h, seq, n, 3, 60.0))
        .field("cpus", 32i64)
        .write();
    n += 1;
    w.line("mem", ts_ns)
        .field("dirty_kb", (draw(h, seq, n, 0) * 4e6) as i64)
        .field("writeback_kb", (draw(h, seq, n, 1) * 1e5) as i64)
        .field(
            "available_kb",
            100_000_000 + (draw(h, seq, n, 2) * 1e7) as i64,
        )
        .write();
    n += 1;
    w.line("pressure", ts_ns)
        .field("io_some_avg10", val(h, seq, n, 0, 40.0))
        .field("io_full_avg10", val(h, seq, n, 1, 20.0))
        .field("io_some_max", val(h, seq, n, 2, 80.0))
        .write();
    n += 1;
    w.line("agent", ts_ns)
        .tag("version", env!("CARGO_PKG_VERSION"))
        .field("seq", seq as i64)
        .field("samples", 10i64)
        .field("lines", (n + 1) as i64)
        .field("devices", (shape.disks + 1) as i64)
        .field("interfaces", 2i64)
        .field("source_errors", 0i64)
        .field("spool_bytes", spool_bytes as i64)
        .field("dropped_lines", dropped_lines as i64)
        .write();
    w.take()
}

/// `sda`, `sdb`, … `sdz`, `sdaa`, …
fn disk_name(i: usize) -> String {
    let mut s = String::new();
    let mut n = i;
    loop {
        s.insert(0, (b'a' + (n % 26) as u8) as char);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    format!("sd{s}")
}

/// Wall clock, nanoseconds since the epoch.
fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Parses the control file: `clock_offset_s N` (other lines and `#` comments ignored).
pub fn parse_control(text: &str) -> Option<i64> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("clock_offset_s"))
        .filter_map(|v| v.trim().parse::<i64>().ok())
        .next_back()
}

struct Host {
    shape: HostShape,
    sink: HttpSink,
    /// The last report's tick on this host's clock, or where its clock went back to.
    last_tick: Option<i64>,
    seq: u64,
    stepped: bool,
}

/// How often the fleet looks at the clock: a report goes out within this of its tick.
const POLL: Duration = Duration::from_millis(50);
/// How often `status.json` is rewritten.
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// Runs the fleet until `cfg.duration` passes, then waits up to `cfg.drain_timeout` for every
/// spool to drain, and returns the final status (also written to `status.json`).
pub fn run(cfg: &FleetConfig) -> Result<Status, FleetError> {
    if cfg.hosts == 0 {
        return Err(FleetError::Config("no hosts".into()));
    }
    if cfg.rack_hosts > cfg.hosts || cfg.stepped_hosts > cfg.hosts {
        return Err(FleetError::Config(
            "rack_hosts and stepped_hosts must not exceed hosts".into(),
        ));
    }
    if cfg.rack_hosts > 0 && cfg.rack_url.is_none() {
        return Err(FleetError::Config("rack_hosts needs rack_url".into()));
    }
    let interval_ns = i64::try_from(cfg.interval.as_nanos())
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| FleetError::Config("the report interval must be positive".into()))?;
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FleetError::Io { path, source }
    };
    std::fs::create_dir_all(&cfg.state).map_err(io_err(&cfg.state))?;
    let log_path = cfg.state.join("produced.log");
    let mut log = BufWriter::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(&log_path))?,
    );
    let mut hosts = Vec::with_capacity(cfg.hosts);
    for index in 0..cfg.hosts {
        let shape = HostShape::new(&cfg.prefix, index);
        let http = HttpConfig {
            spool_dir: cfg.state.join("spool").join(&shape.name),
            ..cfg.http.clone()
        };
        let in_rack = index >= cfg.hosts - cfg.rack_hosts;
        let url = match (&cfg.rack_url, in_rack) {
            (Some(rack), true) => rack,
            _ => &cfg.url,
        };
        let sink = HttpSink::open(url, &http).map_err(|source| FleetError::Sink {
            host: shape.name.clone(),
            source,
        })?;
        hosts.push(Host {
            shape,
            sink,
            last_tick: None,
            seq: 0,
            stepped: index < cfg.stepped_hosts,
        });
    }
    let started = Instant::now();
    let mut status = Status {
        hosts: cfg.hosts,
        producing: true,
        ..Status::default()
    };
    let mut offset_ns = 0i64;
    let mut control_read = Instant::now() - Duration::from_secs(1);
    let mut status_written = Instant::now();
    while cfg.duration.is_none_or(|d| started.elapsed() < d) {
        if let Some(control) = &cfg.control {
            if control_read.elapsed() >= Duration::from_millis(250) {
                control_read = Instant::now();
                let offset = std::fs::read_to_string(control)
                    .ok()
                    .and_then(|t| parse_control(&t))
                    .unwrap_or(0);
                if offset.saturating_mul(1_000_000_000) != offset_ns {
                    tracing::warn!(
                        hosts = cfg.stepped_hosts,
                        offset_s = offset,
                        "stepping the clock of the first hosts"
                    );
                    offset_ns = offset.saturating_mul(1_000_000_000);
                }
            }
        }
        let now = wall_ns();
        for h in &mut hosts {
            let clock = if h.stepped {
                now.saturating_add(offset_ns)
            } else {
                now
            };
            let tick = clock.div_euclid(interval_ns) * interval_ns;
            match h.last_tick {
                // as the agent: the first report is due at the first tick after the start
                None => h.last_tick = Some(tick),
                Some(last) if tick > last => {
                    h.last_tick = Some(tick);
                    h.seq += 1;
                    let s = h.sink.stats();
                    let body = report(
                        &h.shape,
                        &cfg.tags,
                        h.seq,
                        tick,
                        s.spool_bytes,
                        s.dropped_lines,
                    );
                    let lines = h.shape.lines();
                    writeln!(log, "{} {tick} {} {lines}", h.shape.name, h.seq)
                        .map_err(io_err(&log_path))?;
                    status.reports += 1;
                    status.lines += lines;
                    if let Err(e) = h.sink.send(&body) {
                        tracing::error!(host = %h.shape.name, "output: {e}");
                    }
                }
                // the clock went back: as the agent, go on from the new time (and stamp the
                // ticks it reaches again a second time: InfluxDB keeps the later point)
                Some(last) if tick < last => h.last_tick = Some(tick),
                Some(_) => {}
            }
        }
        log.flush().map_err(io_err(&log_path))?;
        if status_written.elapsed() >= STATUS_EVERY {
            status_written = Instant::now();
            refresh(&mut status, &hosts, started);
            write_status(&cfg.state, &status)?;
        }
        std::thread::sleep(POLL);
    }
    log.get_ref().sync_all().map_err(io_err(&log_path))?;
    status.producing = false;
    refresh(&mut status, &hosts, started);
    write_status(&cfg.state, &status)?;
    tracing::warn!(
        reports = status.reports,
        pending_lines = status.pending_lines,
        "stopped producing; waiting for the spools to drain"
    );
    let deadline = Instant::now() + cfg.drain_timeout;
    let mut undrained = Vec::new();
    for h in &hosts {
        let left = deadline.saturating_duration_since(Instant::now());
        if !h.sink.wait_drained(left.max(Duration::from_millis(1))) {
            undrained.push(h.shape.name.clone());
        }
        if status_written.elapsed() >= STATUS_EVERY {
            status_written = Instant::now();
            refresh(&mut status, &hosts, started);
            write_status(&cfg.state, &status)?;
        }
    }
    refresh(&mut status, &hosts, started);
    status.drained = Some(undrained.is_empty());
    status.undrained_hosts = undrained;
    write_status(&cfg.state, &status)?;
    Ok(status)
}

fn refresh(status: &mut Status, hosts: &[Host], started: Instant) {
    status.elapsed_s = started.elapsed().as_secs();
    let mut sum = BTreeMap::<&str, u64>::new();
    let mut pending_hosts = 0;
    for h in hosts {
        let d = h.sink.delivery_stats();
        *sum.entry("delivered").or_default() += d.delivered_lines;
        *sum.entry("pending").or_default() += d.spool.pending_lines;
        *sum.entry("failed").or_default() += d.failed_requests;
        *sum.entry("dropped").or_default() += h.sink.stats().dropped_lines;
        pending_hosts += usize::from(d.spool.pending_lines > 0);
    }
    let get = |k: &str| sum.get(k).copied().unwrap_or(0);
    status.delivered_lines = get("delivered");
    status.pending_lines = get("pending");
    status.failed_requests = get("failed");
    status.dropped_lines = get("dropped");
    status.pending_hosts = pending_hosts;
}

/// Replaces `status.json` atomically (a reader never sees half of it).
fn write_status(state: &Path, status: &Status) -> Result<(), FleetError> {
    let path = state.join("status.json");
    let tmp = state.join("status.json.tmp");
    let text = serde_json::to_string_pretty(status).map_err(|e| FleetError::Io {
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|source| FleetError::Io { path, source })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_reproducible_and_unique_per_report() {
        let shape = HostShape::new("soak", 4);
        assert_eq!(shape.name, "soak-0005");
        let tags = [("site".to_owned(), "T2".to_owned())];
        let a = report(&shape, &tags, 7, 1_700_000_000_000_000_000, 0, 0);
        let b = report(&shape, &tags, 7, 1_700_000_000_000_000_000, 0, 0);
        let c = report(&shape, &tags, 8, 1_700_000_010_000_000_000, 0, 0);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let text = String::from_utf8(a).unwrap();
        assert_eq!(text.lines().count() as u64, shape.lines());
        assert!(text.lines().all(|l| l.ends_with(" 1700000000000000000")));
        assert!(text
            .starts_with("disk,host=soak-0005,site=T2,device=sda,kind=disk,rotational=1 r_per_s="));
        assert!(text.contains("agent,host=soak-0005,site=T2,version="));
        assert!(text.contains(" seq=7i,samples=10i,lines=19i,devices=13i,"));
        // the size of a worker node's report (docs/scaling.md: 8.7 kB for 23 lines)
        assert!((4_000..9_000).contains(&text.len()), "{}", text.len());
        // every line is valid for InfluxDB 1.x
        for l in text.lines() {
            storwatch_wire::lp::parse_line(l, storwatch_wire::lp::Backend::V1).unwrap();
        }
    }

    #[test]
    fn disk_names_and_control_file() {
        assert_eq!(disk_name(0), "sda");
        assert_eq!(disk_name(25), "sdz");
        assert_eq!(disk_name(26), "sdaa");
        assert_eq!(parse_control("# step\nclock_offset_s 120\n"), Some(120));
        assert_eq!(parse_control("clock_offset_s -7"), Some(-7));
        assert_eq!(parse_control("clock_offset_s x"), None);
        assert_eq!(parse_control(""), None);
    }
}
