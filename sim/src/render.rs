//! The host's state as the kernel and the tools print it.
//!
//! Formats follow Linux 6.x (`Documentation/admin-guide/iostats.rst`,
//! `Documentation/filesystems/proc.rst`, `Documentation/accounting/psi.rst`,
//! `drivers/md/md.c` `md_seq_show`/`status_resync`, `drivers/md/dm-mpath.c` `multipath_status`)
//! and OpenZFS 2.2 (`zpool status -p`, `zpool list -Hp`), checked against the real captures in
//! `agent/fixtures/`.

use std::fmt::Write as _;

use crate::model::{Host, MdArray, MpathMap, Nic, Vdev, Zpool};

/// The kernel prints the diskstats time fields as `unsigned int`: they wrap at 2^32 ms.
fn ms32(v: u64) -> u64 {
    v % (1u64 << 32)
}

/// `/proc/diskstats`: 3 identity columns and 17 counters (kernel ≥ 5.5).
pub fn diskstats(h: &Host) -> String {
    let mut out = String::new();
    for d in &h.devices {
        let c = &d.c;
        let _ = writeln!(
            out,
            "{:4} {:7} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            d.major,
            d.minor,
            d.name,
            c.r_ios,
            c.r_merges,
            c.r_sect,
            ms32(c.r_ms),
            c.w_ios,
            c.w_merges,
            c.w_sect,
            ms32(c.w_ms),
            c.in_flight,
            ms32(c.io_ms),
            ms32(c.queue_ms),
            c.d_ios,
            c.d_merges,
            c.d_sect,
            ms32(c.d_ms),
            c.f_ios,
            ms32(c.f_ms),
        );
    }
    out
}

/// `/proc/net/dev` (`dev_seq_printf_stats`).
pub fn net_dev(nics: &[Nic]) -> String {
    let mut out = String::from(
        "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n",
    );
    for n in nics {
        let c = &n.c;
        let _ = writeln!(
            out,
            "{:>6}: {:7} {:7} {:4} {:4} {:4} {:5} {:10} {:9} {:8} {:7} {:4} {:4} {:4} {:5} {:7} {:10}",
            n.name,
            c.rx_bytes,
            c.rx_packets,
            c.rx_errs,
            c.rx_drop,
            c.rx_fifo,
            c.rx_frame,
            c.rx_compressed,
            c.rx_multicast,
            c.tx_bytes,
            c.tx_packets,
            c.tx_errs,
            c.tx_drop,
            c.tx_fifo,
            c.tx_colls,
            c.tx_carrier,
            c.tx_compressed,
        );
    }
    out
}

/// `/proc/uptime`: uptime and the idle time summed over CPUs, in seconds with 2 decimals.
pub fn uptime(h: &Host) -> String {
    let idle_cs: u64 = h.cpus.iter().map(|c| c[3]).sum();
    format!(
        "{}.{:02} {}.{:02}\n",
        h.uptime_cs / 100,
        h.uptime_cs % 100,
        idle_cs / 100,
        idle_cs % 100
    )
}

/// `/proc/stat`.
pub fn stat(h: &Host) -> String {
    let mut tot = [0u64; 10];
    for c in &h.cpus {
        for (t, v) in tot.iter_mut().zip(c) {
            *t += v;
        }
    }
    let join = |v: &[u64; 10]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    let mut out = format!("cpu  {}\n", join(&tot));
    for (i, c) in h.cpus.iter().enumerate() {
        let _ = writeln!(out, "cpu{i} {}", join(c));
    }
    let up = h.uptime_s();
    let ncpu = h.cpus.len() as u64;
    let _ = write!(
        out,
        "intr {} 0 9 0 0 0 0 0 0 0 1 0 0 0\nctxt {}\nbtime {}\nprocesses {}\nprocs_running {}\nprocs_blocked {}\nsoftirq {} 0 {} 1 {} 0 0 {} {} 0 {}\n",
        up * 9000 * ncpu,
        up * 5000 * ncpu,
        h.epoch_s.saturating_sub(up),
        up * 3,
        1 + up % 4,
        (h.load.iowait_pct / 100.0 * ncpu as f64).round() as u64,
        up * 2900 * ncpu,
        up * 900 * ncpu,
        up * 1100 * ncpu,
        up * 30 * ncpu,
        up * 400 * ncpu,
        up * 470 * ncpu,
    );
    out
}

