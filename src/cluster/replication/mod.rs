//! Replication: how a node works with its peers. It holds the workflow's `Peers` over the cluster
//! bus (best-effort Suspend/Resume, commit notices that carry the committed entry), the bus
//! handler that answers peers, the taking of commit notices (`notices`), storage sync (peers
//! pull from the main; the main pulls newer entries from peers), and forwarding of writes to the
//! main.
//!
//! Every node keeps a full replica of the rule entries. The main alone accepts operator writes
//! and its synced write is the commit point. Replicated entries go through the workflow's single
//! write path (`apply_replicated`), merging by last-write-wins on the revision
//! (`rules::merge`). Imports run one way: `handler` → `notices` → `pulls` ← `sync`; the handler
//! never calls the sync worker's pulls itself, it queues a request (`pulls`). Roll records
//! (issue 15) replicate the same way through their own notice, digest part and pull (`rolls`),
//! and so do history records (issue 26, `history`: digest part and pull, by union).

pub mod alarms;
pub mod error;
pub mod forward;
pub mod handler;
pub mod handoff;
pub mod history;
pub mod notices;
pub mod outbox;
pub mod peers;
pub mod pulls;
pub mod rolling;
pub mod staging;
pub mod sync;

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bus::client::{BusClient, DropSwitch};
use crate::cluster::bus::messages::{BusRequest, BusResponse, EntrySummary};
use crate::cluster::bus::BusError;
use crate::cluster::gossip::BusFailure;
use crate::cluster::gossip::membership::Membership;
use crate::cluster::gossip::view::{ClusterView, Member};
use crate::base::ids::NodeId;
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct ReplicationSettings {
    /// Deadline of one Suspend/Resume call to one peer.
    pub suspend_timeout: Duration,
    /// Deadline of a forwarded write.
    pub forward_timeout: Duration,
    /// How long a write waits for the next main when its main is unreachable or the view is
    /// split (`cluster.forward_wait`; zero: fail at once, as before). See `forward`.
    pub forward_wait: Duration,
    /// Deadline of one sync call (digest, fetch, notice).
    pub sync_timeout: Duration,
    /// Peers that must confirm holding a commit before the main answers (0: none).
    pub commit_replicas: usize,
    /// How long the main waits for those confirmations.
    pub replica_deadline: Duration,
    /// A node that has seen no live peer for this long after starting counts itself alone and
    /// caught up (see `sync::CatchUp`).
    pub alone_after: Duration,
    /// The largest entry content a commit notice carries; a larger entry is announced without
    /// it and the peer pulls it.
    pub notice_entry_limit: usize,
}

/// The default of [`ReplicationSettings::notice_entry_limit`]: 256 KiB, above every rule file of
/// the SkyWalking corpus, well under the bus message limit.
pub const DEFAULT_NOTICE_ENTRY_LIMIT: usize = 256 * 1024;

impl Default for ReplicationSettings {
    fn default() -> Self {
        ReplicationSettings {
            suspend_timeout: Duration::from_secs(2),
            forward_timeout: Duration::from_secs(30),
            forward_wait: default_forward_wait(),
            sync_timeout: Duration::from_secs(5),
            commit_replicas: 0,
            replica_deadline: Duration::from_secs(5),
            alone_after: Duration::from_secs(5),
            notice_entry_limit: DEFAULT_NOTICE_ENTRY_LIMIT,
        }
    }
}

pub fn default_forward_wait() -> Duration {
    Duration::from_secs(5)
}

