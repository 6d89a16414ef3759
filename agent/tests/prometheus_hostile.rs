//! The `/metrics` listener among hostile clients, as issue 20 describes them: the agent binary on a
//! simulated disk server (the `healthy` scenario, stepped every sample: a page of some 75 KiB)
//! with `[prometheus] listen` on 127.0.0.1, and beside each scrape 1,500 connections that send
//! nothing, 50 that send half a request and stop, and 50 that send a whole request and never
//! read the answer (with a receive buffer so small that the agent's send buffer fills).
//!
//! Every scrape must get the whole page; the test prints the latency percentiles, the agent's
//! memory growth, its threads and its reports, and holds them to generous bounds (the issue asks
//! for p99 ≤ 100 ms, ≤ 16 MiB of growth, a bounded thread count and an unchanged sampling
//! cadence). The connections are opened afresh for each round of scrapes, so that every scrape
//! of a round meets all of them open (the agent closes a connection that sent no request within
//! 5 s).
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::net::{AddressFamily, SocketType};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_test_support::{binary, free_port, scratch, wait_for, Proc};

const IDLE: usize = 1500;
const HALF_SENT: usize = 50;
const NEVER_READING: usize = 50;
const ROUNDS: usize = 4;
const SCRAPES_PER_ROUND: usize = 50;
/// Between two scrapes, so that a round spans a few reports (and stays within the 5 s the agent
/// gives a connection to send its request).
const SCRAPE_GAP: Duration = Duration::from_millis(10);
/// Open files this test and the agent each need: the test holds 1,600 sockets at once, and the
/// agent holds connections up to half its limit (which it inherits), so twice that and room.
const FILES_NEEDED: u64 = 2 * (IDLE + HALF_SENT + NEVER_READING) as u64 + 400;
/// Room for a debug build's sample and report on a machine whose cores are shared.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
const REPORT_INTERVAL: Duration = Duration::from_millis(500);
/// The agent's sampling loop runs on its main thread, named after the program.
const SAMPLING_THREAD: &str = "storwatch-agent";
/// Far above the 100 ms, for a debug build on a busy machine: the figures are printed.
const P99_BOUND: Duration = Duration::from_secs(1);
const RSS_GROWTH_BOUND_KIB: u64 = 16 << 10;

