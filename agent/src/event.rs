//! State changes worth a line in the log and an annotation in Grafana.
//!
//! Detectors (multipath paths, MD arrays, zpools; see [`crate::health`]) return [`Event`]s when an
//! object's state changes; the scheduler logs each one and encodes it as an `event` line:
//! `event,host=…,source=mpath,object=mpatha/sdc from_state="active",to_state="failed",text="…"`.

use storwatch_wire::lp::LineWriter;

/// One state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Which subsystem saw it: `mpath`, `md`, `zpool`, `net`, `disk`.
    pub source: &'static str,
    /// The object that changed: `mpatha/sdc`, `md127`, `tank/raidz2-0/sdk`.
    pub object: String,
    /// State before (empty when the object just appeared).
    pub from_state: String,
    /// State after (empty when the object vanished).
    pub to_state: String,
    /// A sentence for a human: what happened and why it matters.
    pub text: String,
}

impl Event {
    /// A change of `object`, seen by `source`, from `from_state` to `to_state`.
    pub fn new(
        source: &'static str,
        object: impl Into<String>,
        from_state: impl Into<String>,
        to_state: impl Into<String>,
        text: String,
    ) -> Self {
        Self {
            source,
            object: object.into(),
            from_state: from_state.into(),
            to_state: to_state.into(),
            text,
        }
    }

    /// Logs the event (warn when it moves to a bad state, info otherwise) and appends its line.
    pub fn emit(&self, w: &mut LineWriter, ts_ns: i64, bad: bool) {
        if bad {
            tracing::warn!(source = self.source, object = %self.object, from = %self.from_state, to = %self.to_state, "{}", self.text);
        } else {
            tracing::info!(source = self.source, object = %self.object, from = %self.from_state, to = %self.to_state, "{}", self.text);
        }
        w.line("event", ts_ns)
            .tag("source", self.source)
            .tag("object", &self.object)
            .field("text", self.text.as_str())
            .field("from_state", self.from_state.as_str())
            .field("to_state", self.to_state.as_str())
            .write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_line() {
        let mut w = LineWriter::new("ds01", &[]);
        Event {
            source: "md",
            object: "md127".into(),
            from_state: "clean".into(),
            to_state: "degraded".into(),
            text: "md127 lost a member: 1 of 2 parity left".into(),
        }
        .emit(&mut w, 10, true);
        assert_eq!(
            std::str::from_utf8(w.as_bytes()).expect("utf8"),
            "event,host=ds01,source=md,object=md127 text=\"md127 lost a member: 1 of 2 parity left\",from_state=\"clean\",to_state=\"degraded\" 10\n"
        );
    }
}
