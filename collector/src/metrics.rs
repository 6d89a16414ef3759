//! The collector's own counters, served at `/metrics` in the Prometheus text format.
//!
//! Counters are plain atomics updated where the thing happens; per-output counters live in
//! [`OutputMetrics`], one per configured output.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Collector-wide counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Write requests received (any outcome).
    pub write_requests: AtomicU64,
    /// Lines accepted and made durable.
    pub lines_accepted: AtomicU64,
    /// Lines rejected by validation (parse errors, type conflicts, limits).
    pub lines_rejected: AtomicU64,
    /// Request bodies received, in bytes as sent (compressed when gzip).
    pub bytes_received: AtomicU64,
    /// Requests answered 401.
    pub unauthorized: AtomicU64,
    /// Requests (writes, `CREATE DATABASE`) refused for their database: 403 not allowed, 400
    /// invalid name.
    pub target_refused: AtomicU64,
    /// `/query` requests received (any outcome).
    pub query_requests: AtomicU64,
    /// Requests answered 429 by the per-token rate limit.
    pub rate_limited: AtomicU64,
    /// Requests answered 503 because the backlog is above the high watermark.
    pub overloaded: AtomicU64,
    /// Requests answered 413 (body, decompressed body).
    pub too_large: AtomicU64,
    /// Requests whose body did not arrive within the body timeout.
    pub body_timeouts: AtomicU64,
    /// Connections refused because the connection limit was reached.
    pub connections_refused: AtomicU64,
    /// Connections closed for being idle too long.
    pub connections_idle_closed: AtomicU64,
    /// Connections closed because a request's headers did not arrive in time.
    pub header_timeouts: AtomicU64,
    /// Records appended to the queue.
    pub queue_records: AtomicU64,
    /// fsyncs of the queue (one covers every request waiting: group commit).
    pub queue_fsyncs: AtomicU64,
    /// Position of the durable end of the queue, in bytes.
    pub queue_end: AtomicU64,
    /// Bytes cut from a torn tail when the queue was opened.
    pub queue_torn_bytes: AtomicU64,
    /// Damaged queue records skipped by readers.
    pub queue_corrupt_records: AtomicU64,
    /// The last queue append found the filesystem full (cleared by the next one that succeeds).
    pub queue_full: AtomicBool,
    /// Write requests refused because the queue's filesystem was full.
    pub queue_full_refusals: AtomicU64,
    /// Heartbeat lines written.
    pub heartbeat_lines: AtomicU64,
    /// Per-output counters.
    pub outputs: Mutex<Vec<Arc<OutputMetrics>>>,
}

