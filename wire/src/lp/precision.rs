//! The `precision` of a write request, read as each InfluxDB version reads it, and the range of
//! timestamps each version stores.
//!
//! | precision | 1.x `/write` | 2.x `/write` | 2.x `/api/v2/write` | 3.x `/write` | 3.x `/api/v2/write` |
//! | --- | --- | --- | --- | --- | --- |
//! | absent, `ns` | ns | ns | ns | ns | ns |
//! | `n` | ns | ns | 400 | ns | 400 |
//! | `u`, `µ` | µs | ns | 400 | µs | 400 |
//! | `us` | **ns** | µs | µs | 400 | µs |
//! | `ms`, `s` | ms, s | ms, s | ms, s | ms, s | ms, s |
//! | `m`, `h` | min, h | ns | 400 | min, h | 400 |
//! | anything else | ns | ns | 400 | 400 | 400 |
//!
//! 1.x takes any unknown precision, `us` included, as nanoseconds (`GetPrecisionMultiplier` in
//! `models/points.go`); 2.x's v1-compatible `/write` hands the value to the same function of 2.x,
//! which knows `us`, `ms` and `s`; `/api/v2/write` accepts `ns`, `us`, `ms`, `s` only
//! (`msgInvalidPrecision`); 3.x refuses what its API does not list. The collector offers
//! `/api/v2/write` to 1.x outputs too, with the v2 rules. A line without a timestamp gets the
//! receive time truncated to the precision.
//!
//! InfluxDB 3's own `/api/v3/write_lp` names precisions in words — `auto` (the default),
//! `nanosecond`, `microsecond`, `millisecond`, `second` — and takes `ns`, `us`, `ms`, `s` too
//! ([`Precision::of_v3`]). `auto` reads each timestamp by its magnitude, as InfluxDB 3 does:
//! below 5e9 seconds, below 5e12 milliseconds, below 5e15 microseconds, else nanoseconds.

use super::rules::{Backend, Backends};

/// Which write API a client used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/write` (InfluxDB 1.x API).
    V1,
    /// `/api/v2/write`.
    V2,
}

/// Nanoseconds per unit of the request's timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precision {
    pub factor_ns: i64,
}

const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;
const MIN: i64 = 60 * S;
const H: i64 = 3600 * S;

impl Precision {
    /// Nanoseconds.
    pub const NS: Precision = Precision { factor_ns: 1 };
    /// InfluxDB 3's `auto`: each timestamp's unit from its magnitude.
    pub const AUTO: Precision = Precision { factor_ns: 0 };

    /// The precision `param` of `/api/v3/write_lp` (`None`: absent, which is `auto`).
    pub fn of_v3(param: Option<&str>) -> Result<Precision, String> {
        let factor_ns = match param.unwrap_or("auto") {
            "auto" => 0,
            "nanosecond" | "ns" => 1,
            "microsecond" | "us" => US,
            "millisecond" | "ms" => MS,
            "second" | "s" => S,
            other => {
                return Err(format!(
                    "invalid precision {other:?}; valid precisions are auto, nanosecond, \
                     microsecond, millisecond and second"
                ))
            }
        };
        Ok(Precision { factor_ns })
    }

    /// Nanoseconds per unit of timestamp `ts` (its magnitude decides under `auto`).
    fn factor_for(self, ts: i64) -> i64 {
        if self.factor_ns > 0 {
            return self.factor_ns;
        }
        match ts {
            t if t < 5_000_000_000 => S,
            t if t < 5_000_000_000_000 => MS,
            t if t < 5_000_000_000_000_000 => US,
            _ => 1,
        }
    }

    /// The precision `param` means to `backend` on `api` (`None`: the parameter is absent).
    pub fn of(param: Option<&str>, api: Api, backend: Backend) -> Result<Precision, String> {
        let p = param.unwrap_or("");
        let factor = match (api, backend) {
            (Api::V2, _) => match p {
                "" | "ns" => Some(1),
                "us" => Some(US),
                "ms" => Some(MS),
                "s" => Some(S),
                _ => None,
            },
            (Api::V1, Backend::V1) => Some(match p {
                "u" => US,
                "ms" => MS,
                "s" => S,
                "m" => MIN,
                "h" => H,
                _ => 1,
            }),
            (Api::V1, Backend::V2) => Some(match p {
                "us" => US,
                "ms" => MS,
                "s" => S,
                _ => 1,
            }),
            (Api::V1, Backend::V3) => match p {
                "" | "n" | "ns" => Some(1),
                "u" | "µ" => Some(US),
                "ms" => Some(MS),
                "s" => Some(S),
                "m" => Some(MIN),
                "h" => Some(H),
                _ => None,
            },
        };
        match factor {
            Some(factor_ns) => Ok(Precision { factor_ns }),
            None => Err(match api {
                Api::V2 => "invalid precision; valid precision units are ns, us, ms, and s".into(),
                Api::V1 => format!(
                    "invalid precision {p:?}; InfluxDB {} accepts ns, u, ms, s, m, h",
                    backend.name()
                ),
            }),
        }
    }

