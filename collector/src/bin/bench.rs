//! Benchmark of the collector (not a test): durable acknowledgements per second from concurrent
//! senders with the collector's peak RSS, and the drain rate of a backlog into a local influxd
//! compared with influxd's own ingest rate for the same lines (two writers). The lines are cut in
//! `--rounds` parts, each written by influxd's own ingest and then drained by the collector (its
//! time counted from its start), so that a change of the machine's load during the run falls on
//! both sides of the ratio alike.
//!
//! ```text
//! cargo build --release -p storwatch-collector
//! target/release/storwatch-collector-bench [--senders 8] [--seconds 10] [--lines-per-request 5000]
//!                                          [--drain-lines 1000000] [--gzip] [--skip-drain]
//!                                          [--port-base 18500] [--max-in-flight N] [--rounds 4]
//!                                          [--compare COLLECTOR] [--ack-rounds 1]
//!                                          [--agent-lines REPORT]
//! ```
//!
//! It starts `storwatch-collector` from the same directory as itself and influxd through
//! `scripts/influxd-test.sh` (ports `--port-base` to `--port-base` + 3), with everything in a
//! temporary directory (under `BENCH_DIR` when set). It exits non-zero when the collector does
//! not start, a write is refused, or influxd does not hold every drained line afterwards.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

#[path = "bench/drain.rs"]
mod drain;
#[path = "bench/lines.rs"]
mod lines;
#[path = "bench/remote_write.rs"]
mod remote_write;
#[path = "bench/sched.rs"]
mod sched;

struct Args {
    senders: usize,
    seconds: u64,
    lines_per_request: usize,
    drain_lines: usize,
    gzip: bool,
    skip_drain: bool,
    port_base: u16,
    /// The draining output's `max_in_flight` (default: the collector's).
    max_in_flight: Option<usize>,
    /// Parts the drain lines are cut in, each ingested directly and then drained.
    rounds: usize,
    /// Acknowledgement runs, each build in turn (with `--compare`), so that a burst of other
    /// work on the machine falls on both builds alike.
    ack_rounds: usize,
    /// Drain into a Prometheus and a VictoriaMetrics too.
    remote_write: bool,
    /// Another collector build, drained the same way part by part (the build before).
    compare: Option<PathBuf>,
    /// Run each draining collector under callgrind and count its instructions.
    callgrind: bool,
    /// What is sent: the bench's `disk` lines, or an agent's report (`--agent-lines`).
    lines: lines::Lines,
}

const USAGE: &str = "\
usage: storwatch-collector-bench [--senders N] [--seconds S] [--lines-per-request N]
                                 [--drain-lines N] [--gzip] [--skip-drain] [--port-base PORT]
                                 [--max-in-flight N] [--rounds N] [--remote-write]
                                 [--compare COLLECTOR] [--callgrind] [--ack-rounds N]
                                 [--agent-lines REPORT]

Durable acknowledgements per second from N concurrent senders (the collector's output
unreachable), then the drain of a backlog of --drain-lines lines into a local influxd against
influxd's own ingest of the same lines, in --rounds parts (default 4) each ingested directly
and then drained (--max-in-flight: the draining output's max_in_flight, default the
collector's). Ports PORT..PORT+3 on 127.0.0.1 (default 18500).
--remote-write: each part is drained into a Prometheus and a VictoriaMetrics as well (remote
write), and the rates and CPU compared with the InfluxDB output's. --compare COLLECTOR: that
build takes the same acknowledgement run after this one's and drains every part the same way
too (its own receivers), each figure side by side. --callgrind: each draining collector runs
under `valgrind --tool=callgrind` and its instructions are counted, a figure the machine's
load does not move (the rates and CPU seconds are then valgrind's). --ack-rounds N: N
acknowledgement runs of each build, taking turns (default 1). --agent-lines REPORT: the lines
sent are the agent's report REPORT (line protocol, each line with a host tag and a time: e.g.
`storwatch-agent once` on the harness's host) written again for as many hosts as make ~14,400
lines a report, instead of the bench's own `disk` line of 600 hosts × 24 devices.
";

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        senders: 8,
        seconds: 10,
        lines_per_request: 5000,
        drain_lines: 1_000_000,
        gzip: false,
        skip_drain: false,
        port_base: 18500,
        max_in_flight: None,
        rounds: 4,
        ack_rounds: 1,
        remote_write: false,
        compare: None,
        callgrind: false,
        lines: lines::Lines::Disk,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = || -> anyhow::Result<usize> {
            it.next()
                .with_context(|| format!("{flag} needs a value"))?
                .parse()
                .with_context(|| format!("{flag} needs a number"))
        };
        match flag.as_str() {
            "--senders" => a.senders = num()?,
            "--seconds" => a.seconds = num()? as u64,
            "--lines-per-request" => a.lines_per_request = num()?,
            "--drain-lines" => a.drain_lines = num()?,
            "--gzip" => a.gzip = true,
            "--skip-drain" => a.skip_drain = true,
            "--max-in-flight" => a.max_in_flight = Some(num()?),
            "--rounds" => a.rounds = num()?,
            "--ack-rounds" => a.ack_rounds = num()?.max(1),
            "--remote-write" => a.remote_write = true,
            "--callgrind" => a.callgrind = true,
            "--agent-lines" => {
                a.lines = lines::Lines::agent(Path::new(
                    &it.next().context("--agent-lines needs a file")?,
                ))?
            }
            "--compare" => {
                a.compare = Some(PathBuf::from(
                    it.next().context("--compare needs a collector binary")?,
                ))
            }
            "--port-base" => {
                a.port_base = u16::try_from(num()?)
                    .ok()
                    .filter(|p| *p <= u16::MAX - 3)
                    .context("--port-base needs a port up to 65532")?
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other}\n{USAGE}"),
        }
    }
    Ok(a)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/influxd-test.sh")
}

