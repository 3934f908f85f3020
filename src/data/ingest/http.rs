//! The receivers' routes on the data listener. Handlers are thin: check the media type, read
//! the body within the limits, run the pure decoder off the async threads, submit, and map the
//! outcome to a status in one place ([`Refusal::response`]).
//!
//! | outcome | OTLP (`google.rpc.Status` in the request's type) | remote-write, push (text) |
//! |---|---|---|
//! | taken | 200, empty `ExportMetricsServiceResponse` / `{}`; refused points → `partialSuccess` | 204 |
//! | undecodable, invalid sample, missing `job` | 400 | 400 (remote-write: the valid series are taken) |
//! | body too large (sent or decompressed) | 413 | 413 |
//! | wrong `Content-Type` / `Content-Encoding` | 415 | 415 |
//! | dispatch queue full | 429 + `Retry-After` | 429 + `Retry-After` |
//! | data plane stopping | 503 | 503 |

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsPartialSuccess, ExportMetricsServiceResponse};
use prost::Message;

use super::body::{self, BodyError, Encoding};
use super::exposition::{self, TargetLabels};
use super::{Ingest, Reason, now_ms, otlp, otlp_json, remote_write};
use crate::data::seam::{Protocol, SubmitError};

/// The receivers' routes (no fallback: they are merged with the agent routes).
pub fn router(ingest: Arc<Ingest>) -> Router {
    Router::new()
        .route("/v1/metrics", post(otlp_metrics))
        .route("/api/v1/write", post(remote_write_handler))
        .route("/ingest/prometheus", post(push))
        .route("/v1/logs", post(super::logs_http::otlp_logs))
        .route("/v3/logs", post(super::logs_http::native_logs))
        .with_state(ingest)
}

/// `google.rpc.Status`, the body of an OTLP failure.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// How an OTLP request is encoded (and so its answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OtlpFormat {
    Protobuf,
    Json,
}

/// Why a request was refused, with what to count.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    reason: Reason,
    /// How many samples (or 1 for a whole request) to count.
    count: usize,
    message: String,
    retry_after: Option<u64>,
}

impl Refusal {
    fn request(status: StatusCode, reason: Reason, message: impl Into<String>) -> Refusal {
        Refusal { status, reason, count: 1, message: message.into(), retry_after: None }
    }

    fn body(error: BodyError) -> Refusal {
        match error {
            BodyError::TooLarge { .. } => Refusal::request(StatusCode::PAYLOAD_TOO_LARGE, Reason::TooLarge, error.to_string()),
            BodyError::UnsupportedEncoding(_) => {
                Refusal::request(StatusCode::UNSUPPORTED_MEDIA_TYPE, Reason::UnsupportedMediaType, error.to_string())
            }
            BodyError::Gzip(_) | BodyError::Read(_) => Refusal::request(StatusCode::BAD_REQUEST, Reason::Decode, error.to_string()),
        }
    }

