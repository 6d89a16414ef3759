//! The HTTP client of the outputs (and of the collector's bench): hyper's pooled HTTP/1.1
//! client over TCP or rustls, a whole-request timeout, and answers read chunk by chunk so that
//! a caller bounds what it reads.
//!
//! What it does, and what it leaves out (an output talks to a known InfluxDB or remote-write
//! receiver on the site's network):
//! * `http` and `https` ([`Url`]); TLS by rustls (ring), TLS 1.2 and 1.3, the server's
//!   certificate checked against the Mozilla roots (`webpki-roots`) and the CAs the output's
//!   `ca_file` adds ([`ClientBuilder::add_root_pem`]), or a whole rustls configuration
//!   ([`ClientBuilder::tls_config`], e.g. with a client certificate).
//! * Idle connections kept per host for `pool_idle_timeout` and reused; an answer not read to
//!   its end closes its connection instead.
//! * [`ClientBuilder::timeout`] bounds the whole exchange: connecting, sending, the answer's
//!   head and every chunk of its body read after it.
//! * Not done: redirects (a 3xx is an answer like any other), proxies from the environment
//!   (`http_proxy` and the like are not read: the client connects to the host of the URL),
//!   cookies, HTTP/2, compression of answers.

mod url;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::CertificateDer;
use tokio::time::Instant;

pub use url::{Url, UrlError};

/// Why a request got no answer, or its answer's body broke off.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Url(String),
    #[error("request header {0}: not a valid header")]
    Header(String),
    #[error("{0}")]
    Form(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{}", chain(.0))]
    Request(#[from] hyper_util::client::legacy::Error),
    #[error("reading the answer: {0}")]
    Body(#[from] hyper::Error),
}

/// An error with its causes, `a: b: c` (hyper's own display says only "client error
/// (Connect)").
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

type Inner = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A pooled client; clones share the pool.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Inner,
    timeout: Option<Duration>,
}

/// How a [`Client`] is made.
#[derive(Debug)]
pub struct ClientBuilder {
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    pool_idle_timeout: Duration,
    roots: Vec<CertificateDer<'static>>,
    tls: Option<rustls::ClientConfig>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            timeout: None,
            connect_timeout: None,
            pool_idle_timeout: Duration::from_secs(90),
            roots: Vec::new(),
            tls: None,
        }
    }
}

impl ClientBuilder {
    /// Bounds each exchange: from connecting to the answer's last chunk.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Bounds the TCP connection's making.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = Some(d);
        self
    }

    /// How long an idle connection is kept for reuse (90 s by default).
    pub fn pool_idle_timeout(mut self, d: Duration) -> Self {
        self.pool_idle_timeout = d;
        self
    }

    /// Trusts the CA certificates of a PEM bundle besides the Mozilla roots; a bundle without
    /// one is an error.
    pub fn add_root_pem(mut self, pem: &[u8]) -> Result<Self, Error> {
        use rustls_pki_types::pem::PemObject;
        let before = self.roots.len();
        for c in CertificateDer::pem_slice_iter(pem) {
            self.roots
                .push(c.map_err(|e| Error::Tls(format!("PEM bundle: {e}")))?);
        }
        if self.roots.len() == before {
            return Err(Error::Tls("no certificate in the PEM bundle".into()));
        }
        Ok(self)
    }

    /// Uses this rustls configuration as it is (roots added by [`Self::add_root_pem`] are then
    /// not used).
    pub fn tls_config(mut self, config: rustls::ClientConfig) -> Self {
        self.tls = Some(config);
        self
    }

    pub fn build(self) -> Result<Client, Error> {
        let tls = match self.tls {
            Some(c) => c,
            None => {
                let mut roots = rustls::RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                };
                for c in self.roots {
                    roots
                        .add(c)
                        .map_err(|e| Error::Tls(format!("CA certificate: {e}")))?;
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| Error::Tls(e.to_string()))?
                    .with_root_certificates(roots)
                    .with_no_client_auth()
            }
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(self.connect_timeout);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let inner = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(self.pool_idle_timeout)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Client {
            inner,
            timeout: self.timeout,
        })
    }
}

impl Client {
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client with the defaults: no timeout, the Mozilla roots.
    pub fn new() -> Result<Client, Error> {
        ClientBuilder::default().build()
    }

