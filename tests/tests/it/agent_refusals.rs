//! The agent's HTTP output against a collector that refuses it: the queue above its high
//! watermark, answered 503 with `Retry-After: 1`. The agent sends its whole body before it reads
//! the answer; with a body larger than the socket buffers (8 MiB, gzip off) it reads the 503 and
//! its Retry-After all the same, and retries no sooner than that. When the body is larger than
//! the collector will read after a refusal, the agent meets a reset instead of an answer, and
//! still backs off (capped exponential, with jitter) instead of retrying at once.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use storwatch_agent::sink::http::{HttpConfig, HttpSink};
use storwatch_agent::sink::Sink;
use storwatch_test_support::{binary, now_s, Collector};

const TOKEN: &str = "refused-agents-token-0123456789";

/// A collector whose queue is above its high watermark (0 bytes, one accepted line), answering
/// 503 with `Retry-After: 1`; `max_body_bytes` as given.
fn full_collector(dir: &Path, port: u16, max_body_bytes: usize) -> Collector {
    let config = Collector::write_config(dir, port, "http://127.0.0.1:9", "refused", TOKEN);
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "[heartbeat]",
        &format!(
            "[limits]\nmax_body_bytes = {max_body_bytes}\n\
             [queue]\nhigh_watermark_bytes = 0\nretry_after_s = 1\n[heartbeat]"
        ),
        1,
    );
    std::fs::write(&config, text).unwrap();
    let c = Collector::start_with_config(
        &binary("storwatch-collector", "storwatch-collector"),
        &config,
        port,
    );
    c.fill_above_watermark("refused", TOKEN);
    c
}

/// The batch: 8 MiB, twice what can be in flight when the collector stops reading. The agent's
/// send buffer autotunes up to `net.ipv4.tcp_wmem`'s maximum (4 MiB by default), the collector's
/// receive buffer stays at its first size (128 KiB) since nothing reads it, and hyper buffers
/// 64 KiB: some 4.2 MiB. So the agent is still writing when the collector closes, and a
/// collector that closes without reading the rest resets it (a broken pipe, not the 503).
const BATCH_BYTES: usize = 8 << 20;

/// The sink with one [`BATCH_BYTES`] batch to deliver, uncompressed and in one request.
fn sink(dir: &Path, port: u16, backoff_min_s: f64, backoff_max_s: f64) -> HttpSink {
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let cfg = HttpConfig {
        token_file: Some(dir.join("token")),
        spool_dir: dir.join("spool"),
        gzip: false,
        max_batch_bytes: 16 << 20,
        timeout_s: 10.0,
        backoff_min_s,
        backoff_max_s,
        ..HttpConfig::default()
    };
    let mut s = HttpSink::open(&format!("http://127.0.0.1:{port}/write?db=refused"), &cfg).unwrap();
    let t = now_s();
    let mut batch = Vec::with_capacity(BATCH_BYTES + 64);
    let mut i = 0u64;
    while batch.len() < BATCH_BYTES {
        batch.extend_from_slice(
            format!("refused,host=node{} v={i}i {t}000000000\n", i % 1000).as_bytes(),
        );
        i += 1;
    }
    s.send(&batch).unwrap();
    assert!(s.wait_spooled(Duration::from_secs(30)));
    s
}

/// Watches the sink for `time`: when each failed attempt ended, as the sink's delivery thread
/// timed it (a look at the counters that comes late, on a busy machine, moves nothing), and the
/// statuses seen.
fn attempts(s: &HttpSink, time: Duration) -> (Vec<Instant>, Vec<u16>) {
    let end = Instant::now() + time;
    let (mut at, mut statuses) = (Vec::new(), Vec::new());
    let mut seen = s.delivery_stats().failed_requests;
    while Instant::now() < end {
        let d = s.delivery_stats();
        if d.failed_requests != seen {
            seen = d.failed_requests;
            at.push(d.last_failure_at.expect("a failure has its time"));
            statuses.push(d.last_status);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (at, statuses)
}

fn gaps(at: &[Instant]) -> Vec<Duration> {
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn the_agent_reads_a_503_behind_a_large_body_and_waits_for_its_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let c = full_collector(dir.path(), 18970, 16 << 20);
    // a backoff of its own far shorter than the Retry-After: only the answer can hold it back
    let s = sink(dir.path(), c.port, 0.05, 0.2);
    // long enough for three attempts of a debug build on a loaded machine
    let (at, statuses) = attempts(&s, Duration::from_secs(12));
    assert!(
        statuses.len() >= 3 && statuses.iter().all(|&st| st == 503),
        "statuses seen: {statuses:?}"
    );
    for gap in gaps(&at) {
        // Retry-After is a floor, with up to a quarter more of jitter; sending 8 MiB again
        // (0.2-0.4 s here) comes on top; 10 ms of margin below for the clock reads
        assert!(
            gap >= Duration::from_millis(990) && gap < Duration::from_secs(5),
            "retried after {gap:?}: {:?}",
            gaps(&at)
        );
    }
    assert_eq!(s.delivery_stats().delivered_lines, 0);
    assert!(c.metric("overloaded_total") >= 4);
}

#[test]
fn the_agent_backs_off_when_the_refusal_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB read after the refusal, 8 MiB sent: the agent meets a reset, not the 503
    let c = full_collector(dir.path(), 18972, 1 << 20);
    let s = sink(dir.path(), c.port, 0.2, 1.0);
    let (at, statuses) = attempts(&s, Duration::from_secs(5));
    assert!(
        !statuses.is_empty() && statuses.iter().all(|&st| st == 0),
        "statuses seen: {statuses:?}"
    );
    // steps of 0.2, 0.4, 0.8, 1, 1 … s, each at least half its step (equal jitter): within
    // 5 s at most a dozen tries, never two closer than 0.1 s
    assert!(at.len() <= 12, "{} tries in 5 s: {:?}", at.len(), gaps(&at));
    for gap in gaps(&at) {
        assert!(gap >= Duration::from_millis(95), "{:?}", gaps(&at));
    }
    assert_eq!(s.delivery_stats().delivered_lines, 0);
}