/// The simulated host, one second of uptime further every sample interval until dropped.
struct Stepping {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stepping {
    fn start(root: &Path) -> Stepping {
        let mut sim = Sim::new(root, Kind::Healthy, "hostile-node", 7, 1.0).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(SAMPLE_INTERVAL);
                sim.step().unwrap();
            }
        });
        Stepping {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Stepping {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A field of /proc/<pid>/status (`VmRSS`, `Threads`), as its number.
fn status_field(pid: u32, name: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
}

/// CPU time (user + system, in clock ticks) of each of `pid`'s threads, by name.
fn thread_cpu(pid: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ... utime stime: fields 14 and 15, counted after the `)`
        let Some((name, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
        else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push((name.to_string(), ticks(11) + ticks(12)));
    }
    out.sort();
    out
}

/// How long the thread of `pid` named `name` has waited for a CPU while it was runnable
/// (`/proc/PID/task/TID/schedstat`, its second number: the run queue's delay).
fn thread_run_wait(pid: u32, name: &str) -> Duration {
    let mut ns = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let sched = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        ns += sched
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(ns)
}

/// The agent's side of the connections to `port` (/proc/net/tcp): how many are established, and
/// how many of those hold answer bytes their client has not taken.
fn server_sockets(port: u16) -> (usize, usize) {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("0100007F:{port:04X}");
    let mut established = 0;
    let mut unsent = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&local.as_str()) || f.get(3) != Some(&"01") {
            continue;
        }
        established += 1;
        let tx = f.get(4).and_then(|q| q.split(':').next()).unwrap_or("0");
        if u64::from_str_radix(tx, 16).unwrap_or(0) > 0 {
            unsent += 1;
        }
    }
    (established, unsent)
}

/// One scrape with a 5 s budget: the whole page, or why not.
fn scrape(addr: SocketAddr) -> Result<String, String> {
    let budget = Duration::from_secs(5);
    let mut s = TcpStream::connect_timeout(&addr, budget).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(budget)).unwrap();
    s.set_write_timeout(Some(budget)).unwrap();
    s.write_all(
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain;version=0.0.4\r\n\
          User-Agent: Prometheus/2.45.3\r\nConnection: close\r\n\r\n",
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("read after {} bytes: {e}", answer.len()))?;
    let text = String::from_utf8(answer).map_err(|e| format!("not UTF-8: {e}"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {} bytes", text.len()))?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("status: {head}"));
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Content-Length: {head}"))?;
    if body.len() != length {
        return Err(format!("{} bytes of a {length}-byte page", body.len()));
    }
    Ok(body.to_string())
}

/// The hostile connections of one round, kept open until dropped.
struct Hostile {
    conns: Vec<TcpStream>,
    /// Connections that could not be made within 3 s (a listener that does not accept).
    refused: usize,
}

/// `n` connections that send nothing.
fn open_hostile_few(addr: SocketAddrV4, n: usize) -> Hostile {
    let conns: Vec<TcpStream> = (0..n)
        .map_while(|_| {
            TcpStream::connect_timeout(&SocketAddr::V4(addr), Duration::from_secs(3)).ok()
        })
        .collect();
    Hostile {
        refused: n - conns.len(),
        conns,
    }
}

fn open_hostile(addr: SocketAddrV4) -> Hostile {
    let mut conns = Vec::with_capacity(IDLE + HALF_SENT + NEVER_READING);
    let mut refused = 0;
    // a connection dropped from a full listen queue is retried by the kernel a second later
    let connect = || TcpStream::connect_timeout(&SocketAddr::V4(addr), Duration::from_secs(3));
    for i in 0..IDLE + HALF_SENT {
        match connect() {
            Ok(s) => {
                if i >= IDLE {
                    s.set_nodelay(true).unwrap();
                    (&s).write_all(b"GET /metrics HTTP/1.1\r\nHost: 12")
                        .unwrap();
                }
                conns.push(s);
            }
            Err(e) => {
                eprintln!("hostile connection {i}: {e}");
                // the listen queue is full: the agent is not accepting; no use waiting a
                // second for each of the rest
                refused = IDLE + HALF_SENT + NEVER_READING - conns.len();
                return Hostile { conns, refused };
            }
        }
    }
    for _ in 0..NEVER_READING {
        // the receive buffer is set before connecting, so the window offered is small from
        // the start: the agent's send buffer fills with what this client never reads
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 1024).unwrap();
        if rustix::net::connect(&fd, &addr).is_err() {
            refused += 1;
            continue;
        }
        let s = TcpStream::from(fd);
        s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        if (&s)
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            refused += 1;
            continue;
        }
        conns.push(s);
    }
    Hostile { conns, refused }
}

/// The agent binary on the stepped simulated host, serving `/metrics` on a port of its own.
struct Agent {
    proc: Proc,
    port: u16,
    addr: SocketAddrV4,
    // dropped after the agent: the host's tree stays while it runs
    _sim: Stepping,
    dir: tempfile::TempDir,
}

impl Agent {
    /// Starts the agent with `prometheus` (more of its `[prometheus]` table) and waits for its
    /// first page with disk metrics.
    fn start(prometheus: &str) -> Agent {
        let dir = scratch();
        let root = dir.path().join("host");
        let sim = Stepping::start(&root);
        let port = free_port();
        let config = dir.path().join("agent.toml");
        std::fs::write(
            &config,
            format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n{prometheus}"),
        )
        .unwrap();
        let proc = Proc::spawn(
            "agent",
            &dir.path().join("agent.log"),
            Command::new(binary("storwatch-agent", "storwatch-agent"))
                .arg("run")
                .arg("--config")
                .arg(&config)
                .arg("--proc-root")
                .arg(root.join("proc"))
                .arg("--sys-root")
                .arg(root.join("sys"))
                .args([
                    "--sample-interval",
                    &format!("{}ms", SAMPLE_INTERVAL.as_millis()),
                    "--report-interval",
                    &format!("{}ms", REPORT_INTERVAL.as_millis()),
                    "--host",
                    "hostile-node",
                ])
                .arg("--output")
                .arg(format!("file:{}", dir.path().join("reports.lp").display())),
        );
        let agent = Agent {
            proc,
            port,
            addr: SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
            _sim: sim,
            dir,
        };
        let first = wait_for(Duration::from_secs(20), || {
            scrape(SocketAddr::V4(agent.addr))
                .is_ok_and(|page| page.contains("storwatch_disk_util_percent{"))
        });
        assert!(
            first,
            "no page served; agent log:\n{}",
            agent.proc.log_tail(20)
        );
        agent
    }

