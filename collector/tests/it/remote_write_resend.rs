//! What a remote-write output sends again after a crash, and what it makes of a receiver
//! refusing the resent samples (issue 29.9): the collector binary against a counting receiver
//! on 127.0.0.1, and against a real Prometheus (Debian's `prometheus`).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use storwatch_test_support::http::read_request;
use storwatch_test_support::{free_port, http, now_ms, scratch, wait_for, Collector, Prometheus};

const TOKEN: &str = "remote-write-resend-token";

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&byte) = b.get(*i) {
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

/// The fields of one protobuf message: (field number, bytes of a length-delimited field, or
/// the 8 bytes of a fixed64, or the varint as 8 little-endian bytes).
fn fields(b: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        match key & 7 {
            0 => out.push((key >> 3, varint(b, &mut i).to_le_bytes().to_vec())),
            1 => {
                out.push((key >> 3, b[i..i + 8].to_vec()));
                i += 8;
            }
            2 => {
                let len = varint(b, &mut i) as usize;
                out.push((key >> 3, b[i..i + len].to_vec()));
                i += len;
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// The sample values of a remote-write request body (snappy'd `WriteRequest`).
fn sample_values(body: &[u8]) -> Vec<f64> {
    let proto = snap::raw::Decoder::new().decompress_vec(body).unwrap();
    let mut out = Vec::new();
    for (n, series) in fields(&proto) {
        assert_eq!(n, 1);
        for (m, sample) in fields(&series) {
            if m == 2 {
                for (k, v) in fields(&sample) {
                    if k == 1 {
                        out.push(f64::from_le_bytes(v.try_into().unwrap()));
                    }
                }
            }
        }
    }
    out
}

/// A remote-write receiver on `port` that takes 30 ms per request and records every sample
/// value it was sent.
fn counting_receiver(port: u16) -> Arc<Mutex<Vec<Vec<f64>>>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some(req) = read_request(stream.try_clone().unwrap()) else {
                continue;
            };
            std::thread::sleep(Duration::from_millis(30));
            s.lock().unwrap().push(sample_values(&req.body));
            let _ = stream.write_all(
                b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    seen
}

fn write_config(dir: &Path, port: u16, outputs: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("tokens"), format!("agents:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        dir.join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let config = dir.join("collector.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nqueue_dir = \"{q}\"\ntoken_file = \"{t}\"\n\
             [heartbeat]\ninterval_s = 0\n{outputs}",
            q = dir.join("queue").display(),
            t = dir.join("tokens").display(),
        ),
    )
    .unwrap();
    config
}

fn post(c: &Collector, body: &str) {
    let (code, text) = http(
        &c.url("/write?precision=ns"),
        "POST",
        &[("Authorization", &format!("Token {TOKEN}"))],
        body.as_bytes(),
    );
    assert_eq!(code, 204, "{text}");
}

fn backlog_drained(c: &Collector, output: &str) -> bool {
    wait_for(Duration::from_secs(60), || {
        c.metrics(&format!("output_backlog_bytes{{output=\"{output}\"}}"))
            .iter()
            .all(|(_, v)| *v == 0.0)
    })
}

/// Short lines: 2 MiB of queue (one read) holds ~50,000 of them, ten batches. The cursor used
/// to move per read, so a kill -9 resent every batch of the read delivered before it; it now
/// moves per batch, to the end of the last record the delivered batches complete.
#[test]
fn a_kill_9_resends_about_one_batch_not_a_whole_queue_read() {
    let dir = scratch();
    let receiver_port = free_port();
    let port = free_port();
    let config = write_config(
        dir.path(),
        port,
        &format!(
            "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"rw\"\n\
             url = \"http://127.0.0.1:{receiver_port}/api/v1/write\"\n\
             backoff_min_ms = 50\nbackoff_max_s = 1\n"
        ),
    );
    let mut c = Collector::start_with_config(&Collector::bin(), &config, port);
    // 50 records of 1,000 short lines, queued while the receiver is not there yet, so that
    // one read of the queue takes most of them
    let t0 = now_ms() - 600_000;
    let records = 50;
    for k in 0..records {
        let body: String = (0..1000)
            .map(|i| {
                format!(
                    "m,host=h{i} v={} {}\n",
                    k * 1000 + i,
                    (t0 + k * 1000) * 1_000_000
                )
            })
            .collect();
        post(&c, &body);
    }
    let seen = counting_receiver(receiver_port);
    // some batches of the big read delivered, then kill -9
    assert!(wait_for(Duration::from_secs(30), || seen
        .lock()
        .unwrap()
        .len()
        >= 5));
    c.stop();
    let before: usize = seen.lock().unwrap().iter().map(Vec::len).sum();
    c.start_again();
    assert!(backlog_drained(&c, "rw"));
    let all = seen.lock().unwrap().clone();
    let mut times: BTreeMap<i64, usize> = BTreeMap::new();
    for v in all.iter().flatten() {
        *times.entry(*v as i64).or_default() += 1;
    }
    let total = (records * 1000) as usize;
    assert_eq!(times.len(), total, "every line delivered");
    let resent: usize = times.values().map(|n| n - 1).sum();
    eprintln!(
        "{} requests, {before} samples received before the kill, {resent} lines resent after it",
        all.len()
    );
    // at most the batch in flight (5,000 lines) and the rest of a record cut across batches
    assert!(resent <= 5000 + 1000, "{resent} lines resent");
}

/// A real Prometheus refuses a resent sample older than the newest of its series as out of
/// order. Resent lines (below the output's sent mark, as a crash leaves it) refused so are
/// counted in `output_resent_refused_total`, not dead-lettered; lines never sent before that
/// are refused alike are dead letters as ever.
#[test]
fn resent_samples_refused_as_out_of_order_are_counted_apart_not_dead_lettered() {
    let dir = scratch();
    let prom = Prometheus::start(
        &dir.path().join("prometheus"),
        "global:\n  scrape_interval: 1h\n",
        &["--web.enable-remote-write-receiver"],
    );
    let prom_port = prom.port;
    let output = |name: &str| {
        format!(
            "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"{name}\"\n\
             url = \"http://127.0.0.1:{prom_port}/api/v1/write\"\nbatch_lines = 100\n\
             backoff_min_ms = 50\nbackoff_max_s = 1\n"
        )
    };
    // an output that never delivers keeps the queue's segments for the second run
    let hold = "[[outputs]]\nname = \"hold\"\nurl = \"http://127.0.0.1:9/write\"\ndb = \"x\"\n";
    let port = free_port();
    let config = write_config(dir.path(), port, &format!("{}{hold}", output("first")));
    let mut c = Collector::start_with_config(&Collector::bin(), &config, port);
    // five reports of 20 series, 10 s apart
    let t0 = now_ms() - 300_000;
    let report = |k: i64| -> String {
        (0..20)
            .map(|i| format!("r,host=h{i} v={k} {}\n", (t0 + k * 10_000) * 1_000_000))
            .collect()
    };
    for k in 0..5 {
        post(&c, &report(k));
    }
    assert!(backlog_drained(&c, "first"));
    c.stop();
    // A second output over the same queue, as one restarted after a crash finds itself: its
    // sent mark says the first four reports went out before (the fifth did not), so Prometheus
    // holding the fifth refuses the first four as out of order
    let queue = dir.path().join("queue");
    let config = write_config(dir.path(), port, &format!("{}{hold}", output("second")));
    let mark = fourth_record_end(&queue);
    std::fs::write(queue.join("second.sent"), mark.to_string()).unwrap();
    let c = Collector::start_with_config(&Collector::bin(), &config, port);
    assert!(backlog_drained(&c, "second"));
    // a line never sent before, refused alike: a dead letter
    post(
        &c,
        &report(1).lines().next().map(|l| format!("{l}\n")).unwrap(),
    );
    assert!(backlog_drained(&c, "second"));
    assert_eq!(
        c.metric("output_resent_refused_total{output=\"second\"}"),
        80,
        "the first four reports, resent"
    );
    assert_eq!(c.metric("output_dead_lettered_total{output=\"second\"}"), 1);
    assert_eq!(c.metric("output_out_of_order_total{output=\"second\"}"), 1);
    let dead = std::fs::read_to_string(queue.join("dead-letter/second.lp")).unwrap();
    assert_eq!(
        dead.lines().filter(|l| !l.starts_with('#')).count(),
        1,
        "{dead}"
    );
}

/// The queue position past the fourth record (the queue's records are the five posts, in
/// order): read with the collector's own queue.
fn fourth_record_end(queue: &Path) -> u64 {
    use storwatch_collector::metrics::Metrics;
    use storwatch_collector::queue::{Queue, QueueOptions};
    let (q, _) = Queue::open(queue, QueueOptions::default(), Arc::new(Metrics::default())).unwrap();
    let read = q.read_records(0, 1 << 20).unwrap();
    assert_eq!(read.records().count(), 5);
    read.ends[3]
}

/// A remote-write receiver on `port` answering 503 to any request holding the value `held`
/// while `hold` is set, 204 to the rest (recording their values); one thread per connection,
/// so that the requests in flight at once are answered at once.
fn holding_receiver(port: u16, held: f64, hold: Arc<AtomicBool>) -> Arc<Mutex<Vec<Vec<f64>>>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (s, hold) = (s.clone(), hold.clone());
            std::thread::spawn(move || {
                let Some(req) = read_request(stream.try_clone().unwrap()) else {
                    return;
                };
                let values = sample_values(&req.body);
                let answer: &[u8] = if hold.load(Ordering::SeqCst) && values.contains(&held) {
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    s.lock().unwrap().push(values);
                    b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                let _ = stream.write_all(answer);
            });
        }
    });
    seen
}

