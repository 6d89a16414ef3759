//! Collector configuration: a TOML file (`--config`), overridden by command-line flags.
//!
//! [`DEFAULT_CONFIG`] is the commented file `--print-default-config` prints; a test checks that
//! it parses to exactly [`Config::default()`], so the two cannot drift apart.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use storwatch_wire::lp::Backend;

/// Errors reading or checking the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("output {url}: {reason}")]
    Output { url: String, reason: String },
}

/// The whole collector configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address and port to listen on for the write API, /health, /ping and /metrics.
    pub listen: String,
    /// Directory of the durable queue (segments, per-output cursors, field types, last-seen
    /// hosts, dead letters). Must be on a local filesystem that honours fsync.
    pub queue_dir: PathBuf,
    /// File of accepted tokens, one per line, optionally named `name:token`; `#` starts a comment.
    pub token_file: Option<PathBuf>,
    /// Run without tokens. Only allowed when `listen` is a loopback address.
    pub insecure_open: bool,
    /// TLS for the listener (off unless `cert_file` and `key_file` are set).
    pub tls: TlsConfig,
    /// Limits on what a client may send.
    pub limits: Limits,
    /// The durable queue.
    pub queue: QueueConfig,
    /// The last-seen heartbeat written for every host.
    pub heartbeat: HeartbeatConfig,
    /// Size rotation of the outputs' dead-letter files (`queue_dir/dead-letter/<output>.lp`):
    /// each output's file becomes `<output>.lp.1` when the next entries would take it past
    /// `max_file_bytes`, and at most `keep_files` rotated files are kept, the oldest dropped.
    pub dead_letter: storwatch_wire::rotate::Rotation,
    /// The databases requests may name (v1 `db`/`rp`, v2 `bucket`, v3 `db`).
    pub targets: TargetsConfig,
    /// Where accepted lines go. Each output gets every line.
    pub outputs: Vec<OutputConfig>,
}

/// TLS and mutual TLS for the listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain presented to clients.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of that certificate.
    pub key_file: Option<PathBuf>,
    /// PEM bundle of the CAs allowed to issue client certificates. When set, every client must
    /// present a certificate chaining to one of them (mutual TLS), in addition to its token.
    pub client_ca_file: Option<PathBuf>,
}

/// Limits on requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body as sent (compressed or not), in bytes. Also the most read and
    /// discarded of a refused request's body after its answer (401, 403, 503, 413 …), so that a
    /// client sending its whole body before reading still reads the refusal.
    pub max_body_bytes: usize,
    /// Largest body after gzip decompression, in bytes (a gzip bomb stops here).
    pub max_decompressed_bytes: usize,
    /// Longest single line, in bytes (0 = no limit but the body's). InfluxDB has no line limit
    /// of its own; a key may take up to 65,535 bytes and a string field more.
    pub max_line_bytes: usize,
    /// Reject points more than this many seconds in the future (0 = no limit).
    pub max_future_s: u64,
    /// Reject points more than this many seconds in the past (0 = no limit).
    pub max_past_s: u64,
    /// Close a connection when a request's headers are not complete this many seconds after its
    /// first byte (the connection's start, for its first request). Not applied between requests.
    pub header_read_timeout_s: u64,
    /// Answer 408 when a request body has not fully arrived within this many seconds.
    pub body_timeout_s: u64,
    /// Close a connection with no bytes read or written for this many seconds.
    pub idle_timeout_s: u64,
    /// Most concurrent connections; more are closed at once.
    pub max_connections: usize,
    /// Request bodies held in memory at once, across all connections, in bytes. A request that
    /// finds no room waits up to 5 s, then gets 503 with `Retry-After: 1`.
    pub max_inflight_body_bytes: usize,
    /// Length of the listen queue (connections the kernel holds until accepted); the kernel
    /// caps it at `net.core.somaxconn` (4096 on current kernels).
    pub listen_backlog: u32,
    /// Lines per second each token may send, on average (0 = no limit).
    pub rate_limit_lines_per_s: u64,
    /// Lines a token may send in a burst above the average rate.
    pub rate_limit_burst_lines: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 << 20,
            max_decompressed_bytes: 16 << 20,
            max_line_bytes: 0,
            max_future_s: 3600,
            max_past_s: 7 * 86400,
            header_read_timeout_s: 10,
            body_timeout_s: 30,
            idle_timeout_s: 120,
            max_connections: 4096,
            max_inflight_body_bytes: 64 << 20,
            listen_backlog: 4096,
            rate_limit_lines_per_s: 1_000_000,
            rate_limit_burst_lines: 2_000_000,
        }
    }
}

