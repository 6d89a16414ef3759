//! `io.stat` of a cgroup v2 directory: block I/O per device by the cgroup and its descendants.
//!
//! Kernel documentation: `Documentation/admin-guide/cgroup-v2.rst`, "IO Interface Files"; the
//! line is printed by `blkcg_print_one_stat()` in `block/blk-cgroup.c`. Nested-keyed: one line
//! per device, keyed by `MAJ:MIN`, not ordered:
//!
//! ```text
//! 8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0
//! 259:0 rbytes=4085926524416 wbytes=1036680064512 rios=185034771 wios=40358485 dbytes=1013982564352 dios=199959 cost.vrate=100.00 cost.usage=1532009788 cost.wait=1477289869 cost.indebt=0 cost.indelay=0
//! ```
//!
//! Bytes and I/O counts are cumulative. `dbytes`/`dios` (discards) came with 5.0; before, a line
//! ends after `wios`. A device appears only once the cgroup has done I/O on it, so a device
//! missing from one reading had zero counters then. The I/O controllers append their own keys:
//! io.cost (`cost.vrate=` on the top level, `cost.usage=`, and with `blkcg_debug_stats`
//! `cost.wait= cost.indebt= cost.indelay=`), io.latency (`depth= avg_lat= win=`) and the
//! debug `use_delay= delay_nsec=`. When the byte and I/O counters are all zero but a controller
//! has something to say, the line holds only the controller's keys (with two spaces after the
//! device). Those keys are kept as text in [`IoDevice::other`]: `cost.vrate` is a decimal, and
//! the set changes with the kernel.
//!
//! The file shows block devices only: reads from network filesystems (xrootd, NFS, CephFS)
//! are not here, and writes through the page cache are charged when written back.
//! One malformed line costs only that device ([`Rows`]).
//!
//! The per-job collector needs the six counters only: [`counters_into`] reads them from the
//! file's bytes into [`IoCounters`] (no controller keys kept, nothing allocated), and leaves a
//! file with any other line to [`parse_into`].

use super::super::Rows;
use super::{fields, parse_u64, ParseError};

mod shown;

/// One device line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IoDevice {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Bytes read.
    pub rbytes: Option<u64>,
    /// Bytes written.
    pub wbytes: Option<u64>,
    /// Read I/Os.
    pub rios: Option<u64>,
    /// Write I/Os.
    pub wios: Option<u64>,
    /// Bytes discarded (5.0+).
    pub dbytes: Option<u64>,
    /// Discard I/Os (5.0+).
    pub dios: Option<u64>,
    /// Controller keys (`cost.usage`, `avg_lat`, …) with their values as printed, in order.
    pub other: Vec<(String, String)>,
}

/// Splits `MAJ:MIN` into numbers.
fn device(field: &str) -> Option<(u32, u32)> {
    let (major, minor) = field.split_once(':')?;
    let major = u32::try_from(parse_u64(major)?).ok()?;
    let minor = u32::try_from(parse_u64(minor)?).ok()?;
    Some((major, minor))
}

/// Parses one line.
fn line(line: &str, line_no: usize) -> Result<IoDevice, ParseError> {
    let err = |why: std::fmt::Arguments<'_>| ParseError::new(line_no, line, why);
    let mut f = fields(line);
    let dev = f.next().unwrap_or_default();
    let (major, minor) =
        device(dev).ok_or_else(|| err(format_args!("{dev:?} is not a MAJ:MIN device")))?;
    let mut out = IoDevice {
        major,
        minor,
        ..IoDevice::default()
    };
    let mut any = false;
    for pair in f {
        any = true;
        let Some((key, value)) = pair.split_once('=') else {
            return Err(err(format_args!("{pair:?} is not key=value")));
        };
        let slot = match key {
            "rbytes" => &mut out.rbytes,
            "wbytes" => &mut out.wbytes,
            "rios" => &mut out.rios,
            "wios" => &mut out.wios,
            "dbytes" => &mut out.dbytes,
            "dios" => &mut out.dios,
            _ => {
                if key.is_empty() || value.is_empty() {
                    return Err(err(format_args!("{pair:?} is not key=value")));
                }
                out.other.push((key.to_owned(), value.to_owned()));
                continue;
            }
        };
        if slot.is_some() {
            return Err(err(format_args!("second {key}")));
        }
        *slot = Some(parse_u64(value).ok_or_else(|| {
            err(format_args!(
                "{key} ({value:?}) is not an unsigned 64-bit integer"
            ))
        })?);
    }
    if !any {
        return Err(err(format_args!("no key=value after the device")));
    }
    Ok(out)
}

