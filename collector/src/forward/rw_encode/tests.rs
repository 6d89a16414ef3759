#![allow(clippy::unwrap_used)]

use super::super::rw_proto::{put_varint, varint_len};
use super::*;

/// A length-delimited field (wire type 2).
fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, u64::from((field << 3) | 2));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[test]
fn varint_lengths() {
    for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX, -1i64 as u64] {
        let mut b = Vec::new();
        put_varint(&mut b, v);
        assert_eq!(varint_len(v), b.len(), "{v}");
    }
}

/// The protobuf of `lines` written the plain way, sharing nothing with [`Encoder`]: each
/// line named by [`prom_line`], its samples grouped per series (by labels and name, in the
/// order they first come) by a linear search, each series' samples sorted by time with the
/// later line's kept at one millisecond.
fn plain_protobuf(lines: &[&str], now_ms: i64) -> Vec<u8> {
    type Series = (Vec<(String, String)>, Vec<(i64, f64)>);
    let mut series: Vec<Series> = Vec::new();
    for l in lines {
        let p = parse_any(l).unwrap();
        let ts = time_ms(p.timestamp, now_ms);
        let line = prom_line(&p);
        let mut add = |mut labels: Vec<(String, String)>, name: String, v: f64| {
            labels.sort_by(|a, b| a.0.cmp(&b.0));
            labels.dedup_by(|b, a| a.0 == b.0);
            labels.push(("__name__".into(), name));
            labels.sort_by(|a, b| a.0.cmp(&b.0));
            match series.iter_mut().find(|(l, _)| *l == labels) {
                Some((_, samples)) => samples.push((ts, v)),
                None => series.push((labels, vec![(ts, v)])),
            }
        };
        for (name, _, v) in &line.values {
            add(line.labels.clone(), line.metric(name), *v);
        }
        if !line.info.is_empty() {
            let labels = [line.labels.clone(), line.info.clone()].concat();
            add(labels, line.info_metric(), 1.0);
        }
    }
    let mut out = Vec::new();
    for (labels, mut samples) in series {
        samples.sort_by_key(|(t, _)| *t);
        let mut kept: Vec<(i64, f64)> = Vec::new();
        for (t, v) in samples {
            match kept.last_mut() {
                Some(last) if last.0 == t => *last = (t, v),
                _ => kept.push((t, v)),
            }
        }
        let mut ts = Vec::new();
        for (k, v) in &labels {
            let mut label = Vec::new();
            put_bytes(&mut label, 1, k.as_bytes());
            put_bytes(&mut label, 2, v.as_bytes());
            put_bytes(&mut ts, 1, &label);
        }
        for (t, v) in kept {
            let mut sample = vec![0x09];
            sample.extend_from_slice(&v.to_le_bytes());
            sample.push(0x10);
            put_varint(&mut sample, t as u64);
            put_bytes(&mut ts, 2, &sample);
        }
        put_bytes(&mut out, 1, &ts);
    }
    out
}

