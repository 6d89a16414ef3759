//! Where a line ends in a body: the first newline that is neither escaped nor inside a quoted
//! string value, as influxd's `scanLine` (`models/points.go`) finds it, walking the line byte by
//! byte. A body is split by it when a request is taken ([`super::check::lines`]) and when a
//! queue read is cut into batches.

/// The end of the line starting at `i`: the first newline that is neither escaped nor inside a
/// quoted string value (influxd's `scanLine`, which walks it byte by byte: a backslash passes
/// the byte after it; the first space starts the fields; there, a double quote after more
/// equals signs than commas outside quotes opens or closes a string). Here the bytes between
/// those that matter are passed by a search: in the key for a space, a backslash or a newline;
/// in the fields for a quote, a backslash or a newline, the equals signs and commas passed
/// counted only when a quote needs them; in a string for its closing quote or a backslash.
pub(crate) fn scan_line(buf: &[u8], mut i: usize) -> usize {
    // the measurement and tags
    loop {
        let Some(k) = buf
            .get(i..)
            .and_then(|r| memchr::memchr3(b' ', b'\\', b'\n', r))
        else {
            return buf.len();
        };
        i += k;
        match buf[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            _ => {
                i += 1;
                break;
            }
        }
    }
    // the fields and what follows them: `from` is where the bytes not counted yet start
    let (mut equals, mut commas) = (0usize, 0usize);
    let mut from = i;
    let count = |seg: &[u8], c: u8| seg.iter().filter(|&&b| b == c).count();
    loop {
        let Some(k) = buf
            .get(i..)
            .and_then(|r| memchr::memchr3(b'"', b'\\', b'\n', r))
        else {
            return buf.len();
        };
        i += k;
        match buf[i] {
            b'\n' => return i,
            b'\\' => {
                let seg = &buf[from..i];
                (equals, commas) = (equals + count(seg, b'='), commas + count(seg, b','));
                i += 2;
                from = i;
                continue;
            }
            _ => {}
        }
        // a quote
        let seg = &buf[from..i];
        (equals, commas) = (equals + count(seg, b'='), commas + count(seg, b','));
        i += 1;
        from = i;
        if equals <= commas {
            continue;
        }
        // a string, to its closing quote: nothing in it is counted, a newline does not end it
        loop {
            let Some(k) = buf.get(i..).and_then(|r| memchr::memchr2(b'"', b'\\', r)) else {
                return buf.len();
            };
            i += k;
            if buf[i] == b'\\' {
                i += 2;
                continue;
            }
            i += 1;
            break;
        }
        from = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scan_line` as it was written first: influxd's `scanLine` byte for byte.
    fn scan_line_bytewise(buf: &[u8], mut i: usize) -> usize {
        let mut quoted = false;
        let mut fields = false;
        let (mut equals, mut commas) = (0u32, 0u32);
        while i < buf.len() {
            if buf[i] == b'\\' {
                i += 2;
                continue;
            }
            if buf[i] == b' ' {
                fields = true;
            }
            if fields {
                if !quoted && buf[i] == b'=' {
                    i += 1;
                    equals += 1;
                    continue;
                } else if !quoted && buf[i] == b',' {
                    i += 1;
                    commas += 1;
                    continue;
                } else if buf[i] == b'"' && equals > commas {
                    i += 1;
                    quoted = !quoted;
                    continue;
                }
            }
            if buf[i] == b'\n' && !quoted {
                break;
            }
            i += 1;
        }
        i.min(buf.len())
    }

    proptest::proptest! {
        #[test]
        fn a_line_ends_where_the_bytewise_scan_ends_it(
            body in proptest::collection::vec(
                proptest::sample::select(
                    b"ab =,\"\\\n\t0".iter().copied().chain([0xc3, 0xa9]).collect::<Vec<u8>>()
                ),
                0..80,
            )
        ) {
            for i in 0..=body.len() {
                proptest::prop_assert_eq!(scan_line(&body, i), scan_line_bytewise(&body, i));
            }
        }

        /// Long runs between the bytes that matter (the searches' vector loops) and lines of
        /// an agent's shape, cut anywhere.
        #[test]
        fn a_long_line_ends_where_the_bytewise_scan_ends_it(
            runs in proptest::collection::vec(
                (
                    0usize..70,
                    proptest::sample::select(b" =,\"\\\n".to_vec()),
                ),
                0..24,
            ),
            agent in proptest::sample::select(vec![
                &b"drive,host=n1,model=SAMSUNG\\ MZ7WD240,md=md0\\,md1 ok=true,t=27i 1\n"[..],
                &b"md,host=n1,array=md0 active=2i,state=\"clean\",sync=\"idle\",x=0i 1\n"[..],
                &b"m s=\"a\\\"b\nc\",t=\"\\\\\" 1\n"[..],
            ]),
        ) {
            let mut body = Vec::new();
            for (n, c) in runs {
                body.extend(std::iter::repeat_n(b'a', n));
                body.push(c);
            }
            let mut with_agent = agent.repeat(3);
            with_agent.extend_from_slice(&body);
            for b in [&body, &with_agent] {
                for i in 0..=b.len() {
                    proptest::prop_assert_eq!(scan_line(b, i), scan_line_bytewise(b, i));
                }
            }
        }
    }

    #[test]
    fn lines_split_like_influxd() {
        let body = b"a v=1\nb s=\"x\ny\" 1\nc,t=x\\\ny v=1\nd v=1";
        let mut starts = vec![];
        let mut i = 0;
        while i < body.len() {
            let end = scan_line(body, i);
            starts.push(std::str::from_utf8(&body[i..end]).expect("utf8"));
            i = end + 1;
        }
        assert_eq!(
            starts,
            vec!["a v=1", "b s=\"x\ny\" 1", "c,t=x\\\ny v=1", "d v=1"]
        );
    }
}
