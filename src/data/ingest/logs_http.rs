//! The log receivers' routes on the data listener, `POST /v1/logs` (OTLP/HTTP) and
//! `POST /v3/logs` (SkyWalking's native API). Thin like the metric routes: check the media type
//! and that the node has a log pipeline, read the body within the limits, run the pure decoder
//! off the async threads, submit to the [`LogSink`], map the outcome to a status in one place
//! (an [`answer::Refusal`]).
//!
//! | outcome | `/v1/logs` (`google.rpc.Status` in the request's type) | `/v3/logs` (text) |
//! |---|---|---|
//! | taken | 200, `ExportLogsServiceResponse`; refused records → `partialSuccess` | 200, `{}` (SkyWalking's `Commands`) |
//! | undecodable, repeated resource attribute, bad element | 400 | 400 naming the element and field |
//! | body too large (sent or decompressed) | 413 | 413 |
//! | wrong `Content-Type` / `Content-Encoding` | 415 | 415 |
//! | log sink full | 429 + `Retry-After` | 429 + `Retry-After` |
//! | no log sink on this node, or stopping | 503 | 503 |
//!
//! Counted in `logs_received{protocol}` (decoded logs handed to the sink) and
//! `logs_rejected{protocol,reason}` ([`LogReason`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use prost::Message;

use crate::base::clock::wall_clock_ms;
use super::answer::{self, OtlpFormat, RawBody, answer_otlp, exported, media_type, refused_message};
use super::{Ingest, native_logs, otlp_logs, otlp_logs_json};
use crate::data::seam::{LogBatch, LogProtocol, LogSink, SubmitError};

/// Why logs (or a whole request) were refused: the `reason` label of `logs_rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogReason {
    /// The body is not the protocol's format, or a native element is not a LogData (per request).
    Decode,
    /// A request the mapping cannot take as a whole, e.g. a repeated resource attribute (per request).
    BadRequest,
    /// The body exceeds a size limit (per request).
    TooLarge,
    /// Unsupported `Content-Type` or `Content-Encoding` (per request).
    UnsupportedMediaType,
    /// OTLP records of a resource without `service.name` (per record).
    MissingService,
    /// An OTLP record with a repeated attribute key (per record).
    InvalidRecord,
    /// The log sink was full (per log).
    QueueFull,
    /// The data plane is stopping (per log).
    Stopped,
    /// The node has no log sink (per request).
    Unavailable,
}

impl LogReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LogReason::Decode => "decode",
            LogReason::BadRequest => "bad_request",
            LogReason::TooLarge => "too_large",
            LogReason::UnsupportedMediaType => "unsupported_media_type",
            LogReason::MissingService => "missing_service",
            LogReason::InvalidRecord => "invalid_record",
            LogReason::QueueFull => "queue_full",
            LogReason::Stopped => "stopped",
            LogReason::Unavailable => "unavailable",
        }
    }
}

super::refusal_reason!(LogReason, LogProtocol, "log", logs_received, logs_rejected);

/// The 503 message when no log sink is set (its code word first, for clients that grep).
pub const LOGS_UNAVAILABLE: &str =
    "logs_unavailable: this node has no log pipeline wired to its data listener (no LogSink), so logs are not accepted";

impl Ingest {
    /// Counts `n` refused logs (or requests) of `protocol` for `reason`.
    pub fn logs_rejected(&self, protocol: LogProtocol, reason: LogReason, n: usize) {
        self.count_rejected(protocol, reason, n);
    }

    /// Counts the logs of `batches`, then submits them all together to `sink`; a refusal is
    /// counted as `queue_full` or `stopped` for every one of their logs.
    fn submit_logs(&self, sink: &dyn LogSink, protocol: LogProtocol, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        let logs: usize = batches.iter().map(|b| b.logs.len()).sum();
        if logs == 0 {
            return Ok(());
        }
        self.hand_over::<LogReason>(protocol, logs, || sink.submit_logs(batches))
    }
}

