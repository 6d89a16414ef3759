//! The simulated fleet as a Prometheus sees it: each report of a host goes through the agent's
//! own `/metrics` exposition ([`Exposition`], the one the agent's listener serves), and a scrape
//! right after each report stores what it renders, stamped with the report's time, with the
//! labels a scrape adds (`job`, `instance`). From there the samples become `promtool test rules`
//! input series or an OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use storwatch_agent::prometheus::exposition::Exposition;

use crate::Labels;

/// The scrape job name the fleet's samples carry (`job` label), as in the quickstart's
/// Prometheus configuration.
pub const SCRAPE_JOB: &str = "storwatch";

/// A series: metric name and labels (the scrape's `job` and `instance` included).
pub type SeriesId = (String, Labels);

/// Every series of a fleet and its samples: (milliseconds since the epoch, value), in time order.
pub type Samples = BTreeMap<SeriesId, Vec<(i64, f64)>>;

/// The labels a scrape of host `host`'s agent adds: `job` [`SCRAPE_JOB`] and `instance`
/// `<host>:9634` (the agent's default `/metrics` port).
pub fn scrape_labels(host: &str) -> Labels {
    Labels::from([
        ("instance".to_string(), format!("{host}:9634")),
        ("job".to_string(), SCRAPE_JOB.to_string()),
    ])
}

/// One sample line of the text format: `name{a="x",b="y"} value`. Comments and blank lines
/// give `None`.
pub fn parse_sample(line: &str) -> Option<(String, Labels, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let mut labels = Labels::new();
    let value_text = if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if c == '}' {
                end = Some(i);
                break;
            }
            if c == ',' || c == ' ' {
                continue;
            }
            let key_start = i;
            let mut key_end = i;
            for (j, c) in chars.by_ref() {
                if c == '=' {
                    key_end = j;
                    break;
                }
            }
            let key = body[key_start..key_end].to_string();
            // opening quote
            chars.next();
            let mut value = String::new();
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|x| x.1) {
                        Some('n') => value.push('\n'),
                        Some(x) => value.push(x),
                        None => {}
                    },
                    '"' => break,
                    _ => value.push(c),
                }
            }
            labels.insert(key, value);
        }
        &body[end? + 1..]
    } else {
        rest
    };
    let value = match value_text.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some((name.to_string(), labels, value))
}

/// What a Prometheus scraping host `host`'s agent right after each of its reports would store:
/// `reports` are (stamp in ns, the report's lines), in time order, as [`crate::shift`] gives
/// them; each is taken into the agent's exposition and its rendering parsed, every sample
/// stamped with the report's time (milliseconds), with the scrape's labels ([`scrape_labels`]),
/// plus the scrape's own `up` 1.
pub fn scrape_reports(host: &str, reports: &[(i64, String)], into: &mut Samples) {
    let extra = scrape_labels(host);
    let mut exposition = Exposition::default();
    for (at_ns, lines) in reports {
        let at_ms = at_ns / 1_000_000;
        exposition.update(lines);
        let text = exposition.render();
        for line in text.lines() {
            let Some((name, mut labels, value)) = parse_sample(line) else {
                continue;
            };
            labels.extend(extra.clone());
            into.entry((name, labels)).or_default().push((at_ms, value));
        }
        into.entry(("up".to_string(), extra.clone()))
            .or_default()
            .push((at_ms, 1.0));
    }
}

/// A series selector as written in PromQL and in promtool's `input_series`:
/// `name{a="x",b="y"}`.
pub fn selector(name: &str, labels: &Labels) -> String {
    let mut s = format!("{name}{{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(s, "{k}=\"{v}\"");
    }
    s.push('}');
    s
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{v}")
    }
}

/// promtool's `values` notation for one series sampled every `step_ms` from `start_ms`: one value
/// per step, `_` where the series has no sample (a scrape that did not carry it).
pub fn promtool_values(samples: &[(i64, f64)], start_ms: i64, step_ms: i64) -> String {
    let mut out = String::new();
    let mut next = start_ms;
    for &(t, v) in samples {
        if t < next {
            continue;
        }
        while next < t {
            out.push_str("_ ");
            next += step_ms;
        }
        out.push_str(&number(v));
        out.push(' ');
        next += step_ms;
    }
    out.trim_end().to_string()
}

/// promtool's `values` for one series of a target scraped at `scrapes` (milliseconds, the
/// target's `up` samples), one entry per `step_ms` from `start_ms` to the last scrape: the
/// series' value where a scrape carried it, `stale` at the first scrape that did not (as
/// Prometheus writes a staleness marker for a series a scrape no longer has, and for every
/// series of a target whose scrape failed), `_` elsewhere.
pub fn promtool_values_scraped(
    samples: &[(i64, f64)],
    scrapes: &[i64],
    start_ms: i64,
    step_ms: i64,
) -> String {
    let values: BTreeMap<i64, f64> = samples.iter().copied().collect();
    let scraped: std::collections::BTreeSet<i64> = scrapes.iter().copied().collect();
    let end = scrapes.last().copied().unwrap_or(start_ms);
    let mut out = Vec::new();
    let mut present = false;
    let mut t = start_ms;
    while t <= end {
        if let Some(v) = values.get(&t) {
            out.push(number(*v));
            present = true;
        } else if present && scraped.contains(&t) {
            out.push("stale".to_string());
            present = false;
        } else {
            out.push("_".to_string());
        }
        t += step_ms;
    }
    out.join(" ")
}

/// The samples as an OpenMetrics text file for `promtool tsdb create-blocks-from openmetrics`:
/// each metric's samples together, timestamps in seconds, `# EOF` at the end.
pub fn openmetrics(samples: &Samples) -> String {
    let mut out = String::new();
    let mut last_name = "";
    for ((name, labels), points) in samples {
        if name != last_name {
            let _ = writeln!(out, "# TYPE {name} gauge");
            last_name = name;
        }
        let sel = selector(name, labels);
        for &(t, v) in points {
            let _ = writeln!(out, "{sel} {} {}.{:03}", number(v), t / 1000, t % 1000);
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_parse_with_escapes() {
        let (n, l, v) =
            parse_sample(r#"storwatch_md_info{array="md0",state="a \"b\"\\c"} 1"#).unwrap();
        assert_eq!(n, "storwatch_md_info");
        assert_eq!(l["array"], "md0");
        assert_eq!(l["state"], r#"a "b"\c"#);
        assert_eq!(v, 1.0);
        assert_eq!(parse_sample("up 0").unwrap().2, 0.0);
        assert!(parse_sample("# TYPE up gauge").is_none());
    }

    #[test]
    fn a_series_a_scrape_no_longer_has_goes_stale() {
        let s = [(10_000, 1.0), (20_000, 2.0), (50_000, 3.0)];
        let scrapes = [10_000, 20_000, 30_000, 40_000, 50_000, 60_000];
        assert_eq!(
            promtool_values_scraped(&s, &scrapes, 0, 10_000),
            "_ 1 2 stale _ 3 stale"
        );
    }

    #[test]
    fn values_mark_missing_scrapes() {
        let s = [(10_000, 1.0), (20_000, 2.5), (50_000, 3.0)];
        assert_eq!(promtool_values(&s, 10_000, 10_000), "1 2.5 _ _ 3");
    }
}
