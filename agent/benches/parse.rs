//! Parsing cost of the files the agent reads every second.
//!
//! `cargo bench -p storwatch-agent --bench parse -- --warm-up-time 1 --measurement-time 3`
//!
//! Inputs: `inputs/mod.rs`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use storwatch_agent::sources::{diskstats, netdev};

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

criterion_group!(benches, parse);
criterion_main!(benches);
