//! The dead-letter file of an output: lines the output refused for good, each after a comment
//! with the time, the output and the answer, fsync'd before the cursor moves past them. The
//! file rotates by size (`[dead_letter]`, see [`storwatch_wire::rotate`]); each call's entries
//! land whole in one file, so no comment is ever parted from its line.

use std::sync::atomic::Ordering;

use super::{ForwardError, Forwarder};

impl Forwarder {
    pub(super) fn write_dead_letter(&self, entries: &[(&str, String)]) -> Result<(), ForwardError> {
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
        let rotation = *self
            .dead_letter_rotation
            .read()
            .unwrap_or_else(|e| e.into_inner());
        let mut file = self.dead_letter.lock().unwrap_or_else(|e| e.into_inner());
        file.set_rotation(rotation);
        let appended = file.append(text.as_bytes())?;
        if appended.rotated {
            self.metrics
                .dead_letter_rotations
                .fetch_add(1, Ordering::Relaxed);
        }
        self.metrics
            .dead_lettered
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        if self.output.kind == crate::config::OutputType::PrometheusRemoteWrite {
            let late = entries
                .iter()
                .filter(|(_, r)| super::remote_write::refused_for_time(r))
                .count();
            self.metrics
                .out_of_order
                .fetch_add(late as u64, Ordering::Relaxed);
        }
        // a bisection writes one line at a time: a log line now and then, with the count since
        let due = self
            .quiet_dead_letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .due_for(entries.len() as u64);
        if let Some(lines) = due {
            tracing::error!(output = %self.output.name, lines, file = %file.path().display(), "lines refused by the output written to the dead-letter file");
        }
        Ok(())
    }
}
