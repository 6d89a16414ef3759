//! HTTP/1.1 for tests: a blocking client ([`http`], [`post_form`]) that needs no runtime, and a
//! scripted server ([`FakeServer`]) for the answers a local InfluxDB 1.x cannot give (429 with
//! Retry-After, v2/v3 error shapes, 401), recording every request.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `s` percent-encoded for a URL query or a form.
pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A form POST (`application/x-www-form-urlencoded`) through [`http`]: (status, body).
pub fn post_form(url: &str, form: &[(&str, &str)]) -> (u16, String) {
    let body = form
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&");
    http(
        url,
        "POST",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
}

/// One HTTP/1.1 request with `Connection: close`: (status, body); status 0 when the
/// connection failed. A chunked answer (influxd's /query) is decoded.
pub fn http(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (hostport, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let Ok(mut s) = std::net::TcpStream::connect(hostport) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    if s.write_all(req.as_bytes())
        .and_then(|_| s.write_all(body))
        .is_err()
    {
        return (0, String::new());
    }
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let Some(split) = resp.windows(4).position(|w| w == b"\r\n\r\n") else {
        let head = String::from_utf8_lossy(&resp);
        return (status_of(&head), String::new());
    };
    let head = String::from_utf8_lossy(&resp[..split]);
    let body = &resp[split + 4..];
    let chunked = head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        })
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (
        status_of(&head),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn status_of(head: &str) -> u16 {
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The payload of a `Transfer-Encoding: chunked` body (as much of it as arrived).
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&rest[..eol]);
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        rest = rest.get(take + 2..).unwrap_or(&[]);
    }
    out
}

/// gzip of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A request as a server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it had been read whole.
    pub at: Instant,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body, gunzipped when it came with `Content-Encoding: gzip`.
    pub body: Vec<u8>,
}

/// An answer a server gives.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

/// An answer with `status` and a JSON `body`, no extra headers.
pub fn answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: Vec::new(),
        body: body.to_owned(),
    }
}

/// Picks the answer to a request from its content, or `None` for the next scripted one.
pub type Decide = dyn Fn(&Seen) -> Option<Answer> + Send + Sync;

/// A scripted HTTP/1.1 server on 127.0.0.1: answers requests in order from a script (then 204),
/// records them.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT`
    pub url_base: String,
    requests: Arc<Mutex<Vec<Seen>>>,
}

impl FakeServer {
    /// `decide` may answer a request from its content; otherwise the next scripted answer, then
    /// 204.
    pub fn start(script: Vec<Answer>, decide: Box<Decide>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url_base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let mut script: VecDeque<Answer> = script.into();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let Some(req) = read_request(&stream) else {
                    continue;
                };
                let ans = decide(&req)
                    .or_else(|| script.pop_front())
                    .unwrap_or_else(|| answer(204, ""));
                seen.lock().unwrap().push(req);
                write_answer(stream, &ans);
            }
        });
        Self { url_base, requests }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

/// No decision: every request gets the next scripted answer.
pub fn no_decision() -> Box<Decide> {
    Box::new(|_| None)
}

/// Reads one request with a `Content-Length` body; `None` when the stream ends or breaks first
/// (a failed TLS handshake surfaces here as a read error).
pub fn read_request(stream: impl Read) -> Option<Seen> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut raw = vec![0; len];
    r.read_exact(&mut raw).ok()?;
    let body = if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .ok()?;
        out
    } else {
        raw
    };
    Some(Seen {
        at: Instant::now(),
        headers,
        body,
    })
}

/// Writes `a` as a whole response with `Connection: close`.
pub fn write_answer(mut stream: impl Write, a: &Answer) {
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nContent-Type: application/json\r\nConnection: close\r\n",
        a.status,
        a.body.len()
    );
    for (k, v) in &a.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(a.body.as_bytes());
}
