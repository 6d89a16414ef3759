//! `storwatch-agent top`: a live view a sysadmin reads like `iostat -x 1` and `sar -n DEV 1`,
//! with the state of the MD arrays, multipath maps and zpools above them, from the same
//! per-second samples the reports are built from.
//!
//! Its rows come from the collectors, each filling its pane of a [`Live`] from its last sample
//! ([`crate::collect::Collector::live`]); this module only orders and draws them, and
//! [`render`] is a pure function of the rows, the [`View`] and the width. Columns carry
//! priorities and the least important are dropped to fit the width ([`table`]); the terminal
//! side (its size, raw mode, keys) is [`term`].
//!
//! Devices are sorted by the chosen [`SortKey`] (%util by default), busiest first; a device at
//! or above the saturation threshold is flagged `SAT` (in reverse video on a terminal), a NIC
//! at or above 90 % of its link `LINE`, one dropping or erroring packets `DROP`/`ERR`.

mod table;
pub mod term;

use std::fmt::Write;

use crate::collect::{DiskNow, Live, MdNow, MpathNow, NetNow, PoolNow};
use crate::health::md::ArrayState;
use table::{num, text, Cell, Row, Table, Tail};

/// What the rows are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// %util, busiest first (interfaces: %ifutil).
    #[default]
    Util,
    /// Mean time a request took, r and w together (interfaces: bytes/s).
    Await,
    /// Read kB/s (interfaces: received).
    Read,
    /// Written kB/s (interfaces: transmitted).
    Write,
    /// Requests per second, r + w (interfaces: packets).
    Iops,
    /// Name, in order.
    Name,
}

impl SortKey {
    /// Every key, in the order the footer lists them.
    pub const ALL: [SortKey; 6] = [
        SortKey::Util,
        SortKey::Await,
        SortKey::Read,
        SortKey::Write,
        SortKey::Iops,
        SortKey::Name,
    ];

    /// Its name on the command line (`--sort`).
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Util => "util",
            SortKey::Await => "await",
            SortKey::Read => "read",
            SortKey::Write => "write",
            SortKey::Iops => "iops",
            SortKey::Name => "name",
        }
    }

    /// The key that selects it.
    pub fn key(self) -> char {
        match self {
            SortKey::Util => 'u',
            SortKey::Await => 'a',
            SortKey::Read => 'r',
            SortKey::Write => 'w',
            SortKey::Iops => 'i',
            SortKey::Name => 'n',
        }
    }

    /// What the title says the devices are sorted by.
    fn label(self) -> &'static str {
        match self {
            SortKey::Util => "%util",
            SortKey::Await => "await",
            SortKey::Read => "rkB/s",
            SortKey::Write => "wkB/s",
            SortKey::Iops => "IOPS",
            SortKey::Name => "name",
        }
    }

    /// From its name or its key.
    pub fn parse(s: &str) -> Option<SortKey> {
        SortKey::ALL
            .into_iter()
            .find(|k| s == k.name() || s.chars().eq([k.key()]))
    }
}

/// What to draw.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// %util at which a device is flagged.
    pub threshold_pct: f64,
    /// Devices shown at most (the first after sorting).
    pub max_devices: usize,
    /// Use ANSI highlighting.
    pub color: bool,
    /// Columns available; `usize::MAX` for no limit (every column, as wide as it needs).
    pub width: usize,
    /// What devices and interfaces are sorted by.
    pub sort: SortKey,
    /// Show the MD / multipath / zpool pane.
    pub health: bool,
    /// Show the line of keys at the bottom (when keys are read).
    pub footer: bool,
    /// Lines available: the device table is cut to fit (`None`: no limit).
    pub height: Option<usize>,
}

impl Default for View {
    fn default() -> Self {
        Self {
            threshold_pct: 95.0,
            max_devices: 40,
            color: false,
            width: usize::MAX,
            sort: SortKey::Util,
            health: true,
            footer: false,
            height: None,
        }
    }
}

/// What a key pressed in `top` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave.
    Quit,
    /// Sort by this key.
    Sort(SortKey),
    /// Show or hide the health pane.
    ToggleHealth,
    /// Nothing.
    None,
}

