//! Delivering lines to one output: batches of at most `batch_lines` / `batch_bytes`, each
//! retried, split or dead-lettered by its [`Verdict`] until every line is acknowledged or
//! dead-lettered. [`Forwarder::deliver`] sends a list of lines with up to two requests at once;
//! the queue's loop (`Forwarder::run`) hands batches to `deliver_chunks` through its own window.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use tokio::sync::watch;

use super::answer::{classify, read_body, Verdict, MAX_INFLUX_ANSWER_BYTES};
use super::{ForwardError, Forwarder};
use crate::client::Url;
use crate::config::{Api, OutputType};
use crate::target::Target;

impl Forwarder {
    /// Sends `lines` as one request (a remote-write output's with the encoder of `shard`).
    async fn send(&self, url: &Url, lines: &[&str], shard: usize) -> Verdict {
        if self.output.kind == OutputType::PrometheusRemoteWrite {
            return self.send_remote_write(url, lines, shard).await;
        }
        // written into buffers of earlier bodies ([`super::buffers`])
        let mut body = self.bodies.take();
        body.reserve(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            body.extend_from_slice(l.as_bytes());
            body.push(b'\n');
        }
        let mut req = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "text/plain; charset=utf-8");
        if self.output.gzip {
            let mut z = self.bodies.take();
            z.reserve(body.len() / 4);
            let mut enc = flate2::write::GzEncoder::new(z, flate2::Compression::fast());
            if enc.write_all(&body).is_ok() {
                if let Ok(z) = enc.finish() {
                    self.bodies.give(std::mem::replace(&mut body, z));
                    req = req.header(CONTENT_ENCODING, "gzip");
                }
            }
        }
        let body = self.bodies.body(body, 0);
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
                let text = read_body(resp, MAX_INFLUX_ANSWER_BYTES).await;
                classify(
                    self.output.api,
                    status,
                    retry_after.as_deref(),
                    &text,
                    lines,
                )
            }
            Err(e) => {
                tracing::warn!(output = %self.output.name, error = %e, "write failed; will retry");
                Verdict::Retry(None)
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let max = self.output.backoff_max.as_millis() as u64;
        let base = (self.output.backoff_min.as_millis() as u64)
            .saturating_mul(1u64 << attempt.min(20))
            .min(max);
        // Full jitter spreads out 600 nodes' worth of retries after an outage.
        Duration::from_millis(fastrand::u64(base / 2..=base.max(1)))
    }

    pub(super) async fn sleep(
        &self,
        d: Duration,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        if *stop.borrow() {
            return Err(ForwardError::Stopped);
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = stop.changed() => Err(ForwardError::Stopped),
        }
    }

    /// Creates database `db` on a v1 output (`CREATE DATABASE`, with the output's
    /// credentials); true when the output says it exists now.
    async fn create_database(&self, db: &str) -> bool {
        let mut req = self
            .client
            .post(&self.output.query_url())
            .form(&[("q", format!("CREATE DATABASE \"{db}\""))]);
        if let Some(auth) = &self.output.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        match req.send().await {
            Ok(resp) if resp.status().is_success() => {
                let text = read_body(resp, MAX_INFLUX_ANSWER_BYTES).await;
                let ok = !text.contains("\"error\"");
                if ok {
                    tracing::info!(output = %self.output.name, db = %db, "database created");
                } else {
                    tracing::warn!(output = %self.output.name, db = %db, answer = %crate::http::printable(&text), "CREATE DATABASE refused");
                }
                ok
            }
            Ok(resp) => {
                tracing::warn!(output = %self.output.name, db = %db, status = %resp.status(), "CREATE DATABASE refused");
                false
            }
            Err(e) => {
                tracing::warn!(output = %self.output.name, db = %db, error = %e, "CREATE DATABASE failed");
                false
            }
        }
    }

    /// Delivers `lines` of `target` completely: every line is acknowledged by the output or
    /// dead-lettered. (`deliver_chunks` with `resent`: the lines were sent before a restart,
    /// and a remote-write receiver refusing one of them for its time has stored it then.)
    pub async fn deliver(
        &self,
        lines: &[&str],
        target: &Target,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        let url = self.output.url_for(target);
        let mut stack: Vec<Vec<&str>> = Vec::new();
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for l in lines {
            if !chunk.is_empty()
                && (chunk.len() >= self.output.batch_lines
                    || bytes + l.len() > self.output.batch_bytes)
            {
                stack.push(std::mem::take(&mut chunk));
                bytes = 0;
            }
            bytes += l.len() + 1;
            chunk.push(*l);
        }
        if !chunk.is_empty() {
            stack.push(chunk);
        }
        if stack.len() > 1 && self.output.max_in_flight > 1 {
            // Two halves in flight at once (InfluxDB ingests faster with concurrent writers);
            // the cursor still moves only after both are fully delivered.
            let second = stack.split_off(stack.len() / 2);
            let mut stop2 = stop.clone();
            let (a, b) = tokio::join!(
                self.deliver_chunks(&url, target, stack, false, 0, stop),
                self.deliver_chunks(&url, target, second, false, 1, &mut stop2)
            );
            return a.and(b);
        }
        self.deliver_chunks(&url, target, stack, false, 0, stop)
            .await
    }

    pub(super) async fn deliver_chunks(
        &self,
        url: &Url,
        target: &Target,
        stack: Vec<Vec<&str>>,
        resent: bool,
        shard: usize,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), ForwardError> {
        let mut stack: Vec<Part<'_>> = stack
            .into_iter()
            .rev()
            .map(|lines| Part {
                lines,
                known: Known::Unknown,
            })
            .collect();
        let mut created = false;
        while let Some(Part {
            lines: chunk,
            known,
        }) = stack.pop()
        {
            if known == Known::Refused && chunk.len() > 1 {
                // Its sibling was accepted where the two together were refused: the refused
                // line is in here, and sending it whole would only be refused again.
                self.metrics.splits.fetch_add(1, Ordering::Relaxed);
                bisect(&mut stack, &chunk);
                continue;
            }
            // What this part's answer tells of the sibling waiting above it on the stack.
            let mut accepted = false;
            let mut attempt = 0u32;
            loop {
                if *stop.borrow() {
                    return Err(ForwardError::Stopped);
                }
                match self.send(url, &chunk, shard).await {
                    Verdict::Done => {
                        self.metrics.batches_sent.fetch_add(1, Ordering::Relaxed);
                        self.metrics
                            .lines_sent
                            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        accepted = true;
                        break;
                    }
                    Verdict::Retry(after) => {
                        self.metrics.retries.fetch_add(1, Ordering::Relaxed);
                        let wait = match after {
                            Some(a) => a.min(self.output.backoff_max).max(self.backoff(attempt)),
                            None => self.backoff(attempt),
                        };
                        attempt = attempt.saturating_add(1);
                        self.sleep(wait, stop).await?;
                    }
                    Verdict::Refused(msg)
                        if !created
                            && !target.is_default()
                            && self.output.api == Api::V1
                            && self.output.kind == OutputType::Influxdb
                            && msg.starts_with("404")
                            && msg.contains("database not found") =>
                    {
                        // A database a request named (targets.allow) that the output does not
                        // have yet: created once, then the batch is sent again at once.
                        created = true;
                        if !self.create_database(&target.db).await {
                            self.metrics.auth_errors.fetch_add(1, Ordering::Relaxed);
                            self.sleep(self.output.auth_retry, stop).await?;
                            created = false;
                        }
                    }
                    Verdict::Refused(msg) => {
                        self.metrics.auth_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(output = %self.output.name, url = %url, answer = %crate::http::printable(&msg), retry_in_s = self.output.auth_retry.as_secs(), "output refuses the credentials or the target; data kept");
                        self.sleep(self.output.auth_retry, stop).await?;
                    }
                    Verdict::TooLarge => {
                        settle_sibling(&mut stack, false);
                        if chunk.len() > 1 {
                            self.metrics.splits.fetch_add(1, Ordering::Relaxed);
                            let (a, b) = chunk.split_at(chunk.len() / 2);
                            for lines in [b, a] {
                                stack.push(Part {
                                    lines: lines.to_vec(),
                                    known: Known::Unknown,
                                });
                            }
                        } else {
                            self.write_dead_letter(&[(
                                chunk[0],
                                "413: line too large for the output".into(),
                            )])?;
                        }
                        break;
                    }
                    Verdict::BadData { reason, named } => {
                        settle_sibling(&mut stack, false);
                        if chunk.len() == 1 && resent && self.refused_as_stored(&reason) {
                            self.note_resent_refused(&reason);
                        } else if chunk.len() == 1 {
                            self.write_dead_letter(&[(chunk[0], reason)])?;
                        } else if !named.is_empty() {
                            let entries: Vec<(&str, String)> = named
                                .iter()
                                .filter_map(|(i, r)| chunk.get(*i).map(|l| (*l, r.clone())))
                                .collect();
                            self.write_dead_letter(&entries)?;
                            let rest: Vec<&str> = chunk
                                .iter()
                                .enumerate()
                                .filter(|(i, _)| !named.iter().any(|(j, _)| j == i))
                                .map(|(_, l)| *l)
                                .collect();
                            // The rest is sent again: where the output already stored it, the
                            // same points are simply overwritten.
                            if !rest.is_empty() {
                                stack.push(Part {
                                    lines: rest,
                                    known: Known::Unknown,
                                });
                            }
                        } else {
                            self.metrics.splits.fetch_add(1, Ordering::Relaxed);
                            bisect(&mut stack, &chunk);
                        }
                        break;
                    }
                }
            }
            if accepted {
                settle_sibling(&mut stack, true);
            }
        }
        Ok(())
    }
}

