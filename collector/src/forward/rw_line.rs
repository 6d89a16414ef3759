//! The plain queue line read without the grammar: most lines an agent writes hold no escape,
//! no string and no exotic number (`disk,host=n1,device=sda r_per_s=12.5,saturated_s=2i 1…`),
//! and the queue holds only lines the collector validated already, so such a line is cut at
//! its spaces, commas and equals signs and its values read directly — a few times cheaper than
//! reading it again by the whole grammar ([`storwatch_wire::lp::parse_view`]), which it reads
//! exactly as (test below: every line of a corpus both ways).
//!
//! [`read_plain`] takes a line only when nothing in it needs the grammar: no backslash, no
//! double quote, no byte below `!` but the two spaces around the field set, a measurement
//! without `=`, each tag and field one `=` between two non-empty sides, no tag key twice, at
//! most [`MAX_PLAIN`] bytes; the time, when there is one, `-?[0-9]+` within `i64`. Any other line,
//! and a line whose value is not a plain number or boolean ([`plain_value`]), is read by the
//! grammar as before.

/// Lines longer than this are left to the grammar (its key-length limit is 65,535 bytes).
const MAX_PLAIN: usize = 60_000;

/// A plain line: where its parts are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plain<'a> {
    line: &'a str,
    /// where the series key (measurement and tags) ends: the first space
    key_end: usize,
    /// where the measurement ends
    name_end: usize,
    /// where the field set ends
    fields_end: usize,
    timestamp: Option<i64>,
}

/// What a byte is to a plain line: part of a name or value, one of its three separators, or
/// anything that needs the grammar (a backslash, a double quote, a control byte, a tab).
const ORD: u8 = 0;
const COMMA: u8 = 1;
const EQ: u8 = 2;
const SPACE: u8 = 3;
const ODD: u8 = 4;

const CLASS: [u8; 256] = {
    let mut t = [ORD; 256];
    let mut c = 0;
    while c < b'!' as usize {
        t[c] = ODD;
        c += 1;
    }
    t[b'\\' as usize] = ODD;
    t[b'"' as usize] = ODD;
    t[b',' as usize] = COMMA;
    t[b'=' as usize] = EQ;
    t[b' ' as usize] = SPACE;
    t
};

fn class(b: &[u8], i: usize) -> Option<u8> {
    b.get(i).map(|c| CLASS[*c as usize])
}

/// `line` as a [`Plain`] line, or `None` when it needs the grammar: one pass over its bytes.
pub(super) fn read_plain(line: &str) -> Option<Plain<'_>> {
    let b = line.as_bytes();
    if b.len() > MAX_PLAIN {
        return None;
    }
    // the measurement, ended by a comma or a space
    let name_end = run(b, 0);
    if name_end == 0 || !matches!(class(b, name_end), Some(COMMA | SPACE)) {
        return None;
    }
    // the tags: `,k=v` each; their keys' ranges, for keys written twice
    let mut keys = [(0usize, 0usize); 32];
    let mut tags = 0;
    let mut i = name_end;
    while class(b, i) == Some(COMMA) {
        let k = i + 1;
        let eq = key(b, k)?;
        let end = value(b, eq + 1)?;
        let (klen, first) = (eq - k, b[k]);
        if tags == keys.len()
            || keys[..tags]
                .iter()
                .any(|&(s, e)| e - s == klen && b[s] == first && b[s..e] == b[k..eq])
        {
            return None;
        }
        keys[tags] = (k, eq);
        tags += 1;
        i = end;
    }
    if class(b, i) != Some(SPACE) {
        return None;
    }
    let key_end = i;
    // the fields: `k=v` separated by commas
    loop {
        let eq = key(b, i + 1)?;
        i = value(b, eq + 1)?;
        if class(b, i) != Some(COMMA) {
            break;
        }
    }
    let fields_end = i;
    let timestamp = if i < b.len() {
        // a space, then `-?[0-9]+` to the end
        let mut j = i + 1;
        if b.get(j) == Some(&b'-') {
            j += 1;
        }
        if j >= b.len() || !b[j..].iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(line[i + 1..].parse::<i64>().ok()?)
    } else {
        None
    };
    Some(Plain {
        line,
        key_end,
        name_end,
        fields_end,
        timestamp,
    })
}