/// Requests written with warm caches, by position or by the series map, and grouped in
/// place or by the counting sort, are the plain encoding's bytes: series repeated with
/// their fields in other orders, interleaved, at one millisecond twice, lines with string
/// fields, tags that come to one label, the `job` tag, escapes, lines without a time.
#[test]
fn requests_are_the_plain_encoding_whatever_the_order_of_lines() {
    let lines = [
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,rkb_per_s=2 2000000000",
        "disk,device=sda,host=n1 r_await_ms=5,util_pct=60i 1000000000",
        "disk,host=n1,device=sda util_pct=61i,r_await_ms=5.5 3000000000",
        "disk,host=n1,device=sdb r_await_ms=1,util_pct=2i,rkb_per_s=3 2000000000",
        "disk,host=n1,device=sda r_await_ms=4.5,util_pct=51i,rkb_per_s=2.5 2000000000",
        "disk,host=n1,device=sda r_await_ms=6,r_await_ms=7 1000000000",
        "disk,host=n1,device=sda r_await_ms=8,util_pct=9i,rkb_per_s=10,w_per_s=1 4000000000",
        "md,host=n1,array=md0 state=\"clean\",host=\"x\",degraded=false 1000000000",
        "md,host=n1,array=md0 degraded=true,state=\"degraded\" 2000000000",
        "jobs,host=n1,job=7 count=3u,running=true 1000000000",
        "t,a-b=1,a_b=2 v=1 1000000000",
        "t,a_b=0,a-b=3 v=2 1000000000",
        "m\\ x,a\\ b=c\\,d v=1 -5000000",
        "m v=3",
        "m v=4",
        // against a layout: its keys and one more, fewer, one written twice after them
        "disk,host=n1,device=sdc r_await_ms=1,util_pct=2i,rkb_per_s=3,x=1 6000000000",
        "disk,host=n1,device=sdc r_await_ms=2 7000000000",
        "disk,host=n1,device=sdc r_await_ms=3,util_pct=4i,r_await_ms=5 8000000000",
        "disk,host=n2,device=sdc r_await_ms=1,util_pct=2i,util_pct=3i 6000000000",
        "disk,host=n2,device=sdc util_pct=4i,util_pct=5i 7000000000",
        // string fields: a series' state changing, two keys that come to one label, a key
        // written twice (as strings, a string and a number either way), strings alone, an
        // empty one, one holding separators, one before and one after the numbers
        "md,host=n1,array=md1 state=\"clean\",sync_pct=100 1000000000",
        "md,host=n1,array=md1 state=\"recovering\",sync_pct=50 2000000000",
        "md,host=n1,array=md1 state=\"clean\",sync_pct=100 3000000000",
        "net,host=n1,nic=eth0 oper-state=\"up\",oper_state=\"down\",mtu=9000i 1000000000",
        "net,host=n1,nic=eth1 s=\"a\",s=\"b\" 1000000000",
        "net,host=n1,nic=eth2 s=\"a\",s=1 1000000000",
        "net,host=n1,nic=eth3 s=1,s=\"a\" 1000000000",
        "state,host=n1 a=\"x\" 1000000000",
        "state,host=n1 a=\"\" 2000000000",
        "state,host=n1 a=\"x y,z=1\" 3000000000",
        "state,host=n2 v=1,a=\"x\",w=2 3000000000",
    ];
    let mut e = Encoder::default();
    let mut order: Vec<usize> = (0..lines.len()).collect();
    for round in 0..12 {
        // the lines in another order each round, some rounds a part of them
        fastrand::seed(round);
        fastrand::shuffle(&mut order);
        let take = if round % 3 == 2 {
            lines.len() / 2
        } else {
            lines.len()
        };
        let batch: Vec<&str> = order[..take].iter().map(|i| lines[*i]).collect();
        e.clear();
        e.add_lines(&batch, 77).unwrap();
        let count = e.encode();
        assert_eq!(e.protobuf(), plain_protobuf(&batch, 77), "{batch:#?}");
        assert_eq!(decompressed(&mut e), (e.protobuf().to_vec(), count));
    }
    // the lines with strings whose keys are each written once were read in one pass
    assert!(e.string_lines > 50, "{}", e.string_lines);
    // a batch holding each series once (a drain's batches, mostly) is grouped in place
    let grouped = [lines[0], lines[3], lines[13]];
    e.clear();
    e.add_lines(&grouped, 0).unwrap();
    assert!(e.req.in_series_order());
    e.encode();
    assert_eq!(e.protobuf(), plain_protobuf(&grouped, 0));
}

/// One request of `lines` in the order of `seed`'s shuffle: the plain encoding's bytes.
fn shuffled_request(e: &mut Encoder, lines: &[&str], seed: u64) {
    let mut batch = lines.to_vec();
    fastrand::seed(seed);
    fastrand::shuffle(&mut batch);
    e.clear();
    e.add_lines(&batch, 77).unwrap();
    e.encode();
    assert_eq!(e.protobuf(), plain_protobuf(&batch, 77), "{batch:#?}");
}

/// Lines of known series read by their layout ([`known_line`]) give the plain encoding's
/// bytes, and so do the lines that part from it at any point (a field more or fewer, in
/// another order, another key, a string, a value or a timestamp the one-pass reading does
/// not read plain), and keys holding escaped separators, request after request.
#[test]
fn a_known_series_line_is_read_as_the_one_pass_reading_reads_it() {
    let known = "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u 2000000000";
    let lines = [
        known,
        "disk,host=n1,device=sda r_await_ms=-4.25,util_pct=-5i,ok=F,n=0u -2000000000",
        "disk,host=n1,device=sda r_await_ms=4.,util_pct=0i,ok=FALSE,n=18446744073709551615u",
        "disk,host=n1,device=sda r_await_ms=12345678901234567890.5,util_pct=1i,ok=t,n=1u 1",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u,x=1 3000000000",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i 4000000000",
        "disk,host=n1,device=sda util_pct=50i,r_await_ms=4,ok=true,n=7u 5000000000",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=\"x\",n=7u 6000000000",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50,ok=true,n=7u 7000000000",
        "disk,host=n1,device=sda r_await_ms=1e3,util_pct=50i,ok=true,n=7u 8000000000",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u 9223372036854775807",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u -9223372036854775808",
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,ok=true,n=7u 0012",
        "disk,host=n1,device=sdb r_await_ms=4,util_pct=50i,ok=true,n=7u 2000000000",
        "disk,host=n1,device=sda\\ x r_await_ms=4,util_pct=50i,ok=true,n=7u 2000000000",
        "disk,host=n1,device=sda,model=A\\ B\\,C\\=D\\  r_await_ms=4,util_pct=50i,ok=true,n=7u 1",
    ];
    let mut e = Encoder::default();
    for round in 0..12 {
        shuffled_request(&mut e, &lines, round);
    }
    // the known lines of the last rounds were read by their layout
    assert!(e.known_lines > 40, "{}", e.known_lines);
    // and so are those whose keys hold escaped separators (a drive's model with a space)
    e.clear();
    let escaped = [lines[15], lines[16]];
    let before = e.known_lines;
    e.add_lines(&escaped, 0).unwrap();
    assert_eq!(e.known_lines, before + 2);
    e.encode();
    assert_eq!(e.protobuf(), plain_protobuf(&escaped, 0));
    // a known key whose line is not line protocol after it is still named bad
    e.clear();
    let bad = e.add_lines(
        &[known, "disk,host=n1,device=sda r_await_ms=4,util_pct="],
        0,
    );
    assert_eq!(bad.unwrap_err()[0].0, 1);
}

