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

mod cells;
mod health;
mod hwraid;
mod jobs;
pub mod layout;
mod table;
pub mod term;

use std::fmt::Write;

use crate::collect::{DiskNow, Live, NetNow};
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

/// The title: the host, what it has and how the devices are sorted.
fn title(host: &str, disks: &[&DiskNow], nets: usize, view: &View, width: usize) -> String {
    let saturated = disks
        .iter()
        .filter(|d| d.rates.util_pct >= view.threshold_pct)
        .count();
    let counts = format!(
        "{host} — {} devices, {} saturated (≥ {:.0}% util), {} interfaces — by {}",
        disks.len(),
        saturated,
        view.threshold_pct,
        nets,
        view.sort.label(),
    );
    // The program's name is the first thing to go on a narrow screen.
    let title = format!("storwatch top — {counts}");
    let title = if table::width_of(&title) <= width {
        title
    } else {
        counts
    };
    table::ellipsize(&title, width)
}

/// Body lines a table of `n` rows wants when at most `max` of them are shown: the rows, and
/// the line that says how many more there are.
fn wanted(n: usize, max: usize) -> usize {
    if n > max {
        max + 1
    } else {
        n
    }
}

/// Draws `table` with `lines` body lines after a blank line: all its rows when they fit, else
/// the first `lines - 1` and a line saying how many more `what` there are; with one line, its
/// first row (the title and the summary count them all). `total` counts the rows `table`
/// leaves out already (`--devices`). Nothing when `lines` is 0.
fn draw_cut(
    out: &mut String,
    mut table: Table,
    total: usize,
    lines: usize,
    what: &str,
    view: &View,
) {
    if lines == 0 {
        return;
    }
    let room = match lines {
        _ if total <= lines => total,
        1 => 1,
        _ => lines - 1,
    };
    table.rows.truncate(room);
    let shown = table.rows.len();
    let _ = writeln!(out);
    table.draw(out, view.width.max(1), view.color);
    if total > shown && lines > shown {
        let more = format!("… {} more {what}", total - shown);
        let _ = writeln!(out, "{}", table::ellipsize(&more, view.width.max(1)));
    }
}

/// How the screen's lines are shared for `live` in `view` (see [`layout`]): pure, so that
/// the screens of big hosts on small terminals can be checked without either.
pub fn plan(live: &Live, view: &View) -> layout::Layout {
    let unhealthy = health::Unhealthy::of(live);
    let wants = layout::Wants {
        summary: health::pack(&health::summary(live), view.width.max(1)).len()
            + usize::from(jobs::node_line(live).is_some()),
        health: if view.health {
            [
                unhealthy.arrays.len(),
                unhealthy.maps.len(),
                unhealthy.pools.len(),
                hwraid::unhealthy(live).len(),
            ]
        } else {
            [0; 4]
        },
        jobs: jobs::ranked(live).len(),
        // with no rates at all, one line says so
        devices: match wanted(live.disks.len(), view.max_devices) {
            0 if live.nets.is_empty() => 1,
            n => n,
        },
        nets: live.nets.len(),
        footer: view.footer,
    };
    layout::plan(&wants, view.height)
}

