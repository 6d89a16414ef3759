//! Tokens: the token file, extracting the credential a client presents, constant-time checking,
//! and the per-token rate limit.
//!
//! A token file has one token per line, optionally named (`name:token`); blank lines and lines
//! starting with `#` are ignored. The name identifies the client in logs and in the rate
//! limiter; an unnamed token is called `token<N>` after its line number.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use axum::http::{header, HeaderMap};

/// Errors in a token file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenFileError {
    #[error("line {line}: empty token")]
    Empty { line: usize },
    #[error("line {line}: token shorter than 16 characters")]
    TooShort { line: usize },
    #[error("line {line}: token name {name:?} used twice")]
    DuplicateName { line: usize, name: String },
}

/// The accepted tokens.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Vec<(String, Vec<u8>)>,
}

impl Tokens {
    /// Parses a token file's text.
    pub fn parse(text: &str) -> Result<Tokens, TokenFileError> {
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let n = i + 1;
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, token) = match line.split_once(':') {
                Some((name, token)) => (name.trim().to_string(), token.trim()),
                None => (format!("token{n}"), line),
            };
            if token.is_empty() {
                return Err(TokenFileError::Empty { line: n });
            }
            // Short tokens are guessable; refuse them rather than run with them.
            if token.chars().count() < 16 {
                return Err(TokenFileError::TooShort { line: n });
            }
            if entries.iter().any(|(existing, _)| *existing == name) {
                return Err(TokenFileError::DuplicateName { line: n, name });
            }
            entries.push((name, token.as_bytes().to_vec()));
        }
        Ok(Tokens { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The name of the token matching `presented`. Every stored token is compared in full, in
    /// constant time per byte, so timing tells nothing about which token or prefix matched.
    pub fn check(&self, presented: &[u8]) -> Option<&str> {
        let mut found: Option<&str> = None;
        for (name, token) in &self.entries {
            if ct_eq(token, presented) && found.is_none() {
                found = Some(name);
            }
        }
        found
    }
}

/// Checks that a secret (token file, TLS key) is not open to other users, as ssh does for its
/// keys: readable or writable by others, or writable by the group, is refused with the `chmod`
/// that fixes it; readable by the group (a service group, `root:storwatch 0640`) is allowed with
/// a warning.
pub fn check_secret_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let mode = meta.mode() & 0o777;
    if mode & 0o027 != 0 {
        return Err(format!(
            "mode {mode:04o} lets other users read or change this secret; \
             run `chmod 600 {}` (or 640 with a group of its own)",
            path.display()
        ));
    }
    if mode & 0o040 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:04o}"),
            "secret readable by its group: make sure only the collector's group can read it"
        );
    }
    Ok(())
}

/// Reads and parses a token file after [`check_secret_file`].
pub fn load_token_file(path: &Path) -> Result<Tokens, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    check_secret_file(path)?;
    Tokens::parse(&text).map_err(|e| e.to_string())
}

/// Constant-time equality (time depends only on the lengths).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    let n = a.len().max(b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// The credential a client presented: `Authorization: Token|Bearer <t>`, `Basic` (the password
/// is the token), or the v1 query parameter `p`.
pub fn presented_token(headers: &HeaderMap, query_p: Option<&str>) -> Option<Vec<u8>> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?.trim();
        let (scheme, rest) = value.split_once(' ')?;
        let rest = rest.trim();
        return match scheme.to_ascii_lowercase().as_str() {
            "token" | "bearer" => Some(rest.as_bytes().to_vec()),
            "basic" => {
                let decoded = base64_decode(rest)?;
                let pos = decoded.iter().position(|b| *b == b':')?;
                Some(decoded.get(pos + 1..)?.to_vec())
            }
            _ => None,
        };
    }
    query_p.map(|p| p.as_bytes().to_vec())
}

/// Standard base64 (with or without padding); `None` on anything else.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Token-bucket rate limit per token name, counted in lines. The rate and burst can be changed
/// while it runs (SIGHUP); buckets keep their level, capped at the new burst.
#[derive(Debug)]
pub struct RateLimiter {
    inner: Mutex<Buckets>,
}

#[derive(Debug)]
struct Buckets {
    rate: f64,
    burst: f64,
    levels: HashMap<String, (f64, Instant)>,
}

impl RateLimiter {
    /// `rate` lines per second on average, `burst` lines at once; `rate == 0` disables it.
    pub fn new(rate: u64, burst: u64) -> RateLimiter {
        RateLimiter {
            inner: Mutex::new(Buckets {
                rate: rate as f64,
                burst: burst.max(rate) as f64,
                levels: HashMap::new(),
            }),
        }
    }

