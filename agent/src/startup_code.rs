//! The agent's own file let go of once it has started (docs/performance.md, "The agent's code in
//! memory").
//!
//! The kernel maps a program's code 64 KiB around each page it runs (`fault_around_bytes`), and a
//! page once mapped stays in the process's resident set until the process ends. Startup —
//! argument parsing, the configuration, the first round of every monitor, the loader's
//! relocation tables — leaves some 2–3 MB of the agent's own file mapped that the steady state
//! never runs or reads again: most of the agent's resident size with the HTTP output. After its
//! first report (and once more two minutes in: [`RELEASE_AGAIN_AFTER`]) the agent
//! unmaps its read-only, unmodified mappings of that file
//! (`madvise(MADV_DONTNEED)`), and asks the kernel to drop the file's pages that no process maps
//! from the page cache: a file written or read whole is cached in large folios, and a fault in
//! one maps much more than the 64 KiB around it. What runs after is read again a page at a
//! time, once (the mappings are `MADV_RANDOM`: no read-ahead). A mapping that holds a page the
//! process wrote (the relocated `.data.rel.ro`, the GOT: a private copy, counted as
//! `Anonymous`) is never touched, since dropping it would bring back the file's unrelocated
//! bytes. (A page of the file itself may be dirty, the binary just installed and not yet
//! written back: that is the file's own content, and counts in `Private_Dirty`, not
//! `Anonymous`.)

use std::io;
use std::path::Path;
use std::time::Duration;

/// When the agent lets go of its code once more, after the first report's [`release`]: by then
/// the monitors have run their first rounds (the drive and controller monitors', at start),
/// Prometheus has scraped (every minute by its default) and the output has connected, and the
/// code that only those first times ran leaves the resident set (0.3–0.5 MB at 200 disks with
/// both outputs; docs/performance.md, "Run of 2026-12-07").
pub const RELEASE_AGAIN_AFTER: Duration = Duration::from_secs(120);

/// [`release`], its outcome logged at debug level; `what` names the code let go of.
pub fn release_logged(what: &str) {
    match release() {
        Ok((kb, mappings)) => tracing::debug!(kb, mappings, "{what} code unmapped"),
        Err(e) => tracing::debug!("{what} code left mapped: {e}"),
    }
}

/// A mapping of the agent's own file that can be let go of: `start..end` (addresses), with
/// `rss_kb` of it resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Releasable {
    pub start: usize,
    pub end: usize,
    pub rss_kb: u64,
}

/// The file a mapping is of, as `/proc/PID/maps` names it: the device's major and minor numbers
/// and the inode (a path may have been replaced since: an upgrade that renames a new binary over
/// the old).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

impl FileId {
    /// From `stat`'s `st_dev` (glibc's encoding of a `dev_t`) and `st_ino`.
    pub fn from_dev(dev: u64, inode: u64) -> Self {
        FileId {
            major: (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)) as u32,
            minor: (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32,
            inode,
        }
    }
}

/// The mappings of `file` in `smaps` (the text of `/proc/PID/smaps`) that can be let go of:
/// private, not writable, with no page of their own (`Anonymous: 0 kB`: none copied on write),
/// and something resident. A mapping whose block lacks either field, or has one unreadable, is
/// not one.
pub fn releasable(smaps: &str, file: FileId) -> Vec<Releasable> {
    scan(smaps, |b| b.file == Some(file))
}

/// The shared libraries' mappings in `smaps` that can be let go of, as [`releasable`] tells
/// them: those of a file whose name has `.so` as a suffix or before a version (`libc.so.6`,
/// `ld-linux-x86-64.so.2`), other than `exe`. The loader's relocated data (`.data.rel.ro`, the
/// GOT, read-only once relocated) and a page a debugger wrote (a breakpoint) are pages of the
/// process's own, and keep their mapping whole.
pub fn releasable_libraries(smaps: &str, exe: FileId) -> Vec<Releasable> {
    scan(smaps, |b| b.shared_object && b.file != Some(exe))
}

fn scan(smaps: &str, wanted: impl Fn(&Block) -> bool) -> Vec<Releasable> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    let mut done = |b: Block| {
        if wanted(&b) {
            out.extend(b.releasable());
        }
    };
    for line in smaps.lines() {
        if let Some(b) = Block::head(line) {
            if let Some(b) = cur.take() {
                done(b);
            }
            cur = Some(b);
        } else if let Some(b) = cur.as_mut() {
            b.field(line);
        }
    }
    if let Some(b) = cur {
        done(b);
    }
    out
}

