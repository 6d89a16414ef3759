//! Handler logic, driven with `tower::ServiceExt::oneshot` on `app(state)`: every answer a
//! client can get, and what ends up in the queue.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use storwatch_collector::config::{Limits, QueueConfig};
use storwatch_collector::heartbeat::LastSeen;
use storwatch_collector::http::auth::{RateLimiter, Tokens};
use storwatch_collector::http::{app, AppState};
use storwatch_collector::ingest::TypeMap;
use storwatch_collector::metrics::Metrics;
use storwatch_collector::queue::{Queue, QueueOptions};
use storwatch_test_support::{gzip, now_s};
use storwatch_wire::lp::{Backend, Backends};
use tower::ServiceExt;

const TOKEN: &str = "agents-token-0123456789";

struct Fixture {
    _dir: tempfile::TempDir,
    state: Arc<AppState>,
}

fn fixture_with(limits: Limits, queue_cfg: QueueConfig, tokens: Option<&str>) -> Fixture {
    fixture_for(limits, queue_cfg, tokens, Backends::one(Backend::V1))
}

fn fixture_for(
    limits: Limits,
    queue_cfg: QueueConfig,
    tokens: Option<&str>,
    backends: Backends,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::default());
    let (queue, _) = Queue::open(dir.path(), QueueOptions::default(), metrics.clone()).unwrap();
    let state = Arc::new(AppState {
        tokens: std::sync::RwLock::new(tokens.map(|t| Tokens::parse(t).unwrap())),
        limiter: RateLimiter::new(limits.rate_limit_lines_per_s, limits.rate_limit_burst_lines),
        queue,
        types: TypeMap::load(dir.path()).unwrap(),
        last_seen: Arc::new(LastSeen::load(None)),
        metrics,
        limits: std::sync::RwLock::new(Arc::new(limits)),
        queue_cfg: std::sync::RwLock::new(Arc::new(queue_cfg)),
        host_tag: "host".into(),
        backends,
        work_slots: tokio::sync::Semaphore::new(2),
        inflight_kib: tokio::sync::Semaphore::new(64 << 10),
    });
    Fixture { _dir: dir, state }
}

fn fixture() -> Fixture {
    fixture_with(
        Limits::default(),
        QueueConfig::default(),
        Some(&format!("agents:{TOKEN}\n")),
    )
}

