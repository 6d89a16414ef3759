//! The `DM_TABLE_STATUS` ioctl on `/dev/mapper/control`: the same text `dmsetup` prints, with
//! no process started.
//!
//! Only the one `ioctl(2)` call is unsafe; the request is built and the reply decoded from a
//! plain byte buffer with bounds-checked reads, so a short or garbled reply is an error, never
//! undefined behaviour. Layouts: `include/uapi/linux/dm-ioctl.h` (interface version 4).

use std::fs::File;
use std::io;
use std::path::Path;

use super::DevT;

/// `sizeof(struct dm_ioctl)`.
const DM_IOCTL_SIZE: usize = 312;
/// `sizeof(struct dm_target_spec)`.
const SPEC_SIZE: usize = 40;
const DM_STATUS_TABLE_FLAG: u32 = 1 << 4;
const DM_BUFFER_FULL_FLAG: u32 = 1 << 8;
const DM_NOFLUSH_FLAG: u32 = 1 << 11;
const DM_TABLE_STATUS_CMD: u64 = 12;

/// `_IOWR(0xfd, cmd, struct dm_ioctl)`.
fn request(cmd: u64) -> u64 {
    (3 << 30) | ((DM_IOCTL_SIZE as u64) << 16) | (0xfd << 8) | cmd
}

/// One target of a device, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetText {
    /// First sector.
    pub start: u64,
    /// Length in sectors.
    pub length: u64,
    /// Target type (`multipath`, `linear`, …).
    pub target: String,
    /// The status or table arguments.
    pub args: String,
}

/// An open `/dev/mapper/control`.
#[derive(Debug)]
pub struct DmControl {
    file: File,
    buf: Vec<u8>,
}

