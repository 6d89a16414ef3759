//! The bench's drain phase: a backlog drained by the collector into influxd against influxd's
//! own ingest of the same lines, and with `--remote-write` into a Prometheus and a
//! VictoriaMetrics, with `--compare` for another build side by side.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::{
    collector, cpu_split_s, influx_output, lines::REPORT_NS, metric, now_ns, own_collector,
    remote_write, vm_hwm_kib, wait_ping, Args, Influxd,
};

/// influxd's own ingest rate of `bodies` written straight to its `/write` into `db` by two
/// writers, in lines per second.
async fn direct_ingest(
    client: &storwatch_collector::client::Client,
    influx: &str,
    db: &str,
    bodies: &Arc<Vec<bytes::Bytes>>,
) -> anyhow::Result<f64> {
    let t = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut ws = Vec::new();
    for _ in 0..2 {
        let (client, bodies, next) = (client.clone(), bodies.clone(), next.clone());
        let url = format!("{influx}/write?db={db}&precision=ns");
        ws.push(tokio::spawn(async move {
            let (mut failed, mut lines) = (0, 0);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(b) = bodies.get(i) else { break };
                let r = client.post(&url).body(b.clone()).send().await;
                if matches!(&r, Ok(r) if r.status().as_u16() == 204) {
                    lines += b.iter().filter(|c| **c == b'\n').count();
                } else {
                    eprintln!("direct write failed: {r:?}");
                    failed += 1;
                }
            }
            (failed, lines)
        }));
    }
    let mut total = 0;
    for w in ws {
        let (failed, lines) = w.await?;
        if failed > 0 {
            bail!("influxd refused direct writes: its figure would be wrong");
        }
        total += lines;
    }
    Ok(total as f64 / t.elapsed().as_secs_f64())
}

/// Fills the collector's queue in `qdir` with `bodies` while its output is unreachable.
async fn fill(
    client: &storwatch_collector::client::Client,
    a: &Args,
    qdir: &Path,
    bodies: &[bytes::Bytes],
) -> anyhow::Result<()> {
    let out = influx_output("http://127.0.0.1:9", "");
    let mut proc = collector(qdir, a.port_base + 1, &own_collector()?, &out, None)?;
    let base = &format!("http://127.0.0.1:{}", a.port_base + 1);
    wait_ping(client, base, &mut proc).await?;
    for b in bodies {
        let r = client
            .post(format!("{base}/write?db=bench"))
            .header("Authorization", "Token bench-token-0123456789")
            .body(b.clone())
            .send()
            .await?;
        if r.status().as_u16() != 204 {
            bail!("fill failed: {}", r.status());
        }
    }
    Ok(())
}

/// The draining output's `max_in_flight` setting, when one is given.
fn in_flight(a: &Args) -> String {
    match a.max_in_flight {
        Some(n) => format!("max_in_flight = {n}"),
        None => String::new(),
    }
}

