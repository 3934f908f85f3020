//! One node as this node sees it: its gossiped facts and whether the failure detector hears it.

use crate::base::ids::NodeId;

use super::keys::NodeFacts;

/// One node as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node_id: NodeId,
    /// The incarnation: a new value on every process start (unix time in ns by default).
    pub generation: u64,
    /// Whether the failure detector currently hears this node. Self is always live.
    pub live: bool,
    /// `host:port` of the node's admin API, if it published one.
    pub admin_addr: Option<String>,
    /// `host:port` of the node's cluster bus, if it published one.
    pub bus_addr: Option<String>,
    /// The node's digest of its stored entries (`keys::digest_of`), if published.
    pub digest: Option<String>,
    /// The node finished booting and serves; false until it says otherwise.
    pub ready: bool,
    /// When the node last finished a scan (unix ms), if it published it.
    pub last_scan_ms: Option<u64>,
    /// Live, but under suspicion: its phi passed `cluster.suspect_phi_threshold` or a bus call
    /// to it failed (see `main_select::judge_liveness`). A suspect main is probed over the bus.
    pub suspect: bool,
}

impl Member {
    /// A member built from its gossiped facts.
    pub fn new(node_id: NodeId, generation: u64, live: bool, facts: NodeFacts) -> Member {
        Member {
            node_id,
            generation,
            live,
            admin_addr: facts.admin_addr,
            bus_addr: facts.bus_addr,
            digest: facts.digest,
            ready: facts.ready,
            last_scan_ms: facts.last_scan_ms,
            suspect: false,
        }
    }
}
