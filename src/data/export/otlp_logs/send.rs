//! One OTLP/HTTP logs request, and what its answer means. OTLP/HTTP's rules (docs/configuration.md,
//! "Log export"): 2xx is delivered (a `partial_success` names records the receiver refused, never
//! retried); 429, 502, 503 and 504 and transport failures are retried, honouring
//! `Retry-After`; every other status is refused for good and the batch dropped.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderValue, Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;

use super::config::OtlpLogsSettings;
use crate::data::export::ExportError;
use crate::data::export::send::parse_retry_after;

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

/// The HTTP client of the log exporter (http and https, verified against the public web roots).
pub struct Sender {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    settings: OtlpLogsSettings,
    user_agent: HeaderValue,
}

impl Sender {
    pub fn new(settings: OtlpLogsSettings) -> Result<Sender, ExportError> {
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
        let mut builder = Request::post(self.settings.endpoint.clone())
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .header(header::USER_AGENT, self.user_agent.clone());
        for (name, value) in &self.settings.headers.0 {
            builder = builder.header(name, value);
        }
        let request = match builder.body(Full::new(body)) {
            Ok(request) => request,
            // The endpoint and headers were validated with the configuration.
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
        let body = match Limited::new(answer.into_body(), MAX_ANSWER_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => Bytes::from(format!("(answer body unreadable or over {MAX_ANSWER_BYTES} bytes)")),
        };
        classify(status, retry_after.as_deref(), &body, SystemTime::now())
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