/// The action of one byte read from the terminal: `q` quits, `u a r w i n` sort, `h` toggles
/// the health pane; anything else (arrows and other escape sequences included) does nothing.
pub fn action(byte: u8) -> Action {
    match byte {
        b'q' => Action::Quit,
        b'h' => Action::ToggleHealth,
        b => SortKey::ALL
            .into_iter()
            .find(|k| u32::from(b) == u32::from(k.key()))
            .map_or(Action::None, Action::Sort),
    }
}

impl View {
    /// `self` after `a` (quitting leaves it as is).
    pub fn apply(mut self, a: Action) -> View {
        match a {
            Action::Sort(k) => self.sort = k,
            Action::ToggleHealth => self.health = !self.health,
            Action::Quit | Action::None => {}
        }
        self
    }
}

/// The one-line list of keys.
fn footer() -> String {
    let mut s = String::from("q quit  sort:");
    for k in SortKey::ALL {
        let _ = write!(s, " {} {}", k.key(), k.label());
    }
    s.push_str("  h health");
    s
}

/// Mean time of a request, reads and writes together (iostat's old `await`).
fn await_ms(d: &DiskNow) -> f64 {
    let r = &d.rates;
    let n = r.r_per_s + r.w_per_s;
    if n > 0.0 {
        (r.r_await_ms * r.r_per_s + r.w_await_ms * r.w_per_s) / n
    } else {
        0.0
    }
}

fn disk_label(d: &DiskNow) -> String {
    if d.name != d.device {
        format!("{} ({})", d.name, d.device)
    } else {
        d.device.clone()
    }
}

/// Devices by `key`, highest first (names: in order), then by name for a stable screen.
fn sorted_disks(live: &Live, key: SortKey) -> Vec<&DiskNow> {
    let mut v: Vec<&DiskNow> = live.disks.iter().collect();
    let k = |d: &DiskNow| match key {
        SortKey::Util => d.rates.util_pct,
        SortKey::Await => await_ms(d),
        SortKey::Read => d.rates.rkb_per_s,
        SortKey::Write => d.rates.wkb_per_s,
        SortKey::Iops => d.rates.r_per_s + d.rates.w_per_s,
        SortKey::Name => 0.0,
    };
    v.sort_by(|a, b| {
        k(b).total_cmp(&k(a))
            .then_with(|| disk_label(a).cmp(&disk_label(b)))
    });
    v
}

/// Interfaces by `key`, highest first, then by name.
fn sorted_nets(live: &Live, key: SortKey) -> Vec<&NetNow> {
    let mut v: Vec<&NetNow> = live.nets.iter().collect();
    let k = |n: &NetNow| {
        let r = &n.rates;
        match key {
            SortKey::Util => r.util_pct.unwrap_or(0.0),
            SortKey::Await => r.rx_bytes_per_s + r.tx_bytes_per_s,
            SortKey::Read => r.rx_bytes_per_s,
            SortKey::Write => r.tx_bytes_per_s,
            SortKey::Iops => r.rx_packets_per_s + r.tx_packets_per_s,
            SortKey::Name => 0.0,
        }
    };
    v.sort_by(|a, b| k(b).total_cmp(&k(a)).then_with(|| a.iface.cmp(&b.iface)));
    v
}

/// Renders one screen, no line wider than `view.width`: a title, the health pane, the iostat -x
/// table, the sar -n DEV table and, when asked, the keys.
pub fn render(host: &str, live: &Live, view: View) -> String {
    let width = view.width.max(1);
    let disks = sorted_disks(live, view.sort);
    let nets = sorted_nets(live, view.sort);
    let mut out = String::with_capacity(16 * 1024);
    let saturated = disks
        .iter()
        .filter(|d| d.rates.util_pct >= view.threshold_pct)
        .count();
    let counts = format!(
        "{host} — {} devices, {} saturated (≥ {:.0}% util), {} interfaces — by {}",
        disks.len(),
        saturated,
        view.threshold_pct,
        nets.len(),
        view.sort.label(),
    );
    // The program's name is the first thing to go on a narrow screen.
    let title = format!("storwatch top — {counts}");
    let title = if table::width_of(&title) <= width {
        title
    } else {
        counts
    };
    let _ = writeln!(out, "{}", table::ellipsize(&title, width));
    if view.health {
        health(&mut out, live, width, view.color);
    }
    let _ = writeln!(out);
    let mut rest = String::new();
    net_table(&nets).draw(&mut rest, width, view.color);
    if view.footer {
        let _ = writeln!(rest);
        let _ = writeln!(rest, "{}", table::ellipsize(&footer(), width));
    }
    // On a short terminal the device table gives way: header, blank line and, when rows are
    // left out, the line that says how many.
    let mut max_devices = view.max_devices;
    if let Some(h) = view.height {
        let fixed = out.lines().count() + 2 + rest.lines().count();
        let room = h.saturating_sub(fixed);
        if disks.len().min(max_devices) > room {
            max_devices = room.saturating_sub(1);
        }
    }
    disk_table(&disks, max_devices, &view).draw(&mut out, width, view.color);
    if disks.len() > max_devices {
        let more = format!("… {} more devices", disks.len() - max_devices);
        let _ = writeln!(out, "{}", table::ellipsize(&more, width));
    }
    let _ = writeln!(out);
    out.push_str(&rest);
    out
}

