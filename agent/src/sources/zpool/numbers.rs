//! The number formats the text, JSON and list parsers share: sizes with binary suffixes
//! (`1.23T`, `512`), rates (`12.3M/s`), percentages and `zpool status` durations.

pub(super) fn split_digits(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(s.len(), |(i, _)| i);
    s.split_at(end)
}

/// A decimal number as printed, accepting a locale's decimal comma (`9,12`).
fn decimal(s: &str) -> Option<f64> {
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b',')
        || !s.bytes().next().is_some_and(|b| b.is_ascii_digit())
        || s.bytes().filter(|&b| b == b'.' || b == b',').count() > 1
    {
        return None;
    }
    s.replace(',', ".").parse().ok()
}

/// A size or count as zpool prints it: exact (`123456`, with `-p`) or with a power-of-1024
/// suffix (`0B`, `58.5K`, `1.24T`, `9,12T`).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let f = parse_size_f64(s)?;
    // Guard the cast: 16E and beyond do not fit.
    (f < 1.8e19).then(|| f.round() as u64)
}

fn parse_size_f64(s: &str) -> Option<f64> {
    let last = s.chars().last()?;
    let (num, mult) = if last.is_ascii_digit() {
        (s, 1.0)
    } else {
        let num = s.get(..s.len() - last.len_utf8())?;
        let exp = match last.to_ascii_uppercase() {
            'B' => 0,
            'K' => 1,
            'M' => 2,
            'G' => 3,
            'T' => 4,
            'P' => 5,
            'E' => 6,
            _ => return None,
        };
        (num, 1024f64.powi(exp))
    };
    Some(decimal(num)? * mult)
}

/// A rate such as `177M/s` or `1,90M/s`, in bytes per second.
pub(crate) fn parse_rate(s: &str) -> Option<f64> {
    parse_size_f64(s.strip_suffix("/s")?)
}

/// A percentage such as `11.56%` or `96,19%`.
pub(crate) fn parse_percent(s: &str) -> Option<f64> {
    decimal(s.strip_suffix('%')?)
}

/// A duration as zpool prints it: `1h47m`, `123h32m`, `00:00:15`, `0 days 01:01:21`,
/// `1 days 09:48:34`. Returns seconds.
pub(crate) fn parse_duration(s: &str) -> Option<u64> {
    let words: Vec<&str> = s.split_ascii_whitespace().collect();
    let (days, clock) = match words.as_slice() {
        [one] => (0, *one),
        [d, "days" | "day", clock] => (d.parse::<u64>().ok()?, *clock),
        _ => return None,
    };
    let secs = if clock.contains(':') {
        let parts: Vec<&str> = clock.split(':').collect();
        let nums: Option<Vec<u64>> = parts
            .iter()
            .map(|p| {
                (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| p.parse::<u64>().ok())
                    .flatten()
            })
            .collect();
        match nums?.as_slice() {
            [h, m, s] => h.checked_mul(3600)?.checked_add(m * 60 + s)?,
            [m, s] => m.checked_mul(60)?.checked_add(*s)?,
            _ => return None,
        }
    } else {
        // 1h47m, 0h0m, 5m, 30s, 2d3h.
        let mut total: u64 = 0;
        let mut rest = clock;
        if rest.is_empty() {
            return None;
        }
        while !rest.is_empty() {
            let (digits, tail) = split_digits(rest);
            let n: u64 = digits.parse().ok()?;
            let mut chars = tail.chars();
            let unit = match chars.next()? {
                'd' => 86_400,
                'h' => 3600,
                'm' => 60,
                's' => 1,
                _ => return None,
            };
            total = total.checked_add(n.checked_mul(unit)?)?;
            rest = chars.as_str();
        }
        total
    };
    days.checked_mul(86_400)?.checked_add(secs)
}
