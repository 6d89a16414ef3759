//! An output's configuration resolved into what a write needs: the API version, the full write
//! URL with its query, and the `Authorization` header.

use std::path::PathBuf;
use std::time::Duration;

use http::header::HeaderValue;

use storwatch_wire::lp::Backend;

use crate::client::Url;
use crate::config::{Api, ConfigError, OutputConfig, OutputType, Version};
use crate::target::Target;

/// An output ready to be written to.
#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    /// What it speaks.
    pub kind: OutputType,
    /// A remote-write output's own database name (`db`): requests naming it are its own.
    pub own_db: String,
    pub api: Api,
    /// The InfluxDB version behind it: its rules decide what the collector accepts.
    pub backend: Backend,
    /// The full write URL, query included (`precision=ns` always).
    pub url: Url,
    pub auth: Option<HeaderValue>,
    pub gzip: bool,
    pub batch_lines: usize,
    pub batch_bytes: usize,
    pub timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub auth_retry: Duration,
    pub ca_file: Option<PathBuf>,
    pub max_in_flight: usize,
}

/// The most write requests one output keeps in flight (`max_in_flight` above it is capped).
pub(crate) const MAX_IN_FLIGHT: usize = 8;

/// A remote-write output's `max_in_flight` by default: the shards a batch is cut into.
pub(crate) const REMOTE_WRITE_SHARDS: usize = 4;

pub(super) fn out_err(url: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Output {
        url: url.to_string(),
        reason: reason.into(),
    }
}

impl Output {
    /// Its own database (v1, v3) or bucket (v2) and retention policy, as the write URL names
    /// them: a request naming it goes to the default target.
    pub fn own_target(&self) -> (String, String) {
        if self.kind == OutputType::PrometheusRemoteWrite {
            return (self.own_db.clone(), String::new());
        }
        let key = if self.api == Api::V2 { "bucket" } else { "db" };
        let get = |k: &str| {
            self.url
                .query_pairs()
                .into_iter()
                .find(|(q, _)| q == k)
                .map(|(_, v)| v)
                .unwrap_or_default()
        };
        let rp = if self.api == Api::V1 {
            get("rp")
        } else {
            String::new()
        };
        (get(key), rp)
    }

    /// The write URL for lines of `target`: the configured one for the default target, else
    /// with the database replaced — v1 `db` and `rp`, v2 `bucket` (`db/rp` with a retention
    /// policy, as 2.x's DBRP mapping names it), v3 `db` (3.x has no retention policies).
    pub fn url_for(&self, target: &Target) -> Url {
        // A remote-write receiver has one URL: every database's lines go there.
        if target.is_default() || self.kind == OutputType::PrometheusRemoteWrite {
            return self.url.clone();
        }
        let (drop, set): (&[&str], Vec<(&str, String)>) = match self.api {
            Api::V1 => {
                let mut set = vec![("db", target.db.clone())];
                if !target.rp.is_empty() {
                    set.push(("rp", target.rp.clone()));
                }
                (&["db", "rp"], set)
            }
            Api::V2 => (&["bucket"], vec![("bucket", target.name())]),
            Api::V3 => (&["db"], vec![("db", target.db.clone())]),
        };
        let kept: Vec<(String, String)> = self
            .url
            .query_pairs()
            .into_iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
            .collect();
        let mut url = self.url.clone();
        url.clear_query();
        let pairs = kept.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let set = set.iter().map(|(k, v)| (*k, v.as_str()));
        // form-encoded pairs keep a valid URL valid: this cannot fail
        if url.append_pairs(pairs.chain(set)).is_err() {
            return self.url.clone();
        }
        url
    }

    /// The `/query` URL next to a v1 write URL (for `CREATE DATABASE`).
    pub fn query_url(&self) -> Url {
        let mut url = self.url.clone();
        let path = url.path().trim_end_matches('/');
        let base = path.strip_suffix("/write").unwrap_or(path).to_string();
        url.clear_query();
        // a path cut from a valid one, and `/query`, keep it valid: this cannot fail
        if url.set_path(&format!("{base}/query")).is_err() {
            return self.url.clone();
        }
        url
    }

