//! The calling side of the bus: the [`BusClient`] trait, its HTTP implementation over
//! hyper-util's pooled client, and the [`DropSwitch`] used for fault injection.
//!
//! Every call is bounded by the caller's timeout as a whole (connect, send, answer, body), so a
//! dead peer costs at most that long. Errors are classified for the caller: a refused or
//! impossible connection is [`BusError::Unreachable`], a connection that broke later is
//! [`BusError::Transport`], a 401 is [`BusError::Unauthorized`]. On a secure bus every call is
//! signed with a fresh nonce, and a 200 answer is believed only if its MAC proves the secret and
//! names that nonce ([`BusError::UnauthenticatedAnswer`] otherwise).

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::{Request, StatusCode, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::BusError;
use super::auth::{BusAuth, MAC_HEADER, NONCE_HEADER, TIMESTAMP_HEADER, new_nonce};
use super::gate::BusCounters;
use super::messages::{
    BusRequest, BusResponse, MAX_MESSAGE_BYTES, decode_response, encode_request,
};
use super::server::BUS_PATH;
use crate::base::clock::now_ms;
use crate::base::ids::NodeId;
use crate::BoxFuture;

/// How much of a non-200 answer is kept as the error's reason.
const MAX_REASON_BYTES: usize = 4 * 1024;

/// What every [`BusClient`] does around its exchange, so the in-memory twin fails exactly like
/// the HTTP client: a call the drop switch drops fails at once, and the whole exchange is bounded
/// by `timeout`.
pub(crate) async fn guarded_call(
    drop_switch: &DropSwitch,
    to: &NodeId,
    request: &BusRequest,
    timeout: Duration,
    exchange: impl Future<Output = Result<BusResponse, BusError>>,
) -> Result<BusResponse, BusError> {
    if drop_switch.drops(to, request) {
        return Err(BusError::Dropped {
            to: to.clone(),
            request: request.name(),
        });
    }
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_elapsed) => Err(BusError::Timeout {
            to: to.clone(),
            after: timeout,
        }),
    }
}

/// Sends bus requests to peers.
pub trait BusClient: Send + Sync + 'static {
    /// Calls the peer `to`, whose bus listens on `addr` (`host:port`), and waits at most
    /// `timeout` for the whole exchange.
    fn call<'a>(
        &'a self,
        to: &'a NodeId,
        addr: &'a str,
        request: BusRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<BusResponse, BusError>>;
}

/// Fault injection: outgoing Suspend and Resume calls to the peers in this set fail at once
/// with [`BusError::Dropped`], as if the network had lost them. Other requests pass. Clones
/// share one set, so a chaos test or a debug admin route can flip it on a running node.
#[derive(Debug, Clone, Default)]
pub struct DropSwitch {
    dropped_peers: Arc<RwLock<BTreeSet<NodeId>>>,
}

impl DropSwitch {
    pub fn new() -> DropSwitch {
        DropSwitch::default()
    }

    /// Starts dropping Suspend/Resume calls to `peer`.
    pub fn drop_calls_to(&self, peer: NodeId) {
        self.write().insert(peer);
    }

    /// Stops dropping calls to `peer`.
    pub fn restore(&self, peer: &NodeId) {
        self.write().remove(peer);
    }

    pub fn restore_all(&self) {
        self.write().clear();
    }

    /// The peers whose Suspend/Resume calls are dropped, in id order.
    pub fn dropped_peers(&self) -> Vec<NodeId> {
        self.read().iter().cloned().collect()
    }