async fn send(f: &Fixture, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let resp = app(f.state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn post(uri: &str) -> axum::http::request::Builder {
    Request::post(uri).header("Authorization", format!("Token {TOKEN}"))
}

fn write(uri: &str, body: &str) -> Request<Body> {
    post(uri).body(Body::from(body.to_string())).unwrap()
}

fn queued(f: &Fixture) -> String {
    let (recs, _) = f.state.queue.read_from(0, 1 << 30).unwrap();
    recs.into_iter()
        .map(|r| String::from_utf8(r).unwrap())
        .collect()
}

#[tokio::test]
async fn v1_write_is_acknowledged_after_it_is_queued() {
    let f = fixture();
    let t = now_s();
    let body = format!("disk,host=n1 util_pct=10 {t}\ndisk,host=n2 util_pct=20 {t}\n");
    let (status, h, _) = send(&f, write("/write?db=storwatch&precision=s", &body)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(h["X-Storwatch-Accepted"], "2");
    assert_eq!(
        queued(&f),
        format!("disk,host=n1 util_pct=10 {t}000000000\ndisk,host=n2 util_pct=20 {t}000000000\n")
    );
    assert!(f.state.last_seen.get("n1").is_some());
}

#[tokio::test]
async fn v2_write_with_gzip_and_token() {
    let f = fixture();
    let t = now_s() * 1000;
    let body = gzip(format!("net,host=n1 rx_bytes_per_s=5 {t}\n").as_bytes());
    let req = post("/api/v2/write?org=site&bucket=sw&precision=ms")
        .header("Content-Encoding", "gzip")
        .body(Body::from(body))
        .unwrap();
    let (status, _, _) = send(&f, req).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        queued(&f),
        format!("net,host=n1 rx_bytes_per_s=5 {t}000000\n")
    );
    // bucket is required on v2, db on v1
    let (status, _, body) = send(&f, write("/api/v2/write?org=site", "m v=1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("bucket is required"), "{body}");
    let (status, _, body) = send(&f, write("/write", "m v=1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("database is required"), "{body}");
}

#[tokio::test]
async fn missing_or_wrong_token_gets_an_opaque_401() {
    let f = fixture();
    let req = Request::post("/write?db=x")
        .body(Body::from("m v=1"))
        .unwrap();
    let (status, _, body) = send(&f, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, r#"{"error":"unauthorized access"}"#);
    let req = Request::post("/api/v2/write?bucket=x")
        .header("Authorization", "Token agents-token-0123456780")
        .body(Body::from("m v=1"))
        .unwrap();
    let (status, _, body) = send(&f, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        r#"{"code":"unauthorized","message":"unauthorized access"}"#
    );
    // v1 u/p and Basic are accepted
    let req = Request::post(format!("/write?db=x&u=agents&p={TOKEN}"))
        .body(Body::from("m v=1"))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::NO_CONTENT);
    assert_eq!(
        f.state
            .metrics
            .unauthorized
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    assert_eq!(
        queued(&f).lines().count(),
        1,
        "nothing from the strangers was queued"
    );
}

#[tokio::test]
async fn partial_write_names_lines_and_keeps_the_good_ones() {
    let f = fixture();
    let t = now_s();
    let body = format!(
        "disk,host=n1 util_pct=1 {t}\n\
         disk,host=n1 util_pct= {t}\n\
         disk,host=n1 util_pct=2 {t}\n\
         disk,host=n1 util_pct=\"high\" {t}\n\
         disk,host=n1 util_pct=3 {}\n",
        t + 86400
    );
    let (status, h, text) = send(&f, write("/write?db=x&precision=s", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(h["X-Storwatch-Accepted"], "2");
    assert_eq!(h["X-Storwatch-Rejected"], "3");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.starts_with("partial write: line 2: unable to parse"),
        "{msg}"
    );
    assert!(msg.contains("line 4: field type conflict"), "{msg}");
    assert!(msg.contains("line 5: timestamp"), "{msg}");
    assert!(msg.ends_with("accepted=2 rejected=3"), "{msg}");
    let nums: Vec<u64> = v["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["line_number"].as_u64().unwrap())
        .collect();
    assert_eq!(nums, vec![2, 4, 5]);
    assert_eq!(queued(&f).lines().count(), 2);
}

#[tokio::test]
async fn type_conflict_across_requests_is_caught() {
    let f = fixture();
    let (s, _, _) = send(
        &f,
        write("/write?db=x", "zpool,host=n1,pool=tank health=\"ONLINE\""),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, h, text) = send(
        &f,
        write("/write?db=x", "zpool,host=n1,pool=tank health=0i"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(h["X-Storwatch-Accepted"], "0");
    assert!(
        text.contains("is type integer, already exists as type string"),
        "{text}"
    );
}

#[tokio::test]
async fn oversized_body_and_gzip_bomb_get_413() {
    let limits = Limits {
        max_body_bytes: 1000,
        max_decompressed_bytes: 10_000,
        ..Limits::default()
    };
    let f = fixture_with(
        limits,
        QueueConfig::default(),
        Some(&format!("agents:{TOKEN}\n")),
    );
    let big = "m v=1\n".repeat(200);
    let (s, _, text) = send(&f, write("/write?db=x", &big)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(text.contains("body larger than 1000 bytes"), "{text}");
    // 1 MB of zeros compresses to about 1 kB: small on the wire, big once inflated.
    let bomb = gzip(&vec![b'0'; 1 << 20]);
    assert!(bomb.len() < 1100, "{}", bomb.len());
    let bomb = gzip(&vec![b'0'; 200_000]);
    let req = post("/write?db=x")
        .header("Content-Encoding", "gzip")
        .body(Body::from(bomb))
        .unwrap();
    let (s, _, text) = send(&f, req).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        text.contains("decompressed body larger than 10000 bytes"),
        "{text}"
    );
    // not gzip at all
    let req = post("/write?db=x")
        .header("Content-Encoding", "gzip")
        .body(Body::from("m v=1"))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::BAD_REQUEST);
    let req = post("/write?db=x")
        .header("Content-Encoding", "br")
        .body(Body::from("m v=1"))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(queued(&f), "");
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after() {
    let limits = Limits {
        rate_limit_lines_per_s: 10,
        rate_limit_burst_lines: 10,
        ..Limits::default()
    };
    let f = fixture_with(
        limits,
        QueueConfig::default(),
        Some(&format!("agents:{TOKEN}\n")),
    );
    let body = "m v=1\n".repeat(8);
    assert_eq!(
        send(&f, write("/write?db=x", &body)).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, h, _) = send(&f, write("/write?db=x", &body)).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(h["Retry-After"], "1");
    assert_eq!(queued(&f).lines().count(), 8);
}

#[tokio::test]
async fn above_the_high_watermark_answers_503() {
    let q = QueueConfig {
        high_watermark_bytes: 100,
        retry_after_s: 7,
        ..QueueConfig::default()
    };
    let f = fixture_with(Limits::default(), q, Some(&format!("agents:{TOKEN}\n")));
    // One output that has read nothing yet: everything is backlog.
    let _ = f.state.metrics.add_output("influx");
    let body = "m,host=a value=1\n".repeat(10);
    assert_eq!(
        send(&f, write("/write?db=x", &body)).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, h, _) = send(&f, write("/write?db=x", &body)).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(h["Retry-After"], "7");
    let (s, _, text) = send(&f, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert!(text.contains("\"status\":\"warn\""), "{text}");
}

#[tokio::test]
async fn ping_health_metrics_and_open_mode() {
    let f = fixture_with(Limits::default(), QueueConfig::default(), None);
    let (s, h, _) = send(&f, Request::get("/ping").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert!(h.contains_key("X-Influxdb-Version"));
    let (s, _, text) = send(&f, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(text.contains("\"status\":\"pass\""), "{text}");
    // open mode: no token needed
    let req = Request::post("/write?db=x")
        .body(Body::from("m v=1"))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::NO_CONTENT);
    let (s, _, text) = send(&f, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        text.contains("storwatch_collector_lines_accepted_total 1"),
        "{text}"
    );
    assert!(
        text.contains("storwatch_collector_queue_fsyncs_total 1"),
        "{text}"
    );
}

fn fixture_versions(versions: &[Backend]) -> Fixture {
    fixture_for(
        Limits::default(),
        QueueConfig::default(),
        Some(&format!("agents:{TOKEN}\n")),
        Backends::of(versions),
    )
}

#[tokio::test]
async fn answers_follow_the_outputs_influxdb_version() {
    let t = now_s();
    let body = format!("m v=1 {t}\nm v= {t}\nm,time=x v=2 {t}\n");

    // 1.x: a partial write, 400, the good line kept.
    let f = fixture_versions(&[Backend::V1]);
    let (s, h, text) = send(&f, write("/write?db=x&precision=s", &body)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(h["X-Storwatch-Accepted"], "1");
    assert!(text.contains("unable to parse 'm v= "), "{text}");
    assert!(
        text.contains("invalid tag key: input tag \\\"time\\\""),
        "{text}"
    );
    assert_eq!(queued(&f).lines().count(), 1);

    // 2.x: one line that does not parse refuses the whole body.
    let f = fixture_versions(&[Backend::V2]);
    let (s, h, text) = send(&f, write("/api/v2/write?bucket=x&precision=s", &body)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(h["X-Storwatch-Accepted"], "0");
    assert!(text.contains("nothing written"), "{text}");
    assert!(queued(&f).is_empty());
    // ... and what storage drops is a 422 with the rest kept.
    let (s, h, text) = send(
        &f,
        write(
            "/api/v2/write?bucket=x&precision=s",
            &format!("m v=1 {t}\nm time=1 {t}\n"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{text}");
    assert_eq!(h["X-Storwatch-Accepted"], "1");
    assert!(text.contains("\"code\":\"unprocessable entity\""), "{text}");

    // 3.x: unsigned integers are values, .5 is not a number.
    let f = fixture_versions(&[Backend::V3]);
    let (s, _, text) = send(
        &f,
        write("/write?db=x&precision=s", &format!("m u=1u {t}\n")),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{text}");
    let (s, _, text) = send(
        &f,
        write("/write?db=x&precision=s", &format!("m f=.5 {t}\n")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
}

#[tokio::test]
async fn precision_is_read_as_the_version_reads_it() {
    let t = now_s();
    // 1.x reads `us` as nanoseconds: the line is stored as sent.
    let f = fixture_versions(&[Backend::V1]);
    let ns = t * 1_000_000_000;
    let (s, _, text) = send(
        &f,
        write("/write?db=x&precision=us", &format!("m v=1 {ns}\n")),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(queued(&f), format!("m v=1 {ns}\n"));
    // /api/v2/write knows ns, us, ms, s only.
    let (s, _, text) = send(&f, write("/api/v2/write?bucket=x&precision=u", "m v=1\n")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(text.contains("invalid precision"), "{text}");
    // Outputs that read a precision differently: refused, with the reason.
    let f = fixture_versions(&[Backend::V1, Backend::V2]);
    let (s, _, text) = send(
        &f,
        write("/write?db=x&precision=us", &format!("m v=1 {t}\n")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        text.contains("nanoseconds to InfluxDB 1.x and microseconds to InfluxDB 2.x"),
        "{text}"
    );
    let (s, _, text) = send(
        &f,
        write("/write?db=x&precision=s", &format!("m v=1 {t}\n")),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{text}");
}

#[tokio::test]
async fn several_versions_accept_only_what_all_store() {
    let t = now_s();
    let f = fixture_versions(&[Backend::V1, Backend::V3]);
    let body = format!("m a=1u {t}\nm b=.5 {t}\nm c=0.5 {t}\n");
    let (s, h, text) = send(&f, write("/write?db=x&precision=s", &body)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(h["X-Storwatch-Accepted"], "1");
    assert!(text.contains("InfluxDB 1.x has no unsigned type"), "{text}");
    assert_eq!(queued(&f).lines().count(), 1);
}
