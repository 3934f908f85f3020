//! The bus side of the metric handoff (`data::metrics::handoff`): records go to their owner as
//! a `HandOff` call; the owner applies them in order and answers with its applied mark.

use std::sync::Arc;
use std::time::Duration;

use crate::base::ids::NodeId;
use crate::cluster::bus::BusError;
use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::data::metrics::cells::handoff::HandoffRecord;
use crate::data::metrics::handoff::{HandoffReceiver, HandoffSender, SendFailure};

use super::Cluster;

/// How long one handoff call may take.
pub const HANDOFF_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends handoff records to their owner over the cluster's bus.
pub struct BusHandoff {
    pub cluster: Arc<Cluster>,
}

#[async_trait::async_trait]
impl HandoffSender for BusHandoff {
    async fn send(&self, owner: &NodeId, records: Vec<HandoffRecord>) -> Result<u64, SendFailure> {
        let definite = |reason: String| SendFailure { ambiguous: false, reason };
        let Some(member) = self.cluster.view().member(owner).cloned() else {
            return Err(definite(format!("{owner} is not a member")));
        };
        let request = BusRequest::HandOff { sender: self.cluster.self_id().clone(), records };
        match self.cluster.call(&member, request, HANDOFF_CALL_TIMEOUT).await {
            Ok(BusResponse::HandedOff { through }) => Ok(through),
            Ok(BusResponse::Error { message }) => Err(definite(message)),
            Ok(other) => Err(definite(format!("unexpected answer {}", other.name()))),
            // The call surely did not reach the owner's handler: nothing was applied.
            Err(e @ (BusError::Unreachable { .. } | BusError::Unauthorized { .. } | BusError::BadAddress { .. })) => Err(definite(e.to_string())),
            // No answer: the owner may have applied the records.
            Err(e) => Err(SendFailure { ambiguous: true, reason: e.to_string() }),
        }
    }
}

/// The owner's answer to a `HandOff` call (the store work runs off the async threads).
pub async fn receive(receiver: Option<Arc<dyn HandoffReceiver>>, sender: NodeId, records: Vec<HandoffRecord>) -> BusResponse {
    let Some(receiver) = receiver else {
        return BusResponse::Error { message: "this node keeps no metric cells".into() };
    };
    match tokio::task::spawn_blocking(move || receiver.apply(&sender, &records)).await {
        Ok(Ok(through)) => BusResponse::HandedOff { through },
        Ok(Err(message)) => BusResponse::Error { message: format!("handoff: {message}") },
        Err(e) => BusResponse::Error { message: format!("handoff task failed: {e}") },
    }
}
