//! One POST to an export receiver, whatever the protocol: the HTTP client both exporters share
//! (http and https, verified against the public web roots), one timeout over the whole
//! exchange, and a bounded read of the answer. What an answer means is each protocol's own
//! (`send.rs`, `otlp_logs/send.rs`); an attempt that gets no answer is a [`Failure`] here.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderName, HeaderValue, Request, StatusCode, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

use super::ExportError;
use super::config::ExtraHeaders;

/// A receiver's `Retry-After` longer than this is cut to it, so one answer cannot stall the
/// exporter for hours (the queue keeps filling, and drops, meanwhile).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Why an attempt did not deliver its batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Worth another attempt: `after` is the receiver's `Retry-After`.
    Retry { after: Option<Duration>, reason: String },
    /// Refused for good: the batch is dropped.
    Rejected { status: u16, body: String },
}

/// A receiver's answer, its body read up to the protocol's bound.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub retry_after: Option<String>,
    /// The body, or a note that it was unreadable or over the bound.
    pub body: Bytes,
}

/// `Retry-After`: delay-seconds or an HTTP-date, capped at [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let after = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => httpdate::parse_http_date(value).ok()?.duration_since(now).unwrap_or(Duration::ZERO),
    };
    Some(after.min(MAX_RETRY_AFTER))
}

/// The HTTP client of one exporter, with the headers every request carries.
pub struct Poster {
    client: crate::base::tls::OutboundClient,
    url: Uri,
    /// The protocol's headers, then `User-Agent`, then the configured ones.
    headers: Vec<(HeaderName, HeaderValue)>,
    max_answer_bytes: usize,
}

impl Poster {
    pub fn new(
        url: Uri,
        protocol_headers: &[(HeaderName, &'static str)],
        extra: &ExtraHeaders,
        max_answer_bytes: usize,
    ) -> Result<Poster, ExportError> {
        let client = crate::base::tls::outbound_client().map_err(ExportError::Tls)?;
        let user_agent = (header::USER_AGENT, HeaderValue::from_static(concat!("hotrule/", env!("CARGO_PKG_VERSION"))));
        let headers = protocol_headers
            .iter()
            .map(|(name, value)| (name.clone(), HeaderValue::from_static(value)))
            .chain([user_agent])
            .chain(extra.0.iter().cloned())
            .collect();
        Ok(Poster { client, url, headers, max_answer_bytes })
    }

    /// Posts `body` once, bounded by `timeout` as a whole (connect, send, answer, body).
    pub async fn send(&self, body: Bytes, timeout: Duration) -> Result<Answer, Failure> {
        match tokio::time::timeout(timeout, self.exchange(body)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(Failure::Retry { after: None, reason: format!("no answer within {timeout:?}") }),
        }
    }

    async fn exchange(&self, body: Bytes) -> Result<Answer, Failure> {
        let mut builder = Request::post(self.url.clone());
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        // The URL and headers were validated with the configuration.
        let request = builder
            .body(Full::new(body))
            .map_err(|e| Failure::Rejected { status: 0, body: format!("building the request: {e}") })?;
        let answer = self.client.request(request).await.map_err(|e| {
            let reason = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            Failure::Retry { after: None, reason }
        })?;
        let status = answer.status();
        let retry_after = answer.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string);
        // Read (or drain) the answer, so the connection can be reused.
        let body = match Limited::new(answer.into_body(), self.max_answer_bytes).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => Bytes::from(format!("(answer body unreadable or over {} bytes)", self.max_answer_bytes)),
        };
        Ok(Answer { status, retry_after, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date_and_is_capped() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), Some(Duration::from_secs(10)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO), "a past date: now");
        assert_eq!(parse_retry_after("86400", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
