//! Filesystem capacity: `statvfs(3)` on a mount point, and the text stand-in the simulator
//! writes in its place.
//!
//! `statvfs` returns counts of fragments (`f_frsize` bytes each: `f_blocks` in all, `f_bfree`
//! free, `f_bavail` free for unprivileged users — ext4 and XFS keep `f_bfree − f_bavail` back for
//! root), inodes (`f_files`, `f_ffree`, `f_favail`) and flags (`ST_RDONLY`). It is a system call,
//! not a file: on a local filesystem it answers from the superblock in microseconds, but on a
//! network filesystem whose server is gone it blocks — the collector calls it off the sampling
//! thread, with a deadline (see `collect/fs.rs`).
//!
//! A host simulated under `--proc-root` has no real filesystems behind its mount table, so the
//! simulator writes the numbers into a file (`[fs] statvfs_file`), one line per mount point:
//!
//! ```text
//! # mount point (escaped as in mountinfo)  frsize blocks bfree bavail files ffree favail ro
//! /srv/pool1 4096 3906250000 1468750000 1468750000 1953125000 1953000000 1953000000 0
//! ```

use std::io;
use std::path::Path;

use super::mountinfo::unescape;
use super::{fields, parse_u64, ParseError, Rows};

/// One filesystem's capacity, in the units of `struct statvfs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStat {
    /// Fragment size, bytes (the unit of the block counts).
    pub frsize: u64,
    /// Size, in fragments.
    pub blocks: u64,
    /// Free, in fragments (root included).
    pub bfree: u64,
    /// Free for unprivileged users, in fragments.
    pub bavail: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Free inodes for unprivileged users.
    pub favail: u64,
    /// Mounted read-only (`ST_RDONLY`).
    pub read_only: bool,
}

impl FsStat {
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.frsize)
    }

    /// Used bytes (`blocks − bfree`, as df counts them).
    pub fn used_bytes(&self) -> u64 {
        self.blocks
            .saturating_sub(self.bfree)
            .saturating_mul(self.frsize)
    }

    /// Bytes an unprivileged user can still write.
    pub fn avail_bytes(&self) -> u64 {
        self.bavail.saturating_mul(self.frsize)
    }

    /// Used share as df's `Use%` computes it: used / (used + avail), so the space kept back for
    /// root counts as full. `None` for a filesystem with no blocks (some FUSE mounts).
    pub fn used_pct(&self) -> Option<f64> {
        let used = self.blocks.saturating_sub(self.bfree);
        let denom = used.saturating_add(self.bavail);
        (denom > 0).then(|| used as f64 * 100.0 / denom as f64)
    }

    /// Used inodes.
    pub fn inodes_used(&self) -> u64 {
        self.files.saturating_sub(self.ffree)
    }

    /// Used share of the inodes; `None` where the filesystem has no fixed count (btrfs, ZFS
    /// report 0 or a moving figure of 0 total).
    pub fn inodes_used_pct(&self) -> Option<f64> {
        (self.files > 0).then(|| self.inodes_used() as f64 * 100.0 / self.files as f64)
    }
}

/// `statvfs(3)` on `path`.
pub fn stat(path: &Path) -> io::Result<FsStat> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string; `buf` is a plain C struct the call fills
    // and that is only read after it returned 0.
    #[allow(unsafe_code)]
    let (rc, buf) = unsafe {
        let mut buf: libc::statvfs = std::mem::zeroed();
        let rc = libc::statvfs(c.as_ptr(), &mut buf);
        (rc, buf)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The field types differ between 32- and 64-bit targets; every value fits u64.
    #[allow(clippy::useless_conversion)]
    Ok(FsStat {
        frsize: u64::from(buf.f_frsize),
        blocks: u64::from(buf.f_blocks),
        bfree: u64::from(buf.f_bfree),
        bavail: u64::from(buf.f_bavail),
        files: u64::from(buf.f_files),
        ffree: u64::from(buf.f_ffree),
        favail: u64::from(buf.f_favail),
        read_only: buf.f_flag & libc::ST_RDONLY != 0,
    })
}

/// Parses the simulator's stand-in file: `(mount point, numbers)` per line.
pub fn parse_file(text: &str) -> Rows<(String, FsStat)> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut f = fields(t);
        let mp = f.next().unwrap_or_default();
        let nums: Vec<Option<u64>> = f.map(parse_u64).collect();
        match nums.as_slice() {
            [Some(frsize), Some(blocks), Some(bfree), Some(bavail), Some(files), Some(ffree), Some(favail), Some(ro)]
                if mp.starts_with('/') && bfree <= blocks && bavail <= bfree && ffree <= files =>
            {
                out.rows.push((
                    unescape(mp),
                    FsStat {
                        frsize: *frsize,
                        blocks: *blocks,
                        bfree: *bfree,
                        bavail: *bavail,
                        files: *files,
                        ffree: *ffree,
                        favail: *favail,
                        read_only: *ro != 0,
                    },
                ));
            }
            _ => out.errors.push(ParseError::new(
                i + 1,
                line,
                "expected: mount point, then frsize blocks bfree bavail files ffree favail ro \
                 as unsigned integers (bavail <= bfree <= blocks, ffree <= files)",
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_arithmetic() {
        // 1000 blocks of 4 KiB, 300 free of which 250 for users: df shows 700 used, 250
        // available, Use% 700 / 950 = 73.7 %.
        let s = FsStat {
            frsize: 4096,
            blocks: 1000,
            bfree: 300,
            bavail: 250,
            files: 100,
            ffree: 40,
            favail: 40,
            read_only: false,
        };
        assert_eq!(s.size_bytes(), 4_096_000);
        assert_eq!(s.used_bytes(), 700 * 4096);
        assert_eq!(s.avail_bytes(), 250 * 4096);
        let pct = s.used_pct().expect("has blocks");
        assert!((pct - 73.684).abs() < 0.001, "{pct}");
        assert_eq!(s.inodes_used(), 60);
        assert_eq!(s.inodes_used_pct(), Some(60.0));
        assert_eq!(FsStat::default().used_pct(), None);
        assert_eq!(FsStat::default().inodes_used_pct(), None);
    }

    #[test]
    fn the_root_filesystem_of_this_machine() {
        let s = stat(Path::new("/")).expect("statvfs(/) works");
        assert!(s.frsize > 0 && s.blocks > 0, "{s:?}");
        assert!(s.bavail <= s.bfree && s.bfree <= s.blocks, "{s:?}");
        assert!(stat(Path::new("/nonexistent/storwatch")).is_err());
    }

    #[test]
    fn stand_in_file() {
        let r = parse_file(
            "# comment\n/srv/a\\040b 4096 100 50 40 10 5 5 1\n\
             /bad 4096 100 150 40 10 5 5 0\nrel 1 1 1 1 1 1 1 0\n/short 1 2 3\n",
        );
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].0, "/srv/a b");
        assert!(r.rows[0].1.read_only);
        assert_eq!(
            r.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [3, 4, 5]
        );
    }
}