/// Lines with string fields of known series are read by their layout too, their `_info`
/// series by its strings as written: the plain encoding's bytes, with a state that changes and
/// comes back, strings alone, around the numbers, empty or holding separators, a string the
/// one-pass reading does not read plain (an escape, a control byte), a key written twice as a
/// string and a number (either way round, and as two strings) after a line of the series read
/// by its layout, one more string or one fewer, a number where a string was and the reverse.
#[test]
fn a_known_series_line_with_strings_is_read_by_its_layout() {
    let lines = [
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100,degraded=false 1000000000",
        "md,host=n1,array=md0 state=\"recovering\",sync_pct=50,degraded=true 2000000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100,degraded=false 3000000000",
        "md,host=n1,array=md0 state=\"a\\\"b\",sync_pct=1,degraded=false 4000000000",
        "md,host=n1,array=md0 state=\"a\tb\",sync_pct=1,degraded=false 4500000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100,degraded=false,state=1 5000000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100,state=\"x\" 5500000000",
        "md,host=n1,array=md0 state=2,sync_pct=100,degraded=false 6000000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=\"x\",degraded=false 6500000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100 7000000000",
        "md,host=n1,array=md0 state=\"clean\",sync_pct=100,degraded=false,x=\"y\" 7500000000",
        "zpool,host=n1,pool=tank health=\"ONLINE\" 1000000000",
        "zpool,host=n1,pool=tank health=\"DEGRADED\" 2000000000",
        "zpool,host=n1,pool=tank health=\"\" 3000000000",
        "net,host=n1,iface=eth0 rx=1,oper=\"up, or not=1\",tx=2 1000000000",
        "net,host=n1,iface=eth0 rx=1,oper=\"up, or not=1\",tx=2",
        "net,host=n1,iface=eth0 rx=3,oper=\"down\",tx=4 2000000000",
        "net,host=n1,iface=eth1 oper=1,oper=\"up\" 1000000000",
        "net,host=n1,iface=eth1 oper=\"up\",oper=\"down\" 2000000000",
        "mpath_path,host=n1,model=A\\ B state=\"active\",ok=true 1000000000",
    ];
    let mut e = Encoder::default();
    for round in 0..16 {
        shuffled_request(&mut e, &lines, round + 100);
        // each line again, alone, after its series' lines in another order
        for l in &lines {
            e.clear();
            e.add_lines(&[l], 77).unwrap();
            e.encode();
            assert_eq!(e.protobuf(), plain_protobuf(&[l], 77), "{l}");
        }
    }
    // a line of a new series read twice: the second time by its layout (a line of strings
    // alone has no number series, whose key the layout is kept by: read in one pass each time)
    for l in [lines[0], lines[1], lines[14], lines[19]] {
        let mut e = Encoder::default();
        e.add_lines(&[l], 0).unwrap();
        let (known, strings) = (e.known_lines, e.string_lines);
        e.add_lines(&[l], 0).unwrap();
        assert_eq!(e.known_lines, known + 1, "{l}");
        assert_eq!(e.string_lines, strings + 1, "{l}");
        e.encode();
        assert_eq!(e.protobuf(), plain_protobuf(&[l, l], 0), "{l}");
    }
    // not: a string that is not plain, or a key written twice
    for l in [lines[3], lines[4], lines[5], lines[6], lines[17], lines[18]] {
        let mut e = Encoder::default();
        e.add_lines(&[l, l], 0).unwrap();
        let known = e.known_lines;
        e.add_lines(&[l], 0).unwrap();
        assert_eq!(e.known_lines, known, "{l}");
    }
}