/// A refusal of a log route, counted in `logs_rejected`.
type LogRefusal = answer::Refusal<LogReason>;

/// 503: the node has no log sink.
fn unavailable() -> LogRefusal {
    LogRefusal::request(StatusCode::SERVICE_UNAVAILABLE, LogReason::Unavailable, LOGS_UNAVAILABLE)
}

/// Reads the body (identity or gzip) within the limits, decompressed.
async fn read_body(ingest: &Ingest, request: Request) -> Result<bytes::Bytes, LogRefusal> {
    let raw = RawBody::read(ingest, request).await.map_err(LogRefusal::body)?;
    LogRefusal::off_async(move || raw.decoded()).await?.map_err(LogRefusal::body)
}

/// `POST /v1/logs`.
pub(super) async fn otlp_logs(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    answer_otlp(&ingest, LogProtocol::Otlp, request, |format, request| otlp_outcome(&ingest, format, request)).await
}

async fn otlp_outcome(ingest: &Ingest, format: OtlpFormat, request: Request) -> Result<Response, LogRefusal> {
    let sink = ingest.log_sink.clone().ok_or_else(unavailable)?;
    let bytes = read_body(ingest, request).await?;
    let received_ms = wall_clock_ms();
    let mapped = LogRefusal::off_async(move || {
        let request = match format {
            OtlpFormat::Protobuf => otlp_logs::decode_protobuf(&bytes),
            OtlpFormat::Json => otlp_logs_json::decode(&bytes).map_err(Into::into),
        }
        .map_err(|e| LogRefusal::request(StatusCode::BAD_REQUEST, LogReason::Decode, e.to_string()))?;
        otlp_logs::map_request(&request, received_ms)
            .map_err(|e| LogRefusal::request(StatusCode::BAD_REQUEST, LogReason::BadRequest, e.to_string()))
    })
    .await??;
    let (missing_service, invalid) = mapped.refused_counts();
    ingest.logs_rejected(LogProtocol::Otlp, LogReason::MissingService, missing_service);
    ingest.logs_rejected(LogProtocol::Otlp, LogReason::InvalidRecord, invalid);
    ingest.submit_logs(sink.as_ref(), LogProtocol::Otlp, mapped.batches).map_err(LogRefusal::submit)?;
    let rejected = (missing_service + invalid) as i64;
    let error_message = refused_message(&mapped.refused);
    let partial_success =
        error_message.clone().map(|error_message| ExportLogsPartialSuccess { rejected_log_records: rejected, error_message });
    let protobuf = ExportLogsServiceResponse { partial_success }.encode_to_vec();
    Ok(exported(format, protobuf, "rejectedLogRecords", error_message.as_deref().map(|message| (rejected, message))))
}

/// `POST /v3/logs`.
pub(super) async fn native_logs(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    match native_outcome(&ingest, request).await {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "{}").into_response(),
        Err(refusal) => refusal.answer(&ingest, LogProtocol::SkyWalking, None),
    }
}

async fn native_outcome(ingest: &Ingest, request: Request) -> Result<(), LogRefusal> {
    if let Some((essence, _)) = media_type(request.headers())
        && essence != "application/json"
    {
        return Err(LogRefusal::unsupported(format!("Content-Type {essence:?} is not application/json (a JSON array of LogData)")));
    }
    let sink = ingest.log_sink.clone().ok_or_else(unavailable)?;
    let bytes = read_body(ingest, request).await?;
    let received_ms = wall_clock_ms();
    let batch = LogRefusal::off_async(move || native_logs::decode(&bytes, received_ms))
        .await?
        .map_err(|e| LogRefusal::request(StatusCode::BAD_REQUEST, LogReason::Decode, e.to_string()))?;
    ingest.submit_logs(sink.as_ref(), LogProtocol::SkyWalking, vec![batch]).map_err(LogRefusal::submit)
}
