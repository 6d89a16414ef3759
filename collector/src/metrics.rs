//! The collector's own counters, served at `/metrics` in the Prometheus text format.
//!
//! Counters are plain atomics updated where the thing happens; per-output counters live in
//! [`OutputMetrics`], one per configured output.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Declares a set of counters once: each field with its metric name (after
/// `storwatch_collector_`), type and HELP text, which is also the field's documentation; the
/// struct and [`Counters::counters`], from which `/metrics` is rendered, come from it.
macro_rules! counters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $field:ident: $metric:literal, $kind:literal, $help:literal; )*
        }
        $( #[doc = $xdoc:literal] pub $xfield:ident: $xty:ty, )*
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( #[doc = $help] pub $field: AtomicU64, )*
            $( #[doc = $xdoc] pub $xfield: $xty, )*
        }

        impl Counters for $name {
            fn counters(&self) -> Vec<Counter<'_>> {
                vec![$( Counter { name: $metric, kind: $kind, help: $help, value: &self.$field }, )*]
            }
        }
    };
}

/// One counter (or gauge) as `/metrics` shows it.
#[derive(Debug)]
pub struct Counter<'a> {
    /// The metric name after `storwatch_collector_`.
    pub name: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub help: &'static str,
    pub value: &'a AtomicU64,
}

/// The counters a `counters!` struct declares, in the order declared.
pub trait Counters {
    fn counters(&self) -> Vec<Counter<'_>>;
}

counters! {
    /// Collector-wide counters.
    #[derive(Debug, Default)]
    pub struct Metrics {
        write_requests: "write_requests_total", "counter", "Write requests received.";
        lines_accepted: "lines_accepted_total", "counter", "Lines accepted and fsync'd.";
        lines_rejected: "lines_rejected_total", "counter", "Lines rejected by validation.";
        bytes_received: "bytes_received_total", "counter", "Request body bytes received.";
        unauthorized: "unauthorized_total", "counter", "Requests answered 401.";
        target_refused: "target_refused_total", "counter",
            "Requests refused for the database they name (403 not in targets.allow, 400 invalid name).";
        query_requests: "query_requests_total", "counter", "/query requests received.";
        rate_limited: "rate_limited_total", "counter", "Requests answered 429 by the per-token rate limit.";
        overloaded: "overloaded_total", "counter", "Requests answered 503 above the queue high watermark.";
        too_large: "too_large_total", "counter", "Requests answered 413.";
        body_timeouts: "body_timeouts_total", "counter", "Requests whose body did not arrive in time.";
        connections_refused: "connections_refused_total", "counter", "Connections refused at the connection limit.";
        connections_idle_closed: "connections_idle_closed_total", "counter", "Connections closed for idling.";
        header_timeouts: "header_timeouts_total", "counter",
            "Connections closed because a request's headers did not arrive within header_read_timeout_s.";
        queue_records: "queue_records_total", "counter", "Records appended to the queue.";
        queue_fsyncs: "queue_fsyncs_total", "counter", "Queue fsyncs (group commits).";
        queue_end: "queue_end_bytes", "gauge", "Durable end position of the queue.";
        queue_torn_bytes: "queue_torn_bytes_total", "counter", "Bytes truncated from a torn queue tail at start.";
        queue_corrupt_records: "queue_corrupt_records_total", "counter", "Damaged queue records skipped.";
        queue_full_refusals: "queue_full_refusals_total", "counter",
            "Write requests refused because the queue's filesystem was full.";
        heartbeat_lines: "heartbeat_lines_total", "counter", "Heartbeat lines written.";
    }
    #[doc = "An append was refused for lack of space and there is no room yet for one as large (set and cleared by the queue)."]
    pub queue_full: AtomicBool,
    #[doc = "Per-output counters."]
    pub outputs: Mutex<Vec<Arc<OutputMetrics>>>,
}

/// `queue_full`'s family: not a counter, so declared here.
const QUEUE_FULL: (&str, &str) = (
    "queue_full",
    "1 while the queue's filesystem has no room for the largest write it refused (503) since.",
);

/// The per-output gauge computed from the queue's end and the output's cursor.
const BACKLOG: (&str, &str) = (
    "output_backlog_bytes",
    "Queue bytes not yet acknowledged by the output.",
);

