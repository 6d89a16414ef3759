//! Small synthetic reports for delivery tests: `hosts` lines of measurement `m`, one integer `v`
//! derived from host and time, so that what a server stored can be compared point by point with
//! what was sent.

use std::collections::BTreeMap;

/// The first report's time, nanoseconds.
pub const T0: i64 = 1_700_000_000_000_000_000;

/// `n` report times 10 s apart from [`T0`].
pub fn times(n: usize) -> Vec<i64> {
    (0..n as i64).map(|i| T0 + i * 10_000_000_000).collect()
}

/// One report: `hosts` lines of `m` at time `t` (ns), value derived from both.
pub fn report(t: i64, hosts: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for h in 0..hosts {
        out.extend_from_slice(format!("m,host=h{h} v={}i {t}\n", t / 1000 + h as i64).as_bytes());
    }
    out
}

/// What the reports at `times` hold, as (host, time ns) -> v.
pub fn expected(times: &[i64], hosts: usize) -> BTreeMap<(String, i64), i64> {
    let mut m = BTreeMap::new();
    for &t in times {
        for h in 0..hosts {
            m.insert((format!("h{h}"), t), t / 1000 + h as i64);
        }
    }
    m
}
