//! What line protocol allows, in one place: the InfluxDB versions and how each answers a write,
//! the characters each part of a line escapes, reserved names, the key limit, and how the
//! builder makes a value representable the same way for every version.
//!
//! The builder ([`super::build`]) writes with these rules and the validator ([`super::check`])
//! reads with them, so what one writes the other accepts.
//!
//! ## Writing a name or value every version reads alike
//!
//! The versions agree on `\,` `\=` `\ ` (and `\"` inside strings) but not on other backslashes:
//! 1.x and 2.x keep `\\` in a tag as two backslashes, 3.x reads one; 1.x unescapes `\"` and `\=`
//! in a measurement name, 3.x keeps them. So the builder escapes the separators, writes any other
//! backslash as it is, and drops a backslash that would be read differently: one before another
//! backslash, before `,` `=` space or `"`, or at the end.

use std::borrow::Cow;

/// The InfluxDB version whose rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// InfluxDB 1.x (1.6 as packaged in Debian): the Go parser of `models/points.go` and the
    /// 1.x storage engine.
    V1,
    /// InfluxDB 2.x: the same parser with unsigned integers, and the same storage engine.
    V2,
    /// InfluxDB 3: the Rust `influxdb-line-protocol` parser and a per-table schema.
    V3,
}

impl Backend {
    /// Every version, oldest first.
    pub const ALL: [Backend; 3] = [Backend::V1, Backend::V2, Backend::V3];

    /// "1.x", "2.x" or "3.x", for messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::V1 => "1.x",
            Backend::V2 => "2.x",
            Backend::V3 => "3.x",
        }
    }

    /// Whether `1u` is a value (an unsigned integer) or a syntax error.
    pub fn accepts_unsigned(self) -> bool {
        self != Backend::V1
    }

    /// Whether one line that does not parse refuses the whole body (2.x), rather than only
    /// itself (1.x, 3.x: a partial write).
    pub fn syntax_error_refuses_body(self) -> bool {
        self == Backend::V2
    }

    /// The status of a write where some lines were dropped for what they hold rather than how
    /// they are written (a field type conflict, a `time` key): 422 on 2.x, 400 elsewhere.
    pub fn partial_write_status(self) -> u16 {
        match self {
            Backend::V2 => 422,
            Backend::V1 | Backend::V3 => 400,
        }
    }

    /// Whether the key length limit ([`MAX_KEY_BYTES`]) applies.
    pub fn limits_key_length(self) -> bool {
        self != Backend::V3
    }
}

/// The versions of every output a write goes to. A line is accepted only when every one of them
/// would accept it; the answer follows the strictest (2.x refuses a whole body for one line that
/// does not parse, and answers 422 to a partial write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backends(u8);

impl Backends {
    /// A set of versions (an empty list means 1.x).
    pub fn of(list: &[Backend]) -> Backends {
        let bits = list.iter().fold(0u8, |acc, b| acc | Self::bit(*b));
        Backends(if bits == 0 {
            Self::bit(Backend::V1)
        } else {
            bits
        })
    }

    /// One version.
    pub fn one(b: Backend) -> Backends {
        Backends(Self::bit(b))
    }

    fn bit(b: Backend) -> u8 {
        match b {
            Backend::V1 => 1,
            Backend::V2 => 2,
            Backend::V3 => 4,
        }
    }

    /// The versions, oldest first.
    pub fn iter(self) -> impl Iterator<Item = Backend> {
        Backend::ALL
            .into_iter()
            .filter(move |b| self.0 & Self::bit(*b) != 0)
    }

    pub fn contains(self, b: Backend) -> bool {
        self.0 & Self::bit(b) != 0
    }

    /// See [`Backend::syntax_error_refuses_body`]: true when any version does.
    pub fn syntax_error_refuses_body(self) -> bool {
        self.iter().any(Backend::syntax_error_refuses_body)
    }

    /// See [`Backend::partial_write_status`]: the strictest.
    pub fn partial_write_status(self) -> u16 {
        self.iter()
            .map(Backend::partial_write_status)
            .max()
            .unwrap_or(400)
    }

