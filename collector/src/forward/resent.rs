//! Lines resent after a restart that a remote-write receiver refuses for their time, and
//! log lines kept few ([`Quiet`]).
//!
//! The cursor lags the acknowledgements by what was in flight, so a crash resends it
//! (`Forwarder::run`). A receiver that keeps the newest sample per series (Prometheus, Mimir)
//! refuses a resent sample older than that newest one as out of order: it stored it before the
//! crash. Such a refusal is no dead letter: it is counted in `output_resent_refused_total`,
//! and logged at most once per [`LOG_EVERY`] with the count since, not once per line.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Forwarder;
use crate::config::OutputType;

/// At most one log line this often about resent lines refused, refused requests during a
/// bisection, and lines dead-lettered.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts of a thing logged at most once per [`LOG_EVERY`].
#[derive(Debug, Default)]
pub(super) struct Quiet {
    last: Option<Instant>,
    since: u64,
}

impl Quiet {
    /// Counts one; `Some(count since the last log line)` when a log line is due now.
    pub(super) fn due(&mut self) -> Option<u64> {
        self.due_for(1)
    }

    /// Counts `n`; `Some(count since the last log line)` when a log line is due now.
    pub(super) fn due_for(&mut self, n: u64) -> Option<u64> {
        self.since += n;
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

impl Forwarder {
    /// Whether a refusal of a resent line means the receiver has the sample already: a
    /// remote-write receiver's refusal for the sample's time.
    pub(super) fn refused_as_stored(&self, reason: &str) -> bool {
        self.output.kind == OutputType::PrometheusRemoteWrite
            && super::remote_write::refused_for_time(reason)
    }

    /// One resent line refused as already stored: counted, logged now and then.
    pub(super) fn note_resent_refused(&self, reason: &str) {
        self.metrics.resent_refused.fetch_add(1, Ordering::Relaxed);
        let due = self
            .quiet_resent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .due();
        if let Some(n) = due {
            tracing::warn!(
                output = %self.output.name,
                lines = n,
                answer = %crate::http::printable(reason),
                "lines resent after a restart refused for their time: stored before the crash, not dead-lettered (output_resent_refused_total)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_log_line_per_period_with_the_count_since() {
        let mut q = Quiet::default();
        assert_eq!(q.due(), Some(1));
        assert_eq!(q.due(), None);
        assert_eq!(q.due_for(5), None);
        // the period over: the next says how many came since the last line
        q.last = Some(Instant::now() - LOG_EVERY);
        assert_eq!(q.due(), Some(7));
        assert_eq!(q.due(), None);
    }
}