    /// Changes the rate and burst (as [`RateLimiter::new`] takes them).
    pub fn set(&self, rate: u64, burst: u64) {
        let mut b = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        b.rate = rate as f64;
        b.burst = burst.max(rate) as f64;
    }

    /// Takes `lines` from the bucket of `name`, or says how many seconds to wait first.
    ///
    /// A request larger than the whole burst is let through when the bucket is full, so a
    /// legitimate big batch is never refused forever; the bucket then goes negative and the
    /// following requests wait.
    pub fn take(&self, name: &str, lines: u64, now: Instant) -> Result<(), u64> {
        let mut b = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (rate, burst) = (b.rate, b.burst);
        if rate <= 0.0 {
            return Ok(());
        }
        let entry = b.levels.entry(name.to_string()).or_insert((burst, now));
        let elapsed = now.saturating_duration_since(entry.1).as_secs_f64();
        entry.0 = (entry.0 + elapsed * rate).min(burst);
        entry.1 = now;
        let want = lines as f64;
        if entry.0 >= want || entry.0 >= burst {
            entry.0 -= want;
            Ok(())
        } else {
            let wait = (want.min(burst) - entry.0) / rate;
            Err(wait.ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use std::time::Duration;

    #[test]
    fn token_file_names_comments_and_errors() {
        let t =
            Tokens::parse("# site tokens\n\nagents:0123456789abcdef0123\nfedcba9876543210fedc\n")
                .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.check(b"0123456789abcdef0123"), Some("agents"));
        assert_eq!(t.check(b"fedcba9876543210fedc"), Some("token4"));
        assert_eq!(t.check(b"0123456789abcdef012"), None);
        assert_eq!(t.check(b""), None);
        assert_eq!(
            Tokens::parse("a:\n").unwrap_err(),
            TokenFileError::Empty { line: 1 }
        );
        assert_eq!(
            Tokens::parse("short\n").unwrap_err(),
            TokenFileError::TooShort { line: 1 }
        );
        assert!(matches!(
            Tokens::parse("a:0123456789abcdef\na:0123456789abcdeX\n"),
            Err(TokenFileError::DuplicateName { line: 2, .. })
        ));
    }

    #[test]
    fn credentials_from_headers_and_query() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_token(&h, Some("qq")), Some(b"qq".to_vec()));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Token abc"));
        assert_eq!(presented_token(&h, None), Some(b"abc".to_vec()));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer xyz"),
        );
        assert_eq!(presented_token(&h, None), Some(b"xyz".to_vec()));
        // "user:secret"
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcjpzZWNyZXQ="),
        );
        assert_eq!(presented_token(&h, None), Some(b"secret".to_vec()));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Digest x"));
        assert_eq!(presented_token(&h, Some("p")), None);
    }

    #[test]
    fn rate_limit_refills_and_says_when() {
        let rl = RateLimiter::new(100, 200);
        let t0 = Instant::now();
        assert!(rl.take("a", 150, t0).is_ok());
        assert_eq!(rl.take("a", 100, t0), Err(1));
        assert!(rl.take("b", 200, t0).is_ok());
        assert!(rl.take("a", 100, t0 + Duration::from_secs(1)).is_ok());
        // a request above the burst passes only from a full bucket
        let rl = RateLimiter::new(10, 10);
        assert!(rl.take("c", 50, t0).is_ok());
        assert_eq!(rl.take("c", 50, t0), Err(5));
        assert!(RateLimiter::new(0, 0).take("x", u64::MAX, t0).is_ok());
        // changed while running: the bucket is capped at the new burst, refilled at the new rate
        rl.set(1, 1);
        assert!(rl.take("d", 1, t0).is_ok());
        assert_eq!(rl.take("d", 1, t0), Err(1));
        rl.set(0, 0);
        assert!(rl.take("d", 1_000, t0).is_ok());
    }

    #[test]
    fn secrets_open_to_others_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "agents:agents-token-0123456789\n").unwrap();
        for (mode, ok) in [
            (0o600, true),
            (0o640, true),
            (0o400, true),
            (0o644, false),
            (0o660, false),
            (0o606, false),
            (0o602, false),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = load_token_file(&path);
            assert_eq!(r.is_ok(), ok, "mode {mode:o}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains("chmod 600"), "{e}");
            }
        }
    }
}
