//! The line grammar of InfluxDB 1.x and 2.x, read the way their Go parser reads it
//! (`models/points.go`: `scanLine`, `scanKey`, `scanTags`, `scanFields`, `scanNumber`,
//! `scanBoolean`, `scanTime`), with its error messages, so that a line is refused here exactly
//! when influxd refuses it and for the same reason.
//!
//! The Go parser works on bytes and looks one byte back for escapes (`buf[i-1] != '\\'`), which
//! gives it some rules no grammar states: a backslash before a separator always escapes it, even
//! when that backslash is itself escaped; escape sequences other than `\,` `\=` `\ ` (`\"` in
//! names) keep their backslash; a tab is an ordinary character inside a name. These are kept.
//!
//! The scanners only find where things are; turning the pieces into values (unescaping, number
//! parsing) is [`super::parse`]'s job.

/// Largest key (measurement and tags as written, plus 4 and the field key) InfluxDB 1.x/2.x
/// stores.
const MAX_KEY_LENGTH: usize = super::rules::MAX_KEY_BYTES;

/// Where the parts of a line are, as byte ranges of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spans {
    /// Measurement and tags as written (`cpu,host=a`).
    pub key: (usize, usize),
    /// Where the first tag starts (`host=a`), or the end of the key when there is none.
    pub tags: usize,
    /// The field set as written (`a=1,b="x"`).
    pub fields: (usize, usize),
    /// The timestamp as written, if any.
    pub timestamp: Option<(usize, usize)>,
}

/// A line the grammar refuses, with influxd's words.
pub(crate) type ScanError = String;

fn at(buf: &[u8], i: usize) -> u8 {
    buf.get(i).copied().unwrap_or(0)
}

/// Byte before `i` (0 when there is none).
fn before(buf: &[u8], i: usize) -> u8 {
    i.checked_sub(1).map_or(0, |j| at(buf, j))
}

/// Spaces, tabs and NULs, as the Go parser skips them.
pub(crate) fn skip_whitespace(buf: &[u8], mut i: usize) -> usize {
    while i < buf.len() && matches!(buf[i], b' ' | b'\t' | 0) {
        i += 1;
    }
    i
}

/// Scans one line (without its newline, leading whitespace already skipped).
pub(crate) fn scan(buf: &[u8], unsigned: bool) -> Result<Spans, ScanError> {
    let (pos, key, tags) = scan_key(buf)?;
    if key.1 == key.0 {
        return Err("missing measurement".into());
    }
    let key_len = key.1 - key.0;
    if key_len > MAX_KEY_LENGTH {
        return Err(format!(
            "max key length exceeded: {key_len} > {MAX_KEY_LENGTH}"
        ));
    }
    let (pos, fields) = scan_fields(buf, pos, unsigned)?;
    if fields.0 == fields.1 {
        return Err("missing fields".into());
    }
    // No field key is longer than the field set: most lines need no look at each.
    if key_len + 4 + (fields.1 - fields.0) > MAX_KEY_LENGTH {
        for (k, _) in walk_fields(buf, fields) {
            let size = key_len + 4 + (k.1 - k.0);
            if size > MAX_KEY_LENGTH {
                return Err(format!(
                    "max key length exceeded: {size} > {MAX_KEY_LENGTH}"
                ));
            }
        }
    }
    let (pos, ts) = scan_time(buf, pos)?;
    let timestamp = if ts.0 == ts.1 {
        None
    } else {
        // Only spaces may follow a timestamp.
        if buf
            .get(pos..)
            .is_some_and(|rest| rest.iter().any(|b| *b != b' '))
        {
            return Err("point is invalid".into());
        }
        Some(ts)
    };
    Ok(Spans {
        key,
        tags,
        fields,
        timestamp,
    })
}

/// A byte range of the line.
type Range = (usize, usize);

impl Spans {
    /// Where each tag starts within the line, in written order: the scanner's tags, found again
    /// (a tag ends at the first comma without a backslash before it after its '=').
    pub(crate) fn tag_starts<'b>(&self, buf: &'b [u8]) -> impl Iterator<Item = usize> + 'b {
        tag_starts(buf, self.tags, self.key.1)
    }
}

/// Where each tag of the tag section `[start, end)` starts.
pub(crate) fn tag_starts(buf: &[u8], start: usize, end: usize) -> impl Iterator<Item = usize> + '_ {
    let end = end.min(buf.len());
    let key = &buf[..end];
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let t = at;
        let mut i = scan_to(key, t, b'=') + 1;
        while i < end && !(key[i] == b',' && key[i - 1] != b'\\') {
            i += 1;
        }
        at = i + 1;
        Some(t)
    })
}