counters! {
    /// Counters of one output.
    #[derive(Debug, Default)]
    pub struct OutputMetrics {
        lines_sent: "output_lines_sent_total", "counter", "Lines acknowledged by the output.";
        batches_sent: "output_batches_sent_total", "counter", "Requests acknowledged by the output.";
        retries: "output_retries_total", "counter", "Attempts retried (429, 5xx, timeouts).";
        auth_errors: "output_auth_errors_total", "counter", "401/403/404 answers (data kept).";
        dead_lettered: "output_dead_lettered_total", "counter", "Lines written to the dead-letter file.";
        dead_letter_rotations: "output_dead_letter_rotations_total", "counter",
            "Dead-letter file rotations (it reached dead_letter.max_file_bytes).";
        splits: "output_splits_total", "counter",
            "Batches split after a 413, or bisected after a refusal that named no line.";
        samples_sent: "output_samples_sent_total", "counter",
            "Samples acknowledged by a remote-write output (0 for InfluxDB outputs).";
        out_of_order: "output_out_of_order_total", "counter",
            "Lines a remote-write receiver refused as out of order, duplicate or too old (dead-lettered).";
        resent_refused: "output_resent_refused_total", "counter",
            "Lines resent after a restart that a remote-write receiver refused as out of order, duplicate or too old: stored before the crash, not dead-lettered.";
    }
    #[doc = "The output's name (the `output` label)."]
    pub name: String,
    #[doc = "Queue position acknowledged by this output."]
    pub cursor: AtomicU64,
}

impl Metrics {
    pub fn add_output(&self, name: &str) -> Arc<OutputMetrics> {
        let m = Arc::new(OutputMetrics {
            name: name.to_string(),
            ..OutputMetrics::default()
        });
        self.outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(m.clone());
        m
    }

    /// The slowest output's position, or the queue end when there are no outputs.
    pub fn min_cursor(&self) -> u64 {
        let outs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outs.iter()
            .map(|o| o.cursor.load(Ordering::Relaxed))
            .min()
            .unwrap_or_else(|| self.queue_end.load(Ordering::Relaxed))
    }

    /// Renders every counter in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let head = |s: &mut String, name: &str, help: &str, kind: &str| {
            let _ = writeln!(s, "# HELP storwatch_collector_{name} {help}");
            let _ = writeln!(s, "# TYPE storwatch_collector_{name} {kind}");
        };
        for c in self.counters() {
            head(&mut s, c.name, c.help, c.kind);
            let _ = writeln!(
                s,
                "storwatch_collector_{} {}",
                c.name,
                c.value.load(Ordering::Relaxed)
            );
        }
        head(&mut s, QUEUE_FULL.0, QUEUE_FULL.1, "gauge");
        let full = u64::from(self.queue_full.load(Ordering::Relaxed));
        let _ = writeln!(s, "storwatch_collector_{} {full}", QUEUE_FULL.0);
        let end = self.queue_end.load(Ordering::Relaxed);
        let outs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        let per: Vec<Vec<Counter<'_>>> = outs.iter().map(|o| o.counters()).collect();
        for (i, family) in OutputMetrics::default().counters().iter().enumerate() {
            head(&mut s, family.name, family.help, family.kind);
            for (o, counters) in outs.iter().zip(&per) {
                if let Some(c) = counters.get(i) {
                    let v = c.value.load(Ordering::Relaxed);
                    let _ = writeln!(
                        s,
                        "storwatch_collector_{}{{output=\"{}\"}} {v}",
                        c.name, o.name
                    );
                }
            }
        }
        head(&mut s, BACKLOG.0, BACKLOG.1, "gauge");
        for o in outs.iter() {
            let v = end.saturating_sub(o.cursor.load(Ordering::Relaxed));
            let _ = writeln!(
                s,
                "storwatch_collector_{}{{output=\"{}\"}} {v}",
                BACKLOG.0, o.name
            );
        }
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every counter declared shows in `/metrics` with its own value, once, with one HELP and
    /// one TYPE; the names are unique.
    #[test]
    fn every_declared_counter_is_rendered_once_with_its_value() {
        let m = Metrics::default();
        let a = m.add_output("a");
        let b = m.add_output("b");
        let mut want = Vec::new();
        for (k, c) in m.counters().iter().enumerate() {
            c.value.store(1000 + k as u64, Ordering::Relaxed);
            want.push((format!("storwatch_collector_{}", c.name), 1000 + k as u64));
        }
        for (o, base) in [(&a, 2000u64), (&b, 3000)] {
            for (k, c) in o.counters().iter().enumerate() {
                c.value.store(base + k as u64, Ordering::Relaxed);
                want.push((
                    format!("storwatch_collector_{}{{output=\"{}\"}}", c.name, o.name),
                    base + k as u64,
                ));
            }
        }
        let text = m.render();
        let mut families = std::collections::BTreeMap::new();
        for l in text.lines() {
            if let Some(rest) = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
            {
                let name = rest.split(' ').next().unwrap().to_string();
                *families.entry(name).or_insert(0) += 1;
            }
        }
        assert!(families.values().all(|n| *n == 2), "{families:?}");
        assert_eq!(families.len(), m.counters().len() + a.counters().len() + 2);
        for (name, v) in want {
            let found: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{name} ")))
                .collect();
            assert_eq!(found, vec![v.to_string()], "{name}");
        }
    }
}
