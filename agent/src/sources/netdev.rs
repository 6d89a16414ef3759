//! `/proc/net/dev`: per-interface byte, packet, error and drop counters.
//!
//! Printed by `dev_seq_show` in `net/core/net-procfs.c`: two header lines (`Inter-|   Receive …`
//! and ` face |bytes …`), then one row per interface, `"%6s: %7llu %7llu …"` with 8 receive and
//! 8 transmit counters (bytes, packets, errs, drop, fifo, frame|colls, compressed,
//! multicast|carrier, compressed). Counters are 64-bit on current kernels; 2.6-era kernels
//! printed `"%6s:%8lu"`, so a large first counter runs straight into the colon (`eth0:6849280224`),
//! and names longer than 6 characters push the columns out (`vethf345468:     648`).
//!
//! The name is everything before the first `:` on the line: `dev_valid_name` refuses `:` (and
//! `/` and whitespace) in interface names, and `eth0:1`-style aliases are address labels that
//! never appear here. The header lines are recognised by their text, not by position, so a file
//! without them (some container runtimes trim it) still parses.

use std::fmt;

use super::diskstats::{parse_counter, CounterError};
use super::{fields, swar, ParseError, Rows};

/// One interface row of `/proc/net/dev`; the 16 counters in kernel column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetDev<'a> {
    /// Interface name (may be 15 characters, or glued to the first counter on old kernels).
    pub iface: &'a str,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errs: u64,
    /// Received packets dropped.
    pub rx_drop: u64,
    /// Receive FIFO overruns.
    pub rx_fifo: u64,
    /// Receive frame alignment errors.
    pub rx_frame: u64,
    /// Compressed packets received.
    pub rx_compressed: u64,
    /// Multicast packets received.
    pub rx_multicast: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errs: u64,
    /// Transmit packets dropped.
    pub tx_drop: u64,
    /// Transmit FIFO errors.
    pub tx_fifo: u64,
    /// Collisions.
    pub tx_colls: u64,
    /// Carrier errors.
    pub tx_carrier: u64,
    /// Compressed packets transmitted.
    pub tx_compressed: u64,
}

/// Number of counters per row.
const COUNTERS: usize = 16;

/// What was wrong with a row; rendered into [`ParseError::reason`] only when a line fails.
#[derive(Debug)]
enum Fault<'a> {
    NoColon,
    EmptyName,
    SpaceInName,
    NotNumber { counter: usize, field: &'a str },
    TooLarge { counter: usize, field: &'a str },
    TooFew(usize),
}

impl fmt::Display for Fault<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoColon => write!(f, "no `:` after the interface name"),
            Self::EmptyName => write!(f, "empty interface name"),
            Self::SpaceInName => write!(f, "interface name contains whitespace"),
            Self::NotNumber { counter, field } => {
                write!(
                    f,
                    "counter {counter} ({field:?}) is not an unsigned integer"
                )
            }
            Self::TooLarge { counter, field } => {
                write!(f, "counter {counter} ({field:?}) does not fit in 64 bits")
            }
            Self::TooFew(n) => write!(f, "{n} counters; expected {COUNTERS}"),
        }
    }
}

/// Whether `line` is one of the two header lines.
fn is_header(line: &str) -> bool {
    let t = line.trim_start();
    // `Inter-|   Receive …|  Transmit` and ` face |bytes    packets …` (the leading space is lost
    // in some copies, and the glued "face|" form costs nothing to accept).
    t.starts_with("Inter-|")
        || t.strip_prefix("face")
            .is_some_and(|rest| rest.trim_start().starts_with('|'))
}

