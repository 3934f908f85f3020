//! The data plane's seams: what receivers hand to dispatch, and the errors they see back.
//!
//! Receivers (`ingest`) decode a request into [`Batch`]es and submit them to a [`BatchSink`]
//! (the dispatcher, or a test twin). A batch is SkyWalking's unit of MAL evaluation: one OTLP
//! `ResourceMetrics`, one remote-write request, one scrape, one pushed exposition. Dispatch
//! evaluates it against the active files of its catalog and writes the values it computes to a
//! [`crate::data::metrics::MetricWriter`].

use std::time::Duration;

pub use hotrule_mal_engine::{Entity, MetricValue, Sample, Value};

/// Where a batch came from: the `protocol` label of the ingest counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// OTLP/HTTP metrics, `POST /v1/metrics`.
    Otlp,
    /// Prometheus remote-write 1.0, `POST /api/v1/write`.
    RemoteWrite,
    /// A scrape job of the node configuration.
    Scrape,
    /// Text exposition pushed to `POST /ingest/prometheus`.
    Push,
    /// Samples a LAL `metrics {}` block emitted.
    Lal,
    /// SkyWalking's native `MeterReportService` (gRPC).
    SkyWalkingMeter,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Otlp => "otlp",
            Protocol::RemoteWrite => "remote_write",
            Protocol::Scrape => "scrape",
            Protocol::Push => "push",
            Protocol::Lal => "lal",
            Protocol::SkyWalkingMeter => "skywalking_meter",
        }
    }
}

/// The rule catalog a batch is evaluated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Catalog {
    /// `otel-rules`: OTLP, remote-write, scrape and push all feed it (SkyWalking's Prometheus
    /// path reaches MAL through the OpenTelemetry receiver).
    Otel,
    /// `telegraf-rules`.
    Telegraf,
    /// `log-mal-rules`: samples emitted by LAL.
    LogMal,
    /// `meter-analyzer-config`: the agents' meters (SkyWalking's `MeterReportService`).
    Meter,
}

impl Catalog {
    /// The catalog's directory name, as in a [`crate::base::ids::RuleKey`].
    pub fn as_str(self) -> &'static str {
        match self {
            Catalog::Otel => "otel-rules",
            Catalog::Telegraf => "telegraf-rules",
            Catalog::LogMal => "log-mal-rules",
            Catalog::Meter => "meter-analyzer-config",
        }
    }
}

/// One unit of evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub protocol: Protocol,
    pub catalog: Catalog,
    pub samples: Vec<Sample>,
    /// Wall clock at receipt, epoch milliseconds.
    pub received_ms: i64,
}

/// Why a sink refused a submission. Nothing of a refused submission was accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The dispatch queue is full: HTTP receivers answer 429 with `Retry-After`, scrapers back off.
    #[error("ingest queue full; retry after {}s", retry_after.as_secs().max(1))]
    QueueFull { retry_after: Duration },
    /// The data plane is shutting down.
    #[error("the data plane is stopping")]
    Stopped,
}

/// Where receivers submit decoded batches. All batches of one request are accepted together or
/// refused together, so a retried request is never half counted.
pub trait BatchSink: Send + Sync + 'static {
    fn submit(&self, batches: Vec<Batch>) -> Result<(), SubmitError>;

    /// Every sample name some loaded file of `catalog` reads, when the sink knows it: a receiver
    /// may leave the other samples out before building batches (they are counted as received
    /// and never evaluated). None: keep everything.
    fn reads(&self, _catalog: Catalog) -> Option<std::sync::Arc<std::collections::HashSet<String>>> {
        None
    }

    /// Whether a submission could be taken now (advisory: a receiver refuses a request before
    /// decoding it when the queue is full, instead of decoding it to be refused).
    fn has_room(&self) -> bool {
        true
    }
}

/// Where receivers record what agents say of themselves (SkyWalking's `ManagementService`): one
/// instance-traffic value per call, written synchronously (the call is answered once it is
/// stored). An error is the store's, as text.
pub trait InstanceSink: Send + Sync + 'static {
    fn record(&self, value: MetricValue) -> Result<(), String>;
}

pub use hotrule_lal_engine::LogData;

/// Where a log batch came from: the `protocol` label of the log counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogProtocol {
    /// OTLP/HTTP logs, `POST /v1/logs`.
    Otlp,
    /// SkyWalking's native log HTTP API, `POST /v3/logs`.
    SkyWalking,
    /// SkyWalking's native `LogReportService` (gRPC).
    SkyWalkingGrpc,
}

impl LogProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            LogProtocol::Otlp => "otlp",
            LogProtocol::SkyWalking => "skywalking",
            LogProtocol::SkyWalkingGrpc => "skywalking_grpc",
        }
    }
}

/// One unit of LAL evaluation: the logs of one request (one OTLP `ResourceLogs`, one native
/// JSON array), evaluated against the active files of the `lal` catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct LogBatch {
    pub protocol: LogProtocol,
    pub logs: Vec<LogData>,
    /// Wall clock at receipt, epoch milliseconds.
    pub received_ms: i64,
}

/// Where log receivers submit decoded batches; like [`BatchSink`], all batches of one request
/// are accepted together or refused together.
pub trait LogSink: Send + Sync + 'static {
    fn submit_logs(&self, batches: Vec<LogBatch>) -> Result<(), SubmitError>;
}
