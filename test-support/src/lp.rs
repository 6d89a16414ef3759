//! Reading line protocol in tests: the fields of a line, without the parser of the code under
//! test.

use std::collections::BTreeMap;

/// Splits `s` at `sep` where it is neither escaped by a backslash nor inside a double-quoted
/// string.
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut escaped, mut quoted) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The fields of one line, by key, each value as written (`1.5`, `3i`, `"text"`, `true`).
pub fn fields(line: &str) -> BTreeMap<String, String> {
    let sections = split_unquoted(line, ' ');
    let set = sections
        .get(1)
        .unwrap_or_else(|| panic!("no field set in {line:?}"));
    split_unquoted(set, ',')
        .into_iter()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("field {kv:?} without '=' in {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Field `key` of `line`: an integer without its `i`, a string with its quotes; the test fails
/// when the line has no such field.
pub fn field(line: &str, key: &str) -> String {
    let v = fields(line)
        .remove(key)
        .unwrap_or_else(|| panic!("no field {key} in {line}"));
    match v.strip_suffix('i') {
        Some(n) if n.parse::<i64>().is_ok() => n.to_string(),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_quotes_escapes_and_integers() {
        let l = r#"md,host=a\ b,array=md0 state="re, cover=ing",degraded=1i,speed=1.5,ok=true 1700000000000000000"#;
        assert_eq!(field(l, "state"), "\"re, cover=ing\"");
        assert_eq!(field(l, "degraded"), "1");
        assert_eq!(field(l, "speed"), "1.5");
        assert_eq!(field(l, "ok"), "true");
        assert_eq!(fields(l).len(), 4);
    }
}
