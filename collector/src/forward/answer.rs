//! Reading an output's answer into what to do next ([`Verdict`]), and finding the lines a
//! 400/422 answer names (v1 `unable to parse '<line>'` and field type conflicts, v3 partial-write
//! JSON), and reading an answer's body up to a bound ([`read_body`]).

use std::time::Duration;

use http::StatusCode;
use storwatch_wire::lp::{parse_line, Backend};

use crate::config::Api;

/// Bytes of an InfluxDB output's answer read at most: a 1.x partial-write answer quotes every
/// line it refused (`unable to parse '<line>': <reason>`), so it is read far enough to name some
/// 4,000 refused lines of ~200 bytes; a longer answer is cut there (lines it would have named
/// past the cut are in the rest sent again, and named by the answer to that).
pub(super) const MAX_INFLUX_ANSWER_BYTES: usize = 1 << 20;
/// Bytes of a remote-write receiver's answer read at most: its answers are one error line.
pub(super) const MAX_REMOTE_WRITE_ANSWER_BYTES: usize = 64 << 10;

/// The body of `resp`, read up to `max` bytes and the rest left unread (the connection is then
/// closed rather than reused), as text; a body cut inside a character ends with U+FFFD. A
/// receiver answering with a body of gigabytes costs `max` bytes, not its size.
pub(super) async fn read_body(mut resp: crate::client::Response, max: usize) -> String {
    let mut buf: Vec<u8> = Vec::with_capacity(
        resp.content_length()
            .map_or(4096, |l| usize::try_from(l).unwrap_or(max))
            .min(max),
    );
    // a body that breaks off (timeout, reset) is read as far as it came
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(chunk.get(..chunk.len().min(room)).unwrap_or_default());
        if buf.len() >= max {
            break;
        }
    }
    match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// What to do after an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Done,
    /// Retry after at least this long (from Retry-After), or the backoff.
    Retry(Option<Duration>),
    /// Credentials or target wrong: keep the data, retry slowly.
    Refused(String),
    /// Split the batch (413).
    TooLarge,
    /// Bad data: dead-letter the named lines (0-based indices into the batch) or bisect.
    BadData {
        reason: String,
        named: Vec<(usize, String)>,
    },
}

/// Reads an answer. `lines` is the batch that was sent, so that named lines can be found.
pub fn classify(
    api: Api,
    status: StatusCode,
    retry_after: Option<&str>,
    body: &str,
    lines: &[&str],
) -> Verdict {
    let retry_after = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let short: String = body.chars().take(500).collect();
    match status.as_u16() {
        200..=299 => Verdict::Done,
        401 | 403 | 404 => Verdict::Refused(format!("{status}: {short}")),
        413 => Verdict::TooLarge,
        400 | 422 => Verdict::BadData {
            reason: format!(
                "{status}: {}",
                error_text(body).chars().take(500).collect::<String>()
            ),
            named: named_lines(api, body, lines),
        },
        429 | 500..=599 | 408 => Verdict::Retry(retry_after),
        // Anything else (3xx, odd 4xx) is not the data's fault: keep it and retry slowly.
        _ => Verdict::Refused(format!("unexpected {status}: {short}")),
    }
}

/// The human part of an InfluxDB error body (`{"error": …}` for v1/v3, `{"message": …}` v2).
fn error_text(body: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => v
            .get("error")
            .or_else(|| v.get("message"))
            .and_then(|e| e.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string()),
        Err(_) => body.to_string(),
    }
}

