//! What the rest of hotrule sees of the cluster: a [`ClusterView`] of [`Member`]s and the main.
//!
//! A view is a plain value, rebuilt from gossip state and published on a `watch` channel by
//! `membership`. Building it is pure: generations are deduplicated and the main selected here,
//! with the functions of `main_select`, so a test can build any view by hand.

use crate::base::ids::NodeId;

use super::keys::NodeFacts;
use super::main_select::{dedup_generations, select_main};

pub use super::member::Member;


/// The cluster as one node sees it at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub self_id: NodeId,
    /// The smallest live node id (see `main_select`); self is always live, so a lone node is
    /// its own main.
    pub main: Option<NodeId>,
    /// One entry per node id (the current generation), self included, dead members listed with
    /// `live = false` until gossip forgets them. Sorted by node id.
    pub members: Vec<Member>,
}

impl ClusterView {
    /// Deduplicates generations, makes sure self is present and live, and selects the main.
    pub fn new(self_id: NodeId, members: Vec<Member>) -> ClusterView {
        let mut members = dedup_generations(members);
        match members.iter_mut().find(|member| member.node_id == self_id) {
            // This process runs, whatever gossip says about it.
            Some(me) => me.live = true,
            None => {
                let me = Member::new(self_id.clone(), 0, true, NodeFacts::default());
                let at = members.partition_point(|member| member.node_id < self_id);
                members.insert(at, me);
            }
        }
        let main = select_main(&members);
        ClusterView {
            self_id,
            main,
            members,
        }
    }

    pub fn is_main(&self) -> bool {
        self.main.as_ref() == Some(&self.self_id)
    }

    pub fn member(&self, node_id: &NodeId) -> Option<&Member> {
        self.members
            .iter()
            .find(|member| &member.node_id == node_id)
    }

    /// This node's own entry.
    pub fn me(&self) -> Option<&Member> {
        self.member(&self.self_id)
    }

    /// Every live member but self: the peers to broadcast to.
    pub fn live_peers(&self) -> impl Iterator<Item = &Member> {
        self.members
            .iter()
            .filter(|member| member.live && member.node_id != self.self_id)
    }

    /// The ids of every live member, self included, in id order.
    pub fn live_ids(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .filter(|member| member.live)
            .map(|member| member.node_id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, generation: u64, live: bool) -> Member {
        Member::new(NodeId(id.into()), generation, live, NodeFacts::default())
    }

    #[test]
    fn a_lone_node_is_its_own_main_even_if_gossip_forgot_it() {
        let view = ClusterView::new(NodeId("b".into()), vec![]);
        assert!(view.is_main());
        assert_eq!(view.live_ids(), [NodeId("b".into())]);
        let view = ClusterView::new(
            NodeId("b".into()),
            vec![member("a", 1, false), member("c", 1, true)],
        );
        assert_eq!(
            view.members
                .iter()
                .map(|m| m.node_id.0.as_str())
                .collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert!(view.is_main());
    }

    #[test]
    fn self_counts_as_live_and_peers_exclude_self_and_the_dead() {
        let view = ClusterView::new(
            NodeId("b".into()),
            vec![
                member("c", 1, true),
                member("b", 5, false),
                member("a", 1, false),
                member("d", 1, true),
            ],
        );
        assert_eq!(view.main, Some(NodeId("b".into())));
        assert_eq!(view.me().map(|m| (m.generation, m.live)), Some((5, true)));
        let peers: Vec<_> = view.live_peers().map(|m| m.node_id.0.as_str()).collect();
        assert_eq!(peers, ["c", "d"]);
        assert_eq!(
            view.member(&NodeId("a".into())).map(|m| m.live),
            Some(false)
        );
    }
}