    /// Whether `request` to `to` must be dropped.
    pub fn drops(&self, to: &NodeId, request: &BusRequest) -> bool {
        matches!(
            request,
            BusRequest::Suspend { .. } | BusRequest::Resume { .. }
        ) && self.read().contains(to)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeSet<NodeId>> {
        self.dropped_peers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeSet<NodeId>> {
        self.dropped_peers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The bus client over HTTP/1.1 with pooled keep-alive connections.
pub struct HttpBusClient {
    http: Client<HttpConnector, Full<Bytes>>,
    auth: BusAuth,
    drop_switch: DropSwitch,
    /// Where refused answers are counted (the node's bus gate counters, when wired).
    counters: Arc<BusCounters>,
}

impl HttpBusClient {
    pub fn new(auth: BusAuth) -> HttpBusClient {
        HttpBusClient::with_drop_switch(auth, DropSwitch::new())
    }

    pub fn with_drop_switch(auth: BusAuth, drop_switch: DropSwitch) -> HttpBusClient {
        let mut connector = HttpConnector::new();
        // Bus messages are small request/answer pairs: do not let Nagle hold them back.
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT)
            .build(connector);
        HttpBusClient {
            http,
            auth,
            drop_switch,
            counters: Arc::default(),
        }
    }

    /// Counts refused answers in `counters` (for example the node's gate counters).
    pub fn with_counters(mut self, counters: Arc<BusCounters>) -> HttpBusClient {
        self.counters = counters;
        self
    }

    pub fn drop_switch(&self) -> &DropSwitch {
        &self.drop_switch
    }

    async fn exchange(
        &self,
        to: &NodeId,
        addr: &str,
        request: &BusRequest,
    ) -> Result<BusResponse, BusError> {
        let bad_address = |reason: String| BusError::BadAddress {
            to: to.clone(),
            addr: addr.to_string(),
            reason,
        };
        let uri: Uri = format!("http://{addr}{BUS_PATH}")
            .parse()
            .map_err(|e| bad_address(format!("{e}")))?;
        if uri.host().is_none() || uri.path() != BUS_PATH {
            return Err(bad_address("expected host:port".to_string()));
        }
        let body = encode_request(request)?;
        let nonce = new_nonce();
        let mut builder =
            Request::post(uri).header(header::CONTENT_TYPE, "application/octet-stream");
        if let Some(signature) = self.auth.sign(now_ms(), &nonce, BUS_PATH, &body) {
            builder = builder
                .header(TIMESTAMP_HEADER, signature.timestamp)
                .header(NONCE_HEADER, signature.nonce_hex)
                .header(MAC_HEADER, signature.mac_hex);
        }
        let http_request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| bad_address(e.to_string()))?;

        let answer = self.http.request(http_request).await.map_err(|e| {
            // The error's Display is terse ("client error (Connect)"); its source says why.
            let reason = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            if e.is_connect() {
                BusError::Unreachable {
                    to: to.clone(),
                    reason,
                }
            } else {
                BusError::Transport {
                    to: to.clone(),
                    reason,
                }
            }
        })?;
        let status = answer.status();
        let answer_header = |name: &str| {
            answer
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        let (answer_ts, answer_mac) = (answer_header(TIMESTAMP_HEADER), answer_header(MAC_HEADER));
        if status == StatusCode::OK
            && let Err(failure) = self.auth.precheck_answer(now_ms(), answer_ts.as_deref(), answer_mac.as_deref())
        {
            return Err(self.refuse_answer(to, addr, &failure));
        }
        let limit = if status == StatusCode::OK {
            MAX_MESSAGE_BYTES
        } else {
            MAX_REASON_BYTES
        };
        let collected = Limited::new(answer.into_body(), limit)
            .collect()
            .await
            .map(|body| body.to_bytes());
        if status == StatusCode::UNAUTHORIZED {
            return Err(BusError::Unauthorized { to: to.clone() });
        }
        if status != StatusCode::OK {
            let reason = match &collected {
                Ok(body) => String::from_utf8_lossy(body).trim().to_string(),
                Err(_) => "(unreadable body)".to_string(),
            };
            return Err(BusError::Status {
                to: to.clone(),
                status: status.as_u16(),
                reason,
            });
        }
        let bytes =
            collected.map_err(
                |e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                    Some(_) => BusError::TooLarge {
                        len: MAX_MESSAGE_BYTES + 1,
                        max: MAX_MESSAGE_BYTES,
                    },
                    None => BusError::Transport {
                        to: to.clone(),
                        reason: format!("reading the answer: {e}"),
                    },
                },
            )?;
        // Only an answer that proves the secret, for this call, is believed.
        if let Err(failure) = self.auth.verify_answer(
            now_ms(),
            &nonce,
            status.as_u16(),
            &bytes,
            answer_ts.as_deref(),
            answer_mac.as_deref(),
        ) {
            return Err(self.refuse_answer(to, addr, &failure));
        }
        decode_response(&bytes)
    }

    fn refuse_answer(&self, to: &NodeId, addr: &str, failure: &super::auth::AuthFailure) -> BusError {
        self.counters.record_unauthenticated_answer();
        tracing::warn!(peer = %to, %addr, reason = %failure, "bus answer refused: not authenticated");
        BusError::UnauthenticatedAnswer {
            to: to.clone(),
            reason: failure.to_string(),
        }
    }
}

impl BusClient for HttpBusClient {
    fn call<'a>(
        &'a self,
        to: &'a NodeId,
        addr: &'a str,
        request: BusRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<BusResponse, BusError>> {
        Box::pin(async move {
            guarded_call(&self.drop_switch, to, &request, timeout, self.exchange(to, addr, &request)).await
        })
    }
}

/// Counts every call of the client it wraps in the node's telemetry: `bus_calls{message}`, and
/// `bus_errors{message}` for the calls that failed (whatever the reason: timeout, refusal,
/// transport, dropped by fault injection). One decorator, so the HTTP client and the in-memory
/// twin are counted alike.
pub struct CountedBusClient {
    inner: Arc<dyn BusClient>,
    telemetry: Arc<crate::base::self_metrics::SelfMetrics>,
}

impl CountedBusClient {
    pub fn new(inner: Arc<dyn BusClient>, telemetry: Arc<crate::base::self_metrics::SelfMetrics>) -> CountedBusClient {
        CountedBusClient { inner, telemetry }
    }
}

impl BusClient for CountedBusClient {
    fn call<'a>(
        &'a self,
        to: &'a NodeId,
        addr: &'a str,
        request: BusRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<BusResponse, BusError>> {
        let message = crate::base::self_metrics::labels([("message", request.name())]);
        Box::pin(async move {
            self.telemetry.bus_calls.get_or_create(&message).inc();
            let result = self.inner.call(to, addr, request, timeout).await;
            if result.is_err() {
                self.telemetry.bus_errors.get_or_create(&message).inc();
            }
            result
        })
    }
}
