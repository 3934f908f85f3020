//! Who owns a key among the live nodes: rendezvous (highest-random-weight) hashing. Pure.
//!
//! Every node computes the same owner from the same live set, so no coordination is needed: a
//! key (an entity, a scrape target) goes to the live node whose `weight(node, key)` is highest.
//! When a node joins, only the keys it now wins move (about 1/(N+1) of them, where SkyWalking's
//! `hash % N` remaps about N/(N+1)); when a node leaves, only its own keys move, each to the node
//! with the next-highest weight.
//!
//! The weight is FNV-1a (64-bit) over the node id, a separator and the key, followed by the
//! splitmix64 finalizer: fixed by this file, the same on every platform and release, so nodes of
//! different builds agree. It is not a cryptographic hash; nothing here defends against a client
//! choosing keys to load one node.

use crate::base::ids::NodeId;

/// The live nodes as one node sees them, self included, sorted and deduplicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSet {
    self_id: NodeId,
    nodes: Vec<NodeId>,
}

impl LiveSet {
    /// `nodes` are the live ids; self is added when missing (a running node is live to itself).
    pub fn new(self_id: NodeId, mut nodes: Vec<NodeId>) -> LiveSet {
        nodes.push(self_id.clone());
        nodes.sort();
        nodes.dedup();
        LiveSet { self_id, nodes }
    }

    /// A node alone.
    pub fn alone(self_id: NodeId) -> LiveSet {
        LiveSet::new(self_id, Vec::new())
    }

    pub fn self_id(&self) -> &NodeId {
        &self.self_id
    }

    /// The live ids, in id order.
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// Whether this node is alone (it then owns everything).
    pub fn is_alone(&self) -> bool {
        self.nodes.len() == 1
    }

    /// The owner of `key`.
    pub fn owner(&self, key: &[u8]) -> &NodeId {
        owner(key, &self.nodes).unwrap_or(&self.self_id)
    }

    /// Whether this node owns `key`.
    pub fn owns(&self, key: &[u8]) -> bool {
        self.is_alone() || self.owner(key) == &self.self_id
    }
}

/// The owner of `key` among `nodes`: the node of the highest weight (ties, which need equal
/// 64-bit hashes, go to the smaller id). None when `nodes` is empty.
pub fn owner<'a>(key: &[u8], nodes: &'a [NodeId]) -> Option<&'a NodeId> {
    nodes.iter().map(|node| (weight(node, key), node)).max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1))).map(|(_, node)| node)
}

/// The weight of `node` for `key`.
pub fn weight(node: &NodeId, key: &[u8]) -> u64 {
    let mut hash = FNV_OFFSET;
    for byte in node.0.as_bytes().iter().chain(&[0xff]).chain(key) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    splitmix64(hash)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the data plane asks of the cluster: the live set now. The node wires it to gossip; a
/// lone node and tests use [`Alone`] or [`Fixed`].
pub trait LiveNodes: Send + Sync + 'static {
    fn live(&self) -> LiveSet;
}

/// A node without a cluster: it owns everything.
pub struct Alone(pub NodeId);

impl LiveNodes for Alone {
    fn live(&self) -> LiveSet {
        LiveSet::alone(self.0.clone())
    }
}

/// A live set set by hand (tests and the in-memory cluster twin).
pub struct Fixed(pub std::sync::RwLock<LiveSet>);

impl Fixed {
    pub fn new(set: LiveSet) -> Fixed {
        Fixed(std::sync::RwLock::new(set))
    }

    pub fn set(&self, set: LiveSet) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = set;
    }
}

impl LiveNodes for Fixed {
    fn live(&self) -> LiveSet {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<NodeId> {
        names.iter().map(|n| NodeId(n.to_string())).collect()
    }

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("service-{i}").into_bytes()).collect()
    }

    #[test]
    fn the_weight_is_fixed_by_this_file() {
        // Nodes of different builds must agree: these numbers may never change.
        assert_eq!(weight(&NodeId("n1".into()), b"k"), PINNED[0]);
        assert_eq!(weight(&NodeId("10.0.0.2:17080".into()), b"svc-a"), PINNED[1]);
        assert_eq!(weight(&NodeId(String::new()), b""), PINNED[2]);
    }

    // Computed independently (a Python transcription of `weight`).
    const PINNED: [u64; 3] = [2_851_532_862_758_819_176, 15_930_186_327_818_964_820, 5_705_415_379_283_624_141];

    #[test]
    fn every_view_of_the_same_set_agrees_and_self_owns_when_alone() {
        let a = LiveSet::new(NodeId("b".into()), ids(&["c", "a"]));
        let b = LiveSet::new(NodeId("a".into()), ids(&["a", "b", "c", "c"]));
        assert_eq!(a.nodes(), b.nodes());
        for key in keys(100) {
            assert_eq!(a.owner(&key), b.owner(&key));
            assert_eq!(a.owns(&key), a.owner(&key) == a.self_id());
        }
        let alone = LiveSet::alone(NodeId("z".into()));
        assert!(keys(20).iter().all(|k| alone.owns(k)));
        assert_eq!(owner(b"k", &[]), None);
    }

    #[test]
    fn keys_spread_and_a_join_moves_only_what_the_new_node_wins() {
        let three = ids(&["n1", "n2", "n3"]);
        let four = ids(&["n1", "n2", "n3", "n4"]);
        let keys = keys(3000);
        let mut per_node = std::collections::BTreeMap::new();
        for key in &keys {
            *per_node.entry(owner(key, &three).cloned()).or_insert(0) += 1;
        }
        for (node, count) in &per_node {
            assert!((800..1200).contains(count), "{node:?} owns {count} of 3000");
        }
        let mut moved = 0;
        for key in &keys {
            let before = owner(key, &three);
            let after = owner(key, &four);
            if before != after {
                moved += 1;
                assert_eq!(after, Some(&four[3]), "a key moved between old nodes");
            }
        }
        assert!((600..900).contains(&moved), "{moved} of 3000 moved; about a quarter should");
        // A leave moves only the leaver's keys.
        let two = ids(&["n1", "n3"]);
        for key in &keys {
            if owner(key, &three) != Some(&three[1]) {
                assert_eq!(owner(key, &two), owner(key, &three));
            }
        }
    }
}