    /// "1.x", "1.x and 3.x", for messages.
    pub fn names(self) -> String {
        self.iter()
            .map(Backend::name)
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

/// Largest series key (measurement and tags as written, plus the 4-byte separator and the field
/// key) InfluxDB 1.x and 2.x store.
pub const MAX_KEY_BYTES: usize = 65_535;

/// The name no tag or field may have: it is the timestamp's. 1.x and 2.x drop such a tag (and
/// the point with it) and such a field; 3.x refuses the line.
pub const RESERVED_KEY: &str = "time";

/// Characters escaped with a backslash in a measurement name.
pub const MEASUREMENT_SPECIAL: &[u8] = b", ";
/// Characters escaped with a backslash in tag keys, tag values and field keys.
pub const KEY_SPECIAL: &[u8] = b",= ";
/// Characters escaped with a backslash inside a string field value (and the backslash itself).
pub const STRING_SPECIAL: &[u8] = b"\"\\";

/// Characters a literal backslash must not stand before in a name or tag value: every version
/// would read the pair differently (see the module documentation).
const BACKSLASH_AMBIGUOUS_BEFORE: &[u8] = b"\\,= \"";

/// Bytes that need neither escaping nor cleaning anywhere in a line: printable ASCII other than
/// space, `,`, `=`, `"` and `\`.
pub(super) const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = !matches!(b as u8, b',' | b'=' | b'"' | b'\\');
        b += 1;
    }
    t
};

/// Whether `s` can be written as it is in any position of a line (what nearly every name and tag
/// value the agent writes is): one table lookup per byte, where the general checks below cost
/// tens of instructions per byte — they ran for each of the ~11,000 fields of a report.
pub fn is_plain(s: &str) -> bool {
    s.bytes().all(|b| PLAIN[usize::from(b)])
}

/// Appends a measurement name, tag key, tag value or field key (already cleaned), putting a
/// backslash before each byte of `special` (a backslash itself only where `special` holds it).
pub fn escape_name_into(buf: &mut Vec<u8>, s: &str, special: &[u8]) {
    if is_plain(s) || !s.bytes().any(|b| special.contains(&b)) {
        buf.extend_from_slice(s.as_bytes());
        return;
    }
    for b in s.bytes() {
        if special.contains(&b) {
            buf.push(b'\\');
        }
        buf.push(b);
    }
}

/// Appends the inside of a string field value, with `"` and `\` escaped.
pub fn escape_string_into(buf: &mut Vec<u8>, s: &str) {
    escape_name_into(buf, s, STRING_SPECIAL);
}

fn needs_cleaning(v: &str) -> bool {
    let b = v.as_bytes();
    v.chars().any(char::is_control)
        || b.iter().enumerate().any(|(i, c)| {
            *c == b'\\'
                && b.get(i + 1)
                    .is_none_or(|n| BACKSLASH_AMBIGUOUS_BEFORE.contains(n))
        })
}

/// Control characters become spaces; a backslash every version would not read alike is dropped.
fn clean(v: &str) -> String {
    let chars: Vec<char> = v
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = String::with_capacity(v.len());
    for (i, c) in chars.iter().enumerate() {
        if *c == '\\' {
            let next = chars.get(i + 1);
            if next.is_none_or(|n| n.is_ascii() && BACKSLASH_AMBIGUOUS_BEFORE.contains(&(*n as u8)))
            {
                continue;
            }
        }
        out.push(*c);
    }
    out
}

/// A tag value made representable: control characters become spaces (a newline would start a
/// second line), ambiguous backslashes are dropped, surrounding space is trimmed. An empty result
/// means "no tag": InfluxDB stores a missing tag and an empty one alike, and refuses an empty
/// value written out.
pub fn clean_tag_value(v: &str) -> Cow<'_, str> {
    if is_plain(v) || (!needs_cleaning(v) && v.trim() == v) {
        return Cow::Borrowed(v);
    }
    // Trimming can leave a backslash at the end: clean until nothing changes.
    let mut s = clean(v.trim()).trim().to_owned();
    while needs_cleaning(&s) {
        s = clean(&s).trim().to_owned();
    }
    Cow::Owned(s)
}