/// Tags whose keys are compared pairwise, without allocating; a line with more (none that
/// storwatch writes) sorts them.
const FEW_TAGS: usize = 32;

/// Measurement and tags: returns the position after them, their range, and where the first
/// tag starts. Refuses duplicate tag keys (compared as written).
fn scan_key(buf: &[u8]) -> Result<(usize, Range, usize), ScanError> {
    let start = skip_whitespace(buf, 0);
    let (state, mut i) = scan_measurement(buf, start)?;
    if state != State::TagKey {
        return Ok((i, (start, i), i));
    }
    let tags = i;
    let mut few = [(0usize, 0usize); FEW_TAGS];
    let mut n = 0;
    let mut many: Vec<&[u8]> = Vec::new();
    i = scan_tags(buf, i, |t, k_end| {
        // Tag keys as written, up to their unescaped '='.
        let key = buf.get(t..k_end).unwrap_or_default();
        if n < FEW_TAGS {
            let dup = few[..n].iter().any(|&(a, b)| buf.get(a..b) == Some(key));
            few[n] = (t, k_end);
            n += 1;
            return dup;
        }
        if many.is_empty() {
            many.extend(few.iter().map(|&(a, b)| buf.get(a..b).unwrap_or_default()));
        }
        many.push(key);
        false
    })?;
    if !many.is_empty() {
        many.sort_unstable();
        if many.windows(2).any(|w| w[0] == w[1]) {
            return Err("duplicate tags".into());
        }
    }
    Ok((i, (start, i), tags))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    TagKey,
    TagValue,
    Fields,
}

fn scan_measurement(buf: &[u8], mut i: usize) -> Result<(State, usize), ScanError> {
    if i >= buf.len() || buf[i] == b',' {
        return Err("missing measurement".into());
    }
    loop {
        i += 1;
        if i >= buf.len() {
            return Err("missing fields".into());
        }
        if buf[i - 1] == b'\\' {
            continue;
        }
        match buf[i] {
            b',' => return Ok((State::TagKey, i + 1)),
            b' ' => return Ok((State::Fields, i)),
            _ => {}
        }
    }
}

/// The tags from `i`; `seen(start, key_end)` is told of each tag as it is found and answers
/// whether its key was seen before (a duplicate, refused once the tags scan whole).
fn scan_tags(
    buf: &[u8],
    mut i: usize,
    mut seen: impl FnMut(usize, usize) -> bool,
) -> Result<usize, ScanError> {
    let mut state = State::TagKey;
    let mut duplicate = false;
    loop {
        match state {
            State::TagKey => {
                let t = i;
                i = scan_tag_key(buf, i)?;
                // `i` is past the key's '='
                duplicate |= seen(t, i - 1);
                state = State::TagValue;
            }
            State::TagValue => {
                (state, i) = scan_tag_value(buf, i)?;
            }
            State::Fields if duplicate => return Err("duplicate tags".into()),
            State::Fields => return Ok(i),
        }
    }
}

fn scan_tag_key(buf: &[u8], mut i: usize) -> Result<usize, ScanError> {
    if i >= buf.len() || matches!(buf[i], b' ' | b',' | b'=') {
        return Err("missing tag key".into());
    }
    loop {
        i += 1;
        if i >= buf.len() || (matches!(buf[i], b' ' | b',') && buf[i - 1] != b'\\') {
            return Err("missing tag value".into());
        }
        if buf[i] == b'=' && buf[i - 1] != b'\\' {
            return Ok(i + 1);
        }
    }
}

fn scan_tag_value(buf: &[u8], mut i: usize) -> Result<(State, usize), ScanError> {
    if i >= buf.len() || matches!(buf[i], b',' | b' ') {
        return Err("missing tag value".into());
    }
    loop {
        i += 1;
        if i >= buf.len() {
            return Err("missing fields".into());
        }
        let escaped = buf[i - 1] == b'\\';
        match buf[i] {
            b'=' if !escaped => return Err("invalid tag format".into()),
            b',' if !escaped => return Ok((State::TagKey, i + 1)),
            b' ' if !escaped => return Ok((State::Fields, i)),
            _ => {}
        }
    }
}

