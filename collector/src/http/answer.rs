//! Answers in InfluxDB's shapes (`{"error": …}` on v1, `{"code": …, "message": …}` on v2) so
//! existing clients understand them, plus a `lines` array naming every refused line with its
//! reason and the headers `X-Storwatch-Accepted` / `X-Storwatch-Rejected`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use storwatch_wire::lp::{Api, Backends, Kind};

use crate::ingest::Validated;

/// An error answer.
pub(super) fn error(api: Api, status: StatusCode, code: &str, message: &str) -> Response {
    let body = match api {
        Api::V1 => serde_json::json!({ "error": message }),
        Api::V2 => serde_json::json!({ "code": code, "message": message }),
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

/// Marks an answer given before the request's body was read to its end as the connection's
/// last (`Connection: close`), so that a client does not send its next request on a connection
/// the collector is closing; the listener reads and discards the rest of the body first.
pub(super) fn last_answer(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Adds `Retry-After: secs` (at least 1).
pub(super) fn with_retry_after(mut r: Response, secs: u64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The answer to a validated write whose accepted lines are stored: 204, or an answer naming
/// every refused line with the status the outputs' InfluxDB version gives: 400 when a line does
/// not parse (on 2.x nothing is kept then), else 400 on 1.x and 3.x and 422 on 2.x for lines
/// storage drops.
pub(super) fn written(api: Api, v: &Validated, client: &str, backends: Backends) -> Response {
    let mut resp = if v.rejected.is_empty() {
        StatusCode::NO_CONTENT.into_response()
    } else {
        tracing::info!(client = %client, accepted = v.accepted_lines, rejected = v.rejected.len(), first = %printable(&v.rejected[0].reason), "partial write");
        let syntax = v.rejected.iter().any(|r| r.kind == Kind::Syntax);
        let status = if syntax {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::from_u16(backends.partial_write_status()).unwrap_or(StatusCode::BAD_REQUEST)
        };
        let mut msg = String::new();
        if v.accepted_lines > 0 {
            msg.push_str("partial write:");
        }
        for r in v.rejected.iter().take(20) {
            msg.push_str(&format!(" line {}: {};", r.line, r.reason));
        }
        if v.rejected.len() > 20 {
            msg.push_str(&format!(" and {} more;", v.rejected.len() - 20));
        }
        if v.whole_body_refused {
            msg.push_str(&format!(
                " nothing written: InfluxDB {} refuses a whole body when a line does not parse;",
                backends.names()
            ));
        }
        msg.push_str(&format!(
            " accepted={} rejected={}",
            v.accepted_lines,
            v.rejected.len()
        ));
        let msg = msg.trim_start().to_string();
        let lines: Vec<_> = v
            .rejected
            .iter()
            .take(1000)
            .map(|r| serde_json::json!({"line_number": r.line, "error_message": r.reason}))
            .collect();
        let body = match api {
            Api::V1 => serde_json::json!({ "error": msg, "lines": lines }),
            Api::V2 => {
                let code = if status == StatusCode::BAD_REQUEST {
                    "invalid"
                } else {
                    "unprocessable entity"
                };
                serde_json::json!({ "code": code, "message": msg, "lines": lines })
            }
        };
        let mut r = (status, axum::Json(body)).into_response();
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

/// The answer of InfluxDB 3's `/api/v3/write_lp` to a validated write: 204; with refused lines
/// and `accept_partial` (the good ones stored) 400 `{"error": "partial write of line protocol
/// occurred", "data": [{original_line, line_number, error_message}, …]}`; without it (nothing
/// stored) 400 `{"error": "parsing failed for write_lp endpoint", "data": {…the first…}}`.
/// `originals` are the refused lines as sent, in the order of `v.rejected`.
pub(super) fn written_v3(v: &Validated, originals: &[String], accept_partial: bool) -> Response {
    let mut resp = if v.rejected.is_empty() {
        StatusCode::NO_CONTENT.into_response()
    } else {
        let data: Vec<_> = v
            .rejected
            .iter()
            .take(1000)
            .enumerate()
            .map(|(i, r)| {
                serde_json::json!({
                    "original_line": originals.get(i).map_or("", String::as_str),
                    "line_number": r.line,
                    "error_message": r.reason,
                })
            })
            .collect();
        let body = if accept_partial && !v.whole_body_refused {
            serde_json::json!({"error": "partial write of line protocol occurred", "data": data})
        } else {
            let first = data.into_iter().next().unwrap_or(serde_json::Value::Null);
            serde_json::json!({"error": "parsing failed for write_lp endpoint", "data": first})
        };
        let mut r = (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        r.headers_mut().insert(
            "X-Influxdb-Error",
            header_value(&format!(
                "line {}: {}",
                v.rejected[0].line, v.rejected[0].reason
            )),
        );
        r
    };
    let accepted = if !accept_partial && !v.rejected.is_empty() {
        0
    } else {
        v.accepted_lines
    };
    let h = resp.headers_mut();
    h.insert("X-Storwatch-Accepted", HeaderValue::from(accepted));
    h.insert(
        "X-Storwatch-Rejected",
        HeaderValue::from(v.rejected.len() as u64),
    );
    resp
}

/// Text from a client made safe for a log line: control characters (ESC, CR, LF, NUL, DEL, the
/// C1 range) are written as `\u{..}` escapes, so a request cannot forge log lines or drive a
/// terminal; at most 512 characters are kept.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 512;
    if text.len() <= MAX && !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(MAX) + 16);
    for (n, c) in text.chars().enumerate() {
        if n == MAX {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_for_logs() {
        assert_eq!(printable("plain text"), "plain text");
        assert_eq!(
            printable("a\u{1b}[31mred\r\nfake: INFO\0z\u{7f}\u{9b}"),
            "a\\u{1b}[31mred\\u{d}\\u{a}fake: INFO\\u{0}z\\u{7f}\\u{9b}"
        );
        let long = "x".repeat(2000);
        assert_eq!(printable(&long).chars().count(), 513);
    }
}
