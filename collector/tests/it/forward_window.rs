//! The forwarder's window of batches in flight, against a fake output: `max_in_flight` requests
//! at once across queue records (a backlog drains with the output kept busy), and the cursor only
//! ever over a contiguous delivered prefix — a batch held back by the output holds the cursor
//! while later ones are delivered, and a crash then resends from it, losing nothing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use storwatch_collector::config::{Api, OutputConfig};
use storwatch_collector::forward::{Forwarder, Output};
use storwatch_collector::metrics::{Metrics, OutputMetrics};
use storwatch_collector::queue::{Queue, QueueOptions};
use tokio::sync::watch;

#[derive(Default)]
struct Fake {
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Requests are held until this many have been in flight at once (or two seconds have
    /// passed: a loaded machine may be slow to start the next request of the window, and a
    /// forwarder sending one at a time still ends its twelve requests within `wait`'s 30 s).
    hold_until: AtomicUsize,
    /// While set, a batch holding the line `blocked_line` is answered 503.
    blocking: AtomicBool,
    blocked_line: Mutex<String>,
    /// Every line acknowledged, with how many times.
    stored: Mutex<BTreeMap<String, usize>>,
    /// The first line of every request, in arrival order.
    requests: Mutex<Vec<String>>,
}

async fn handle(State(f): State<Arc<Fake>>, body: Bytes) -> StatusCode {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let now = f.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    f.most_in_flight.fetch_max(now, Ordering::SeqCst);
    f.requests
        .lock()
        .unwrap()
        .push(text.lines().next().unwrap_or("").to_string());
    let want = f.hold_until.load(Ordering::SeqCst);
    for _ in 0..200 {
        if f.most_in_flight.load(Ordering::SeqCst) >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let blocked = f.blocking.load(Ordering::SeqCst)
        && text
            .lines()
            .any(|l| l == f.blocked_line.lock().unwrap().as_str());
    f.in_flight.fetch_sub(1, Ordering::SeqCst);
    if blocked {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let mut stored = f.stored.lock().unwrap();
    for l in text.lines() {
        *stored.entry(l.to_string()).or_default() += 1;
    }
    StatusCode::NO_CONTENT
}

async fn fake() -> (String, Arc<Fake>) {
    let f = Arc::new(Fake::default());
    let app = Router::new()
        .route("/write", post(handle))
        .with_state(f.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), f)
}

/// Record `r` of the backlog: `n` lines.
fn record(r: usize, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            format!(
                "m,rec={r:02} v={i}i {}\n",
                1_700_000_000_000_000_000u64 + i as u64
            )
        })
        .collect::<String>()
        .into_bytes()
}

struct Setup {
    queue: Arc<Queue>,
    metrics: Arc<Metrics>,
    out: Arc<OutputMetrics>,
}

fn open(dir: &std::path::Path) -> Setup {
    let metrics = Arc::new(Metrics::default());
    let (queue, _) = Queue::open(dir, QueueOptions::default(), metrics.clone()).unwrap();
    let out = metrics.add_output("fake");
    Setup {
        queue,
        metrics,
        out,
    }
}

fn forwarder(
    s: &Setup,
    url: &str,
    tweak: impl FnOnce(&mut OutputConfig),
    dead: &std::path::Path,
) -> Forwarder {
    let mut cfg = OutputConfig {
        name: Some("fake".into()),
        url: format!("{url}/write"),
        api: Some(Api::V1),
        db: Some("sw".into()),
        gzip: false,
        backoff_min_ms: 10,
        backoff_max_s: 1,
        ..OutputConfig::default()
    };
    tweak(&mut cfg);
    Forwarder::new(
        Output::resolve(&cfg).unwrap(),
        s.out.clone(),
        dead.to_path_buf(),
    )
    .unwrap()
}

