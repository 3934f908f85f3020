//! The admin API's protocol client: one HTTP/1.1 (or https) client with the node's token,
//! used by the CLI's commands (`cli::admin`), the benchmarks and the tests.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("server address {0:?} is not http://host:port")]
    BadServer(String),
    #[error("request to {url} failed: {message}")]
    Transport { url: String, message: String },
    #[error("request to {url} timed out after {timeout:?}")]
    Timeout { url: String, timeout: Duration },
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Clone)]
pub struct AdminClient {
    base: String,
    token: Option<String>,
    timeout: Duration,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl AdminClient {
    /// `server` is `http://host:port` or plain `host:port`.
    pub fn new(server: &str, token: Option<String>) -> Result<AdminClient, ClientError> {
        let trimmed = server.trim().trim_end_matches('/');
        let base = if trimmed.starts_with("http://") {
            trimmed.to_string()
        } else if trimmed.contains("://") || trimmed.is_empty() {
            return Err(ClientError::BadServer(server.to_string()));
        } else {
            format!("http://{trimmed}")
        };
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .pool_idle_timeout(crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT)
            .build(connector);
        Ok(AdminClient { base, token: token.filter(|t| !t.is_empty()), timeout: Duration::from_secs(60), client })
    }

    /// The same client with another request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> AdminClient {
        self.timeout = timeout;
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; `path` includes the query string.
    pub async fn send(&self, method: Method, path: &str, body: Vec<u8>, accept: Option<&str>) -> Result<Reply, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut builder = Request::builder().method(method).uri(&url);
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        if let Some(accept) = accept {
            builder = builder.header("accept", accept);
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ClientError::Transport { url: url.clone(), message: e.to_string() })?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| e.to_string())?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok::<_, String>(Reply { status: parts.status, headers: parts.headers, body })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(message)) => Err(ClientError::Transport { url, message }),
            Err(_) => Err(ClientError::Timeout { url, timeout: self.timeout }),
        }
    }

    pub async fn get(&self, path: &str) -> Result<Reply, ClientError> {
        self.send(Method::GET, path, Vec::new(), None).await
    }

    pub async fn post(&self, path: &str, body: Vec<u8>) -> Result<Reply, ClientError> {
        self.send(Method::POST, path, body, None).await
    }

    pub async fn delete(&self, path: &str) -> Result<Reply, ClientError> {
        self.send(Method::DELETE, path, Vec::new(), None).await
    }
}

/// Builds `path?k=v&...` with percent-encoded values.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = path.to_string();
    for (i, (k, v)) in pairs.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(&encode(k));
        out.push('=');
        out.push_str(&encode(v));
    }
    out
}

fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parses `name=value` tag arguments (agent tags, as the agent API takes them).
pub fn parse_tag(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_string(), value.trim().to_string())),
        _ => Err(format!("tag {text:?} is not name=value")),
    }
}
