//! Answers in InfluxDB's shapes (`{"error": …}` on v1, `{"code": …, "message": …}` on v2) so
//! existing clients understand them, plus a `lines` array naming every refused line with its
//! reason and the headers `X-Storwatch-Accepted` / `X-Storwatch-Rejected`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::ingest::Validated;

/// Which API the client wrote to, and so the shape of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavor {
    V1,
    V2,
}

/// An error answer.
pub(super) fn error(flavor: Flavor, status: StatusCode, code: &str, message: &str) -> Response {
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

/// Adds `Retry-After: secs` (at least 1).
pub(super) fn with_retry_after(mut r: Response, secs: u64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The answer to a validated write whose accepted lines are stored: 204, or 400 naming every
/// refused line.
pub(super) fn written(flavor: Flavor, v: &Validated, client: &str) -> Response {
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