/// A part of a batch waiting to be sent, and what is known of it.
#[derive(Debug)]
struct Part<'a> {
    lines: Vec<&'a str>,
    known: Known,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Nothing: it is sent.
    Unknown,
    /// The second half of a refused part, waiting for its first half's answer: if the first
    /// half is accepted, the refused line is in this one.
    RefusedIfSiblingAccepted,
    /// Holds a line the output refuses: split without being sent (a single line is still sent
    /// alone before it is dead-lettered, so that no line is dead-lettered on inference alone).
    Refused,
}

/// Splits a refused part without names in two, the first half to be sent first.
fn bisect<'a>(stack: &mut Vec<Part<'a>>, chunk: &[&'a str]) {
    let (a, b) = chunk.split_at(chunk.len() / 2);
    stack.push(Part {
        lines: b.to_vec(),
        known: Known::RefusedIfSiblingAccepted,
    });
    stack.push(Part {
        lines: a.to_vec(),
        known: Known::Unknown,
    });
}

/// Once a first half has its answer: the second half, next on the stack, holds the refused
/// line when the first was `accepted`, and is unknown otherwise.
fn settle_sibling(stack: &mut [Part<'_>], accepted: bool) {
    if let Some(p) = stack.last_mut() {
        if p.known == Known::RefusedIfSiblingAccepted {
            p.known = if accepted {
                Known::Refused
            } else {
                Known::Unknown
            };
        }
    }
}
