//! The agent's `/proc` parsers against the `procfs-core` crate's on the same text.
//!
//! `cargo bench -p storwatch-agent --bench procfs_core -- --warm-up-time 1 --measurement-time 3`
//!
//! Both parse from memory (procfs-core through `FromBufRead::from_buf_read` on a `&[u8]`), so the
//! figures compare parsing alone, not reading. Before timing, each input is parsed once by both
//! under a counting allocator and the heap allocations per parse are printed; that both read the
//! same numbers is checked by `tests/it/procfs_core_agrees.rs`.
//!
//! Like for like: where procfs-core reads more of a file than the agent's parser does (every
//! `cpu` line of `/proc/stat`, every key of `/proc/meminfo`), the agent's side parses as much
//! (each line through its parser), so that each row times the same work.
//!
//! Inputs: generated `/proc/diskstats` (250 and 1000 devices) and `/proc/net/dev` (16
//! interfaces) from `inputs/mod.rs`; `/proc/stat` of a 64-CPU host, `/proc/meminfo` and
//! `/proc/pressure/io` from the agent's fixtures.

// The counting allocator is the one place that needs `unsafe`: it forwards to the system
// allocator unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use procfs_core::net::InterfaceDeviceStatus;
use procfs_core::{
    DiskStats, ExplicitSystemInfo, FromBufRead, FromBufReadSI, IoPressure, KernelStats, Meminfo,
};
use storwatch_agent::sources::{diskstats, meminfo, netdev, pressure, stat};

mod inputs;
use inputs::{diskstats_text, netdev_text};

/// Counts allocations (not frees or bytes): enough to compare the two parsers' heap traffic.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (including reallocations) `f` makes.
fn allocations<T>(f: impl FnOnce() -> T) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let out = f();
    let n = ALLOCATIONS.load(Ordering::Relaxed) - before;
    drop(black_box(out));
    n
}

/// What `/proc/stat` parsing needs of the system: only ticks per second (USER_HZ) is used.
const SYSTEM: ExplicitSystemInfo = ExplicitSystemInfo {
    boot_time_secs: 0,
    ticks_per_second: 100,
    page_size: 4096,
    is_little_endian: true,
};

const STAT_64CPU: &str = include_str!("../fixtures/stat/mkhost-generated-64cpu-1024-irqs.txt");
const MEMINFO: &str = include_str!("../fixtures/meminfo/build-machine-linux-6.18.txt");
const PRESSURE_IO: &str = include_str!("../fixtures/pressure/build-machine-linux-6.18-io.txt");

/// Times both parsers on `text` in one group, after printing their allocations per parse.
/// Each closure parses, then reduces the result to a number so that nothing borrowed escapes
/// (the agent's rows borrow device names from the text); building and dropping the result is
/// part of what is timed, on both sides.
fn compare(
    c: &mut Criterion,
    group: &str,
    text: &str,
    ours: impl Fn(&str) -> usize,
    theirs: impl Fn(&[u8]) -> usize,
) {
    eprintln!(
        "allocations per parse, {group}: storwatch {}, procfs-core {}",
        allocations(|| ours(text)),
        allocations(|| theirs(text.as_bytes())),
    );
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("storwatch", |b| b.iter(|| ours(black_box(text))));
    g.bench_function("procfs-core", |b| {
        b.iter(|| theirs(black_box(text.as_bytes())))
    });
    g.finish();
}

fn versus(c: &mut Criterion) {
    for devices in [250, 1000] {
        let text = diskstats_text(devices);
        compare(
            c,
            &format!("diskstats {devices} devices"),
            &text,
            |t| diskstats::parse(t).rows.len(),
            |t| {
                DiskStats::from_buf_read(t)
                    .expect("procfs-core parses diskstats")
                    .0
                    .len()
            },
        );
    }
    let text = netdev_text(16);
    compare(
        c,
        "net/dev 16 interfaces",
        &text,
        |t| netdev::parse(t).rows.len(),
        |t| {
            InterfaceDeviceStatus::from_buf_read(t)
                .expect("procfs-core parses net/dev")
                .0
                .len()
        },
    );
    // Like for like: procfs-core parses all 65 `cpu` lines (and the few one-number lines),
    // the agent's parser only the aggregate one and counts the others. So the agent's side
    // here parses every `cpu` line, each given to its parser as the aggregate line it reads.
    let cpu_lines: Vec<String> = STAT_64CPU
        .lines()
        .filter(|l| l.starts_with("cpu"))
        .map(|l| format!("cpu {}\n", l.split_once(' ').map_or("", |(_, v)| v)))
        .collect();
    compare(
        c,
        "stat 64 cpus, every cpu line",
        STAT_64CPU,
        |t| {
            let s = stat::parse(t).expect("stat fixture parses");
            let mut n = s.cpus as usize;
            for l in &cpu_lines {
                n += stat::parse(l).expect("cpu line parses").cpu.user as usize & 1;
            }
            n
        },
        |t| {
            KernelStats::from_buf_read(t, &SYSTEM)
                .expect("procfs-core parses stat")
                .cpu_time
                .len()
        },
    );
    // Like for like: procfs-core reads every key of the file (54), the agent's parser the five
    // it uses. So the agent's side here reads every value, each line given to its parser under
    // a key it reads.
    let mem_lines: Vec<String> = MEMINFO
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(_, v)| format!("Dirty:{v}\n"))
        .collect();
    compare(
        c,
        "meminfo, every key",
        MEMINFO,
        |t| {
            let mut n = meminfo::parse(t)
                .expect("meminfo fixture parses")
                .dirty_kb
                .unwrap_or(0) as usize;
            for l in &mem_lines {
                n ^= meminfo::parse(l)
                    .expect("meminfo line parses")
                    .dirty_kb
                    .unwrap_or(0) as usize;
            }
            n
        },
        |t| {
            let m = Meminfo::from_buf_read(t).expect("procfs-core parses meminfo");
            (m.dirty / 1024) as usize
        },
    );
    compare(
        c,
        "pressure io",
        PRESSURE_IO,
        |t| {
            let p = pressure::parse(t).expect("pressure fixture parses");
            p.some.map_or(0, |s| s.total_us) as usize
        },
        |t| {
            let p = IoPressure::from_buf_read(t).expect("procfs-core parses pressure");
            p.some.total as usize
        },
    );
}

criterion_group!(benches, versus);
criterion_main!(benches);