    /// A refused submission: already counted by [`Ingest::submit`] (count 0).
    fn submit(error: SubmitError) -> Refusal {
        match error {
            SubmitError::QueueFull { retry_after } => Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                reason: Reason::QueueFull,
                count: 0,
                message: error.to_string(),
                retry_after: Some(retry_after.as_secs_f64().ceil().max(1.0) as u64),
            },
            SubmitError::Stopped => Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                reason: Reason::Stopped,
                count: 0,
                message: error.to_string(),
                retry_after: None,
            },
        }
    }

    fn count(&self, ingest: &Ingest, protocol: Protocol) {
        ingest.rejected(protocol, self.reason, self.count);
    }

    /// The answer: a `google.rpc.Status` for OTLP (in `format`), plain text otherwise.
    fn response(self, otlp: Option<OtlpFormat>) -> Response {
        let mut response = match otlp {
            Some(format) => {
                let code = match self.status {
                    StatusCode::TOO_MANY_REQUESTS => 8,  // RESOURCE_EXHAUSTED
                    StatusCode::SERVICE_UNAVAILABLE => 14, // UNAVAILABLE
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => 12, // UNIMPLEMENTED
                    StatusCode::INTERNAL_SERVER_ERROR => 13, // INTERNAL
                    _ => 3,                                 // INVALID_ARGUMENT
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

pub(super) fn otlp_body(status: StatusCode, format: OtlpFormat, protobuf: Vec<u8>, json: serde_json::Value) -> Response {
    match format {
        OtlpFormat::Protobuf => (status, [(header::CONTENT_TYPE, "application/x-protobuf")], protobuf).into_response(),
        OtlpFormat::Json => (status, [(header::CONTENT_TYPE, "application/json")], json.to_string()).into_response(),
    }
}

/// The media type of `Content-Type`, lowercased, without parameters; and its parameters.
pub(super) fn media_type(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let (essence, params) = value.split_once(';').unwrap_or((value, ""));
    Some((essence.trim().to_ascii_lowercase(), params.trim().to_ascii_lowercase()))
}

/// How long a request that meets a full dispatch queue waits for room before it is refused.
const ROOM_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
/// How often a waiting request looks for room.
const ROOM_POLL: std::time::Duration = std::time::Duration::from_millis(2);
/// What a `busy` refusal tells the client to wait (dispatch's queue-full answer says the same).
const BUSY_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// Requests waiting for room at most; more are refused at once (the waiting ones hold their
/// undecoded bodies, bounded by the body limit).
const ROOM_WAITERS: usize = 64;

/// A request that meets a full dispatch queue waits, undecoded, up to [`ROOM_WAIT`] for room
/// (the client sees a slower answer, as from a busy Prometheus), then is refused before its body
/// is decoded: decoding it only to refuse it, or answering 429 at once to a client that retries
/// at once, would take the CPU the evaluation threads need to empty the queue. A refusal is
/// counted per request as `busy`.
async fn refuse_if_busy(ingest: &Ingest) -> Result<(), Refusal> {
    if ingest.has_room() {
        return Ok(());
    }
    use std::sync::atomic::Ordering;
    let waiting = &ingest.waiting_for_room;
    if waiting.fetch_add(1, Ordering::SeqCst) < ROOM_WAITERS {
        let deadline = tokio::time::Instant::now() + ROOM_WAIT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(ROOM_POLL).await;
            if ingest.has_room() {
                waiting.fetch_sub(1, Ordering::SeqCst);
                return Ok(());
            }
        }
    }
    waiting.fetch_sub(1, Ordering::SeqCst);
    Err(Refusal {
        status: StatusCode::TOO_MANY_REQUESTS,
        reason: Reason::Busy,
        count: 1,
        message: SubmitError::QueueFull { retry_after: BUSY_RETRY_AFTER }.to_string(),
        retry_after: Some(BUSY_RETRY_AFTER.as_secs_f64().ceil().max(1.0) as u64),
    })
}

/// Runs a decoder off the async threads.
async fn off_async<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "ingest decoder failed");
        Refusal::request(StatusCode::INTERNAL_SERVER_ERROR, Reason::Decode, "the decoder failed")
    })
}

async fn otlp_metrics(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    let format = match media_type(request.headers()).as_ref().map(|(essence, _)| essence.as_str()) {
        Some("application/x-protobuf") => OtlpFormat::Protobuf,
        Some("application/json") => OtlpFormat::Json,
        other => {
            let refusal = Refusal::request(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Reason::UnsupportedMediaType,
                format!("Content-Type {:?} is not application/x-protobuf or application/json", other.unwrap_or("(none)")),
            );
            refusal.count(&ingest, Protocol::Otlp);
            return refusal.response(Some(OtlpFormat::Json));
        }
    };
    match otlp_outcome(&ingest, format, request).await {
        Ok(response) => response,
        Err(refusal) => {
            refusal.count(&ingest, Protocol::Otlp);
            refusal.response(Some(format))
        }
    }
}

