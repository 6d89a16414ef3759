//! The write handlers (`/write`, `/api/v2/write`): who is it, may it write now, the body within
//! its limits, then inflating and validating off the connection tasks, and only once the
//! accepted lines are fsync'd in the queue, the answer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use http_body_util::BodyExt;
use serde::Deserialize;

use storwatch_wire::lp::Api;

use super::answer::{error, with_retry_after, written};
use super::auth::presented_token;
use super::AppState;
use crate::config::Limits;
use crate::ingest::{self, DecodeError, LineLimits, Precision, Rules, Validated};
use crate::now_ns;

/// Query parameters of `/write` and `/api/v2/write` (those of the other version are ignored).
#[derive(Debug, Default, Deserialize)]
pub(super) struct WriteParams {
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

pub(super) async fn write_v1(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if q.db.as_deref().unwrap_or("").is_empty() {
        st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
        return error(
            Api::V1,
            StatusCode::BAD_REQUEST,
            "invalid",
            "database is required",
        );
    }
    write(st, Api::V1, q, headers, body).await
}

pub(super) async fn write_v2(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if q.bucket.as_deref().unwrap_or("").is_empty() {
        st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
        return error(
            Api::V2,
            StatusCode::BAD_REQUEST,
            "invalid",
            "bucket is required",
        );
    }
    write(st, Api::V2, q, headers, body).await
}

async fn write(
    st: Arc<AppState>,
    api: Api,
    q: WriteParams,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let m = &st.metrics;
    m.write_requests.fetch_add(1, Ordering::Relaxed);

    // Who is it? The answer to a stranger says nothing about why.
    let checked = {
        let tokens = st.tokens.read().unwrap_or_else(|e| e.into_inner());
        tokens.as_ref().map(|tokens| {
            presented_token(&headers, q.p.as_deref())
                .and_then(|t| tokens.check(&t).map(str::to_string))
        })
    };
    let client = match checked {
        None => "open".to_string(),
        Some(name) => match name {
            Some(n) => n,
            None => {
                m.unauthorized.fetch_add(1, Ordering::Relaxed);
                return error(
                    api,
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "unauthorized access",
                );
            }
        },
    };
    // Read as the outputs' InfluxDB versions read it (1.x takes `us` as nanoseconds).
    let precision = match Precision::for_all(q.precision.as_deref(), api, st.backends) {
        Ok(p) => p,
        Err(msg) => return error(api, StatusCode::BAD_REQUEST, "invalid", &msg),
    };

    let limits = st.limits();
    let queue_cfg = st.queue_cfg();
    // Above the high watermark the backlog must drain first: ask the client to come back.
    let backlog = st.queue.durable_end().saturating_sub(m.min_cursor());
    if backlog > queue_cfg.high_watermark_bytes {
        m.overloaded.fetch_add(1, Ordering::Relaxed);
        let r = error(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "queue above its high watermark; retry later",
        );
        return with_retry_after(r, queue_cfg.retry_after_s);
    }

    let max_body = limits.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        m.too_large.fetch_add(1, Ordering::Relaxed);
        return error(
            api,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!("body larger than {max_body} bytes"),
        );
    }
    // Bodies in memory across all connections are bounded: a request waits a little for room,
    // then is asked to come back; its bytes wait in the kernel's socket buffers meanwhile.
    let room_kib =
        u32::try_from((limits.max_inflight_body_bytes as u64 / 1024).max(1)).unwrap_or(u32::MAX);
    let want_kib = u32::try_from(declared.unwrap_or(max_body as u64).div_ceil(1024))
        .unwrap_or(u32::MAX)
        .clamp(1, room_kib);
    let _room =
        match tokio::time::timeout(INFLIGHT_WAIT, st.inflight_kib.acquire_many(want_kib)).await {
            Ok(Ok(permit)) => permit,
            _ => {
                m.overloaded.fetch_add(1, Ordering::Relaxed);
                let r = error(
                    api,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "too many request bodies in flight; retry later",
                );
                return with_retry_after(r, 1);
            }
        };
    let timeout = Duration::from_secs(limits.body_timeout_s.max(1));
    let capacity = declared.map_or(64 << 10, |n| n as usize).min(max_body);
    let raw: Bytes = match tokio::time::timeout(timeout, read_body(body, capacity, max_body)).await
    {
        Ok(Ok(b)) => b,
        Ok(Err(BodyError::TooLarge)) => {
            m.too_large.fetch_add(1, Ordering::Relaxed);
            return error(
                api,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request too large",
                &format!("body larger than {max_body} bytes"),
            );
        }
        Ok(Err(BodyError::Read)) => {
            return error(
                api,
                StatusCode::BAD_REQUEST,
                "invalid",
                "cannot read the body",
            );
        }
        Err(_) => {
            m.body_timeouts.fetch_add(1, Ordering::Relaxed);
            return error(
                api,
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
                api,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid",
                &format!("unsupported Content-Encoding {other:?}"),
            )
        }
    };

