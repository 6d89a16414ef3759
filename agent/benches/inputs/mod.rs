//! Inputs shared by the parser benches and the test that checks procfs-core reads the same
//! numbers (`tests/it/procfs_core_agrees.rs` includes this file by path).
//!
//! The inputs are generated in the kernel's own layout (`"%4d %7d %s %lu …"` for diskstats,
//! `"%6s: %7llu …"` for net/dev) with counters of realistic width for a disk server that has been
//! up for weeks, so the digit-parsing work matches a real host.

/// A small deterministic generator (xorshift64*), so runs compare like with like.
struct Counters(u64);

impl Counters {
    fn next(&mut self, max: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % max
    }
}

/// `/proc/diskstats` of `devices` block devices, 17 statistics each (Linux 5.5+).
pub(crate) fn diskstats_text(devices: usize) -> String {
    let mut rng = Counters(0x5eed);
    let mut out = String::new();
    for i in 0..devices {
        let (major, minor) = (8 + (i / 16) as u64, (i % 16) as u64 * 16);
        let name = format!(
            "sd{}{}",
            (b'a' + (i / 26 % 26) as u8) as char,
            (b'a' + (i % 26) as u8) as char
        );
        out.push_str(&format!("{major:4} {minor:7} {name}"));
        // reads merges sectors ms, writes merges sectors ms, in-flight, io ms, queue ms,
        // discards merges sectors ms, flushes ms.
        let widths = [
            1e9 as u64,
            1e8 as u64,
            1e12 as u64,
            1u64 << 32,
            1e9 as u64,
            1e8 as u64,
            1e12 as u64,
            1u64 << 32,
            64,
            1u64 << 32,
            1u64 << 32,
            1e6 as u64,
            1e5 as u64,
            1e9 as u64,
            1e6 as u64,
            1e7 as u64,
            1e8 as u64,
        ];
        for max in widths {
            out.push_str(&format!(" {}", rng.next(max)));
        }
        out.push('\n');
    }
    out
}

/// `/proc/net/dev` of `interfaces` interfaces.
pub(crate) fn netdev_text(interfaces: usize) -> String {
    let mut rng = Counters(0xfeed);
    let mut out = String::from(
        "Inter-|   Receive                                                |  Transmit\n \
         face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n",
    );
    for i in 0..interfaces {
        let name = format!("ens{}f{}np{}", 1 + i / 2, i % 2, i % 2);
        let c: Vec<u64> = [
            1u64 << 50,
            1 << 40,
            1000,
            100_000,
            10,
            100,
            1,
            1 << 20,
            1 << 50,
            1 << 40,
            10,
            10,
            1,
            1,
            1,
            1,
        ]
        .iter()
        .map(|&max| rng.next(max))
        .collect();
        out.push_str(&format!(
            "{name:>6}: {:7} {:7} {:4} {:4} {:4} {:5} {:10} {:9} {:8} {:7} {:4} {:4} {:4} {:5} {:7} {:10}\n",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13],
            c[14], c[15]
        ));
    }
    out
}
