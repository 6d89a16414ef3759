//! `/ping` (for InfluxDB clients that probe), `/health` (queue backlog, per-output state) and
//! `/metrics` (Prometheus text).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::AppState;

pub(super) async fn ping() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        "X-Influxdb-Version",
        HeaderValue::from_static(concat!("storwatch-collector-", env!("CARGO_PKG_VERSION"))),
    );
    r.headers_mut()
        .insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    r
}

pub(super) async fn health(State(st): State<Arc<AppState>>) -> Response {
    let end = st.queue.durable_end();
    let backlog = end.saturating_sub(st.metrics.min_cursor());
    let over = backlog > st.queue_cfg().high_watermark_bytes;
    let full = st.metrics.queue_full.load(Ordering::Relaxed);
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
        "status": if full { "fail" } else if over { "warn" } else { "pass" },
        "message": if full {
            "queue filesystem full: writes are refused with 503 until space is back"
        } else if over {
            "queue above its high watermark: writes are refused with 503"
        } else {
            "ready for writes"
        },
        "queue_full": full,
        "queue_backlog_bytes": backlog,
        "outputs": outputs,
    });
    let code = if over || full {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, axum::Json(body)).into_response()
}

pub(super) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut r = st.metrics.render().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
