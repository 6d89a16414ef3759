//! Answers a local InfluxDB 1.x cannot give (v2 whole-batch 400, 422, v3 partial-write JSON,
//! 429 with Retry-After, 413, 401), from a small fake server, and what the forwarder does with
//! each: every good line stored, every bad line (and only those) in the dead-letter file.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::Read as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use storwatch_collector::config::{Api, OutputConfig};
use storwatch_collector::forward::{Forwarder, Output};
use storwatch_collector::metrics::Metrics;
use storwatch_collector::target::Target;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// v2: any batch holding a bad line is refused whole with this status.
    WholeBatch(u16),
    /// v3: bad lines named in partial-write JSON, the rest stored.
    V3Partial,
    /// 429 with Retry-After: 1 for the first `n` requests.
    TooMany(usize),
    /// 413 for batches of more than `n` lines.
    MaxLines(usize),
    /// 401 for the first `n` requests.
    Unauthorized(usize),
}

#[derive(Default)]
struct Fake {
    stored: BTreeSet<String>,
    requests: Vec<(Instant, usize)>,
    auth: Vec<String>,
}

type Shared = Arc<(Mode, Mutex<Fake>)>;

fn is_bad(line: &str) -> bool {
    line.starts_with("bad")
}

async fn handle(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let text = if headers.get("content-encoding").is_some_and(|v| v == "gzip") {
        let mut out = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut out)
            .unwrap();
        out
    } else {
        String::from_utf8(body.to_vec()).unwrap()
    };
    let lines: Vec<&str> = text.lines().collect();
    let (mode, fake) = &*s;
    let mut f = fake.lock().unwrap();
    f.requests.push((Instant::now(), lines.len()));
    if let Some(a) = headers.get("authorization") {
        f.auth.push(a.to_str().unwrap().to_string());
    }
    let n = f.requests.len();
    match *mode {
        Mode::WholeBatch(code) if lines.iter().any(|l| is_bad(l)) => {
            let body = r#"{"code":"invalid","message":"unable to parse points"}"#;
            return (StatusCode::from_u16(code).unwrap(), body).into_response();
        }
        Mode::V3Partial => {
            let bad: Vec<_> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| is_bad(l))
                .map(|(i, l)| serde_json::json!({"original_line": l, "line_number": i + 1, "error_message": "invalid column type"}))
                .collect();
            for l in lines.iter().filter(|l| !is_bad(l)) {
                f.stored.insert(l.to_string());
            }
            if !bad.is_empty() {
                let body = serde_json::json!({"error": "partial write of line protocol occurred", "data": bad});
                return (StatusCode::BAD_REQUEST, body.to_string()).into_response();
            }
            return StatusCode::NO_CONTENT.into_response();
        }
        Mode::TooMany(k) if n <= k => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("Retry-After", "1")],
                "slow down",
            )
                .into_response();
        }
        Mode::MaxLines(k) if lines.len() > k => {
            return (StatusCode::PAYLOAD_TOO_LARGE, "too large").into_response();
        }
        Mode::Unauthorized(k) if n <= k => {
            return (
                StatusCode::UNAUTHORIZED,
                r#"{"code":"unauthorized","message":"unauthorized access"}"#,
            )
                .into_response();
        }
        _ => {}
    }
    for l in lines {
        f.stored.insert(l.to_string());
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn fake(mode: Mode) -> (String, Shared) {
    let shared: Shared = Arc::new((mode, Mutex::new(Fake::default())));
    let app = Router::new()
        .route("/api/v2/write", post(handle))
        .route("/api/v3/write_lp", post(handle))
        .route("/write", post(handle))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), shared)
}

struct Run {
    fwd: Forwarder,
    dir: tempfile::TempDir,
}

