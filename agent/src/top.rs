//! `storwatch-agent top`: a live view a sysadmin reads like `iostat -x 1` and `sar -n DEV 1`,
//! from the same per-second samples the reports are built from.
//!
//! Its rows come from the collectors, each filling its pane of a [`Live`] from its last sample
//! ([`crate::collect::Collector::live`]); this file only orders and draws them. Devices are
//! sorted by %util, busiest first; a device at or above the saturation threshold is flagged `SAT`
//! (in reverse video on a terminal), a NIC at or above 90 % of its link `LINE`, one dropping or
//! erroring packets `DROP`/`ERR`. Interfaces are sorted by bytes per second, busiest first.

use std::fmt::Write;

use crate::collect::{DiskNow, Live, NetNow};

/// What to draw.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// %util at which a device is flagged.
    pub threshold_pct: f64,
    /// Devices shown at most (the busiest).
    pub max_devices: usize,
    /// Use ANSI highlighting.
    pub color: bool,
}

fn flag(on: bool, color: bool, text: &str) -> String {
    match (on, color) {
        (false, _) => String::new(),
        (true, true) => format!("\x1b[7m{text}\x1b[0m"),
        (true, false) => text.to_owned(),
    }
}

/// Devices by %util, highest first (then by name, for a stable screen).
fn busiest_disks(live: &Live) -> Vec<&DiskNow> {
    let mut v: Vec<&DiskNow> = live.disks.iter().collect();
    v.sort_by(|a, b| {
        b.rates
            .util_pct
            .total_cmp(&a.rates.util_pct)
            .then_with(|| a.device.cmp(&b.device))
    });
    v
}

/// Interfaces by rx + tx bytes per second, highest first (then by name).
fn busiest_nets(live: &Live) -> Vec<&NetNow> {
    let mut v: Vec<&NetNow> = live.nets.iter().collect();
    v.sort_by(|a, b| {
        let ka = a.rates.rx_bytes_per_s + a.rates.tx_bytes_per_s;
        let kb = b.rates.rx_bytes_per_s + b.rates.tx_bytes_per_s;
        kb.total_cmp(&ka).then_with(|| a.iface.cmp(&b.iface))
    });
    v
}

/// Renders one screen: a header, the iostat -x table, the sar -n DEV table.
pub fn render(host: &str, live: &Live, view: View) -> String {
    let disks = busiest_disks(live);
    let nets = busiest_nets(live);
    let mut out = String::with_capacity(16 * 1024);
    let saturated = disks
        .iter()
        .filter(|d| d.rates.util_pct >= view.threshold_pct)
        .count();
    let _ = writeln!(
        out,
        "storwatch top — {host} — {} devices, {} saturated (≥ {:.0}% util), {} interfaces",
        disks.len(),
        saturated,
        view.threshold_pct,
        nets.len()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<16} {:<6} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7}  flag",
        "Device", "kind", "r/s", "w/s", "rkB/s", "wkB/s", "rrqm/s", "wrqm/s", "%rrqm", "%wrqm",
        "r_await", "w_await", "rareq-sz", "wareq-sz", "aqu-sz", "svctm", "%util"
    );
    for d in disks.iter().take(view.max_devices) {
        let r = &d.rates;
        let label = if d.name != d.device {
            format!("{} ({})", d.name, d.device)
        } else {
            d.device.clone()
        };
        let sat = r.util_pct >= view.threshold_pct;
        let _ = writeln!(
            out,
            "{:<16} {:<6} {:>8.2} {:>8.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2} {:>6.2} {:>6.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7.2} {:>6.2} {:>7.2}  {}",
            truncate(&label, 16),
            d.kind.as_str(),
            r.r_per_s,
            r.w_per_s,
            r.rkb_per_s,
            r.wkb_per_s,
            r.rrqm_per_s,
            r.wrqm_per_s,
            r.rrqm_pct,
            r.wrqm_pct,
            r.r_await_ms,
            r.w_await_ms,
            r.rareq_sz_kb,
            r.wareq_sz_kb,
            r.aqu_sz,
            r.svctm_ms,
            r.util_pct,
            flag(sat, view.color, "SAT"),
        );
    }
    if disks.len() > view.max_devices {
        let _ = writeln!(out, "… {} more devices", disks.len() - view.max_devices);
    }
    let _ = writeln!(out);
    let _ =
        writeln!(
        out,
        "{:<16} {:>10} {:>10} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}  flag",
        "IFACE", "rxpck/s", "txpck/s", "rxkB/s", "txkB/s", "rxcmp/s", "txcmp/s", "rxmcst/s",
        "rxerr/s", "rxdrop/s", "txdrop/s", "Mb/s", "%ifutil"
    );
    for n in &nets {
        let r = &n.rates;
        let util = r.util_pct.unwrap_or(0.0);
        let mut flags = Vec::new();
        if util >= 90.0 {
            flags.push(flag(true, view.color, "LINE"));
        }
        if r.rx_drops_per_s + r.tx_drops_per_s > 0.0 {
            flags.push(flag(true, view.color, "DROP"));
        }
        if r.rx_errors_per_s + r.tx_errors_per_s > 0.0 {
            flags.push(flag(true, view.color, "ERR"));
        }
        let _ = writeln!(
            out,
            "{:<16} {:>10.2} {:>10.2} {:>11.2} {:>11.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>7.2}  {}",
            truncate(&n.iface, 16),
            r.rx_packets_per_s,
            r.tx_packets_per_s,
            r.rx_bytes_per_s / 1024.0,
            r.tx_bytes_per_s / 1024.0,
            r.rx_compressed_per_s,
            r.tx_compressed_per_s,
            r.rx_multicast_per_s,
            r.rx_errors_per_s,
            r.rx_drops_per_s,
            r.tx_drops_per_s,
            n.speed_mbps.map_or_else(|| "-".to_owned(), |s| s.to_string()),
            util,
            flags.join(" "),
        );
    }
    out
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::{DiskRates, NetRates};
    use crate::sources::sysblock::DeviceKind;

    #[test]
    fn saturated_devices_and_busy_nics_are_flagged() {
        let disks = vec![
            DiskNow {
                device: "sda".into(),
                name: "sda".into(),
                kind: DeviceKind::Disk,
                rates: DiskRates {
                    r_per_s: 3.0,
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
        let s = render(
            "ds01",
            &Live {
                disks,
                nets,
                ..Live::default()
            },
            View {
                threshold_pct: 95.0,
                max_devices: 40,
                color: false,
            },
        );
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
}
