//! Receivers: the protocols samples arrive by, decoded into [`Batch`]es for dispatch.
//!
//! Each protocol has a pure decoder (bytes → batches, or an error naming the field or sample)
//! and a thin HTTP handler around it, served on the node's data listener next to the agent
//! config server:
//!
//! | route | protocol | decoder |
//! |---|---|---|
//! | `POST /v1/metrics` | OTLP/HTTP metrics, protobuf or JSON, optional gzip | [`otlp`], [`otlp_json`] |
//! | `POST /api/v1/write` | Prometheus remote-write 1.0 (snappy + protobuf) | [`remote_write`] |
//! | `POST /ingest/prometheus?job=&instance=` | pushed text exposition | [`exposition`] |
//! | `POST /v1/logs` | OTLP/HTTP logs, protobuf or JSON, optional gzip | [`otlp_logs`], [`otlp_logs_json`] |
//! | `POST /v3/logs` | SkyWalking's native log API (JSON array of LogData) | [`native_logs`] |
//!
//! Scrape jobs of the node configuration are run by one [`scrape::ScrapeWorker`]. Prometheus data
//! of every path is converted as SkyWalking's OpenTelemetry path converts it ([`prom`]).
//!
//! Receivers know nothing of rules: they hand batches to a [`BatchSink`] (the dispatcher) and
//! map its refusal to backpressure (429 with `Retry-After`, or a scraper skipping intervals).
//! Everything refused is counted in `samples_rejected{protocol,reason}`. Logs go the same way
//! as [`crate::data::seam::LogBatch`]es to a [`LogSink`] ([`logs_http`]), counted in
//! `logs_received` / `logs_rejected`. See `docs/ingest.md`.

pub mod body;
pub mod config;
pub mod exposition;
pub mod http;
pub mod java;
pub mod logs_http;
pub mod native_logs;
pub mod otlp;
pub mod otlp_json;
pub mod otlp_logs;
pub mod otlp_logs_json;
pub mod prom;
pub mod recording;
pub mod recording_logs;
pub mod remote_write;
pub mod remote_write_wire;
pub mod scrape;

use std::sync::Arc;

use crate::data::seam::{Batch, BatchSink, LogSink, Protocol, SubmitError};
use crate::base::self_metrics::{Telemetry, labels};

pub use config::{BodyLimits, IngestConfig, RawIngest, ScrapeJob};
pub use http::router;
pub use recording::RecordingSink;
pub use recording_logs::RecordingLogSink;
pub use scrape::ScrapeWorker;

/// Why samples (or a whole request) were refused: the `reason` label of `samples_rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The body is not the protocol's format (counted per request).
    Decode,
    /// The body exceeds a size limit (per request).
    TooLarge,
    /// Unsupported `Content-Type` or `Content-Encoding` (per request).
    UnsupportedMediaType,
    /// A request that misses something the route needs, e.g. `job` (per request).
    BadRequest,
    /// A remote-write series or exposition sample that is not valid (per sample).
    InvalidSample,
    /// An OTLP data point that is not valid (per point).
    InvalidPoint,
    /// A Prometheus stale marker (per sample; never evaluated).
    Stale,
    /// An OTLP point flagged `NO_RECORDED_VALUE` (per point).
    NoRecordedValue,
    /// A point of an OTLP sum of UNSPECIFIED temporality (per point).
    UnspecifiedTemporality,
    /// The dispatch queue was full (per sample).
    QueueFull,
    /// The dispatch queue was full when the request arrived: refused before decoding, so its
    /// samples are not known (per request).
    Busy,
    /// The data plane is stopping (per sample).
    Stopped,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Decode => "decode",
            Reason::TooLarge => "too_large",
            Reason::UnsupportedMediaType => "unsupported_media_type",
            Reason::BadRequest => "bad_request",
            Reason::InvalidSample => "invalid_sample",
            Reason::InvalidPoint => "invalid_point",
            Reason::Stale => "stale",
            Reason::NoRecordedValue => "no_recorded_value",
            Reason::UnspecifiedTemporality => "unspecified_temporality",
            Reason::QueueFull => "queue_full",
            Reason::Busy => "busy",
            Reason::Stopped => "stopped",
        }
    }
}


/// What every receiver shares: where batches go, the counters, the limits.
pub struct Ingest {
    sink: Arc<dyn BatchSink>,
    telemetry: Arc<Telemetry>,
    limits: BodyLimits,
    /// Where logs go; none: the log routes answer 503 `logs_unavailable`.
    log_sink: Option<Arc<dyn LogSink>>,
    /// Requests waiting for room in a full dispatch queue (see `http`).
    waiting_for_room: std::sync::atomic::AtomicUsize,
}

impl Ingest {
    pub fn new(sink: Arc<dyn BatchSink>, telemetry: Arc<Telemetry>, limits: BodyLimits) -> Arc<Ingest> {
        Ingest::with_logs(sink, None, telemetry, limits)
    }

    /// Receivers for samples and, when `log_sink` is set, logs.
    pub fn with_logs(
        sink: Arc<dyn BatchSink>,
        log_sink: Option<Arc<dyn LogSink>>,
        telemetry: Arc<Telemetry>,
        limits: BodyLimits,
    ) -> Arc<Ingest> {
        Arc::new(Ingest { sink, telemetry, limits, log_sink, waiting_for_room: std::sync::atomic::AtomicUsize::new(0) })
    }

    pub fn limits(&self) -> BodyLimits {
        self.limits
    }

    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// Counts `n` refused samples (or requests) of `protocol` for `reason`.
    pub fn rejected(&self, protocol: Protocol, reason: Reason, n: usize) {
        if n > 0 {
            self.telemetry
                .samples_rejected
                .get_or_create(&labels([("protocol", protocol.as_str()), ("reason", reason.as_str())]))
                .inc_by(n as u64);
        }
    }

    /// Counts the decoded samples of `batches`, then submits them all together; a refusal is
    /// counted as `queue_full` or `stopped` for every one of their samples.
    pub fn submit(&self, protocol: Protocol, batches: Vec<Batch>) -> Result<(), SubmitError> {
        self.submit_read(protocol, batches, 0)
    }

    /// Whether dispatch could take a submission now (see [`BatchSink::has_room`]).
    pub fn has_room(&self) -> bool {
        self.sink.has_room()
    }

    /// The names the loaded files of `catalog` read (see [`BatchSink::reads`]).
    pub fn reads(&self, catalog: crate::data::seam::Catalog) -> Option<Arc<std::collections::HashSet<String>>> {
        self.sink.reads(catalog)
    }

    /// [`Ingest::submit`] for a request of which `unread` valid samples were left out because no
    /// loaded file reads them: they count as received, and as refused with the request.
    pub fn submit_read(&self, protocol: Protocol, batches: Vec<Batch>, unread: usize) -> Result<(), SubmitError> {
        let queued: usize = batches.iter().map(|b| b.samples.len()).sum();
        let samples = queued + unread;
        if samples == 0 {
            return Ok(());
        }
        self.telemetry.samples_received.get_or_create(&labels([("protocol", protocol.as_str())])).inc_by(samples as u64);
        if queued == 0 {
            return Ok(());
        }
        let result = self.sink.submit(batches);
        match &result {
            Ok(()) => {}
            Err(SubmitError::QueueFull { .. }) => self.rejected(protocol, Reason::QueueFull, samples),
            Err(SubmitError::Stopped) => self.rejected(protocol, Reason::Stopped, samples),
        }
        result
    }
}

/// Wall-clock epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