/// `/proc/meminfo`, the lines the agent and `free` read (16-character labels, `%8lu kB`).
pub fn meminfo(h: &Host) -> String {
    let t = h.mem_total_kb;
    let cached = t / 100 * 72;
    let free = t / 100 * 6;
    let dirty = h.load.dirty_kb.max(0.0) as u64;
    let wb = h.load.writeback_kb.max(0.0) as u64;
    let rows = [
        ("MemTotal", t),
        ("MemFree", free),
        ("MemAvailable", free + cached),
        ("Buffers", t / 500),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", t / 100 * 30),
        ("Inactive", t / 100 * 50),
        ("SwapTotal", 8_388_604),
        ("SwapFree", 8_388_604),
        ("Dirty", dirty),
        ("Writeback", wb),
        ("AnonPages", t / 100 * 8),
        ("Mapped", 210_000),
        ("Shmem", 60_000),
        ("Slab", t / 100 * 3),
        ("SReclaimable", t / 100 * 2),
        ("SUnreclaim", t / 100),
        ("PageTables", 30_000),
        ("CommitLimit", t / 2 + 8_388_604),
        ("Committed_AS", t / 100 * 9),
    ];
    let mut out = String::new();
    for (k, v) in rows {
        let label = format!("{k}:");
        let _ = writeln!(out, "{label:<16}{v:>8} kB");
    }
    out
}

/// `/proc/pressure/io`.
pub fn pressure_io(h: &Host) -> String {
    let line = |name: &str, p: &crate::model::Psi| {
        format!(
            "{name} avg10={:.2} avg60={:.2} avg300={:.2} total={}\n",
            p.avg10, p.avg60, p.avg300, p.total_us
        )
    };
    line("some", &h.psi_some) + &line("full", &h.psi_full)
}

/// `/proc/mdstat`.
pub fn mdstat(h: &Host) -> String {
    if h.arrays.is_empty() {
        return "Personalities : \nunused devices: <none>\n".to_owned();
    }
    let mut out = String::from("Personalities : [raid6] [raid5] [raid4] \n");
    // The kernel lists the newest array first.
    for a in h.arrays.iter().rev() {
        let mut devs: Vec<String> = a
            .members
            .iter()
            .map(|m| {
                let flag = match (m.state.as_str(), m.slot) {
                    ("faulty", _) => "(F)",
                    (_, None) => "(S)",
                    _ => "",
                };
                format!("{}[{}]{flag}", m.dev, m.desc_nr)
            })
            .collect();
        devs.reverse();
        let blocks = a.component_kb * u64::from(a.raid_disks.saturating_sub(a.parity));
        let flags: String = (0..a.raid_disks)
            .map(|slot| {
                let ok = a
                    .members
                    .iter()
                    .any(|m| m.slot == Some(slot) && m.state == "in_sync");
                if ok {
                    'U'
                } else {
                    '_'
                }
            })
            .collect();
        let _ = write!(
            out,
            "{} : active {} {}\n      {} blocks super 1.2 level 6, {}k chunk, algorithm 2 [{}/{}] [{}]\n",
            a.name,
            a.level,
            devs.join(" "),
            blocks,
            a.chunk_kb,
            a.raid_disks,
            a.raid_disks - a.degraded(),
            flags
        );
        if let Some(s) = &a.sync {
            let total = a.component_kb;
            let done = s.done_kb as u64;
            let per_mille = done.saturating_mul(1000).checked_div(total).unwrap_or(0);
            let x = (per_mille / 50) as usize;
            let left_s = (total.saturating_sub(done)) as f64 / s.speed_kbps.max(1.0);
            let finish_dmin = (left_s / 6.0) as u64;
            let word = if s.action == "recover" {
                "recovery"
            } else {
                s.action.as_str()
            };
            let _ = writeln!(
                out,
                "      [{}>{}]  {word} = {:2}.{}% ({done}/{total}) finish={}.{}min speed={}K/sec",
                "=".repeat(x),
                ".".repeat(20usize.saturating_sub(x)),
                per_mille / 10,
                per_mille % 10,
                finish_dmin / 10,
                finish_dmin % 10,
                s.speed_kbps.round() as u64
            );
        }
        let _ = write!(
            out,
            "      bitmap: {}/117 pages [{}KB], 65536KB chunk\n\n",
            a.degraded() * 40,
            a.degraded() * 160
        );
    }
    out.push_str("unused devices: <none>\n");
    out
}

