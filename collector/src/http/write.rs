//! The write handlers (`/write`, `/api/v2/write`, `/api/v3/write_lp`): who is it, where to
//! (the target, [`crate::target`]), may it write now, the body within its limits ([`admit`]),
//! then inflating and validating off the connection tasks, and only once the accepted lines are
//! fsync'd in the queue, the answer ([`store`]).
//!
//! A request refused before its body is read to the end gets `Connection: close`: the listener
//! reads and discards the rest of the body after the answer, so that a client sending its whole
//! body before reading still reads the status and `Retry-After` (see [`super::server`]).

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

use super::answer::{error, last_answer, printable, with_retry_after, written, written_v3};
use super::auth::presented_token;
use super::AppState;
use crate::config::{Limits, QueueConfig};
use crate::ingest::{self, DecodeError, LineLimits, Precision, Rules, Validated};
use crate::now_ns;
use crate::target::{Target, TargetError};

/// Query parameters of `/write`, `/api/v2/write` and `/api/v3/write_lp` (those of the other
/// versions are ignored).
#[derive(Debug, Default, Deserialize)]
pub(super) struct WriteParams {
    db: Option<String>,
    rp: Option<String>,
    precision: Option<String>,
    #[allow(dead_code)]
    u: Option<String>,
    p: Option<String>,
    /// v2: the collector writes to each output's configured organisation.
    #[allow(dead_code)]
    org: Option<String>,
    bucket: Option<String>,
    /// v3: keep the good lines when some are refused (default true).
    accept_partial: Option<String>,
    /// v3: acknowledge before the write is durable. Ignored: the collector always fsyncs first.
    #[allow(dead_code)]
    no_sync: Option<String>,
}

/// Which write endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    V1,
    V2,
    /// `/api/v3/write_lp`, with its `accept_partial`.
    V3 {
        accept_partial: bool,
    },
}

impl Endpoint {
    /// The shape of error answers: v3 answers `{"error": …}` as v1 does.
    fn api(self) -> Api {
        match self {
            Endpoint::V2 => Api::V2,
            Endpoint::V1 | Endpoint::V3 { .. } => Api::V1,
        }
    }
}

pub(super) async fn write_v1(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    write(st, Endpoint::V1, q, headers, body).await
}

pub(super) async fn write_v2(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    write(st, Endpoint::V2, q, headers, body).await
}

pub(super) async fn write_v3(
    State(st): State<Arc<AppState>>,
    Query(q): Query<WriteParams>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let accept_partial = match q.accept_partial.as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
            return last_answer(error(
                Api::V1,
                StatusCode::BAD_REQUEST,
                "invalid",
                &format!(
                    "invalid accept_partial {:?}: true or false",
                    printable(other)
                ),
            ));
        }
    };
    write(st, Endpoint::V3 { accept_partial }, q, headers, body).await
}

/// The client's name when its credentials are good (`"open"` without tokens); `None` for a
/// stranger, who is told nothing about why.
pub(super) fn authenticate(st: &AppState, headers: &HeaderMap, p: Option<&str>) -> Option<String> {
    let tokens = st.tokens.read().unwrap_or_else(|e| e.into_inner());
    match tokens.as_ref() {
        None => Some("open".to_string()),
        Some(tokens) => {
            presented_token(headers, p).and_then(|t| tokens.check(&t).map(str::to_string))
        }
    }
}

/// The answer to a request for a target it may not write to: 400 for a name no client sends,
/// 403 for one the configuration does not allow.
pub(super) fn refused_target(api: Api, e: &TargetError) -> Response {
    match e {
        TargetError::Invalid { .. } => {
            error(api, StatusCode::BAD_REQUEST, "invalid", &e.to_string())
        }
        TargetError::NotAllowed(_) => {
            error(api, StatusCode::FORBIDDEN, "forbidden", &e.to_string())
        }
    }
}

async fn write(
    st: Arc<AppState>,
    endpoint: Endpoint,
    q: WriteParams,
    headers: HeaderMap,
    body: Body,
) -> Response {
    st.metrics.write_requests.fetch_add(1, Ordering::Relaxed);
    match admit(&st, endpoint, &q, &headers, body).await {
        Ok(admitted) => store(&st, endpoint, &headers, admitted).await,
        // Refused before the body was read to its end: the rest is read and discarded after
        // this answer (the listener's lingering close), and the connection ends there.
        Err(refused) => last_answer(refused),
    }
}

/// A request allowed in, its body read.
struct Admitted<'a> {
    client: String,
    target: Target,
    precision: Precision,
    limits: Arc<Limits>,
    queue_cfg: Arc<QueueConfig>,
    raw: Bytes,
    /// Room among the bodies in flight, held until the body is queued.
    _room: tokio::sync::SemaphorePermit<'a>,
}

