//! The HTTP routes: `/write` (v1), `/api/v2/write`, `/ping`, `/health`, `/metrics`.
//!
//! A write is answered only after its accepted lines are fsync'd in the queue. Answers follow
//! InfluxDB's shapes (`{"error": …}` on v1, `{"code": …, "message": …}` on v2) so existing clients
//! understand them, plus a `lines` array naming every refused line with its reason and the
//! headers `X-Storwatch-Accepted` / `X-Storwatch-Rejected`.

use std::io::Read as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use serde::Deserialize;

use crate::auth::{presented_token, RateLimiter, Tokens};
use crate::config::{Limits, QueueConfig};
use crate::heartbeat::LastSeen;
use crate::ingest::{validate, LineLimits, Precision, TypeMap, Validated};
use crate::metrics::Metrics;
use crate::queue::Queue;

/// Everything the handlers share.
#[derive(Debug)]
pub struct AppState {
    /// Accepted tokens; `None` runs open (only allowed on loopback, checked at start-up).
    pub tokens: Option<Tokens>,
    pub limiter: RateLimiter,
    pub queue: Arc<Queue>,
    pub types: TypeMap,
    pub last_seen: Arc<LastSeen>,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    pub queue_cfg: QueueConfig,
    pub host_tag: String,
    /// Bodies being inflated and validated at once (one per core): bounds the memory of
    /// decompressed bodies however many clients send at the same time.
    pub work_slots: tokio::sync::Semaphore,
}

/// The router over a shared state.
pub fn app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/write", post(write_v1))
        .route("/api/v2/write", post(write_v2))
        .route("/ping", get(ping).head(ping))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .with_state(state)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    V1,
    V2,
}

/// Query parameters of `/write` and `/api/v2/write` (those of the other version are ignored).
#[derive(Debug, Default, Deserialize)]
pub struct WriteParams {
    db: Option<String>,
    #[allow(dead_code)]
    rp: Option<String>,
    precision: Option<String>,
    #[allow(dead_code)]
    u: Option<String>,
    p: Option<String>,
    #[allow(dead_code)]
    org: Option<String>,
    bucket: Option<String>,
}

fn error(flavor: Flavor, status: StatusCode, code: &str, message: &str) -> Response {
    let body = match flavor {
        Flavor::V1 => serde_json::json!({ "error": message }),
        Flavor::V2 => serde_json::json!({ "code": code, "message": message }),
    };
    let mut r = (status, axum::Json(body)).into_response();
    r.headers_mut()
        .insert("X-Influxdb-Error", header_value(message));
    r
}

fn header_value(s: &str) -> HeaderValue {
    let clean: String = s
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .take(200)
        .collect();
    HeaderValue::from_str(&clean).unwrap_or_else(|_| HeaderValue::from_static("error"))
}