/// The durable queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Size at which a new segment file starts, in bytes. Segments are deleted once every
    /// output has acknowledged them.
    pub segment_bytes: u64,
    /// Backlog (bytes not yet acknowledged by the slowest output) above which writes are
    /// answered 503 with Retry-After instead of being accepted.
    pub high_watermark_bytes: u64,
    /// Retry-After, in seconds, sent with 503 above the high watermark.
    pub retry_after_s: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            high_watermark_bytes: 8 << 30,
            retry_after_s: 10,
        }
    }
}

/// The last-seen heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// Seconds between heartbeats (0 = off).
    pub interval_s: u64,
    /// Measurement name of the heartbeat lines.
    pub measurement: String,
    /// Tag whose value names the sending host in incoming lines.
    pub host_tag: String,
    /// Hosts tracked at most; lines from further new hosts are stored but get no heartbeat
    /// (a warning says how many, once per heartbeat).
    pub max_hosts: usize,
    /// A host silent this long gets no more heartbeat lines (and is forgotten), seconds.
    pub forget_after_s: u64,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            interval_s: 30,
            measurement: "collector_heartbeat".into(),
            host_tag: "host".into(),
            max_hosts: 10_000,
            forget_after_s: 7 * 86_400,
        }
    }
}

/// The databases requests may name. A request naming no database, or an output's own database
/// (or bucket), goes to each output's own database; one naming a database listed here goes to
/// that database on every output; any other is refused with 403.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TargetsConfig {
    /// Databases passed on by name: `"telegraf"` (its default retention policy) or
    /// `"telegraf/autogen"` (that retention policy; on a v2 output the bucket of that name).
    pub allow: Vec<String>,
}

/// Which InfluxDB write API an output speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// InfluxDB 1.x `/write?db=&rp=` (also 2.x/3.x compatibility endpoints).
    V1,
    /// InfluxDB 2.x `/api/v2/write?org=&bucket=`.
    V2,
    /// InfluxDB 3 `/api/v3/write_lp?db=`.
    V3,
}

/// The InfluxDB version an output runs. The collector accepts a line only when the version of
/// every output would store it, and answers as the strictest of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Version {
    /// InfluxDB 1.x (as packaged in Debian: 1.6).
    #[serde(rename = "1.x")]
    V1,
    /// InfluxDB 2.x.
    #[serde(rename = "2.x")]
    V2,
    /// InfluxDB 3 (Core, Enterprise).
    #[serde(rename = "3.x")]
    V3,
}

impl Version {
    /// The rules of this version.
    pub fn backend(self) -> Backend {
        match self {
            Version::V1 => Backend::V1,
            Version::V2 => Backend::V2,
            Version::V3 => Backend::V3,
        }
    }

    /// The version that speaks `api` natively: 1.x for v1, 2.x for v2, 3.x for v3.
    pub fn of_api(api: Api) -> Version {
        match api {
            Api::V1 => Version::V1,
            Api::V2 => Version::V2,
            Api::V3 => Version::V3,
        }
    }
}

