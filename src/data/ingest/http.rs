//! The receivers' routes on the data listener. Handlers are thin: check the media type, read
//! the body within the limits, run the pure decoder off the async threads, submit, and map the
//! outcome to a status in one place (an [`answer::Refusal`]).
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
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsPartialSuccess, ExportMetricsServiceResponse};
use prost::Message;

use crate::base::clock::wall_clock_ms;
use super::answer::{self, OtlpFormat, RawBody, answer_otlp, exported, media_type, refused_message, retry_after_secs};
use super::body::{self, Encoding};
use super::exposition::{self, TargetLabels};
use super::{Ingest, Reason, otlp, otlp_metrics_json, remote_write};
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

/// A refusal of a sample route, counted in `samples_rejected`.
type Refusal = answer::Refusal<Reason>;

/// How long a request that meets a full dispatch queue waits for room before it is refused.
const ROOM_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
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
    if waiting.fetch_add(1, Ordering::SeqCst) < ROOM_WAITERS && ingest.room_within(ROOM_WAIT).await {
        waiting.fetch_sub(1, Ordering::SeqCst);
        return Ok(());
    }
    waiting.fetch_sub(1, Ordering::SeqCst);
    Err(Refusal {
        status: StatusCode::TOO_MANY_REQUESTS,
        reason: Reason::Busy,
        count: 1,
        message: SubmitError::QueueFull { retry_after: BUSY_RETRY_AFTER }.to_string(),
        retry_after: Some(retry_after_secs(BUSY_RETRY_AFTER)),
    })
}

async fn otlp_metrics(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    answer_otlp(&ingest, Protocol::Otlp, request, |format, request| otlp_outcome(&ingest, format, request)).await
}

async fn otlp_outcome(ingest: &Ingest, format: OtlpFormat, request: Request) -> Result<Response, Refusal> {
    let raw = RawBody::read(ingest, request).await.map_err(Refusal::body)?;
    refuse_if_busy(ingest).await?;
    let received_ms = wall_clock_ms();
    let mapped = Refusal::off_async(move || {
        let bytes = raw.decoded().map_err(Refusal::body)?;
        let request = match format {
            OtlpFormat::Protobuf => otlp::decode_protobuf(&bytes),
            OtlpFormat::Json => otlp_metrics_json::decode(&bytes).map_err(Into::into),
        }
        .map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::Decode, e.to_string()))?;
        Ok(otlp::map_request(&request, received_ms))
    })
    .await??;
    ingest.rejected(Protocol::Otlp, Reason::InvalidPoint, mapped.refused.len());
    ingest.rejected(Protocol::Otlp, Reason::NoRecordedValue, mapped.no_recorded_value);
    ingest.rejected(Protocol::Otlp, Reason::UnspecifiedTemporality, mapped.unspecified_temporality);
    ingest.submit(Protocol::Otlp, mapped.batches).map_err(Refusal::submit)?;
    let rejected = mapped.refused.len() as i64;
    let error_message = refused_message(&mapped.refused);
    let partial_success =
        error_message.clone().map(|error_message| ExportMetricsPartialSuccess { rejected_data_points: rejected, error_message });
    let protobuf = ExportMetricsServiceResponse { partial_success }.encode_to_vec();
    Ok(exported(format, protobuf, "rejectedDataPoints", error_message.as_deref().map(|message| (rejected, message))))
}

async fn remote_write_handler(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    match remote_write_outcome(&ingest, request).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refusal.answer(&ingest, Protocol::RemoteWrite, None),
    }
}

/// At most this many refused series are named in a 400 answer.
const NAMED_INVALID: usize = 10;

async fn remote_write_outcome(ingest: &Ingest, request: Request) -> Result<(), Refusal> {
    let (parts, body) = request.into_parts();
    let unsupported = Refusal::unsupported;
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
    let received_ms = wall_clock_ms();
    let reads = ingest.reads(crate::data::seam::Catalog::Otel);
    let mapped = Refusal::off_async(move || remote_write::decode_reading(&raw, limits.max_decompressed_bytes, received_ms, reads.as_deref()))
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
        Err(refusal) => refusal.answer(&ingest, Protocol::Push, None),
    }
}

async fn push_outcome(ingest: &Ingest, query: Result<PushQuery, String>, request: Request<Body>) -> Result<(), Refusal> {
    let query = query.map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::BadRequest, e))?;
    let Some(job) = query.job.filter(|j| !j.is_empty()) else {
        return Err(Refusal::request(StatusCode::BAD_REQUEST, Reason::BadRequest, "the job query parameter is required (?job=...)"));
    };
    if let Some((essence, _)) = media_type(request.headers())
        && essence != "text/plain"
        && essence != "application/openmetrics-text"
    {
        return Err(Refusal::unsupported(format!("Content-Type {essence:?} is not text/plain (the text exposition format)")));
    }
    let raw = RawBody::read(ingest, request).await.map_err(Refusal::body)?;
    refuse_if_busy(ingest).await?;
    let target = TargetLabels::new(&job, query.instance.as_deref().filter(|i| !i.is_empty()), &Default::default());
    let received_ms = wall_clock_ms();
    let batch = Refusal::off_async(move || {
        let text = raw.decoded().map_err(Refusal::body)?;
        exposition::to_batch(&text, &target, Protocol::Push, received_ms)
            .map_err(|e| Refusal::request(StatusCode::BAD_REQUEST, Reason::InvalidSample, e.to_string()))
    })
    .await??;
    ingest.submit(Protocol::Push, batch.into_iter().collect()).map_err(Refusal::submit)
}
