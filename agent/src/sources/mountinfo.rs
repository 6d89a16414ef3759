//! `/proc/<pid>/mountinfo` (Linux 2.6.26+; `Documentation/filesystems/proc.rst` §3.5,
//! proc_pid_mountinfo(5)): one line per mount of the reading process's mount namespace.
//!
//! ```text
//! 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//! (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//! ```
//!
//! mount ID, parent ID, `major:minor` (the `st_dev` of files on it: the block device for a disk
//! filesystem, an anonymous `0:N` for ZFS, btrfs subvolumes, NFS and pseudo filesystems), root of
//! the mount within the filesystem (not `/` for a bind mount of a subtree), mount point, per-mount
//! options, zero or more optional fields (`shared:N`, `master:N`, …) ended by a lone `-`, the
//! filesystem type (`type[.subtype]`), the mount source (`/dev/sdb1`, `tank/data`, `none`) and
//! the per-superblock options. The kernel escapes space, tab, newline and backslash as `\040`,
//! `\011`, `\012`, `\134` in root, mount point and source; some filesystems print unescaped
//! spaces in their super options (cifs's `unc=`), so those are the rest of the line.
//!
//! The mount point is kept as printed, escapes and all: it names the filesystem in the `fs`
//! lines' `mount` tag, where the decoded characters would not survive (line protocol turns a
//! newline or tab in a tag into a space, so `/a\012b` and `/a\040b` would become one series);
//! [`Mount::path`] decodes it for the system call. Root and source are decoded.
//!
//! Only the fields the filesystem collector uses are kept. A line that does not parse is
//! reported and skipped; the other mounts keep their sample.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use super::{fields, parse_u64, ParseError, Rows};

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount ID (may be reused after an unmount).
    pub mount_id: u64,
    /// Device numbers of the filesystem (`st_dev`).
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// The directory of the filesystem mounted here (`/` unless a bind mount of a subtree).
    pub root: String,
    /// Where it is mounted, as mountinfo prints it: space, tab, newline and backslash kept as the
    /// kernel's octal escapes (`\040`, `\011`, `\012`, `\134`), so that it is one line of text
    /// and tells every mount point apart. [`Mount::path`] is the path itself.
    pub mount_point: String,
    /// Mounted read-only (`ro` in the per-mount options).
    pub read_only: bool,
    /// Filesystem type (`xfs`, `ext4`, `zfs`, `fuse.sshfs`).
    pub fstype: String,
    /// Mount source, unescaped (`/dev/mapper/vg0-data`, `tank/data`, `server:/export`).
    pub source: String,
}

impl Mount {
    /// The mount point as a path, the kernel's escapes undone (for system calls on it).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(OsString::from_vec(unescape_bytes(&self.mount_point)))
    }
}

/// Undoes the kernel's octal escapes (`\040` → space). A backslash not followed by three octal
/// digits is kept as it is. Bytes that are not UTF-8 become U+FFFD: for names shown, not for
/// paths used ([`unescape_bytes`]).
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    String::from_utf8_lossy(&unescape_bytes(s)).into_owned()
}

