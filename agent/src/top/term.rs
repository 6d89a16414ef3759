//! The terminal `top` draws on: its size (`TIOCGWINSZ`, else `$COLUMNS`), and a screen that
//! reads single keys without echo, with plain termios rather than a TUI library.
//!
//! [`Screen::enter`] switches the terminal to the alternate screen, hides the cursor and turns
//! off canonical mode and echo, so a key arrives as soon as it is pressed. Everything else stays
//! as it was: `ISIG`, so Ctrl-C is still SIGINT (the loop stops on it and the screen is left
//! the normal way), and output processing, so `\n` still returns the carriage. The settings
//! are restored when the [`Screen`] is dropped, and by a panic hook when the agent panics (the
//! release build aborts on panic, where no destructor runs).

use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

/// The settings to restore, for the panic hook.
static SAVED: Mutex<Option<(RawFd, libc::termios)>> = Mutex::new(None);

const ENTER: &str = "\x1b[?1049h\x1b[?25l";
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";

/// Columns and rows of the terminal on `fd`; `None` when it is not a terminal or says 0.
pub fn size(fd: RawFd) -> Option<(usize, usize)> {
    // SAFETY: an all-zero winsize is a valid value of this plain C struct.
    #[allow(unsafe_code)]
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which lives across the call; on a
    // descriptor that is not a terminal it fails with ENOTTY and writes nothing.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then(|| (usize::from(ws.ws_col), usize::from(ws.ws_row)))
}

/// `$COLUMNS`, when it holds a positive number.
pub fn columns_env() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
}

fn get(fd: RawFd) -> io::Result<libc::termios> {
    // SAFETY: an all-zero termios is a valid value of this plain C struct.
    #[allow(unsafe_code)]
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one termios into `t`, which lives across the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::tcgetattr(fd, &mut t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(t)
}

fn set(fd: RawFd, t: &libc::termios) -> io::Result<()> {
    // SAFETY: tcsetattr only reads the termios it is given.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::tcsetattr(fd, libc::TCSANOW, t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the saved settings back and leaves the alternate screen; for the destructor and the
/// panic hook, so it must not panic itself.
fn restore() {
    let saved = match SAVED.lock() {
        Ok(mut g) => g.take(),
        Err(p) => p.into_inner().take(),
    };
    if let Some((fd, t)) = saved {
        let _ = set(fd, &t);
        let mut out = io::stdout().lock();
        let _ = out.write_all(LEAVE.as_bytes());
        let _ = out.flush();
    }
}

/// The terminal while `top` draws on it: keys without echo, the alternate screen.
#[derive(Debug)]
pub struct Screen {
    fd: RawFd,
}

impl Screen {
    /// Takes over the terminal on standard input (keys) and output (the screen).
    pub fn enter() -> io::Result<Screen> {
        let fd = io::stdin().as_raw_fd();
        let saved = get(fd)?;
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 0;
        raw.c_cc[libc::VTIME] = 0;
        match SAVED.lock() {
            Ok(mut g) => *g = Some((fd, saved)),
            Err(p) => *p.into_inner() = Some((fd, saved)),
        }
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                prev(info);
            }));
        });
        // From here on the Screen's destructor gives the terminal back, whatever fails.
        let screen = Screen { fd };
        set(fd, &raw)?;
        let mut out = io::stdout().lock();
        out.write_all(ENTER.as_bytes())?;
        out.flush()?;
        Ok(screen)
    }

    /// Waits at most `timeout` for keys and returns the bytes read (none on timeout or when
    /// a signal interrupted the wait). An escape sequence (an arrow, a function key) is
    /// dropped whole, so that its letters are not taken for commands.
    pub fn keys(&self, timeout: Duration) -> io::Result<Vec<u8>> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd, living across the call.
        #[allow(unsafe_code)]
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(Vec::new())
            } else {
                Err(e)
            };
        }
        if n == 0 || pfd.revents & libc::POLLIN == 0 {
            return Ok(Vec::new());
        }
        let mut buf = [0u8; 64];
        // SAFETY: reads at most buf.len() bytes into buf.
        #[allow(unsafe_code)]
        let got = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        let got = usize::try_from(got).unwrap_or(0).min(buf.len());
        Ok(without_escapes(&buf[..got]))
    }
}

/// The bytes before the first ESC: what follows it in the same read is a sequence the terminal
/// sent for one key.
fn without_escapes(b: &[u8]) -> Vec<u8> {
    b.iter().copied().take_while(|&c| c != 0x1b).collect()
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_not_commands() {
        // F2 is ESC O Q, up is ESC [ A
        assert_eq!(without_escapes(b"\x1bOQ"), b"");
        assert_eq!(without_escapes(b"u\x1b[A"), b"u");
        assert_eq!(without_escapes(b"q"), b"q");
    }

    #[test]
    fn a_file_has_no_size() {
        let f = tempfile::tempfile().expect("tempfile");
        assert_eq!(size(f.as_raw_fd()), None);
    }
}
