//! An output's `http`/`https` URL: parsed once from the configuration, its query read and
//! extended by pairs (`db`, `rp`, `bucket`, `precision`), and handed to the HTTP client as a
//! ready [`http::Uri`].
//!
//! What it accepts is what an output's URL needs: scheme `http` or `https`, a host (a name, an
//! IPv4 address or a bracketed IPv6 address), an optional port, a path and a query. A fragment
//! is dropped (it is never sent). Refused with a clear reason: another scheme, credentials in
//! the URL (`user:pass@`: they belong in `token_file`), a host with characters other than
//! ASCII letters, digits, `-`, `.` and `_` (an internationalised name is given in its `xn--`
//! form), a port above 65535, and spaces or control characters anywhere. Scheme and host are
//! lowercased; an empty path is `/`. Unlike a browser's parser it does not resolve `.` and `..`
//! path segments: the path is sent as written.

use std::fmt;

/// A parsed `http`/`https` URL; its text ([`Url::as_str`]) is what requests are sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    https: bool,
    /// `example.org`, `10.0.0.1` or `[::1]` (brackets kept, as in the URL).
    host: String,
    port: Option<u16>,
    /// Starts with `/`.
    path: String,
    query: Option<String>,
    /// The whole URL, kept in step with the parts above.
    text: String,
    uri: http::Uri,
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(String);

fn err(reason: impl Into<String>) -> UrlError {
    UrlError(reason.into())
}

impl Url {
    /// Parses an absolute `http`/`https` URL.
    pub fn parse(s: &str) -> Result<Url, UrlError> {
        if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(err(format!("a URL holds no {c:?}")));
        }
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| err("not an absolute URL (scheme://host/path)"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(err("scheme must be http or https")),
        };
        let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(err(
                "credentials in the URL are not used: give them in token_file",
            ));
        }
        let (host, port) = split_host_port(authority)?;
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (tail, None),
        };
        let path = if path.is_empty() { "/" } else { path };
        let mut url = Url {
            https,
            host,
            port,
            path: path.to_string(),
            query,
            text: String::new(),
            uri: http::Uri::default(),
        };
        url.rebuild()?;
        Ok(url)
    }

    /// The whole URL.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What a request is sent to (a cheap clone).
    pub fn uri(&self) -> &http::Uri {
        &self.uri
    }

    pub fn is_https(&self) -> bool {
        self.https
    }

    /// The host as written in the URL, lowercased (an IPv6 address with its brackets).
    pub fn host_str(&self) -> &str {
        &self.host
    }

    /// The port given, else the scheme's (80, 443).
    pub fn port_or_known_default(&self) -> u16 {
        self.port.unwrap_or(if self.https { 443 } else { 80 })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Replaces the path (a missing leading `/` is added).
    pub fn set_path(&mut self, path: &str) -> Result<(), UrlError> {
        self.path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        self.rebuild()
    }

    /// The query's pairs, decoded as a form (`+` is a space, `%xx` a byte).
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        let Some(q) = &self.query else {
            return Vec::new();
        };
        form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    /// Removes the query.
    pub fn clear_query(&mut self) {
        self.query = None;
        // the URL without its query was valid with it
        let _ = self.rebuild();
    }

    /// Appends `key=value`, form-encoded, to the query.
    pub fn append_pairs<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), UrlError> {
        let mut q = form_urlencoded::Serializer::new(self.query.take().unwrap_or_default());
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
        self.query = Some(q.finish());
        self.rebuild()
    }

    fn rebuild(&mut self) -> Result<(), UrlError> {
        let mut text = String::with_capacity(self.text.len().max(32));
        text.push_str(if self.https { "https://" } else { "http://" });
        text.push_str(&self.host);
        if let Some(p) = self.port {
            text.push(':');
            text.push_str(&p.to_string());
        }
        text.push_str(&self.path);
        if let Some(q) = &self.query {
            text.push('?');
            text.push_str(q);
        }
        self.uri = text
            .parse::<http::Uri>()
            .map_err(|e| err(format!("not a valid request URL: {e}")))?;
        self.text = text;
        Ok(())
    }
}

fn split_host_port(authority: &str) -> Result<(String, Option<u16>), UrlError> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (addr, after) = inner
            .split_once(']')
            .ok_or_else(|| err("an IPv6 host needs its closing ]"))?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|_| err(format!("[{addr}] is not an IPv6 address")))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| err("after an IPv6 host only :port may follow"))?,
            ),
        };
        (format!("[{}]", addr.to_ascii_lowercase()), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
            None => (authority.to_ascii_lowercase(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(err("no host"));
    }
    if !host.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(err(format!(
            "host {host:?}: only ASCII letters, digits, '-', '.' and '_' (a non-ASCII name in its xn-- form)"
        )));
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(
            p.parse::<u16>()
                .map_err(|_| err(format!("port {p:?} is not a number from 0 to 65535")))?,
        ),
    };
    Ok((host, port))
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_text() {
        let u = Url::parse("HTTP://Influx.Example:8086/base/write?db=x&rp=a%20b#frag").unwrap();
        assert_eq!(
            u.as_str(),
            "http://influx.example:8086/base/write?db=x&rp=a%20b"
        );
        assert_eq!(u.host_str(), "influx.example");
        assert_eq!(u.port_or_known_default(), 8086);
        assert_eq!(u.path(), "/base/write");
        assert_eq!(
            u.query_pairs(),
            vec![("db".into(), "x".into()), ("rp".into(), "a b".into())]
        );
        assert_eq!(u.uri().to_string(), u.as_str());
        let u = Url::parse("https://[::1]/").unwrap();
        assert_eq!((u.host_str(), u.port_or_known_default()), ("[::1]", 443));
        let u = Url::parse("http://10.0.0.1").unwrap();
        assert_eq!(
            (u.as_str(), u.port_or_known_default()),
            ("http://10.0.0.1/", 80)
        );
        let u = Url::parse("http://h:8086?db=x").unwrap();
        assert_eq!(u.as_str(), "http://h:8086/?db=x");
    }

    #[test]
    fn the_query_grows_by_form_encoded_pairs() {
        let mut u = Url::parse("http://h:8086/write?db=x").unwrap();
        u.append_pairs([("rp", "one week"), ("k", "a&b=c")])
            .unwrap();
        assert_eq!(
            u.as_str(),
            "http://h:8086/write?db=x&rp=one+week&k=a%26b%3Dc"
        );
        assert_eq!(u.query_pairs()[2], ("k".into(), "a&b=c".into()));
        u.clear_query();
        assert_eq!(u.as_str(), "http://h:8086/write");
        u.append_pairs([("db", "é")]).unwrap();
        assert_eq!(u.as_str(), "http://h:8086/write?db=%C3%A9");
        u.set_path("query").unwrap();
        assert_eq!(u.as_str(), "http://h:8086/query?db=%C3%A9");
    }

    #[test]
    fn what_an_output_url_cannot_be_is_refused_with_its_reason() {
        for (s, reason) in [
            ("influx:8086/write", "absolute"),
            ("ftp://h/write", "http or https"),
            ("http://user:pw@h/write", "token_file"),
            ("http:///write", "no host"),
            ("http://h:99999/", "65535"),
            ("http://h:x/", "number"),
            ("http://bücher.example/", "xn--"),
            ("http://[::1/", "closing"),
            ("http://[fe80::zz]/", "IPv6"),
            ("http://h/a b", "' '"),
            ("http://h/\u{7f}", "\\u{7f}"),
        ] {
            let e = Url::parse(s).unwrap_err().to_string();
            assert!(e.contains(reason), "{s}: {e}");
        }
    }
}
