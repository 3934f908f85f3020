//! The log receivers' routes on the data listener, `POST /v1/logs` (OTLP/HTTP) and
//! `POST /v3/logs` (SkyWalking's native API). Thin like the metric routes: check the media type
//! and that the node has a log pipeline, read the body within the limits, run the pure decoder
//! off the async threads, submit to the [`LogSink`], map the outcome to a status in one place
//! ([`LogRefusal::response`]).
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
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use prost::Message;

use super::body::{self, BodyError, Encoding};
use super::http::{OtlpFormat, RpcStatus, media_type, otlp_body};
use super::{Ingest, native_logs, now_ms, otlp_logs, otlp_logs_json};
use crate::data::seam::{LogBatch, LogProtocol, LogSink, SubmitError};
use crate::base::self_metrics::labels;

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

/// The 503 message when no log sink is set (its code word first, for clients that grep).
pub const LOGS_UNAVAILABLE: &str =
    "logs_unavailable: this node has no log pipeline wired to its data listener (no LogSink), so logs are not accepted";

impl Ingest {
    /// Counts `n` refused logs (or requests) of `protocol` for `reason`.
    pub fn logs_rejected(&self, protocol: LogProtocol, reason: LogReason, n: usize) {
        if n > 0 {
            self.telemetry
                .logs_rejected
                .get_or_create(&labels([("protocol", protocol.as_str()), ("reason", reason.as_str())]))
                .inc_by(n as u64);
        }
    }

    /// Counts the logs of `batches`, then submits them all together to `sink`; a refusal is
    /// counted as `queue_full` or `stopped` for every one of their logs.
    fn submit_logs(&self, sink: &dyn LogSink, protocol: LogProtocol, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        let logs: usize = batches.iter().map(|b| b.logs.len()).sum();
        if logs == 0 {
            return Ok(());
        }
        self.telemetry.logs_received.get_or_create(&labels([("protocol", protocol.as_str())])).inc_by(logs as u64);
        let result = sink.submit_logs(batches);
        match &result {
            Ok(()) => {}
            Err(SubmitError::QueueFull { .. }) => self.logs_rejected(protocol, LogReason::QueueFull, logs),
            Err(SubmitError::Stopped) => self.logs_rejected(protocol, LogReason::Stopped, logs),
        }
        result
    }
}

/// Why a log request was refused, with what to count.
#[derive(Debug)]
struct LogRefusal {
    status: StatusCode,
    reason: LogReason,
    /// How many logs (or 1 for a whole request) to count.
    count: usize,
    message: String,
    retry_after: Option<u64>,
}

impl LogRefusal {
    fn request(status: StatusCode, reason: LogReason, message: impl Into<String>) -> LogRefusal {
        LogRefusal { status, reason, count: 1, message: message.into(), retry_after: None }
    }

    fn unavailable() -> LogRefusal {
        LogRefusal::request(StatusCode::SERVICE_UNAVAILABLE, LogReason::Unavailable, LOGS_UNAVAILABLE)
    }

    fn unsupported(message: String) -> LogRefusal {
        LogRefusal::request(StatusCode::UNSUPPORTED_MEDIA_TYPE, LogReason::UnsupportedMediaType, message)
    }

    fn body(error: BodyError) -> LogRefusal {
        match error {
            BodyError::TooLarge { .. } => LogRefusal::request(StatusCode::PAYLOAD_TOO_LARGE, LogReason::TooLarge, error.to_string()),
            BodyError::UnsupportedEncoding(_) => LogRefusal::unsupported(error.to_string()),
            BodyError::Gzip(_) | BodyError::Read(_) => LogRefusal::request(StatusCode::BAD_REQUEST, LogReason::Decode, error.to_string()),
        }
    }

    /// A refused submission: already counted by [`Ingest::submit_logs`] (count 0).
    fn submit(error: SubmitError) -> LogRefusal {
        let (status, reason, retry_after) = match error {
            SubmitError::QueueFull { retry_after } => {
                (StatusCode::TOO_MANY_REQUESTS, LogReason::QueueFull, Some(retry_after.as_secs_f64().ceil().max(1.0) as u64))
            }
            SubmitError::Stopped => (StatusCode::SERVICE_UNAVAILABLE, LogReason::Stopped, None),
        };
        LogRefusal { status, reason, count: 0, message: error.to_string(), retry_after }
    }

    fn count(&self, ingest: &Ingest, protocol: LogProtocol) {
        ingest.logs_rejected(protocol, self.reason, self.count);
    }

