//! One remote-write request, and the pure rules around it: what an answer means (2xx delivered;
//! 5xx, 429 and transport failures retried; any other status refused for good), how long to
//! wait before the next attempt (exponential backoff, or the receiver's `Retry-After`).

use std::time::{Duration, SystemTime};

use axum::http::{HeaderValue, Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::ExportError;
use super::config::{RemoteWriteSettings, RetrySettings};

/// The remote-write protocol version sent in `X-Prometheus-Remote-Write-Version`.
pub const REMOTE_WRITE_VERSION: &str = "0.1.0";
/// A receiver's `Retry-After` longer than this is cut to it, so one answer cannot stall the
/// exporter for hours (the queue keeps filling, and drops, meanwhile).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
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

/// `Retry-After`: delay-seconds or an HTTP-date, capped at [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let after = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => httpdate::parse_http_date(value).ok()?.duration_since(now).unwrap_or(Duration::ZERO),
    };
    Some(after.min(MAX_RETRY_AFTER))
}

/// The wait after failed attempt number `attempt` (1 for the first): `initial × 2^(attempt-1)`
/// up to `max_backoff`, or the receiver's `Retry-After` when it gave one.
pub fn retry_delay(retry: &RetrySettings, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(after) = retry_after {
        return after;
    }
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    retry.initial_backoff.saturating_mul(factor).min(retry.max_backoff)
}

/// The HTTP client of the exporter (http and https, verified against the public web roots).
pub struct Sender {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    settings: RemoteWriteSettings,
    user_agent: HeaderValue,
}

impl Sender {
    pub fn new(settings: RemoteWriteSettings) -> Result<Sender, ExportError> {
        let tls = crate::base::tls::client_config(None).map_err(ExportError::Tls)?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector =
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT).build(connector);
        let user_agent = HeaderValue::from_static(concat!("hotrule/", env!("CARGO_PKG_VERSION")));
        Ok(Sender { client, settings, user_agent })
    }

    /// Sends `body` once, bounded by `timeout` as a whole (connect, send, answer, body).
    pub async fn send(&self, body: Bytes, timeout: Duration) -> Attempt {
        match tokio::time::timeout(timeout, self.exchange(body)).await {
            Ok(attempt) => attempt,
            Err(_elapsed) => Attempt::Retry { after: None, reason: format!("no answer within {timeout:?}") },
        }
    }

    async fn exchange(&self, body: Bytes) -> Attempt {
        let mut builder = Request::post(self.settings.url.clone())
            .header(header::CONTENT_ENCODING, "snappy")
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", REMOTE_WRITE_VERSION)
            .header(header::USER_AGENT, self.user_agent.clone());
        for (name, value) in &self.settings.headers.0 {
            builder = builder.header(name, value);
        }
        let request = match builder.body(Full::new(body)) {
            Ok(request) => request,
            // The URL and headers were validated with the configuration.
            Err(e) => return Attempt::Rejected { status: 0, body: format!("building the request: {e}") },
        };
        let answer = match self.client.request(request).await {
            Ok(answer) => answer,
            Err(e) => {
                let reason = match std::error::Error::source(&e) {
                    Some(source) => format!("{e}: {source}"),
                    None => e.to_string(),
                };
                return Attempt::Retry { after: None, reason };
            }
        };
        let status = answer.status();
        let retry_after = answer.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = if status.is_success() {
            // Drain the (ignored) answer so the connection can be reused.
            let _ = Limited::new(answer.into_body(), MAX_ANSWER_BYTES).collect().await;
            String::new()
        } else {
            match Limited::new(answer.into_body(), MAX_ANSWER_BYTES).collect().await {
                Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
                Err(_) => format!("(answer body unreadable or over {MAX_ANSWER_BYTES} bytes)"),
            }
        };
        classify(status, retry_after.as_deref(), &text, SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry() -> RetrySettings {
        RetrySettings { initial_backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(1), max_attempts: 5 }
    }

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

    #[test]
    fn retry_after_is_seconds_or_a_date_and_is_capped() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), Some(Duration::from_secs(10)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO), "a past date: now");
        assert_eq!(parse_retry_after("86400", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum_unless_the_receiver_says() {
        let r = retry();
        let delays: Vec<u128> = (1..=6).map(|a| retry_delay(&r, a, None).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(retry_delay(&r, 1, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(retry_delay(&r, 40, None), Duration::from_secs(1), "no overflow");
    }
}
