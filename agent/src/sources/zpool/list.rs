//! `zpool list -Hp`: one tab-separated line per pool, no header.
//!
//! Columns by release (`zpool-list(8)`):
//!
//! | fields | release | columns |
//! |---|---|---|
//! | 11 | OpenZFS ≥ 0.8 | name size alloc free ckpoint expandsz frag cap dedup health altroot |
//! | 10 | ZoL 0.6.4 – 0.7 | name size alloc free expandsz frag cap dedup health altroot |
//! | 8 | older | name size alloc free cap dedup health altroot |
//!
//! With `-p` sizes are exact bytes, `frag` and `cap` bare integers (percent) and `dedup` a bare
//! ratio; without it they carry suffixes (`10.9T`, `27%`, `1.00x`), which are accepted too.
//! `-` means "not applicable" (no checkpoint, a pool that cannot be opened).
//!
//! Output captured without `-H` (as other tools and bug reports show it) is read too: the
//! `NAME SIZE …` header is skipped, and so are the rows `-v` adds under each pool — vdevs,
//! indented, and the unindented class rows (`logs`, `cache`, `spare`, `special`, `dedup`) whose
//! values are all `-` — since only pools are reported from here.

use super::parse_size;
use crate::sources::{ParseError, Rows};

/// One pool's line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolList {
    /// Pool name.
    pub name: String,
    /// Total capacity, bytes.
    pub size_bytes: Option<u64>,
    /// Allocated, bytes.
    pub alloc_bytes: Option<u64>,
    /// Free, bytes.
    pub free_bytes: Option<u64>,
    /// Space held by a checkpoint, bytes.
    pub checkpoint_bytes: Option<u64>,
    /// Space the pool could grow into (larger devices not yet expanded), bytes.
    pub expand_bytes: Option<u64>,
    /// Free-space fragmentation, percent.
    pub fragmentation_pct: Option<f64>,
    /// Allocated share of the size, percent (integer as the tool rounds it).
    pub capacity_pct: Option<f64>,
    /// Deduplication ratio.
    pub dedup_ratio: Option<f64>,
    /// Pool health.
    pub health: String,
    /// Alternate root, when the pool was imported with one.
    pub altroot: Option<String>,
}

/// Parses `zpool list -Hp` output; a line that does not fit is reported and the others kept.
pub fn parse(text: &str) -> Rows<PoolList> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim() == "no pools available" || not_a_pool(line) {
            continue;
        }
        match row(line) {
            Ok(r) => out.rows.push(r),
            Err(reason) => out.errors.push(ParseError::new(i + 1, line, reason)),
        }
    }
    out
}

/// The header, a `-v` vdev row (indented) or a `-v` class row (`logs  -  -  …`).
fn not_a_pool(line: &str) -> bool {
    let mut words = line.split_ascii_whitespace();
    let first = words.next().unwrap_or("");
    line.starts_with([' ', '\t'])
        || (first == "NAME" && words.next() == Some("SIZE"))
        || (matches!(
            first,
            "logs" | "cache" | "spare" | "spares" | "special" | "dedup"
        ) && words.all(|w| w == "-"))
}

fn row(line: &str) -> Result<PoolList, String> {
    // -H separates with one tab; fall back to runs of spaces for output captured without -H.
    let fields: Vec<&str> = if line.contains('\t') {
        line.split('\t').map(str::trim).collect()
    } else {
        line.split_ascii_whitespace().collect()
    };
    let (name, size, alloc, free, ckpoint, expandsz, frag, cap, dedup, health, altroot) =
        match fields.as_slice() {
            [n, s, a, f, c, e, fr, ca, d, h, al] => {
                (n, s, a, f, Some(c), Some(e), Some(fr), ca, d, h, al)
            }
            [n, s, a, f, e, fr, ca, d, h, al] => {
                (n, s, a, f, None, Some(e), Some(fr), ca, d, h, al)
            }
            [n, s, a, f, ca, d, h, al] => (n, s, a, f, None, None, None, ca, d, h, al),
            other => return Err(format!("{} fields, expected 8, 10 or 11", other.len())),
        };
    if name.is_empty() {
        return Err("empty pool name".into());
    }
    if health.is_empty() || !health.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("{health:?} is not a pool health"));
    }
    let size_field = |label: &str, v: &str| -> Result<Option<u64>, String> {
        if v == "-" {
            return Ok(None);
        }
        parse_size(v)
            .map(Some)
            .ok_or_else(|| format!("{label} {v:?} is not a size"))
    };
    let ratio = |label: &str, v: &str, suffix: char| -> Result<Option<f64>, String> {
        if v == "-" {
            return Ok(None);
        }
        let bare = v.strip_suffix(suffix).unwrap_or(v);
        if bare.is_empty() || !bare.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Err(format!("{label} {v:?} is not a number"));
        }
        bare.parse()
            .map(Some)
            .map_err(|_| format!("{label} {v:?} is not a number"))
    };
    Ok(PoolList {
        name: (*name).to_owned(),
        size_bytes: size_field("size", size)?,
        alloc_bytes: size_field("alloc", alloc)?,
        free_bytes: size_field("free", free)?,
        checkpoint_bytes: match ckpoint {
            Some(c) => size_field("ckpoint", c)?,
            None => None,
        },
        expand_bytes: match expandsz {
            Some(e) => size_field("expandsz", e)?,
            None => None,
        },
        fragmentation_pct: match frag {
            Some(f) => ratio("frag", f, '%')?,
            None => None,
        },
        capacity_pct: ratio("cap", cap, '%')?,
        dedup_ratio: ratio("dedup", dedup, 'x')?,
        health: (*health).to_owned(),
        altroot: (**altroot != *"-" && !altroot.is_empty()).then(|| (*altroot).to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_fixtures() {
        insta::glob!("../../../fixtures/zpool-list", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn bad_lines_are_reported_and_the_rest_kept() {
        let r = parse("tank\t100\t50\t50\t-\t-\t1\t50\t1.00\tONLINE\t-\nshort\t1\t2\nx\tlots\t50\t50\t-\t-\t1\t50\t1.00\tONLINE\t-\ny\t100\t50\t50\t-\t-\t1\t50\t1.00\tonline\t-\nz\t100\t50\t50\t-\t-\tfrag\t50\t1.00\tONLINE\t-\n");
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].alloc_bytes, Some(50));
        let lines: Vec<(usize, &str)> = r
            .errors
            .iter()
            .map(|e| (e.line, e.reason.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (2, "3 fields, expected 8, 10 or 11"),
                (3, "size \"lots\" is not a size"),
                (4, "\"online\" is not a pool health"),
                (5, "frag \"frag\" is not a number"),
            ]
        );
    }

    #[test]
    fn old_eight_column_format() {
        let r = parse("tank  1.81T  1.29T  532G  71%  1.00x  ONLINE  -\n");
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let t = &r.rows[0];
        assert_eq!(t.capacity_pct, Some(71.0));
        assert_eq!(t.fragmentation_pct, None);
        assert_eq!(t.free_bytes, Some(532 * 1024 * 1024 * 1024));
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_tabbed_lines(fields in proptest::collection::vec("[-0-9A-Za-z.%x]{0,8}", 0..13)) {
            let _ = parse(&fields.join("\t"));
        }
    }
}
