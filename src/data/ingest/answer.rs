//! What the receivers of both planes answer, in one place: a [`Refusal`] (the status, the reason
//! to count, the message, `Retry-After`), generic over the plane's reason label; the OTLP bodies
//! (`google.rpc.Status`, an export response with its `partialSuccess`); the request's media type;
//! and the decoders' run off the async threads.
//!
//! The routes of each plane ([`super::http`] for samples, [`super::logs_http`] for logs) keep
//! their protocols' part: which types and encodings they take, what they decode and count.
//! A refusal maps to its answer only in [`Refusal::response`].

use std::fmt::Display;
use std::future::Future;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::body::{self, BodyError, Encoding};
use super::{Ingest, RefusalReason};
use crate::data::seam::SubmitError;

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

/// Why a request was refused, with what to count: `R` is the plane's reason label.
#[derive(Debug)]
pub(super) struct Refusal<R> {
    pub(super) status: StatusCode,
    pub(super) reason: R,
    /// How many items (or 1 for a whole request) to count.
    pub(super) count: usize,
    pub(super) message: String,
    pub(super) retry_after: Option<u64>,
}

impl<R: RefusalReason> Refusal<R> {
    /// A whole request refused, counted once.
    pub(super) fn request(status: StatusCode, reason: R, message: impl Into<String>) -> Refusal<R> {
        Refusal { status, reason, count: 1, message: message.into(), retry_after: None }
    }

    /// A `Content-Type` or `Content-Encoding` the route does not take (415).
    pub(super) fn unsupported(message: impl Into<String>) -> Refusal<R> {
        Refusal::request(StatusCode::UNSUPPORTED_MEDIA_TYPE, R::UNSUPPORTED_MEDIA_TYPE, message)
    }

    pub(super) fn body(error: BodyError) -> Refusal<R> {
        match error {
            BodyError::TooLarge { .. } => Refusal::request(StatusCode::PAYLOAD_TOO_LARGE, R::TOO_LARGE, error.to_string()),
            BodyError::UnsupportedEncoding(_) => Refusal::unsupported(error.to_string()),
            BodyError::Gzip(_) | BodyError::Read(_) => Refusal::request(StatusCode::BAD_REQUEST, R::DECODE, error.to_string()),
        }
    }

    /// A refused submission: already counted when it was submitted (count 0).
    pub(super) fn submit(error: SubmitError) -> Refusal<R> {
        let (status, reason, retry_after) = match error {
            SubmitError::QueueFull { retry_after } => (StatusCode::TOO_MANY_REQUESTS, R::QUEUE_FULL, Some(retry_after_secs(retry_after))),
            SubmitError::Stopped => (StatusCode::SERVICE_UNAVAILABLE, R::STOPPED, None),
        };
        Refusal { status, reason, count: 0, message: error.to_string(), retry_after }
    }

    /// Runs a decoder off the async threads.
    pub(super) async fn off_async<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Refusal<R>> {
        tokio::task::spawn_blocking(work).await.map_err(|e| {
            tracing::error!(error = %e, "{} decoder failed", R::DECODER);
            Refusal::request(StatusCode::INTERNAL_SERVER_ERROR, R::DECODE, "the decoder failed")
        })
    }

    /// Counts the refusal for `protocol`, then answers it: a `google.rpc.Status` for OTLP (in
    /// `otlp`'s format), plain text otherwise.
    pub(super) fn answer(self, ingest: &Ingest, protocol: R::Protocol, otlp: Option<OtlpFormat>) -> Response {
        ingest.count_rejected(protocol, self.reason, self.count);
        self.response(otlp)
    }

    fn response(self, otlp: Option<OtlpFormat>) -> Response {
        let mut response = match otlp {
            Some(format) => {
                let code = match self.status {
                    StatusCode::TOO_MANY_REQUESTS => 8,       // RESOURCE_EXHAUSTED
                    StatusCode::SERVICE_UNAVAILABLE => 14,    // UNAVAILABLE
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => 12, // UNIMPLEMENTED
                    StatusCode::INTERNAL_SERVER_ERROR => 13,  // INTERNAL
                    _ => 3,                                   // INVALID_ARGUMENT
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

/// A body read as sent (identity or gzip) within `max_body_bytes`, not yet inflated.
pub(super) struct RawBody {
    raw: bytes::Bytes,
    encoding: Encoding,
    max_decompressed_bytes: usize,
}

impl RawBody {
    /// Reads the body of `request`, refusing another encoding or a body over the limit.
    pub(super) async fn read(ingest: &Ingest, request: Request) -> Result<RawBody, BodyError> {
        let (parts, body) = request.into_parts();
        let limits = ingest.limits();
        let encoding = body::encoding(&parts.headers, &[Encoding::Identity, Encoding::Gzip])?;
        let raw = body::read(&parts.headers, body, limits.max_body_bytes).await?;
        Ok(RawBody { raw, encoding, max_decompressed_bytes: limits.max_decompressed_bytes })
    }

    /// The body inflated, within `max_decompressed_bytes` (CPU work: run it off the async threads).
    pub(super) fn decoded(self) -> Result<bytes::Bytes, BodyError> {
        body::decoded(self.raw, self.encoding, self.max_decompressed_bytes)
    }
}

/// `Retry-After` in whole seconds, at least 1.
pub(super) fn retry_after_secs(wait: std::time::Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// Answers an OTLP request (`POST /v1/metrics`, `POST /v1/logs`): `outcome` runs on the format
/// its `Content-Type` names; a refusal is counted for `protocol` and answered in that format (in
/// JSON when the type itself is refused).
pub(super) async fn answer_otlp<R, F>(
    ingest: &Ingest,
    protocol: R::Protocol,
    request: Request,
    outcome: impl FnOnce(OtlpFormat, Request) -> F,
) -> Response
where
    R: RefusalReason,
    F: Future<Output = Result<Response, Refusal<R>>>,
{
    let format = match media_type(request.headers()).as_ref().map(|(essence, _)| essence.as_str()) {
        Some("application/x-protobuf") => OtlpFormat::Protobuf,
        Some("application/json") => OtlpFormat::Json,
        other => {
            let message = format!("Content-Type {:?} is not application/x-protobuf or application/json", other.unwrap_or("(none)"));
            return Refusal::<R>::unsupported(message).answer(ingest, protocol, Some(OtlpFormat::Json));
        }
    };
    match outcome(format, request).await {
        Ok(response) => response,
        Err(refusal) => refusal.answer(ingest, protocol, Some(format)),
    }
}

/// A 200 answer to an OTLP export: the export response `protobuf` (which carries its own
/// `partialSuccess`), or in JSON `{}` or `{"partialSuccess": {<rejected_field>, "errorMessage"}}`.
pub(super) fn exported(format: OtlpFormat, protobuf: Vec<u8>, rejected_field: &str, partial: Option<(i64, &str)>) -> Response {
    let json = match partial {
        None => serde_json::json!({}),
        Some((rejected, message)) => serde_json::json!({"partialSuccess": {
            rejected_field: rejected.to_string(),
            "errorMessage": message,
        }}),
    };
    otlp_body(StatusCode::OK, format, protobuf, json)
}

/// `partialSuccess.errorMessage`: the first refusal, and how many more there were.
pub(super) fn refused_message<E: Display>(refused: &[E]) -> Option<String> {
    let first = refused.first()?;
    Some(match refused.len() {
        1 => first.to_string(),
        n => format!("{first} (and {} more)", n - 1),
    })
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
