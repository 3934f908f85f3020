//! The in-memory twin of the bus: [`MemNetwork`] routes calls between handlers registered by
//! [`NodeId`], with faults a test can switch on per link.
//!
//! Like chitchat's `ChannelTransport`, every call really goes through the wire encoding: the
//! request is encoded and decoded before the handler sees it, and so is the answer. So a message
//! that would not survive the network does not survive here either. The handler runs on its own
//! task, as in the HTTP server, so a caller that times out does not cancel it.
//!
//! Faults, and how a call sees them:
//! - a cut link (`cut`, `isolate`) or a node with no handler (never started, or stopped: a
//!   node's registration ends with its shutdown): [`BusError::Unreachable`] **immediately**,
//!   like a refused connection;
//! - a dropped request or answer (`drop_requests`, `drop_responses`): the call hangs until the
//!   caller's timeout, then [`BusError::Timeout`], like a lost packet. A dropped answer means the
//!   handler did run. Drops are deterministic: a fraction `f` drops exactly the calls where the
//!   running total of `f` crosses an integer (0.5 drops every second call);
//! - a link delay (`set_delay`): applied once each way, so a round trip costs twice the delay;
//! - a [`DropSwitch`] on the client: Suspend/Resume fail with [`BusError::Dropped`] at once.
//!
//! Links are undirected: a fault between `a` and `b` applies to calls in both directions.
//! The `addr` argument of a call is ignored (routing is by id).
//!
//! Authentication is not simulated but run: every call is signed by the client's [`BusAuth`]
//! and passes the receiving node's [`BusGate`] (headers, replay, length, MAC) exactly as over
//! HTTP, and every answer is signed by the receiver and verified by the caller. The network has
//! one secret (a fixed test secret unless [`MemNetwork::with_auth`] says otherwise); a client
//! with another ([`MemNetwork::client_with_auth`]) plays a node without the secret.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::BusError;
use super::auth::{BusAuth, new_nonce};
use super::client::{BusClient, DropSwitch, guarded_call};
use super::gate::{BusGate, Refusal};
use super::server::BUS_PATH;
use crate::base::clock::now_ms;
use super::messages::{
    BusRequest, BusResponse, decode_request, decode_response, encode_request, encode_response,
};
use super::server::BusHandler;
use crate::base::ids::NodeId;
use crate::BoxFuture;

/// A simulated network of bus handlers. Clones share the network.
#[derive(Clone)]
pub struct MemNetwork {
    state: Arc<Mutex<NetworkState>>,
    auth: BusAuth,
}

impl Default for MemNetwork {
    fn default() -> MemNetwork {
        MemNetwork::with_auth(BusAuth::secret("in-memory bus test secret"))
    }
}

#[derive(Default)]
struct NetworkState {
    handlers: BTreeMap<NodeId, (Arc<dyn BusHandler>, BusGate)>,
    cut_links: BTreeSet<Link>,
    isolated: BTreeSet<NodeId>,
    faults: BTreeMap<Link, LinkFaults>,
    delivered: BTreeMap<(NodeId, NodeId, &'static str), u64>,
}

/// An undirected link: the two ends in id order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Link(NodeId, NodeId);

impl Link {
    fn between(a: &NodeId, b: &NodeId) -> Link {
        if a <= b {
            Link(a.clone(), b.clone())
        } else {
            Link(b.clone(), a.clone())
        }
    }
}

#[derive(Debug, Default)]
struct LinkFaults {
    delay: Duration,
    drop_requests: DropRate,
    drop_responses: DropRate,
}

/// A deterministic drop rate: each call adds `fraction` to `credit`, and a call that brings the
/// credit to 1 or more is dropped (and pays 1).
#[derive(Debug, Default)]
struct DropRate {
    fraction: f64,
    credit: f64,
}

impl DropRate {
    fn set(&mut self, fraction: f64) {
        self.fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        self.credit = 0.0;
    }

    fn next_is_dropped(&mut self) -> bool {
        if self.fraction == 0.0 {
            return false;
        }
        self.credit += self.fraction;
        // The epsilon keeps 0.1 × 10 from landing at 0.9999999.
        if self.credit >= 1.0 - 1e-9 {
            self.credit -= 1.0;
            return true;
        }
        false
    }
}

/// What the network decided for one call, taken under the lock and carried out after it.
struct Route {
    handler: Arc<dyn BusHandler>,
    gate: BusGate,
    delay: Duration,
    drop_request: bool,
    drop_response: bool,
}

impl MemNetwork {
    pub fn new() -> MemNetwork {
        MemNetwork::default()
    }

    /// A network whose nodes share `auth` (the cluster secret, or an insecure bus).
    pub fn with_auth(auth: BusAuth) -> MemNetwork {
        MemNetwork {
            state: Arc::default(),
            auth,
        }
    }

    /// The network's authentication (what registered nodes and clients use by default).
    pub fn auth(&self) -> &BusAuth {
        &self.auth
    }

