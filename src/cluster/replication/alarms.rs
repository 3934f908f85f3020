//! The bus side of alarm states (`control::alarms::engine`): an owner's check hands the states
//! it changed to every live peer before it sends a notification, and a rule change's alarm reset
//! reaches every node. Best effort, bounded by [`ALARM_CALL_TIMEOUT`] per peer: a peer that
//! misses a state only matters if it becomes the owner before the next change.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::control::alarms::engine::StateRecord;
use crate::control::runtime::Runtime;
use crate::data::alarms::AlarmPeers;

use super::Cluster;

/// How long one peer may take to take the states.
pub const ALARM_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends alarm states and resets to every live peer over the bus.
pub struct BusAlarmPeers {
    pub cluster: Arc<Cluster>,
}

#[async_trait::async_trait]
impl AlarmPeers for BusAlarmPeers {
    async fn share(&self, reset: Vec<String>, states: Vec<StateRecord>) -> usize {
        let view = self.cluster.view();
        let peers: Vec<_> = view.live_peers().cloned().collect();
        let sender = self.cluster.self_id().clone();
        let calls = peers.into_iter().map(|peer| {
            let request = BusRequest::AlarmStates { sender: sender.clone(), reset: reset.clone(), states: states.clone() };
            let cluster = self.cluster.clone();
            async move {
                match cluster.call(&peer, request, ALARM_CALL_TIMEOUT).await {
                    Ok(BusResponse::Ack) => true,
                    other => {
                        tracing::debug!(peer = %peer.node_id, answer = ?other.map(|r| r.name()), "alarm states not taken by a peer");
                        false
                    }
                }
            }
        });
        super::peers::futures_join(calls).await.into_iter().filter(|taken| *taken).count()
    }
}

/// A peer's alarm states (and reset): into this node's engine.
pub fn receive(runtime: &Runtime, reset: Vec<String>, states: Vec<StateRecord>) -> BusResponse {
    let Some(alarms) = runtime.alarms() else {
        return BusResponse::Error { message: "this node runs no alarm rules".into() };
    };
    let mut engine = alarms.lock().unwrap_or_else(|p| p.into_inner());
    if !reset.is_empty() {
        let rules = engine.reset(&reset.into_iter().collect::<BTreeSet<_>>());
        if !rules.is_empty() {
            tracing::info!(alarm_rules = ?rules, "alarm windows reset by a peer's rule change");
        }
    }
    engine.adopt(states);
    BusResponse::Ack
}
