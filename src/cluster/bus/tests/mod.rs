//! Bus tests, shared fixtures: a scripted handler and sample requests. The HTTP server and
//! client are tested end to end in `http`, the in-memory twin in `memory`.

mod http;
mod memory;
mod security;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::base::ids::{Catalog, NodeId, RuleKey, RuleName};
use crate::control::workflow::peers::BoxFuture;

pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A bus server behind `gate` on 127.0.0.1:0, stopped when dropped.
pub(super) struct TestServer {
    pub(super) addr: String,
    pub(super) gate: BusGate,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves `handler` behind `gate` on an ephemeral loopback port.
pub(super) async fn start_gated(handler: Arc<dyn BusHandler>, gate: BusGate) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve(listener, router_with_gate(handler, gate.clone()), stop.clone().cancelled_owned()));
    TestServer { addr, gate, stop }
}

/// Serves `handler` with a fresh gate for `auth`, as `router` does.
pub(super) async fn start_server(handler: Arc<dyn BusHandler>, auth: BusAuth) -> TestServer {
    start_gated(handler, BusGate::new(auth)).await
}

pub(super) fn node(id: &str) -> NodeId {
    NodeId(id.into())
}

pub(super) fn key() -> RuleKey {
    RuleKey::new(Catalog::Lal, RuleName::parse("default").expect("valid"))
}

pub(super) fn suspend() -> BusRequest {
    BusRequest::Suspend {
        key: key(),
        sender: node("a"),
        issued_at_ms: 1,
    }
}

pub(super) fn digest() -> BusRequest {
    BusRequest::Digest { sender: node("a") }
}

/// Answers every request predictably and remembers what it saw.
pub(super) struct ScriptedHandler {
    node: NodeId,
    delay: Duration,
    seen: Mutex<Vec<BusRequest>>,
}

impl ScriptedHandler {
    pub(super) fn new(id: &str) -> Arc<ScriptedHandler> {
        ScriptedHandler::slow(id, Duration::ZERO)
    }

    pub(super) fn slow(id: &str, delay: Duration) -> Arc<ScriptedHandler> {
        Arc::new(ScriptedHandler {
            node: node(id),
            delay,
            seen: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn seen(&self) -> Vec<BusRequest> {
        self.seen.lock().expect("not poisoned").clone()
    }

    pub(super) fn answer(&self, request: &BusRequest) -> BusResponse {
        let me = self.node.clone();
        match request {
            BusRequest::Forward { op, .. } | BusRequest::ForwardFrom { op, .. } => BusResponse::Forwarded {
                http_status: 200,
                body: op.key().map(|k| k.to_string()).unwrap_or_default().into_bytes(),
                node: me,
            },
            BusRequest::Suspend { .. } => BusResponse::SuspendAck {
                node: me,
                state: SuspendState::Suspended,
            },
            BusRequest::Resume { .. } => BusResponse::ResumeAck {
                node: me,
                state: ResumeState::Resumed,
            },
            BusRequest::NotifyCommitted { .. } => BusResponse::Ack,
            BusRequest::Digest { .. } => BusResponse::DigestReply { entries: vec![] },
            BusRequest::FetchEntries { keys } => BusResponse::Error {
                message: format!("{} keys", keys.len()),
            },
            BusRequest::ConfirmHeld { revision, .. } => BusResponse::Held {
                held: revision.millis > 0,
            },
            BusRequest::View { what } => BusResponse::View {
                json: format!("{what:?}").into_bytes(),
            },
            BusRequest::QueryMetrics { .. } => BusResponse::MetricSeries { metrics: vec![], series: vec![] },
            BusRequest::HandOff { records, .. } => BusResponse::HandedOff { through: records.iter().map(|r| r.seq).max().unwrap_or(0) },
            BusRequest::HandoffGeneration => BusResponse::Generation { generation: 1 },
            BusRequest::AlarmStates { .. } => BusResponse::Ack,
            BusRequest::QueryPartials { .. } => BusResponse::MetricPartials { metrics: vec![], series: vec![], in_flight: Default::default() },
            BusRequest::ListMetrics => BusResponse::MetricList { metrics: vec![] },
            BusRequest::RollNotice { .. } => BusResponse::Ack,
            BusRequest::RollDigest => BusResponse::RollDigestReply { rolls: vec![] },
            BusRequest::FetchRolls { .. } => BusResponse::Rolls { records: vec![] },
            BusRequest::Prepare { .. } => BusResponse::Staged,
            BusRequest::Abort { .. } => BusResponse::Ack,
            BusRequest::ResolveStaged { .. } => BusResponse::StagedFate { fate: crate::control::rules::staged::Fate::NotCommitted },
            BusRequest::Replicate { items, .. } => BusResponse::Replicated {
                answers: items.iter().map(|_| crate::cluster::bus::ReplicaAnswer::Ack).collect(),
            },
            BusRequest::QueryLogs { .. } => BusResponse::Logs { logs: vec![] },
            BusRequest::QueryAlarms { .. } => BusResponse::Alarms { records: vec![], total: 0 },
            BusRequest::HistoryDigest => BusResponse::HistoryDigestReply { ids: vec![] },
            BusRequest::FetchHistory { .. } => BusResponse::History { records: vec![] },
        }
    }
}

impl BusHandler for ScriptedHandler {
    fn handle<'a>(&'a self, request: BusRequest) -> BoxFuture<'a, BusResponse> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            let response = self.answer(&request);
            self.seen.lock().expect("not poisoned").push(request);
            response
        })
    }
}

#[test]
fn bus_types_can_be_shared_across_tasks() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<HttpBusClient>();
    shared::<MemBusClient>();
    shared::<MemNetwork>();
    shared::<DropSwitch>();
    shared::<BusAuth>();
    shared::<BusError>();
}