fn influxd(cmd: &str, dir: &Path, port: u16) -> anyhow::Result<()> {
    let st = Command::new("bash")
        .arg(script())
        .arg(cmd)
        .arg(dir)
        .arg(port.to_string())
        .env("STORWATCH_INFLUXD_OWNER", std::process::id().to_string())
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        bail!("influxd-test.sh {cmd} failed");
    }
    Ok(())
}

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The collector built beside the bench.
fn own_collector() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_exe()?
        .parent()
        .context("no parent")?
        .join("storwatch-collector"))
}

/// An InfluxDB output named `out` to `url`; `extra` adds settings (TOML lines).
fn influx_output(url: &str, extra: &str) -> String {
    format!(
        "[[outputs]]\nname = \"out\"\nurl = \"{url}\"\ndb = \"bench\"\ngzip = false\n\
         backoff_min_ms = 50\nbackoff_max_s = 1\n{extra}\n"
    )
}

/// The collector `bin` on `port` with the output section `output` (one output, named `out`);
/// under callgrind writing to `callgrind_out` when given.
fn collector(
    dir: &Path,
    port: u16,
    bin: &Path,
    output: &str,
    callgrind_out: Option<&Path>,
) -> anyhow::Result<Proc> {
    let cfg = dir.join(format!("collector-{port}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{}\"\ntoken_file = \"{}\"\n\
             [limits]\nrate_limit_lines_per_s = 0\n[heartbeat]\ninterval_s = 0\n{output}",
            dir.join("queue").display(),
            dir.join("tokens").display()
        ),
    )?;
    // 0600: the collector refuses a token file other users can read.
    let mut tokens = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join("tokens"))?;
    tokens.write_all(b"bench:bench-token-0123456789\n")?;
    let mut cmd = match callgrind_out {
        Some(out) => {
            let mut c = Command::new("valgrind");
            c.arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg("--quiet")
                .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let child = cmd
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "error")
        .spawn()
        .context("start storwatch-collector (build it with --release first)")?;
    Ok(Proc(child))
}

/// User and system CPU seconds of process `pid` so far (`/proc/PID/stat`, 100 ticks a second).
fn cpu_s(pid: u32) -> f64 {
    let (user, system) = cpu_split_s(pid);
    user + system
}

