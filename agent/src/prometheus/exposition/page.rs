//! The page: the series' samples in families, one per metric name, each with its HELP and
//! TYPE lines, written in the text format.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use storwatch_wire::prom::metric_name;

use std::sync::Arc;

use super::{Exposition, Shape};
use crate::prometheus::help::HELP;

/// Where [`Family::members`] points at a series' `_info` sample instead of one of its values.
const INFO: u32 = u32::MAX;

/// One metric family of the page: its name, its HELP and TYPE lines, and its samples in the
/// order of their series' keys, each `(series, value)`: an index into [`Exposition::series`]
/// and one into that series' values (or [`INFO`]).
#[derive(Debug)]
pub(super) struct Family {
    name: String,
    head: String,
    members: Vec<(u32, u32)>,
    /// The measurement and field the HELP and TYPE lines were made from (the first series').
    measurement: String,
    field: String,
}

impl Family {
    fn new(name: String, measurement: &str, field: &str, members: Vec<(u32, u32)>) -> Family {
        let kind = if !field.is_empty() && name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let help = help_of(&name, measurement, field);
        let head = format!(
            "# HELP {name} {}\n# TYPE {name} {kind}\n",
            escape_help(&help)
        );
        Family {
            name,
            head,
            members,
            measurement: measurement.to_owned(),
            field: field.to_owned(),
        }
    }
}

impl Exposition {
    /// The families, by name, each with its samples in the order of their series' keys.
    ///
    /// A shape's families are looked up once, at its first series: the series of a shape have
    /// their samples in the same families (the 200 `disk` series, ~30 samples each, look up ~30
    /// names, not ~6,000).
    fn make_families(&mut self) {
        let mut bases: HashMap<*const Shape, String> = HashMap::new();
        for s in &self.series {
            bases
                .entry(Arc::as_ptr(&s.shape))
                .or_insert_with(|| metric_name(&s.shape.measurement));
        }
        // family name -> (measurement, field, its samples' index in `members`), the names not
        // made until the end
        let mut families: BTreeMap<Name<'_>, (&str, &str, usize)> = BTreeMap::new();
        let mut members: Vec<Vec<(u32, u32)>> = Vec::new();
        // each shape's families, in its samples' order, then its `_info` family's
        let mut of_shape: HashMap<*const Shape, Vec<usize>> = HashMap::new();
        for &i in self.keys.values() {
            let s = &self.series[i];
            let shape = &*s.shape;
            let at = u32::try_from(i).unwrap_or(u32::MAX);
            let found = of_shape.entry(Arc::as_ptr(&s.shape)).or_insert_with(|| {
                let base = bases.get(&Arc::as_ptr(&s.shape)).map_or("", String::as_str);
                let m = shape.measurement.as_str();
                let mut found: Vec<usize> = Vec::with_capacity(shape.names.len() + 1);
                for (prom, field) in &shape.names {
                    let name = Name(base, prom);
                    found.push(family_of(&mut families, &mut members, name, m, field));
                }
                if !shape.info.is_empty() {
                    let name = Name(base, "info");
                    found.push(family_of(&mut families, &mut members, name, m, ""));
                }
                found
            });
            for (j, &f) in found.iter().take(shape.names.len()).enumerate() {
                let j = u32::try_from(j).unwrap_or(u32::MAX - 1);
                if let Some(m) = members.get_mut(f) {
                    m.push((at, j));
                }
            }
            if let Some(&f) = found.get(shape.names.len()) {
                if let Some(m) = members.get_mut(f) {
                    m.push((at, INFO));
                }
            }
        }
        // the families of the last page keep their HELP and TYPE lines
        let mut last: HashMap<String, Family> = HashMap::with_capacity(self.families.len());
        for mut f in std::mem::take(&mut self.families) {
            last.insert(std::mem::take(&mut f.name), f);
        }
        let mut name = String::new();
        self.families = families
            .into_iter()
            .map(|(n, (measurement, field, k))| {
                let members = members.get_mut(k).map(std::mem::take).unwrap_or_default();
                name.clear();
                let _ = write!(name, "{}_{}", n.0, n.1);
                match last.remove_entry(name.as_str()) {
                    Some((name, f)) if f.measurement == measurement && f.field == field => {
                        Family { name, members, ..f }
                    }
                    _ => Family::new(name.clone(), measurement, field, members),
                }
            })
            .collect();
        self.families_stale = false;
    }