fn forwarder(url: &str, api: Api, tweak: impl FnOnce(&mut OutputConfig)) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "secret-output-token\n").unwrap();
    std::fs::set_permissions(
        dir.path().join("token"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let mut cfg = OutputConfig {
        name: Some("fake".into()),
        url: url.into(),
        api: Some(api),
        db: Some("sw".into()),
        org: Some("site".into()),
        bucket: Some("sw".into()),
        token_file: Some(dir.path().join("token")),
        backoff_min_ms: 10,
        backoff_max_s: 2,
        auth_retry_s: 1,
        ..OutputConfig::default()
    };
    tweak(&mut cfg);
    let out = Output::resolve(&cfg).unwrap();
    let m = Metrics::default().add_output("fake");
    let fwd = Forwarder::new(out, m, dir.path().to_path_buf()).unwrap();
    Run { fwd, dir }
}

fn batch(n: usize, bad: &[usize]) -> Vec<String> {
    (0..n)
        .map(|i| {
            if bad.contains(&i) {
                format!("bad line {i}")
            } else {
                format!("m,host=h{i} v={i}i {i}")
            }
        })
        .collect()
}

fn dead_letters(run: &Run) -> Vec<String> {
    let text = std::fs::read_to_string(run.fwd.dead_letter_path()).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

async fn deliver(run: &Run, lines: &[String]) {
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (_tx, mut rx) = watch::channel(false);
    tokio::time::timeout(
        Duration::from_secs(30),
        run.fwd.deliver(&refs, &Target::default(), &mut rx),
    )
    .await
    .expect("delivery finished")
    .unwrap();
}

fn good(lines: &[String]) -> BTreeSet<String> {
    lines.iter().filter(|l| !is_bad(l)).cloned().collect()
}

#[tokio::test]
async fn v2_whole_batch_400_is_bisected_to_the_bad_lines() {
    let (url, fake) = fake(Mode::WholeBatch(400)).await;
    let run = forwarder(&url, Api::V2, |_| {});
    let lines = batch(100, &[7, 55]);
    deliver(&run, &lines).await;
    assert_eq!(fake.1.lock().unwrap().stored, good(&lines));
    assert_eq!(dead_letters(&run), vec!["bad line 7", "bad line 55"]);
    let text = std::fs::read_to_string(run.fwd.dead_letter_path()).unwrap();
    assert!(
        text.contains("reason=400 Bad Request: unable to parse points"),
        "{text}"
    );
    assert_eq!(fake.1.lock().unwrap().auth[0], "Token secret-output-token");
}

#[tokio::test]
async fn v2_422_is_handled_like_bad_data() {
    let (url, fake) = fake(Mode::WholeBatch(422)).await;
    let run = forwarder(&url, Api::V2, |_| {});
    let lines = batch(20, &[0]);
    deliver(&run, &lines).await;
    assert_eq!(fake.1.lock().unwrap().stored, good(&lines));
    assert_eq!(dead_letters(&run), vec!["bad line 0"]);
}

#[tokio::test]
async fn v3_partial_write_dead_letters_only_the_named_lines() {
    let (url, fake) = fake(Mode::V3Partial).await;
    let run = forwarder(&url, Api::V3, |c| c.gzip = false);
    let lines = batch(50, &[3, 4, 49]);
    deliver(&run, &lines).await;
    let f = fake.1.lock().unwrap();
    assert_eq!(f.stored, good(&lines));
    // One request with the partial answer, one resend of the rest: no bisection needed.
    assert_eq!(f.requests.len(), 2);
    assert_eq!(
        dead_letters(&run),
        vec!["bad line 3", "bad line 4", "bad line 49"]
    );
    let text = std::fs::read_to_string(run.fwd.dead_letter_path()).unwrap();
    assert!(text.contains("reason=invalid column type"), "{text}");
}

#[tokio::test]
async fn retry_after_of_429_is_honoured() {
    let (url, fake) = fake(Mode::TooMany(2)).await;
    let run = forwarder(&url, Api::V2, |_| {});
    let lines = batch(10, &[]);
    deliver(&run, &lines).await;
    let f = fake.1.lock().unwrap();
    assert_eq!(f.stored, good(&lines));
    assert_eq!(f.requests.len(), 3);
    for w in f.requests.windows(2) {
        let gap = w[1].0 - w[0].0;
        assert!(gap >= Duration::from_millis(950), "waited only {gap:?}");
    }
    assert!(dead_letters(&run).is_empty());
}

#[tokio::test]
async fn a_413_splits_the_batch() {
    let (url, fake) = fake(Mode::MaxLines(30)).await;
    let run = forwarder(&url, Api::V1, |_| {});
    let lines = batch(200, &[]);
    deliver(&run, &lines).await;
    let f = fake.1.lock().unwrap();
    assert_eq!(f.stored, good(&lines));
    assert!(f.requests.iter().skip(1).any(|(_, n)| *n <= 30));
    assert!(dead_letters(&run).is_empty());
}

#[tokio::test]
async fn a_401_keeps_the_data_and_retries() {
    let (url, fake) = fake(Mode::Unauthorized(2)).await;
    let run = forwarder(&url, Api::V2, |_| {});
    let lines = batch(10, &[]);
    let t = Instant::now();
    deliver(&run, &lines).await;
    let f = fake.1.lock().unwrap();
    assert_eq!(f.stored, good(&lines));
    assert_eq!(f.requests.len(), 3);
    assert!(t.elapsed() >= Duration::from_secs(2), "retried slowly");
    assert!(dead_letters(&run).is_empty());
    let _ = &run.dir;
}

#[tokio::test]
async fn v1_basic_auth_from_user_password_token() {
    let (url, fake) = fake(Mode::WholeBatch(400)).await;
    let run = forwarder(&url, Api::V1, |c| {
        c.token_file = None;
    });
    std::fs::write(run.dir.path().join("up"), "writer:pw\n").unwrap();
    std::fs::set_permissions(
        run.dir.path().join("up"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let cfg = OutputConfig {
        url: url.clone(),
        db: Some("sw".into()),
        token_file: Some(run.dir.path().join("up")),
        ..OutputConfig::default()
    };
    let out = Output::resolve(&cfg).unwrap();
    let m = Arc::new(Metrics::default());
    let om = m.add_output("x");
    let fwd = Forwarder::new(out, om.clone(), run.dir.path().to_path_buf()).unwrap();
    let (_tx, mut rx) = watch::channel(false);
    fwd.deliver(&["m v=1 1"], &Target::default(), &mut rx)
        .await
        .unwrap();
    assert_eq!(fake.1.lock().unwrap().auth[0], "Basic d3JpdGVyOnB3");
    assert_eq!(om.lines_sent.load(Ordering::Relaxed), 1);
}
