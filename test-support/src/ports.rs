//! Ports for the servers a test starts: one that no other test may be handed while this test
//! process lives, so that a server stopped and started again on its port (a collector after a
//! kill -9, a receiver after an outage) finds it free.
//!
//! The kernel's pick (`bind` to port 0) is not enough: once a test stops its server, the kernel
//! may hand that port to another test's `bind(0)` or to an outgoing connection, and the server
//! started again finds it taken, while the test talks to whatever holds it. So the ports come
//! from below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), which the kernel
//! never hands out, from [`FIRST`] up, above the fixed ports the tests give their influxd
//! (18086–19651). Test processes run side by side: each holds a one-byte lock, at the port's
//! offset, on one shared file (`fcntl` record locks, let go of when the process ends, even by
//! kill -9), and takes only ports no other process holds and nothing listens on.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// The lowest port handed out. The highest is one below the kernel's ephemeral range.
pub const FIRST: u16 = 24_576;

/// The lock file, in the temporary directory, shared by every test process on the machine.
pub const LOCK_FILE: &str = "storwatch-test-ports.lock";

struct Ports {
    lock: File,
    /// The next port to try (the first try is spread by process id).
    next: u16,
    end: u16,
}

static PORTS: Mutex<Option<Ports>> = Mutex::new(None);

/// A port on 127.0.0.1 nobody listens on, held for this test process alone until it ends.
pub fn free_port() -> u16 {
    let mut guard = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let ports = guard.get_or_insert_with(Ports::open);
    ports.take().unwrap_or_else(|| {
        panic!(
            "no free port in {FIRST}–{}: every one is held by another test process or in use",
            ports.end - 1
        )
    })
}

impl Ports {
    fn open() -> Ports {
        let end = ephemeral_start();
        assert!(
            end > FIRST + 1024,
            "the kernel's ephemeral ports start at {end}: too close to {FIRST} for test ports \
             (net.ipv4.ip_local_port_range)"
        );
        let path = std::env::temp_dir().join(LOCK_FILE);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        let span = u32::from(end - FIRST);
        let next = FIRST + (std::process::id().wrapping_mul(2_654_435_761) % span) as u16;
        Ports { lock, next, end }
    }

    /// The next port from `next` on that this lock file's description can hold and nothing
    /// listens on; `None` after a whole turn of the range.
    fn take(&mut self) -> Option<u16> {
        for _ in FIRST..self.end {
            let port = self.next;
            self.next = if port + 1 >= self.end {
                FIRST
            } else {
                port + 1
            };
            if lock(&self.lock, port, libc::F_WRLCK)
                && TcpListener::bind(("127.0.0.1", port)).is_ok()
            {
                return Some(port);
            }
        }
        None
    }
}

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Sets the lock on byte `port` of `file` (`F_WRLCK` to take it, `F_UNLCK` to let it go);
/// false when another holder has it. Open-file-description locks (`F_OFD_SETLK`): held by this
/// opening of the file, so that another opening, in this process or another, sees them, and
/// closing some other descriptor of the file does not let them go as it would a POSIX lock.
#[allow(unsafe_code)]
fn lock(file: &File, port: u16, kind: libc::c_int) -> bool {
    // SAFETY: `flock` is plain data, zeroed then filled (l_pid 0, as OFD locks require).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = libc::off_t::from(port);
    l.l_len = 1;
    // SAFETY: the fd is open for as long as `file`; fcntl only reads `l`.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &l) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_handed_out_twice() {
        let end = ephemeral_start();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let p = free_port();
            assert!((FIRST..end).contains(&p), "{p}");
            assert!(seen.insert(p), "{p} handed out twice");
        }
    }

    /// A port another process holds (a child `python3` taking the POSIX record lock on its
    /// byte, which OFD locks see) is passed over.
    #[test]
    fn a_port_held_by_another_process_is_passed_over() {
        // other tests of this process wait: none may take the port between its two holders
        let _others = PORTS.lock().unwrap_or_else(|e| e.into_inner());
        let mut ports = Ports::open();
        let wanted = ports.take().unwrap();
        assert!(lock(&ports.lock, wanted, libc::F_UNLCK));
        let script = format!(
            "import fcntl,sys\nf=open({path:?},'r+')\n\
             fcntl.lockf(f,fcntl.LOCK_EX|fcntl.LOCK_NB,1,{wanted})\nprint('held',flush=True)\n\
             sys.stdin.read()\n",
            path = std::env::temp_dir().join(LOCK_FILE).display().to_string()
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (the test's other process)");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(
            line.trim(),
            "held",
            "the other process could not take {wanted}"
        );
        ports.next = wanted;
        let got = ports.take().unwrap();
        drop(child.stdin.take());
        let _ = child.wait();
        assert_ne!(got, wanted, "a port another process holds was handed out");
        // let go by the other process, the port can be taken again
        ports.next = wanted;
        assert_eq!(ports.take(), Some(wanted));
    }
}