    fn out(&self) -> std::path::PathBuf {
        self.dir.path().join("reports.lp")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }
}

/// The samples the agent says it skipped (`sampling fell behind` lines, `skipped=N`).
fn samples_skipped(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("fell behind"))
        .map(|l| {
            l.split_once("skipped=")
                .and_then(|(_, n)| n.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<u64>().ok())
                // a line in a form not understood counts as many, so that it is looked at
                .unwrap_or(u64::MAX / 1024)
        })
        .sum()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn reports_written(out: &Path) -> usize {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("agent,"))
        .count()
}

#[test]
fn scrapes_answer_beside_idle_half_sent_and_never_reading_connections() {
    // 1,600 sockets at once: more than the usual soft limit of 1,024 files. The agent is
    // started after this and inherits the raised limit.
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    assert!(
        hard >= FILES_NEEDED,
        "this test needs {FILES_NEEDED} open files; the hard limit is {hard}"
    );
    if limit.current.is_some_and(|soft| soft < FILES_NEEDED) {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(FILES_NEEDED),
                maximum: limit.maximum,
            },
        )
        .unwrap();
    }

    let agent = Agent::start("");
    let (pid, port, addr, out) = (agent.proc.id(), agent.port, agent.addr, agent.out());
    let page_bytes = scrape(SocketAddr::V4(addr)).unwrap().len();
    // a few scrapes and reports first, so that what is measured is the growth the hostile
    // connections cause
    std::thread::sleep(REPORT_INTERVAL * 2);
    let rss_before = status_field(pid, "VmRSS");
    let threads_before = status_field(pid, "Threads");
    let reports_before = reports_written(&out);
    let cpu_before = thread_cpu(pid);
    let waited_before = thread_run_wait(pid, SAMPLING_THREAD);
    let started = Instant::now();

    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let mut rss_max = rss_before;
    let mut threads_max = threads_before;
    let mut held_min = usize::MAX;
    let mut stuck_min = usize::MAX;
    let mut refused = 0;
    let mut opened = 0;
    'rounds: for _ in 0..ROUNDS {
        let hostile = open_hostile(addr);
        refused += hostile.refused;
        opened += hostile.conns.len();
        // every connection taken in by the agent before the scrapes (the last ones may
        // still be in its listen queue)
        let all = IDLE + HALF_SENT + NEVER_READING;
        // (within 4 s: from 5 s after its connection the agent cuts an idle client), and
        // the never-reading clients' answers written (the agent answers each once it has read
        // its request: on a busy machine the last may come a moment after the connections)
        wait_for(Duration::from_secs(4), || {
            let (established, unsent) = server_sockets(port);
            established >= all && unsent >= NEVER_READING
        });
        let (established, unsent) = server_sockets(port);
        if established < all {
            failures.push(format!(
                "only {established} of {all} hostile connections held after 4 s"
            ));
            break 'rounds;
        }
        held_min = held_min.min(established);
        stuck_min = stuck_min.min(unsent);
        for _ in 0..SCRAPES_PER_ROUND {
            let t = Instant::now();
            match scrape(SocketAddr::V4(addr)) {
                Ok(page) if page.ends_with('\n') && page.contains("storwatch_agent_") => {
                    latencies.push(t.elapsed())
                }
                Ok(page) => failures.push(format!("an incomplete page: {page:?}")),
                Err(e) => failures.push(format!("after {:?}: {e}", t.elapsed())),
            }
            // a listener that cannot answer would take minutes to fail every scrape
            if failures.len() >= 3 {
                break 'rounds;
            }
            std::thread::sleep(SCRAPE_GAP);
        }
        rss_max = rss_max.max(status_field(pid, "VmRSS"));
        threads_max = threads_max.max(status_field(pid, "Threads"));
        drop(hostile);
    }
    let elapsed = started.elapsed();
    let waited = thread_run_wait(pid, SAMPLING_THREAD).saturating_sub(waited_before);
    let reports = reports_written(&out) - reports_before;
    let log = agent.log();
    let cpu: Vec<String> = thread_cpu(pid)
        .into_iter()
        .map(|(name, t)| {
            let before = cpu_before.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
            format!("{name} {} ticks", t.saturating_sub(before))
        })
        .collect();

    latencies.sort();
    let scrapes = latencies.len();
    eprintln!(
        "{scrapes} scrapes of a {page_bytes}-byte page beside {IDLE} idle, {HALF_SENT} half-sent \
         and {NEVER_READING} never-reading connections ({opened} made, {refused} not): latency p50 {:?}, \
         p99 {:?}, max {:?}; agent RSS {rss_before} KiB before, {rss_max} KiB at most; threads \
         {threads_before} before, {threads_max} at most; at least {held_min} connections held and {stuck_min} answers stuck \
         unread in a round; {reports} reports in {elapsed:.1?}; CPU of the agent's threads: {}",
        latencies.get(scrapes / 2),
        latencies.last().map(|_| percentile(&latencies, 0.99)),
        latencies.last(),
        cpu.join(", "),
    );
    assert!(
        failures.is_empty(),
        "{} scrapes failed: {failures:#?}\nagent log:\n{}",
        failures.len(),
        agent.proc.log_tail(20)
    );
    assert_eq!(scrapes, ROUNDS * SCRAPES_PER_ROUND);
    assert_eq!(refused, 0, "hostile connections not accepted");
    assert!(
        held_min >= IDLE + HALF_SENT + NEVER_READING,
        "the agent held only {held_min} connections: it did not keep every one open"
    );
    assert!(
        stuck_min >= NEVER_READING,
        "only {stuck_min} answers stuck unread: the never-reading clients took their page"
    );
    let p99 = percentile(&latencies, 0.99);
    assert!(p99 <= P99_BOUND, "scrape latency p99 {p99:?}");
    assert!(
        rss_max - rss_before <= RSS_GROWTH_BOUND_KIB,
        "the agent's RSS grew from {rss_before} KiB to {rss_max} KiB"
    );
    assert_eq!(threads_max, threads_before, "the agent started threads");
    // the sampling cadence: a report every 500 ms all along (one may be in the making at
    // either end, and one late sample of a debug build on a loaded machine may cost one), and
    // at most one sample skipped in all: a loop held up by the connections would skip many
    // What the loop could not do because the machine gave it no CPU (the tests and builds run
    // beside this one) is not the connections' doing: the time the sampling thread waited,
    // runnable, for a CPU is taken off the window.
    let expected = (elapsed.saturating_sub(waited).as_secs_f64() / REPORT_INTERVAL.as_secs_f64())
        .floor() as usize;
    assert!(
        reports + 2 >= expected,
        "{reports} reports in {elapsed:?}, of which the sampling thread waited {waited:?} for a \
         CPU: {expected} expected"
    );
    // and a sample skipped for each sample interval the thread waited for a CPU, likewise
    let starved = (waited.as_secs_f64() / SAMPLE_INTERVAL.as_secs_f64()).floor() as u64;
    let skipped = samples_skipped(&log);
    assert!(
        skipped <= 1 + starved,
        "{skipped} samples skipped ({waited:?} waiting for a CPU):\n{log}"
    );
    let mut agent = agent;
    assert!(agent.proc.running(), "{}", agent.proc.log_tail(20));
}