/// Parses `io.stat`: the device lines that parse, and the ones that did not.
pub fn parse(text: &str) -> Rows<IoDevice> {
    let mut out = Rows::default();
    parse_into(text, &mut out);
    out
}

/// [`parse`] into `out`, its vectors cleared and reused: a reader of many files a report (the
/// per-job collector) allocates nothing for them once they have grown. A line as the kernel
/// prints it (`MAJ:MIN` and the six counters, single spaces) is read by a scan of bytes; any
/// other line (a controller's keys, a malformed one) by the field-by-field parser.
pub fn parse_into(text: &str, out: &mut Rows<IoDevice>) {
    out.rows.clear();
    out.errors.clear();
    if memchr::memchr(b'\r', text.as_bytes()).is_some() {
        // `lines()` ends a line at `\r\n` too: leave such a file to it.
        by_lines(text, out);
        return;
    }
    let mut start = 0;
    let mut no = 0;
    while start < text.len() {
        let end = text
            .as_bytes()
            .get(start..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(text.len(), |n| start + n);
        let l = text.get(start..end).unwrap_or_default();
        no += 1;
        start = end + 1;
        match fast_line(l) {
            Some(d) => out.rows.push(d),
            None if l.trim().is_empty() => {}
            None => match line(l, no) {
                Ok(d) => out.rows.push(d),
                Err(e) => out.errors.push(e),
            },
        }
    }
}

/// A line as the kernel prints it: `MAJ:MIN` then `key=digits` of the six counters, each once,
/// single spaces apart. `None` for anything else ([`line`] decides).
fn fast_line(l: &str) -> Option<IoDevice> {
    let mut c = IoCounters::default();
    // A line with controllers' keys is left to `line`, which keeps them.
    (scan(l.as_bytes(), &mut c) == Some(Tail::None)).then(|| IoDevice::from(&c))
}

/// [`fast_line`] into `out`, in place: `false` for a line not in the kernel's form, `out`
/// then partly written. The kernel's form is `blkcg_print_one_stat()`'s: `MAJ:MIN`, then
/// `rbytes= wbytes= rios= wios=` and (5.0+) `dbytes= dios=` in this order, single spaces apart,
/// then perhaps the controllers' `key=value` tokens (io.cost's `cost.usage=`, …), which are
/// skipped as [`line`] would keep them. Every byte of a line it accepts is printable ASCII.
/// Each key is compared whole at the place it must be: one comparison, no search.
fn scan_line(b: &[u8], out: &mut IoCounters) -> bool {
    scan(b, out).is_some()
}

/// What followed the counters of a line [`scan`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Nothing.
    None,
    /// The controllers' keys, skipped.
    Controllers,
}

