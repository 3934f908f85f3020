//! Receivers: the protocols samples arrive by, decoded into [`Batch`]es for dispatch.
//!
//! Each protocol has a pure decoder (bytes → batches, or an error naming the field or sample)
//! and a thin HTTP handler around it, served on the node's data listener next to the agent
//! config server:
//!
//! | route | protocol | decoder |
//! |---|---|---|
//! | `POST /v1/metrics` | OTLP/HTTP metrics, protobuf or JSON, optional gzip | [`otlp`], [`otlp_metrics_json`] |
//! | `POST /api/v1/write` | Prometheus remote-write 1.0 (snappy + protobuf) | [`remote_write`] |
//! | `POST /ingest/prometheus?job=&instance=` | pushed text exposition | [`exposition`] |
//! | `POST /v1/logs` | OTLP/HTTP logs, protobuf or JSON, optional gzip | [`otlp_logs`], [`otlp_logs_json`] |
//! | `POST /v3/logs` | SkyWalking's native log API (JSON array of LogData) | [`native_logs`] |
//!
//! Both OTLP/JSON decoders read by the shared [`otlp_json`]; the routes of both planes answer
//! through [`answer`].
//!
//! Scrape jobs of the node configuration are run by one [`scrape::ScrapeWorker`], which scrapes
//! only the targets this node owns among the live nodes and shows them on a [`ScrapeBoard`].
//! Prometheus data of every path is converted as SkyWalking's OpenTelemetry path converts it
//! ([`prom`]).
//!
//! Receivers know nothing of rules: they hand batches to a [`BatchSink`] (the dispatcher) and
//! map its refusal to backpressure (429 with `Retry-After`, or a scraper skipping intervals).
//! Everything refused is counted in `samples_rejected{protocol,reason}`. Logs go the same way
//! as [`crate::data::seam::LogBatch`]es to a [`LogSink`] ([`logs_http`]), counted in
//! `logs_received` / `logs_rejected`. See `docs/ingest.md`.

pub mod answer;
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
pub mod otlp_metrics_json;
pub mod prom;
pub mod recording;
pub mod recording_logs;
pub mod remote_write;
pub mod remote_write_wire;
pub mod scrape;
pub mod scrape_board;
pub mod skywalking;

use std::sync::Arc;

use crate::base::self_metrics::{CounterFamily, SelfMetrics, labels};
use crate::data::seam::{Batch, BatchSink, LogSink, Protocol, SubmitError};

pub use config::{BodyLimits, IngestConfig, RawIngest, ScrapeJob};
pub use http::router;
pub use recording::RecordingSink;
pub use recording_logs::RecordingLogSink;
pub use scrape::ScrapeWorker;
pub use scrape_board::ScrapeBoard;

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

/// A plane's `reason` label (samples: [`Reason`], logs: [`logs_http::LogReason`]): the reasons
/// every receiver refuses for, and the counters they are counted in.
pub trait RefusalReason: Copy + std::fmt::Debug + Send + 'static {
    /// The plane's `protocol` label.
    type Protocol: Copy;
    const DECODE: Self;
    const TOO_LARGE: Self;
    const UNSUPPORTED_MEDIA_TYPE: Self;
    const QUEUE_FULL: Self;
    const STOPPED: Self;
    /// Names the plane's decoders in the log line of one that failed.
    const DECODER: &'static str;

    fn as_str(self) -> &'static str;
    fn protocol_str(protocol: Self::Protocol) -> &'static str;
    /// Items received, by protocol (`samples_received`, `logs_received`).
    fn received(telemetry: &SelfMetrics) -> &CounterFamily;
    /// Items refused, by protocol and reason (`samples_rejected`, `logs_rejected`).
    fn rejected(telemetry: &SelfMetrics) -> &CounterFamily;
}

