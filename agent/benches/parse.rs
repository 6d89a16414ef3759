//! Parsing cost of the files the agent reads every second, and of the cgroup files the jobs
//! collector reads for every job once a report (`cpu.stat`, `io.stat`, the `*.pressure` files):
//! the full parsers beside the paths it uses.
//!
//! `cargo bench -p storwatch-agent --bench parse -- --warm-up-time 1 --measurement-time 3`
//!
//! Inputs: `inputs/mod.rs`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use storwatch_agent::sources::cgroup::{cpu_stat, io_stat, psi_totals};
use storwatch_agent::sources::{diskstats, netdev, pressure, Rows};

mod inputs;
use inputs::{diskstats_text, netdev_text};

fn parse(c: &mut Criterion) {
    let disks = diskstats_text(1000);
    assert_eq!(diskstats::parse(&disks).rows.len(), 1000);
    let mut group = c.benchmark_group("diskstats");
    group.throughput(Throughput::Bytes(disks.len() as u64));
    group.bench_function("1000 devices, 17 fields", |b| {
        b.iter(|| diskstats::parse(black_box(&disks)))
    });
    group.finish();

    let nics = netdev_text(16);
    let parsed = netdev::parse(&nics);
    assert_eq!((parsed.rows.len(), parsed.errors.len()), (16, 0));
    let mut group = c.benchmark_group("netdev");
    group.throughput(Throughput::Bytes(nics.len() as u64));
    group.bench_function("16 interfaces", |b| {
        b.iter(|| netdev::parse(black_box(&nics)))
    });
    group.finish();
}

/// A job's files as the kernel prints them (the shapes `bench/jobs-cost.sh` writes).
fn cgroup(c: &mut Criterion) {
    let cpu = "usage_usec 98701325189\nuser_usec 61355716211\nsystem_usec 37345608977\n\
               core_sched.force_idle_usec 0\nnr_periods 3936904\nnr_throttled 6004\n\
               throttled_usec 19175137007\nnr_bursts 0\nburst_usec 0\n";
    assert_eq!(
        cpu_stat::usage_usec(cpu).ok(),
        cpu_stat::parse(cpu).ok().map(|s| s.usage_usec)
    );
    let mut group = c.benchmark_group("cgroup cpu.stat");
    group.bench_function("parse, 9 keys", |b| {
        b.iter(|| cpu_stat::parse(black_box(cpu)))
    });
    group.bench_function("usage_usec alone", |b| {
        b.iter(|| cpu_stat::usage_usec(black_box(cpu)))
    });
    group.finish();

    let io = "8:0 rbytes=1048576000 wbytes=4096000 rios=64000 wios=1000 dbytes=0 dios=0\n\
              253:0 rbytes=1048576000 wbytes=4096000 rios=64000 wios=1000 dbytes=0 dios=0\n";
    assert_eq!(io_stat::parse(io).rows.len(), 2);
    let mut group = c.benchmark_group("cgroup io.stat");
    group.bench_function("parse, 2 devices", |b| {
        b.iter(|| io_stat::parse(black_box(io)))
    });
    let mut rows = Rows::default();
    group.bench_function("parse_into a reused vector, 2 devices", |b| {
        b.iter(|| io_stat::parse_into(black_box(io), &mut rows))
    });
    group.finish();

    let psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\n\
               full avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n";
    assert_eq!(
        psi_totals::parse(psi).ok().and_then(|t| t.some_us),
        Some(2_000_000)
    );
    let mut group = c.benchmark_group("cgroup pressure");
    group.bench_function("full parser (averages too)", |b| {
        b.iter(|| pressure::parse(black_box(psi)))
    });
    group.bench_function("totals only", |b| {
        b.iter(|| psi_totals::parse(black_box(psi)))
    });
    group.finish();
}

criterion_group!(benches, parse, cgroup);
criterion_main!(benches);