/// Whether a mapped file's path names a shared object: `.so` at the end of its name or before a
/// version.
fn shared_object(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so") || name.contains(".so.")
}

#[derive(Debug, Default)]
struct Block {
    start: usize,
    end: usize,
    private_read_only: bool,
    file: Option<FileId>,
    /// The file is a shared library ([`shared_object`]).
    shared_object: bool,
    rss_kb: Option<u64>,
    anonymous_kb: Option<u64>,
}

impl Block {
    /// `start-end perms offset major:minor inode [path]`
    fn head(line: &str) -> Option<Block> {
        let mut f = line.split_ascii_whitespace();
        let (start, end) = f.next()?.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        let perms = f.next()?.as_bytes();
        if perms.len() != 4 {
            return None;
        }
        let _offset = u64::from_str_radix(f.next()?, 16).ok()?;
        let (major, minor) = f.next()?.split_once(':')?;
        let major = u32::from_str_radix(major, 16).ok()?;
        let minor = u32::from_str_radix(minor, 16).ok()?;
        let inode = f.next()?.parse().ok()?;
        let path = f.next().unwrap_or("");
        Some(Block {
            start,
            end,
            private_read_only: perms[0] == b'r' && perms[1] == b'-' && perms[3] == b'p',
            file: (inode != 0).then_some(FileId {
                major,
                minor,
                inode,
            }),
            shared_object: inode != 0 && shared_object(path),
            ..Block::default()
        })
    }

    fn field(&mut self, line: &str) {
        let Some((name, rest)) = line.split_once(':') else {
            return;
        };
        let kb = || {
            rest.trim()
                .strip_suffix(" kB")
                .and_then(|n| n.trim().parse::<u64>().ok())
        };
        match name {
            "Rss" => self.rss_kb = kb(),
            "Anonymous" => self.anonymous_kb = kb(),
            _ => {}
        }
    }

    fn releasable(self) -> Option<Releasable> {
        let rss_kb = self.rss_kb?;
        (self.file.is_some()
            && self.private_read_only
            && self.anonymous_kb == Some(0)
            && rss_kb > 0
            && self.start < self.end)
            .then_some(Releasable {
                start: self.start,
                end: self.end,
                rss_kb,
            })
    }
}

/// Set (to anything), [`release`] leaves the executable's page cache as it is.
pub const KEEP_PAGE_CACHE: &str = "STORWATCH_KEEP_PAGE_CACHE";

/// Asks the kernel to drop `path`'s clean pages that no process maps from the page cache
/// (`POSIX_FADV_DONTNEED`); what fails is left as it is.
///
/// A file written or read whole is cached in large folios (up to 2 MiB on Linux 6.18), and a
/// fault in one maps much of it: 100 % of the agent's resident code was in such folios, 4.8–5.1
/// MB of it, where what runs after startup needs far less. Dropped, the code the agent runs
/// next is read again a page at a time ([`release`] made its mappings `MADV_RANDOM`), each page
/// once: a few hundred reads of 4 KiB, once. A binary just installed is dirty in the page cache
/// and not dropped until written back; a page another process maps stays.
#[cfg(target_os = "linux")]
fn drop_page_cache(path: &Path) {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    // SAFETY: an advice on a descriptor this function owns; no memory is touched.
    #[allow(unsafe_code)]
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Unmaps the calling process's read-only, unmodified mappings of its own executable and of the
/// shared libraries it loaded, and returns what was resident in them (kB) and how many there
/// were. The executable's mappings are made `MADV_RANDOM` first, and its pages no process maps
/// are then dropped from the page cache (unless [`KEEP_PAGE_CACHE`] is set): see
/// [`drop_page_cache`].
///
/// The libraries' pages stay in the page cache, which every process on the host shares: what
/// is let go of is the agent's mapping of them. Startup ran much of libc (the loader's work,
/// thread and signal set-up, the configuration's reading) that the steady state never runs
/// again, and a page once mapped stays in the resident set until unmapped: 2.2 MB of libc,
/// libm, libgcc_s and the loader were mapped at 200 disks with every monitor on, 1.2 MB of them
/// mapped again by the steady state (docs/performance.md, "The shared libraries").
pub fn release() -> io::Result<(u64, usize)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let exe = std::fs::metadata("/proc/self/exe")?;
        let exe = FileId::from_dev(exe.dev(), exe.ino());
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let mut kb = 0;
        let mut n = 0;
        for m in releasable(&smaps, exe) {
            // no read-ahead around a fault here from now on: one page read, one mapped
            unmap_pages(&m, Some(libc::MADV_RANDOM))?;
            kb += m.rss_kb;
            n += 1;
        }
        if n > 0 && std::env::var_os(KEEP_PAGE_CACHE).is_none() {
            drop_page_cache(Path::new("/proc/self/exe"));
        }
        for m in releasable_libraries(&smaps, exe) {
            unmap_pages(&m, None)?;
            kb += m.rss_kb;
            n += 1;
        }
        Ok((kb, n))
    }
    #[cfg(not(target_os = "linux"))]
    Ok((0, 0))
}