/// The position of the first `stop` at or after `i` not preceded by a backslash (or the end).
pub(crate) fn scan_to(buf: &[u8], mut i: usize, stop: u8) -> usize {
    let start = i;
    while i < buf.len() {
        if buf[i] == stop && (i == start || buf[i - 1] != b'\\') {
            break;
        }
        i += 1;
    }
    i
}

fn scan_fields(buf: &[u8], i: usize, unsigned: bool) -> Result<(usize, (usize, usize)), ScanError> {
    let start = skip_whitespace(buf, i);
    let mut i = start;
    let mut quoted = false;
    let (mut equals, mut commas) = (0u32, 0u32);
    while i < buf.len() {
        if buf[i] == b'\\' && i + 1 < buf.len() {
            i += 2;
            continue;
        }
        if buf[i] == b'"' && equals > commas {
            quoted = !quoted;
            i += 1;
            continue;
        }
        if buf[i] == b'=' && !quoted {
            equals += 1;
            let (b1, b2) = (before(buf, i), before(buf, i.saturating_sub(1)));
            // "... =123" and "a=1,=2", but not "a\ =123" or "a\,=2"
            if (b1 == b' ' || b1 == b',') && b2 != b'\\' {
                return Err("missing field key".into());
            }
            if i + 1 >= buf.len() || matches!(buf[i + 1], b',' | b' ') {
                return Err("missing field value".into());
            }
            let next = buf[i + 1];
            if next.is_ascii_digit() || matches!(next, b'.' | b'-' | b'N' | b'n') {
                i = scan_number(buf, i + 1, unsigned)?;
                continue;
            }
            if next != b'"' {
                i = scan_boolean(buf, i + 1)?;
                continue;
            }
        }
        if buf[i] == b',' && !quoted {
            commas += 1;
        }
        if buf[i] == b' ' && !quoted {
            break;
        }
        i += 1;
    }
    if quoted {
        return Err("unbalanced quotes".into());
    }
    if equals == 0 || commas + 1 != equals {
        return Err("invalid field format".into());
    }
    Ok((i, (start, i)))
}

fn is_numeric(b: u8) -> bool {
    b.is_ascii_digit() || b == b'.'
}

const INVALID_NUMBER: &str = "invalid number";

/// A number field value starting at `i`: returns where it ends.
fn scan_number(buf: &[u8], mut i: usize, unsigned: bool) -> Result<usize, ScanError> {
    let start = i;
    let (mut is_int, mut is_unsigned) = (false, false);
    if at(buf, i) == b'-' {
        i += 1;
        if i == buf.len() {
            return Err(INVALID_NUMBER.into());
        }
    }
    let (mut decimal, mut scientific) = (false, false);
    while i < buf.len() {
        let b = buf[i];
        if b == b',' || b == b' ' {
            break;
        }
        if b == b'i' && i > start && !(is_int || is_unsigned) {
            is_int = true;
            i += 1;
            continue;
        } else if b == b'u' && i > start && !(is_int || is_unsigned) {
            is_unsigned = true;
            i += 1;
            continue;
        }
        if b == b'.' {
            if decimal {
                return Err(INVALID_NUMBER.into());
            }
            decimal = true;
        }
        if i > start && (b == b'e' || b == b'E') {
            scientific = true;
            i += 1;
            continue;
        }
        if (b == b'+' || b == b'-') && matches!(buf[i - 1], b'e' | b'E') {
            i += 1;
            continue;
        }
        if i + 2 < buf.len() && (b == b'N' || b == b'n') {
            return Err(INVALID_NUMBER.into());
        }
        if !is_numeric(b) {
            return Err(INVALID_NUMBER.into());
        }
        i += 1;
    }
    if (is_int || is_unsigned) && (decimal || scientific) {
        return Err(INVALID_NUMBER.into());
    }
    // The Go parser discounts the 'i', the '.' and the '-', but not a 'u'.
    let digits =
        i - start - usize::from(is_int) - usize::from(decimal) - usize::from(buf[start] == b'-');
    if digits == 0 {
        return Err(INVALID_NUMBER.into());
    }
    let text = std::str::from_utf8(&buf[start..i]).unwrap_or("");
    if is_int {
        if buf[i - 1] != b'i' {
            return Err(INVALID_NUMBER.into());
        }
        let n = &text[..text.len() - 1];
        // Like the Go parser, only numbers long enough to overflow are parsed here.
        if n.len() >= 19 {
            if let Err(e) = go_parse_int(n) {
                return Err(format!("unable to parse integer {n}: {e}"));
            }
        }
    } else if is_unsigned {
        if !unsigned || buf[i - 1] != b'u' || buf[start] == b'-' {
            return Err(INVALID_NUMBER.into());
        }
        let n = &text[..text.len() - 1];
        if n.len() >= 20 {
            if let Err(e) = go_parse_uint(n) {
                return Err(format!("unable to parse unsigned {n}: {e}"));
            }
        }
    } else if (scientific || text.len() >= 25) && go_parse_float(text).is_err() {
        return Err("invalid float".into());
    }
    Ok(i)
}

