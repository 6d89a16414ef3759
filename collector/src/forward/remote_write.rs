//! The `prometheus_remote_write` output: queue lines as Prometheus remote-write 1.0 requests —
//! a protobuf `WriteRequest` (`prometheus/prompb/remote.proto`, `types.proto`), snappy block
//! compression, `Content-Encoding: snappy`, `Content-Type: application/x-protobuf`,
//! `X-Prometheus-Remote-Write-Version: 0.1.0`.
//!
//! Each line becomes samples named by [`storwatch_wire::prom`], the naming of the agent's own
//! `/metrics`: one per numeric field, at the line's timestamp (ms), plus one `<measurement>_info`
//! sample (value 1) carrying the string fields as labels. `event` lines are kept the same way:
//! `storwatch_event_info{host,source,object,text,from_state,to_state} 1` at the event's time
//! (a series per event — events are rare). A batch's samples are grouped per series and sorted
//! by time; two samples of one series at one millisecond keep the later line's value, as
//! InfluxDB keeps the later point.
//!
//! Answers ([`classify`]): 2xx delivered; 400, 422 and other 4xx but 401/403/404/408/429 are
//! refusals of the data, and so is any answer whose text says the samples are out of order, a
//! duplicate, too old or out of bounds (Prometheus 2.x answers 500 to a sample older than its
//! out-of-order window): the batch is bisected down to the lines refused, which go to the
//! dead-letter file; 413 splits the batch; 401/403/404 keep the data and retry slowly; 408,
//! 429 and 5xx are retried with backoff, honouring `Retry-After`.
//!
//! The protobuf is written by hand: four small messages, no code generation in the build.

use std::sync::atomic::Ordering;

use super::answer::{read_body, Verdict, MAX_REMOTE_WRITE_ANSWER_BYTES};
pub use super::rw_encode::Encoder;
pub use super::rw_proto::Labels;
use super::Forwarder;
use http::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;

/// The remote-write protocol version header of 1.0.
pub const VERSION_HEADER: &str = "0.1.0";

/// A batch of lines as one `WriteRequest` (an [`Encoder`] of its own, for tests and tools; the
/// output reuses its encoders from one request to the next).
#[derive(Debug, Default)]
pub struct Samples {
    enc: Encoder,
}

impl Samples {
    /// The samples of `lines`; `now_ms` stamps a line without a timestamp. The lines that
    /// cannot be read (the queue holds only validated lines, so none in practice) are
    /// returned as (index, reason) instead.
    pub fn of_lines(lines: &[&str], now_ms: i64) -> Result<Samples, Vec<(usize, String)>> {
        let mut enc = Encoder::default();
        enc.add_lines(lines, now_ms)?;
        Ok(Samples { enc })
    }

    /// Series in the batch.
    pub fn series(&self) -> usize {
        self.enc.series()
    }

    /// Samples in the batch, before a series' samples at one millisecond are made one.
    pub fn samples(&self) -> usize {
        self.enc.samples()
    }

    /// Every series: its labels with `__name__`, sorted, and its samples in time order, one per
    /// millisecond (the later line's); series by label set (in the order their lines came) and
    /// name.
    pub fn timeseries(&mut self) -> Vec<(Labels, Vec<(i64, f64)>)> {
        self.enc.timeseries()
    }

    /// The `WriteRequest` protobuf, uncompressed.
    pub fn protobuf(&mut self) -> Vec<u8> {
        self.enc.encode();
        self.enc.protobuf().to_vec()
    }

    /// The request body (the protobuf in snappy's block format) and the samples it holds.
    pub fn body(&mut self) -> Result<(Vec<u8>, usize), snap::Error> {
        self.enc.compress().map(|(b, count)| (b.to_vec(), count))
    }
}

/// Whether a refusal is about the samples' time (counted as out of order): Prometheus's
/// `out of order sample`, `out of bounds`, `duplicate sample for timestamp`, `too old sample`;
/// Mimir's and Thanos's `out-of-order`, `too old`, `too far in the past`.
pub fn refused_for_time(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    [
        "out of order",
        "out-of-order",
        "out of bounds",
        "out-of-bounds",
        "duplicate sample",
        "too old",
        "too far in the past",
    ]
    .iter()
    .any(|p| r.contains(p))
}