/// Who is it, where to, may it write now, and its body within the limits; else the refusal.
async fn admit<'a>(
    st: &'a AppState,
    endpoint: Endpoint,
    q: &WriteParams,
    headers: &HeaderMap,
    body: Body,
) -> Result<Admitted<'a>, Response> {
    let m = &st.metrics;
    let api = endpoint.api();

    // Who is it? The answer to a stranger says nothing about why.
    let Some(client) = authenticate(st, headers, q.p.as_deref()) else {
        m.unauthorized.fetch_add(1, Ordering::Relaxed);
        return Err(error(
            api,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unauthorized access",
        ));
    };
    // Where to? Checked before the body is read: a refused target's body is never held.
    let (db, rp) = match endpoint {
        Endpoint::V1 => (q.db.as_deref(), q.rp.as_deref()),
        Endpoint::V2 => (q.bucket.as_deref(), None),
        Endpoint::V3 { .. } => (q.db.as_deref(), None),
    };
    let target = match st.targets().resolve(db, rp) {
        Ok(t) => t,
        Err(e) => {
            m.target_refused.fetch_add(1, Ordering::Relaxed);
            return Err(refused_target(api, &e));
        }
    };
    // Read as the outputs' InfluxDB versions read it (1.x takes `us` as nanoseconds).
    let precision = match endpoint {
        Endpoint::V3 { .. } => Precision::of_v3(q.precision.as_deref()),
        _ => Precision::for_all(q.precision.as_deref(), api, st.backends),
    };
    let precision = match precision {
        Ok(p) => p,
        Err(msg) => return Err(error(api, StatusCode::BAD_REQUEST, "invalid", &msg)),
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
        return Err(with_retry_after(r, queue_cfg.retry_after_s));
    }

    let max_body = limits.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        m.too_large.fetch_add(1, Ordering::Relaxed);
        return Err(error(
            api,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!("body larger than {max_body} bytes"),
        ));
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
                return Err(with_retry_after(r, 1));
            }
        };
    let timeout = Duration::from_secs(limits.body_timeout_s.max(1));
    let capacity = declared.map_or(64 << 10, |n| n as usize).min(max_body);
    let raw: Bytes = match tokio::time::timeout(timeout, read_body(body, capacity, max_body)).await
    {
        Ok(Ok(b)) => b,
        Ok(Err(BodyError::TooLarge)) => {
            m.too_large.fetch_add(1, Ordering::Relaxed);
            return Err(error(
                api,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request too large",
                &format!("body larger than {max_body} bytes"),
            ));
        }
        Ok(Err(BodyError::Read)) => {
            return Err(error(
                api,
                StatusCode::BAD_REQUEST,
                "invalid",
                "cannot read the body",
            ));
        }
        Err(_) => {
            m.body_timeouts.fetch_add(1, Ordering::Relaxed);
            return Err(error(
                api,
                StatusCode::REQUEST_TIMEOUT,
                "request timeout",
                &format!("body not received within {} s", timeout.as_secs()),
            ));
        }
    };
    m.bytes_received
        .fetch_add(raw.len() as u64, Ordering::Relaxed);
    Ok(Admitted {
        client,
        target,
        precision,
        limits,
        queue_cfg,
        raw,
        _room,
    })
}

/// Inflates, validates and queues an admitted body; the answer.
async fn store(
    st: &Arc<AppState>,
    endpoint: Endpoint,
    headers: &HeaderMap,
    a: Admitted<'_>,
) -> Response {
    let m = &st.metrics;
    let api = endpoint.api();
    let Admitted {
        client,
        target,
        precision,
        limits,
        queue_cfg,
        raw,
        _room,
    } = a;

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

    // Decompression and parsing are CPU work: keep them off the connection tasks, a few per
    // core (`validation_slots`).
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
    let v3 = matches!(endpoint, Endpoint::V3 { .. });
    let work = tokio::task::spawn_blocking(move || {
        decode_and_validate(&st2, &limits, &client2, raw, gzip, precision, v3)
    });
    let (v, payload, originals) = match work.await {
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

    // v3 with accept_partial=false: one refused line and nothing is written.
    let all_or_nothing = endpoint
        == Endpoint::V3 {
            accept_partial: false,
        };
    if all_or_nothing && !v.rejected.is_empty() {
        m.lines_rejected
            .fetch_add(v.rejected.len() as u64, Ordering::Relaxed);
        return written_v3(&v, &originals, false);
    }
    if v.accepted_lines > 0 {
        if let Err(e) = st.queue.append(target.record(payload)).await {
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

    match endpoint {
        Endpoint::V3 { accept_partial } => written_v3(&v, &originals, accept_partial),
        _ => written(api, &v, &client, st.backends),
    }
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

/// Inflates and validates a body; returns the verdict, the bytes to queue (the body itself
/// when every line was accepted as sent, else the accepted lines) and, when `originals` is
/// asked for (v3 answers quote them), each refused line as sent.
fn decode_and_validate(
    st: &AppState,
    limits: &Limits,
    client: &str,
    raw: Bytes,
    gzip: bool,
    precision: Precision,
    originals: bool,
) -> Result<(Validated, Bytes, Vec<String>), Refusal> {
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
    let quoted = if originals && !v.rejected.is_empty() {
        original_lines(text, &v)
    } else {
        Vec::new()
    };
    let payload = if v.verbatim {
        bytes
    } else {
        Bytes::from(std::mem::take(&mut v.accepted).into_bytes())
    };
    Ok((v, payload, quoted))
}

/// The refused lines of `v` as the body holds them (at most 1,000, each cut at 1 KiB), in the
/// order of `v.rejected`.
fn original_lines(text: &str, v: &Validated) -> Vec<String> {
    let wanted: Vec<usize> = v.rejected.iter().take(1000).map(|r| r.line).collect();
    let set: std::collections::HashSet<usize> = wanted.iter().copied().collect();
    let mut found = std::collections::HashMap::new();
    for (n, line) in storwatch_wire::lp::lines(text) {
        if set.contains(&n) {
            let cut: String = line.chars().take(1024).collect();
            found.insert(n, cut);
            if found.len() == set.len() {
                break;
            }
        }
    }
    wanted
        .iter()
        .map(|n| found.get(n).cloned().unwrap_or_default())
        .collect()
}

fn secs_to_ns(s: u64) -> i64 {
    i64::try_from(s)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000_000)
}