/// Parses one interface row.
fn parse_line(line: &str) -> Result<NetDev<'_>, Fault<'_>> {
    let (name, rest) = line.split_once(':').ok_or(Fault::NoColon)?;
    let iface = name.trim_matches(|c: char| c.is_ascii_whitespace());
    if iface.is_empty() {
        return Err(Fault::EmptyName);
    }
    if iface.bytes().any(|b| b.is_ascii_whitespace()) {
        return Err(Fault::SpaceInName);
    }
    let mut c = [0u64; COUNTERS];
    let mut count = 0usize;
    for (i, field) in fields(rest).enumerate() {
        let v = parse_counter(field).map_err(|e| match e {
            CounterError::NotNumber => Fault::NotNumber {
                counter: i + 1,
                field,
            },
            CounterError::TooLarge => Fault::TooLarge {
                counter: i + 1,
                field,
            },
        })?;
        // Counters past the 16th are checked above but not kept: the kernel has printed 16
        // since 2.2, and a future one appending more should not blind the agent.
        if let Some(slot) = c.get_mut(i) {
            *slot = v;
        }
        count = i + 1;
    }
    if count < COUNTERS {
        return Err(Fault::TooFew(count));
    }
    Ok(row(iface, c))
}

/// A row as `dev_seq_show` prints it: the name after spaces, a colon, then the 16 counters,
/// each after one or more spaces (or none, the first on 2.6-era kernels) and of 1–19 digits,
/// and nothing after but spaces — read eight bytes at a time ([`swar`]), without the field
/// split and the byte-by-byte digits of [`parse_line`]. `None` for anything else (a header,
/// a tab, a 17th counter, a number of 20 digits, a fault), which [`parse_line`] then reads,
/// or refuses with its reason. A 200-disk server's 8 NICs are read every second.
fn parse_line_fast(line: &str) -> Option<NetDev<'_>> {
    let b = line.as_bytes();
    let colon = memchr::memchr(b':', b)?;
    let iface = line.get(..colon)?.trim_start_matches(' ');
    if iface.is_empty() || iface.bytes().any(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let mut c = [0u64; COUNTERS];
    let mut at = colon + 1;
    for slot in &mut c {
        let (v, next) = swar::number(b, swar::skip_spaces(b, at))?;
        if !matches!(b.get(next), None | Some(b' ')) {
            return None;
        }
        *slot = v;
        at = next;
    }
    (swar::skip_spaces(b, at) == b.len()).then(|| row(iface, c))
}

/// The row of `iface` with the 16 counters `c` in kernel column order.
fn row(iface: &str, c: [u64; COUNTERS]) -> NetDev<'_> {
    let [rx_bytes, rx_packets, rx_errs, rx_drop, rx_fifo, rx_frame, rx_compressed, rx_multicast, tx_bytes, tx_packets, tx_errs, tx_drop, tx_fifo, tx_colls, tx_carrier, tx_compressed] =
        c;
    NetDev {
        iface,
        rx_bytes,
        rx_packets,
        rx_errs,
        rx_drop,
        rx_fifo,
        rx_frame,
        rx_compressed,
        rx_multicast,
        tx_bytes,
        tx_packets,
        tx_errs,
        tx_drop,
        tx_fifo,
        tx_colls,
        tx_carrier,
        tx_compressed,
    }
}