/// Implements [`RefusalReason`] for a plane's reason enum, whose common variants (`Decode`,
/// `TooLarge`, `UnsupportedMediaType`, `QueueFull`, `Stopped`) share their names: `$decoder` names
/// its decoders in logs, `$received` and `$rejected` are its counters in [`SelfMetrics`].
macro_rules! refusal_reason {
    ($reason:ident, $protocol:ty, $decoder:literal, $received:ident, $rejected:ident) => {
        impl $crate::data::ingest::RefusalReason for $reason {
            type Protocol = $protocol;
            const DECODE: $reason = $reason::Decode;
            const TOO_LARGE: $reason = $reason::TooLarge;
            const UNSUPPORTED_MEDIA_TYPE: $reason = $reason::UnsupportedMediaType;
            const QUEUE_FULL: $reason = $reason::QueueFull;
            const STOPPED: $reason = $reason::Stopped;
            const DECODER: &'static str = $decoder;

            fn as_str(self) -> &'static str {
                $reason::as_str(self)
            }

            fn protocol_str(protocol: $protocol) -> &'static str {
                protocol.as_str()
            }

            fn received(telemetry: &$crate::base::self_metrics::SelfMetrics) -> &$crate::base::self_metrics::CounterFamily {
                &telemetry.$received
            }

            fn rejected(telemetry: &$crate::base::self_metrics::SelfMetrics) -> &$crate::base::self_metrics::CounterFamily {
                &telemetry.$rejected
            }
        }
    };
}
use refusal_reason;

refusal_reason!(Reason, Protocol, "ingest", samples_received, samples_rejected);

/// How often a receiver waiting for room in a full dispatch queue looks for it.
const ROOM_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// What every receiver shares: where batches go, the counters, the limits.
pub struct Ingest {
    sink: Arc<dyn BatchSink>,
    telemetry: Arc<SelfMetrics>,
    limits: BodyLimits,
    /// Where logs go; none: the log routes answer 503 `logs_unavailable`.
    log_sink: Option<Arc<dyn LogSink>>,
    /// Requests waiting for room in a full dispatch queue (see `http`).
    waiting_for_room: std::sync::atomic::AtomicUsize,
}

impl Ingest {
    pub fn new(sink: Arc<dyn BatchSink>, telemetry: Arc<SelfMetrics>, limits: BodyLimits) -> Arc<Ingest> {
        Ingest::with_logs(sink, None, telemetry, limits)
    }

    /// Receivers for samples and, when `log_sink` is set, logs.
    pub fn with_logs(
        sink: Arc<dyn BatchSink>,
        log_sink: Option<Arc<dyn LogSink>>,
        telemetry: Arc<SelfMetrics>,
        limits: BodyLimits,
    ) -> Arc<Ingest> {
        Arc::new(Ingest { sink, telemetry, limits, log_sink, waiting_for_room: std::sync::atomic::AtomicUsize::new(0) })
    }

    pub fn limits(&self) -> BodyLimits {
        self.limits
    }

    pub fn telemetry(&self) -> &Arc<SelfMetrics> {
        &self.telemetry
    }

    /// Counts `n` refused samples (or requests) of `protocol` for `reason`.
    pub fn rejected(&self, protocol: Protocol, reason: Reason, n: usize) {
        self.count_rejected(protocol, reason, n);
    }

    /// Counts `n` refused items (or requests) of `protocol` for `reason`, in its plane's counter.
    pub fn count_rejected<R: RefusalReason>(&self, protocol: R::Protocol, reason: R, n: usize) {
        if n > 0 {
            R::rejected(&self.telemetry)
                .get_or_create(&labels([("protocol", R::protocol_str(protocol)), ("reason", reason.as_str())]))
                .inc_by(n as u64);
        }
    }

    /// Counts `received` items of `protocol`, then hands them over with `submit`; a refusal is
    /// counted as `queue_full` or `stopped` for every one of them.
    fn hand_over<R: RefusalReason>(
        &self,
        protocol: R::Protocol,
        received: usize,
        submit: impl FnOnce() -> Result<(), SubmitError>,
    ) -> Result<(), SubmitError> {
        R::received(&self.telemetry).get_or_create(&labels([("protocol", R::protocol_str(protocol))])).inc_by(received as u64);
        let result = submit();
        match &result {
            Ok(()) => {}
            Err(SubmitError::QueueFull { .. }) => self.count_rejected(protocol, R::QUEUE_FULL, received),
            Err(SubmitError::Stopped) => self.count_rejected(protocol, R::STOPPED, received),
        }
        result
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

    /// Waits up to `within` for room in dispatch's queue, looking every [`ROOM_POLL`]; whether
    /// there is room.
    async fn room_within(&self, within: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.has_room() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(ROOM_POLL).await;
        }
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
        // Nothing to hand over when every valid sample was left out unread.
        self.hand_over::<Reason>(protocol, samples, || if queued == 0 { Ok(()) } else { self.sink.submit(batches) })
    }
}


#[cfg(test)]
mod tests;
