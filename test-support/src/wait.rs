//! Waiting for a condition, and the wall clock.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Waits until `f` holds or `timeout` passes, checking every 20 ms; whether it held.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Like [`wait_for`], failing the test with `what` when `f` never holds.
pub fn wait_until(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    assert!(wait_for(timeout, f), "timed out waiting for {what}");
}

/// Seconds since the Unix epoch.
pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    now_ns() / 1_000_000
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}