fn with_retry_after(mut r: Response, secs: u64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

async fn write_v1(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if q.db.as_deref().unwrap_or("").is_empty() {
        st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
        return error(
            Flavor::V1,
            StatusCode::BAD_REQUEST,
            "invalid",
            "database is required",
        );
    }
    write(st, Flavor::V1, q, headers, body).await
}

async fn write_v2(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if q.bucket.as_deref().unwrap_or("").is_empty() {
        st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
        return error(
            Flavor::V2,
            StatusCode::BAD_REQUEST,
            "invalid",
            "bucket is required",
        );
    }
    write(st, Flavor::V2, q, headers, body).await
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

async fn write(
    st: Arc<AppState>,
    flavor: Flavor,
    q: WriteParams,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let m = &st.metrics;
    m.write_requests.fetch_add(1, Ordering::Relaxed);

    // Who is it? The answer to a stranger says nothing about why.
    let client = match &st.tokens {
        None => "open".to_string(),
        Some(tokens) => {
            let name = presented_token(&headers, q.p.as_deref())
                .and_then(|t| tokens.check(&t).map(str::to_string));
            match name {
                Some(n) => n,
                None => {
                    m.unauthorized.fetch_add(1, Ordering::Relaxed);
                    return error(
                        flavor,
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "unauthorized access",
                    );
                }
            }
        }
    };
    let Some(precision) = Precision::parse(q.precision.as_deref().unwrap_or("ns")) else {
        return error(
            flavor,
            StatusCode::BAD_REQUEST,
            "invalid",
            "invalid precision",
        );
    };

    // Above the high watermark the backlog must drain first: ask the client to come back.
    let backlog = st.queue.durable_end().saturating_sub(m.min_cursor());
    if backlog > st.queue_cfg.high_watermark_bytes {
        m.overloaded.fetch_add(1, Ordering::Relaxed);
        let r = error(
            flavor,
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "queue above its high watermark; retry later",
        );
        return with_retry_after(r, st.queue_cfg.retry_after_s);
    }

    let max_body = st.limits.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        m.too_large.fetch_add(1, Ordering::Relaxed);
        return error(
            flavor,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!("body larger than {max_body} bytes"),
        );
    }
    let timeout = Duration::from_secs(st.limits.body_timeout_s.max(1));
    let capacity = declared.map_or(64 << 10, |n| n as usize).min(max_body);
    let raw: Bytes = match tokio::time::timeout(timeout, read_body(body, capacity, max_body)).await
    {
        Ok(Ok(b)) => b,
        Ok(Err(BodyError::TooLarge)) => {
            m.too_large.fetch_add(1, Ordering::Relaxed);
            return error(
                flavor,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request too large",
                &format!("body larger than {max_body} bytes"),
            );
        }
        Ok(Err(BodyError::Read)) => {
            return error(
                flavor,
                StatusCode::BAD_REQUEST,
                "invalid",
                "cannot read the body",
            );
        }
        Err(_) => {
            m.body_timeouts.fetch_add(1, Ordering::Relaxed);
            return error(
                flavor,
                StatusCode::REQUEST_TIMEOUT,
                "request timeout",
                &format!("body not received within {} s", timeout.as_secs()),
            );
        }
    };
    m.bytes_received
        .fetch_add(raw.len() as u64, Ordering::Relaxed);

    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let gzip = match encoding.as_str() {
        "gzip" | "x-gzip" => true,
        "" | "identity" => false,
        other => {
            return error(
                flavor,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid",
                &format!("unsupported Content-Encoding {other:?}"),
            )
        }
    };

    // Decompression and parsing are CPU work: keep them off the connection tasks, one per core.
    let Ok(_slot) = st.work_slots.acquire().await else {
        return error(
            flavor,
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "shutting down",
        );
    };
    let st2 = st.clone();
    let client2 = client.clone();
    let work = tokio::task::spawn_blocking(move || {
        decode_and_validate(&st2, &client2, raw, gzip, precision)
    });
    let (v, payload) = match work.await {
        Ok(Ok(v)) => v,
        Ok(Err(r)) => return r.into_response(flavor, &st.metrics),
        Err(_) => {
            return error(
                flavor,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
                "validation failed",
            )
        }
    };

    if v.accepted_lines > 0 {
        if let Err(e) = st.queue.append(payload).await {
            tracing::error!(error = %e, "queue append failed");
            return error(
                flavor,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
                "cannot store the data",
            );
        }
        st.last_seen
            .seen(v.hosts.iter(), now_ns().div_euclid(1_000_000_000));
    }
    m.lines_accepted
        .fetch_add(v.accepted_lines, Ordering::Relaxed);
    m.lines_rejected
        .fetch_add(v.rejected.len() as u64, Ordering::Relaxed);

    let mut resp = if v.rejected.is_empty() {
        StatusCode::NO_CONTENT.into_response()
    } else {
        tracing::info!(client = %client, accepted = v.accepted_lines, rejected = v.rejected.len(), first = %v.rejected[0].reason, "partial write");
        let mut msg = String::from("partial write:");
        for r in v.rejected.iter().take(20) {
            msg.push_str(&format!(" line {}: {};", r.line, r.reason));
        }
        if v.rejected.len() > 20 {
            msg.push_str(&format!(" and {} more;", v.rejected.len() - 20));
        }
        msg.push_str(&format!(
            " accepted={} rejected={}",
            v.accepted_lines,
            v.rejected.len()
        ));
        let lines: Vec<_> = v
            .rejected
            .iter()
            .take(1000)
            .map(|r| serde_json::json!({"line_number": r.line, "error_message": r.reason}))
            .collect();
        let body = match flavor {
            Flavor::V1 => serde_json::json!({ "error": msg, "lines": lines }),
            Flavor::V2 => serde_json::json!({ "code": "invalid", "message": msg, "lines": lines }),
        };
        let mut r = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        r.headers_mut()
            .insert("X-Influxdb-Error", header_value(&msg));
        r
    };
    let h = resp.headers_mut();
    h.insert("X-Storwatch-Accepted", HeaderValue::from(v.accepted_lines));
    h.insert(
        "X-Storwatch-Rejected",
        HeaderValue::from(v.rejected.len() as u64),
    );
    resp
}

enum BodyError {
    TooLarge,
    Read,
}

/// Reads a body into one buffer sized from Content-Length, refusing more than `max` bytes.
async fn read_body(mut body: Body, capacity: usize, max: usize) -> Result<Bytes, BodyError> {
    let mut buf = bytes::BytesMut::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Read)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// A failure before validation finished.
enum Refusal {
    TooLarge(usize),
    BadGzip,
    NotUtf8,
    RateLimited(u64),
    Internal,
}

impl Refusal {
    fn into_response(self, flavor: Flavor, m: &Metrics) -> Response {
        match self {
            Refusal::TooLarge(n) => {
                m.too_large.fetch_add(1, Ordering::Relaxed);
                error(
                    flavor,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request too large",
                    &format!("decompressed body larger than {n} bytes"),
                )
            }
            Refusal::BadGzip => error(
                flavor,
                StatusCode::BAD_REQUEST,
                "invalid",
                "body is not valid gzip",
            ),
            Refusal::NotUtf8 => error(
                flavor,
                StatusCode::BAD_REQUEST,
                "invalid",
                "body is not UTF-8",
            ),
            Refusal::RateLimited(wait) => {
                m.rate_limited.fetch_add(1, Ordering::Relaxed);
                let r = error(
                    flavor,
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many requests",
                    "rate limit exceeded for this token",
                );
                with_retry_after(r, wait)
            }
            Refusal::Internal => error(
                flavor,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
                "cannot save field types",
            ),
        }
    }
}

/// Inflates and validates a body; returns the verdict and the bytes to queue (the body itself
/// when every line was accepted as sent, else the accepted lines).
fn decode_and_validate(
    st: &AppState,
    client: &str,
    raw: Bytes,
    gzip: bool,
    precision: Precision,
) -> Result<(Validated, Bytes), Refusal> {
    let max = st.limits.max_decompressed_bytes;
    let bytes: Bytes = if gzip {
        let mut out = Vec::with_capacity((raw.len() * 4).min(max));
        // Read one byte past the limit to tell "exactly at the limit" from "beyond it".
        let mut dec = flate2::read::MultiGzDecoder::new(&raw[..]).take(max as u64 + 1);
        if dec.read_to_end(&mut out).is_err() {
            return Err(Refusal::BadGzip);
        }
        if out.len() > max {
            return Err(Refusal::TooLarge(max));
        }
        Bytes::from(out)
    } else {
        if raw.len() > max {
            return Err(Refusal::TooLarge(max));
        }
        raw
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| Refusal::NotUtf8)?;
    // The per-token rate limit counts lines offered, good or bad, and is applied before
    // validation so that a refused request neither costs the parsing nor teaches field types.
    let newlines = bytecount(&bytes, b'\n');
    let offered = newlines + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    st.limiter
        .take(client, offered, Instant::now())
        .map_err(Refusal::RateLimited)?;
    let lim = LineLimits {
        max_line_bytes: st.limits.max_line_bytes,
        max_future_ns: secs_to_ns(st.limits.max_future_s),
        max_past_ns: secs_to_ns(st.limits.max_past_s),
    };
    let mut v =
        validate(text, precision, now_ns(), &lim, &st.types, &st.host_tag).map_err(|e| {
            tracing::error!(error = %e, "cannot save the field-type map");
            Refusal::Internal
        })?;
    let payload = if v.verbatim {
        bytes
    } else {
        Bytes::from(std::mem::take(&mut v.accepted).into_bytes())
    };
    Ok((v, payload))
}

fn bytecount(b: &[u8], needle: u8) -> u64 {
    b.iter().filter(|c| **c == needle).count() as u64
}

fn secs_to_ns(s: u64) -> i64 {
    i64::try_from(s)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000_000)
}