impl DmControl {
    /// Opens the control device; `Ok(None)` when there is none (no dm module, a container).
    pub fn open(path: &Path) -> io::Result<Option<Self>> {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
        {
            Ok(file) => Ok(Some(Self {
                file,
                buf: vec![0; 16 * 1024],
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The status (or, with `table`, the table) of the device `dev`.
    pub fn status(&mut self, dev: DevT, table: bool) -> io::Result<Vec<TargetText>> {
        loop {
            let len = self.buf.len();
            encode_request(&mut self.buf, dev, table);
            self.call(DM_TABLE_STATUS_CMD)?;
            let flags = read_u32(&self.buf, 28).unwrap_or(0);
            if flags & DM_BUFFER_FULL_FLAG != 0 && len < (4 << 20) {
                self.buf = vec![0; len * 4];
                continue;
            }
            return decode_targets(&self.buf);
        }
    }

    #[allow(unsafe_code)]
    fn call(&mut self, cmd: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: `buf` is a live, writable allocation of `buf.len()` bytes whose header
        // says `data_size = buf.len()`; the kernel writes no further than `data_size`.
        let rc = unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                request(cmd) as _,
                self.buf.as_mut_ptr(),
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    if let Some(s) = buf.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_ne_bytes());
    }
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

/// Fills the `struct dm_ioctl` header for a by-device-number lookup.
fn encode_request(buf: &mut [u8], dev: DevT, table: bool) {
    buf.fill(0);
    put_u32(buf, 0, 4); // interface version 4.0.0: any 4.x kernel accepts it
    put_u32(buf, 12, u32::try_from(buf.len()).unwrap_or(u32::MAX));
    put_u32(buf, 16, DM_IOCTL_SIZE as u32);
    let flags = DM_NOFLUSH_FLAG | if table { DM_STATUS_TABLE_FLAG } else { 0 };
    put_u32(buf, 28, flags);
    // huge_encode_dev: minor low 8 bits, major, then the minor's high bits.
    let (ma, mi) = (u64::from(dev.major), u64::from(dev.minor));
    let enc = (mi & 0xff) | ((ma & 0xfff) << 8) | ((mi & !0xff) << 12);
    if let Some(s) = buf.get_mut(40..48) {
        s.copy_from_slice(&enc.to_ne_bytes());
    }
    // name and uuid stay empty: the kernel then looks the device up by `dev`.
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("dm ioctl reply: {what}"),
    )
}

/// Decodes the `dm_target_spec` list that follows the header in a `DM_TABLE_STATUS` reply.
pub fn decode_targets(buf: &[u8]) -> io::Result<Vec<TargetText>> {
    let data_start = read_u32(buf, 16).ok_or_else(|| bad("short header"))? as usize;
    let data_size = read_u32(buf, 12).ok_or_else(|| bad("short header"))? as usize;
    let count = read_u32(buf, 20).ok_or_else(|| bad("short header"))?;
    let end = data_size.min(buf.len());
    let mut out = Vec::new();
    let mut at = data_start;
    for _ in 0..count {
        let start = read_u64(buf, at).ok_or_else(|| bad("target spec past the end"))?;
        let length = read_u64(buf, at + 8).ok_or_else(|| bad("target spec past the end"))?;
        let next = read_u32(buf, at + 20).ok_or_else(|| bad("target spec past the end"))?;
        let ttype = buf
            .get(at + 24..at + SPEC_SIZE)
            .ok_or_else(|| bad("target spec past the end"))?;
        let params = buf
            .get(at + SPEC_SIZE..end)
            .ok_or_else(|| bad("parameters past the end"))?;
        out.push(TargetText {
            start,
            length,
            target: c_string(ttype),
            args: c_string(params),
        });
        // `next` counts from the start of the data area on DM_TABLE_STATUS replies.
        let n = data_start + next as usize;
        if n <= at {
            break;
        }
        at = n;
    }
    Ok(out)
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(b.get(..end).unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lays out a reply the way `retrieve_status()` in `drivers/md/dm-ioctl.c` does.
    fn reply(targets: &[(u64, u64, &str, &str)]) -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        encode_request(
            &mut buf,
            DevT {
                major: 253,
                minor: 3,
            },
            false,
        );
        let mut at = DM_IOCTL_SIZE;
        for (s, l, t, p) in targets {
            buf[at..at + 8].copy_from_slice(&s.to_ne_bytes());
            buf[at + 8..at + 16].copy_from_slice(&l.to_ne_bytes());
            buf[at + 24..at + 24 + t.len()].copy_from_slice(t.as_bytes());
            let ps = at + SPEC_SIZE;
            buf[ps..ps + p.len()].copy_from_slice(p.as_bytes());
            let next = (ps + p.len() + 1).next_multiple_of(8);
            put_u32(&mut buf, at + 20, (next - DM_IOCTL_SIZE) as u32);
            at = next;
        }
        put_u32(&mut buf, 20, targets.len() as u32);
        buf
    }

    #[test]
    fn request_number_matches_the_header() {
        // DM_TABLE_STATUS as computed by the C headers on x86_64 and arm64.
        assert_eq!(request(DM_TABLE_STATUS_CMD), 0xc138_fd0c);
    }

    #[test]
    fn decodes_two_targets() {
        let buf = reply(&[
            (0, 10, "multipath", "2 0 0 0 1 1 A 0 1 0 8:16 A 0 "),
            (10, 20, "linear", "8:32 0"),
        ]);
        let t = decode_targets(&buf).expect("decodes");
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].target, "multipath");
        assert_eq!(t[0].args, "2 0 0 0 1 1 A 0 1 0 8:16 A 0 ");
        assert_eq!((t[1].start, t[1].length), (10, 20));
        assert!(super::super::parse_status_args(&t[0].args).is_ok());
    }

    #[test]
    fn short_replies_are_errors() {
        let mut buf = reply(&[(0, 10, "multipath", "0")]);
        put_u32(&mut buf, 20, 5000); // claims far more targets than fit
        assert!(decode_targets(&buf[..DM_IOCTL_SIZE + 8]).is_err());
        assert!(decode_targets(&[0u8; 10]).is_err());
    }

    #[test]
    fn dev_is_encoded_like_huge_encode_dev() {
        let mut buf = vec![0u8; 512];
        encode_request(
            &mut buf,
            DevT {
                major: 253,
                minor: 300,
            },
            true,
        );
        let enc = read_u64(&buf, 40).expect("dev");
        assert_eq!(enc, 0x2c | (253 << 8) | (0x100 << 12));
        assert_eq!(
            read_u32(&buf, 28),
            Some(DM_STATUS_TABLE_FLAG | DM_NOFLUSH_FLAG)
        );
    }

    #[test]
    fn no_control_device_is_none() {
        assert!(matches!(
            DmControl::open(Path::new("/nonexistent/mapper/control")),
            Ok(None)
        ));
    }
}