/// Undoes the kernel's octal escapes, to the bytes the kernel escaped.
pub fn unescape_bytes(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let oct = &bytes[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                let v = u32::from(oct[0] - b'0') * 64
                    + u32::from(oct[1] - b'0') * 8
                    + u32::from(oct[2] - b'0');
                if let Ok(b) = u8::try_from(v) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn parse_line(line: &str, line_no: usize) -> Result<Mount, ParseError> {
    let err = |reason: &str| ParseError::new(line_no, line, reason);
    let mut f = fields(line);
    let mount_id = f
        .next()
        .and_then(parse_u64)
        .ok_or_else(|| err("mount ID is not a number"))?;
    f.next()
        .and_then(parse_u64)
        .ok_or_else(|| err("parent ID is not a number"))?;
    let (major, minor) = f
        .next()
        .and_then(|d| d.split_once(':'))
        .and_then(|(a, b)| {
            Some((
                u32::try_from(parse_u64(a)?).ok()?,
                u32::try_from(parse_u64(b)?).ok()?,
            ))
        })
        .ok_or_else(|| err("device is not major:minor"))?;
    let root = f.next().ok_or_else(|| err("no root"))?;
    let mount_point = f.next().ok_or_else(|| err("no mount point"))?;
    let options = f.next().ok_or_else(|| err("no mount options"))?;
    // Optional fields up to the lone "-".
    loop {
        match f.next() {
            Some("-") => break,
            Some(_) => {}
            None => return Err(err("no \"-\" separator after the optional fields")),
        }
    }
    let fstype = f.next().ok_or_else(|| err("no filesystem type"))?;
    let source = f.next().ok_or_else(|| err("no mount source"))?;
    if !mount_point.starts_with('/') {
        return Err(err("mount point is not an absolute path"));
    }
    Ok(Mount {
        mount_id,
        major,
        minor,
        root: unescape(root),
        mount_point: mount_point.to_owned(),
        read_only: options.split(',').any(|o| o == "ro"),
        fstype: fstype.to_owned(),
        source: unescape(source),
    })
}

/// Parses the whole file: every mount that parses, and the lines that did not.
pub fn parse(text: &str) -> Rows<Mount> {
    let mut out = Rows::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, i + 1) {
            Ok(m) => out.rows.push(m),
            Err(e) => out.errors.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/mountinfo", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn kernel_doc_example() {
        let r = parse(
            "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
        );
        assert!(r.errors.is_empty());
        assert_eq!(
            r.rows,
            vec![Mount {
                mount_id: 36,
                major: 98,
                minor: 0,
                root: "/mnt1".into(),
                mount_point: "/mnt2".into(),
                read_only: false,
                fstype: "ext3".into(),
                source: "/dev/root".into(),
            }]
        );
    }

    #[test]
    fn escapes_no_optional_fields_read_only_and_zfs() {
        let r = parse(
            "6 1 0:6 / /home/a\\040b ro,relatime - zfs rpool/USERDATA/spaced rw\n\
             7 1 8:1 / /x\\134y\\012z rw - xfs /dev/sda1 rw\n",
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.rows[0].mount_point, "/home/a\\040b");
        assert_eq!(r.rows[0].path(), PathBuf::from("/home/a b"));
        assert!(r.rows[0].read_only);
        assert_eq!(r.rows[0].source, "rpool/USERDATA/spaced");
        assert_eq!((r.rows[0].major, r.rows[0].minor), (0, 6));
        assert_eq!(r.rows[1].mount_point, "/x\\134y\\012z");
        assert_eq!(r.rows[1].path(), PathBuf::from("/x\\y\nz"));
        assert!(!r.rows[1].read_only);
    }

    #[test]
    fn real_escaped_mount_points_stay_apart() {
        // tmpfs mounted at /mnt/x<newline>y, <space>, <tab> and <backslash> on this kernel: four
        // mount points as printed, four paths decoded, none the same.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/mountinfo/build-machine-linux-6.18-tmpfs-at-newline-space-tab-backslash.txt"
        ))
        .expect("fixture is readable");
        let r = parse(&text);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let x: Vec<(&str, PathBuf)> = r
            .rows
            .iter()
            .filter(|m| m.mount_point.starts_with("/mnt/x"))
            .map(|m| (m.mount_point.as_str(), m.path()))
            .collect();
        assert_eq!(
            x,
            vec![
                ("/mnt/x\\012y", PathBuf::from("/mnt/x\ny")),
                ("/mnt/x\\040y", PathBuf::from("/mnt/x y")),
                ("/mnt/x\\011y", PathBuf::from("/mnt/x\ty")),
                ("/mnt/x\\134y", PathBuf::from("/mnt/x\\y")),
            ]
        );
        assert_eq!(r.rows[2].source, "tmpfs 1");
    }

    #[test]
    fn bad_lines_are_reported_and_the_rest_kept() {
        let r = parse(
            "x 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 8:1 / /a rw shared:1 ext4 /dev/sda1 rw\n\
             3 1 8 / /b rw - ext4 /dev/sda1 rw\n\
             4 1 8:2 / relative rw - ext4 /dev/sda2 rw\n\
             5 1 8:3 / /c rw -\n\
             6 1 8:4 / /d rw - ext4 /dev/sda4 rw\n",
        );
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].mount_point, "/d");
        let lines: Vec<usize> = r.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn odd_escapes_are_kept_as_written() {
        assert_eq!(unescape("a\\"), "a\\");
        assert_eq!(unescape("a\\04"), "a\\04");
        assert_eq!(unescape("a\\999"), "a\\999");
        assert_eq!(unescape("a\\777b"), "a\\777b");
        assert_eq!(unescape("\\040"), " ");
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }

        #[test]
        fn escaped_mount_points_round_trip(name in "[ -~\t\n]{1,40}") {
            let esc: String = name
                .chars()
                .map(|c| match c {
                    ' ' => "\\040".to_owned(),
                    '\t' => "\\011".to_owned(),
                    '\n' => "\\012".to_owned(),
                    '\\' => "\\134".to_owned(),
                    c => c.to_string(),
                })
                .collect();
            let r = parse(&format!("1 0 8:1 / /{esc} rw - ext4 /dev/sda1 rw\n"));
            prop_assert!(r.errors.is_empty());
            prop_assert_eq!(&r.rows[0].mount_point, &format!("/{esc}"));
            prop_assert_eq!(r.rows[0].path(), PathBuf::from(format!("/{name}")));
        }
    }
}