/// Counters of one output.
#[derive(Debug, Default)]
pub struct OutputMetrics {
    pub name: String,
    /// Lines the output acknowledged.
    pub lines_sent: AtomicU64,
    /// Requests the output acknowledged.
    pub batches_sent: AtomicU64,
    /// Attempts that will be retried (429, 5xx, timeouts, connection errors).
    pub retries: AtomicU64,
    /// 401/403/404 answers: data kept, retried slowly.
    pub auth_errors: AtomicU64,
    /// Lines written to the dead-letter file.
    pub dead_lettered: AtomicU64,
    /// Times the dead-letter file was rotated (it reached `dead_letter.max_file_bytes`).
    pub dead_letter_rotations: AtomicU64,
    /// Batches split in two after a 413, or bisected after a refusal that named no line.
    pub splits: AtomicU64,
    /// Samples a remote-write output's receiver acknowledged.
    pub samples_sent: AtomicU64,
    /// Lines a remote-write receiver refused for their time (out of order, duplicate
    /// timestamp, too old, out of bounds): dead-lettered, also counted in `dead_lettered`.
    pub out_of_order: AtomicU64,
    /// Lines resent after a restart and refused for their time (already stored).
    pub resent_refused: AtomicU64,
    /// Queue position acknowledged by this output.
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
        let g = |s: &mut String, name: &str, help: &str, kind: &str, v: u64| {
            let _ = writeln!(s, "# HELP storwatch_collector_{name} {help}");
            let _ = writeln!(s, "# TYPE storwatch_collector_{name} {kind}");
            let _ = writeln!(s, "storwatch_collector_{name} {v}");
        };
        let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
        g(
            &mut s,
            "write_requests_total",
            "Write requests received.",
            "counter",
            c(&self.write_requests),
        );
        g(
            &mut s,
            "lines_accepted_total",
            "Lines accepted and fsync'd.",
            "counter",
            c(&self.lines_accepted),
        );
        g(
            &mut s,
            "lines_rejected_total",
            "Lines rejected by validation.",
            "counter",
            c(&self.lines_rejected),
        );
        g(
            &mut s,
            "bytes_received_total",
            "Request body bytes received.",
            "counter",
            c(&self.bytes_received),
        );
        g(
            &mut s,
            "unauthorized_total",
            "Requests answered 401.",
            "counter",
            c(&self.unauthorized),
        );
        g(
            &mut s,
            "target_refused_total",
            "Requests refused for the database they name (403 not in targets.allow, 400 invalid name).",
            "counter",
            c(&self.target_refused),
        );
        g(
            &mut s,
            "query_requests_total",
            "/query requests received.",
            "counter",
            c(&self.query_requests),
        );
        g(
            &mut s,
            "rate_limited_total",
            "Requests answered 429 by the per-token rate limit.",
            "counter",
            c(&self.rate_limited),
        );
        g(
            &mut s,
            "overloaded_total",
            "Requests answered 503 above the queue high watermark.",
            "counter",
            c(&self.overloaded),
        );
        g(
            &mut s,
            "too_large_total",
            "Requests answered 413.",
            "counter",
            c(&self.too_large),
        );
        g(
            &mut s,
            "body_timeouts_total",
            "Requests whose body did not arrive in time.",
            "counter",
            c(&self.body_timeouts),
        );
        g(
            &mut s,
            "connections_refused_total",
            "Connections refused at the connection limit.",
            "counter",
            c(&self.connections_refused),
        );
        g(
            &mut s,
            "connections_idle_closed_total",
            "Connections closed for idling.",
            "counter",
            c(&self.connections_idle_closed),
        );
        g(
            &mut s,
            "header_timeouts_total",
            "Connections closed because a request's headers did not arrive within header_read_timeout_s.",
            "counter",
            c(&self.header_timeouts),
        );
        g(
            &mut s,
            "queue_records_total",
            "Records appended to the queue.",
            "counter",
            c(&self.queue_records),
        );
        g(
            &mut s,
            "queue_fsyncs_total",
            "Queue fsyncs (group commits).",
            "counter",
            c(&self.queue_fsyncs),
        );
        g(
            &mut s,
            "queue_end_bytes",
            "Durable end position of the queue.",
            "gauge",
            c(&self.queue_end),
        );
        g(
            &mut s,
            "queue_torn_bytes_total",
            "Bytes truncated from a torn queue tail at start.",
            "counter",
            c(&self.queue_torn_bytes),
        );
        g(
            &mut s,
            "queue_corrupt_records_total",
            "Damaged queue records skipped.",
            "counter",
            c(&self.queue_corrupt_records),
        );
        g(
            &mut s,
            "queue_full",
            "1 while the queue's filesystem is full and writes are refused with 503.",
            "gauge",
            u64::from(self.queue_full.load(Ordering::Relaxed)),
        );
        g(
            &mut s,
            "queue_full_refusals_total",
            "Write requests refused because the queue's filesystem was full.",
            "counter",
            c(&self.queue_full_refusals),
        );
        g(
            &mut s,
            "heartbeat_lines_total",
            "Heartbeat lines written.",
            "counter",
            c(&self.heartbeat_lines),
        );
        let end = c(&self.queue_end);
        let outs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        let per = [
            (
                "output_lines_sent_total",
                "Lines acknowledged by the output.",
                "counter",
            ),
            (
                "output_batches_sent_total",
                "Requests acknowledged by the output.",
                "counter",
            ),
            (
                "output_retries_total",
                "Attempts retried (429, 5xx, timeouts).",
                "counter",
            ),
            (
                "output_auth_errors_total",
                "401/403/404 answers (data kept).",
                "counter",
            ),
            (
                "output_dead_lettered_total",
                "Lines written to the dead-letter file.",
                "counter",
            ),
            (
                "output_dead_letter_rotations_total",
                "Dead-letter file rotations (it reached dead_letter.max_file_bytes).",
                "counter",
            ),
            (
                "output_splits_total",
                "Batches split after a 413, or bisected after a refusal that named no line.",
                "counter",
            ),
            (
                "output_samples_sent_total",
                "Samples acknowledged by a remote-write output (0 for InfluxDB outputs).",
                "counter",
            ),
            (
                "output_out_of_order_total",
                "Lines a remote-write receiver refused as out of order, duplicate or too old (dead-lettered).",
                "counter",
            ),
            (
                "output_resent_refused_total",
                "Lines resent after a restart that a remote-write receiver refused as out of order, duplicate or too old: stored before the crash, not dead-lettered.",
                "counter",
            ),
            (
                "output_backlog_bytes",
                "Queue bytes not yet acknowledged by the output.",
                "gauge",
            ),
        ];
        for (name, help, kind) in per {
            let _ = writeln!(s, "# HELP storwatch_collector_{name} {help}");
            let _ = writeln!(s, "# TYPE storwatch_collector_{name} {kind}");
            for o in outs.iter() {
                let v = match name {
                    "output_lines_sent_total" => c(&o.lines_sent),
                    "output_batches_sent_total" => c(&o.batches_sent),
                    "output_retries_total" => c(&o.retries),
                    "output_auth_errors_total" => c(&o.auth_errors),
                    "output_dead_lettered_total" => c(&o.dead_lettered),
                    "output_dead_letter_rotations_total" => c(&o.dead_letter_rotations),
                    "output_splits_total" => c(&o.splits),
                    "output_samples_sent_total" => c(&o.samples_sent),
                    "output_out_of_order_total" => c(&o.out_of_order),
                    "output_resent_refused_total" => c(&o.resent_refused),
                    _ => end.saturating_sub(c(&o.cursor)),
                };
                let _ = writeln!(s, "storwatch_collector_{name}{{output=\"{}\"}} {v}", o.name);
            }
        }
        s
    }
}
