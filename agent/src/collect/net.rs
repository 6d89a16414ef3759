//! Network interfaces: `/proc/net/dev` every sample, link speed, duplex and state
//! (`/sys/class/net`) when an interface appears and once per report; the `net` lines.
//!
//! Per interface the collector keeps the last counters and the interval's accumulators
//! ([`NetInterval`]); a report turns them into sar -n DEV/EDEV's values over the interval, %ifutil
//! as sar computes it, and the interval's highest 1 s byte rates and %ifutil.

use storwatch_wire::lp::LineWriter;

use super::{r3, Collector, Live, ReportCx, SampleCx, SourceErrors, Watched};
use crate::config::Config;
use crate::filter::Filter;
use crate::rates::{self, NetCounters, NetRates};
use crate::root::{read_into, Root};
use crate::sources::netdev;
use crate::sources::sysnet::{self, NetInfo};
use crate::sources::SourceError;
use crate::summary::NetInterval;

const NETDEV: &str = "netdev";
const SYSNET: &str = "sysnet";

/// Per-second values of one interface from the last sample (for `top`).
#[derive(Debug, Clone, PartialEq)]
pub struct NetNow {
    /// Interface name.
    pub iface: String,
    /// Link speed, Mb/s.
    pub speed_mbps: Option<u64>,
    /// sar -n DEV/EDEV values.
    pub rates: NetRates,
}

#[derive(Debug)]
struct NetState {
    seen: u64,
    prev: NetCounters,
    info: NetInfo,
    interval: NetInterval,
    /// The last sample's delta and interval, for `top`.
    last: Option<(NetCounters, u64)>,
}

/// Every network interface of the host (but the excluded ones).
pub struct NetCollector {
    filter: Filter,
    buf: String,
    generation: u64,
    nets: super::NameMap<NetState>,
}

impl NetCollector {
    /// A collector with `cfg`'s exclusions.
    pub fn new(cfg: &Config) -> Self {
        Self {
            filter: Filter::excluding(&cfg.exclude_interfaces),
            buf: String::with_capacity(4096),
            generation: 0,
            nets: super::NameMap::default(),
        }
    }

    fn row(
        &mut self,
        row: &netdev::NetDev<'_>,
        itv: Option<u64>,
        root: &Root,
        errors: &mut SourceErrors,
    ) {
        let cur = NetCounters::from(row);
        let gen = self.generation;
        if let Some(n) = self.nets.get_mut(row.iface) {
            n.seen = gen;
            match (
                itv,
                itv.and_then(|itv| rates::net_delta(&n.prev, &cur, itv)),
            ) {
                (Some(itv), Some(delta)) => {
                    let r = rates::net_rates(&delta, itv, n.info.speed_mbps, n.info.duplex);
                    n.interval.add(&delta, itv, &r);
                    n.last = Some((delta, itv));
                }
                (Some(_), None) => {
                    n.interval.resets += 1;
                    n.last = None;
                }
                (None, _) => n.last = None,
            }
            n.prev = cur;
            return;
        }
        if !self.filter.matches(row.iface) {
            return;
        }
        self.nets.insert(
            row.iface.to_owned(),
            NetState {
                seen: gen,
                prev: cur,
                info: read_info(root, row.iface, errors),
                interval: NetInterval::default(),
                last: None,
            },
        );
    }
}

/// Link speed, duplex, state and MTU; all unknown when sysfs cannot tell.
fn read_info(root: &Root, iface: &str, errors: &mut SourceErrors) -> NetInfo {
    sysnet::read(root, iface).unwrap_or_else(|e| {
        errors.count(SYSNET, &e);
        NetInfo::default()
    })
}

