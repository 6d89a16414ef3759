//! The lines the bench sends: its own `disk` line for 14,400 series (600 hosts × 24 devices), or
//! an agent's report (`--agent-lines FILE`) written again for as many hosts as make about as
//! many lines a report, each line under its host's name and its report's time.

use std::path::Path;

use anyhow::{bail, Context as _};

/// The bench's own series a report.
const DISK_SERIES: usize = 14_400;
/// The time between two reports of a series.
pub(crate) const REPORT_NS: u64 = 10_000_000_000;

/// What the lines are.
#[derive(Debug, Default)]
pub(crate) enum Lines {
    /// [`disk_line`] of 600 hosts × 24 devices.
    #[default]
    Disk,
    /// An agent's report, each line cut around its `host` tag's value and before its time.
    Agent {
        lines: Vec<(String, String)>,
        hosts: usize,
        /// lines of the report that are a `disk` line with `util_pct`
        util: Vec<bool>,
    },
}

impl Lines {
    /// The lines of `path`, an agent's report (line protocol, each line with a `host` tag and a
    /// time).
    pub(crate) fn agent(path: &Path) -> anyhow::Result<Lines> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut lines = Vec::new();
        let mut util = Vec::new();
        for (i, l) in text.lines().enumerate() {
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let Some(at) = l.find(",host=").map(|a| a + ",host=".len()) else {
                bail!("{}:{}: no host tag", path.display(), i + 1);
            };
            let end = at + l[at..].find([',', ' ']).unwrap_or(l.len() - at);
            let Some(ts) = l
                .rfind(' ')
                .filter(|t| l[t + 1..].bytes().all(|b| b.is_ascii_digit()))
            else {
                bail!("{}:{}: no time", path.display(), i + 1);
            };
            if end > ts {
                bail!(
                    "{}:{}: the host tag is not among the tags",
                    path.display(),
                    i + 1
                );
            }
            util.push(l.starts_with("disk,") && l[end..ts].contains("util_pct="));
            lines.push((l[..at].to_owned(), l[end..ts].to_owned()));
        }
        if lines.is_empty() {
            bail!("{}: no line", path.display());
        }
        let hosts = DISK_SERIES.div_ceil(lines.len());
        Ok(Lines::Agent { lines, hosts, util })
    }

    /// Lines a report (every series once).
    pub(crate) fn per_report(&self) -> usize {
        match self {
            Lines::Disk => DISK_SERIES,
            Lines::Agent { lines, hosts, .. } => lines.len() * hosts,
        }
    }

    /// Writes line `n` of the stream that starts at `ts0` (ns), with its newline.
    pub(crate) fn write(&self, out: &mut String, n: usize, ts0: u64) {
        let ts = ts0 + (n / self.per_report()) as u64 * REPORT_NS;
        match self {
            Lines::Disk => disk_line(out, n % 600, (n / 600) % 24, ts),
            Lines::Agent { lines, hosts, .. } => {
                use std::fmt::Write as _;
                let (head, tail) = &lines[n % lines.len()];
                let host = (n / lines.len()) % hosts;
                let _ = writeln!(out, "{head}node{host:03}{tail} {ts}");
            }
        }
    }

    /// Of the first `total` lines, those that carry a `disk` line's `util_pct` (what the
    /// receivers are asked for afterwards).
    pub(crate) fn util_lines(&self, total: u64) -> u64 {
        match self {
            Lines::Disk => total,
            Lines::Agent { util, .. } => {
                let t = util.len() as u64;
                let each = util.iter().filter(|u| **u).count() as u64;
                let rest = util
                    .iter()
                    .take((total % t) as usize)
                    .filter(|u| **u)
                    .count() as u64;
                total / t * each + rest
            }
        }
    }

    /// `count` request bodies of `lines` lines each, gzipped or not.
    pub(crate) fn bodies(
        &self,
        count: usize,
        lines: usize,
        ts0: u64,
        gz: bool,
    ) -> Vec<bytes::Bytes> {
        (0..count)
            .map(|b| {
                let mut s = String::with_capacity(lines * 260);
                for i in 0..lines {
                    self.write(&mut s, b * lines + i, ts0);
                }
                bytes::Bytes::from(if gz {
                    super::gzip(s.as_bytes())
                } else {
                    s.into_bytes()
                })
            })
            .collect()
    }

    /// Bytes of one uncompressed request body of `lines` lines.
    pub(crate) fn raw_len(&self, lines: usize) -> usize {
        let mut s = String::new();
        for i in 0..lines {
            self.write(&mut s, i, 1);
        }
        s.len()
    }
}

/// A realistic agent line: the `disk` measurement with its iostat fields.
fn disk_line(out: &mut String, host: usize, dev: usize, ts_ns: u64) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "disk,host=node{host:03},device=sd{dev},name=sd{dev},kind=disk,rotational=1 \
         r_per_s=12.5,w_per_s=30.25,rkb_per_s=1024.5,wkb_per_s=2048.25,r_await_ms=1.25,\
         w_await_ms=3.5,aqu_sz=0.5,util_pct=45.25,util_max_pct=99.5,saturated_s=2i {ts_ns}"
    );
}
