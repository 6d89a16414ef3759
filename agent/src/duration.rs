//! Durations written as `500ms`, `1s`, `10s`, `5m`, `1h` (and a bare number of seconds): how the
//! configs of the agent and of every collector write an interval.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses `"1s"`, `"250ms"`, `"5m"`, `"1h"`, `"2.5s"`, `"10"` (seconds).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a duration such as 1s, 500ms, 5m"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=86_400.0 * 365.0).contains(&secs) {
        return Err(format!("{s:?}: out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Formats a duration the way it would be written in the config.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
    }
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("10"), Ok(Duration::from_secs(10)));
        assert!(parse("ten").is_err());
        assert!(parse("5 fortnights").is_err());
        assert!(parse("").is_err());
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format(Duration::from_secs(10)), "10s");
    }
}
