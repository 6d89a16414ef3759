//! Last-seen per host, and the heartbeat lines that carry it to InfluxDB.
//!
//! Every accepted line's `host` tag (configurable) updates that host's last-seen time. Every
//! heartbeat interval the collector writes, for each host seen within `forget_after_s` (7 days),
//! at most `max_hosts` (10,000) of them:
//!
//! ```text
//! collector_heartbeat,host=<host> last_seen_s=<unix s>i,age_s=<s since>i,lines=<lines in interval>i <now>
//! ```
//!
//! through its own queue, so every output gets it. A node that falls silent keeps getting
//! heartbeat points whose `age_s` grows, which a Grafana alert can test directly. The map is
//! saved to `hosts.json` in the queue directory at each heartbeat, so a restart of the collector
//! does not forget a node that went silent before it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use storwatch_wire::lp::LineWriter;

/// What is known about one host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSeen {
    /// Unix seconds of the last accepted line.
    pub last_seen_s: i64,
    /// Lines accepted since the last heartbeat.
    #[serde(skip)]
    pub lines: u64,
}

/// Last-seen times of every host.
#[derive(Debug)]
pub struct LastSeen {
    path: Option<PathBuf>,
    hosts: Mutex<BTreeMap<String, HostSeen>>,
    max_hosts: AtomicUsize,
    forget_after_s: AtomicI64,
    /// New hosts turned away at the cap since the last heartbeat, and in all.
    refused: Mutex<(u64, u64)>,
}

impl LastSeen {
    /// Loads `hosts.json` from `dir` when present (a damaged file starts empty: it is only a
    /// convenience, the data itself is in InfluxDB).
    pub fn load(dir: Option<&Path>) -> LastSeen {
        let path = dir.map(|d| d.join("hosts.json"));
        let hosts = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        LastSeen {
            path,
            hosts: Mutex::new(hosts),
            max_hosts: AtomicUsize::new(10_000),
            forget_after_s: AtomicI64::new(7 * 86_400),
            refused: Mutex::new((0, 0)),
        }
    }

    /// With the cap on hosts and the time after which a silent host is dropped.
    pub fn with_limits(self, max_hosts: usize, forget_after_s: u64) -> LastSeen {
        self.set_limits(max_hosts, forget_after_s);
        self
    }

