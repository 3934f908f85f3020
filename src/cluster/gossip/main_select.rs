//! Main selection and generation deduplication: pure functions over members.
//!
//! The main is the live node with the smallest id, compared **byte-wise as strings** (the order
//! of `NodeId`'s derived `Ord`), as in the reference implementation. Ids are not parsed: with
//! addresses as ids, "10.0.0.10:17128" sorts before "10.0.0.9:17128" because '1' < '9'. Every
//! node applies the same rule to the same gossip, so nodes that see the same live set agree
//! without a vote. There is no quorum: during a partition each side selects its own main.
//!
//! Who counts as live is gossip's call (chitchat's phi-accrual detector, `cluster.phi_threshold`),
//! with one exception decided by [`judge_liveness`]: a node whose bus connection was **refused or
//! reset** since its last heartbeat, and whose phi already passed the lower
//! `cluster.suspect_phi_threshold`, is treated as dead before gossip gives up on it. A bus timeout
//! is never such evidence: a slow node times out, a dead host's kernel refuses.

use std::collections::BTreeMap;

use crate::base::ids::NodeId;

use super::member::Member;

/// The smallest live node id, byte-wise. Members that are not live are ignored, so a whole view
/// can be passed. `None` only when nobody is live.
pub fn select_main(live: &[Member]) -> Option<NodeId> {
    live.iter()
        .filter(|member| member.live)
        .map(|member| &member.node_id)
        .min()
        .cloned()
}

/// Keeps one member per node id, sorted by id.
///
/// After a fast restart two generations of one node can both be in gossip, and both live for
/// about 0.3 s. The newest live generation is the node's current incarnation. If no generation
/// is live, the highest one is kept (as a dead member). Preferring a live generation over a
/// higher one that the failure detector has not confirmed yet keeps a restarting main from
/// flickering out of the live set for a gossip round.
pub fn dedup_generations(members: Vec<Member>) -> Vec<Member> {
    let mut current: BTreeMap<NodeId, Member> = BTreeMap::new();
    for member in members {
        match current.get(&member.node_id) {
            Some(kept) if !supersedes(&member, kept) => {}
            _ => {
                current.insert(member.node_id.clone(), member);
            }
        }
    }
    current.into_values().collect()
}

/// Whether `candidate` is a better incarnation of the node than `kept`: live beats dead, then
/// the higher generation wins.
fn supersedes(candidate: &Member, kept: &Member) -> bool {
    (candidate.live, candidate.generation) > (kept.live, kept.generation)
}

/// How a bus call to a node failed, as evidence about the node's liveness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusFailure {
    /// Nothing accepted the connection (or, in memory, the link is cut): the host answered that
    /// nothing listens there.
    Refused,
    /// A connection was made, then broke (reset or closed by the peer's host).
    Reset,
    /// No answer within the deadline: a slow node and a dead one look the same, so this never
    /// deposes anyone.
    TimedOut,
}

/// What this node knows about one member's liveness at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LivenessEvidence {
    /// chitchat's verdict: phi at or under `cluster.phi_threshold`.
    pub gossip_live: bool,
    /// Time since the member's last heartbeat over its mean heartbeat interval (chitchat's phi);
    /// `None` before two heartbeats were heard.
    pub phi: Option<f64>,
    /// The latest failed bus call to the member, if it came after the member's last heartbeat
    /// and no call has succeeded since.
    pub bus_failure: Option<BusFailure>,
}

/// A member's liveness for main selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Live,
    /// Live, but under suspicion (phi past the lower threshold, or a failed bus call): worth a
    /// probe over the bus to find out.
    Suspect,
    /// Dead: gossip says so, or a refused/reset connection confirms what a rising phi suggests.
    Dead,
}

