//! The HTTP transport of the simulated agents: HTTP POST of protobuf bodies to one server, as the
//! 3.x agent's libcurl client does (no failover, a 15 s timeout). The real agent speaks plain
//! HTTP only; `https://` servers are accepted here for agents and proxies that can use TLS.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use prost::Message;

use crate::api::agents::AGENT_TOKEN_HEADER;
use crate::control::agents::proto;

#[derive(Debug, Clone, thiserror::Error)]
pub enum SimError {
    #[error("server address {0:?} is not host:port, http://host:port or https://host:port")]
    BadServer(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("POST {path} failed: {message}")]
    Transport { path: String, message: String },
    #[error("POST {path} timed out after {timeout:?}")]
    Timeout { path: String, timeout: Duration },
    #[error(
        "POST {path} answered HTTP {status} with a body that is not the expected message: {message}"
    )]
    Decode {
        path: String,
        status: StatusCode,
        message: String,
    },
    #[error("POST {path} answered HTTP {status}, common_response.status {code}: {message}")]
    Server {
        path: String,
        status: StatusCode,
        code: i32,
        message: String,
    },
}

/// An error with its sources ("client error (Connect): invalid peer certificate: ..."): hyper's
/// own message alone names only the stage that failed.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// One raw HTTP answer.
#[derive(Debug, Clone)]
pub struct RawReply {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// HTTP transport to one server, shared by many simulated agents.
#[derive(Clone)]
pub struct AgentClient {
    base: String,
    token: Option<String>,
    timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl AgentClient {
    /// `server` is `host:port` or `http://host:port` (what the real agent speaks), or
    /// `https://host:port`, verified against the public web roots.
    pub fn new(server: &str, token: Option<String>) -> Result<AgentClient, SimError> {
        AgentClient::with_ca_file(server, token, None)
    }

    /// As [`AgentClient::new`], trusting the CA certificates in `ca_file` (PEM) for `https://`.
    pub fn with_ca_file(
        server: &str,
        token: Option<String>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<AgentClient, SimError> {
        let trimmed = server.trim().trim_end_matches('/');
        let host_port = |rest: &str| !rest.is_empty() && !rest.contains('/');
        let base = match (trimmed.strip_prefix("http://"), trimmed.strip_prefix("https://")) {
            (Some(rest), _) | (_, Some(rest)) if host_port(rest) => trimmed.to_string(),
            (None, None) if host_port(trimmed) && !trimmed.contains("://") => {
                format!("http://{trimmed}")
            }
            _ => return Err(SimError::BadServer(server.to_string())),
        };
        if format!("{base}/Agent/Heartbeat")
            .parse::<hyper::Uri>()
            .is_err()
        {
            return Err(SimError::BadServer(server.to_string()));
        }
        let tls = crate::base::tls::client_config(ca_file).map_err(|e| SimError::Tls(e.to_string()))?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .build(connector);
        Ok(AgentClient {
            base,
            token,
            timeout: Duration::from_secs(15),
            client,
        })
    }

    /// The 3.x agent's HTTP timeout is 15 s.
    pub fn with_timeout(mut self, timeout: Duration) -> AgentClient {
        self.timeout = timeout;
        self
    }

    /// POSTs raw bytes with extra headers; for tests that send what no agent would.
    pub async fn post_raw(
        &self,
        path: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Result<RawReply, SimError> {
        let transport = |message: String| SimError::Transport {
            path: path.to_string(),
            message,
        };
        let mut builder = Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/x-protobuf");
        if let Some(token) = &self.token {
            builder = builder.header(AGENT_TOKEN_HEADER, token);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| transport(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport(error_chain(&e)))?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| transport(e.to_string()))?
                .to_bytes();
            let content_type = parts
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            Ok(RawReply {
                status: parts.status,
                content_type,
                body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| SimError::Timeout {
                path: path.to_string(),
                timeout: self.timeout,
            })?
    }

    /// One protocol call: encodes, posts, decodes, and turns a non-zero `common_response.status`
    /// into [`SimError::Server`].
    pub async fn call<Resp: Message + Default>(
        &self,
        path: &str,
        request: &impl Message,
    ) -> Result<Resp, SimError> {
        let reply = self.post_raw(path, request.encode_to_vec(), &[]).await?;
        let decode = |message: String| SimError::Decode {
            path: path.to_string(),
            status: reply.status,
            message,
        };
        let response = Resp::decode(reply.body.clone()).map_err(|e| decode(e.to_string()))?;
        // Every response message has common_response at field 2.
        let common = proto::ReportStatusResponse::decode(reply.body.clone())
            .map_err(|e| decode(e.to_string()))?;
        match common.common_response {
            Some(c) if c.status != 0 => Err(SimError::Server {
                path: path.to_string(),
                status: reply.status,
                code: c.status,
                message: String::from_utf8_lossy(&c.error_message).into_owned(),
            }),
            _ => Ok(response),
        }
    }
}
