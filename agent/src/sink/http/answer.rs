//! What an InfluxDB-compatible server's answer means for a batch.

use super::*;

/// What to do with a batch after the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx: acknowledged.
    Delivered,
    /// The server wrote the good lines and refused `lines` named ones.
    Partial {
        /// Lines refused.
        lines: u64,
    },
    /// Refused as a whole without line details (400/422).
    Rejected,
    /// 413: the body is too large for the server.
    TooLarge,
    /// Transient: try again later, not before `after` when the server said so.
    Retry {
        /// `Retry-After`, when given in seconds.
        after: Option<Duration>,
    },
    /// Needs an operator (auth, wrong URL): keep the data, retry slowly, log loudly.
    Keep,
}

/// Longest `Retry-After` honoured; a larger value is treated as this.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `Retry-After` in delta-seconds. The HTTP-date form is not used by InfluxDB or the collector
/// and falls back to the normal backoff.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim()
        .parse::<u64>()
        .ok()
        .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER))
}

/// How many lines a 400 body says were refused, when it says so.
///
/// Understands InfluxDB 1.x (`{"error":"partial write: unable to parse '…': …"}`, one
/// `unable to parse` per bad line, or `… dropped=N`), InfluxDB 3's partial-write JSON
/// (`{"error":"…","data":[{"line_number":…},…]}`), the collector's
/// (`"partial write: line 3: …; accepted=N rejected=M"` with a `lines` array) and the same texts
/// in a v2-style `message`.
pub fn rejected_lines(body: &str) -> Option<u64> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        match v.get("data") {
            Some(serde_json::Value::Array(items)) if !items.is_empty() => {
                return Some(items.len() as u64)
            }
            Some(serde_json::Value::Object(o)) if o.contains_key("line_number") => return Some(1),
            _ => {}
        }
        for key in ["error", "message"] {
            if let Some(n) = v
                .get(key)
                .and_then(|e| e.as_str())
                .and_then(rejected_in_text)
            {
                return Some(n);
            }
        }
        return match v.get("lines") {
            Some(serde_json::Value::Array(items)) if !items.is_empty() => Some(items.len() as u64),
            _ => None,
        };
    }
    rejected_in_text(body)
}

/// The number after `key` (as in `dropped=3`), when positive.
pub(super) fn count_after(text: &str, key: &str) -> Option<u64> {
    let (_, rest) = text.split_once(key)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|&n| n > 0)
}

pub(super) fn rejected_in_text(text: &str) -> Option<u64> {
    // the collector states the exact count; its per-line list may be cut short
    if let Some(n) = count_after(text, "rejected=") {
        return Some(n);
    }
    let unparsable = text.matches("unable to parse").count() as u64;
    if unparsable > 0 {
        return Some(unparsable);
    }
    count_after(text, "dropped=")
}

/// Maps a response to what the delivery thread does next.
pub fn classify(status: u16, retry_after: Option<&str>, body: &str) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        400 => match rejected_lines(body) {
            Some(lines) => Verdict::Partial { lines },
            None => Verdict::Rejected,
        },
        422 => Verdict::Rejected,
        413 => Verdict::TooLarge,
        408 | 425 | 429 | 500..=599 => Verdict::Retry {
            after: retry_after.and_then(parse_retry_after),
        },
        _ => Verdict::Keep,
    }
}