/// The cached path names and encodes every line as the line-by-line path (`prom_line`,
/// sorted, one protobuf per request) did, request after request with the caches warm.
#[test]
fn cached_names_give_the_same_requests_as_prom_line() {
    let lines = [
        "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,rkb_per_s=2 2000000000",
        "disk,device=sda,host=n1 r_await_ms=5,util_pct=60i 1000000000",
        "disk,host=n1,device=sda r_await_ms=6,r_await_ms=7 1000000000",
        "md,host=n1,array=md0 state=\"clean\",host=\"x\",degraded=false 1000000000",
        "jobs,host=n1,job=7 count=3u,running=true 1000000000",
        "m\\ x,a\\ b=c\\,d v=1 -5000000",
        // a space after an escaped backslash is escaped too (the Go grammar looks one byte
        // back): these are two series of the measurement `m\\ x`
        "m\\\\ x,t=1 v=1 1000000000",
        "m\\\\ x,t=2 v=2 1000000000",
    ];
    let mut e = Encoder::default();
    for _ in 0..3 {
        e.clear();
        e.add_lines(&lines, 0).unwrap();
        let got = e.timeseries();
        let mut slow = Encoder::default();
        for l in &lines {
            let p = parse_any(l).unwrap();
            let ts = p.timestamp.unwrap().div_euclid(1_000_000);
            slow.add_slow(&p, ts);
        }
        assert_eq!(got, slow.timeseries());
        assert_eq!(e.encode(), slow.encode());
        assert_eq!(e.protobuf(), slow.protobuf());
        assert_eq!(decompressed(&mut e).0, slow.protobuf());
    }
}

/// A series whose lines come in two field orders, and many series of one measurement in
/// either: two layouts, whatever the number of lines; and a layout's names are the names
/// looked up by field, request after request.
#[test]
fn field_layouts_are_kept_once_per_measurement_and_key_order() {
    let mut e = Encoder::default();
    for round in 0..20 {
        let lines: Vec<String> = (0..200)
            .map(|i| match (i + round) % 3 {
                0 => format!("disk,dev=sd{} a=1,b=2i,c=true {i}000000", i % 50),
                _ => format!("disk,dev=sd{} c=false,a=1.5,b=3i {i}000000", i % 50),
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        e.clear();
        e.add_lines(&lines, 0).unwrap();
        e.encode();
        assert_eq!(e.protobuf(), plain_protobuf(&lines, 0));
        assert_eq!(e.layouts(), 2);
    }
}

/// Past [`MAX_LAYOUTS`] layouts the caches start again empty, and the requests written
/// after are the same.
#[test]
fn the_layouts_are_dropped_past_their_limit() {
    let mut e = Encoder::default();
    let lines: Vec<String> = (0..=MAX_LAYOUTS)
        .map(|i| format!("m,t=1 f{i}=1 1000000"))
        .collect();
    for part in lines.chunks(10_000) {
        let part: Vec<&str> = part.iter().map(String::as_str).collect();
        e.clear();
        e.add_lines(&part, 0).unwrap();
    }
    assert_eq!(e.layouts(), MAX_LAYOUTS + 1);
    e.clear();
    assert_eq!(e.layouts(), 0);
    let again = ["m,t=1 f1=2,f2=3 2000000", "m,t=1 f1=4,f2=5 3000000"];
    e.add_lines(&again, 0).unwrap();
    e.encode();
    assert_eq!(e.protobuf(), plain_protobuf(&again, 0));
    assert_eq!(e.layouts(), 1);
}

/// The request body [`Encoder::compress`] writes, decompressed by `snap`, and its count.
fn decompressed(e: &mut Encoder) -> (Vec<u8>, usize) {
    let (body, count) = e.compress().unwrap();
    let proto = snap::raw::Decoder::new().decompress_vec(body).unwrap();
    (proto, count)
}

/// Many requests of many series, label sets and metrics repeated near and far (copies of
/// a label written 64 KiB back and more), with warm and cold caches: the body decompresses
/// to the protobuf, and is smaller than it.
#[test]
fn the_request_body_is_the_protobuf_in_snappys_format() {
    let mut e = Encoder::default();
    for round in 0..3u64 {
        let lines: Vec<String> = (0..3_000)
            .map(|i| {
                format!(
                    "disk,host=n{},device=sd{} r_await_ms={i}.5,util_pct={}i,x{}=1 {}",
                    i % 7,
                    i % 300,
                    i * 3,
                    i % 40,
                    (1_000 + round * 10 + i % 2) * 1_000_000_000
                )
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        e.clear();
        e.add_lines(&lines, 0).unwrap();
        let count = e.encode();
        let proto = e.protobuf().to_vec();
        assert!(proto.len() > 100_000);
        let (body, n) = e.compress().unwrap();
        let len = body.len();
        assert_eq!(n, count);
        assert!(len < proto.len() / 2, "{len} of {}", proto.len());
        assert_eq!(decompressed(&mut e), (proto, count));
    }
}