/// Where the run of name or value bytes from `from` ends.
fn run(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() && CLASS[b[i] as usize] == ORD {
        i += 1;
    }
    i
}

/// A non-empty key from `from`, ended by `=`: where the `=` is.
fn key(b: &[u8], from: usize) -> Option<usize> {
    let i = run(b, from);
    (i > from && class(b, i) == Some(EQ)).then_some(i)
}

/// A non-empty value from `from`, ended by a comma, a space or the end: where it ends.
fn value(b: &[u8], from: usize) -> Option<usize> {
    let i = run(b, from);
    (i > from && matches!(class(b, i), None | Some(COMMA | SPACE))).then_some(i)
}

/// The `k=v` parts of a run the reading found plain, as (key, value).
#[derive(Debug, Clone)]
pub(super) struct Pairs<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let b = self.s.as_bytes();
        if self.at >= b.len() {
            return None;
        }
        let k = self.at;
        let mut i = k;
        while i < b.len() && b[i] != b'=' {
            i += 1;
        }
        let eq = i;
        while i < b.len() && b[i] != b',' {
            i += 1;
        }
        self.at = i + 1;
        Some((self.s.get(k..eq)?, self.s.get(eq + 1..i)?))
    }
}

impl<'a> Plain<'a> {
    /// The line.
    pub(super) fn line(&self) -> &'a str {
        self.line
    }

    /// Measurement and tags as written.
    pub(super) fn series_key(&self) -> &'a str {
        &self.line[..self.key_end]
    }

    /// The measurement (nothing to unescape).
    pub(super) fn measurement(&self) -> &'a str {
        &self.line[..self.name_end]
    }

    /// The tags as written, which are the tags (nothing to unescape).
    pub(super) fn tags(&self) -> Pairs<'a> {
        Pairs {
            s: self.line.get(self.name_end + 1..self.key_end).unwrap_or(""),
            at: 0,
        }
    }

    /// The fields as written: keys (nothing to unescape) and values.
    pub(super) fn fields(&self) -> Pairs<'a> {
        Pairs {
            s: self
                .line
                .get(self.key_end + 1..self.fields_end)
                .unwrap_or(""),
            at: 0,
        }
    }

    /// The timestamp as written (ns by the queue's precision), if any.
    pub(super) fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
}