/// A process's CPU seconds in user space and in the kernel (`/proc/PID/stat`, 10 ms ticks).
fn cpu_split_s(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the first, utime the 12th,
    // stime the 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let mut f = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse::<u64>().unwrap_or(0) as f64 / 100.0);
    (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0))
}

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Waits until the collector answers `/ping`; fails at once, with its exit status, when it
/// exits instead (a refused configuration, a port in use).
async fn wait_ping(
    client: &storwatch_collector::client::Client,
    base: &str,
    proc: &mut Proc,
) -> anyhow::Result<()> {
    for _ in 0..200 {
        if let Ok(r) = client.get(format!("{base}/ping")).send().await {
            if r.status().as_u16() == 204 {
                return Ok(());
            }
        }
        if let Some(status) = proc.0.try_wait()? {
            bail!(
                "storwatch-collector exited before answering /ping ({status}); its error is above"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{base} did not answer /ping")
}

/// influxd started through `scripts/influxd-test.sh`, stopped on drop (also when the bench fails
/// half-way).
struct Influxd {
    dir: PathBuf,
    port: u16,
}

impl Influxd {
    fn start(dir: &Path, port: u16) -> anyhow::Result<Influxd> {
        influxd("start", dir, port)?;
        Ok(Influxd {
            dir: dir.to_path_buf(),
            port,
        })
    }
}

impl Drop for Influxd {
    fn drop(&mut self) {
        let _ = influxd("stop", &self.dir, self.port);
    }
}

async fn metric(client: &storwatch_collector::client::Client, base: &str, name: &str) -> u64 {
    let Ok(r) = client.get(format!("{base}/metrics")).send().await else {
        return u64::MAX;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("storwatch_collector_{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// Series of the bench's lines (600 hosts × 24 devices), and the time between their reports.
/// The acknowledgement phase against the collector `bin` (`which` names a compared build in the
/// output).
async fn ack_bench(a: &Args, dir: &Path, bin: &Path, which: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Output to a closed port: nothing drains, so the backlog grows for the whole run.
    let port = a.port_base;
    let out = influx_output("http://127.0.0.1:9", "");
    let mut proc = collector(dir, port, bin, &out, None)?;
    let cpu0 = cpu_s(proc.0.id());
    let base = &format!("http://127.0.0.1:{port}");
    let client = storwatch_collector::client::Client::new()?;
    wait_ping(&client, base, &mut proc).await?;
    let ts0 = now_ns() - 3_600_000_000_000;
    let bodies = Arc::new(a.lines.bodies(16, a.lines_per_request, ts0, a.gzip));
    let raw_bytes: usize = a.lines.raw_len(a.lines_per_request);
    let lines = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let url = format!("{base}/write?db=bench");
    let t0 = Instant::now();
    let s0 = sched::sample(proc.0.id());
    for s in 0..a.senders {
        let (client, bodies, lines, stop, url) = (
            client.clone(),
            bodies.clone(),
            lines.clone(),
            stop.clone(),
            url.clone(),
        );
        let per = a.lines_per_request as u64;
        let gz = a.gzip;
        tasks.push(tokio::spawn(async move {
            let mut i = s;
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let body = bodies[i % bodies.len()].clone();
                i += 1;
                let mut req = client
                    .post(&url)
                    .header("Authorization", "Token bench-token-0123456789")
                    .body(body);
                if gz {
                    req = req.header("Content-Encoding", "gzip");
                }
                let t = Instant::now();
                match req.send().await {
                    Ok(r) if r.status().as_u16() == 204 => {
                        lines.fetch_add(per, Ordering::Relaxed);
                        lat.push(t.elapsed());
                    }
                    Ok(r) => eprintln!("unexpected answer {}", r.status()),
                    Err(e) => eprintln!("send failed: {e}"),
                }
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let s1 = sched::sample(proc.0.id());
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let secs = t0.elapsed().as_secs_f64();
    let n = lines.load(Ordering::Relaxed);
    lat.sort();
    let p = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let fsyncs = metric(&client, base, "queue_fsyncs_total").await;
    let requests = metric(&client, base, "queue_records_total").await;
    let end = metric(&client, base, "queue_end_bytes").await;
    let hwm = vm_hwm_kib(proc.0.id());
    let cpu = cpu_s(proc.0.id()) - cpu0;
    println!(
        "acks{which}: {} senders, {} lines/request{}, {:.1} s: {} lines acknowledged durably = {:.0} lines/s \
         ({:.1} MB/s of line protocol); {} requests in {} fsyncs ({:.1} requests per fsync); \
         latency p50 {:?} p99 {:?}; queue {} MiB; collector CPU {:.2} s ({:.2} s per million lines); \
         collector peak RSS {} KiB ({:.1} MiB); raw body {} bytes",
        a.senders,
        a.lines_per_request,
        if a.gzip { " gzip" } else { "" },
        secs,
        n,
        n as f64 / secs,
        end as f64 / secs / 1e6,
        requests,
        fsyncs,
        requests as f64 / fsyncs.max(1) as f64,
        p(0.5),
        p(0.99),
        end >> 20,
        cpu,
        cpu / (n.max(1) as f64 / 1e6),
        hwm,
        hwm as f64 / 1024.0,
        raw_bytes,
    );
    println!("acks{which}: {}", sched::describe(&s0, &s1));
    drop(proc);
    Ok(())
}

/// Fails when one of the bench's four ports is taken (another bench, a test's influxd): its
/// figures would be somebody else's.
fn ports_free(base: u16) -> anyhow::Result<()> {
    for port in base..=base + 3 {
        std::net::TcpListener::bind(("127.0.0.1", port))
            .with_context(|| format!("port {port} is taken: choose another --port-base"))?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    ports_free(a.port_base)?;
    let dir = tempfile_dir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(async {
        for _ in 0..a.ack_rounds {
            // each run's queue (about 1.5 GB a run) is removed before the next
            ack_bench(&a, &dir.join("acks"), &own_collector()?, "").await?;
            let _ = std::fs::remove_dir_all(dir.join("acks"));
            if let Some(other) = &a.compare {
                ack_bench(&a, &dir.join("acks-compare"), other, " (compared)").await?;
                let _ = std::fs::remove_dir_all(dir.join("acks-compare"));
            }
        }
        if !a.skip_drain {
            drain::drain_bench(&a, &dir).await?;
        }
        anyhow::Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("storwatch-collector-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("acks"))?;
    Ok(dir)
}