    /// The text format: one family per metric name, each with HELP and TYPE, families sorted.
    pub fn render(&mut self) -> String {
        let mut out = Vec::new();
        self.render_into(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Exposition::render`], written at the end of `out`.
    pub fn render_into(&mut self, out: &mut Vec<u8>) {
        if self.families_stale {
            self.make_families();
        }
        let mut info_labels = String::new();
        for f in &self.families {
            out.extend_from_slice(f.head.as_bytes());
            for &(i, j) in &f.members {
                let Some(s) = self.series.get(i as usize) else {
                    continue;
                };
                out.extend_from_slice(f.name.as_bytes());
                let v = if j == INFO {
                    info_labels.clear();
                    write_info_labels(&s.labels_text, &s.shape.info, &s.info, &mut info_labels);
                    out.extend_from_slice(info_labels.as_bytes());
                    1.0
                } else {
                    out.extend_from_slice(s.labels_text.as_bytes());
                    s.values.get(j as usize).copied().unwrap_or(f64::NAN)
                };
                write_value(v, out);
            }
        }
    }
}

/// The family's HELP from the metric contract ([`HELP`]); a family the contract lacks (a field
/// added to a collector but not yet to `contract/*.yaml`, which a test catches) still gets one.
pub(super) fn help_of(name: &str, measurement: &str, field: &str) -> String {
    match HELP.binary_search_by(|(n, _)| (*n).cmp(name)) {
        Ok(i) => HELP[i].1.to_string(),
        Err(_) if field.is_empty() => {
            format!("States of storwatch's {measurement} series as labels (always 1).")
        }
        Err(_) => format!("storwatch {measurement} field {field}, in base units."),
    }
}

fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

pub(super) fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The family `name` in `families` (made, with `measurement` and `field` for its HELP and TYPE
/// lines and an empty list in `members`, if it is not there yet): its index in `members`.
fn family_of<'a>(
    families: &mut BTreeMap<Name<'a>, (&'a str, &'a str, usize)>,
    members: &mut Vec<Vec<(u32, u32)>>,
    name: Name<'a>,
    measurement: &'a str,
    field: &'a str,
) -> usize {
    families
        .entry(name)
        .or_insert_with(|| {
            members.push(Vec::new());
            (measurement, field, members.len() - 1)
        })
        .2
}

/// A family's name, `<base>_<field>`, compared as that string without making it.
#[derive(Debug, Clone, Copy)]
struct Name<'a>(&'a str, &'a str);

impl Name<'_> {
    #[inline]
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.bytes().chain(*b"_").chain(self.1.bytes())
    }
}

impl Ord for Name<'_> {
    // some 70,000 calls when the families are made at 200 disks: inline, as it was before the
    // page had a file of its own
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.0 == other.0 {
            return self.1.cmp(other.1);
        }
        // bases that differ before either ends differ there, in both names
        let n = self.0.len().min(other.0.len());
        match self.0.as_bytes()[..n].cmp(&other.0.as_bytes()[..n]) {
            std::cmp::Ordering::Equal => self.bytes().cmp(other.bytes()),
            unequal => unequal,
        }
    }
}

impl PartialOrd for Name<'_> {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Name<'_> {}

/// `{k="v",…}` of `labels` and then `extra`, escaped, at the end of `out`; nothing when both
/// are empty.
pub(super) fn write_labels(
    labels: &[(String, String)],
    extra: &[(String, String)],
    out: &mut String,
) {
    if labels.is_empty() && extra.is_empty() {
        return;
    }
    out.push('{');
    for (i, (k, val)) in labels.iter().chain(extra).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_label(val, out);
        out.push('"');
    }
    out.push('}');
}

/// The labels of a series' `_info` sample: its labels as written (`labels_text`, as
/// [`write_labels`] wrote them) and then the string fields' labels, `names` and `values`, as
/// [`write_labels`] writes labels and extra labels together.
pub(super) fn write_info_labels(
    labels_text: &str,
    names: &[String],
    values: &[String],
    out: &mut String,
) {
    let (open, mut first) = match labels_text.strip_suffix('}') {
        Some(open) => (open, false),
        None => ("{", true),
    };
    out.push_str(open);
    for (k, val) in names.iter().zip(values) {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        escape_label(val, out);
        out.push('"');
    }
    out.push('}');
}

/// ` <value>\n` of a sample.
pub(super) fn write_value(v: f64, out: &mut Vec<u8>) {
    out.push(b' ');
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if v == v.trunc() && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
        // a whole number, as `{v}` writes it (no `.0`), without the float's formatting
        let mut n = v.abs() as u64;
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0.0 {
            out.push(b'-');
        }
        out.extend_from_slice(&digits[at..]);
    } else {
        let _ = std::io::Write::write_fmt(out, format_args!("{v}"));
    }
    out.push(b'\n');
}