/// `/sys/block/<md>/md/*` for one array: (relative path, content) pairs.
pub fn md_sysfs(a: &MdArray) -> Vec<(String, String)> {
    let total_sect = a.component_kb * 2;
    let (action, completed, speed) = match &a.sync {
        Some(s) => (
            s.action.clone(),
            format!("{} / {}", (s.done_kb as u64) * 2, total_sect),
            format!("{}", s.speed_kbps.round() as u64),
        ),
        None => ("idle".to_owned(), "none".to_owned(), "none".to_owned()),
    };
    let mut v = vec![
        ("level".to_owned(), a.level.clone()),
        ("raid_disks".to_owned(), a.raid_disks.to_string()),
        ("chunk_size".to_owned(), (a.chunk_kb * 1024).to_string()),
        ("component_size".to_owned(), a.component_kb.to_string()),
        ("metadata_version".to_owned(), "1.2".to_owned()),
        ("array_state".to_owned(), "active".to_owned()),
        ("degraded".to_owned(), a.degraded().to_string()),
        ("sync_action".to_owned(), action),
        ("sync_completed".to_owned(), completed),
        ("sync_speed".to_owned(), speed),
        ("mismatch_cnt".to_owned(), a.mismatch_cnt.to_string()),
    ];
    for m in &a.members {
        let d = format!("dev-{}", m.dev);
        v.push((format!("{d}/state"), m.state.clone()));
        v.push((
            format!("{d}/slot"),
            m.slot.map_or("none".to_owned(), |s| s.to_string()),
        ));
        v.push((format!("{d}/errors"), m.errors.to_string()));
    }
    v.into_iter().map(|(k, val)| (k, val + "\n")).collect()
}

/// `dmsetup status --target multipath`: `name: start len multipath` and the status arguments
/// (`2 <queue_io> <pg_init_count>` — queue_io 1 once no path is left, as `queue_if_no_path`
/// holds the I/O —, no handler status, groups with `A`/`E`/`D`, and per path
/// `A`/`F`, the fail count and the service-time selector's two status arguments).
pub fn dmsetup_status(maps: &[MpathMap]) -> String {
    if maps.is_empty() {
        return "No devices found\n".to_owned();
    }
    let mut out = String::new();
    for m in maps {
        let _ = write!(
            out,
            "{}: 0 {} multipath 2 {} 0 0 {} {}",
            m.name,
            m.size_sectors,
            // queue_io: the table queues when no path is left (every table here does)
            u8::from(m.groups.iter().flatten().all(|p| p.failed)),
            m.groups.len(),
            m.active_group
        );
        for (gi, g) in m.groups.iter().enumerate() {
            let all_failed = g.iter().all(|p| p.failed);
            let state = if gi + 1 == m.active_group {
                'A'
            } else if all_failed {
                'D'
            } else {
                'E'
            };
            let _ = write!(out, " {state} 0 {} 2", g.len());
            for p in g {
                let _ = write!(
                    out,
                    " {}:{} {} {} 0 1",
                    p.major,
                    p.minor,
                    if p.failed { 'F' } else { 'A' },
                    p.fail_count
                );
            }
        }
        out.push('\n');
    }
    out
}

/// `dmsetup table --target multipath`: features, the ALUA handler, groups with the
/// service-time selector (`<repeat_count> <relative_throughput>` per path).
pub fn dmsetup_table(maps: &[MpathMap]) -> String {
    if maps.is_empty() {
        return "No devices found\n".to_owned();
    }
    let mut out = String::new();
    for m in maps {
        let _ = write!(
            out,
            "{}: 0 {} multipath 1 queue_if_no_path 1 alua {} 1",
            m.name,
            m.size_sectors,
            m.groups.len()
        );
        for g in &m.groups {
            let _ = write!(out, " service-time 0 {} 2", g.len());
            for p in g {
                let _ = write!(out, " {}:{} 1 1", p.major, p.minor);
            }
        }
        out.push('\n');
    }
    out
}

/// `zpool list -Hp`: name size alloc free ckpoint expandsz frag cap dedup health altroot.
pub fn zpool_list(pools: &[Zpool]) -> String {
    let mut out = String::new();
    for p in pools {
        let cap = p
            .alloc_bytes
            .saturating_mul(100)
            .checked_div(p.size_bytes)
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t-\t-\t{}\t{}\t1.00\t{}\t-",
            p.name,
            p.size_bytes,
            p.alloc_bytes,
            p.size_bytes.saturating_sub(p.alloc_bytes),
            p.frag_pct,
            cap,
            p.health
        );
    }
    out
}

