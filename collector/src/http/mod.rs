//! HTTP: the routes, who may write, and the listener.
//!
//! * [`app`] — the router over the shared [`AppState`]: `/write` (v1), `/api/v2/write`,
//!   `/api/v3/write_lp`, `/query`, `/ping`, `/health`, `/metrics`;
//! * `write` — the write handlers: token, target, limits, body, validation, queue, answer;
//! * `query` — `/query`: `CREATE DATABASE` and `SHOW DATABASES`, what clients ask before writing;
//! * `answer` — answers in InfluxDB's shapes;
//! * `status` — `/ping`, `/health`, `/metrics`;
//! * [`auth`] — the token file, the constant-time check, the per-token rate limit;
//! * [`server`] — the listener: TLS/mTLS, header/body/idle timeouts, connection limit.

mod answer;
pub use answer::printable;
pub mod auth;
mod query;
pub mod server;
mod status;
mod write;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::config::{Limits, QueueConfig};
use crate::heartbeat::LastSeen;
use crate::ingest::TypeMap;
use crate::metrics::Metrics;
use crate::queue::Queue;
use crate::target::Targets;
use auth::{RateLimiter, Tokens};
use storwatch_wire::lp::Backends;

/// Everything the handlers share.
#[derive(Debug)]
pub struct AppState {
    /// Accepted tokens; `None` runs open (only allowed on loopback, checked at start-up).
    /// Replaced as a whole on SIGHUP.
    pub tokens: std::sync::RwLock<Option<Tokens>>,
    pub limiter: RateLimiter,
    pub queue: Arc<Queue>,
    pub types: TypeMap,
    pub last_seen: Arc<LastSeen>,
    pub metrics: Arc<Metrics>,
    /// The limits a request is held to; replaced on SIGHUP (see [`AppState::limits`]).
    pub limits: std::sync::RwLock<Arc<Limits>>,
    /// The queue's watermark and Retry-After; replaced on SIGHUP.
    pub queue_cfg: std::sync::RwLock<Arc<QueueConfig>>,
    pub host_tag: String,
    /// The InfluxDB versions of the outputs: a line is accepted only when every one would store
    /// it, and answers follow the strictest.
    pub backends: Backends,
    /// The databases requests may name; replaced on SIGHUP.
    pub targets: std::sync::RwLock<Arc<Targets>>,
    /// Bodies being inflated and validated at once ([`validation_slots`]): bounds the memory of
    /// decompressed bodies however many clients send at the same time.
    pub work_slots: tokio::sync::Semaphore,
    /// Room for request bodies in memory, in KiB (`limits.max_inflight_body_bytes`).
    pub inflight_kib: tokio::sync::Semaphore,
}

impl AppState {
    /// The limits in force now. Those read only at start (connections, timeouts of the
    /// listener, memory for bodies, decompressed size) keep their start values here.
    pub fn limits(&self) -> Arc<Limits> {
        self.limits
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The databases requests may name now.
    pub fn targets(&self) -> Arc<Targets> {
        self.targets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The queue settings in force now.
    pub fn queue_cfg(&self) -> Arc<QueueConfig> {
        self.queue_cfg
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Bodies inflated and validated at once, per core.
///
/// More than one per core: on a machine shared with other work a validation thread runs for
/// the part of a core the scheduler gives it, not a whole one, and with one slot per core the
/// requests queued for a slot while the collector's threads got 0.5–0.7 of 2 cores (issue 32's
/// bench: 680,000–840,000 lines/s with 2 slots, 1.06 million with 4, 1.2–1.3 million with 8 or
/// 16; docs/performance.md). Each slot may hold one inflated body (`max_decompressed_bytes`).
pub const VALIDATIONS_PER_CORE: usize = 4;

/// [`VALIDATIONS_PER_CORE`] times the cores this process may run on.
pub fn validation_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * VALIDATIONS_PER_CORE
}

/// The router over a shared state.
pub fn app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/write", post(write::write_v1))
        .route("/api/v2/write", post(write::write_v2))
        .route("/api/v3/write_lp", post(write::write_v3))
        .route("/query", get(query::query).post(query::query))
        .route("/ping", get(status::ping).head(status::ping))
        .route("/health", get(status::health))
        .route("/metrics", get(status::metrics))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    /// One validation slot per core held the rate to what the scheduler gave two threads on a
    /// shared machine; the collector keeps a few bodies in validation per core.
    #[test]
    fn more_bodies_are_validated_at_once_than_there_are_cores() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        assert_eq!(
            super::validation_slots(),
            cores * super::VALIDATIONS_PER_CORE
        );
        assert!(super::validation_slots() >= 4 * cores);
    }
}