/// The limits one by one, with `max_connections = 100`: 150 idle connections leave at most 100
/// open and a scrape still answered (the oldest are closed for it, with a warning), and 5 s
/// later the agent has cut every client that did not finish its request or did not read its
/// answer, the never-reading one with a reset.
#[test]
fn the_connection_cap_and_the_deadlines_close_the_oldest_and_the_slowest() {
    let agent = Agent::start("max_connections = 100\n");
    let Hostile { conns, refused } = open_hostile_few(agent.addr, 150);
    assert_eq!(refused, 0);
    wait_for(Duration::from_secs(2), || {
        server_sockets(agent.port).0 >= 100
    });
    let page = scrape(SocketAddr::V4(agent.addr));
    assert!(page.is_ok(), "{page:?}");
    // The kernel counts as established the connections still in the listen queue, which the
    // agent accepts (closing the oldest for each) as it gets the CPU: on a loaded machine some
    // of the 150 are still queued when the scrape is answered. Within 2 s all are accepted.
    let mut held = 0;
    wait_for(Duration::from_secs(2), || {
        held = server_sockets(agent.port).0;
        held <= 100
    });
    assert!(held <= 100, "{held} connections open beyond the cap of 100");
    assert!(held >= 90, "only {held} connections held");
    assert!(
        agent
            .log()
            .contains("connections at the cap; the oldest closed"),
        "{}",
        agent.log()
    );
    // the first connections made were the ones closed: they read the end of the stream
    let mut first = &conns[0];
    first
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    // it was reset (closed at the cap with SO_LINGER 0); a connection still open would time
    // out with WouldBlock instead
    let end = first.read(&mut [0u8; 16]);
    assert!(
        matches!(&end, Ok(0))
            || end
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the oldest connection is still open: {end:?}"
    );

    let never_reading = {
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 1024).unwrap();
        rustix::net::connect(&fd, &agent.addr).unwrap();
        let s = TcpStream::from(fd);
        (&s).write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        s
    };
    assert!(
        wait_for(Duration::from_secs(2), || server_sockets(agent.port).1 >= 1),
        "the never-reading client's answer was not left waiting"
    );
    // every client's deadline is 5 s from its connection (or from its request)
    let cut = wait_for(Duration::from_secs(8), || server_sockets(agent.port).0 == 0);
    assert!(
        cut,
        "{:?} connections still open after their deadline",
        server_sockets(agent.port)
    );
    // what it reads now is the little that reached it before the reset
    never_reading
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut rest = Vec::new();
    let end = (&never_reading).read_to_end(&mut rest);
    assert!(
        end.as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the never-reading client was not reset: {end:?} after {} bytes",
        rest.len()
    );
    drop(conns);
}