async fn wait(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

fn stored_lines_of(f: &Fake, rec: usize) -> usize {
    let prefix = format!("m,rec={rec:02} ");
    f.stored
        .lock()
        .unwrap()
        .keys()
        .filter(|l| l.starts_with(&prefix))
        .count()
}

/// Twelve records of one batch each, three in flight allowed: the output sees three requests at
/// once, never more, and gets every line once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_batches_in_flight_across_records() {
    let dir = tempfile::tempdir().unwrap();
    let (url, f) = fake().await;
    f.hold_until.store(3, Ordering::SeqCst);
    let s = open(dir.path());
    for r in 0..12 {
        s.queue.append(record(r, 100)).await.unwrap();
    }
    let fwd = forwarder(
        &s,
        &url,
        |c| {
            c.batch_lines = 100;
            c.max_in_flight = Some(3);
        },
        dir.path(),
    );
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(fwd.run(s.queue.clone(), s.metrics.clone(), stop));
    let end = s.queue.durable_end();
    wait("the cursor at the end of the backlog", || {
        s.out.cursor.load(Ordering::SeqCst) == end
    })
    .await;
    stop_tx.send_replace(true);
    task.await.unwrap();
    assert_eq!(f.most_in_flight.load(Ordering::SeqCst), 3);
    let stored = f.stored.lock().unwrap();
    assert_eq!(stored.len(), 1200);
    assert!(stored.values().all(|n| *n == 1), "a line sent twice");
    assert_eq!(s.queue.load_cursor("fake"), end);
}

/// One batch in the middle of the backlog refused (503) over and over: later batches are
/// delivered, the cursor stays before the refused one; a crash then, and a restart with the
/// output well again, delivers it, and nothing before the cursor is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_waits_for_a_batch_held_back_and_a_crash_resends_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let (url, f) = fake().await;
    f.hold_until.store(1, Ordering::SeqCst);
    // The first batch of record 2 (its line v=0) is refused.
    *f.blocked_line.lock().unwrap() = String::from_utf8(record(2, 1)).unwrap().trim().into();
    f.blocking.store(true, Ordering::SeqCst);
    let s = open(dir.path());
    let mut ends = Vec::new();
    for r in 0..10 {
        ends.push(s.queue.append(record(r, 100)).await.unwrap());
    }
    // Batches of 40 lines, reads of one record (2.5 kB each, reads of at most 3 × 1000 bytes).
    let tweak = |c: &mut OutputConfig| {
        c.batch_lines = 40;
        c.batch_bytes = 1000;
        c.max_in_flight = Some(3);
    };
    let (_stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(forwarder(&s, &url, tweak, dir.path()).run(
        s.queue.clone(),
        s.metrics.clone(),
        stop,
    ));
    wait("records 3 and 4 delivered past the refused batch", || {
        stored_lines_of(&f, 3) == 100 && stored_lines_of(&f, 4) == 100
    })
    .await;
    wait("the cursor after record 1", || {
        s.out.cursor.load(Ordering::SeqCst) == ends[1]
    })
    .await;
    assert!(stored_lines_of(&f, 2) < 100);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.out.cursor.load(Ordering::SeqCst), ends[1]);
    assert_eq!(s.queue.load_cursor("fake"), ends[1]);

    // Crash: the forwarder and the queue gone without another word.
    task.abort();
    let _ = task.await;
    drop(s);
    f.blocking.store(false, Ordering::SeqCst);
    let sent_before = f.requests.lock().unwrap().len();
    let s = open(dir.path());
    assert_eq!(s.queue.load_cursor("fake"), ends[1]);
    let (_stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(forwarder(&s, &url, tweak, dir.path()).run(
        s.queue.clone(),
        s.metrics.clone(),
        stop,
    ));
    wait("the cursor at the end after the restart", || {
        s.out.cursor.load(Ordering::SeqCst) == ends[9]
    })
    .await;
    task.abort();
    for r in 0..10 {
        assert_eq!(stored_lines_of(&f, r), 100, "record {r}");
    }
    let resent: Vec<String> = f.requests.lock().unwrap()[sent_before..].to_vec();
    assert!(
        resent
            .iter()
            .all(|l| !l.starts_with("m,rec=00") && !l.starts_with("m,rec=01")),
        "records before the cursor sent again: {resent:?}"
    );
    assert!(resent.iter().any(|l| l.starts_with("m,rec=02 v=0i")));
}