    /// Changes the cap on hosts and the time after which a silent host is dropped (SIGHUP). A
    /// lower cap turns away new hosts until enough known ones have been silent long enough.
    pub fn set_limits(&self, max_hosts: usize, forget_after_s: u64) {
        self.max_hosts.store(max_hosts, Ordering::Relaxed);
        self.forget_after_s.store(
            i64::try_from(forget_after_s).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
    }

    /// New hosts turned away at the cap since start.
    pub fn refused_total(&self) -> u64 {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Hosts tracked.
    pub fn len(&self) -> usize {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records lines from hosts at `now_s`. A host seen for the first time is saved at once
    /// (before its write is acknowledged), so a node that sends once and then falls silent
    /// is not forgotten by a collector crash; later times are saved with each heartbeat.
    pub fn seen<'a>(&self, hosts: impl IntoIterator<Item = (&'a String, &'a u64)>, now_s: i64) {
        let mut map = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        let mut refused = 0u64;
        for (host, lines) in hosts {
            if let Some(h) = map.get_mut(host.as_str()) {
                h.last_seen_s = h.last_seen_s.max(now_s);
                h.lines += lines;
            } else if map.len() < self.max_hosts.load(Ordering::Relaxed) {
                map.insert(
                    host.clone(),
                    HostSeen {
                        last_seen_s: now_s,
                        lines: *lines,
                    },
                );
            } else {
                refused += 1;
            }
        }
        if refused > 0 {
            let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            r.0 += refused;
            r.1 += refused;
        }
        if map.len() != before {
            self.save(&map, true);
        }
    }

    fn save(&self, map: &BTreeMap<String, HostSeen>, sync: bool) {
        let Some(path) = &self.path else { return };
        let Ok(bytes) = serde_json::to_vec(map) else {
            return;
        };
        let tmp = path.with_extension("json.tmp");
        let written = (|| -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::os::unix::fs::OpenOptionsExt::mode(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true),
                0o600,
            )
            .open(&tmp)?;
            f.write_all(&bytes)?;
            if sync {
                f.sync_data()?;
            }
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot save last-seen hosts");
        }
    }

    pub fn get(&self, host: &str) -> Option<HostSeen> {
        self.hosts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(host)
            .copied()
    }

    /// The heartbeat lines at `now_ns`, resetting the per-interval line counts, and saves the
    /// map.
    pub fn heartbeat(&self, measurement: &str, host_tag: &str, now_ns: i64) -> String {
        let now_s = now_ns.div_euclid(1_000_000_000);
        let mut map = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        let window = self.forget_after_s.load(Ordering::Relaxed);
        map.retain(|_, seen| now_s.saturating_sub(seen.last_seen_s) <= window);
        if map.len() < before {
            tracing::info!(
                forgotten = before - map.len(),
                silent_for_s = window,
                "hosts silent for longer than heartbeat.forget_after_s get no more heartbeats"
            );
        }
        let refused = std::mem::take(&mut self.refused.lock().unwrap_or_else(|e| e.into_inner()).0);
        if refused > 0 {
            tracing::warn!(
                refused_hosts = refused,
                max_hosts = self.max_hosts.load(Ordering::Relaxed),
                "new hosts beyond heartbeat.max_hosts get no heartbeat (their lines are stored); raise it if the site is that large"
            );
        }
        // No common host tag: the host goes under the configured tag name.
        let mut w = LineWriter::new("", &[]);
        for (host, seen) in map.iter_mut() {
            // Tag values must be non-empty and single-line (the writer would clean them into
            // another name); such hosts were never accepted, but be sure.
            if host.is_empty() || host.contains(['\n', '\r']) || host.ends_with('\\') {
                continue;
            }
            w.line(measurement, now_ns)
                .tag(host_tag, host)
                .field("last_seen_s", seen.last_seen_s)
                .field("age_s", now_s.saturating_sub(seen.last_seen_s))
                .field("lines", i64::try_from(seen.lines).unwrap_or(i64::MAX))
                .write();
            seen.lines = 0;
        }
        self.save(&map, false);
        String::from_utf8(w.take()).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_lines_and_persistence() {
        let dir = tempfile::tempdir().unwrap();
        let ls = LastSeen::load(Some(dir.path()));
        let a = ("node-a".to_string(), 10u64);
        let b = ("node b".to_string(), 5u64);
        ls.seen([(&a.0, &a.1), (&b.0, &b.1)], 1000);
        ls.seen([(&a.0, &a.1)], 1010);
        let text = ls.heartbeat("collector_heartbeat", "host", 1_030_000_000_000);
        assert_eq!(
            text,
            "collector_heartbeat,host=node\\ b last_seen_s=1000i,age_s=30i,lines=5i 1030000000000\n\
             collector_heartbeat,host=node-a last_seen_s=1010i,age_s=20i,lines=20i 1030000000000\n"
        );
        // counts reset, last-seen survives a reload
        let ls2 = LastSeen::load(Some(dir.path()));
        assert_eq!(ls2.get("node-a").unwrap().last_seen_s, 1010);
        let text = ls.heartbeat("hb", "host", 1_040_000_000_000);
        assert!(text.contains("host=node-a last_seen_s=1010i,age_s=30i,lines=0i"));
    }

    #[test]
    fn one_request_with_many_hosts_is_bounded_and_silent_hosts_go() {
        let ls = LastSeen::load(None).with_limits(1000, 3600);
        let hosts: Vec<(String, u64)> = (0..100_000).map(|i| (format!("h{i}"), 1)).collect();
        ls.seen(hosts.iter().map(|(h, n)| (h, n)), 1000);
        assert_eq!(ls.len(), 1000);
        assert_eq!(ls.refused_total(), 99_000);
        let text = ls.heartbeat("hb", "host", 1_100_000_000_000);
        assert_eq!(text.lines().count(), 1000);
        // an hour and more later, with one of them still talking
        let a = ("h1".to_string(), 1u64);
        ls.seen([(&a.0, &a.1)], 4_700);
        let text = ls.heartbeat("hb", "host", 4_700_000_000_000);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.starts_with("hb,host=h1 "), "{text}");
    }
}