/// What an output speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputType {
    /// An InfluxDB write API (v1, v2 or v3: see `api`).
    #[default]
    #[serde(rename = "influxdb")]
    Influxdb,
    /// Prometheus remote write 1.0 (protobuf `WriteRequest`, snappy): Prometheus with
    /// `--web.enable-remote-write-receiver`, VictoriaMetrics, Mimir, Thanos Receive. Every line
    /// becomes samples named as the agent's `/metrics` names them (docs/collector.md).
    #[serde(rename = "prometheus_remote_write")]
    PrometheusRemoteWrite,
}

/// One output: an InfluxDB server or a Prometheus remote-write receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// What it speaks: "influxdb" (the default) or "prometheus_remote_write".
    #[serde(rename = "type")]
    pub kind: OutputType,
    /// Name used for the cursor file, dead-letter file and metrics (default: derived from the URL).
    pub name: Option<String>,
    /// Base URL (`http://influx:8086`) or full write URL (`…/write`, `…/api/v2/write`,
    /// `…/api/v3/write_lp`); the path chooses the API when `api` is not set.
    pub url: String,
    /// API version: "v1", "v2" or "v3" (default: from the URL path; else v2 when `org` or
    /// `bucket` is set, else v1).
    pub api: Option<Api>,
    /// InfluxDB version of the server: "1.x", "2.x" or "3.x" (default: the version whose native
    /// API `api` is — set it for a 2.x or 3.x server written through its v1 API). Decides which
    /// lines the collector accepts and how it answers.
    pub version: Option<Version>,
    /// Database (v1, v3). On a remote-write output: the database name that requests may name
    /// as this output's own (the agents' `?db=storwatch`); every line goes to the one URL.
    pub db: Option<String>,
    /// Retention policy (v1).
    pub rp: Option<String>,
    /// Organisation (v2).
    pub org: Option<String>,
    /// Bucket (v2).
    pub bucket: Option<String>,
    /// File holding the token sent as `Authorization: Token …` (v1: `user:password` sends Basic;
    /// remote write: `Bearer …`, or Basic for `user:password`).
    pub token_file: Option<PathBuf>,
    /// PEM CA bundle to trust for an https URL, in addition to the built-in Mozilla roots.
    pub ca_file: Option<PathBuf>,
    /// Most lines per write request.
    pub batch_lines: usize,
    /// Most bytes per write request (before compression).
    pub batch_bytes: usize,
    /// Seconds before a write request is abandoned and retried.
    pub timeout_s: u64,
    /// Compress request bodies with gzip.
    pub gzip: bool,
    /// First retry delay in milliseconds; doubles up to `backoff_max_s`, with full jitter.
    pub backoff_min_ms: u64,
    /// Longest retry delay (and the cap on a Retry-After the output asks for), in seconds.
    pub backoff_max_s: u64,
    /// Delay between retries after 401/403/404 (credentials or database wrong), in seconds.
    pub auth_retry_s: u64,
    /// Write requests in flight at once to this output: 1 to 8 (more is taken as 8; default 3,
    /// and 1 for remote write, whose receivers refuse a series' samples that arrive out of
    /// order). The cursor moves only over batches delivered with every one before them, whatever
    /// the order the answers come in.
    pub max_in_flight: Option<usize>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            kind: OutputType::Influxdb,
            name: None,
            url: String::new(),
            api: None,
            version: None,
            db: None,
            rp: None,
            org: None,
            bucket: None,
            token_file: None,
            ca_file: None,
            batch_lines: 5000,
            batch_bytes: 2 << 20,
            timeout_s: 30,
            gzip: true,
            backoff_min_ms: 250,
            backoff_max_s: 60,
            auth_retry_s: 60,
            max_in_flight: None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "0.0.0.0:8186".into(),
            queue_dir: PathBuf::from("/var/lib/storwatch-collector"),
            token_file: Some(PathBuf::from("/etc/storwatch/collector.tokens")),
            insecure_open: false,
            tls: TlsConfig::default(),
            limits: Limits::default(),
            queue: QueueConfig::default(),
            heartbeat: HeartbeatConfig::default(),
            dead_letter: Default::default(),
            targets: TargetsConfig::default(),
            outputs: Vec::new(),
        }
    }
}