async fn ping() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        "X-Influxdb-Version",
        HeaderValue::from_static(concat!("storwatch-collector-", env!("CARGO_PKG_VERSION"))),
    );
    r.headers_mut()
        .insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    r
}

async fn health(State(st): State<Arc<AppState>>) -> Response {
    let end = st.queue.durable_end();
    let backlog = end.saturating_sub(st.metrics.min_cursor());
    let over = backlog > st.queue_cfg.high_watermark_bytes;
    let outputs: Vec<_> = st
        .metrics
        .outputs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|o| {
            serde_json::json!({
                "name": o.name,
                "backlog_bytes": end.saturating_sub(o.cursor.load(Ordering::Relaxed)),
                "auth_errors": o.auth_errors.load(Ordering::Relaxed),
                "dead_lettered": o.dead_lettered.load(Ordering::Relaxed),
            })
        })
        .collect();
    let body = serde_json::json!({
        "name": "storwatch-collector",
        "version": env!("CARGO_PKG_VERSION"),
        "status": if over { "warn" } else { "pass" },
        "message": if over { "queue above its high watermark: writes are refused with 503" } else { "ready for writes" },
        "queue_backlog_bytes": backlog,
        "outputs": outputs,
    });
    let code = if over {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, axum::Json(body)).into_response()
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut r = st.metrics.render().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