fn disk_table(disks: &[&DiskNow], max_devices: usize, view: &View) -> Table {
    // iostat -x order; priorities keep %util, await, throughput and IOPS longest.
    let cols = vec![
        text("kind", 6, 6),
        num("r/s", 8, 4),
        num("w/s", 8, 4),
        num("rkB/s", 9, 3),
        num("wkB/s", 9, 3),
        num("rrqm/s", 8, 8),
        num("wrqm/s", 8, 8),
        num("%rrqm", 6, 9),
        num("%wrqm", 6, 9),
        num("r_await", 7, 2),
        num("w_await", 7, 2),
        num("rareq-sz", 8, 7),
        num("wareq-sz", 8, 7),
        num("aqu-sz", 7, 5),
        num("svctm", 6, 10),
        num("%util", 6, 1),
    ];
    let rows = disks
        .iter()
        .take(max_devices)
        .map(|d| {
            let r = &d.rates;
            let sat = r.util_pct >= view.threshold_pct;
            Row {
                key: disk_label(d),
                cells: vec![
                    Cell::text(d.kind.as_str()),
                    Cell::Num(r.r_per_s, 2),
                    Cell::Num(r.w_per_s, 2),
                    Cell::Num(r.rkb_per_s, 2),
                    Cell::Num(r.wkb_per_s, 2),
                    Cell::Num(r.rrqm_per_s, 2),
                    Cell::Num(r.wrqm_per_s, 2),
                    Cell::Num(r.rrqm_pct, 2),
                    Cell::Num(r.wrqm_pct, 2),
                    Cell::Num(r.r_await_ms, 2),
                    Cell::Num(r.w_await_ms, 2),
                    Cell::Num(r.rareq_sz_kb, 2),
                    Cell::Num(r.wareq_sz_kb, 2),
                    Cell::Num(r.aqu_sz, 2),
                    Cell::Num(r.svctm_ms, 2),
                    Cell::Num(r.util_pct, 2),
                ],
                tail: if sat {
                    vec![("SAT".to_owned(), true)]
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    Table {
        key_head: "Device",
        key_max: 20,
        cols,
        tail: Some(Tail {
            head: "flag",
            reserve: usize::MAX,
            sep: " ",
        }),
        rows,
    }
}

fn net_table(nets: &[&NetNow]) -> Table {
    let cols = vec![
        num("rxpck/s", 9, 3),
        num("txpck/s", 9, 3),
        num("rxkB/s", 10, 1),
        num("txkB/s", 10, 1),
        num("rxcmp/s", 8, 8),
        num("txcmp/s", 8, 8),
        num("rxmcst/s", 8, 7),
        num("rxerr/s", 8, 5),
        num("rxdrop/s", 8, 4),
        num("txdrop/s", 8, 4),
        num("Mb/s", 6, 6),
        num("%ifutil", 7, 2),
    ];
    let rows = nets
        .iter()
        .map(|n| {
            let r = &n.rates;
            let util = r.util_pct.unwrap_or(0.0);
            let mut flags = Vec::new();
            if util >= 90.0 {
                flags.push(("LINE".to_owned(), true));
            }
            if r.rx_drops_per_s + r.tx_drops_per_s > 0.0 {
                flags.push(("DROP".to_owned(), true));
            }
            if r.rx_errors_per_s + r.tx_errors_per_s > 0.0 {
                flags.push(("ERR".to_owned(), true));
            }
            Row {
                key: n.iface.clone(),
                cells: vec![
                    Cell::Num(r.rx_packets_per_s, 2),
                    Cell::Num(r.tx_packets_per_s, 2),
                    Cell::Num(r.rx_bytes_per_s / 1024.0, 2),
                    Cell::Num(r.tx_bytes_per_s / 1024.0, 2),
                    Cell::Num(r.rx_compressed_per_s, 2),
                    Cell::Num(r.tx_compressed_per_s, 2),
                    Cell::Num(r.rx_multicast_per_s, 2),
                    Cell::Num(r.rx_errors_per_s, 2),
                    Cell::Num(r.rx_drops_per_s, 2),
                    Cell::Num(r.tx_drops_per_s, 2),
                    n.speed_mbps.map_or(Cell::None, |s| Cell::Num(s as f64, 0)),
                    Cell::opt(r.util_pct, 2),
                ],
                tail: flags,
            }
        })
        .collect();
    Table {
        key_head: "IFACE",
        key_max: 16,
        cols,
        tail: Some(Tail {
            head: "flag",
            reserve: usize::MAX,
            sep: " ",
        }),
        rows,
    }
}

/// The health pane: one table per domain present, nothing when the host has none of them.
fn health(out: &mut String, live: &Live, width: usize, color: bool) {
    if !live.arrays.is_empty() {
        let _ = writeln!(out);
        md_table(&live.arrays).draw(out, width, color);
    }
    if !live.maps.is_empty() {
        let _ = writeln!(out);
        mpath_table(&live.maps).draw(out, width, color);
    }
    if !live.pools.is_empty() {
        let _ = writeln!(out);
        pool_table(&live.pools).draw(out, width, color);
    }
}

/// Width set aside for the notes of a health row (which members, paths, vdevs are down):
/// at 80 columns they push out the less telling columns.
const HEALTH_NOTES: usize = 16;

/// A table of the health pane: rows named by array, map or pool, and notes last.
fn health_table(
    key_head: &'static str,
    cols: Vec<table::Column>,
    rows: Vec<Row>,
    notes: &'static str,
) -> Table {
    Table {
        key_head,
        key_max: 16,
        cols,
        tail: Some(Tail {
            head: notes,
            reserve: HEALTH_NOTES,
            sep: ", ",
        }),
        rows,
    }
}

/// Seconds as `45s`, `12m`, `3h25m`, `2d04h`; `-` when unknown.
fn eta(s: Option<f64>) -> Cell {
    let Some(s) = s.filter(|s| s.is_finite() && *s >= 0.0) else {
        return Cell::None;
    };
    // Whole seconds; beyond 999 days the figure says nothing more.
    let s = s.min(999.0 * 86_400.0).round() as u64;
    let t = match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    };
    Cell::text(t)
}

/// A probability as `1:6.1M` (one chance in …), `12%` from 1 % up, `0` for none.
fn risk(p: Option<f64>) -> Cell {
    let Some(p) = p.filter(|p| p.is_finite() && *p >= 0.0) else {
        return Cell::None;
    };
    let t = if p == 0.0 {
        "0".to_owned()
    } else if p >= 0.01 {
        format!("{:.0}%", (p * 100.0).min(100.0))
    } else {
        format!("1:{}", table::fit_num(1.0 / p, 0, 4))
    };
    Cell::Text(t, p >= 0.01)
}

fn pct(p: Option<f64>) -> Cell {
    match p.filter(|p| p.is_finite()) {
        Some(p) => Cell::text(format!("{p:.1}%")),
        None => Cell::None,
    }
}

fn md_table(arrays: &[MdNow]) -> Table {
    let cols = vec![
        text("level", 6, 4),
        text("state", 10, 0),
        num("disks", 5, 1),
        text("sync", 7, 1),
        num("done", 6, 0),
        num("MB/s", 6, 5),
        num("eta", 7, 1),
        num("redund", 6, 2),
        num("risk", 6, 2),
        num("mismatch", 8, 6),
    ];
    let rows = arrays
        .iter()
        .map(|a| {
            let s = &a.status;
            let running = s.sync_pct.is_some();
            let mut notes: Vec<(String, bool)> = Vec::new();
            if s.stalled {
                notes.push(("STALLED".to_owned(), true));
            }
            for m in &a.members {
                let role = m.role();
                if role != "active" && role != "spare" {
                    notes.push((format!("{} {role}", m.name), m.failed));
                }
            }
            Row {
                key: s.array.clone(),
                cells: vec![
                    Cell::text(s.level.as_str()),
                    Cell::Text(s.state.as_str().to_owned(), s.state != ArrayState::Clean),
                    Cell::text(format!("{}/{}", s.active, s.members)),
                    // a sync that waits (`delayed`, `pending`) says so too
                    Cell::text(if s.sync_action == "idle" {
                        "-"
                    } else {
                        s.sync_action.as_str()
                    }),
                    pct(s.sync_pct),
                    s.sync_speed_kbps
                        .filter(|_| running)
                        .map_or(Cell::None, |k| Cell::Num(k as f64 * 1024.0 / 1e6, 1)),
                    eta(s.sync_eta_s),
                    s.redundancy_left
                        .map_or(Cell::None, |r| Cell::Text(r.to_string(), r == 0)),
                    risk(s.rebuild_risk),
                    s.mismatch_cnt
                        .map_or(Cell::None, |m| Cell::Num(m as f64, 0)),
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("ARRAY", cols, rows, "members")
}

fn mpath_table(maps: &[MpathNow]) -> Table {
    let cols = vec![
        text("state", 8, 0),
        num("paths", 5, 0),
        num("group", 5, 2),
        num("pref", 4, 2),
        num("flap", 4, 1),
        text("queue", 5, 3),
    ];
    let rows = maps
        .iter()
        .map(|m| {
            let state = if m.hung_io == Some(true) {
                "HUNG I/O"
            } else if m.active == 0 && m.paths > 0 {
                "no path"
            } else if m.active < m.paths {
                "degraded"
            } else if m.flapping > 0 {
                "flapping"
            } else {
                "ok"
            };
            let mut notes: Vec<(String, bool)> = Vec::new();
            if let (Some(a), Some(p)) = (m.active_group, m.preferred_group) {
                if a != p {
                    notes.push(("not on preferred group".to_owned(), false));
                }
            }
            notes.extend(m.down.iter().map(|d| (d.clone(), false)));
            let group = |g: Option<u32>| g.map_or(Cell::None, |g| Cell::Num(f64::from(g), 0));
            Row {
                key: m.map.clone(),
                cells: vec![
                    Cell::Text(state.to_owned(), state != "ok"),
                    Cell::text(format!("{}/{}", m.active, m.paths)),
                    group(m.active_group),
                    group(m.preferred_group),
                    Cell::Num(m.flapping as f64, 0),
                    Cell::text(match m.queue_if_no_path {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "-",
                    }),
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("MAP", cols, rows, "notes")
}

fn pool_table(pools: &[PoolNow]) -> Table {
    let cols = vec![
        text("health", 9, 0),
        num("cap", 4, 3),
        text("scan", 8, 1),
        num("done", 6, 0),
        num("eta", 7, 1),
        num("redund", 6, 2),
        num("risk", 6, 2),
        num("err r/w/c", 9, 4),
    ];
    let rows = pools
        .iter()
        .map(|p| {
            let r = &p.report;
            let running = matches!(r.scan_state, "in_progress" | "paused");
            let mut notes: Vec<(String, bool)> = Vec::new();
            if r.scan_state == "paused" {
                notes.push(("scan paused".to_owned(), false));
            }
            // Devices that are not ONLINE or that zpool annotates (`(resilvering)`), and
            // vdevs above them that are down themselves: a DEGRADED raidz only says that one
            // of its devices is, which its own note says better.
            for v in r.vdevs.iter().filter(|v| !v.parent.is_empty()) {
                let leaf = !r.vdevs.iter().any(|c| c.parent == v.name);
                let odd = match v.state.as_str() {
                    "ONLINE" | "AVAIL" | "INUSE" | "" => false,
                    "DEGRADED" => leaf,
                    _ => true,
                };
                let note = v.note.as_deref().filter(|_| leaf).map(|n| {
                    if n.starts_with('(') {
                        n.to_owned()
                    } else {
                        format!("({n})")
                    }
                });
                // A device zpool cannot open is named by its GUID, and its note says what
                // it was (`was /dev/sdj1`): the old name is the one a reader knows.
                let (name, note) = match v.note.as_deref().and_then(|n| n.strip_prefix("was ")) {
                    Some(was) if leaf => (was.trim_start_matches("/dev/").to_owned(), None),
                    _ => (v.name.clone(), note),
                };
                match (odd, note) {
                    (true, Some(n)) => notes.push((format!("{name} {} {n}", v.state), true)),
                    (true, None) => notes.push((format!("{name} {}", v.state), true)),
                    (false, Some(n)) => notes.push((format!("{name} {n}"), false)),
                    (false, None) => {}
                }
            }
            let health = r.health.clone().unwrap_or_else(|| "-".to_owned());
            let errs = match (r.read_errors, r.write_errors, r.cksum_errors) {
                (None, None, None) => Cell::None,
                (a, b, c) => {
                    let f = |x: Option<u64>| x.map_or_else(|| "-".to_owned(), |x| x.to_string());
                    Cell::text(format!("{}/{}/{}", f(a), f(b), f(c)))
                }
            };
            Row {
                key: p.pool.clone(),
                cells: vec![
                    Cell::Text(health.clone(), health != "ONLINE"),
                    r.capacity_pct
                        .map_or(Cell::None, |c| Cell::text(format!("{c:.0}%"))),
                    Cell::text(if running { r.scan_kind } else { "-" }),
                    pct(r.scan_pct.filter(|_| running)),
                    eta(r
                        .scan_eta_s
                        .or(r.scan_tool_eta_s.map(|s| s as f64))
                        .filter(|_| r.scan_state == "in_progress")),
                    r.redundancy_left
                        .map_or(Cell::None, |x| Cell::Text(x.to_string(), x == 0)),
                    risk(r.rebuild_risk),
                    errs,
                ],
                tail: notes,
            }
        })
        .collect();
    health_table("POOL", cols, rows, "vdevs")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::{DiskRates, NetRates};
    use crate::sources::sysblock::DeviceKind;

    fn live() -> Live {
        let disks = vec![
            DiskNow {
                device: "sda".into(),
                name: "sda".into(),
                kind: DeviceKind::Disk,
                rates: DiskRates {
                    r_per_s: 3.0,
                    rkb_per_s: 900.0,
                    r_await_ms: 40.0,
                    util_pct: 1.5,
                    ..DiskRates::default()
                },
            },
            DiskNow {
                device: "dm-3".into(),
                name: "mpathc".into(),
                kind: DeviceKind::Mpath,
                rates: DiskRates {
                    w_per_s: 812.0,
                    wkb_per_s: 51_968.0,
                    w_await_ms: 2.0,
                    util_pct: 100.0,
                    aqu_sz: 31.5,
                    ..DiskRates::default()
                },
            },
        ];
        let nets = vec![
            NetNow {
                iface: "lo".into(),
                speed_mbps: None,
                rates: NetRates {
                    rx_bytes_per_s: 1000.0,
                    ..NetRates::default()
                },
            },
            NetNow {
                iface: "ens1f0".into(),
                speed_mbps: Some(10_000),
                rates: NetRates {
                    rx_bytes_per_s: 1.2e9,
                    rx_drops_per_s: 3.0,
                    util_pct: Some(96.0),
                    ..NetRates::default()
                },
            },
        ];
        Live {
            disks,
            nets,
            ..Live::default()
        }
    }

    fn view() -> View {
        View {
            threshold_pct: 95.0,
            ..View::default()
        }
    }

    #[test]
    fn saturated_devices_and_busy_nics_are_flagged() {
        let s = render("ds01", &live(), view());
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].contains("2 devices, 1 saturated"), "{s}");
        // busiest first, whatever order the collectors gave them in
        assert!(lines[3].starts_with("mpathc (dm-3)"), "{s}");
        assert!(lines[4].starts_with("sda "), "{s}");
        let ens = lines.iter().position(|l| l.starts_with("ens1f0"));
        let lo = lines.iter().position(|l| l.starts_with("lo "));
        assert!(ens.is_some() && ens < lo, "{s}");
        let mp = lines
            .iter()
            .find(|l| l.starts_with("mpathc (dm-3)"))
            .expect("mpath row");
        assert!(mp.ends_with("100.00  SAT"), "{mp}");
        let sda = lines
            .iter()
            .find(|l| l.starts_with("sda "))
            .expect("sda row");
        assert!(!sda.contains("SAT"));
        let nic = lines
            .iter()
            .find(|l| l.starts_with("ens1f0"))
            .expect("nic row");
        assert!(nic.contains("LINE DROP"), "{nic}");
        assert!(nic.contains("1171875.00"), "{nic}"); // 1.2e9 B/s in kB/s
    }

    fn first_device(v: View) -> String {
        let s = render("ds01", &live(), v);
        s.lines().nth(3).unwrap_or_default().to_owned()
    }

    #[test]
    fn sort_keys_reorder_the_devices() {
        let by = |k| first_device(view().apply(Action::Sort(k)));
        assert!(by(SortKey::Util).starts_with("mpathc"));
        assert!(by(SortKey::Await).starts_with("sda"));
        assert!(by(SortKey::Read).starts_with("sda"));
        assert!(by(SortKey::Write).starts_with("mpathc"));
        assert!(by(SortKey::Iops).starts_with("mpathc"));
        assert!(by(SortKey::Name).starts_with("mpathc"));
        assert!(
            render("ds01", &live(), view().apply(Action::Sort(SortKey::Read)))
                .lines()
                .next()
                .unwrap_or_default()
                .ends_with("by rkB/s")
        );
    }

    #[test]
    fn keys() {
        assert_eq!(action(b'q'), Action::Quit);
        assert_eq!(action(b'u'), Action::Sort(SortKey::Util));
        assert_eq!(action(b'a'), Action::Sort(SortKey::Await));
        assert_eq!(action(b'r'), Action::Sort(SortKey::Read));
        assert_eq!(action(b'w'), Action::Sort(SortKey::Write));
        assert_eq!(action(b'i'), Action::Sort(SortKey::Iops));
        assert_eq!(action(b'n'), Action::Sort(SortKey::Name));
        assert_eq!(action(b'h'), Action::ToggleHealth);
        assert_eq!(action(0x1b), Action::None);
        assert!(!view().apply(Action::ToggleHealth).health);
        for k in SortKey::ALL {
            assert_eq!(SortKey::parse(k.name()), Some(k));
            assert_eq!(SortKey::parse(&k.key().to_string()), Some(k));
        }
        assert_eq!(SortKey::parse("bogus"), None);
    }

    #[test]
    fn every_line_fits_every_width() {
        for width in 1..=200 {
            let v = View {
                width,
                footer: true,
                ..view()
            };
            let s = render("a-host-with-a-rather-long-name.example.org", &live(), v);
            for l in s.lines() {
                assert!(table::width_of(l) <= width, "{width}: {l:?}");
            }
        }
    }

    fn health_live() -> Live {
        use crate::health::md::{ArrayStatus, MemberStatus};
        use crate::health::zpool::{PoolReport, VdevReport};
        let member = |name: &str, state: &str, failed: bool| MemberStatus {
            name: name.into(),
            state: state.into(),
            failed,
            spare: false,
            errors: None,
        };
        let vdev = |name: &str, parent: &str, state: &str, note: Option<&str>| VdevReport {
            name: name.into(),
            kind: if parent.is_empty() { "root" } else { "disk" }.into(),
            parent: parent.into(),
            state: state.into(),
            read_errors: None,
            write_errors: None,
            cksum_errors: None,
            note: note.map(str::to_owned),
            redundancy_left: None,
            rebuild_risk: None,
        };
        Live {
            arrays: vec![MdNow {
                status: ArrayStatus {
                    array: "md127".into(),
                    level: "raid5".into(),
                    members: 4,
                    active: 3,
                    failed: 1,
                    spare: 0,
                    degraded: 1,
                    state: ArrayState::Recovering,
                    sync_action: "recover".into(),
                    sync_pct: Some(99.9),
                    sync_speed_kbps: Some(0),
                    sync_eta_s: None,
                    mismatch_cnt: Some(0),
                    redundancy_left: Some(0),
                    rebuild_risk: Some(0.25),
                    stalled: true,
                },
                members: vec![
                    member("sdb", "in_sync", false),
                    member("sdc", "faulty", true),
                    member("sdd", "rebuilding", false),
                ],
            }],
            maps: vec![MpathNow {
                map: "mpatha".into(),
                paths: 4,
                active: 3,
                down: vec!["sdq offline".into()],
                flapping: 1,
                active_group: Some(2),
                preferred_group: Some(1),
                queue_if_no_path: Some(true),
                hung_io: Some(false),
            }],
            pools: vec![PoolNow {
                pool: "tank".into(),
                report: PoolReport {
                    health: Some("ONLINE".into()),
                    details: true,
                    scan_kind: "scrub",
                    scan_state: "paused",
                    scan_pct: Some(40.0),
                    vdevs: vec![
                        vdev("tank", "", "ONLINE", None),
                        vdev("sda", "tank", "ONLINE", Some("(repairing)")),
                        vdev("1234567", "tank", "UNAVAIL", Some("was /dev/sdz1")),
                    ],
                    ..PoolReport::default()
                },
            }],
            ..live()
        }
    }

    #[test]
    fn the_health_pane_says_what_is_wrong_and_hides_on_h() {
        let s = render("ds01", &health_live(), view());
        let row = |k: &str| {
            s.lines()
                .find(|l| l.starts_with(k))
                .unwrap_or_else(|| panic!("no {k} row\n{s}"))
                .to_owned()
        };
        let md = row("md127 ");
        assert!(md.contains("recovering") && md.contains("99.9%"), "{md}");
        assert!(md.ends_with("STALLED, sdc failed, sdd rebuilding"), "{md}");
        assert!(md.contains(" 25% "), "{md}");
        let mp = row("mpatha ");
        assert!(mp.contains("degraded"), "{mp}");
        assert!(mp.ends_with("not on preferred group, sdq offline"), "{mp}");
        let pool = row("tank ");
        // a paused scrub shows its progress, no ETA
        assert!(pool.contains("scrub") && pool.contains("40.0%"), "{pool}");
        assert!(
            pool.ends_with("scan paused, sda (repairing), sdz1 UNAVAIL"),
            "{pool}"
        );
        // what is wrong stands out on a terminal
        let c = render(
            "ds01",
            &health_live(),
            View {
                color: true,
                ..view()
            },
        );
        assert!(c.contains("\x1b[7mrecovering\x1b[0m"), "{c}");
        assert!(c.contains("\x1b[7mSTALLED\x1b[0m"), "{c}");
        assert!(c.contains("\x1b[7mdegraded\x1b[0m"), "{c}");
        let hidden = render("ds01", &health_live(), view().apply(Action::ToggleHealth));
        assert!(
            !hidden.contains("md127") && !hidden.contains("mpatha "),
            "{hidden}"
        );
    }

    #[test]
    fn a_short_terminal_cuts_the_device_table() {
        let v = View {
            height: Some(8),
            ..view()
        };
        let s = render("ds01", &live(), v);
        // title, blank, header, "… 2 more", blank, header, two NICs
        assert_eq!(s.lines().count(), 8, "{s}");
        assert!(s.contains("\n… 2 more devices\n"), "{s}");
        let v = View {
            height: Some(9),
            ..view()
        };
        let all = render("ds01", &live(), v);
        assert_eq!(all.lines().count(), 9, "{all}");
        assert!(!all.contains("more devices"), "{all}");
    }

    #[test]
    fn eta_and_risk_read_at_a_glance() {
        let t = |c: Cell| match c {
            Cell::Text(s, _) => s,
            Cell::None => "-".into(),
            Cell::Num(..) => "num".into(),
        };
        assert_eq!(t(eta(Some(45.0))), "45s");
        assert_eq!(t(eta(Some(725.0))), "12m");
        assert_eq!(t(eta(Some(12_300.0))), "3h25m");
        assert_eq!(t(eta(Some(187_200.0))), "2d04h");
        assert_eq!(t(eta(Some(f64::NAN))), "-");
        assert_eq!(t(eta(Some(1e300))), "999d00h");
        assert_eq!(t(risk(Some(1.63e-7))), "1:6.1M");
        assert_eq!(t(risk(Some(7.7e-5))), "1:13k");
        assert_eq!(t(risk(Some(0.123))), "12%");
        assert_eq!(t(risk(Some(0.0))), "0");
        assert_eq!(t(risk(None)), "-");
    }
}