    // Decompression and parsing are CPU work: keep them off the connection tasks, one per core.
    let Ok(_slot) = st.work_slots.acquire().await else {
        return error(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "shutting down",
        );
    };
    let st2 = st.clone();
    let client2 = client.clone();
    let work = tokio::task::spawn_blocking(move || {
        decode_and_validate(&st2, &limits, &client2, raw, gzip, precision)
    });
    let (v, payload) = match work.await {
        Ok(Ok(v)) => v,
        Ok(Err(r)) => return r.into_response(api, &st.metrics),
        Err(_) => {
            return error(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
                "validation failed",
            )
        }
    };

    if v.accepted_lines > 0 {
        if let Err(e) = st.queue.append(payload).await {
            if e.is_out_of_space() {
                // Nothing was stored: the client keeps the data and comes back once space is.
                let r = error(
                    api,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the collector's queue filesystem is full; retry later",
                );
                return with_retry_after(r, queue_cfg.retry_after_s);
            }
            tracing::error!(error = %e, "queue append failed");
            return error(
                api,
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

    written(api, &v, &client, st.backends)
}

/// How long a request waits for room among the bodies in flight before it gets 503.
const INFLIGHT_WAIT: Duration = Duration::from_secs(5);

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
    Decode(DecodeError),
    RateLimited(u64),
    Internal,
}

impl Refusal {
    fn into_response(self, api: Api, m: &crate::metrics::Metrics) -> Response {
        match self {
            Refusal::Decode(e @ DecodeError::TooLarge(_)) => {
                m.too_large.fetch_add(1, Ordering::Relaxed);
                error(
                    api,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request too large",
                    &e.to_string(),
                )
            }
            Refusal::Decode(e) => error(api, StatusCode::BAD_REQUEST, "invalid", &e.to_string()),
            Refusal::RateLimited(wait) => {
                m.rate_limited.fetch_add(1, Ordering::Relaxed);
                let r = error(
                    api,
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many requests",
                    "rate limit exceeded for this token",
                );
                with_retry_after(r, wait)
            }
            Refusal::Internal => error(
                api,
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
    limits: &Limits,
    client: &str,
    raw: Bytes,
    gzip: bool,
    precision: Precision,
) -> Result<(Validated, Bytes), Refusal> {
    let bytes =
        ingest::decode(raw, gzip, limits.max_decompressed_bytes).map_err(Refusal::Decode)?;
    let text = ingest::decode::text(&bytes).map_err(Refusal::Decode)?;
    // The per-token rate limit counts lines offered, good or bad, and is applied before
    // validation so that a refused request neither costs the parsing nor teaches field types.
    st.limiter
        .take(client, ingest::offered_lines(&bytes), Instant::now())
        .map_err(Refusal::RateLimited)?;
    let lim = LineLimits {
        max_line_bytes: limits.max_line_bytes,
        max_future_ns: secs_to_ns(limits.max_future_s),
        max_past_ns: secs_to_ns(limits.max_past_s),
    };
    let rules = Rules {
        backends: st.backends,
        precision,
        now_ns: now_ns(),
        limits: &lim,
        host_tag: &st.host_tag,
    };
    let mut v = ingest::validate(text, &rules, &st.types).map_err(|e| {
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

fn secs_to_ns(s: u64) -> i64 {
    i64::try_from(s)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000_000)
}
