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
use storwatch_collector::target::{Target, Targets};
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
        // as though the outputs wrote to databases "x", "storwatch" and bucket "sw"
        targets: std::sync::RwLock::new(Arc::new(
            Targets::new(
                &["telegraf".into(), "site/rp_1m".into()],
                vec![
                    ("x".into(), String::new()),
                    ("storwatch".into(), String::new()),
                    ("sw".into(), String::new()),
                ],
            )
            .unwrap(),
        )),
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
    // without a bucket or a db: the outputs' own database
    let (status, _, body) = send(
        &f,
        write(
            "/api/v2/write?org=site&precision=ms",
            &format!("m v=1 {t}\n"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, _, body) = send(&f, write("/write?precision=ms", &format!("m v=2 {t}\n"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert!(
        queued(&f).ends_with(&format!("m v=1 {t}000000\nm v=2 {t}000000\n")),
        "{}",
        queued(&f)
    );
}

/// The records of the queue as (target name, lines); "" is the default target.
fn queued_targets(f: &Fixture) -> Vec<(String, String)> {
    let (recs, _) = f.state.queue.read_from(0, 1 << 30).unwrap();
    recs.iter()
        .map(|r| {
            let (t, lines) = Target::of_record(r).unwrap();
            (t.name(), String::from_utf8(lines.to_vec()).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn each_request_goes_to_the_database_it_names_when_allowed() {
    let f = fixture();
    let line = format!("m v=1 {}000000000\n", now_s());
    for uri in [
        "/write?db=telegraf",
        "/write?db=site&rp=rp_1m",
        "/api/v2/write?org=o&bucket=site%2Frp_1m",
        "/api/v2/write?org=o&bucket=telegraf",
        "/api/v3/write_lp?db=telegraf",
        "/write?db=storwatch",
        "/write?db=x",
        "/api/v2/write?org=o&bucket=sw",
    ] {
        let (s, _, text) = send(&f, write(uri, &line)).await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{uri}: {text}");
    }
    let names: Vec<String> = queued_targets(&f).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        names,
        [
            "telegraf",
            "site/rp_1m",
            "site/rp_1m",
            "telegraf",
            "telegraf",
            "",
            "",
            ""
        ]
    );
    assert!(queued_targets(&f).iter().all(|(_, l)| *l == line));
}

#[tokio::test]
async fn a_database_not_allowed_is_refused_before_the_body_is_read() {
    let f = fixture();
    for (uri, status, want) in [
        (
            "/write?db=other",
            403,
            r#"{"error":"database \"other\" is not allowed"#,
        ),
        ("/write?db=site", 403, r#"\"site\" is not allowed"#),
        (
            "/write?db=telegraf&rp=other",
            403,
            r#"\"telegraf/other\" is not allowed"#,
        ),
        (
            "/write?db=storwatch&rp=rp_1h",
            403,
            r#"\"storwatch/rp_1h\""#,
        ),
        ("/api/v2/write?bucket=other", 403, r#""code":"forbidden""#),
        (
            "/api/v3/write_lp?db=other",
            403,
            r#"{"error":"database \"other\""#,
        ),
        (
            "/write?db=a%22b",
            400,
            r#"invalid database name \"a\\\"b\""#,
        ),
        ("/write?db=a%0Ab", 400, "control characters"),
        (
            "/write?db=telegraf&rp=x%0D",
            400,
            "invalid retention policy name",
        ),
        ("/write?db=a%2Fb%2Fc", 400, "'/' are not allowed"),
    ] {
        let (s, h, text) = send(&f, write(uri, "m v=1 1\n")).await;
        assert_eq!(s.as_u16(), status, "{uri}: {text}");
        assert!(text.contains(want), "{uri}: {text}");
        assert!(!h["X-Influxdb-Error"].is_empty());
    }
    let long = format!("/write?db={}", "d".repeat(300));
    let (s, _, text) = send(&f, write(&long, "m v=1 1\n")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert!(queued(&f).is_empty());
    // a stranger learns nothing about the targets
    let req = Request::post("/write?db=other")
        .body(Body::from("m v=1"))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::UNAUTHORIZED);
    let (_, _, m) = send(&f, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert!(
        m.contains("storwatch_collector_target_refused_total 11"),
        "{m}"
    );
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri)
        .header("Authorization", format!("Token {TOKEN}"))
        .body(Body::empty())
        .unwrap()
}

fn form(uri: &str, body: &str) -> Request<Body> {
    post(uri)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn query_answers_create_and_show_databases_as_influxdb_does() {
    let f = fixture();
    // Telegraf: POST, form body
    let (s, h, text) = send(&f, form("/query", "q=CREATE+DATABASE+%22telegraf%22")).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert_eq!(text, r#"{"results":[{"statement_id":0}]}"#);
    assert_eq!(h["Content-Type"], "application/json");
    // influxdb-python: POST with q in the URL; the influx CLI: GET
    let (s, _, text) = send(&f, write("/query?q=CREATE%20DATABASE%20storwatch", "")).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let (s, _, text) = send(&f, get("/query?q=SHOW%20DATABASES")).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"results": [{"statement_id": 0, "series": [{
            "name": "databases",
            "columns": ["name"],
            "values": [["site"], ["storwatch"], ["sw"], ["telegraf"], ["x"]]
        }]}]})
    );
    let (s, _, text) = send(
        &f,
        get("/query?q=create%20database%20x%3B%20show%20databases&db=x&epoch=ns"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(j["results"][0], serde_json::json!({"statement_id": 0}));
    assert_eq!(j["results"][1]["statement_id"], 1);
    assert_eq!(j["results"][1]["series"][0]["name"], "databases");
    // the influx CLI's `use site.rp_1m`: the retention policies targets.allow names
    let (s, _, text) = send(
        &f,
        get("/query?q=SHOW%20RETENTION%20POLICIES%20ON%20%22site%22"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{text}");
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        j["results"][0]["series"][0],
        serde_json::json!({"columns": ["name"], "values": [["rp_1m"]]})
    );
    let (_, _, text) = send(&f, get("/query?q=SHOW%20RETENTION%20POLICIES&db=other")).await;
    assert_eq!(
        text,
        r#"{"results":[{"error":"database not found: other","statement_id":0}]}"#
    );
    let (_, _, text) = send(&f, get("/query?q=SHOW%20RETENTION%20POLICIES")).await;
    assert!(text.contains("database name required"), "{text}");
    // credentials as on /write: u/p, Basic, Token; none is 401
    let req = Request::get("/query?q=SHOW%20DATABASES&u=a&p=".to_string() + TOKEN)
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::OK);
    let req = Request::post("/query")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("q=SHOW+DATABASES&u=a&p={TOKEN}")))
        .unwrap();
    assert_eq!(send(&f, req).await.0, StatusCode::OK);
    let req = Request::get("/query?q=SHOW%20DATABASES")
        .body(Body::empty())
        .unwrap();
    let (s, _, text) = send(&f, req).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(text, r#"{"error":"unauthorized access"}"#);
}

#[tokio::test]
async fn query_refuses_everything_else_clearly() {
    let f = fixture();
    for (req, status, want) in [
        (
            get("/query?q=CREATE%20DATABASE%20other"),
            403,
            r#"{"error":"database \"other\" is not allowed"#,
        ),
        (
            get("/query?q=CREATE%20DATABASE%20%22a%0Ab%22"),
            400,
            "invalid database name",
        ),
        (
            get("/query?q=CREATE%20DATABASE%20%22a%5C%22b%22"),
            400,
            "invalid database name",
        ),
        (
            get("/query?q=SELECT%20*%20FROM%20cpu"),
            400,
            "answers CREATE DATABASE, SHOW DATABASES and SHOW RETENTION POLICIES only, not SELECT *",
        ),
        (
            get("/query?q=DROP%20DATABASE%20x"),
            400,
            "not DROP DATABASE",
        ),
        (
            get("/query?q=CREATE%20DATABASE%20x%3B%20DROP%20DATABASE%20x"),
            400,
            "not DROP DATABASE",
        ),
        (get("/query?q=SHOW%20%22unterminated"), 400, "unterminated"),
        (get("/query"), 400, r#"missing required parameter \"q\""#),
        (get("/query?q=%3B%3B"), 400, "missing required parameter"),
        (form("/query", "q=%ZZ"), 400, "error"),
        (
            get("/query?q=SHOW%20DATABASES&q=SHOW%20DATABASES"),
            400,
            "cannot read the query string: duplicate field",
        ),
        (
            get(&format!("/query?q={}", "x".repeat(20_000))),
            413,
            "query longer than 16384 bytes",
        ),
        (
            form("/query", &format!("q={}", "x".repeat(70_000))),
            413,
            "query body larger than",
        ),
    ] {
        let uri = req.uri().to_string();
        let (s, _, text) = send(&f, req).await;
        assert_eq!(s.as_u16(), status, "{}: {text}", &uri[..uri.len().min(80)]);
        assert!(text.contains(want), "{}: {text}", &uri[..uri.len().min(80)]);
        assert!(text.starts_with("{\"error\":"), "{text}");
    }
    // nothing was created, nothing queued
    assert!(queued(&f).is_empty());
}

#[tokio::test]
async fn v3_write_lp_answers_as_influxdb_3() {
    let f = fixture();
    let t = now_s();
    // auto precision: each timestamp by its magnitude
    let body = format!("m v=1 {t}\nm v=2 {t}123\nm v=3 {t}123456\nm v=4 {t}123456789\n");
    let (s, h, text) = send(&f, write("/api/v3/write_lp?db=x&no_sync=true", &body)).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{text}");
    assert_eq!(h["X-Storwatch-Accepted"], "4");
    assert_eq!(
        queued(&f),
        format!("m v=1 {t}000000000\nm v=2 {t}123000000\nm v=3 {t}123456000\nm v=4 {t}123456789\n")
    );
    let (s, _, text) = send(
        &f,
        write(
            "/api/v3/write_lp?db=x&precision=second",
            &format!("m v=5 {t}\n"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{text}");
    assert!(queued(&f).ends_with(&format!("m v=5 {t}000000000\n")));
    for (q, want) in [
        (
            "precision=ns&accept_partial=maybe",
            "invalid accept_partial",
        ),
        ("precision=n", r#"invalid precision \"n\""#),
    ] {
        let (s, _, text) = send(
            &f,
            write(&format!("/api/v3/write_lp?db=x&{q}"), "m v=1 1\n"),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains(want), "{text}");
    }
    // partial write: the good lines are kept, the bad ones quoted back
    let before = queued(&f).len();
    let body = format!("m v=6 {t}000000000\nm v= {t}000000000\n");
    let (s, h, text) = send(&f, write("/api/v3/write_lp?db=x", &body)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(h["X-Storwatch-Accepted"], "1");
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(j["error"], "partial write of line protocol occurred");
    assert_eq!(j["data"][0]["original_line"], format!("m v= {t}000000000"));
    assert_eq!(j["data"][0]["line_number"], 2);
    assert!(j["data"][0]["error_message"]
        .as_str()
        .unwrap()
        .contains("unable to parse"));
    assert!(queued(&f)[before..].contains("m v=6"));
    // accept_partial=false: nothing of the body is kept
    let before = queued(&f).len();
    let body = format!("m v=7 {t}000000000\nm v=\"x\" {t}000000000\nm v= 1\n");
    let (s, h, text) = send(
        &f,
        write("/api/v3/write_lp?db=x&accept_partial=false", &body),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(h["X-Storwatch-Accepted"], "0");
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(j["error"], "parsing failed for write_lp endpoint");
    assert_eq!(j["data"]["line_number"], 2, "{text}");
    assert_eq!(
        j["data"]["original_line"],
        format!("m v=\"x\" {t}000000000")
    );
    assert_eq!(queued(&f).len(), before);
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