impl Collector for NetCollector {
    fn sources(&self) -> &'static [&'static str] {
        &[NETDEV, SYSNET]
    }

    fn sample(&mut self, cx: &mut SampleCx<'_>) {
        self.generation += 1;
        let path = cx.root.proc("net/dev");
        let mut buf = std::mem::take(&mut self.buf);
        match read_into(&path, &mut buf) {
            Ok(true) => {
                let parsed = netdev::parse(&buf);
                for e in &parsed.errors {
                    cx.errors
                        .count(NETDEV, &SourceError::parse(&path, e.clone()));
                }
                for row in &parsed.rows {
                    self.row(row, cx.itv_cs, cx.root, cx.errors);
                }
            }
            Ok(false) => {}
            Err(e) => cx.errors.count(NETDEV, &e),
        }
        self.buf = buf;
        let gen = self.generation;
        self.nets.retain(|_, n| n.seen == gen);
    }

    fn report(&mut self, w: &mut LineWriter, cx: &mut ReportCx<'_>) {
        let ts = cx.ts_ns;
        // Sorted by name, so reports and snapshots are stable.
        let mut nets: Vec<(&String, &mut NetState)> = self.nets.iter_mut().collect();
        nets.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (name, n) in nets {
            // Link speed, duplex and state change rarely; refresh them once per report.
            n.info = read_info(cx.root, name, cx.errors);
            if n.interval.itv_cs > 0 {
                let r = rates::net_rates(
                    &n.interval.delta,
                    n.interval.itv_cs,
                    n.info.speed_mbps,
                    n.info.duplex,
                );
                w.line("net", ts)
                    .tag("iface", name)
                    .field("rx_bytes_per_s", r3(r.rx_bytes_per_s))
                    .field("tx_bytes_per_s", r3(r.tx_bytes_per_s))
                    .field_opt(
                        "rx_bytes_max_per_s",
                        n.interval.rx_bytes_per_s.max().map(r3),
                    )
                    .field_opt(
                        "tx_bytes_max_per_s",
                        n.interval.tx_bytes_per_s.max().map(r3),
                    )
                    .field("rx_packets_per_s", r3(r.rx_packets_per_s))
                    .field("tx_packets_per_s", r3(r.tx_packets_per_s))
                    .field("rx_compressed_per_s", r3(r.rx_compressed_per_s))
                    .field("tx_compressed_per_s", r3(r.tx_compressed_per_s))
                    .field("rx_multicast_per_s", r3(r.rx_multicast_per_s))
                    .field("rx_errors_per_s", r3(r.rx_errors_per_s))
                    .field("tx_errors_per_s", r3(r.tx_errors_per_s))
                    .field("rx_drops_per_s", r3(r.rx_drops_per_s))
                    .field("tx_drops_per_s", r3(r.tx_drops_per_s))
                    .field("collisions_per_s", r3(r.collisions_per_s))
                    .field("tx_carrier_per_s", r3(r.tx_carrier_per_s))
                    .field("rx_frame_per_s", r3(r.rx_frame_per_s))
                    .field("rx_fifo_per_s", r3(r.rx_fifo_per_s))
                    .field("tx_fifo_per_s", r3(r.tx_fifo_per_s))
                    .field_opt("speed_mbps", n.info.speed_mbps)
                    .field_opt("util_pct", r.util_pct.map(r3))
                    .field_opt("util_max_pct", n.interval.util.max().map(r3))
                    .field_opt("operstate", n.info.operstate.as_deref())
                    .field_opt("carrier_changes", n.info.carrier_changes)
                    .field_opt("mtu", n.info.mtu)
                    .field("interval_s", n.interval.itv_cs as f64 / 100.0)
                    .write();
            }
            n.interval.clear();
        }
    }

    fn watched(&self, w: &mut Watched) {
        w.interfaces += self.nets.len() as u64;
    }

    fn live(&self, live: &mut Live) {
        live.nets.extend(self.nets.iter().filter_map(|(iface, n)| {
            let (delta, itv) = n.last?;
            Some(NetNow {
                iface: iface.clone(),
                speed_mbps: n.info.speed_mbps,
                rates: rates::net_rates(&delta, itv, n.info.speed_mbps, n.info.duplex),
            })
        }));
    }
}