/// Drops a mapping's pages from the process's page tables (`MADV_DONTNEED`), after `advice` if
/// any.
#[cfg(target_os = "linux")]
fn unmap_pages(m: &Releasable, advice: Option<libc::c_int>) -> io::Result<()> {
    // SAFETY: the range is one whole mapping of this process (page-aligned, as the kernel lists
    // it), private, read-only and holding no page of its own: dropping its pages only unmaps the
    // file's page cache, which the next access maps again. No Rust object lives in it (it is a
    // program's or a library's file, not memory it allocated).
    #[allow(unsafe_code)]
    let rc = unsafe {
        let (at, len) = (m.start as *mut libc::c_void, m.end - m.start);
        match advice.map_or(0, |a| libc::madvise(at, len, a)) {
            0 => libc::madvise(at, len, libc::MADV_DONTNEED),
            rc => rc,
        }
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const AGENT: FileId = FileId {
        major: 0xfe,
        minor: 0,
        inode: 9_977_964,
    };

    /// A capture in `fixtures/smaps/`.
    fn smaps_fixture(name: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/smaps/");
        std::fs::read_to_string(format!("{dir}{name}")).unwrap()
    }

    fn fixture() -> String {
        smaps_fixture("agent-release-linux-6.18.txt")
    }

    #[test]
    fn the_read_only_clean_mappings_of_the_agents_file_are_released() {
        // the captured agent: headers and read-only data, code, the relocated data, data
        assert_eq!(
            releasable(&fixture(), AGENT),
            vec![
                Releasable {
                    start: 0x55f7_fa5a_8000,
                    end: 0x55f7_fa6e_a000,
                    rss_kb: 608
                },
                Releasable {
                    start: 0x55f7_fa6e_a000,
                    end: 0x55f7_fac1_5000,
                    rss_kb: 3360
                },
            ]
        );
    }

    #[test]
    fn another_file_the_heap_and_written_pages_are_not() {
        let smaps = fixture();
        // libc's code is another file (and shared with every process on the host): asked for
        // the agent's file, only the agent's mappings; asked for libc's, only libc's
        assert!(releasable(&smaps, AGENT)
            .iter()
            .all(|m| m.start != 0x7f32_59e7_1000));
        let libc = FileId {
            inode: 326_269,
            ..AGENT
        };
        assert_eq!(
            releasable(&smaps, libc)
                .iter()
                .map(|m| m.start)
                .collect::<Vec<_>>(),
            vec![0x7f32_59e7_1000]
        );
        // the same inode on another device is another file
        assert_eq!(releasable(&smaps, FileId { minor: 1, ..AGENT }), vec![]);
        // each edit of the first mapping's block, and how many mappings are then released
        for (from, to, released) in [
            // a page copied on write (relro after the loader's relocation)
            (
                "Anonymous:             0 kB",
                "Anonymous:             4 kB",
                1,
            ),
            // a page of the file dirty in the page cache is the file's own content
            (
                "Private_Dirty:         0 kB",
                "Private_Dirty:       608 kB",
                2,
            ),
            // a field missing or unreadable counts as a page of its own
            ("Anonymous:             0 kB\n", "", 1),
            (
                "Anonymous:             0 kB",
                "Anonymous:             x kB",
                1,
            ),
            ("Rss:                 608 kB\n", "", 1),
            // a shared mapping of the file
            (" r--p 00000000 fe:00", " r--s 00000000 fe:00", 1),
        ] {
            let edited = smaps.replacen(from, to, 1);
            assert_eq!(
                releasable(&edited, AGENT).len(),
                released,
                "{from:?} -> {to:?}"
            );
        }
        // garbage
        assert_eq!(releasable("no smaps\n\u{0}\n", AGENT), vec![]);
        assert_eq!(releasable("", AGENT), vec![]);
    }

    fn whole() -> String {
        smaps_fixture("agent-release-linux-6.18-whole.txt")
    }

    #[test]
    fn the_shared_libraries_clean_read_only_mappings_are_released() {
        let smaps = whole();
        let exe = FileId {
            major: 0xfe,
            minor: 0,
            inode: 9_977_916,
        };
        let starts = |v: Vec<Releasable>| v.iter().map(|m| m.start).collect::<Vec<_>>();
        // libc's headers, code and read-only data; libm's headers and code (its read-only data
        // not resident); libgcc_s's headers and code; the loader's headers, code and data. Not
        // the relocated data of any (`Anonymous` = `Rss`), nor the writable data, nor the
        // agent's own file, the heap, the stacks, `[vdso]`
        assert_eq!(
            starts(releasable_libraries(&smaps, exe)),
            vec![
                0x7f86_3352_a000,
                0x7f86_3355_0000,
                0x7f86_336a_6000,
                0x7f86_3370_c000,
                0x7f86_3371_c000,
                0x7f86_337e_c000,
                0x7f86_337e_f000,
                0x7f86_3381_f000,
                0x7f86_3382_0000,
                0x7f86_3384_6000,
            ]
        );
        let kb: u64 = releasable_libraries(&smaps, exe)
            .iter()
            .map(|m| m.rss_kb)
            .sum();
        assert_eq!(kb, 152 + 1088 + 168 + 64 + 256 + 12 + 64 + 4 + 152 + 40);
        // the agent's own: its headers and code, as from the other capture
        assert_eq!(
            starts(releasable(&smaps, exe)),
            vec![0x55c4_9d8b_c000, 0x55c4_9d9f_f000]
        );
        // libc's code with a page a debugger wrote (a breakpoint: copied on write) is kept
        let libc_code = "7f8633550000-7f86336a6000 r-xp 00026000 fe:00 326269";
        let at = smaps.find(libc_code).unwrap();
        let anon = at + smaps[at..].find("Anonymous:             0 kB").unwrap();
        let mut edited = smaps.clone();
        edited.replace_range(anon..anon + 27, "Anonymous:             4 kB");
        let left = starts(releasable_libraries(&edited, exe));
        assert_eq!(left.len(), 9);
        assert!(!left.contains(&0x7f86_3355_0000));
        // the agent's file is never taken for a library, whatever its name
        let renamed = smaps.replace("/usr/bin/storwatch-agent", "/usr/lib/storwatch-agent.so.1");
        assert_eq!(releasable_libraries(&renamed, exe).len(), 10);
    }

    #[test]
    fn a_shared_object_is_named_so_or_so_and_a_version() {
        for yes in [
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ] {
            assert!(shared_object(yes), "{yes}");
        }
        assert!(shared_object("/opt/x/libfoo.so"));
        for no in [
            "/usr/bin/storwatch-agent",
            "/run/x.sock",
            "/opt/x.so.d/data",
            "sonar",
            "",
        ] {
            assert!(!shared_object(no), "{no}");
        }
    }

    #[test]
    fn a_dev_t_is_split_as_glibc_encodes_it() {
        // 254:0 (virtio disk), 8:17, and a major and minor past 8 bits
        assert_eq!(FileId::from_dev(0xfe00, 1).major, 254);
        assert_eq!(FileId::from_dev(0xfe00, 1).minor, 0);
        let sdb1 = FileId::from_dev(0x811, 1);
        assert_eq!((sdb1.major, sdb1.minor), (8, 17));
        // makedev(259, 300) = (259 & 0xfff) << 8 | (300 & 0xff) | (300 & !0xff) << 12
        let nvme = FileId::from_dev((259 << 8) | (300 & 0xff) | ((300 & !0xff) << 12), 1);
        assert_eq!((nvme.major, nvme.minor), (259, 300));
    }

    /// Pages of `file` in the page cache, and its pages in all (`mincore` of a mapping of it
    /// that is never read).
    fn cached_pages(file: &std::fs::File, len: usize) -> (usize, usize) {
        use std::os::fd::AsRawFd;
        let page = 4096;
        let pages = len.div_ceil(page);
        let mut v = vec![0u8; pages];
        #[allow(unsafe_code)]
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(at, libc::MAP_FAILED);
            assert_eq!(libc::mincore(at, len, v.as_mut_ptr()), 0);
            libc::munmap(at, len);
        }
        (v.iter().filter(|b| **b & 1 == 1).count(), pages)
    }

    #[test]
    fn a_clean_file_nobody_maps_leaves_the_page_cache() {
        use std::io::{Read, Write};
        // beside the test binary: a disk's file system, whose page cache the advice drops (a
        // tmpfs file is only ever in memory)
        let exe = std::env::current_exe().unwrap();
        let path = exe.with_file_name(format!("drop-page-cache-{}", std::process::id()));
        let len = 1 << 20;
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; len]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let mut f = std::fs::File::open(&path).unwrap();
        f.read_to_end(&mut Vec::new()).unwrap();
        let (cached, pages) = cached_pages(&f, len);
        assert_eq!(cached, pages, "read whole: in the page cache");
        drop_page_cache(&path);
        let (cached, _) = cached_pages(&f, len);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cached, 0, "{cached} of {pages} pages still cached");
    }

    /// Runs the ignored test `name` in a process of its own, alone: in the shared test process
    /// the other tests' threads map code back in while it is measured.
    fn in_a_process_of_its_own(name: &str) {
        let exe = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                &format!("startup_code::tests::{name}"),
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("STORWATCH_RELEASE_PROBE", "1")
            .output()
            .expect("the test binary runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("1 passed") && said.contains("released:"),
            "{name}: {said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn the_test_binary_alone_lets_go_of_its_own_code_and_runs_on() {
        in_a_process_of_its_own("own_code_probe");
    }

    #[test]
    fn the_test_binary_alone_lets_go_of_its_libraries_and_runs_on() {
        in_a_process_of_its_own("libraries_probe");
    }

    #[test]
    #[ignore = "run by the_test_binary_alone_lets_go_of_its_own_code_and_runs_on"]
    fn own_code_probe() {
        use std::os::unix::fs::MetadataExt;
        if std::env::var_os("STORWATCH_RELEASE_PROBE").is_none() {
            return;
        }
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        let file = FileId::from_dev(exe.dev(), exe.ino());
        let before: u64 = releasable(&std::fs::read_to_string("/proc/self/smaps").unwrap(), file)
            .iter()
            .map(|m| m.rss_kb)
            .sum();
        assert!(before > 0, "the test binary's code is resident");
        let (kb, n) = release().unwrap();
        assert!(kb > 0 && n >= 1, "{kb} kB in {n} mappings");
        // the code runs on: it is mapped again as it runs
        let again = fixture();
        assert_eq!(releasable(&again, AGENT).len(), 2);
        let after: u64 = releasable(&std::fs::read_to_string("/proc/self/smaps").unwrap(), file)
            .iter()
            .map(|m| m.rss_kb)
            .sum();
        assert!(after < before, "{after} kB resident after, {before} before");
        println!("released: {before} kB of its code resident before, {after} after");
    }

    #[test]
    #[ignore = "run by the_test_binary_alone_lets_go_of_its_libraries_and_runs_on"]
    fn libraries_probe() {
        use std::os::unix::fs::MetadataExt;
        if std::env::var_os("STORWATCH_RELEASE_PROBE").is_none() {
            return;
        }
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        let exe = FileId::from_dev(exe.dev(), exe.ino());
        let resident = || -> u64 {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            releasable_libraries(&smaps, exe)
                .iter()
                .map(|m| m.rss_kb)
                .sum()
        };
        let before = resident();
        assert!(before > 0, "libc is resident");
        release().unwrap();
        // libc runs on (this formatting, the read of smaps): mapped again as it runs
        let after = resident();
        assert!(after < before, "{after} kB resident after, {before} before");
        println!("released: {before} kB of its libraries resident before, {after} after");
    }
}
