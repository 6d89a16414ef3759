//! Which durable store for the queue: the collector's segment log (group commit) against redb,
//! both fsync'ing before a write is answered, with 8 concurrent writers.
//!
//! ```text
//! cargo bench -p storwatch-collector --bench queue_store
//! ```
//!
//! Payloads are 50 kB (about 200 agent lines, one agent report). redb is measured twice: one
//! write transaction per request (its natural use: every commit is durable on its own) and with
//! the same group commit the segment log does (one transaction for every request waiting).

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use redb::{Database, TableDefinition};
use storwatch_collector::metrics::Metrics;
use storwatch_collector::queue::{Queue, QueueOptions};

const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("queue");
const WRITERS: usize = 8;
/// Requests per writer: 500 in a benchmark run, 10 in the test suite's smoke run.
static PER_WRITER: AtomicUsize = AtomicUsize::new(500);

fn per_writer() -> usize {
    PER_WRITER.load(Ordering::Relaxed)
}
const PAYLOAD: usize = 50_000;

fn report(name: &str, t: Instant) {
    let n = (WRITERS * per_writer()) as f64;
    let s = t.elapsed().as_secs_f64();
    println!(
        "{name:<28} {:>8.0} requests/s {:>7.1} MB/s ({n} x {PAYLOAD} B in {s:.2} s)",
        n / s,
        n * PAYLOAD as f64 / s / 1e6
    );
}

fn segment_log(dir: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let (q, _) = Queue::open(dir, QueueOptions::default(), Arc::new(Metrics::default()))
        .expect("open queue");
    let t = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..WRITERS)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    for _ in 0..per_writer() {
                        q.append(vec![b'x'; PAYLOAD]).await.expect("append");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("join");
        }
    });
    report("segment log, group commit", t);
}

fn redb_per_request(dir: &Path) {
    let db = Arc::new(Database::create(dir.join("q.redb")).expect("redb"));
    let key = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (db, key) = (db.clone(), key.clone());
            std::thread::spawn(move || {
                let payload = vec![b'x'; PAYLOAD];
                for _ in 0..per_writer() {
                    let tx = db.begin_write().expect("begin");
                    {
                        let mut table = tx.open_table(TABLE).expect("table");
                        let k = key.fetch_add(1, Ordering::Relaxed);
                        table.insert(k, payload.as_slice()).expect("insert");
                    }
                    tx.commit().expect("commit");
                }
            })
        })
        .collect();
    for th in threads {
        th.join().expect("join");
    }
    report("redb, commit per request", t);
}

fn redb_grouped(dir: &Path) {
    let db = Database::create(dir.join("g.redb")).expect("redb");
    let (tx, rx) = mpsc::channel::<(Vec<u8>, mpsc::Sender<()>)>();
    let writer = std::thread::spawn(move || {
        let mut key = 0u64;
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            let w = db.begin_write().expect("begin");
            {
                let mut table = w.open_table(TABLE).expect("table");
                for (p, _) in &batch {
                    table.insert(key, p.as_slice()).expect("insert");
                    key += 1;
                }
            }
            w.commit().expect("commit");
            for (_, done) in batch {
                let _ = done.send(());
            }
        }
    });
    let t = Instant::now();
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..per_writer() {
                    let (done, wait) = mpsc::channel();
                    tx.send((vec![b'x'; PAYLOAD], done)).expect("send");
                    wait.recv().expect("ack");
                }
            })
        })
        .collect();
    for th in threads {
        th.join().expect("join");
    }
    report("redb, group commit", t);
    drop(tx);
    writer.join().expect("writer");
}

fn main() {
    // `cargo bench` passes --bench; `cargo test` (this bench has `test = true`) passes nothing:
    // then a smoke run of a few requests per writer, so that the bench cannot break unnoticed.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        PER_WRITER.store(10, Ordering::Relaxed);
    }
    let base = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    for (name, f) in [
        ("segment", segment_log as fn(&Path)),
        ("redb1", redb_per_request),
        ("redbg", redb_grouped),
    ] {
        let dir = base.join(format!("queue-store-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        f(&dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