/// Several requests in flight: a batch is cut into shards by series, sent at once. One shard of
/// the fourth record's batch is refused (503) until released while the batch's other shards are
/// delivered: the saved cursor stays at the end of the third record across a kill -9 (it passes
/// a record only when every shard has delivered everything up to it), and after the restart
/// every line is delivered.
#[test]
fn with_shards_in_flight_the_cursor_passes_a_record_only_when_every_shard_delivered_it() {
    let dir = scratch();
    let receiver_port = free_port();
    let port = free_port();
    let config = write_config(
        dir.path(),
        port,
        &format!(
            "[[outputs]]\ntype = \"prometheus_remote_write\"\nname = \"rw\"\n\
             url = \"http://127.0.0.1:{receiver_port}/api/v1/write\"\nbatch_lines = 100\n\
             max_in_flight = 4\nbackoff_min_ms = 50\nbackoff_max_s = 1\n"
        ),
    );
    let held = 1e9;
    let hold = Arc::new(AtomicBool::new(true));
    let seen = holding_receiver(receiver_port, held, hold.clone());
    let mut c = Collector::start_with_config(&Collector::bin(), &config, port);
    // six records (one batch each) of 100 series; the fourth's first line is the held one
    let t0 = now_ms() - 600_000;
    let value = |k: usize, i: usize| {
        if (k, i) == (3, 0) {
            held
        } else {
            (k * 100 + i) as f64
        }
    };
    for k in 0..6 {
        let body: String = (0..100)
            .map(|i| {
                let host = if (k, i) == (3, 0) {
                    "held".to_string()
                } else {
                    format!("h{i}")
                };
                format!(
                    "m,host={host} v={} {}\n",
                    value(k, i),
                    (t0 + k as i64 * 10_000) * 1_000_000
                )
            })
            .collect();
        post(&c, &body);
    }
    let delivered = |k: usize| -> usize {
        let all = seen.lock().unwrap();
        (0..100)
            .filter(|i| all.iter().flatten().any(|v| *v == value(k, *i)))
            .count()
    };
    // the first three records delivered, and of the fourth every shard but the held one's
    assert!(wait_for(Duration::from_secs(30), || delivered(2) == 100
        && delivered(3) > 0
        && c.metric("output_retries_total{output=\"rw\"}") >= 2));
    assert!(delivered(3) < 100);
    assert!(
        (50..100).contains(&delivered(3)),
        "the other shards of the batch were sent beside the held one: {} of 100",
        delivered(3)
    );
    c.stop();
    let queue = dir.path().join("queue");
    {
        use storwatch_collector::metrics::Metrics;
        use storwatch_collector::queue::{Queue, QueueOptions};
        let (q, _) = Queue::open(
            &queue,
            QueueOptions::default(),
            Arc::new(Metrics::default()),
        )
        .unwrap();
        let read = q.read_records(0, 1 << 20).unwrap();
        assert_eq!(read.records().count(), 6);
        assert_eq!(
            q.load_cursor("rw"),
            read.ends[2],
            "the saved cursor is at the end of the third record, not past the fourth"
        );
    }
    hold.store(false, Ordering::SeqCst);
    c.start_again();
    assert!(backlog_drained(&c, "rw"));
    for k in 0..6 {
        assert_eq!(delivered(k), 100, "record {k}");
    }
    assert_eq!(c.metric("output_dead_lettered_total{output=\"rw\"}"), 0);
}