impl Config {
    /// Reads a TOML file; missing fields take their defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The default configuration, commented. Printed by `--print-default-config`.
pub const DEFAULT_CONFIG: &str = r##"# storwatch-collector configuration. Every value shown is the default.
# Command-line flags override the matching values here.

# Address and port of the write API (/write, /api/v2/write, /api/v3/write_lp, /query), /health,
# /ping and /metrics.
listen = "0.0.0.0:8186"

# Durable queue directory: segments, per-output cursors, learned field types, last-seen
# hosts and dead letters. Local filesystem that honours fsync.
queue_dir = "/var/lib/storwatch-collector"

# Accepted tokens, one per line, optionally named "name:token"; "#" starts a comment.
# Clients send "Authorization: Token <token>" (or Bearer), Basic auth with the token as
# password, or v1 "?u=name&p=<token>".
token_file = "/etc/storwatch/collector.tokens"

# Run without tokens. Refused unless `listen` is a loopback address.
insecure_open = false

[tls]
# PEM certificate chain and key; TLS is on when both are set.
# cert_file = "/etc/storwatch/collector.crt"
# key_file = "/etc/storwatch/collector.key"
# PEM bundle of CAs allowed to issue client certificates; when set, clients must present one
# (mutual TLS) in addition to a token.
# client_ca_file = "/etc/storwatch/agents-ca.pem"

[limits]
# Largest request body as sent (compressed or not), bytes; also the most read and discarded of a
# refused body after its answer, so that a client sending its body before reading reads the refusal.
max_body_bytes = 4194304
# Largest body after gzip decompression, bytes (stops gzip bombs).
max_decompressed_bytes = 16777216
# Longest single line, bytes (0 = no limit but the body's; InfluxDB has none either).
max_line_bytes = 0
# Reject points more than this many seconds in the future / past (0 = no limit).
max_future_s = 3600
max_past_s = 604800
# Close connections whose headers take longer than this (slow clients), seconds.
header_read_timeout_s = 10
# Answer 408 when a body takes longer than this to arrive, seconds.
body_timeout_s = 30
# Close connections with no traffic for this long, seconds.
idle_timeout_s = 120
# Most concurrent connections; more are closed at once.
max_connections = 4096
# Request bodies held in memory at once across all connections; past it a request waits up to
# 5 s for room, then gets 503 + Retry-After: 1.
max_inflight_body_bytes = 67108864
# Listen queue for a fleet reconnecting at once (capped by the kernel's net.core.somaxconn).
listen_backlog = 4096
# Per-token rate limit: average lines per second (0 = none) and burst size in lines.
# Above it the answer is 429 with Retry-After.
rate_limit_lines_per_s = 1000000
rate_limit_burst_lines = 2000000

[queue]
# A new segment file starts at this size, bytes; segments are deleted once every output
# has acknowledged them.
segment_bytes = 67108864
# Backlog of the slowest output above which writes get 503 + Retry-After, bytes.
high_watermark_bytes = 8589934592
# Retry-After sent with that 503, seconds.
retry_after_s = 10

[heartbeat]
# Seconds between heartbeat lines, one per host ever seen (0 = off). Alert in Grafana when
# `last_seen_s` of a host falls behind: see docs/collector.md.
interval_s = 30
# Measurement of the heartbeat lines.
measurement = "collector_heartbeat"
# Tag naming the sending host in incoming lines.
host_tag = "host"
# Hosts tracked at most (a site's nodes, with room): further new hosts get no heartbeat, and a
# warning says how many were turned away. A host silent for forget_after_s (7 days) is dropped.
max_hosts = 10000
forget_after_s = 604800

[dead_letter]
# Lines an output refused for good go to queue_dir/dead-letter/<output>.lp. When the next
# entries would take that file past max_file_bytes it is rotated (<output>.lp.1, .2, …) and at
# most keep_files rotated files are kept, the oldest dropped: at most
# (keep_files + 1) × max_file_bytes per output. Both apply on SIGHUP.
max_file_bytes = 104857600
keep_files = 5
[targets]
# Databases a request may name besides the outputs' own: v1 /write?db= (and rp=), v2
# /api/v2/write?bucket=, v3 /api/v3/write_lp?db=, /query's CREATE DATABASE. "name" allows that
# database with its default retention policy, "name/rp" that retention policy (v2: that bucket).
# Lines for them go to that database on every output (v1 outputs create it on first write).
# A request naming no database, or an output's own, goes to each output's own database; any
# other name is refused with 403. Example: allow = ["telegraf"]
allow = []

# Outputs: every accepted line goes to each of them. Repeat the table for more outputs.
# [[outputs]]
# name = "influx"                 # cursor/dead-letter/metrics name (default: from the URL)
# url = "http://127.0.0.1:8086"   # base URL, or full .../write, .../api/v2/write, .../api/v3/write_lp
# api = "v1"                      # v1, v2 or v3 (default: from the URL path, else v2 if org/bucket set, else v1)
# version = "1.x"                 # InfluxDB version of the server, decides which lines are accepted (default: the api's)
# db = "storwatch"                # v1 and v3
# rp = "autogen"                  # v1 retention policy (optional)
# org = "site"                    # v2
# bucket = "storwatch"            # v2
# token_file = "/etc/storwatch/influx.token"  # "Authorization: Token …"; v1 "user:password" sends Basic
# ca_file = "/etc/storwatch/influx-ca.pem"    # extra CA to trust for https
# batch_lines = 5000              # most lines per request
# batch_bytes = 2097152           # most bytes per request (before gzip)
# timeout_s = 30                  # per request
# gzip = true                     # compress request bodies
# backoff_min_ms = 250            # first retry delay; doubles with full jitter
# backoff_max_s = 60              # longest retry delay, and cap on Retry-After
# auth_retry_s = 60               # retry delay after 401/403/404 (data kept)
# max_in_flight = 3               # write requests in flight at once (1 to 8)
#
## A Prometheus remote-write receiver (Prometheus --web.enable-remote-write-receiver,
## VictoriaMetrics, Mimir, Thanos Receive): samples named as the agent's /metrics names them.
# [[outputs]]
# type = "prometheus_remote_write"
# name = "prometheus"
# url = "http://127.0.0.1:9090/api/v1/write"   # VictoriaMetrics: http://host:8428/api/v1/write
# db = "storwatch"                # the database requests may name as this output's own
# token_file = "/etc/storwatch/prometheus.token"  # "Authorization: Bearer …"; "user:password" sends Basic
# batch_lines = 5000
# max_in_flight = 1               # keep 1 unless the receiver accepts out-of-order samples
"##;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn default_file_is_the_default_config() {
        let parsed: Config = toml::from_str(DEFAULT_CONFIG).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn uncommented_output_example_parses() {
        let text: String = DEFAULT_CONFIG
            .lines()
            .skip_while(|l| !l.starts_with("# [[outputs]]"))
            .map(|l| {
                let l = l.trim_start_matches("# ");
                // drop trailing comments of the example lines
                match l.find("  #") {
                    Some(i) => l.get(..i).unwrap_or(l).to_string(),
                    None => l.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cfg: Config = toml::from_str(&text).unwrap();
        assert_eq!(cfg.outputs.len(), 2);
        assert_eq!(cfg.outputs[0].api, Some(Api::V1));
        assert_eq!(cfg.outputs[0].kind, OutputType::Influxdb);
        assert_eq!(cfg.outputs[0].batch_lines, 5000);
        assert_eq!(cfg.outputs[1].kind, OutputType::PrometheusRemoteWrite);
        assert_eq!(cfg.outputs[1].max_in_flight, Some(1));
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(toml::from_str::<Config>("listne = \"x\"").is_err());
    }
}