    pub fn get(&self, url: impl AsUri) -> RequestBuilder<'_> {
        self.request(Method::GET, url)
    }

    pub fn post(&self, url: impl AsUri) -> RequestBuilder<'_> {
        self.request(Method::POST, url)
    }

    fn request(&self, method: Method, url: impl AsUri) -> RequestBuilder<'_> {
        let (uri, error) = match url.as_uri() {
            Ok(u) => (u, None),
            Err(e) => (http::Uri::default(), Some(e)),
        };
        RequestBuilder {
            client: self,
            method,
            uri,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            error,
        }
    }
}

/// What a request can be sent to: a parsed [`Url`] or a URL's text.
pub trait AsUri {
    fn as_uri(&self) -> Result<http::Uri, Error>;
}

impl AsUri for &Url {
    fn as_uri(&self) -> Result<http::Uri, Error> {
        Ok(self.uri().clone())
    }
}

impl AsUri for &str {
    fn as_uri(&self) -> Result<http::Uri, Error> {
        Url::parse(self)
            .map(|u| u.uri().clone())
            .map_err(|e| Error::Url(format!("{self}: {e}")))
    }
}

impl AsUri for String {
    fn as_uri(&self) -> Result<http::Uri, Error> {
        self.as_str().as_uri()
    }
}

impl AsUri for &String {
    fn as_uri(&self) -> Result<http::Uri, Error> {
        self.as_str().as_uri()
    }
}

/// A request being made; [`RequestBuilder::send`] sends it. An invalid header or form is
/// reported by `send`.
#[derive(Debug)]
pub struct RequestBuilder<'a> {
    client: &'a Client,
    method: Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
    error: Option<Error>,
}

impl RequestBuilder<'_> {
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        V: TryInto<HeaderValue>,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(k), Ok(v)) => {
                self.headers.insert(k, v);
            }
            _ => {
                self.error
                    .get_or_insert(Error::Header(format!("{} request", self.method)));
            }
        }
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// The body as a form (`application/x-www-form-urlencoded`).
    pub fn form<T: serde::Serialize + ?Sized>(mut self, form: &T) -> Self {
        match serde_urlencoded::to_string(form) {
            Ok(s) => {
                self.headers.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                );
                self.body = Bytes::from(s);
            }
            Err(e) => {
                self.error.get_or_insert(Error::Form(e.to_string()));
            }
        }
        self
    }

    /// Appends a form-encoded query to the URL.
    pub fn query<T: serde::Serialize + ?Sized>(mut self, query: &T) -> Self {
        let q = match serde_urlencoded::to_string(query) {
            Ok(q) => q,
            Err(e) => {
                self.error.get_or_insert(Error::Form(e.to_string()));
                return self;
            }
        };
        let text = self.uri.to_string();
        let sep = if self.uri.query().is_some() { '&' } else { '?' };
        match format!("{text}{sep}{q}").parse() {
            Ok(u) => self.uri = u,
            Err(e) => {
                self.error.get_or_insert(Error::Url(e.to_string()));
            }
        }
        self
    }

    /// Sends the request and waits for the answer's head.
    pub async fn send(self) -> Result<Response, Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut req = Request::new(Full::new(self.body));
        *req.method_mut() = self.method;
        *req.uri_mut() = self.uri;
        *req.headers_mut() = self.headers;
        // the end of the exchange, and the timeout it comes from (for the error)
        let deadline = self.client.timeout.map(|t| (Instant::now() + t, t));
        let fut = self.client.inner.request(req);
        let resp = match deadline {
            Some((at, t)) => tokio::time::timeout_at(at, fut)
                .await
                .map_err(|_| Error::Timeout(t))??,
            None => fut.await?,
        };
        let (parts, body) = resp.into_parts();
        Ok(Response {
            status: parts.status,
            headers: parts.headers,
            body,
            deadline,
        })
    }
}

/// An answer whose body is still to be read.
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: hyper::body::Incoming,
    deadline: Option<(Instant, Duration)>,
}

impl Response {
    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body's length as its `Content-Length` gives it.
    pub fn content_length(&self) -> Option<u64> {
        self.headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }

    /// The body's next chunk; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            let frame = match self.deadline {
                Some((at, t)) => tokio::time::timeout_at(at, self.body.frame())
                    .await
                    .map_err(|_| Error::Timeout(t))?,
                None => self.body.frame().await,
            };
            match frame {
                None => return Ok(None),
                Some(f) => {
                    // trailers are not data: read on
                    if let Ok(data) = f?.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body as text (invalid UTF-8 replaced by U+FFFD).
    pub async fn text(mut self) -> Result<String, Error> {
        let mut buf = Vec::new();
        while let Some(c) = self.chunk().await? {
            buf.extend_from_slice(&c);
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}
