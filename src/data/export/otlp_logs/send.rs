//! What an OTLP/HTTP logs answer means. OTLP/HTTP's rules (docs/configuration.md, "Log
//! export"): 2xx is delivered (a `partial_success` names records the receiver refused, never
//! retried); 429, 502, 503 and 504 and transport failures are retried, honouring
//! `Retry-After`; every other status is refused for good and the batch dropped. The request
//! itself is the shared [`Poster`]'s.

use std::time::{Duration, SystemTime};

use axum::http::{StatusCode, header};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;

use super::config::OtlpLogsSettings;
use crate::data::export::ExportError;
use crate::data::export::post::{Failure, Poster, parse_retry_after};

/// How much of an answer is read (a success's `partial_success`, an error's message).
const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// Accepted; `rejected` records were refused inside it (`partial_success`), with the reason.
    Delivered { rejected: u64, message: String },
    /// Worth another attempt; `after` is the receiver's `Retry-After`.
    Retry { after: Option<Duration>, reason: String },
    /// Refused for good: the batch is dropped.
    Rejected { status: u16, body: String },
}

/// What an answer means. `body` is the answer's bytes (a protobuf `ExportLogsServiceResponse`
/// on success, a `google.rpc.Status` or text otherwise).
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &[u8], now: SystemTime) -> Attempt {
    if status.is_success() {
        let partial = <ExportLogsServiceResponse as prost::Message>::decode(body).ok().and_then(|r| r.partial_success);
        return match partial {
            Some(partial) => Attempt::Delivered {
                rejected: u64::try_from(partial.rejected_log_records).unwrap_or(0),
                message: partial.error_message,
            },
            None => Attempt::Delivered { rejected: 0, message: String::new() },
        };
    }
    let text = String::from_utf8_lossy(body).trim().to_string();
    let retryable = matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    );
    if retryable {
        let after = retry_after.and_then(|value| parse_retry_after(value, now));
        return Attempt::Retry { after, reason: format!("{status}: {text}") };
    }
    Attempt::Rejected { status: status.as_u16(), body: text }
}

/// A batch the receiver accepted: `rejected` records were refused inside it
/// (`partial_success`), with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub rejected: u64,
    pub message: String,
}

/// The OTLP/HTTP logs client.
pub struct Sender {
    post: Poster,
}

impl Sender {
    pub fn new(settings: &OtlpLogsSettings) -> Result<Sender, ExportError> {
        let headers = [(header::CONTENT_TYPE, "application/x-protobuf")];
        Ok(Sender { post: Poster::new(settings.endpoint.clone(), &headers, &settings.headers, MAX_ANSWER_BYTES)? })
    }

    /// Sends `body` once, bounded by `timeout` as a whole: accepted, or why not.
    pub async fn send(&self, body: Bytes, timeout: Duration) -> Result<Accepted, Failure> {
        let answer = self.post.send(body, timeout).await?;
        match classify(answer.status, answer.retry_after.as_deref(), &answer.body, SystemTime::now()) {
            Attempt::Delivered { rejected, message } => Ok(Accepted { rejected, message }),
            Attempt::Retry { after, reason } => Err(Failure::Retry { after, reason }),
            Attempt::Rejected { status, body } => Err(Failure::Rejected { status, body }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsPartialSuccess;

    #[test]
    fn statuses_follow_otlp_http() {
        let now = SystemTime::now();
        assert_eq!(classify(StatusCode::OK, None, b"", now), Attempt::Delivered { rejected: 0, message: String::new() });
        for status in [429, 502, 503, 504] {
            let status = StatusCode::from_u16(status).expect("status");
            assert!(matches!(classify(status, None, b"", now), Attempt::Retry { .. }), "{status}");
        }
        assert_eq!(
            classify(StatusCode::SERVICE_UNAVAILABLE, Some("2"), b"busy", now),
            Attempt::Retry { after: Some(Duration::from_secs(2)), reason: "503 Service Unavailable: busy".into() }
        );
        for status in [400, 401, 404, 413, 500, 501] {
            let status = StatusCode::from_u16(status).expect("status");
            assert!(matches!(classify(status, None, b"no", now), Attempt::Rejected { .. }), "{status} is not retried");
        }
    }

    #[test]
    fn a_partial_success_names_the_refused_records() {
        let response = ExportLogsServiceResponse {
            partial_success: Some(ExportLogsPartialSuccess { rejected_log_records: 2, error_message: "too old".into() }),
        };
        let body = prost::Message::encode_to_vec(&response);
        assert_eq!(
            classify(StatusCode::OK, None, &body, SystemTime::now()),
            Attempt::Delivered { rejected: 2, message: "too old".into() }
        );
        assert_eq!(
            classify(StatusCode::OK, None, b"{\"not\":\"protobuf\"", SystemTime::now()),
            Attempt::Delivered { rejected: 0, message: String::new() },
            "an unreadable success answer is still a success"
        );
    }
}