/// How long a cluster-wide read waits for one peer's view.
pub const FAN_OUT_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks every live peer for `what`, all at once, over the bus: (peer, its JSON view or `None`
/// if it did not answer, answered something else, or sent JSON that does not parse).
pub async fn fan_out(cluster: &Arc<Cluster>, what: crate::cluster::bus::NodeView) -> Vec<(NodeId, Option<serde_json::Value>)> {
    let peers: Vec<Member> = cluster.view().live_peers().cloned().collect();
    let calls = peers.into_iter().map(|peer| {
        let cluster = cluster.clone();
        async move {
            let answer = match cluster.call(&peer, BusRequest::View { what }, FAN_OUT_TIMEOUT).await {
                Ok(BusResponse::View { json }) => serde_json::from_slice(&json).ok(),
                Ok(other) => {
                    tracing::debug!(peer = %peer.node_id, answer = other.name(), "unexpected answer to a view");
                    None
                }
                Err(e) => {
                    tracing::debug!(peer = %peer.node_id, error = %e, "view not fetched");
                    None
                }
            };
            (peer.node_id, answer)
        }
    });
    peers::futures_join(calls).await
}

/// This node's membership and bus, as the rest of the node sees them.
pub struct Cluster {
    pub membership: Arc<Membership>,
    pub bus: Arc<dyn BusClient>,
    pub drop_switch: Option<DropSwitch>,
    /// The gate in front of this node's bus handler: its counters are reported in
    /// `/cluster/status`.
    pub bus_gate: crate::cluster::bus::BusGate,
    pub settings: ReplicationSettings,
}

impl Cluster {
    pub fn view(&self) -> ClusterView {
        self.membership.view().borrow().clone()
    }

    pub fn self_id(&self) -> &NodeId {
        self.membership.self_id()
    }

    pub fn is_main(&self) -> bool {
        self.membership.is_main()
    }

    /// Calls `member` over the bus, and tells membership what the call met (evidence for the
    /// failure detector: see `cluster::main_select::judge_liveness`).
    pub async fn call(&self, member: &Member, request: BusRequest, timeout: Duration) -> Result<BusResponse, BusError> {
        let Some(addr) = member.bus_addr.as_deref() else {
            return Err(BusError::Unreachable { to: member.node_id.clone(), reason: "no bus address gossiped yet".into() });
        };
        let result = self.bus.call(&member.node_id, addr, request, timeout).await;
        if let Some(evidence) = liveness_evidence(&result) {
            self.membership.report_bus_call(&member.node_id, evidence);
        }
        result
    }
}

/// What a bus call's result says about the callee's liveness: an answer of any kind (even a
/// refusal to authenticate) means it is up; a refused or broken connection or a timeout is a
/// failure; the rest (fault injection, a bad address, an answer that proves nothing) says nothing.
fn liveness_evidence(result: &Result<BusResponse, BusError>) -> Option<Result<(), BusFailure>> {
    match result {
        Ok(_) | Err(BusError::Status { .. } | BusError::Unauthorized { .. } | BusError::Decode(_)) => Some(Ok(())),
        Err(BusError::Unreachable { .. }) => Some(Err(BusFailure::Refused)),
        Err(BusError::Transport { .. }) => Some(Err(BusFailure::Reset)),
        Err(BusError::Timeout { .. }) => Some(Err(BusFailure::TimedOut)),
        Err(
            BusError::Dropped { .. }
            | BusError::UnauthenticatedAnswer { .. }
            | BusError::BadAddress { .. }
            | BusError::Encode(_)
            | BusError::TooLarge { .. },
        ) => None,
    }
}

/// Every stored entry's summary (tombstones included), from the store's index: what a `Digest`
/// answers and what the gossiped digest is computed from.
pub fn summaries(store: &Store) -> Vec<EntrySummary> {
    store.with_entry_index(|index| index.values().map(summary_of).collect())
}

fn summary_of(meta: &crate::store::EntryMeta) -> EntrySummary {
    EntrySummary { key: meta.key.clone(), revision: meta.revision.clone(), content_hash: meta.content_hash.clone(), status: meta.status }
}

/// What the last-write-wins merge compares of an entry summary.
pub fn version_of(summary: &EntrySummary) -> crate::control::rules::merge::Version {
    crate::control::rules::merge::Version {
        revision: summary.revision.clone(),
        tombstone: summary.status == crate::store::EntryStatus::Deleted,
        content_hash: summary.content_hash.clone(),
    }
}

/// The live set gossip shows now: who owns entities and scrape targets (`base::owner`).
impl crate::base::owner::LiveNodes for Cluster {
    fn live(&self) -> crate::base::owner::LiveSet {
        let view = self.view();
        crate::base::owner::LiveSet::new(view.self_id.clone(), view.live_ids())
    }
}
