//! Reading one JSON value of storcli's answers. storcli prints some fields as a string on one
//! controller or version and as a number on another — `DID` (`0` or `"-"`), `DG` (`0`, `"-"`,
//! `"F"`), `Arr`/`Row` of `TOPOLOGY`, `Progress%` (`37` or `"-"`), the ROC temperature, and
//! `DG/VD` itself: `"0/1"` from storcli, the bare number `0` from nytrocli for a Nytro
//! WarpDrive's only VD (fixtures/storcli/mirantis-nytrocli-…json). So every field is read in
//! both forms: a word is a string or a number printed, a count a number or a string of
//! digits.

use serde_json::Value;

/// A string, or a number as storcli would print it, trimmed; `None` for anything else.
pub(super) fn word(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// [`word`], but `None` for empty and `-` (storcli's "nothing").
pub(super) fn text(v: &Value) -> Option<String> {
    word(v).filter(|s| !s.is_empty() && s != "-")
}

/// A whole number, or a string of one.
pub(super) fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// [`as_u64`] within `u32`.
pub(super) fn as_u32(v: &Value) -> Option<u32> {
    as_u64(v).and_then(|n| u32::try_from(n).ok())
}

/// `DG/VD`: `"0/1"` (drive group 0, VD 1), or a bare number `n` (nytrocli on a Nytro
/// WarpDrive, whose one VD is drive group `n` and VD `n`, as its `TOPOLOGY` and `PD LIST`
/// `DG` confirm). `Err` says what was there instead.
pub(super) fn dg_vd(v: Option<&Value>) -> Result<(u32, u32), String> {
    let Some(v) = v else {
        return Err("no \"DG/VD\"".into());
    };
    if let Some(n) = v.as_u64() {
        return u32::try_from(n)
            .map(|n| (n, n))
            .map_err(|_| format!("\"DG/VD\" {n} is out of range"));
    }
    v.as_str()
        .and_then(|s| s.split_once('/'))
        .and_then(|(d, n)| Some((d.trim().parse().ok()?, n.trim().parse().ok()?)))
        .ok_or_else(|| format!("\"DG/VD\" {v} is neither \"DG/VD\" nor a number"))
}

/// `2 Hours 5 Minutes`, `1 Day 3 Hours`, `45 Seconds`; `-` is `None`.
pub fn duration_s(s: &str) -> Option<u64> {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.is_empty() || words.len() % 2 != 0 {
        return None;
    }
    let mut total: u64 = 0;
    for pair in words.chunks(2) {
        let n: u64 = pair[0].parse().ok()?;
        let unit = pair[1].to_ascii_lowercase();
        let mult = match unit.trim_end_matches('s') {
            "day" => 86_400,
            "hour" | "hr" => 3_600,
            "minute" | "min" => 60,
            "second" | "sec" => 1,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
    }
    Some(total)
}

/// `14.551 TB` → bytes, binary units as storcli prints them.
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, unit) = s.trim().split_once(' ')?;
    let n: f64 = num.trim().parse().ok()?;
    let mult: f64 = match unit.trim() {
        "B" => 1.0,
        "KB" | "KiB" => 1024.0,
        "MB" | "MiB" => 1024.0_f64.powi(2),
        "GB" | "GiB" => 1024.0_f64.powi(3),
        "TB" | "TiB" => 1024.0_f64.powi(4),
        "PB" | "PiB" => 1024.0_f64.powi(5),
        _ => return None,
    };
    let bytes = (n * mult).round();
    // rejects NaN (never contained), negatives and anything beyond u64
    (0.0..1.8e19).contains(&bytes).then_some(bytes as u64)
}

/// ` 28C (82.40 F)`, `34C`, `26 C` → °C.
pub(super) fn temperature(s: &str) -> Option<i64> {
    let t = s.trim();
    let digits: String = t
        .char_indices()
        .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'))
        .map(|(_, c)| c)
        .collect();
    let rest = t.get(digits.len()..)?.trim_start();
    if !rest.starts_with('C') {
        return None;
    }
    digits.parse().ok()
}
