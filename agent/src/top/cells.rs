//! The cells and table frame every health pane of `top` shares (MD arrays, multipath maps,
//! pools, hardware RAID virtual drives): a remaining time, a loss probability, a percentage.

use super::table::{self, Cell, Row, Table, Tail};

/// Width set aside for the notes of a health row (which members, paths, vdevs are down):
/// at 80 columns they push out the less telling columns.
const HEALTH_NOTES: usize = 16;

/// A table of the health pane: rows named by array, map or pool, and notes last.
pub(super) fn health_table(
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
pub(super) fn eta(s: Option<f64>) -> Cell {
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
pub(super) fn risk(p: Option<f64>) -> Cell {
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

/// A percentage as `42.5%`; `-` when unknown.
pub(super) fn pct(p: Option<f64>) -> Cell {
    match p.filter(|p| p.is_finite()) {
        Some(p) => Cell::text(format!("{p:.1}%")),
        None => Cell::None,
    }
}