    /// Makes `node` reachable, answering with `handler` behind a fresh gate over the network's
    /// secret (replaces an earlier handler: a restart).
    pub fn register(&self, node: NodeId, handler: Arc<dyn BusHandler>) {
        self.register_with_gate(node, handler, BusGate::new(self.auth.clone()));
    }

    /// Makes `node` reachable behind `gate` (whose counters the node reports).
    pub fn register_with_gate(&self, node: NodeId, handler: Arc<dyn BusHandler>, gate: BusGate) {
        self.lock().handlers.insert(node, (handler, gate));
    }

    /// Removes `node`'s handler, as if its process stopped: calls to it are unreachable.
    pub fn unregister(&self, node: &NodeId) {
        self.lock().handlers.remove(node);
    }

    /// Removes `node`'s handler if it is still `handler` (a node that stops; a restart that
    /// registered since keeps its own).
    pub fn unregister_handler(&self, node: &NodeId, handler: &Arc<dyn BusHandler>) {
        let mut state = self.lock();
        if state.handlers.get(node).is_some_and(|(registered, _)| Arc::ptr_eq(registered, handler)) {
            state.handlers.remove(node);
        }
    }

    /// A client that calls from `from` with the network's secret.
    pub fn client(&self, from: NodeId) -> MemBusClient {
        self.client_with_auth(from, self.auth.clone())
    }

    /// A client that calls from `from` signing with `auth` (another secret: a rogue node).
    pub fn client_with_auth(&self, from: NodeId, auth: BusAuth) -> MemBusClient {
        MemBusClient {
            from,
            network: self.clone(),
            drop_switch: DropSwitch::new(),
            auth,
        }
    }

    /// Cuts the link between `a` and `b`, both directions.
    pub fn cut(&self, a: &NodeId, b: &NodeId) {
        self.lock().cut_links.insert(Link::between(a, b));
    }

    /// Restores the link between `a` and `b` (does not undo `isolate`).
    pub fn heal(&self, a: &NodeId, b: &NodeId) {
        self.lock().cut_links.remove(&Link::between(a, b));
    }

    /// Cuts `node` from every other node, including ones registered later.
    pub fn isolate(&self, node: &NodeId) {
        self.lock().isolated.insert(node.clone());
    }

    /// Undoes `isolate` (links cut one by one stay cut).
    pub fn rejoin(&self, node: &NodeId) {
        self.lock().isolated.remove(node);
    }

    /// Removes every cut, isolation, delay and drop rate.
    pub fn heal_all(&self) {
        let mut state = self.lock();
        state.cut_links.clear();
        state.isolated.clear();
        state.faults.clear();
    }

    /// Delays every message on the link between `a` and `b` by `delay`, each way.
    pub fn set_delay(&self, a: &NodeId, b: &NodeId, delay: Duration) {
        self.lock()
            .faults
            .entry(Link::between(a, b))
            .or_default()
            .delay = delay;
    }

    /// Loses `fraction` (0..=1) of the requests on the link: the handler never runs.
    pub fn drop_requests(&self, a: &NodeId, b: &NodeId, fraction: f64) {
        self.lock()
            .faults
            .entry(Link::between(a, b))
            .or_default()
            .drop_requests
            .set(fraction);
    }

    /// Loses `fraction` (0..=1) of the answers on the link: the handler runs, the caller times out.
    pub fn drop_responses(&self, a: &NodeId, b: &NodeId, fraction: f64) {
        self.lock()
            .faults
            .entry(Link::between(a, b))
            .or_default()
            .drop_responses
            .set(fraction);
    }

    /// Whether a call from `from` to `to` would currently get through the cuts.
    pub fn can_reach(&self, from: &NodeId, to: &NodeId) -> bool {
        let state = self.lock();
        state.handlers.contains_key(to) && !state.is_cut(from, to)
    }

    /// How many `request_name` requests from `from` reached `to`'s handler.
    pub fn delivered(&self, from: &NodeId, to: &NodeId, request_name: &'static str) -> u64 {
        self.lock()
            .delivered
            .get(&(from.clone(), to.clone(), request_name))
            .copied()
            .unwrap_or(0)
    }

    fn route(&self, from: &NodeId, to: &NodeId) -> Result<Route, BusError> {
        let mut state = self.lock();
        if state.is_cut(from, to) {
            return Err(BusError::Unreachable {
                to: to.clone(),
                reason: format!("link {from} <-> {to} is cut"),
            });
        }
        let (handler, gate) = state
            .handlers
            .get(to)
            .cloned()
            .ok_or_else(|| BusError::Unreachable {
                to: to.clone(),
                reason: "no node listens there".to_string(),
            })?;
        let faults = state.faults.entry(Link::between(from, to)).or_default();
        Ok(Route {
            handler,
            gate,
            delay: faults.delay,
            drop_request: faults.drop_requests.next_is_dropped(),
            drop_response: faults.drop_responses.next_is_dropped(),
        })
    }

