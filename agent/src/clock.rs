//! The daemon's clock: the wall time samples are aligned on, the signals that end a wait, and the
//! wait until the next sample — one wakeup per sample, on a high-resolution timer.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the epoch on the wall clock (0 before 1970).
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// What the signal handlers raise: the stop flag (SIGTERM, SIGINT) with a byte on a pipe that
/// wakes the sampling loop's sleep at once, and the reload flag (SIGHUP). SIGUSR1/2 are caught and
/// ignored rather than killing the agent.
pub struct Signals {
    /// Set by SIGTERM and SIGINT.
    pub stop: Arc<AtomicBool>,
    /// Set by SIGHUP.
    pub reload: Arc<AtomicBool>,
    wake: UnixStream,
}

/// Installs the handlers.
pub fn signals() -> io::Result<Signals> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    let ignored = Arc::new(AtomicBool::new(false));
    let (wake, raise) = UnixStream::pair()?;
    // Neither end blocks: the handler writes, the sampling loop polls and drains.
    raise.set_nonblocking(true)?;
    wake.set_nonblocking(true)?;
    for (sig, flag) in [
        (SIGTERM, &stop),
        (SIGINT, &stop),
        (SIGHUP, &reload),
        (SIGUSR1, &ignored),
        (SIGUSR2, &ignored),
    ] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    // Only a stop cuts the sleep short; a reload is handled after the next sample, on time.
    for sig in [SIGTERM, SIGINT] {
        let raise = raise.try_clone()?;
        signal_hook::low_level::pipe::register(sig, raise)?;
    }
    Ok(Signals { stop, reload, wake })
}

/// How a sleep until the next sample ended.
#[derive(Debug, PartialEq)]
pub enum Woke {
    /// At the instant it was meant to.
    OnTime,
    /// On SIGTERM/SIGINT.
    Stopped,
    /// The wall clock went back (an NTP step, a VM restored from a snapshot): the instant is
    /// further away than one interval, and sleeping until then would stop sampling for as long.
    ClockBack,
}

/// Sleeps until wall-clock time `target_ns`, at most `most_ns` from now, waking early when a
/// stop signal arrives; one wakeup per sample in the quiet case (a loop polling the flags
/// would wake several times a second).
pub fn sleep_until(target_ns: i64, most_ns: i64, sig: &Signals) -> Woke {
    loop {
        let now = wall_ns();
        if sig.stop.load(Ordering::Relaxed) {
            return Woke::Stopped;
        }
        if now >= target_ns {
            return Woke::OnTime;
        }
        if target_ns - now > most_ns {
            return Woke::ClockBack;
        }
        // poll times out on a high-resolution timer (a socket's receive timeout would use the
        // coarse timer wheel, up to 1/8 of the wait late); it returns early with the byte a
        // stop signal writes.
        let left = target_ns - now;
        let timeout = rustix::event::Timespec {
            tv_sec: left / 1_000_000_000,
            tv_nsec: left % 1_000_000_000,
        };
        let mut fds = [rustix::event::PollFd::new(
            &sig.wake,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => {
                let mut bytes = [0u8; 16];
                while matches!((&sig.wake).read(&mut bytes), Ok(n) if n > 0) {}
            }
            Err(_) => {
                // Not expected; a plain sleep rather than a spin.
                let left = Duration::from_nanos(u64::try_from(left).unwrap_or(0));
                std::thread::sleep(left.min(Duration::from_millis(200)));
            }
        }
    }
}
