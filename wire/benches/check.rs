//! What validating a line costs, per InfluxDB version's rules: 5000 lines of the shape the
//! collector benchmark sends (a `disk` report line: 5 tags, 10 fields, a timestamp).
//!
//! `cargo bench -p storwatch-wire --bench check`
//!
//! 1.x and 2.x read with the port of the Go parser, 3.x with the `influxdb-line-protocol` crate
//! (the parser the collector used for every version before). The second group reads the same
//! lines by the 1.x grammar into a whole `Point` (`parse_line`) and into a `LineView`
//! (`parse_view`, what the validation and the remote-write encoder use), its values parsed too.
//! The third checks 5000 `event` lines (string fields, an escaped space in a tag): read in one
//! pass too (a plain string and an escaped separator are plain), split by the grammar's walk. The
//! last only splits both bodies into lines.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use storwatch_wire::lp::{
    check_line, lines, parse_line, parse_view, Backend, Backends, Checked, LineLimits, Parsed,
    Precision,
};

fn body() -> String {
    let mut out = String::new();
    for i in 0..5000u64 {
        out.push_str(&format!(
            "disk,host=node{:03},device=sd{},name=sd{},kind=disk,rotational=1 \
             r_per_s=12.5,w_per_s=30.25,rkb_per_s=1024.5,wkb_per_s=2048.25,r_await_ms=1.25,\
             w_await_ms=3.5,aqu_sz=0.5,util_pct=45.25,util_max_pct=99.5,saturated_s=2i {}\n",
            i % 600,
            i % 24,
            i % 24,
            1_700_000_000_000_000_000u64 + i
        ));
    }
    out
}

/// Lines with string fields and an escape.
fn events() -> String {
    let mut out = String::new();
    for i in 0..5000u64 {
        out.push_str(&format!(
            "event,host=node{:03},source=md,object=md\\ {} text=\"array md{} degraded\",\
             from_state=\"clean\",to_state=\"degraded\" {}\n",
            i % 600,
            i % 4,
            i % 4,
            1_700_000_000_000_000_000u64 + i
        ));
    }
    out
}

fn bench(c: &mut Criterion) {
    let body = body();
    let mut g = c.benchmark_group("check_line 5000 disk lines");
    g.throughput(Throughput::Elements(5000));
    for b in Backend::ALL {
        g.bench_function(b.name(), |bench| {
            bench.iter(|| {
                let mut ok = 0;
                for (_, l) in lines(&body) {
                    if let Checked::Accepted(_) =
                        check_line(l, Backends::one(b), Precision::NS, 0, &LineLimits::NONE)
                    {
                        ok += 1;
                    }
                }
                assert_eq!(ok, 5000);
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("read 5000 disk lines by the 1.x grammar");
    g.throughput(Throughput::Elements(5000));
    g.bench_function("parse_line", |bench| {
        bench.iter(|| {
            let mut fields = 0;
            for (_, l) in lines(&body) {
                if let Ok(p) = parse_line(l, Backend::V1) {
                    fields += p.fields.len();
                }
            }
            assert_eq!(fields, 50_000);
        })
    });
    g.bench_function("parse_view, values parsed", |bench| {
        bench.iter(|| {
            let mut fields = 0;
            for (_, l) in lines(&body) {
                if let Ok(Parsed::Go(v)) = parse_view(l, Backend::V1) {
                    fields += v.fields().filter(|f| f.value().is_ok()).count();
                }
            }
            assert_eq!(fields, 50_000);
        })
    });
    g.finish();
    let events = events();
    let mut g = c.benchmark_group("check_line 5000 event lines");
    g.throughput(Throughput::Elements(5000));
    g.bench_function(Backend::V1.name(), |bench| {
        bench.iter(|| {
            let mut ok = 0;
            for (_, l) in lines(&events) {
                if let Checked::Accepted(_) = check_line(
                    l,
                    Backends::one(Backend::V1),
                    Precision::NS,
                    0,
                    &LineLimits::NONE,
                ) {
                    ok += 1;
                }
            }
            assert_eq!(ok, 5000);
        })
    });
    g.finish();
    // the lines cut apart (a queue read cut into batches, a request body into lines): a line
    // with a quote or a backslash before its newline is walked by the grammar's rules
    let mut g = c.benchmark_group("split 5000 lines");
    g.throughput(Throughput::Elements(5000));
    for (name, text) in [("disk lines", &body), ("event lines", &events)] {
        g.bench_function(name, |bench| {
            bench.iter(|| {
                let bytes: usize = lines(text).map(|(_, l)| l.len()).sum();
                assert_eq!(bytes + 5000, text.len());
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