/// Reads a remote-write receiver's answer (see the module's comment).
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str) -> Verdict {
    let retry_after = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_secs);
    let short: String = body.trim().chars().take(500).collect();
    let bad = || Verdict::BadData {
        reason: format!("{status}: {short}"),
        named: Vec::new(),
    };
    match status.as_u16() {
        200..=299 => Verdict::Done,
        // Prometheus answers a sample outside its window 400, or 500 ("too old sample" from
        // its out-of-order window): only those two statuses are read for it. A 401/403, a
        // 429 or a gateway's 502/503 page that happens to say "too old" is what its status says.
        400 | 500 if refused_for_time(&short) => bad(),
        401 | 403 | 404 => Verdict::Refused(format!("{status}: {short}")),
        413 => Verdict::TooLarge,
        408 | 429 | 500..=599 => Verdict::Retry(retry_after),
        400..=499 => bad(),
        _ => Verdict::Refused(format!("unexpected {status}: {short}")),
    }
}

impl Forwarder {
    /// Sends `lines` as one remote-write request, written by the encoder of `shard`.
    pub(super) async fn send_remote_write(
        &self,
        url: &crate::client::Url,
        lines: &[&str],
        shard: usize,
    ) -> Verdict {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        // the shard's encoder, its buffers and caches kept from its earlier requests (held only
        // while the body is written, never across the request)
        let made = {
            let (mut guard, mut fresh);
            let enc: &mut Encoder = match self.encoders.get(shard % self.encoders.len().max(1)) {
                Some(e) => {
                    guard = e.lock().unwrap_or_else(|e| e.into_inner());
                    &mut guard
                }
                None => {
                    fresh = Encoder::default();
                    &mut fresh
                }
            };
            enc.clear();
            match enc.add_lines(lines, now_ms) {
                Ok(()) => {
                    // Only an input over snappy's 4 GiB limit fails; batch_bytes keeps far below.
                    // The body is the buffer it was written into, not a copy; the encoder
                    // writes the next one into a buffer of an earlier body.
                    enc.compress_into(self.bodies.take())
                        .map(|(buf, at, count)| (self.bodies.body(buf, at), count))
                        .map_err(|e| Verdict::BadData {
                            reason: format!("cannot compress the request: {e}"),
                            named: Vec::new(),
                        })
                }
                Err(named) => Err(Verdict::BadData {
                    reason: "not line protocol".into(),
                    named,
                }),
            }
        };
        let (body, count) = match made {
            Ok(m) => m,
            Err(v) => return v,
        };
        let mut req = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/x-protobuf")
            .header(CONTENT_ENCODING, "snappy")
            .header("X-Prometheus-Remote-Write-Version", VERSION_HEADER);
        if let Some(auth) = &self.output.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        match req.body(body).send().await {
            Ok(resp) => {
                let status = resp.status();
                let retry_after = resp
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let text = read_body(resp, MAX_REMOTE_WRITE_ANSWER_BYTES).await;
                let verdict = classify(status, retry_after.as_deref(), &text);
                if verdict == Verdict::Done {
                    self.metrics
                        .samples_sent
                        .fetch_add(count as u64, Ordering::Relaxed);
                } else {
                    // a bisection meets one refusal per halving: a log line now and then
                    let due = match verdict {
                        Verdict::BadData { .. } => self
                            .quiet_refusals
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .due(),
                        _ => Some(1),
                    };
                    if let Some(requests) = due {
                        tracing::warn!(output = %self.output.name, status = %status, answer = %crate::http::printable(text.trim()), lines = lines.len(), requests, "remote write not accepted");
                    }
                }
                verdict
            }
            Err(e) => {
                tracing::warn!(output = %self.output.name, error = %e, "write failed; will retry");
                Verdict::Retry(None)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_sorted_series_named_as_the_agent_names_them() {
        let lines = [
            "disk,host=n1,device=sda r_await_ms=4,util_pct=50i 2000000000",
            "disk,host=n1,device=sda r_await_ms=5,util_pct=60i 1000000000",
            // the same point again, later in the batch: its value wins
            "disk,host=n1,device=sda r_await_ms=6,util_pct=70i 1000000000",
            "md,host=n1,array=md0 state=\"clean\",host=\"x\",degraded=false 1000000000",
        ];
        let mut s = Samples::of_lines(&lines, 0).unwrap();
        let got = s.timeseries();
        let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            got,
            vec![
                (
                    l(&[
                        ("__name__", "storwatch_disk_read_await_seconds"),
                        ("device", "sda"),
                        ("host", "n1")
                    ]),
                    vec![(1000, 0.006), (2000, 0.004)]
                ),
                (
                    l(&[
                        ("__name__", "storwatch_disk_util_percent"),
                        ("device", "sda"),
                        ("host", "n1")
                    ]),
                    vec![(1000, 70.0), (2000, 50.0)]
                ),
                (
                    l(&[
                        ("__name__", "storwatch_md_degraded"),
                        ("array", "md0"),
                        ("host", "n1")
                    ]),
                    vec![(1000, 0.0)]
                ),
                (
                    // the string field named like a tag does not replace it
                    l(&[
                        ("__name__", "storwatch_md_info"),
                        ("array", "md0"),
                        ("host", "n1"),
                        ("state", "clean")
                    ]),
                    vec![(1000, 1.0)]
                ),
            ]
        );
        assert_eq!((s.series(), s.samples()), (4, 8));
    }

    #[test]
    fn a_string_field_written_twice_is_labelled_with_its_last_value() {
        let mut s = Samples::of_lines(
            &["md,host=n1,array=md0 state=\"clean\",state=\"degraded\" 1000000"],
            0,
        )
        .unwrap();
        let got = s.timeseries();
        assert_eq!(got.len(), 1);
        assert!(
            got[0]
                .0
                .contains(&("state".to_string(), "degraded".to_string())),
            "{:?}",
            got[0].0
        );
    }

    #[test]
    fn protobuf_bytes_of_one_sample() {
        let mut s = Samples::of_lines(&["m v=1.5 3000000"], 0).unwrap();
        let label = [&[0x0a, 8][..], b"__name__", &[0x12, 13], b"storwatch_m_v"].concat();
        let mut sample = vec![0x09];
        sample.extend_from_slice(&1.5f64.to_le_bytes());
        sample.extend_from_slice(&[0x10, 3]);
        let series = [
            &[0x0a, label.len() as u8][..],
            &label,
            &[0x12, sample.len() as u8],
            &sample,
        ]
        .concat();
        let want = [&[0x0a, series.len() as u8][..], &series].concat();
        assert_eq!(s.protobuf(), want);
        let (body, count) = s.body().unwrap();
        assert_eq!(count, 1);
        assert_eq!(
            snap::raw::Decoder::new().decompress_vec(&body).unwrap(),
            want
        );
        // negative times (before 1970) are two's complement varints, ten bytes
        let mut s = Samples::of_lines(&["m v=1 -1000000"], 0).unwrap();
        assert!(s
            .protobuf()
            .ends_with(&[0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
    }

    #[test]
    fn lines_without_time_get_now_and_bad_lines_are_named() {
        let mut s = Samples::of_lines(&["m v=1"], 42).unwrap();
        assert_eq!(s.timeseries()[0].1, vec![(42, 1.0)]);
        let bad = Samples::of_lines(&["m v=1 1", "not a line"], 0).unwrap_err();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, 1);
    }

    #[test]
    fn answers() {
        let s = |c: u16| StatusCode::from_u16(c).unwrap();
        assert_eq!(classify(s(204), None, ""), Verdict::Done);
        assert_eq!(
            classify(s(429), Some("3"), ""),
            Verdict::Retry(Some(std::time::Duration::from_secs(3)))
        );
        assert_eq!(classify(s(503), None, "down"), Verdict::Retry(None));
        assert_eq!(classify(s(413), None, ""), Verdict::TooLarge);
        assert!(matches!(classify(s(401), None, ""), Verdict::Refused(_)));
        assert!(matches!(
            classify(s(400), None, "out of order sample\n"),
            Verdict::BadData { .. }
        ));
        assert!(matches!(
            classify(s(409), None, "conflict"),
            Verdict::BadData { .. }
        ));
        // Prometheus 2.x answers 500 to a sample older than its out-of-order window
        assert!(matches!(
            classify(s(500), None, "too old sample"),
            Verdict::BadData { .. }
        ));
        // any other status is what it says, whatever its page tells
        assert_eq!(
            classify(s(503), Some("1"), "upstream: too old sample"),
            Verdict::Retry(Some(std::time::Duration::from_secs(1)))
        );
        assert_eq!(
            classify(s(429), None, "rate limited: sample out of bounds"),
            Verdict::Retry(None)
        );
        assert!(matches!(
            classify(s(401), None, "token too old"),
            Verdict::Refused(_)
        ));
        assert!(refused_for_time("400 Bad Request: out of bounds"));
        assert!(refused_for_time("duplicate sample for timestamp"));
        assert!(!refused_for_time("invalid labels"));
    }
}
