//! The HTTP side of the `/metrics` listener: a request's head read piece by piece as its bytes
//! arrive (the request line kept, at most [`MAX_REQUEST_LINE`] bytes; the headers only counted,
//! at most [`MAX_REQUEST_BYTES`]), what it asked for, and the answers, each made whole once.

use std::sync::Arc;

/// Request headers read at most; a longer request is answered 431.
pub const MAX_REQUEST_BYTES: usize = 8 << 10;
/// Request line kept at most; a longer one is answered 414.
pub const MAX_REQUEST_LINE: usize = 1 << 10;

/// An HTTP/1.1 answer, head and body, as it goes out: `bytes[start..]` (room is kept before the
/// body for its head, so that a page rendered into its buffer needs no copy; see [`answer_in`]).
#[derive(Debug)]
pub(super) struct Answer {
    bytes: Vec<u8>,
    start: usize,
}

impl Answer {
    /// What is sent.
    pub(super) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(self.start..).unwrap_or_default()
    }
}

/// Room for the head kept before a body rendered by [`answer_in`]: more than the longest head
/// [`head`] writes for `200 OK` (a length of 20 digits; a test checks).
const HEAD_ROOM: usize = 160;

fn head(status: &str, len: usize) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

/// An HTTP/1.1 answer with `body`, closing the connection.
pub(super) fn answer(status: &str, body: &[u8]) -> Arc<Answer> {
    let head = head(status, body.len());
    let mut bytes = Vec::with_capacity(head.len() + body.len());
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(body);
    Arc::new(Answer { bytes, start: 0 })
}

/// A `200 OK` answer whose body `render` writes into `buf` (emptied first; with the capacity of
/// the last page, the page is made without growing it).
pub(super) fn answer_in(mut buf: Vec<u8>, render: impl FnOnce(&mut Vec<u8>)) -> Answer {
    buf.clear();
    buf.resize(HEAD_ROOM, 0);
    render(&mut buf);
    let head = head("200 OK", buf.len() - HEAD_ROOM);
    match HEAD_ROOM.checked_sub(head.len()) {
        Some(start) => {
            buf[start..HEAD_ROOM].copy_from_slice(head.as_bytes());
            Answer { bytes: buf, start }
        }
        // not with the status above: kept for a longer head all the same
        None => {
            let mut bytes = Vec::with_capacity(head.len() + buf.len() - HEAD_ROOM);
            bytes.extend_from_slice(head.as_bytes());
            bytes.extend_from_slice(&buf[HEAD_ROOM..]);
            Answer { bytes, start: 0 }
        }
    }
}

/// What a request asked for, once its headers are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    Metrics,
    NotFound,
    MethodNotAllowed,
    UriTooLong,
    HeadersTooLarge,
}

/// A request's head read piece by piece: the request line is kept, the headers are only counted
/// until the blank line that ends them.
#[derive(Debug, Default)]
pub(super) struct RequestHead {
    line: Vec<u8>,
    line_done: bool,
    bytes: usize,
    /// How much of `\r\n\r\n` the bytes so far end with.
    end: u8,
}

impl RequestHead {
    /// Takes in the next bytes; what was asked once the head is complete (bytes after it are
    /// ignored) or too large.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Option<Asked> {
        for &b in bytes {
            self.bytes += 1;
            if self.bytes > MAX_REQUEST_BYTES {
                return Some(Asked::HeadersTooLarge);
            }
            if !self.line_done {
                if b == b'\n' {
                    self.line_done = true;
                } else if self.line.len() >= MAX_REQUEST_LINE {
                    return Some(Asked::UriTooLong);
                } else {
                    self.line.push(b);
                }
            }
            const END: &[u8; 4] = b"\r\n\r\n";
            self.end = match END.get(usize::from(self.end)) {
                Some(&want) if want == b => self.end + 1,
                _ if b == b'\r' => 1,
                _ => 0,
            };
            if self.end == 4 {
                return Some(self.asked());
            }
        }
        None
    }

    /// What was asked by a client that closed its side before the end of the headers (a
    /// request line and no blank line after it, as a hand-typed request often is); `None` when
    /// it sent nothing.
    pub(super) fn at_end_of_input(&self) -> Option<Asked> {
        (self.bytes > 0).then(|| self.asked())
    }

    fn asked(&self) -> Asked {
        let line = String::from_utf8_lossy(&self.line);
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        match (method, path) {
            ("GET", "/metrics") => Asked::Metrics,
            ("GET", _) => Asked::NotFound,
            _ => Asked::MethodNotAllowed,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn asked(chunks: &[&[u8]]) -> Option<Asked> {
        let mut head = RequestHead::default();
        chunks.iter().find_map(|c| head.feed(c))
    }

    #[test]
    fn a_request_is_complete_at_its_blank_line_in_any_pieces() {
        let req = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
        assert_eq!(asked(&[req]), Some(Asked::Metrics));
        for cut in 1..req.len() {
            let (a, b) = req.split_at(cut);
            assert_eq!(asked(&[a, b]), Some(Asked::Metrics), "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = req.chunks(1).collect();
        assert_eq!(asked(&bytes), Some(Asked::Metrics));
        assert_eq!(asked(&[b"GET /metrics HTTP/1.1\r\nHost: a\r\n"]), None);
        assert_eq!(asked(&[b"GET /metrics HTTP/1.1\r\n\r\r\n"]), None);
    }

    #[test]
    fn other_paths_methods_and_oversized_requests() {
        assert_eq!(asked(&[b"GET / HTTP/1.1\r\n\r\n"]), Some(Asked::NotFound));
        assert_eq!(
            asked(&[b"POST /metrics HTTP/1.1\r\n\r\n"]),
            Some(Asked::MethodNotAllowed)
        );
        assert_eq!(asked(&[b"\r\n\r\n"]), Some(Asked::MethodNotAllowed));
        let long_line = [b'a'; MAX_REQUEST_LINE + 1];
        assert_eq!(asked(&[b"GET /", &long_line]), Some(Asked::UriTooLong));
        let header = format!("X: {}\r\n", "b".repeat(100));
        let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while many.len() <= MAX_REQUEST_BYTES {
            many.extend_from_slice(header.as_bytes());
        }
        assert_eq!(asked(&[&many]), Some(Asked::HeadersTooLarge));
    }

    #[test]
    fn a_request_line_without_its_blank_line_is_answered_at_end_of_input() {
        let mut head = RequestHead::default();
        assert_eq!(head.at_end_of_input(), None);
        assert_eq!(head.feed(b"GET /metrics HTTP/1.0\n"), None);
        assert_eq!(head.at_end_of_input(), Some(Asked::Metrics));
    }

    #[test]
    fn an_answer_says_its_length_and_closes() {
        let a = answer("200 OK", b"x 1\n");
        let text = std::str::from_utf8(a.as_bytes()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 4\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nx 1\n"), "{text}");
    }

    #[test]
    fn an_answer_rendered_into_its_buffer_is_the_same_answer() {
        assert!(head("200 OK", usize::MAX).len() <= HEAD_ROOM);
        for body in [&b""[..], b"x 1\n", &[b'y'; 100_000][..], b"z 2\n"] {
            for room in [0, 10, 200_000] {
                let a = answer_in(Vec::with_capacity(room), |out| out.extend_from_slice(body));
                assert_eq!(a.as_bytes(), answer("200 OK", body).as_bytes());
            }
        }
        // the head is written in the room before the body: no copy
        let a = answer_in(Vec::with_capacity(200_000), |out| {
            out.extend_from_slice(b"x 1\n")
        });
        assert!(a.bytes.capacity() >= 200_000);
    }
}