    /// The answer: a `google.rpc.Status` for OTLP (in `format`), plain text otherwise.
    fn response(self, otlp: Option<OtlpFormat>) -> Response {
        let mut response = match otlp {
            Some(format) => {
                let code = match self.status {
                    StatusCode::TOO_MANY_REQUESTS => 8,        // RESOURCE_EXHAUSTED
                    StatusCode::SERVICE_UNAVAILABLE => 14,     // UNAVAILABLE
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => 12,  // UNIMPLEMENTED
                    StatusCode::INTERNAL_SERVER_ERROR => 13,   // INTERNAL
                    _ => 3,                                    // INVALID_ARGUMENT
                };
                let status = RpcStatus { code, message: self.message };
                otlp_body(self.status, format, status.encode_to_vec(), serde_json::json!({"code": code, "message": status.message}))
            }
            None => (self.status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{}\n", self.message)).into_response(),
        };
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Runs a decoder off the async threads.
async fn off_async<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, LogRefusal> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "log decoder failed");
        LogRefusal::request(StatusCode::INTERNAL_SERVER_ERROR, LogReason::Decode, "the decoder failed")
    })
}

/// Reads the body (identity or gzip) within the limits, decompressed.
async fn read_body(ingest: &Ingest, request: Request) -> Result<bytes::Bytes, LogRefusal> {
    let (parts, body) = request.into_parts();
    let limits = ingest.limits();
    let encoding = body::encoding(&parts.headers, &[Encoding::Identity, Encoding::Gzip]).map_err(LogRefusal::body)?;
    let raw = body::read(&parts.headers, body, limits.max_body_bytes).await.map_err(LogRefusal::body)?;
    off_async(move || body::decoded(raw, encoding, limits.max_decompressed_bytes)).await?.map_err(LogRefusal::body)
}

/// `POST /v1/logs`.
pub(super) async fn otlp_logs(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    let format = match media_type(request.headers()).as_ref().map(|(essence, _)| essence.as_str()) {
        Some("application/x-protobuf") => OtlpFormat::Protobuf,
        Some("application/json") => OtlpFormat::Json,
        other => {
            let refusal = LogRefusal::unsupported(format!(
                "Content-Type {:?} is not application/x-protobuf or application/json",
                other.unwrap_or("(none)")
            ));
            refusal.count(&ingest, LogProtocol::Otlp);
            return refusal.response(Some(OtlpFormat::Json));
        }
    };
    match otlp_outcome(&ingest, format, request).await {
        Ok(response) => response,
        Err(refusal) => {
            refusal.count(&ingest, LogProtocol::Otlp);
            refusal.response(Some(format))
        }
    }
}

async fn otlp_outcome(ingest: &Ingest, format: OtlpFormat, request: Request) -> Result<Response, LogRefusal> {
    let sink = ingest.log_sink.clone().ok_or_else(LogRefusal::unavailable)?;
    let bytes = read_body(ingest, request).await?;
    let received_ms = now_ms();
    let mapped = off_async(move || {
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
    let rejected = missing_service + invalid;
    let partial_success = mapped.refused.first().map(|first| ExportLogsPartialSuccess {
        rejected_log_records: rejected as i64,
        error_message: match mapped.refused.len() {
            1 => first.to_string(),
            n => format!("{first} (and {} more)", n - 1),
        },
    });
    let json = match &partial_success {
        None => serde_json::json!({}),
        Some(p) => serde_json::json!({"partialSuccess": {
            "rejectedLogRecords": p.rejected_log_records.to_string(),
            "errorMessage": p.error_message,
        }}),
    };
    let protobuf = ExportLogsServiceResponse { partial_success }.encode_to_vec();
    Ok(otlp_body(StatusCode::OK, format, protobuf, json))
}

/// `POST /v3/logs`.
pub(super) async fn native_logs(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    match native_outcome(&ingest, request).await {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "{}").into_response(),
        Err(refusal) => {
            refusal.count(&ingest, LogProtocol::SkyWalking);
            refusal.response(None)
        }
    }
}

async fn native_outcome(ingest: &Ingest, request: Request) -> Result<(), LogRefusal> {
    if let Some((essence, _)) = media_type(request.headers())
        && essence != "application/json"
    {
        return Err(LogRefusal::unsupported(format!("Content-Type {essence:?} is not application/json (a JSON array of LogData)")));
    }
    let sink = ingest.log_sink.clone().ok_or_else(LogRefusal::unavailable)?;
    let bytes = read_body(ingest, request).await?;
    let received_ms = now_ms();
    let batch = off_async(move || native_logs::decode(&bytes, received_ms))
        .await?
        .map_err(|e| LogRefusal::request(StatusCode::BAD_REQUEST, LogReason::Decode, e.to_string()))?;
    ingest.submit_logs(sink.as_ref(), LogProtocol::SkyWalking, vec![batch]).map_err(LogRefusal::submit)
}