/// A duration as zpool prints the time to go: `1 days 09:48:34`, `02:13:05`.
fn to_go(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d} days {h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// `Mon May 26 13:12:02 2025` (ctime, UTC) for `epoch_s`.
pub fn ctime(epoch_s: u64) -> String {
    let days = epoch_s / 86_400;
    let secs = epoch_s % 86_400;
    // 1970-01-01 was a Thursday.
    let wday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // Civil date from days since the epoch (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1).clamp(0, 11) as usize];
    format!(
        "{wday} {mon} {day:2} {:02}:{:02}:{:02} {year}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn vdev_rows(v: &Vdev, depth: usize, rows: &mut Vec<(usize, Vdev)>) {
    rows.push((depth, v.clone()));
    for c in &v.children {
        vdev_rows(c, depth + 2, rows);
    }
}

/// One line of the config tree: name indented by depth, state, the three error counters, note.
fn vdev_row(out: &mut String, depth: usize, v: &Vdev, width: usize) {
    let _ = write!(
        out,
        "\t{:depth$}{:<w$}  {:<8} {:>5} {:>5} {:>5}",
        "",
        v.name,
        v.state,
        v.read_errors,
        v.write_errors,
        v.cksum_errors,
        w = width - depth
    );
    if !v.note.is_empty() {
        let _ = write!(out, "  {}", v.note);
    }
    out.push('\n');
}

/// `zpool status -p` for every pool (`-p`: exact byte counts and rates).
pub fn zpool_status(pools: &[Zpool], now_epoch: u64) -> String {
    if pools.is_empty() {
        return "no pools available\n".to_owned();
    }
    let mut out = String::new();
    for (i, p) in pools.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "  pool: {}\n state: {}", p.name, p.health);
        if let Some(s) = &p.scan {
            if s.kind == "resilver" {
                out.push_str("status: One or more devices is currently being resilvered.  The pool will\n\tcontinue to function, possibly in a degraded state.\naction: Wait for the resilver to complete.\n");
            }
            let pct = s.issued_bytes / s.total_bytes.max(1) as f64 * 100.0;
            let eta = ((s.total_bytes as f64 - s.issued_bytes) / s.issue_bps.max(1.0)) as u64;
            let elapsed = now_epoch.saturating_sub(s.start_epoch).max(1) as f64;
            let _ = write!(
                out,
                "  scan: {} in progress since {}\n\t{} / {} scanned at {}/s, {} / {} issued at {}/s\n\t{} {}, {:.2}% done, {} to go\n",
                s.kind,
                ctime(s.start_epoch),
                s.scanned_bytes as u64,
                s.total_bytes,
                (s.scanned_bytes / elapsed) as u64,
                s.issued_bytes as u64,
                s.total_bytes,
                (s.issued_bytes / elapsed) as u64,
                s.repaired_bytes as u64,
                if s.kind == "resilver" { "resilvered" } else { "repaired" },
                pct,
                to_go(eta)
            );
        } else {
            out.push_str("  scan: none requested\n");
        }
        out.push_str("config:\n\n");
        let mut rows = Vec::new();
        vdev_rows(&p.root, 0, &mut rows);
        let mut cache = Vec::new();
        for c in &p.cache {
            vdev_rows(c, 2, &mut cache);
        }
        let width = rows
            .iter()
            .chain(&cache)
            .map(|(d, v)| d + v.name.len())
            .max()
            .unwrap_or(0)
            .max(10);
        let _ = writeln!(
            out,
            "\t{:<width$}  {:<8} {:>5} {:>5} {:>5}",
            "NAME", "STATE", "READ", "WRITE", "CKSUM"
        );
        for (depth, v) in &rows {
            vdev_row(&mut out, *depth, v, width);
        }
        if !cache.is_empty() {
            // a section header: no state, no counters
            out.push_str("\tcache\n");
        }
        for (depth, v) in &cache {
            vdev_row(&mut out, *depth, v, width);
        }
        out.push_str("\nerrors: No known data errors\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_matches_known_dates() {
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        // the resilver start in the homelab capture
        assert_eq!(ctime(1_748_265_122), "Mon May 26 13:12:02 2025");
    }

    #[test]
    fn durations_print_like_zpool() {
        assert_eq!(to_go(121_714), "1 days 09:48:34");
        assert_eq!(to_go(15), "00:00:15");
    }
}