/// A measurement name, tag key or field key made representable: control characters become
/// spaces and ambiguous backslashes are dropped. An empty result cannot be written (the builder
/// skips that tag or field, or the whole line for a measurement).
pub fn clean_name(v: &str) -> Cow<'_, str> {
    if is_plain(v) || !needs_cleaning(v) {
        return Cow::Borrowed(v);
    }
    let mut s = clean(v);
    while needs_cleaning(&s) {
        s = clean(&s);
    }
    Cow::Owned(s)
}

/// Whether a (cleaned) measurement name can start a line: not empty, and not starting with `#`,
/// which makes the line a comment.
pub fn measurement_is_writable(m: &str) -> bool {
    !m.is_empty() && !m.starts_with('#')
}

/// Whether a (cleaned) tag or field key can be written: not empty and not [`RESERVED_KEY`].
pub fn key_is_writable(k: &str) -> bool {
    !k.is_empty() && k != RESERVED_KEY
}

/// A string field value made representable: control characters become spaces (a newline would
/// end the line for a reader that does not track quotes).
pub fn clean_string(v: &str) -> Cow<'_, str> {
    if v.chars().any(char::is_control) {
        Cow::Owned(
            v.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(v)
    }
}

/// Whether a float can be written: no InfluxDB version stores NaN or ±inf.
pub fn float_is_storable(f: f64) -> bool {
    f.is_finite()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning() {
        assert_eq!(clean_tag_value("  a\nb  "), "a b");
        assert_eq!(clean_tag_value("ab\\"), "ab");
        assert_eq!(clean_tag_value("\\ \\"), "");
        assert_eq!(clean_tag_value("a\\b"), "a\\b");
        assert_eq!(clean_tag_value("a\\\\b"), "a\\b");
        assert_eq!(clean_tag_value("a\\,b"), "a,b");
        assert_eq!(clean_name("x\\\"y"), "x\"y");
        assert_eq!(clean_name("disk"), "disk");
        assert!(matches!(clean_name("disk"), Cow::Borrowed(_)));
        assert!(!key_is_writable("time"));
    }

    #[test]
    fn plain_text_is_exactly_what_no_check_would_change() {
        // Every byte alone and inside a name: the fast path agrees with the general rules.
        for b in 0u8..=255 {
            let Ok(s) = std::str::from_utf8(std::slice::from_ref(&b)).map(|c| format!("a{c}b"))
            else {
                continue;
            };
            let general = !needs_cleaning(&s)
                && s.trim() == s
                && ![MEASUREMENT_SPECIAL, KEY_SPECIAL, STRING_SPECIAL]
                    .iter()
                    .any(|sp| s.bytes().any(|x| sp.contains(&x)));
            let plain = is_plain(&s);
            assert!(!plain || general, "{b:#x} is plain but needs work");
            if b.is_ascii_graphic() {
                assert_eq!(plain, general, "{b:#x}");
            }
        }
        assert!(!is_plain("é"), "non-ASCII takes the general path");
        assert!(is_plain("read_iops_p95"));
        let mut buf = Vec::new();
        escape_name_into(&mut buf, "a b,c", KEY_SPECIAL);
        assert_eq!(buf, b"a\\ b\\,c");
    }

    #[test]
    fn strictest_of_several_versions() {
        let b = Backends::of(&[Backend::V3, Backend::V1]);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![Backend::V1, Backend::V3]);
        assert!(!b.syntax_error_refuses_body());
        assert_eq!(b.partial_write_status(), 400);
        let b = Backends::of(&[Backend::V1, Backend::V2]);
        assert!(b.syntax_error_refuses_body());
        assert_eq!(b.partial_write_status(), 422);
        assert_eq!(b.names(), "1.x and 2.x");
        assert_eq!(Backends::of(&[]), Backends::one(Backend::V1));
    }
}