    /// The precision `param` means to every backend, or an error when one refuses it or two
    /// read it differently.
    pub fn for_all(param: Option<&str>, api: Api, backends: Backends) -> Result<Precision, String> {
        let mut found: Option<(Backend, Precision)> = None;
        for b in backends.iter() {
            let p = Precision::of(param, api, b)?;
            match found {
                None => found = Some((b, p)),
                Some((first, q)) if q != p => {
                    return Err(format!(
                        "precision={:?} means {} to InfluxDB {} and {} to InfluxDB {}, which this \
                         collector both writes to: use one both read alike (ns, ms, s)",
                        param.unwrap_or(""),
                        q.unit(),
                        first.name(),
                        p.unit(),
                        b.name()
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(found.map_or(Precision::NS, |(_, p)| p))
    }

    fn unit(self) -> &'static str {
        match self.factor_ns {
            0 => "auto-detected units",
            1 => "nanoseconds",
            US => "microseconds",
            MS => "milliseconds",
            S => "seconds",
            MIN => "minutes",
            _ => "hours",
        }
    }

    /// `now_ns` truncated to this precision: the time of a line without a timestamp (`auto`
    /// keeps nanoseconds, as InfluxDB 3 stamps such a line with its own clock).
    pub fn truncate(self, now_ns: i64) -> i64 {
        now_ns - now_ns.rem_euclid(self.factor_ns.max(1))
    }
}

/// Smallest timestamp 1.x and 2.x store (`models.MinNanoTime`).
pub const MIN_NANO_TIME: i64 = i64::MIN + 2;
/// Largest timestamp 1.x and 2.x store (`models.MaxNanoTime`).
pub const MAX_NANO_TIME: i64 = i64::MAX - 1;

/// `ts` in the request's precision to nanoseconds, refused as `backend` refuses it.
pub fn to_ns(ts: i64, precision: Precision, backend: Backend) -> Result<i64, String> {
    let factor = precision.factor_for(ts);
    let ns = ts.checked_mul(factor);
    match backend {
        Backend::V1 | Backend::V2 => match ns {
            Some(ns) if (MIN_NANO_TIME..=MAX_NANO_TIME).contains(&ns) => Ok(ns),
            _ if backend == Backend::V1 => Err(format!(
                "time outside range {MIN_NANO_TIME} - {MAX_NANO_TIME}"
            )),
            _ => Err(format!(
                "time {ts} is outside the range [{}, {}]",
                MIN_NANO_TIME / factor,
                MAX_NANO_TIME / factor
            )),
        },
        Backend::V3 => ns.ok_or_else(|| format!("timestamp {ts} out of range for its precision")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(p: Option<&str>, api: Api, b: Backend) -> Option<i64> {
        Precision::of(p, api, b).ok().map(|p| p.factor_ns)
    }

    #[test]
    fn each_version_reads_precision_its_way() {
        assert_eq!(f(Some("us"), Api::V1, Backend::V1), Some(1));
        assert_eq!(f(Some("u"), Api::V1, Backend::V1), Some(US));
        assert_eq!(f(Some("x"), Api::V1, Backend::V1), Some(1));
        assert_eq!(f(Some("h"), Api::V1, Backend::V1), Some(H));
        assert_eq!(f(Some("us"), Api::V1, Backend::V2), Some(US));
        assert_eq!(f(Some("u"), Api::V1, Backend::V2), Some(1));
        assert_eq!(f(Some("us"), Api::V2, Backend::V1), Some(US));
        assert_eq!(f(Some("u"), Api::V2, Backend::V2), None);
        assert_eq!(f(None, Api::V2, Backend::V3), Some(1));
        assert_eq!(f(Some("us"), Api::V1, Backend::V3), None);
    }

    #[test]
    fn several_versions_must_agree() {
        let both = Backends::of(&[Backend::V1, Backend::V2]);
        assert!(Precision::for_all(Some("us"), Api::V1, both)
            .expect_err("ambiguous")
            .contains("nanoseconds to InfluxDB 1.x and microseconds to InfluxDB 2.x"));
        assert_eq!(
            Precision::for_all(Some("ms"), Api::V1, both),
            Ok(Precision { factor_ns: MS })
        );
    }

    #[test]
    fn v3_names_and_auto_by_magnitude() {
        let v3 = |p: Option<&str>| Precision::of_v3(p).map(|p| p.factor_ns);
        assert_eq!(v3(None), Ok(0));
        assert_eq!(v3(Some("second")), Ok(S));
        assert_eq!(v3(Some("ms")), Ok(MS));
        assert_eq!(v3(Some("microsecond")), Ok(US));
        assert_eq!(v3(Some("nanosecond")), Ok(1));
        assert!(v3(Some("n")).is_err() && v3(Some("h")).is_err() && v3(Some("")).is_err());
        let auto = Precision::AUTO;
        for (ts, ns) in [
            (1_700_000_000, 1_700_000_000 * S),
            (1_700_000_000_123, 1_700_000_000_123 * MS),
            (1_700_000_000_123_456, 1_700_000_000_123_456 * US),
            (1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
            (-5, -5 * S),
        ] {
            assert_eq!(to_ns(ts, auto, Backend::V1), Ok(ns), "{ts}");
        }
        assert!(to_ns(4_999_999_999, auto, Backend::V3).is_ok());
        assert_eq!(auto.truncate(123), 123);
        assert!(to_ns(i64::MIN, auto, Backend::V1).is_err());
    }

    #[test]
    fn time_range() {
        let ns = Precision::NS;
        assert_eq!(to_ns(MAX_NANO_TIME, ns, Backend::V1), Ok(MAX_NANO_TIME));
        assert!(to_ns(i64::MAX, ns, Backend::V1).is_err());
        assert!(to_ns(i64::MIN, ns, Backend::V2).is_err());
        assert_eq!(to_ns(i64::MAX, ns, Backend::V3), Ok(i64::MAX));
        let h = Precision { factor_ns: H };
        assert!(to_ns(9_223_372_036_854_775, h, Backend::V3).is_err());
        assert_eq!(h.truncate(3 * H + 5), 3 * H);
        assert_eq!(h.truncate(-5), -H);
    }
}
