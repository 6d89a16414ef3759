//! The HTTP output's settings, token file and TLS configuration.

use super::*;

/// How the agent delivers to an `http(s)://` output (`[output.http]` in the config file).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// File holding the API token, sent as `Authorization: Token <token>` (InfluxDB v2/v3, the
    /// collector, and InfluxDB 1.8+ with `username:password` as the token). Surrounding
    /// whitespace is ignored; the file is read at start and again after a 401/403. Unset: no
    /// `Authorization` header (an open collector on loopback, or `u=`/`p=` in a v1 URL).
    pub token_file: Option<PathBuf>,
    /// Compress request bodies with gzip (`Content-Encoding: gzip`); line protocol shrinks about
    /// tenfold.
    pub gzip: bool,
    /// Directory of the durable spool holding batches until the server acknowledges them.
    pub spool_dir: PathBuf,
    /// Upper bound of the spool's files, bytes; beyond it the oldest data is dropped (counted in
    /// the `agent` measurement's `dropped_lines` and logged). At one 10 s report of a 200-disk
    /// server with its MD and multipath lines (~172 KB) the default holds about four hours.
    pub spool_max_bytes: u64,
    /// Whole-request timeout (connect, send, response), seconds.
    pub timeout_s: f64,
    /// Largest uncompressed request body, bytes, when a backlog is drained; a single batch larger
    /// than this still goes out alone.
    pub max_batch_bytes: usize,
    /// First retry delay after a failure, seconds; doubled on each further failure.
    pub backoff_min_s: f64,
    /// Cap of the retry delay, seconds.
    pub backoff_max_s: f64,
    /// PEM file of the CA certificates that sign the server's certificate; replaces the built-in
    /// Mozilla roots. Unset: the built-in roots.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain presented to the server for mutual TLS (with `client_key_file`).
    pub client_cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            token_file: None,
            gzip: true,
            spool_dir: PathBuf::from("/var/lib/storwatch/spool"),
            spool_max_bytes: 256 << 20,
            timeout_s: 10.0,
            max_batch_bytes: 1 << 20,
            backoff_min_s: 1.0,
            backoff_max_s: 60.0,
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
        }
    }
}

pub(super) fn config_err(msg: impl Into<String>) -> SinkError {
    SinkError::Config(msg.into())
}

pub(super) fn seconds(name: &str, v: f64) -> Result<Duration, SinkError> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(config_err(format!(
            "{name} = {v}: expected seconds between 0 and 86400"
        )))
    }
}

/// The write API a URL speaks, told from its path (a reverse-proxy prefix is allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteApi {
    /// InfluxDB 1.x `/write?db=…` (also the collector).
    V1,
    /// InfluxDB 2.x `/api/v2/write?org=…&bucket=…` (also the collector and InfluxDB 3).
    V2,
    /// InfluxDB 3 `/api/v3/write_lp?db=…`.
    V3,
}

impl WriteApi {
    /// Tells the API from the URL's path and checks the query names a database or bucket.
    pub fn detect(url: &str) -> Result<Self, SinkError> {
        let uri: ureq::http::Uri = url
            .parse()
            .map_err(|e| config_err(format!("output URL {url:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => return Err(SinkError::BadSpec(url.to_owned())),
        }
        let path = uri.path().trim_end_matches('/');
        let (api, needs) = if path.ends_with("/api/v3/write_lp") {
            (Self::V3, "db")
        } else if path.ends_with("/api/v2/write") {
            (Self::V2, "bucket")
        } else if path.ends_with("/write") {
            (Self::V1, "db")
        } else {
            return Err(config_err(format!(
                "output URL {url:?}: path must end in /write (InfluxDB 1.x, collector), \
                 /api/v2/write (2.x) or /api/v3/write_lp (3.x)"
            )));
        };
        let has = uri.query().unwrap_or("").split('&').any(|kv| {
            let mut it = kv.splitn(2, '=');
            it.next() == Some(needs) && it.next().is_some_and(|v| !v.is_empty())
        });
        if !has {
            return Err(config_err(format!(
                "output URL {url:?}: the {api:?} write API needs `{needs}=` in the query"
            )));
        }
        Ok(api)
    }
}

pub(super) fn read_token(path: &std::path::Path) -> Result<String, SinkError> {
    let text = std::fs::read_to_string(path).map_err(|source| SinkError::Io {
        target: format!("token file {}", path.display()),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(config_err(format!(
            "token file {} is empty",
            path.display()
        )));
    }
    if token.contains(['\r', '\n']) {
        return Err(config_err(format!(
            "token file {} holds more than one line",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

pub(super) fn read_pem(path: &std::path::Path) -> Result<Vec<u8>, SinkError> {
    std::fs::read(path).map_err(|source| SinkError::Io {
        target: path.display().to_string(),
        source,
    })
}

pub(super) fn tls_config(cfg: &HttpConfig) -> Result<ureq::tls::TlsConfig, SinkError> {
    use ureq::tls::{parse_pem, Certificate, ClientCert, PemItem, PrivateKey, RootCerts};
    let mut b = ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
    if let Some(ca) = &cfg.ca_file {
        let pem = read_pem(ca)?;
        let certs: Vec<Certificate<'static>> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err(config_err(format!(
                "ca_file {}: no PEM certificate found",
                ca.display()
            )));
        }
        b = b.root_certs(RootCerts::new_with_certs(&certs));
    }
    match (&cfg.client_cert_file, &cfg.client_key_file) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            let pem = read_pem(cert)?;
            let chain: Vec<Certificate<'static>> = parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if chain.is_empty() {
                return Err(config_err(format!(
                    "client_cert_file {}: no PEM certificate found",
                    cert.display()
                )));
            }
            let key_pem = read_pem(key)?;
            let key = PrivateKey::from_pem(&key_pem)
                .map_err(|e| config_err(format!("client_key_file {}: {e}", key.display())))?;
            b = b.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        _ => {
            return Err(config_err(
                "client_cert_file and client_key_file must be given together",
            ))
        }
    }
    Ok(b.build())
}