async fn otlp_outcome(ingest: &Ingest, format: OtlpFormat, request: Request) -> Result<Response, Refusal> {
    let (parts, body) = request.into_parts();
    let limits = ingest.limits();
    let encoding = body::encoding(&parts.headers, &[Encoding::Identity, Encoding::Gzip]).map_err(Refusal::body)?;
    let raw = body::read(&parts.headers, body, limits.max_body_bytes).await.map_err(Refusal::body)?;
    refuse_if_busy(ingest).await?;
    let received_ms = now_ms();
    let mapped = off_async(move || {
        let bytes = body::decoded(raw, encoding, limits.max_decompressed_bytes).map_err(Refusal::body)?;
        let request = match format {
            OtlpFormat::Protobuf => otlp::decode_protobuf(&bytes),
            OtlpFormat::Json => otlp_json::decode(&bytes).map_err(Into::into),
        }
        .map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::Decode, e.to_string()))?;
        Ok(otlp::map_request(&request, received_ms))
    })
    .await??;
    ingest.rejected(Protocol::Otlp, Reason::InvalidPoint, mapped.refused.len());
    ingest.rejected(Protocol::Otlp, Reason::NoRecordedValue, mapped.no_recorded_value);
    ingest.rejected(Protocol::Otlp, Reason::UnspecifiedTemporality, mapped.unspecified_temporality);
    ingest.submit(Protocol::Otlp, mapped.batches).map_err(Refusal::submit)?;
    let partial_success = mapped.refused.first().map(|first| ExportMetricsPartialSuccess {
        rejected_data_points: mapped.refused.len() as i64,
        error_message: if mapped.refused.len() > 1 {
            format!("{first} (and {} more)", mapped.refused.len() - 1)
        } else {
            first.to_string()
        },
    });
    let json = match &partial_success {
        None => serde_json::json!({}),
        Some(p) => serde_json::json!({"partialSuccess": {
            "rejectedDataPoints": p.rejected_data_points.to_string(),
            "errorMessage": p.error_message,
        }}),
    };
    let protobuf = ExportMetricsServiceResponse { partial_success }.encode_to_vec();
    Ok(otlp_body(StatusCode::OK, format, protobuf, json))
}

async fn remote_write_handler(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    match remote_write_outcome(&ingest, request).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => {
            refusal.count(&ingest, Protocol::RemoteWrite);
            refusal.response(None)
        }
    }
}

/// At most this many refused series are named in a 400 answer.
const NAMED_INVALID: usize = 10;