/// Renders one screen, no line wider than `view.width` and no more lines than `view.height`:
/// the title; one summary line for the MD arrays, multipath maps and pools (as many as the
/// width needs); rows for those that are not healthy, the worst first; the iostat -x table
/// and the sar -n DEV table, the busiest first; when asked, the keys. On a short terminal
/// each part gets its share of the lines ([`layout`]) and a table cut short says how many of
/// its rows are left out. Hiding the health pane (`h`) leaves its summary.
pub fn render(host: &str, live: &Live, view: View) -> String {
    let width = view.width.max(1);
    let disks = sorted_disks(live, view.sort);
    let nets = sorted_nets(live, view.sort);
    let plan = plan(live, &view);
    let mut out = String::with_capacity(16 * 1024);
    let _ = writeln!(out, "{}", title(host, &disks, nets.len(), &view, width));
    let summary = health::pack(&health::summary(live), width)
        .into_iter()
        .chain(jobs::node_line(live).map(|l| table::ellipsize(&l, width)));
    for l in summary.take(plan.summary) {
        let _ = writeln!(out, "{l}");
    }
    let unhealthy = health::Unhealthy::of(live);
    let [md, mpath, pool, raid] = plan.health;
    let (arrays, maps, pools) = (&unhealthy.arrays, &unhealthy.maps, &unhealthy.pools);
    let t = health::md_table(arrays);
    draw_cut(&mut out, t, arrays.len(), md, "arrays not clean", &view);
    let t = health::mpath_table(maps);
    draw_cut(&mut out, t, maps.len(), mpath, "maps not ok", &view);
    let t = health::pool_table(pools);
    draw_cut(&mut out, t, pools.len(), pool, "pools not healthy", &view);
    let vds = hwraid::unhealthy(live);
    draw_cut(
        &mut out,
        hwraid::table(&vds),
        vds.len(),
        raid,
        "VDs not optimal",
        &view,
    );
    let stalled = jobs::ranked(live);
    let t = jobs::table(live, &stalled);
    draw_cut(&mut out, t, stalled.len(), plan.jobs, "jobs", &view);
    if disks.is_empty() && nets.is_empty() && plan.devices > 0 {
        // The first sample, or one taken before the counters moved (uptime unchanged): rates
        // need two readings apart in time.
        let _ = writeln!(out);
        let wait = "no rates yet: waiting for the next sample";
        let _ = writeln!(out, "{}", table::ellipsize(wait, width));
    }
    if !disks.is_empty() {
        let shown = disks.len().min(view.max_devices).min(plan.devices);
        let t = disk_table(&disks[..shown], &view);
        draw_cut(&mut out, t, disks.len(), plan.devices, "devices", &view);
    }
    let t = net_table(&nets);
    draw_cut(&mut out, t, nets.len(), plan.nets, "interfaces", &view);
    if plan.footer {
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", table::ellipsize(&footer(), width));
    }
    out
}

fn disk_table(disks: &[&DiskNow], view: &View) -> Table {
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

#[cfg(test)]
mod tests {
    use super::cells::{eta, risk};
    use super::*;
    use crate::collect::{MdNow, MpathNow, PoolNow};
    use crate::health::md::ArrayState;
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
            members_at_risk: None,
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
    fn a_short_terminal_cuts_the_tables_and_keeps_the_title() {
        let at = |height| {
            render(
                "ds01",
                &live(),
                View {
                    height: Some(height),
                    ..view()
                },
            )
        };
        // title, blank, header, two devices, blank, header, the busiest NIC
        let s = at(8);
        assert_eq!(s.lines().count(), 8, "{s}");
        assert!(
            s.lines().last().unwrap_or_default().starts_with("ens1f0"),
            "{s}"
        );
        let all = at(9);
        assert_eq!(all.lines().count(), 9, "{all}");
        assert!(
            all.lines().last().unwrap_or_default().starts_with("lo "),
            "{all}"
        );
        // one row left: the busiest device, no NIC table
        let s = at(4);
        assert_eq!(s.lines().count(), 4, "{s}");
        assert!(
            s.lines()
                .next()
                .unwrap_or_default()
                .contains("ds01 — 2 devices"),
            "{s}"
        );
        assert!(
            s.lines().last().unwrap_or_default().starts_with("mpathc"),
            "{s}"
        );
        assert_eq!(at(1).lines().count(), 1);
        // before the second sample
        let none = render("ds01", &Live::default(), view());
        assert!(
            none.ends_with("\n\nno rates yet: waiting for the next sample\n"),
            "{none}"
        );
        // --devices: the rows left out are counted
        let one = render(
            "ds01",
            &live(),
            View {
                max_devices: 1,
                ..view()
            },
        );
        assert!(
            one.contains("\nmpathc (dm-3) ") && one.contains("\n… 1 more devices\n"),
            "{one}"
        );
    }

    #[test]
    fn at_every_height_the_title_is_first_and_nothing_spills() {
        for height in 1..=40 {
            for health in [true, false] {
                let v = View {
                    width: 80,
                    height: Some(height),
                    footer: true,
                    health,
                    ..view()
                };
                let s = render("ds01", &health_live(), v);
                assert!(s.lines().count() <= height, "{height}:\n{s}");
                assert!(s.starts_with("ds01 — 2 devices"), "{height}:\n{s}");
                // past the title and the summary, what is wrong or the busiest device
                let first = if health { "md127 " } else { "mpathc (dm-3)" };
                if height >= 6 {
                    assert!(s.lines().any(|l| l.starts_with(first)), "{height}:\n{s}");
                }
            }
        }
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