fn scan(b: &[u8], out: &mut IoCounters) -> Option<Tail> {
    // One pass: each number is read up to the byte that must follow it.
    let (major, at) = number_until(b, 0, b':')?;
    let (minor, at) = number_until(b, at, b' ')?;
    out.major = u32::try_from(major).ok()?;
    out.minor = u32::try_from(minor).ok()?;
    let (rbytes, at) = counter(b, at, b"rbytes=")?;
    let (wbytes, at) = counter(b, at, b"wbytes=")?;
    let (rios, at) = counter(b, at, b"rios=")?;
    let (wios, at) = counter(b, at, b"wios=")?;
    out.values = [rbytes, wbytes, rios, wios, 0, 0];
    out.present = 0b1111;
    if at >= b.len() {
        return Some(Tail::None); // before 5.0: no discards
    }
    let (dbytes, at) = counter(b, at, b"dbytes=")?;
    let (dios, at) = counter(b, at, b"dios=")?;
    out.values = [rbytes, wbytes, rios, wios, dbytes, dios];
    out.present = 0b11_1111;
    if at >= b.len() {
        return Some(Tail::None);
    }
    // The controllers' keys: `key=value`, both not empty, printable ASCII, none of the six.
    for token in b.get(at..)?.split(|&c| c == b' ') {
        let eq = token.iter().position(|&c| c == b'=')?;
        if eq == 0 || eq + 1 >= token.len() || !token.iter().all(u8::is_ascii_graphic) {
            return None;
        }
        let key = token.get(..eq)?;
        if [
            &b"rbytes"[..],
            b"wbytes",
            b"rios",
            b"wios",
            b"dbytes",
            b"dios",
        ]
        .contains(&key)
        {
            return None;
        }
    }
    Some(Tail::Controllers)
}

/// `key` (with its `=`) at `at`, then its number up to the space after it or the end of the
/// line: the number and where the next key starts.
#[inline(always)]
fn counter<const N: usize>(b: &[u8], at: usize, key: &[u8; N]) -> Option<(u64, usize)> {
    let here: &[u8; N] = b.get(at..at.checked_add(N)?)?.try_into().ok()?;
    if here != key {
        return None;
    }
    number_until(b, at + N, b' ')
}

/// Index of `rbytes` in [`IoCounters`] ([`IoCounters::get`]).
pub const RBYTES: usize = 0;
/// Index of `wbytes`.
pub const WBYTES: usize = 1;
/// Index of `rios`.
pub const RIOS: usize = 2;
/// Index of `wios`.
pub const WIOS: usize = 3;
/// Index of `dbytes`.
pub const DBYTES: usize = 4;
/// Index of `dios`.
pub const DIOS: usize = 5;

/// The six counters of one device line without the controllers' keys: what a reader of rates
/// needs (the per-job collector), small and without an allocation, read from the file's bytes
/// where they lie ([`counters_into`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounters {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// `rbytes`, `wbytes`, `rios`, `wios`, `dbytes`, `dios` ([`RBYTES`] …), each valid where
    /// `present` has its bit.
    values: [u64; 6],
    present: u8,
}

impl IoCounters {
    /// The counter at index `i` ([`RBYTES`] … [`DIOS`]); `None` when the line did not have it.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u64> {
        if self.present & (1u8 << (i & 7)) != 0 {
            self.values.get(i).copied()
        } else {
            None
        }
    }
}

impl From<&IoDevice> for IoCounters {
    fn from(d: &IoDevice) -> Self {
        let mut c = IoCounters {
            major: d.major,
            minor: d.minor,
            ..IoCounters::default()
        };
        for (i, v) in [d.rbytes, d.wbytes, d.rios, d.wios, d.dbytes, d.dios]
            .into_iter()
            .enumerate()
        {
            if let (Some(v), Some(slot)) = (v, c.values.get_mut(i)) {
                *slot = v;
                c.present |= 1 << i;
            }
        }
        c
    }
}

impl From<&IoCounters> for IoDevice {
    fn from(c: &IoCounters) -> Self {
        IoDevice {
            major: c.major,
            minor: c.minor,
            rbytes: c.get(RBYTES),
            wbytes: c.get(WBYTES),
            rios: c.get(RIOS),
            wios: c.get(WIOS),
            dbytes: c.get(DBYTES),
            dios: c.get(DIOS),
            other: Vec::new(),
        }
    }
}

