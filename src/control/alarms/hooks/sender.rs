//! The network seam of hook delivery: [`HookSender`] posts one body to one URL within a
//! timeout and says what status came back. [`HttpHookSender`] is the real one (hyper, http and
//! https against the public web roots, the way the exporters post); the in-memory twin is
//! [`super::twin::MemHookSender`].
//!
//! What a status means (retry or not) is decided in `plan.rs`, not here.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Request, StatusCode, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

/// Why an attempt got no HTTP status.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum HookError {
    #[error("{url}: no answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url}: the request could not be built: {reason}")]
    Request { url: String, reason: String },
    #[error("the TLS client configuration failed: {reason}")]
    Tls { reason: String },
}

/// Posts one notification body.
#[async_trait::async_trait]
pub trait HookSender: Send + Sync + 'static {
    /// One `POST url` with `Content-Type: application/json`, `headers` and `body`, bounded by
    /// `timeout` as a whole (connect, send, answer); the answer's status.
    async fn post(&self, url: &Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes, timeout: Duration) -> Result<StatusCode, HookError>;
}

/// How much of an answer is read (and then dropped) so that the connection can be reused.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The real sender: one pooled hyper client for every hook.
pub struct HttpHookSender {
    client: crate::base::tls::OutboundClient,
}

impl HttpHookSender {
    pub fn new() -> Result<HttpHookSender, HookError> {
        let client = crate::base::tls::outbound_client().map_err(|e| HookError::Tls { reason: e.to_string() })?;
        Ok(HttpHookSender { client })
    }

    async fn exchange(&self, url: &Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes) -> Result<StatusCode, HookError> {
        let mut request = Request::post(url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, concat!("hotrule/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(body))
            .map_err(|e| HookError::Request { url: url.to_string(), reason: e.to_string() })?;
        // A configured header replaces a default one of the same name (a hook's own
        // `Content-Type`, say) rather than being sent beside it.
        for (name, value) in headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let answer = self.client.request(request).await.map_err(|e| {
            let reason = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            HookError::Unreachable { url: url.to_string(), reason }
        })?;
        let status = answer.status();
        // Read (or drain) the answer, so the connection can be reused.
        let read = Limited::new(answer.into_body(), MAX_ANSWER_BYTES).collect().await;
        if !status.is_success() {
            let text = read.map(|body| body.to_bytes()).unwrap_or_default();
            tracing::debug!(%url, %status, answer = %String::from_utf8_lossy(&text[..text.len().min(512)]), "hook answered");
        }
        Ok(status)
    }
}

#[async_trait::async_trait]
impl HookSender for HttpHookSender {
    async fn post(&self, url: &Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes, timeout: Duration) -> Result<StatusCode, HookError> {
        match tokio::time::timeout(timeout, self.exchange(url, headers, body)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(HookError::Timeout { url: url.to_string(), timeout }),
        }
    }
}