/// Starts the collector `bin` on the queue in `qdir` with the output section `output` and waits
/// until it has delivered its whole backlog: the time from its start, its peak RSS, its CPU
/// seconds (all, and in the kernel) and, with `--callgrind`, its instructions from start to
/// exit (stopped by SIGTERM once drained).
async fn drain(
    client: &storwatch_collector::client::Client,
    a: &Args,
    qdir: &Path,
    bin: &Path,
    output: &str,
) -> anyhow::Result<(Duration, u64, f64, f64, u64)> {
    // kept after the bench (beside its directory), for callgrind_annotate
    let cg = a.callgrind.then(|| callgrind_path(qdir));
    let mut proc = collector(qdir, a.port_base + 1, bin, output, cg.as_deref())?;
    let base = &format!("http://127.0.0.1:{}", a.port_base + 1);
    let t = Instant::now();
    wait_ping(client, base, &mut proc).await?;
    // under callgrind each look at the backlog costs instructions too: few of them
    let poll = Duration::from_millis(if a.callgrind { 1000 } else { 20 });
    loop {
        let backlog = metric(client, base, "output_backlog_bytes{output=\"out\"}").await;
        if backlog == 0 {
            break;
        }
        if let Some(status) = proc.0.try_wait()? {
            bail!("storwatch-collector exited while draining ({status})");
        }
        if t.elapsed() > Duration::from_secs(if a.callgrind { 3600 } else { 600 }) {
            bail!("drain did not finish");
        }
        tokio::time::sleep(poll).await;
    }
    let (took, hwm) = (t.elapsed(), vm_hwm_kib(proc.0.id()));
    let (user, sys) = cpu_split_s(proc.0.id());
    let cpu = user + sys;
    let Some(cg) = cg else {
        return Ok((took, hwm, cpu, sys, 0));
    };
    // the counts up to here (callgrind_control's dump goes to `<out>.1`), then the rest at exit
    // (dropping the caches of a process that stops is not part of the drain)
    let mut dump = std::process::Command::new("callgrind_control")
        .arg("--dump=drained")
        .arg(proc.0.id().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // callgrind reads the request while the program runs: a request to an idle collector wakes it
    let t = Instant::now();
    let dumped = loop {
        if let Some(st) = dump.try_wait()? {
            break st.success();
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = dump.kill();
            break false;
        }
        let _ = client.get(format!("{base}/ping")).send().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    if !dumped {
        bail!("callgrind_control --dump failed");
    }
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(proc.0.id().to_string())
        .status()?;
    let t = Instant::now();
    while proc.0.try_wait()?.is_none() {
        if t.elapsed() > Duration::from_secs(120) {
            bail!("the collector under callgrind did not stop on SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut dump = cg.clone().into_os_string();
    dump.push(".1");
    Ok((took, hwm, cpu, sys, callgrind_total(Path::new(&dump))?))
}

/// `<bench dir>-<queue dir>-<n>.callgrind.out` beside the bench's directory, `n` counting the
/// drains of that queue.
fn callgrind_path(qdir: &Path) -> std::path::PathBuf {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let bench = qdir.parent();
    let at = bench.and_then(Path::parent).unwrap_or(Path::new("."));
    let stem = format!("{}-{}", name(bench), name(Some(qdir)));
    (1..)
        .map(|n| at.join(format!("{stem}-{n}.callgrind.out")))
        .find(|p| !p.exists())
        .unwrap_or_else(|| at.join(format!("{stem}.callgrind.out")))
}

/// The instructions a callgrind output file counts (its `totals:` or `summary:` line).
fn callgrind_total(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no instruction count in {}", path.display()))
}

pub(crate) async fn drain_bench(a: &Args, dir: &Path) -> anyhow::Result<()> {
    let client = storwatch_collector::client::Client::new()?;
    let idir = dir.join("influx");
    let influxd = Influxd::start(&idir, a.port_base + 2)?;
    let influx = &format!("http://127.0.0.1:{}", a.port_base + 2);
    for db in ["bench", "direct"] {
        client
            .post(format!("{influx}/query"))
            .form(&[("q", format!("CREATE DATABASE {db}"))])
            .send()
            .await?;
    }
    let per = 5000;
    let count = a.drain_lines.div_ceil(per);
    let ts0 = now_ns() - 3_600_000_000_000;
    let all = a.lines.bodies(count, per, ts0, false);
    let total = (count * per) as u64;
    // The lines in `rounds` parts; each part is written by influxd's own ingest and then
    // drained by the collector, part after part, so that a change of the machine's load during
    // the run falls on both sides alike.
    let rounds = a.rounds.clamp(1, count);
    let parts: Vec<Arc<Vec<bytes::Bytes>>> = all
        .chunks(count.div_ceil(rounds))
        .map(|c| Arc::new(c.to_vec()))
        .collect();
    drop(all);
    // the builds compared, each draining into each receiver
    let mut bins = vec![own_collector()?];
    bins.extend(a.compare.clone());
    let mut receivers = Vec::new();
    if a.remote_write {
        for b in 0..bins.len() {
            receivers
                .push(remote_write::Receivers::start(&client, &dir.join(format!("rw-{b}"))).await?);
        }
    }
    let kinds: &[&str] = if a.remote_write {
        &["influxdb", "prometheus", "victoriametrics"]
    } else {
        &["influxdb"]
    };
    // per build and receiver: drain time, CPU seconds, peak RSS, instructions (--callgrind),
    // CPU seconds in the kernel
    let mut runs = vec![vec![(Duration::ZERO, 0.0, 0u64, 0u64, 0.0); kinds.len()]; bins.len()];
    let (mut t_direct, mut t_drain) = (Duration::ZERO, Duration::ZERO);
    let (mut hwm, mut cpu) = (0, 0.0);
    let mut ratios = Vec::new();
    for part in &parts {
        let lines = (part.len() * per) as f64;
        let t = Instant::now();
        direct_ingest(&client, influx, "direct", part).await?;
        let d = t.elapsed();
        for (b, bin) in bins.iter().enumerate() {
            for (k, kind) in kinds.iter().enumerate() {
                let out = match (*kind, receivers.get(b)) {
                    ("prometheus", Some(r)) => remote_write::output(&r.prom, &in_flight(a)),
                    ("victoriametrics", Some(r)) => remote_write::output(&r.vm, &in_flight(a)),
                    _ => influx_output(influx, &in_flight(a)),
                };
                let qdir = dir.join(format!("drain-{b}-{kind}"));
                std::fs::create_dir_all(&qdir)?;
                fill(&client, a, &qdir, part).await?;
                let (c, h, u, sys, ir) = drain(&client, a, &qdir, bin, &out).await?;
                let r = &mut runs[b][k];
                r.0 += c;
                r.1 += u;
                r.2 = r.2.max(h);
                r.3 += ir;
                r.4 += sys;
                if b == 0 && k == 0 {
                    ratios.push(100.0 * (lines / c.as_secs_f64()) / (lines / d.as_secs_f64()));
                    t_drain += c;
                    hwm = hwm.max(h);
                    cpu += u;
                }
            }
        }
        t_direct += d;
    }
    let rate = |d: Duration| total as f64 / d.as_secs_f64();
    for (b, bin) in bins.iter().enumerate() {
        for (k, kind) in kinds.iter().enumerate() {
            let (d, u, h, ir, sys) = runs[b][k];
            let (d0, u0, _, ir0, _) = runs[b][0];
            println!(
                "build {b} ({}) into {kind}: {:.0} lines/s, collector CPU {u:.2} s (kernel {sys:.2} s), \
                 peak RSS {h} KiB; against its InfluxDB output: rate {:.2}x, CPU {:.2}x",
                bin.display(),
                rate(d),
                rate(d) / rate(d0),
                u / u0.max(0.01),
            );
            if a.callgrind {
                println!(
                    "  instructions (callgrind) {ir}; against its InfluxDB output {:.2}x",
                    ir as f64 / ir0.max(1) as f64
                );
            }
            if b > 0 {
                let (dn, un, _, irn, _) = runs[0][k];
                println!(
                    "  into {kind}, build 0 against build {b}: rate {:.2}x, CPU {:.2}x",
                    rate(dn) / rate(d),
                    un / u.max(0.01)
                );
                if a.callgrind {
                    println!(
                        "  into {kind}, build 0 against build {b}: instructions {:.2}x",
                        irn as f64 / ir.max(1) as f64
                    );
                }
            }
        }
    }
    // every receiver holds every line's util_pct once
    let util = a.lines.util_lines(total);
    let end_s = (ts0 + (total / a.lines.per_report() as u64 + 1) * REPORT_NS) / 1_000_000_000 + 1;
    for (b, r) in receivers.iter().enumerate() {
        for (what, base) in [("prometheus", &r.prom), ("victoriametrics", &r.vm)] {
            let n =
                remote_write::stored(&client, base, "storwatch_disk_util_percent", end_s).await?;
            if n != util {
                bail!("{what} of build {b} holds {n} of the {util} samples of util_pct drained");
            }
        }
    }
    let direct = total as f64 / t_direct.as_secs_f64();
    let drain = total as f64 / t_drain.as_secs_f64();
    let q: serde_json::Value = serde_json::from_str(
        &client
            .post(format!("{influx}/query"))
            .form(&[("db", "bench"), ("q", "SELECT count(util_pct) FROM disk")])
            .send()
            .await?
            .text()
            .await?,
    )?;
    let stored = q
        .pointer("/results/0/series/0/values/0/1")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "drain: {total} lines; influxd direct ingest {direct:.0} lines/s (2 writers, 5000-line batches); \
         collector drain {drain:.0} lines/s = {:.0}% of direct ({} rounds alternating the two, {lo:.0}-{hi:.0}% \
         per round); collector peak RSS while draining {hwm} KiB, CPU {cpu:.2} s; stored in influxd: {stored} samples of util_pct",
        100.0 * drain / direct,
        parts.len(),
    );
    if stored != util {
        bail!("influxd holds {stored} of the {util} samples of util_pct the collector drained");
    }
    drop(influxd);
    Ok(())
}