/// The evidence rule: gossip decides, except that a refused or reset bus connection since the
/// last heartbeat, together with phi at or above `suspect_phi`, is enough to call a member dead.
/// A timeout alone never is; neither is a refusal while heartbeats still arrive (phi low).
pub fn judge_liveness(evidence: LivenessEvidence, suspect_phi: f64) -> Liveness {
    if !evidence.gossip_live {
        return Liveness::Dead;
    }
    let phi_high = evidence.phi.is_some_and(|phi| phi >= suspect_phi);
    match evidence.bus_failure {
        Some(BusFailure::Refused | BusFailure::Reset) if phi_high => Liveness::Dead,
        Some(_) => Liveness::Suspect,
        None if phi_high => Liveness::Suspect,
        None => Liveness::Live,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::gossip::keys::NodeFacts;

    #[test]
    fn the_evidence_rule_over_every_combination() {
        use BusFailure::*;
        use Liveness::*;
        let suspect_phi = 3.0;
        // (gossip_live, phi, bus failure) → liveness
        let table: &[(bool, Option<f64>, Option<BusFailure>, Liveness)] = &[
            // gossip says dead: dead, whatever else is known
            (false, None, None, Dead),
            (false, Some(0.5), None, Dead),
            (false, Some(9.0), Some(TimedOut), Dead),
            // heartbeats arriving: live, and a failed call only makes it suspect
            (true, None, None, Live),
            (true, Some(0.0), None, Live),
            (true, Some(2.99), None, Live),
            (true, Some(1.0), Some(Refused), Suspect),
            (true, Some(1.0), Some(Reset), Suspect),
            (true, Some(1.0), Some(TimedOut), Suspect),
            (true, None, Some(Refused), Suspect),
            // phi past the lower threshold: suspect, and dead with a refusal or reset
            (true, Some(3.0), None, Suspect),
            (true, Some(7.9), None, Suspect),
            (true, Some(3.0), Some(Refused), Dead),
            (true, Some(5.0), Some(Reset), Dead),
            // never on a timeout alone, however high phi is while gossip still says live
            (true, Some(3.0), Some(TimedOut), Suspect),
            (true, Some(7.9), Some(TimedOut), Suspect),
        ];
        for &(gossip_live, phi, bus_failure, expected) in table {
            let evidence = LivenessEvidence { gossip_live, phi, bus_failure };
            assert_eq!(judge_liveness(evidence, suspect_phi), expected, "{evidence:?}");
        }
    }

    #[test]
    fn a_refused_main_is_skipped_by_selection_and_a_slow_one_is_not() {
        let judged = |phi: f64, failure: Option<BusFailure>| {
            let evidence = LivenessEvidence { gossip_live: true, phi: Some(phi), bus_failure: failure };
            judge_liveness(evidence, 3.0) != Liveness::Dead
        };
        let view = |a_live: bool| [member("a", 1, a_live), member("b", 1, true)];
        // The main "a" refuses and has been silent for 4 mean intervals: "b" takes over.
        assert_eq!(select_main(&view(judged(4.0, Some(BusFailure::Refused)))), Some(NodeId("b".into())));
        // The main "a" is slow (its calls time out) but gossip still hears it: it stays main.
        assert_eq!(select_main(&view(judged(4.0, Some(BusFailure::TimedOut)))), Some(NodeId("a".into())));
        assert_eq!(select_main(&view(judged(0.5, Some(BusFailure::Refused)))), Some(NodeId("a".into())));
    }

    fn member(id: &str, generation: u64, live: bool) -> Member {
        Member::new(NodeId(id.into()), generation, live, NodeFacts::default())
    }

    fn ids(members: &[Member]) -> Vec<(&str, u64, bool)> {
        members
            .iter()
            .map(|m| (m.node_id.0.as_str(), m.generation, m.live))
            .collect()
    }

    /// Every ordering of `items` (Heap's algorithm; the inputs here are tiny).
    fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
        fn heap<T: Clone>(k: usize, items: &mut Vec<T>, out: &mut Vec<Vec<T>>) {
            if k <= 1 {
                out.push(items.clone());
                return;
            }
            for i in 0..k {
                heap(k - 1, items, out);
                let swap_with = if k.is_multiple_of(2) { i } else { 0 };
                items.swap(swap_with, k - 1);
            }
        }
        let mut out = Vec::new();
        heap(items.len(), &mut items.to_vec(), &mut out);
        out
    }

    #[test]
    fn the_main_is_the_byte_wise_smallest_live_id() {
        let view = [
            member("10.0.0.9:17128", 1, true),
            member("10.0.0.10:17128", 1, true),
        ];
        assert_eq!(
            select_main(&view),
            Some(NodeId("10.0.0.10:17128".into())),
            "'1' sorts before '9'"
        );
        let view = [
            member("b", 1, true),
            member("B", 1, true),
            member("a", 1, true),
        ];
        assert_eq!(
            select_main(&view),
            Some(NodeId("B".into())),
            "uppercase sorts before lowercase"
        );
        let view = [
            member("node-2", 1, true),
            member("node-10", 1, true),
            member("node-1", 1, false),
        ];
        assert_eq!(
            select_main(&view),
            Some(NodeId("node-10".into())),
            "the dead are skipped"
        );
        assert_eq!(select_main(&[]), None);
        assert_eq!(select_main(&[member("a", 1, false)]), None);
    }

    #[test]
    fn select_main_over_every_liveness_pattern_and_order() {
        let names = ["10.0.0.10", "10.0.0.9", "10.0.0.1", "node-a", "Node-b"];
        for pattern in 0u32..(1 << names.len()) {
            let members: Vec<Member> = names
                .iter()
                .enumerate()
                .map(|(i, name)| member(name, 7, pattern & (1 << i) != 0))
                .collect();
            let mut live_bytes: Vec<&[u8]> = members
                .iter()
                .filter(|m| m.live)
                .map(|m| m.node_id.0.as_bytes())
                .collect();
            live_bytes.sort();
            let expected = live_bytes
                .first()
                .map(|bytes| NodeId(String::from_utf8_lossy(bytes).into_owned()));
            for order in permutations(&members) {
                assert_eq!(select_main(&order), expected, "pattern {pattern:05b}");
            }
        }
    }

    #[test]
    fn dedup_keeps_the_newest_live_generation_else_the_newest() {
        // (generation, live) triples of one node: every liveness combination, every order.
        for pattern in 0u32..8 {
            let generations: Vec<Member> = [3u64, 1, 2]
                .iter()
                .enumerate()
                .map(|(i, g)| member("n", *g, pattern & (1 << i) != 0))
                .collect();
            let live_max = generations
                .iter()
                .filter(|m| m.live)
                .map(|m| m.generation)
                .max();
            let expected = match live_max {
                Some(generation) => (generation, true),
                None => (3, false),
            };
            for order in permutations(&generations) {
                let kept = dedup_generations(order);
                assert_eq!(
                    ids(&kept),
                    [("n", expected.0, expected.1)],
                    "pattern {pattern:03b}"
                );
            }
        }
    }

    #[test]
    fn dedup_sorts_by_id_and_keeps_distinct_nodes_apart() {
        let members = vec![
            member("c", 9, true),
            member("a", 2, true),
            member("b", 1, false),
            member("a", 3, true),
            member("c", 10, false),
            member("b", 2, false),
        ];
        assert_eq!(
            ids(&dedup_generations(members)),
            [("a", 3, true), ("b", 2, false), ("c", 9, true)]
        );
        assert!(dedup_generations(vec![]).is_empty());
    }

    #[test]
    fn a_fast_restart_never_moves_the_main() {
        // The main "a" restarts: old generation still live, new one seen but not yet confirmed,
        // then both live, then only the new one.
        let phases = [
            vec![
                member("a", 1, true),
                member("a", 2, false),
                member("b", 1, true),
            ],
            vec![
                member("a", 1, true),
                member("a", 2, true),
                member("b", 1, true),
            ],
            vec![
                member("a", 1, false),
                member("a", 2, true),
                member("b", 1, true),
            ],
        ];
        for members in phases {
            let deduped = dedup_generations(members);
            assert_eq!(deduped.len(), 2);
            assert_eq!(select_main(&deduped), Some(NodeId("a".into())));
        }
    }
}