/// Lines a 400/422 answer names, as indices into `lines`, with the reason given for each.
pub fn named_lines(api: Api, body: &str, lines: &[&str]) -> Vec<(usize, String)> {
    let json = serde_json::from_str::<serde_json::Value>(body).ok();
    let mut out = Vec::new();
    // v3: {"error": "...", "data": [{"original_line": "...", "line_number": N, "error_message": "..."}]}
    // (v2 OSS answers a parse error with the whole batch refused; it gets bisected.)
    if let Some(data) = json
        .as_ref()
        .and_then(|v| v.get("data"))
        .and_then(|d| d.as_array())
    {
        for item in data {
            let n = item.get("line_number").and_then(|n| n.as_u64());
            let reason = item
                .get("error_message")
                .and_then(|m| m.as_str())
                .unwrap_or("rejected")
                .to_string();
            if let Some(n) = n.and_then(|n| usize::try_from(n).ok()).filter(|n| *n >= 1) {
                if n <= lines.len() {
                    out.push((n - 1, reason));
                }
            }
        }
        return out;
    }
    if api != Api::V1 {
        return out;
    }
    let text = error_text(body);
    // v1: "partial write: unable to parse '<line>': <reason>" (one per bad line).
    for (i, line) in lines.iter().enumerate() {
        let quoted = format!("unable to parse '{line}'");
        if let Some(pos) = text.find(&quoted) {
            let rest = text.get(pos + quoted.len()..).unwrap_or("");
            let reason = rest
                .trim_start_matches(": ")
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            out.push((i, format!("unable to parse: {reason}")));
        }
    }
    // v1: "field type conflict: input field \"f\" on measurement \"m\" is type float, already
    // exists as type integer dropped=N"
    if let Some(c) = text.find("field type conflict: input field \"") {
        let rest = text
            .get(c + "field type conflict: input field \"".len()..)
            .unwrap_or("");
        if let Some((field, rest)) = rest.split_once("\" on measurement \"") {
            if let Some((measurement, _)) = rest.split_once('"') {
                for (i, line) in lines.iter().enumerate() {
                    if out.iter().any(|(j, _)| *j == i) {
                        continue;
                    }
                    if line_has_field(line, measurement, field) {
                        out.push((i, format!("field type conflict: {field} on {measurement}")));
                    }
                }
            }
        }
    }
    out
}

fn line_has_field(line: &str, measurement: &str, field: &str) -> bool {
    // Only v1 answers are read this way.
    parse_line(line, Backend::V1)
        .is_ok_and(|p| p.measurement == measurement && p.field(field).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_per_status() {
        let l = ["m v=1 1", "bad line", "m v=2 2"];
        assert_eq!(
            classify(Api::V1, StatusCode::NO_CONTENT, None, "", &l),
            Verdict::Done
        );
        assert_eq!(
            classify(Api::V2, StatusCode::TOO_MANY_REQUESTS, Some("7"), "", &l),
            Verdict::Retry(Some(Duration::from_secs(7)))
        );
        assert_eq!(
            classify(Api::V2, StatusCode::SERVICE_UNAVAILABLE, None, "", &l),
            Verdict::Retry(None)
        );
        assert!(matches!(
            classify(Api::V2, StatusCode::UNAUTHORIZED, None, "", &l),
            Verdict::Refused(_)
        ));
        assert!(matches!(
            classify(Api::V1, StatusCode::NOT_FOUND, None, "", &l),
            Verdict::Refused(_)
        ));
        assert_eq!(
            classify(Api::V1, StatusCode::PAYLOAD_TOO_LARGE, None, "", &l),
            Verdict::TooLarge
        );
        // v1 partial write names the line
        let v1 =
            r#"{"error":"partial write: unable to parse 'bad line': missing fields dropped=1"}"#;
        match classify(Api::V1, StatusCode::BAD_REQUEST, None, v1, &l) {
            Verdict::BadData { named, .. } => assert_eq!(
                named,
                vec![(1, "unable to parse: missing fields dropped=1".to_string())]
            ),
            v => panic!("{v:?}"),
        }
        // v3 partial write JSON
        let v3 = r#"{"error":"partial write of line protocol occurred","data":[{"original_line":"bad line","line_number":2,"error_message":"No fields were provided"}]}"#;
        match classify(Api::V3, StatusCode::BAD_REQUEST, None, v3, &l) {
            Verdict::BadData { named, .. } => {
                assert_eq!(named, vec![(1, "No fields were provided".to_string())])
            }
            v => panic!("{v:?}"),
        }
        // v2 whole-batch 400 names nothing: bisect
        let v2 = r#"{"code":"invalid","message":"unable to parse 'bad line': missing fields"}"#;
        match classify(Api::V2, StatusCode::BAD_REQUEST, None, v2, &l) {
            Verdict::BadData { named, reason } => {
                assert!(named.is_empty());
                assert!(reason.contains("missing fields"));
            }
            v => panic!("{v:?}"),
        }
        let conflict = r#"{"error":"partial write: field type conflict: input field \"v\" on measurement \"m\" is type float, already exists as type integer dropped=2"}"#;
        match classify(Api::V1, StatusCode::BAD_REQUEST, None, conflict, &l) {
            Verdict::BadData { named, .. } => {
                assert_eq!(named.iter().map(|n| n.0).collect::<Vec<_>>(), vec![0, 2])
            }
            v => panic!("{v:?}"),
        }
    }
}