/// The agent's receive queue (bytes) of its connection from the client at `peer_port`.
fn server_recv_queue(port: u16, peer_port: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let (local, remote) = (
        format!("0100007F:{port:04X}"),
        format!("0100007F:{peer_port:04X}"),
    );
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&local.as_str()) || f.get(2) != Some(&remote.as_str()) {
            return None;
        }
        let rx = f.get(4)?.split(':').nth(1)?;
        u64::from_str_radix(rx, 16).ok()
    })
}

/// A client that sends its request, does not read the answer and keeps sending: while the
/// answer waits, what it sends is left in the agent's receive buffer, which holds some 16 KiB and
/// not the 128 KiB the kernel's default lets it grow to (times `max_connections`).
#[test]
fn a_client_that_keeps_sending_fills_only_a_small_receive_buffer() {
    let agent = Agent::start("");
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    // a small window of its own, so that the answer stays unsent and the agent keeps writing
    rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 1024).unwrap();
    rustix::net::connect(&fd, &agent.addr).unwrap();
    let s = TcpStream::from(fd);
    let peer_port = s.local_addr().unwrap().port();
    (&s).write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    assert!(
        wait_for(Duration::from_secs(2), || server_sockets(agent.port).1 >= 1),
        "the answer did not wait for the client"
    );
    s.set_nonblocking(true).unwrap();
    let chunk = [b'x'; 16 << 10];
    let mut sent = 0usize;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && sent < 4 << 20 {
        match (&s).write(&chunk) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("sending after the request: {e}"),
        }
    }
    // what the window let through has arrived by now (loopback)
    std::thread::sleep(Duration::from_millis(200));
    let queued =
        server_recv_queue(agent.port, peer_port).expect("the agent's side of the connection");
    eprintln!("{sent} bytes sent after the request; {queued} held in the agent's receive queue");
    assert!(
        queued <= 32 << 10,
        "the agent's receive queue holds {queued} bytes of a client that does not stop sending"
    );
    assert!(
        queued > 0,
        "nothing sent after the request reached the agent"
    );
}