    /// Resolves an output's configuration: API version, full URL and credentials.
    pub fn resolve(cfg: &OutputConfig) -> Result<Output, ConfigError> {
        let mut url = Url::parse(&cfg.url).map_err(|e| out_err(&cfg.url, e.to_string()))?;
        if cfg.kind == OutputType::PrometheusRemoteWrite {
            return Output::resolve_remote_write(cfg, url);
        }
        let path = url.path().trim_end_matches('/').to_string();
        let from_path = if path.ends_with("/api/v2/write") {
            Some(Api::V2)
        } else if path.ends_with("/api/v3/write_lp") {
            Some(Api::V3)
        } else if path.ends_with("/write") {
            Some(Api::V1)
        } else {
            None
        };
        let api = cfg
            .api
            .or(from_path)
            .unwrap_or(if cfg.org.is_some() || cfg.bucket.is_some() {
                Api::V2
            } else {
                Api::V1
            });
        if from_path.is_none() {
            let suffix = match api {
                Api::V1 => "/write",
                Api::V2 => "/api/v2/write",
                Api::V3 => "/api/v3/write_lp",
            };
            url.set_path(&format!("{path}{suffix}"))
                .map_err(|e| out_err(&cfg.url, e.to_string()))?;
        }
        let present: Vec<String> = url.query_pairs().into_iter().map(|(k, _)| k).collect();
        let has = |k: &str| present.iter().any(|p| p == k);
        let mut added: Vec<(&str, String)> = Vec::new();
        {
            let mut need = |key: &'static str, val: &Option<String>, required: bool| match val {
                Some(v) if !has(key) => {
                    added.push((key, v.clone()));
                    Ok(())
                }
                None if required && !has(key) => Err(out_err(&cfg.url, format!("needs {key}"))),
                _ => Ok(()),
            };
            match api {
                Api::V1 => {
                    need("db", &cfg.db, true)?;
                    need("rp", &cfg.rp, false)?;
                }
                Api::V2 => {
                    need("org", &cfg.org, false)?;
                    need("bucket", &cfg.bucket, true)?;
                }
                Api::V3 => need("db", &cfg.db, true)?,
            }
        }
        if !has("precision") {
            let p = if api == Api::V3 { "nanosecond" } else { "ns" };
            added.push(("precision", p.to_string()));
        }
        url.append_pairs(added.iter().map(|(k, v)| (*k, v.as_str())))
            .map_err(|e| out_err(&cfg.url, e.to_string()))?;
        let auth = match &cfg.token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path).map_err(|e| {
                    out_err(&cfg.url, format!("token file {}: {e}", path.display()))
                })?;
                crate::http::auth::check_secret_file(path).map_err(|e| {
                    out_err(&cfg.url, format!("token file {}: {e}", path.display()))
                })?;
                let token = token.trim();
                let value = if api == Api::V1 && token.contains(':') {
                    format!("Basic {}", base64_encode(token.as_bytes()))
                } else {
                    format!("Token {token}")
                };
                let mut v = HeaderValue::from_str(&value).map_err(|_| {
                    out_err(&cfg.url, "token holds characters not allowed in a header")
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let name = match &cfg.name {
            Some(n) => n.clone(),
            None => {
                let db = cfg
                    .db
                    .as_ref()
                    .or(cfg.bucket.as_ref())
                    .map(|s| s.as_str())
                    .unwrap_or("");
                format!("{}_{}_{db}", url.host_str(), url.port_or_known_default())
            }
        };
        let name = clean_output_name(&name);
        check_batches(cfg)?;
        Ok(Output {
            name,
            kind: OutputType::Influxdb,
            own_db: String::new(),
            api,
            backend: cfg.version.unwrap_or(Version::of_api(api)).backend(),
            url,
            auth,
            gzip: cfg.gzip,
            batch_lines: cfg.batch_lines,
            batch_bytes: cfg.batch_bytes,
            timeout: Duration::from_secs(cfg.timeout_s.max(1)),
            backoff_min: Duration::from_millis(cfg.backoff_min_ms.max(1)),
            backoff_max: Duration::from_secs(cfg.backoff_max_s.max(1)),
            auth_retry: Duration::from_secs(cfg.auth_retry_s.max(1)),
            ca_file: cfg.ca_file.clone(),
            max_in_flight: cfg.max_in_flight.unwrap_or(3).clamp(1, MAX_IN_FLIGHT),
        })
    }

    /// A remote-write output: the URL as given (`…/api/v1/write`), `Bearer` or Basic
    /// credentials, one request in flight unless told otherwise.
    fn resolve_remote_write(cfg: &OutputConfig, url: Url) -> Result<Output, ConfigError> {
        if cfg.api.is_some() || cfg.org.is_some() || cfg.bucket.is_some() || cfg.rp.is_some() {
            return Err(out_err(
                &cfg.url,
                "api, org, bucket and rp are InfluxDB settings: a prometheus_remote_write output takes none",
            ));
        }
        let auth = match &cfg.token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path).map_err(|e| {
                    out_err(&cfg.url, format!("token file {}: {e}", path.display()))
                })?;
                crate::http::auth::check_secret_file(path).map_err(|e| {
                    out_err(&cfg.url, format!("token file {}: {e}", path.display()))
                })?;
                let token = token.trim();
                let value = if token.contains(':') {
                    format!("Basic {}", base64_encode(token.as_bytes()))
                } else {
                    format!("Bearer {token}")
                };
                let mut v = HeaderValue::from_str(&value).map_err(|_| {
                    out_err(&cfg.url, "token holds characters not allowed in a header")
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let name = match &cfg.name {
            Some(n) => n.clone(),
            None => format!(
                "{}_{}_remote_write",
                url.host_str(),
                url.port_or_known_default()
            ),
        };
        check_batches(cfg)?;
        Ok(Output {
            name: clean_output_name(&name),
            kind: OutputType::PrometheusRemoteWrite,
            own_db: cfg.db.clone().unwrap_or_default(),
            api: Api::V1,
            // Not used to validate lines (see `start`): any line InfluxDB outputs take becomes
            // samples.
            backend: cfg.version.unwrap_or(Version::V1).backend(),
            url,
            auth,
            gzip: false,
            batch_lines: cfg.batch_lines,
            batch_bytes: cfg.batch_bytes,
            timeout: Duration::from_secs(cfg.timeout_s.max(1)),
            backoff_min: Duration::from_millis(cfg.backoff_min_ms.max(1)),
            backoff_max: Duration::from_secs(cfg.backoff_max_s.max(1)),
            auth_retry: Duration::from_secs(cfg.auth_retry_s.max(1)),
            ca_file: cfg.ca_file.clone(),
            // the shards of a batch, sent at once (forward/shard.rs)
            max_in_flight: cfg
                .max_in_flight
                .unwrap_or(REMOTE_WRITE_SHARDS)
                .clamp(1, MAX_IN_FLIGHT),
        })
    }
}

/// An output's name as used in file names and metric labels: `[A-Za-z0-9-]`, the rest `_`.
fn clean_output_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn check_batches(cfg: &OutputConfig) -> Result<(), ConfigError> {
    if cfg.batch_lines == 0 || cfg.batch_bytes == 0 {
        return Err(out_err(
            &cfg.url,
            "batch_lines and batch_bytes must be positive",
        ));
    }
    Ok(())
}

fn base64_encode(input: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> OutputConfig {
        OutputConfig {
            url: url.into(),
            ..OutputConfig::default()
        }
    }

    #[test]
    fn urls_and_api_versions() {
        let mut c = cfg("http://influx:8086");
        c.db = Some("storwatch".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.api, Api::V1);
        assert_eq!(o.backend, Backend::V1);
        assert_eq!(
            o.url.as_str(),
            "http://influx:8086/write?db=storwatch&precision=ns"
        );
        assert_eq!(o.name, "influx_8086_storwatch");
        let mut c = cfg("https://cloud.example/");
        c.org = Some("site".into());
        c.bucket = Some("sw".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.api, Api::V2);
        assert_eq!(
            o.url.as_str(),
            "https://cloud.example/api/v2/write?org=site&bucket=sw&precision=ns"
        );
        let o = Output::resolve(&cfg("http://h:8181/api/v3/write_lp?db=x")).unwrap();
        assert_eq!(o.api, Api::V3);
        assert_eq!(o.backend, Backend::V3);
        let mut c = cfg("http://h:8086/write?db=x");
        c.version = Some(Version::V2);
        assert_eq!(Output::resolve(&c).unwrap().backend, Backend::V2);
        assert_eq!(
            o.url.as_str(),
            "http://h:8181/api/v3/write_lp?db=x&precision=nanosecond"
        );
        assert!(
            Output::resolve(&cfg("http://h:8086")).is_err(),
            "v1 without db"
        );
        assert!(Output::resolve(&cfg("ftp://h/write?db=x")).is_err());
        assert_eq!(base64_encode(b"user:secret"), "dXNlcjpzZWNyZXQ=");
        assert_eq!(base64_encode(b"ab"), "YWI=");
    }

    #[test]
    fn remote_write_outputs() {
        let mut c = cfg("http://prom:9090/api/v1/write");
        c.kind = OutputType::PrometheusRemoteWrite;
        c.db = Some("storwatch".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.kind, OutputType::PrometheusRemoteWrite);
        assert_eq!(o.url.as_str(), "http://prom:9090/api/v1/write");
        assert_eq!(o.name, "prom_9090_remote_write");
        assert_eq!(o.max_in_flight, REMOTE_WRITE_SHARDS);
        assert_eq!(o.own_target(), ("storwatch".into(), String::new()));
        let t = Target {
            db: "telegraf".into(),
            rp: String::new(),
        };
        assert_eq!(o.url_for(&t), o.url, "one URL for every database");
        c.max_in_flight = Some(4);
        assert_eq!(Output::resolve(&c).unwrap().max_in_flight, 4);
        c.bucket = Some("b".into());
        assert!(
            Output::resolve(&c).is_err(),
            "bucket is an InfluxDB setting"
        );
        assert_eq!(
            Output::resolve(&cfg("http://h:8086/write?db=x"))
                .unwrap()
                .max_in_flight,
            3
        );
    }

    #[test]
    fn named_targets_replace_the_database_of_each_api() {
        let t = Target {
            db: "telegraf".into(),
            rp: "autogen".into(),
        };
        let mut c = cfg("http://influx:8086/base/write?db=storwatch&rp=raw&u=x");
        c.name = Some("o".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.own_target(), ("storwatch".into(), "raw".into()));
        assert_eq!(o.url_for(&Target::default()), o.url);
        assert_eq!(
            o.url_for(&t).as_str(),
            "http://influx:8086/base/write?u=x&precision=ns&db=telegraf&rp=autogen"
        );
        assert_eq!(o.query_url().as_str(), "http://influx:8086/base/query");
        let mut c = cfg("https://cloud.example/");
        c.org = Some("site".into());
        c.bucket = Some("sw".into());
        let o = Output::resolve(&c).unwrap();
        assert_eq!(o.own_target(), ("sw".into(), String::new()));
        assert_eq!(
            o.url_for(&t).as_str(),
            "https://cloud.example/api/v2/write?org=site&precision=ns&bucket=telegraf%2Fautogen"
        );
        let o = Output::resolve(&cfg("http://h:8181/api/v3/write_lp?db=x")).unwrap();
        assert_eq!(
            o.url_for(&t).as_str(),
            "http://h:8181/api/v3/write_lp?precision=nanosecond&db=telegraf"
        );
    }
}