/// `io.stat`'s bytes as [`parse_into`] reads its text, the counters only, into `out` (cleared
/// and reused) and the lines that did not parse into `errors`: a file exactly as
/// `blkcg_print_one_stat()` prints it by one pass over its layout (`shown.rs`); else every line
/// in the kernel's form (the six counters, perhaps the controllers' keys after them) is read
/// where it lies, in place in `out`, with no UTF-8 check (such a line is ASCII); a file with any
/// other line (a malformed one, a blank one) is read again as text by [`parse_into`]. `Err`
/// when that text is not UTF-8, as a reader of a `String` would say.
pub fn counters_into(
    b: &[u8],
    out: &mut Vec<IoCounters>,
    errors: &mut Vec<ParseError>,
) -> Result<(), std::str::Utf8Error> {
    out.clear();
    errors.clear();
    if shown::shown_into(b, out) {
        return Ok(());
    }
    out.clear();
    let mut start = 0;
    while start < b.len() {
        let rest = b.get(start..).unwrap_or_default();
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        out.push(IoCounters::default());
        let ok = match (out.last_mut(), rest.get(..len)) {
            (Some(c), Some(line)) => scan_line(line, c),
            _ => false,
        };
        if !ok {
            out.clear();
            let mut rows = Rows::default();
            parse_into(std::str::from_utf8(b)?, &mut rows);
            out.extend(rows.rows.iter().map(IoCounters::from));
            *errors = rows.errors;
            return Ok(());
        }
        start += len + 1;
    }
    Ok(())
}

/// The digits of `b` from `at` up to `stop` (or the end, when `stop` is a space: the last value
/// of the line), and where the next field starts. `None` for no digit, a byte that is neither,
/// an overflow, or a `stop` at the very end (a trailing blank).
fn number_until(b: &[u8], at: usize, stop: u8) -> Option<(u64, usize)> {
    let run = b.get(at..)?;
    // Up to 19 digits a u64 holds whatever they are: no overflow check per digit (~9
    // instructions a digit with the checks, ~5 without; 80 digits a job's file). A longer run
    // (leading zeros, or an overflow) is read again with the checks.
    let mut v: u64 = 0;
    let mut n = 0;
    while let Some(&c) = run.get(n) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        n += 1;
    }
    if n == 0 {
        return None;
    }
    if n > 19 {
        v = super::digits(run.get(..n)?)?;
    }
    let i = at + n;
    match b.get(i) {
        Some(&c) if c == stop && i + 1 < b.len() => Some((v, i + 1)),
        None if stop == b' ' => Some((v, i)),
        _ => None,
    }
}