    fn record_delivery(&self, from: &NodeId, to: &NodeId, request_name: &'static str) {
        *self
            .lock()
            .delivered
            .entry((from.clone(), to.clone(), request_name))
            .or_default() += 1;
    }

    fn lock(&self) -> MutexGuard<'_, NetworkState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl NetworkState {
    fn is_cut(&self, from: &NodeId, to: &NodeId) -> bool {
        from != to
            && (self.isolated.contains(from)
                || self.isolated.contains(to)
                || self.cut_links.contains(&Link::between(from, to)))
    }
}

/// A [`BusClient`] that calls from one node of a [`MemNetwork`].
pub struct MemBusClient {
    from: NodeId,
    network: MemNetwork,
    drop_switch: DropSwitch,
    auth: BusAuth,
}

impl MemBusClient {
    /// Shares `drop_switch` with this client (for example the one a chaos test flips).
    pub fn with_drop_switch(mut self, drop_switch: DropSwitch) -> MemBusClient {
        self.drop_switch = drop_switch;
        self
    }

    pub fn drop_switch(&self) -> &DropSwitch {
        &self.drop_switch
    }

    pub fn node(&self) -> &NodeId {
        &self.from
    }

    async fn exchange(&self, to: &NodeId, request: &BusRequest) -> Result<BusResponse, BusError> {
        let wire_request = encode_request(request)?;
        let route = self.network.route(&self.from, to)?;
        tokio::time::sleep(route.delay).await;
        if route.drop_request {
            return std::future::pending().await;
        }
        // The receiving side: the same gate as the HTTP server, then the handler.
        let nonce = new_nonce();
        let signature = self.auth.sign(now_ms(), &nonce, BUS_PATH, &wire_request);
        let header = |pick: fn(&super::auth::Signature) -> &str| signature.as_ref().map(pick);
        let refused = |refusal: Refusal| refusal_error(to, refusal);
        let admission = route
            .gate
            .admit(
                now_ms(),
                BUS_PATH,
                header(|s| &s.timestamp),
                header(|s| &s.nonce_hex),
                header(|s| &s.mac_hex),
                Some(wire_request.len() as u64),
            )
            .map_err(refused)?;
        let mut checked = admission.checked;
        if let Some((_, mac)) = checked.as_mut() {
            mac.update(&wire_request);
        }
        let accepted_nonce = route.gate.accept(now_ms(), checked).map_err(refused)?;
        drop(admission.permit);
        let received = match decode_request(&wire_request) {
            Ok(received) => received,
            Err(decode_error) => {
                let reason = format!("malformed bus request: {decode_error}");
                return Err(BusError::Status {
                    to: to.clone(),
                    status: 400,
                    reason,
                });
            }
        };
        self.network
            .record_delivery(&self.from, to, received.name());
        let handler = route.handler;
        let answer = tokio::spawn(async move { handler.handle(received).await })
            .await
            .map_err(|join_error| BusError::Status {
                to: to.clone(),
                status: 500,
                reason: format!("bus handler failed: {join_error}"),
            })?;
        let wire_answer = encode_response(&answer)?;
        let answer_signature = accepted_nonce
            .and_then(|nonce| route.gate.auth().sign_answer(now_ms(), &nonce, 200, &wire_answer));
        tokio::time::sleep(route.delay).await;
        if route.drop_response {
            return std::future::pending().await;
        }
        // Back on the calling side: believe only an answer that proves the secret.
        self.auth
            .verify_answer(
                now_ms(),
                &nonce,
                200,
                &wire_answer,
                answer_signature.as_ref().map(|s| s.timestamp.as_str()),
                answer_signature.as_ref().map(|s| s.mac_hex.as_str()),
            )
            .map_err(|failure| BusError::UnauthenticatedAnswer {
                to: to.clone(),
                reason: failure.to_string(),
            })?;
        decode_response(&wire_answer)
    }
}

/// The error a caller sees for a call the gate refused, as the HTTP client would classify it.
fn refusal_error(to: &NodeId, refusal: Refusal) -> BusError {
    match refusal {
        Refusal::Unauthorized(_) => BusError::Unauthorized { to: to.clone() },
        Refusal::LengthRequired => BusError::Status { to: to.clone(), status: 411, reason: "length required".into() },
        Refusal::TooLarge { len } => BusError::Status { to: to.clone(), status: 413, reason: format!("{len} bytes") },
        Refusal::Busy(why) => BusError::Status { to: to.clone(), status: 503, reason: why.into() },
    }
}

impl BusClient for MemBusClient {
    fn call<'a>(
        &'a self,
        to: &'a NodeId,
        _addr: &'a str,
        request: BusRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<BusResponse, BusError>> {
        Box::pin(async move {
            guarded_call(&self.drop_switch, to, &request, timeout, self.exchange(to, &request)).await
        })
    }
}