fn scan_boolean(buf: &[u8], mut i: usize) -> Result<usize, ScanError> {
    let start = i;
    if i < buf.len() && !matches!(buf[i], b't' | b'f' | b'T' | b'F') {
        return Err("invalid boolean".into());
    }
    i += 1;
    while i < buf.len() && buf[i] != b',' && buf[i] != b' ' {
        i += 1;
    }
    let word = buf.get(start..i).unwrap_or_default();
    if word.len() == 1 {
        return Ok(i);
    }
    let valid = matches!(
        word,
        b"true" | b"True" | b"TRUE" | b"false" | b"False" | b"FALSE"
    );
    if valid {
        Ok(i)
    } else {
        Err("invalid boolean".into())
    }
}

/// The timestamp after the fields: digits with an optional leading '-'.
fn scan_time(buf: &[u8], i: usize) -> Result<(usize, (usize, usize)), ScanError> {
    let start = skip_whitespace(buf, i);
    let mut i = start;
    while i < buf.len() {
        let b = buf[i];
        if b == b'\n' || b == b' ' {
            break;
        }
        if i == start && b == b'-' {
            i += 1;
            continue;
        }
        if !b.is_ascii_digit() {
            return Err("bad timestamp".into());
        }
        i += 1;
    }
    Ok((i, (start, i)))
}

/// The fields of a field set as (key, value) byte ranges, split as the Go field iterator splits
/// them.
pub(crate) fn walk_fields(
    buf: &[u8],
    (start, end): (usize, usize),
) -> impl Iterator<Item = ((usize, usize), (usize, usize))> + '_ {
    let mut i = start;
    std::iter::from_fn(move || {
        if i >= end {
            return None;
        }
        let k_end = scan_to(&buf[..end], i, b'=');
        let key = (i, k_end);
        let v_start = (k_end + 1).min(end);
        let v_end = scan_field_value(&buf[..end], v_start);
        i = v_end + 1;
        Some((key, (v_start, v_end)))
    })
}

/// The end of a field value: the first ',' outside quotes (`\"` and `\\` escaped).
fn scan_field_value(buf: &[u8], mut i: usize) -> usize {
    let mut quoted = false;
    while i < buf.len() {
        if buf[i] == b'\\' && matches!(buf.get(i + 1), Some(b'"' | b'\\')) {
            i += 2;
            continue;
        }
        if buf[i] == b'"' {
            i += 1;
            quoted = !quoted;
            continue;
        }
        if buf[i] == b',' && !quoted {
            break;
        }
        i += 1;
    }
    i
}

/// Go's `strconv.ParseInt(s, 10, 64)`, with its error text.
pub(crate) fn go_parse_int(s: &str) -> Result<i64, String> {
    go_int(s, "ParseInt", |d| {
        let (neg, digits) = match d.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, d.strip_prefix('+').unwrap_or(d)),
        };
        let mag: u64 = digits.parse().map_err(|_| IntError::Range)?;
        if neg {
            0i64.checked_sub_unsigned(mag).ok_or(IntError::Range)
        } else {
            i64::try_from(mag).map_err(|_| IntError::Range)
        }
    })
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its error text.
pub(crate) fn go_parse_uint(s: &str) -> Result<u64, String> {
    go_int(s, "ParseUint", |d| d.parse().map_err(|_| IntError::Range))
}

enum IntError {
    Range,
}

fn go_int<T>(
    s: &str,
    func: &str,
    parse: impl Fn(&str) -> Result<T, IntError>,
) -> Result<T, String> {
    let unsigned = func == "ParseUint";
    let body = if unsigned {
        s
    } else {
        s.strip_prefix(['-', '+']).unwrap_or(s)
    };
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.{func}: parsing {s:?}: invalid syntax"));
    }
    parse(s).map_err(|IntError::Range| format!("strconv.{func}: parsing {s:?}: value out of range"))
}

