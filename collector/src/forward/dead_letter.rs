//! The dead-letter file of an output: lines the output refused for good, each after a comment
//! with the time, the output and the answer, fsync'd before the cursor moves past them.

use std::io::Write as _;
use std::sync::atomic::Ordering;

use super::{ForwardError, Forwarder};

impl Forwarder {
    pub(super) fn write_dead_letter(&self, entries: &[(&str, String)]) -> Result<(), ForwardError> {
        let err = |source| ForwardError::DeadLetter {
            path: self.dead_letter.clone(),
            source,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut text = String::new();
        for (line, reason) in entries {
            let reason = crate::http::printable(reason);
            text.push_str(&format!(
                "# unix_s={now} output={} reason={reason}\n{line}\n",
                self.output.name
            ));
        }
        let mut f = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().create(true).append(true),
            0o600,
        )
        .open(&self.dead_letter)
        .map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_data().map_err(err)?;
        self.metrics
            .dead_lettered
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        tracing::error!(output = %self.output.name, lines = entries.len(), file = %self.dead_letter.display(), "lines refused by the output written to the dead-letter file");
        Ok(())
    }
}