/// Powers of ten a double holds exactly.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A plain value as a number: `-?[0-9]+(\.[0-9]+)?` (a float), `-?[0-9]+i` (an integer within
/// `i64`), or a boolean as line protocol spells it (1 or 0); `None` for anything else (`1u`,
/// `1e3`, `.5`, a string), which the grammar reads.
///
/// A float of at most 15 digits is its digits as an integer divided by a power of ten: both
/// exact in a double, so the one rounding of the division gives the nearest double to the
/// decimal, as `str::parse` does (Clinger's fast path); longer ones are `str::parse`d.
pub(super) fn plain_value(v: &str) -> Option<f64> {
    let b = v.as_bytes();
    match b.first()? {
        b't' | b'T' => return matches!(v, "t" | "T" | "true" | "True" | "TRUE").then_some(1.0),
        b'f' | b'F' => return matches!(v, "f" | "F" | "false" | "False" | "FALSE").then_some(0.0),
        _ => {}
    }
    let negative = b[0] == b'-';
    let mut i = usize::from(negative);
    let start = i;
    let mut m: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    let whole = i - start;
    if whole == 0 {
        return None;
    }
    let mut frac = 0;
    match b.get(i) {
        None => {}
        Some(b'i') if i + 1 == b.len() => {
            if whole > 18 {
                return v[..i].parse::<i64>().ok().map(|n| n as f64);
            }
            let n = m as i64;
            return Some(if negative { -n } else { n } as f64);
        }
        Some(b'.') => {
            i += 1;
            let f = i;
            while i < b.len() && b[i].is_ascii_digit() {
                m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
                i += 1;
            }
            frac = i - f;
            if frac == 0 || i != b.len() {
                return None;
            }
        }
        Some(_) => return None,
    }
    if whole + frac > 15 {
        return v.parse::<f64>().ok().filter(|f| f.is_finite());
    }
    let f = m as f64 / POW10[frac];
    Some(if negative { -f } else { f })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use storwatch_wire::lp::{parse_view, Backend, FieldValue, Parsed};

    /// What the grammar reads of a line: series key, measurement, tags, fields (key, number),
    /// time; `None` when it refuses the line or a value is not a number or boolean.
    type Reading = (
        String,
        String,
        Vec<(String, String)>,
        Vec<(String, u64)>,
        Option<i64>,
    );

    fn by_grammar(line: &str) -> Option<Reading> {
        let Ok(Parsed::Go(v)) =
            parse_view(line, Backend::V2).or_else(|_| parse_view(line, Backend::V1))
        else {
            return None;
        };
        let mut fields = Vec::new();
        for f in v.fields() {
            let n = match f.value().ok()? {
                FieldValue::Float(f) => f,
                FieldValue::Integer(i) => i as f64,
                FieldValue::Boolean(b) => f64::from(u8::from(b)),
                _ => return None,
            };
            fields.push((f.key().into_owned(), n.to_bits()));
        }
        Some((
            v.series_key().to_string(),
            v.measurement().into_owned(),
            v.tags()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            fields,
            v.timestamp(),
        ))
    }

    fn by_plain(line: &str) -> Option<Reading> {
        let p = read_plain(line)?;
        let mut fields = Vec::new();
        for (k, v) in p.fields() {
            fields.push((k.to_string(), plain_value(v)?.to_bits()));
        }
        Some((
            p.series_key().to_string(),
            p.measurement().to_string(),
            p.tags()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            fields,
            p.timestamp(),
        ))
    }

    /// Every line the plain reading takes, the grammar takes and reads the same; and the lines
    /// an agent writes are plain.
    #[test]
    fn a_plain_line_is_read_as_the_grammar_reads_it() {
        let lines = [
            "disk,host=node001,device=sda,name=sda,kind=disk,rotational=1 r_per_s=12.5,w_per_s=30.25,rkb_per_s=1024.5,saturated_s=2i 1733400000000000000",
            "cpu,host=a iowait_pct=0.1,user_pct=99.99999999999999,x=123456789012345678 -5",
            "m v=-0,w=-0.0,x=007,y=1.000,z=0.1 0",
            "m v=t,w=T,x=true,y=True,z=TRUE,a=f,b=F,c=false,d=False,e=FALSE",
            "m v=-9223372036854775808i,w=9223372036854775807i 9223372036854775807",
            "m v=123456789012345.6,w=1234567890123456,x=0.30000000000000004",
            "m,time=1,_field=x v=1",
            "m,host=é v=1",
            // refused by the plain reading, read by the grammar
            "m v=1u",
            "m v=1e3",
            "m v=.5",
            "m v=5.",
            "m v=\"s\"",
            "m\\ x v=1",
            "m v=1  2",
            "m v=1 2 ",
            " m v=1",
            "m\tx v=1",
            "m v=9223372036854775808i",
            "m v=1 9223372036854775808",
            "m,a=1,a=2 v=1",
            "m,a=b=c v=1",
            "m=x v=1",
            "m, v=1",
            "m v=1,,w=2",
            "m v=tru",
            "m v=--1",
            "m v=-",
            "m v=1 +5",
            "m",
        ];
        let mut plain = 0;
        for line in lines {
            let p = by_plain(line);
            if p.is_some() {
                plain += 1;
                assert_eq!(p, by_grammar(line), "{line}");
            }
        }
        assert_eq!(plain, 8);
        // numbers around the fast path's edges, and random ones, both ways
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..20_000u64 {
            let v = match i % 4 {
                0 => format!("{}", rng.f64() * 10f64.powi(rng.i32(-5..20))),
                1 => {
                    let whole = 10u64.pow(rng.u32(0..16));
                    format!("{}.{}", rng.u64(0..whole), rng.u32(0..1_000_000))
                }
                2 => format!("-{}", rng.u64(..)),
                _ => format!("{}i", rng.i64(..)),
            };
            let line = format!("m,h=x v={v} 1");
            assert_eq!(by_plain(&line), by_grammar(&line), "{line}");
        }
    }
}
