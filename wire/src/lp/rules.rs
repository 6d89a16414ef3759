//! What line protocol allows, in one place: the InfluxDB versions, which characters each part of
//! a line escapes, the size limit on keys, and how the builder makes a value representable.
//!
//! The builder ([`super::build`]) writes with these rules and the validator ([`super::check`])
//! reads with them, so what one writes the other accepts.

use std::borrow::Cow;

/// The InfluxDB version whose rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// InfluxDB 1.x (the Go parser of `models/points.go` and the 1.x storage engine).
    V1,
    /// InfluxDB 2.x.
    V2,
    /// InfluxDB 3 (the Rust `influxdb-line-protocol` parser).
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
}

/// Largest series key (measurement and tags as written, plus the 4-byte separator and the field
/// key) InfluxDB stores.
pub const MAX_KEY_BYTES: usize = 65_535;

/// Characters escaped with a backslash in a measurement name.
pub const MEASUREMENT_SPECIAL: &[u8] = b", ";
/// Characters escaped with a backslash in tag keys, tag values and field keys.
pub const KEY_SPECIAL: &[u8] = b",= ";
/// Characters escaped with a backslash inside a string field value.
pub const STRING_SPECIAL: &[u8] = b"\"";

/// Appends `s`, putting a backslash before a backslash or any byte of `special`.
pub fn escape_into(buf: &mut Vec<u8>, s: &str, special: &[u8]) {
    if !s.bytes().any(|b| b == b'\\' || special.contains(&b)) {
        buf.extend_from_slice(s.as_bytes());
        return;
    }
    for b in s.bytes() {
        if b == b'\\' || special.contains(&b) {
            buf.push(b'\\');
        }
        buf.push(b);
    }
}

/// A tag value made representable: control characters become spaces (a newline would start a
/// second line), surrounding space is trimmed and a trailing backslash dropped (it would escape
/// the separator after it). An empty result means "no tag": InfluxDB stores a missing tag and an
/// empty one alike, and refuses an empty value written out.
pub fn clean_tag_value(v: &str) -> Cow<'_, str> {
    let needs = v.chars().any(char::is_control) || v.ends_with('\\') || v.trim() != v;
    if !needs {
        return Cow::Borrowed(v);
    }
    let s: String = v
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut t = s.trim();
    while let Some(rest) = t.strip_suffix('\\') {
        t = rest.trim_end();
    }
    Cow::Owned(t.to_owned())
}

/// A measurement name, tag key or field key made representable: control characters become
/// spaces and a trailing backslash is dropped. An empty result cannot be written (the builder
/// skips that tag or field, or the whole line for a measurement).
pub fn clean_name(v: &str) -> Cow<'_, str> {
    if !v.chars().any(char::is_control) && !v.ends_with('\\') {
        return Cow::Borrowed(v);
    }
    let s: String = v
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Cow::Owned(s.trim_end_matches('\\').to_owned())
}

/// Whether a (cleaned) measurement name can start a line: not empty, and not starting with `#`,
/// which makes the line a comment.
pub fn measurement_is_writable(m: &str) -> bool {
    !m.is_empty() && !m.starts_with('#')
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
