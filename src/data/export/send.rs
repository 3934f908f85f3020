//! What a remote-write answer means (2xx delivered; 5xx, 429 and transport failures retried;
//! any other status refused for good, a `Retry-After` honoured). The request itself is the
//! shared [`Poster`]'s, with the 1.0 headers.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderName, StatusCode, header};
use bytes::Bytes;

use super::ExportError;
use super::config::RemoteWriteSettings;
use super::post::{Failure, Poster, parse_retry_after};

/// The remote-write protocol version sent in `X-Prometheus-Remote-Write-Version`.
pub const REMOTE_WRITE_VERSION: &str = "0.1.0";
/// How much of an error answer is read and logged.
const MAX_ANSWER_BYTES: usize = 4 * 1024;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    Delivered,
    /// Worth another attempt: 5xx, 429, or no answer. `after` is the receiver's `Retry-After`.
    Retry { after: Option<Duration>, reason: String },
    /// Refused for good (4xx other than 429, or any other non-2xx status): the batch is dropped.
    Rejected { status: u16, body: String },
}

/// What an answer means (remote-write 1.0: 2xx success, 5xx must be retried, 429 may be, any
/// other 4xx never).
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: SystemTime) -> Attempt {
    if status.is_success() {
        return Attempt::Delivered;
    }
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        let after = retry_after.and_then(|value| parse_retry_after(value, now));
        return Attempt::Retry { after, reason: format!("{status}: {}", body.trim()) };
    }
    Attempt::Rejected { status: status.as_u16(), body: body.trim().to_string() }
}

/// The remote-write client.
pub struct Sender {
    post: Poster,
}

impl Sender {
    pub fn new(settings: &RemoteWriteSettings) -> Result<Sender, ExportError> {
        let headers = [
            (header::CONTENT_ENCODING, "snappy"),
            (header::CONTENT_TYPE, "application/x-protobuf"),
            (HeaderName::from_static("x-prometheus-remote-write-version"), REMOTE_WRITE_VERSION),
        ];
        Ok(Sender { post: Poster::new(settings.url.clone(), &headers, &settings.headers, MAX_ANSWER_BYTES)? })
    }

    /// Sends `body` once, bounded by `timeout` as a whole: delivered, or why not.
    pub async fn send(&self, body: Bytes, timeout: Duration) -> Result<(), Failure> {
        let answer = self.post.send(body, timeout).await?;
        // A success's answer is ignored; an error's is kept for the log.
        let text = if answer.status.is_success() { String::new() } else { String::from_utf8_lossy(&answer.body).into_owned() };
        match classify(answer.status, answer.retry_after.as_deref(), &text, SystemTime::now()) {
            Attempt::Delivered => Ok(()),
            Attempt::Retry { after, reason } => Err(Failure::Retry { after, reason }),
            Attempt::Rejected { status, body } => Err(Failure::Rejected { status, body }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_remote_write_spec() {
        let now = SystemTime::now();
        assert_eq!(classify(StatusCode::NO_CONTENT, None, "", now), Attempt::Delivered);
        assert!(matches!(classify(StatusCode::INTERNAL_SERVER_ERROR, None, "boom", now), Attempt::Retry { after: None, .. }));
        assert!(matches!(classify(StatusCode::SERVICE_UNAVAILABLE, None, "", now), Attempt::Retry { .. }));
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("3"), "slow down", now),
            Attempt::Retry { after: Some(Duration::from_secs(3)), reason: "429 Too Many Requests: slow down".into() }
        );
        assert_eq!(
            classify(StatusCode::BAD_REQUEST, None, "out of order sample\n", now),
            Attempt::Rejected { status: 400, body: "out of order sample".into() }
        );
        assert!(matches!(classify(StatusCode::UNSUPPORTED_MEDIA_TYPE, None, "", now), Attempt::Rejected { status: 415, .. }));
        assert!(matches!(classify(StatusCode::MOVED_PERMANENTLY, None, "", now), Attempt::Rejected { status: 301, .. }));
    }
}