/// [`parse_into`] line by line with [`line`]: any text.
fn by_lines(text: &str, out: &mut Rows<IoDevice>) {
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match line(l, i + 1) {
            Ok(d) => out.rows.push(d),
            Err(e) => out.errors.push(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fixture(name: &str) -> Vec<IoDevice> {
        let path = format!(
            "{}/fixtures/cgroup/io-stat/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let rows = parse(&std::fs::read_to_string(&path).expect("fixture"));
        assert_eq!(rows.errors, vec![], "{name}");
        rows.rows
    }

    fn dev(rows: &[IoDevice], major: u32, minor: u32) -> &IoDevice {
        rows.iter()
            .find(|d| (d.major, d.minor) == (major, minor))
            .expect("device present")
    }

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/cgroup/io-stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture");
            let parsed = parse(&text);
            assert_eq!(parsed.errors, vec![], "{}", path.display());
            insta::assert_debug_snapshot!(parsed);
        });
    }

    #[test]
    fn facts_per_fixture() {
        let slurm = fixture("cgroup-exporter-slurmstepd-scope-4-devices-dm-and-sd.txt");
        assert_eq!(slurm.len(), 4);
        let order: Vec<(u32, u32)> = slurm.iter().map(|d| (d.major, d.minor)).collect();
        assert_eq!(
            order,
            [(253, 2), (253, 3), (8, 0), (253, 0)],
            "file order kept"
        );
        // the dm device on top of sda carries the same reads
        assert_eq!(dev(&slurm, 8, 0).rbytes, dev(&slurm, 253, 0).rbytes);
        assert_eq!(dev(&slurm, 253, 2).wbytes, Some(24576));

        let old = fixture("kernel-doc-4.x-no-discard-keys.txt");
        assert_eq!(dev(&old, 8, 0).wios, Some(1252));
        assert_eq!((dev(&old, 8, 0).dbytes, dev(&old, 8, 0).dios), (None, None));
        let new = fixture("kernel-doc-5.x-two-disks-with-discard.txt");
        assert_eq!(dev(&new, 8, 0).dbytes, Some(50_331_648));
        assert_eq!(dev(&new, 8, 0).dios, Some(3021));

        let cost = fixture("opencontainers-cgroups-iocost-debug-cost-keys-on-259-0.txt");
        let nvme = dev(&cost, 259, 0);
        assert_eq!(nvme.rbytes, Some(4_085_926_524_416));
        let keys: Vec<&str> = nvme.other.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "cost.vrate",
                "cost.usage",
                "cost.wait",
                "cost.indebt",
                "cost.indelay"
            ]
        );
        assert_eq!(nvme.other[0].1, "100.00");
        assert!(dev(&cost, 251, 0).other.is_empty());

        let partial = fixture("synthetic-iolatency-iocost-and-cost-only-line.txt");
        let only_cost = dev(&partial, 8, 16);
        assert_eq!((only_cost.rbytes, only_cost.wios), (None, None));
        assert_eq!(
            only_cost.other,
            [("cost.usage".to_owned(), "1532".to_owned())]
        );
        assert_eq!(
            dev(&partial, 8, 0).other[0],
            ("depth".to_owned(), "max".to_owned())
        );

        let telegraf = fixture("telegraf-v2-one-nvme-259-8-with-discard.txt");
        assert_eq!(telegraf.len(), 1);
        assert_eq!(dev(&telegraf, 259, 8).wios, Some(181_928));
    }

    #[test]
    fn a_bad_line_costs_only_its_device() {
        let rows = parse(
            "8:0 rbytes=1 wbytes=2 rios=3 wios=4\n\
             8:x rbytes=1\n\
             8:16 rbytes=1 rbytes=2\n\
             8:32 rbytes=-1\n\
             8:48 rbytes\n\
             8:64\n\
             8:80 =5\n\
             4294967296:0 rbytes=1\n\
             259:0 rbytes=9 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n\
             8:96 rbytes=1 wbyt",
        );
        let kept: Vec<(u32, u32)> = rows.rows.iter().map(|d| (d.major, d.minor)).collect();
        assert_eq!(kept, [(8, 0), (259, 0)]);
        let errors: Vec<(usize, &str)> = rows
            .errors
            .iter()
            .map(|e| (e.line, e.reason.as_str()))
            .collect();
        assert_eq!(
            errors,
            [
                (2, "\"8:x\" is not a MAJ:MIN device"),
                (3, "second rbytes"),
                (4, "rbytes (\"-1\") is not an unsigned 64-bit integer"),
                (5, "\"rbytes\" is not key=value"),
                (6, "no key=value after the device"),
                (7, "\"=5\" is not key=value"),
                (8, "\"4294967296:0\" is not a MAJ:MIN device"),
                (10, "\"wbyt\" is not key=value"),
            ]
        );
        assert_eq!(parse(""), Rows::default());
        assert_eq!(parse("\n\n").rows, vec![]);
    }

    /// The digit loop without overflow checks stops at 19 digits: 20 and more are read with the
    /// checks, leading zeros and all.
    #[test]
    fn long_numbers_are_read_with_overflow_checks() {
        let line = |v: &str| format!("8:0 rbytes={v} wbytes=1 rios=2 wios=3 dbytes=4 dios=5");
        for (v, want) in [
            ("9999999999999999999", Some(9_999_999_999_999_999_999)),
            ("18446744073709551615", Some(u64::MAX)),
            ("0000000000000000000000042", Some(42)),
            ("18446744073709551616", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(fast_line(&line(v)).map(|d| d.rbytes), want.map(Some), "{v}");
            let rows = parse(&line(v));
            assert_eq!(rows.rows.first().and_then(|d| d.rbytes), want, "{v}");
            assert_eq!(rows.errors.len(), usize::from(want.is_none()), "{v}");
        }
        assert_eq!(number_until(b"12", 0, b' '), Some((12, 2)));
        assert_eq!(number_until(b"12 ", 0, b' '), None, "a trailing blank");
        assert_eq!(number_until(b"12:3", 0, b':'), Some((12, 3)));
        assert_eq!(number_until(b"12", 0, b':'), None, "no stop");
        assert_eq!(number_until(b":3", 0, b':'), None, "no digit");
    }

    /// The old way: the text (a UTF-8 error as a reader of a `String` gives it), parsed whole,
    /// its counters.
    fn counters_of_text(b: &[u8]) -> Result<(Vec<IoCounters>, Vec<ParseError>), ()> {
        let text = std::str::from_utf8(b).map_err(|_| ())?;
        let rows = parse(text);
        Ok((
            rows.rows.iter().map(IoCounters::from).collect(),
            rows.errors,
        ))
    }

    fn counters_of_bytes(b: &[u8]) -> Result<(Vec<IoCounters>, Vec<ParseError>), ()> {
        // Vectors reused from a longer file, as the collector's are.
        let mut out = vec![IoCounters::default(); 5];
        let mut errors = parse("8:x\n").errors;
        counters_into(b, &mut out, &mut errors).map_err(|_| ())?;
        Ok((out, errors))
    }

    /// Every fixture read from its bytes gives the counters of the full parser; the kernel's
    /// lines take the scan in place.
    #[test]
    fn counters_of_every_fixture() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cgroup/io-stat");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("fixtures") {
            let bytes = std::fs::read(entry.expect("entry").path()).expect("fixture");
            assert_eq!(counters_of_bytes(&bytes), counters_of_text(&bytes));
            n += 1;
        }
        assert!(n >= 7);
        // 20 digits (u64::MAX), the discard keys, the 4.x line without them, keys out of order.
        for text in [
            "8:0 rbytes=18446744073709551615 wbytes=0 rios=1 wios=2 dbytes=3 dios=4\n",
            "259:0 rbytes=1 wbytes=2 rios=3 wios=4\n8:16 rbytes=5 wbytes=6 rios=7 wios=8\n",
            "8:0 wios=4 rios=3 wbytes=2 rbytes=1 dios=6 dbytes=5\n",
        ] {
            let mut out = Vec::new();
            let mut errors = Vec::new();
            assert_eq!(
                counters_into(text.as_bytes(), &mut out, &mut errors),
                Ok(())
            );
            assert_eq!(
                Ok((out, errors)),
                counters_of_text(text.as_bytes()),
                "{text}"
            );
        }
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let max = "8:0 rbytes=18446744073709551615 wbytes=0 rios=1 wios=2 dbytes=3 dios=4\n";
        assert_eq!(counters_into(max.as_bytes(), &mut out, &mut errors), Ok(()));
        assert_eq!(out.first().and_then(|c| c.get(RBYTES)), Some(u64::MAX));
        assert_eq!(out.first().and_then(|c| c.get(DIOS)), Some(4));
        // Not UTF-8: refused as a whole, as before.
        let bad = b"8:0 rbytes=1 cost.usage=\xff\n";
        assert!(counters_into(bad, &mut out, &mut errors).is_err());
        assert_eq!(counters_of_text(bad), Err(()));
    }

    proptest! {
        /// Any bytes: the counters, the errors (line numbers included) and the refusal of what
        /// is not UTF-8 are the full parser's of the text.
        #[test]
        fn counters_of_bytes_are_those_of_the_text(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(counters_of_bytes(&b), counters_of_text(&b));
        }

        /// The kernel's lines with the controllers' keys after the counters (io.cost,
        /// io.latency, the debug keys): the same as the text's counters, and read by the scan
        /// whenever each token is one `line` keeps.
        #[test]
        fn counters_with_the_controllers_keys(
            v in proptest::collection::vec(any::<u64>(), 6),
            discards in any::<bool>(),
            tail in proptest::collection::vec(("cost\\.usage|cost\\.vrate|depth|avg_lat|use_delay|rbytes|dios|", "[0-9.]{0,6}|max|=1|"), 0..4),
            sep in "( |  )",
        ) {
            let mut line = format!("8:16 rbytes={} wbytes={} rios={} wios={}", v[0], v[1], v[2], v[3]);
            if discards {
                line.push_str(&format!(" dbytes={} dios={}", v[4], v[5]));
            }
            for (k, val) in &tail {
                line.push_str(&format!("{sep}{k}={val}"));
            }
            let text = format!("{line}\n");
            prop_assert_eq!(counters_of_bytes(text.as_bytes()), counters_of_text(text.as_bytes()));
            let kept = tail.iter().all(|(k, val)| {
                !k.is_empty() && !val.is_empty() && !["rbytes", "dios"].contains(&k.as_str())
            });
            let mut c = IoCounters::default();
            // (io.cost came with 5.4: its keys follow the discards' in the kernel's form.)
            let scanned = kept && (tail.is_empty() || (sep == " " && discards));
            prop_assert_eq!(scan_line(line.as_bytes(), &mut c), scanned, "{}", line);
        }

        /// Near the kernel's form: the same.
        #[test]
        fn counters_of_kernel_like_lines_are_those_of_the_text(
            lines in proptest::collection::vec(
                (
                    "[0-9]{1,11}:[0-9]{1,11}|8:x| 8:0|",
                    proptest::collection::vec(("rbytes|wbytes|rios|wios|dbytes|dios|cost.usage|x|", "[0-9]{0,21}|-1|"), 0..8),
                    "( |  |\t)",
                    "|\n| |\r|\u{e9}",
                ),
                0..5,
            ),
        ) {
            let text: String = lines
                .iter()
                .map(|(dev, pairs, sep, end)| {
                    let l = pairs.iter().fold(dev.clone(), |acc, (k, v)| format!("{acc}{sep}{k}={v}"));
                    format!("{l}{end}\n")
                })
                .collect();
            prop_assert_eq!(counters_of_bytes(text.as_bytes()), counters_of_text(text.as_bytes()));
        }

        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_near_misses(
            dev in "[0-9]{0,11}:[0-9]{0,11}|:|x",
            pairs in proptest::collection::vec(("rbytes|wios|dios|cost.usage|x|", "[0-9.]{0,21}|max|-1|"), 0..8),
        ) {
            let line = pairs.iter().fold(dev, |acc, (k, v)| format!("{acc} {k}={v}"));
            let _ = parse(&line);
        }

        /// The byte scan reads what the field-by-field parser reads, line numbers and errors
        /// included, into vectors reused from a longer file.
        #[test]
        fn the_scan_agrees_with_the_fields(
            lines in proptest::collection::vec(
                (
                    "[0-9]{1,11}:[0-9]{1,11}|8:x| 8:0|",
                    proptest::collection::vec(("rbytes|wios|dios|cost.usage|x|", "[0-9]{0,21}|-1|"), 0..7),
                    "( |  |\t)",
                    "|\n| |\r",
                ),
                0..5,
            ),
        ) {
            let text: String = lines
                .iter()
                .map(|(dev, pairs, sep, end)| {
                    let l = pairs.iter().fold(dev.clone(), |acc, (k, v)| format!("{acc}{sep}{k}={v}"));
                    format!("{l}{end}\n")
                })
                .collect();
            let mut fields = Rows::default();
            by_lines(&text, &mut fields);
            let mut reused = parse("8:0 rbytes=1\n8:16 rbytes=2\n8:32 x\n8:48 rbytes=3\n8:64 rbytes=4\n8:80 rbytes=5\n");
            parse_into(&text, &mut reused);
            prop_assert_eq!(reused, fields);
        }
    }
}