async fn remote_write_outcome(ingest: &Ingest, request: Request) -> Result<(), Refusal> {
    let (parts, body) = request.into_parts();
    let unsupported = |message: String| Refusal::request(StatusCode::UNSUPPORTED_MEDIA_TYPE, Reason::UnsupportedMediaType, message);
    match media_type(&parts.headers) {
        // Prometheus' own receiver takes a missing type as 1.0.
        None => {}
        Some((essence, params)) if essence == "application/x-protobuf" => {
            let proto = params.split(';').find_map(|p| p.trim().strip_prefix("proto=")).map(|p| p.trim_matches('"').to_owned());
            if let Some(proto) = proto.filter(|p| p != "prometheus.writerequest") {
                return Err(unsupported(format!("remote-write message {proto:?} is not supported; send 1.0 (prometheus.WriteRequest)")));
            }
        }
        Some((essence, _)) => return Err(unsupported(format!("Content-Type {essence:?} is not application/x-protobuf"))),
    }
    // A missing encoding is read as snappy, as Prometheus' receiver reads it.
    let encoding = body::encoding(&parts.headers, &[Encoding::Snappy, Encoding::Identity]).map_err(Refusal::body)?;
    if encoding == Encoding::Identity && parts.headers.contains_key(header::CONTENT_ENCODING) {
        return Err(unsupported("Content-Encoding must be snappy".into()));
    }
    let limits = ingest.limits();
    let raw = body::read(&parts.headers, body, limits.max_body_bytes).await.map_err(Refusal::body)?;
    refuse_if_busy(ingest).await?;
    let received_ms = now_ms();
    let reads = ingest.reads(crate::data::seam::Catalog::Otel);
    let mapped = off_async(move || remote_write::decode_reading(&raw, limits.max_decompressed_bytes, received_ms, reads.as_deref()))
        .await?
        .map_err(|e| match e {
            remote_write::RemoteWriteError::TooLarge { .. } => Refusal::request(StatusCode::PAYLOAD_TOO_LARGE, Reason::TooLarge, e.to_string()),
            _ => Refusal::request(StatusCode::BAD_REQUEST, Reason::Decode, e.to_string()),
        })?;
    ingest.rejected(Protocol::RemoteWrite, Reason::Stale, mapped.stale);
    let invalid_samples = mapped.invalid_samples();
    let invalid = mapped.invalid;
    ingest.submit_read(Protocol::RemoteWrite, mapped.batches, mapped.unread).map_err(Refusal::submit)?;
    if invalid.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = invalid.iter().take(NAMED_INVALID).map(ToString::to_string).collect();
    if invalid.len() > NAMED_INVALID {
        lines.push(format!("... and {} more invalid series", invalid.len() - NAMED_INVALID));
    }
    Err(Refusal {
        status: StatusCode::BAD_REQUEST,
        reason: Reason::InvalidSample,
        count: invalid_samples,
        message: format!("{} invalid series refused (the valid ones were taken):\n{}", invalid.len(), lines.join("\n")),
        retry_after: None,
    })
}

/// The query of `POST /ingest/prometheus`.
#[derive(Debug, serde::Deserialize)]
struct PushQuery {
    job: Option<String>,
    instance: Option<String>,
}

async fn push(
    State(ingest): State<Arc<Ingest>>,
    query: Result<Query<PushQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Response {
    let query = query.map(|Query(q)| q).map_err(|e| e.body_text());
    match push_outcome(&ingest, query, request).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => {
            refusal.count(&ingest, Protocol::Push);
            refusal.response(None)
        }
    }
}

async fn push_outcome(ingest: &Ingest, query: Result<PushQuery, String>, request: Request<Body>) -> Result<(), Refusal> {
    let query = query.map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::BadRequest, e))?;
    let Some(job) = query.job.filter(|j| !j.is_empty()) else {
        return Err(Refusal::request(StatusCode::BAD_REQUEST, Reason::BadRequest, "the job query parameter is required (?job=...)"));
    };
    let (parts, body) = request.into_parts();
    if let Some((essence, _)) = media_type(&parts.headers)
        && essence != "text/plain"
        && essence != "application/openmetrics-text"
    {
        return Err(Refusal::request(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Reason::UnsupportedMediaType,
            format!("Content-Type {essence:?} is not text/plain (the text exposition format)"),
        ));
    }
    let limits = ingest.limits();
    let encoding = body::encoding(&parts.headers, &[Encoding::Identity, Encoding::Gzip]).map_err(Refusal::body)?;
    let raw = body::read(&parts.headers, body, limits.max_body_bytes).await.map_err(Refusal::body)?;
    refuse_if_busy(ingest).await?;
    let target = TargetLabels::new(&job, query.instance.as_deref().filter(|i| !i.is_empty()), &Default::default());
    let received_ms = now_ms();
    let batch = off_async(move || {
        let text = body::decoded(raw, encoding, limits.max_decompressed_bytes).map_err(Refusal::body)?;
        exposition::to_batch(&text, &target, Protocol::Push, received_ms)
            .map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::InvalidSample, e.to_string()))
    })
    .await??;
    ingest.submit(Protocol::Push, batch.into_iter().collect()).map_err(Refusal::submit)
}