/// Go's `strconv.ParseFloat(s, 64)` for the characters a number field can hold (digits, one
/// '.', an exponent): out of range is an error, as in Go.
pub(crate) fn go_parse_float(s: &str) -> Result<f64, ()> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(f),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> String {
        scan(line.as_bytes(), false).expect_err(line)
    }

    #[test]
    fn spans_of_a_line() {
        let line = "cpu,host=a,region=b value=1,s=\"x y\" 42";
        let s = scan(line.as_bytes(), false).expect("parses");
        assert_eq!(&line[s.key.0..s.key.1], "cpu,host=a,region=b");
        assert_eq!(
            s.tag_starts(line.as_bytes()).collect::<Vec<_>>(),
            vec![4, 11]
        );
        assert_eq!(&line[s.fields.0..s.fields.1], "value=1,s=\"x y\"");
        let (a, b) = s.timestamp.expect("ts");
        assert_eq!(&line[a..b], "42");
        let s = scan(b"cpu v=1", false).expect("parses");
        assert_eq!(s.tag_starts(b"cpu v=1").count(), 0);
    }

    #[test]
    fn influxd_reasons() {
        assert_eq!(err("cpu"), "missing fields");
        assert_eq!(err(",cpu v=1"), "missing measurement");
        assert_eq!(err("cpu,=a v=1"), "missing tag key");
        assert_eq!(err("cpu,a v=1"), "missing tag value");
        assert_eq!(err("cpu,a= v=1"), "missing tag value");
        assert_eq!(err("cpu,a=b=c v=1"), "invalid tag format");
        assert_eq!(err("cpu,a=1,a=2 v=1"), "duplicate tags");
        assert_eq!(err("cpu,b=1,a=1,b=2 v=1"), "duplicate tags");
        assert_eq!(err("cpu v="), "missing field value");
        assert_eq!(err("cpu =1"), "missing field key");
        assert_eq!(err("cpu v=1,"), "invalid field format");
        assert_eq!(err("cpu v=\"x"), "unbalanced quotes");
        assert_eq!(err("cpu v=NaN"), "invalid number");
        assert_eq!(err("cpu v=Inf"), "invalid boolean");
        assert_eq!(err("cpu v=1u"), "invalid number");
        assert_eq!(err("cpu v=1e"), "invalid float");
        assert_eq!(err("cpu v=1 1.5"), "bad timestamp");
        assert_eq!(err("cpu v=1 1 x"), "point is invalid");
        assert_eq!(err("cpu v=tRUE"), "invalid boolean");
        assert_eq!(
            err("cpu v=9223372036854775808i"),
            "unable to parse integer 9223372036854775808: strconv.ParseInt: parsing \"9223372036854775808\": value out of range"
        );
        let long = format!("{} v=1", "m".repeat(65_532));
        assert_eq!(err(&long), "max key length exceeded: 65537 > 65535");
    }

    #[test]
    fn what_influxd_accepts() {
        for line in [
            "cpu v=.1",
            "cpu v=1.",
            "cpu v=-.1",
            "cpu v=1.e5",
            "cpu v=01",
            "cpu v=1E+2",
            "cpu,t=a\\\\b v=1",
            "cpu,a\\\\=b=1 v=1",
            "m=x v=1",
            "q\"x v=1",
            "cpu v=1  1",
            "cpu v=1 1  ",
            "cpu v=-9223372036854775808i",
            "cpu b=t,c=F,d=True,e=FALSE",
            "cpu s=\"a\nb\"",
        ] {
            assert!(scan(line.as_bytes(), false).is_ok(), "{line}");
        }
        assert!(scan(b"cpu v=1u", true).is_ok());
        assert!(scan(b"cpu v=-1u", true).is_err());
        let at_limit = format!("{} v=1", "m".repeat(65_530));
        assert!(scan(at_limit.as_bytes(), false).is_ok());
    }

    #[test]
    fn go_number_parsing() {
        assert_eq!(go_parse_int("-9223372036854775808"), Ok(i64::MIN));
        assert!(go_parse_int("9223372036854775808").is_err());
        assert_eq!(
            go_parse_int("-"),
            Err("strconv.ParseInt: parsing \"-\": invalid syntax".to_string())
        );
        assert_eq!(go_parse_uint("18446744073709551615"), Ok(u64::MAX));
        assert!(go_parse_float("1e400").is_err());
        assert_eq!(go_parse_float("1."), Ok(1.0));
        assert_eq!(go_parse_float(".5"), Ok(0.5));
    }
}