/// Parses the whole file (two header lines, then one row per interface). Never panics;
/// malformed rows are returned in `errors`, the rest parse. Blank lines are skipped.
pub fn parse(text: &str) -> Rows<NetDev<'_>> {
    // `lines().count()` finds newlines with memchr; a byte-by-byte count costs 4x more.
    let lines = text.lines().count();
    let mut out = Rows {
        rows: Vec::with_capacity(lines),
        errors: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        if let Some(row) = parse_line_fast(line) {
            out.rows.push(row);
            continue;
        }
        if fields(line).next().is_none() || is_header(line) {
            continue;
        }
        match parse_line(line) {
            Ok(row) => out.rows.push(row),
            Err(fault) => out.errors.push(ParseError::new(i + 1, line, fault)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/netdev", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    fn one(text: &str) -> NetDev<'_> {
        let rows = parse(text);
        assert!(rows.errors.is_empty(), "{:?}", rows.errors);
        assert_eq!(rows.rows.len(), 1, "{:?}", rows.rows);
        rows.rows[0]
    }

    fn error(text: &str) -> ParseError {
        let rows = parse(text);
        assert!(rows.rows.is_empty(), "{:?}", rows.rows);
        assert_eq!(rows.errors.len(), 1, "{:?}", rows.errors);
        rows.errors[0].clone()
    }

    #[test]
    fn counters_land_in_kernel_column_order() {
        let d = one("  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
        assert_eq!(d.iface, "eth0");
        let got = [
            d.rx_bytes,
            d.rx_packets,
            d.rx_errs,
            d.rx_drop,
            d.rx_fifo,
            d.rx_frame,
            d.rx_compressed,
            d.rx_multicast,
            d.tx_bytes,
            d.tx_packets,
            d.tx_errs,
            d.tx_drop,
            d.tx_fifo,
            d.tx_colls,
            d.tx_carrier,
            d.tx_compressed,
        ];
        assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    }

    #[test]
    fn headers_are_recognised_not_counted() {
        let text = format!("{HEADER}    lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
        let rows = parse(&text);
        assert_eq!(rows.rows.len(), 1);
        assert!(rows.errors.is_empty());
        // Without the headers the rows still parse; a stray third header is still a header.
        assert_eq!(
            one("lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").iface,
            "lo"
        );
        let text = format!("{HEADER}{HEADER}lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16");
        assert_eq!(parse(&text).rows.len(), 1);
        // An interface called "face" is not a header.
        assert_eq!(
            one("  face: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").iface,
            "face"
        );
    }

    #[test]
    fn glued_first_counter_and_long_names() {
        let d = one("eth0:6849280224 5971997    0    0    0     0          0         0 1183784068 2317848    0    0    0     0       0          0");
        assert_eq!(
            (d.iface, d.rx_bytes, d.tx_bytes),
            ("eth0", 6849280224, 1183784068)
        );
        let d = one("enp94s0f1np1xx:123 1 0 0 0 0 0 0 456 2 0 0 0 0 0 0");
        assert_eq!(
            (d.iface, d.rx_bytes, d.tx_bytes),
            ("enp94s0f1np1xx", 123, 456)
        );
        let d = one("vethf345468:     648       8    0    0    0     0          0         0      438       5    0    0    0     0       0          0");
        assert_eq!((d.iface, d.rx_packets, d.tx_packets), ("vethf345468", 8, 5));
    }

    #[test]
    fn tabs_and_crlf_are_whitespace() {
        let d = one("\teth1:\t1\t2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\r\n");
        assert_eq!((d.iface, d.tx_compressed), ("eth1", 16));
    }

    #[test]
    fn empty_and_blank_text_give_nothing() {
        assert_eq!(parse(""), Rows::default());
        assert_eq!(parse(HEADER), Rows::default());
        assert_eq!(parse("\n \n\t"), Rows::default());
    }

    #[test]
    fn truncated_rows_are_errors() {
        assert_eq!(error("eth0: 1 2 3").reason, "3 counters; expected 16");
        assert_eq!(error("eth0:").reason, "0 counters; expected 16");
        assert_eq!(
            error("eth0 1 2 3").reason,
            "no `:` after the interface name"
        );
        assert_eq!(
            error(": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").reason,
            "empty interface name"
        );
        assert_eq!(
            error("my eth: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").reason,
            "interface name contains whitespace"
        );
    }

    #[test]
    fn non_numeric_and_overflowing_counters_are_errors() {
        assert_eq!(
            error("eth0: 1 2 x 4 5 6 7 8 9 10 11 12 13 14 15 16").reason,
            "counter 3 (\"x\") is not an unsigned integer"
        );
        assert_eq!(
            error("eth0: -1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").reason,
            "counter 1 (\"-1\") is not an unsigned integer"
        );
        assert_eq!(
            error("eth0: 18446744073709551616 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16").reason,
            "counter 1 (\"18446744073709551616\") does not fit in 64 bits"
        );
        // A second colon (two rows glued together) is caught as a non-number.
        assert_eq!(
            error("eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 eth1: 1").reason,
            "counter 17 (\"eth1:\") is not an unsigned integer"
        );
    }

    #[test]
    fn extra_numeric_counters_are_ignored() {
        let d = one("eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18");
        assert_eq!(d.tx_compressed, 16);
    }

    #[test]
    fn bad_row_keeps_its_line_number_and_the_others_parse() {
        let text = format!("{HEADER}lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\nbroken\n\neth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
        let rows = parse(&text);
        assert_eq!(
            rows.rows.iter().map(|d| d.iface).collect::<Vec<_>>(),
            ["lo", "eth0"]
        );
        assert_eq!(rows.errors.len(), 1);
        assert_eq!(
            (rows.errors[0].line, rows.errors[0].text.as_str()),
            (4, "broken")
        );
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(text in "\\PC*") {
            let rows = parse(&text);
            prop_assert!(rows.rows.len() + rows.errors.len() <= text.lines().count());
        }

        #[test]
        fn never_panics_on_numeric_tokens(
            name in "[a-z0-9:]{0,8}",
            tokens in proptest::collection::vec(
                prop_oneof![any::<u64>().prop_map(|v| v.to_string()), "[0-9]{1,25}", Just(":".to_owned())],
                0..20,
            ),
            sep in prop_oneof![Just(" "), Just("\t"), Just("    ")],
        ) {
            let line = format!("{name}:{}", tokens.join(sep));
            let rows = parse(&line);
            prop_assert!(rows.rows.len() + rows.errors.len() <= 1);
        }

        #[test]
        fn printed_rows_parse_back(
            name in "[a-zA-Z0-9_.-]{1,15}",
            counters in proptest::collection::vec(any::<u64>(), 16),
            glued in any::<bool>(),
        ) {
            // Like the kernel: right-aligned in 6, then counters; old kernels glue the first.
            let mut line = format!("{name:>6}:{}", if glued { "" } else { " " });
            line.push_str(&counters.iter().map(u64::to_string).collect::<Vec<_>>().join("  "));
            let d = one(&line);
            prop_assert_eq!(d.iface, name.as_str());
            prop_assert_eq!(d.rx_bytes, counters[0]);
            prop_assert_eq!(d.tx_bytes, counters[8]);
            prop_assert_eq!(d.tx_compressed, counters[15]);
        }

        /// Whatever the eight-bytes-at-a-time reading answers is the row the full parser
        /// reads from the same line; and it answers for the kernel's own rows (any counter up
        /// to 19 digits, spacing of one or more spaces, a glued first counter).
        #[test]
        fn the_fast_reading_is_the_full_parsers_row(
            name in "[a-z0-9:]{0,8}",
            counters in proptest::collection::vec(
                prop_oneof![
                    any::<u64>().prop_map(|v| v.to_string()),
                    (0u64..1000).prop_map(|v| v.to_string()),
                    "[0-9]{18,21}",
                    "[0-9x]{1,3}",
                ],
                14..18,
            ),
            seps in proptest::collection::vec(prop_oneof![Just(" "), Just("   "), Just("\t"), Just("")], 18),
            lead in prop_oneof![Just(""), Just("  "), Just("\t")],
            trail in prop_oneof![Just(""), Just("  "), Just(" x")],
        ) {
            let mut line = format!("{lead}{name}:");
            for (c, sep) in counters.iter().zip(&seps) {
                line.push_str(sep);
                line.push_str(c);
            }
            line.push_str(trail);
            let full = parse_line(&line).ok();
            if let Some(fast) = parse_line_fast(&line) {
                prop_assert_eq!(Some(fast), full, "{:?}", line);
            }
            let kernel = counters.len() == 16
                && counters.iter().all(|c| c.len() < 20 && c.bytes().all(|b| b.is_ascii_digit()))
                && seps.iter().skip(1).take(15).all(|s| s.contains(' ') && !s.contains('\t'))
                && !seps[0].contains('\t')
                && !lead.contains('\t')
                && !trail.contains('x')
                && !name.is_empty()
                && !name.contains(':');
            if kernel {
                prop_assert!(parse_line_fast(&line).is_some(), "{:?}", line);
            }
        }
    }

    #[test]
    fn the_real_files_are_read_by_the_fast_reading() {
        let dir = format!("{}/fixtures/netdev", env!("CARGO_MANIFEST_DIR"));
        for entry in std::fs::read_dir(&dir).expect("the fixtures") {
            let path = entry.expect("a fixture").path();
            let text = std::fs::read_to_string(&path).expect("a readable fixture");
            let rows: Vec<_> = text.lines().filter_map(parse_line_fast).collect();
            assert_eq!(rows, parse(&text).rows, "{}", path.display());
            assert!(!rows.is_empty());
        }
    }
}
