//! Last-write-wins between replicas of one entry: the one place that decides it.
//!
//! Every entry (tombstones included) carries a [`Revision`] that totally orders writes to its
//! key. Replicas converge by keeping, per key, the version with the highest revision. Three
//! questions are answered here, without IO, for the workflow (which applies replicated entries)
//! and for replication (which chooses what to pull and how to take a commit notice):
//!
//! - [`merge`]: does an incoming version replace the stored one?
//! - [`keys_to_pull`]: given this node's versions and a peer's digest, which keys to fetch?
//! - [`on_notice`]: a commit notice arrived (maybe carrying the entry): apply it, pull, or
//!   nothing?
//!
//! Equal revisions mean the same write, except in a corrupted history (two different writes
//! stamped alike, which the hybrid logical clock never issues). Even then every replica must
//! pick the same winner whatever the order of arrival, so the tie is broken on the content: a
//! tombstone beats a live entry, then the greater content hash wins.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::base::ids::{ContentHash, Revision, RuleKey};

/// What the merge needs of one version of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub revision: Revision,
    pub tombstone: bool,
    pub content_hash: ContentHash,
}

/// The answer of [`merge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Nothing is stored for the key: store the incoming version.
    Insert,
    /// The incoming version is the later write: it replaces the stored one.
    Replace,
    /// The stored version is the later write: the incoming one is dropped.
    KeepNewer,
    /// The same write is already stored.
    KeepSame,
}

impl Merge {
    /// Whether the incoming version is written.
    pub fn writes(self) -> bool {
        matches!(self, Merge::Insert | Merge::Replace)
    }
}

/// Whether `incoming` replaces `stored` (last write wins, ties broken as the module says).
pub fn merge(stored: Option<&Version>, incoming: &Version) -> Merge {
    let Some(stored) = stored else { return Merge::Insert };
    match incoming.revision.cmp(&stored.revision).then_with(|| tie_break(stored, incoming)) {
        Ordering::Greater => Merge::Replace,
        Ordering::Less => Merge::KeepNewer,
        Ordering::Equal => Merge::KeepSame,
    }
}

/// Orders two versions with equal revisions: a tombstone wins, then the greater content hash.
fn tie_break(stored: &Version, incoming: &Version) -> Ordering {
    incoming.tombstone.cmp(&stored.tombstone).then_with(|| incoming.content_hash.0.cmp(&stored.content_hash.0))
}

/// The keys whose version at the peer (`remote`, its digest) would replace this node's
/// (`local`): exactly what [`merge`] would write if they were fetched. In key order.
pub fn keys_to_pull<'a>(
    local: &BTreeMap<RuleKey, Version>,
    remote: impl IntoIterator<Item = (&'a RuleKey, &'a Version)>,
) -> Vec<RuleKey> {
    let mut keys: Vec<RuleKey> =
        remote.into_iter().filter(|(key, theirs)| merge(local.get(*key), theirs).writes()).map(|(key, _)| key.clone()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// What a node does with a commit notice for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticePlan {
    /// This node already holds the committed revision or a later one.
    AlreadyHeld,
    /// The notice carries the entry and this node holds exactly what preceded it: apply the
    /// carried entry; nothing else is missing.
    Apply,
    /// The notice carries the entry, but this node's version is not the one the notice says
    /// preceded the commit: apply the carried entry, then sync with the sender, since notices
    /// (for this key and perhaps others) were missed.
    ApplyThenSync,
    /// The notice does not carry the entry (too large for a notice): pull it from the sender.
    Pull,
}

/// Decides how to take a commit notice: `stored` is this node's revision for the key (None if
/// it holds nothing), `previous` what the notice says preceded the commit (None: nothing did),
/// `committed` the notice's revision, and `carried` whether the entry came with it.
pub fn on_notice(stored: Option<&Revision>, previous: Option<&Revision>, committed: &Revision, carried: bool) -> NoticePlan {
    if stored.is_some_and(|mine| mine >= committed) {
        return NoticePlan::AlreadyHeld;
    }
    match (carried, stored == previous) {
        (false, _) => NoticePlan::Pull,
        (true, true) => NoticePlan::Apply,
        (true, false) => NoticePlan::ApplyThenSync,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, NodeId, RuleName};

    fn rev(millis: u64, counter: u32, node: &str) -> Revision {
        Revision { millis, counter, node: NodeId(node.into()) }
    }

    fn live(revision: Revision, hash: &str) -> Version {
        Version { revision, tombstone: false, content_hash: ContentHash(hash.into()) }
    }

    fn dead(revision: Revision) -> Version {
        Version { revision, tombstone: true, content_hash: ContentHash::of(b"") }
    }

    fn key(name: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name"))
    }

    #[test]
    fn merge_table() {
        let r1 = rev(10, 0, "a");
        let cases: Vec<(&str, Option<Version>, Version, Merge)> = vec![
            ("nothing stored, live arrives", None, live(r1.clone(), "x"), Merge::Insert),
            ("nothing stored, tombstone arrives", None, dead(r1.clone()), Merge::Insert),
            ("later millis replaces", Some(live(r1.clone(), "x")), live(rev(11, 0, "a"), "y"), Merge::Replace),
            ("earlier millis is dropped", Some(live(r1.clone(), "x")), live(rev(9, 5, "z"), "y"), Merge::KeepNewer),
            ("same millis, later counter replaces", Some(live(r1.clone(), "x")), live(rev(10, 1, "a"), "y"), Merge::Replace),
            ("same millis, earlier counter is dropped", Some(live(rev(10, 2, "a"), "x")), live(rev(10, 1, "b"), "y"), Merge::KeepNewer),
            ("same stamp, greater node id replaces", Some(live(r1.clone(), "x")), live(rev(10, 0, "b"), "y"), Merge::Replace),
            ("same stamp, smaller node id is dropped", Some(live(rev(10, 0, "b"), "x")), live(r1.clone(), "y"), Merge::KeepNewer),
            ("later tombstone replaces a live entry", Some(live(r1.clone(), "x")), dead(rev(11, 0, "a")), Merge::Replace),
            ("earlier tombstone is dropped", Some(live(r1.clone(), "x")), dead(rev(9, 0, "a")), Merge::KeepNewer),
            ("later live entry replaces a tombstone", Some(dead(r1.clone())), live(rev(11, 0, "a"), "x"), Merge::Replace),
            ("earlier live entry is dropped after a tombstone", Some(dead(r1.clone())), live(rev(9, 0, "a"), "x"), Merge::KeepNewer),
            ("a later tombstone replaces a tombstone", Some(dead(r1.clone())), dead(rev(11, 0, "a")), Merge::Replace),
            ("the same live write is kept", Some(live(r1.clone(), "x")), live(r1.clone(), "x"), Merge::KeepSame),
            ("the same tombstone is kept", Some(dead(r1.clone())), dead(r1.clone()), Merge::KeepSame),
            ("equal revisions: a tombstone beats a live entry", Some(live(r1.clone(), "x")), dead(r1.clone()), Merge::Replace),
            ("equal revisions: a live entry loses to a tombstone", Some(dead(r1.clone())), live(r1.clone(), "x"), Merge::KeepNewer),
            ("equal revisions: the greater hash wins", Some(live(r1.clone(), "a1")), live(r1.clone(), "b2"), Merge::Replace),
            ("equal revisions: the smaller hash loses", Some(live(r1.clone(), "b2")), live(r1.clone(), "a1"), Merge::KeepNewer),
        ];
        for (what, stored, incoming, expected) in cases {
            assert_eq!(merge(stored.as_ref(), &incoming), expected, "{what}");
        }
    }

    #[test]
    fn merge_converges_whatever_the_order_of_arrival() {
        let r = rev(10, 0, "a");
        let versions =
            [live(r.clone(), "a1"), live(r.clone(), "b2"), dead(r.clone()), live(rev(9, 0, "z"), "c"), dead(rev(11, 0, "b"))];
        // Every permutation of arrival order leaves the same winner.
        let mut winners = std::collections::BTreeSet::new();
        let n = versions.len();
        let mut order: Vec<usize> = (0..n).collect();
        permutations(&mut order, 0, &mut |order| {
            let mut stored: Option<Version> = None;
            for &i in order {
                if merge(stored.as_ref(), &versions[i]).writes() {
                    stored = Some(versions[i].clone());
                }
            }
            winners.insert(format!("{:?}", stored));
        });
        assert_eq!(winners.len(), 1, "{winners:?}");
        assert!(winners.iter().all(|w| w.contains("millis: 11")), "{winners:?}");
    }

    fn permutations(items: &mut Vec<usize>, at: usize, visit: &mut impl FnMut(&[usize])) {
        if at == items.len() {
            visit(items);
            return;
        }
        for i in at..items.len() {
            items.swap(at, i);
            permutations(items, at + 1, visit);
            items.swap(at, i);
        }
    }

    #[test]
    fn keys_to_pull_are_exactly_the_keys_a_merge_would_write() {
        let local: BTreeMap<RuleKey, Version> = [
            (key("same"), live(rev(10, 0, "a"), "s")),
            (key("older-here"), live(rev(10, 0, "a"), "o")),
            (key("newer-here"), live(rev(20, 0, "a"), "n")),
            (key("deleted-there"), live(rev(10, 0, "a"), "d")),
            (key("deleted-here"), dead(rev(30, 0, "a"))),
        ]
        .into_iter()
        .collect();
        let remote: Vec<(RuleKey, Version)> = vec![
            (key("same"), live(rev(10, 0, "a"), "s")),
            (key("older-here"), live(rev(12, 0, "b"), "o2")),
            (key("newer-here"), live(rev(15, 0, "b"), "n2")),
            (key("deleted-there"), dead(rev(11, 0, "b"))),
            (key("deleted-here"), live(rev(29, 0, "b"), "x")),
            (key("only-there"), live(rev(1, 0, "b"), "t")),
        ];
        let pulled = keys_to_pull(&local, remote.iter().map(|(k, v)| (k, v)));
        assert_eq!(pulled, vec![key("deleted-there"), key("older-here"), key("only-there")]);
        assert!(keys_to_pull(&local, std::iter::empty()).is_empty());
    }

    #[test]
    fn notice_table() {
        let (r1, r2, r3) = (rev(10, 0, "m"), rev(20, 0, "m"), rev(30, 0, "m"));
        // (what, stored here, previous per the notice, committed, carried, plan)
        type Case<'a> = (&'a str, Option<&'a Revision>, Option<&'a Revision>, &'a Revision, bool, NoticePlan);
        let cases: Vec<Case> = vec![
            ("first write, nothing held, carried", None, None, &r1, true, NoticePlan::Apply),
            ("next write after the one held, carried", Some(&r1), Some(&r1), &r2, true, NoticePlan::Apply),
            ("a write was missed before this one", Some(&r1), Some(&r2), &r3, true, NoticePlan::ApplyThenSync),
            ("the key was never received", None, Some(&r2), &r3, true, NoticePlan::ApplyThenSync),
            ("holds a version the main never had", Some(&r1), None, &r3, true, NoticePlan::ApplyThenSync),
            ("not carried, no gap", Some(&r1), Some(&r1), &r2, false, NoticePlan::Pull),
            ("not carried, with a gap", None, Some(&r2), &r3, false, NoticePlan::Pull),
            ("already holds the commit", Some(&r2), Some(&r1), &r2, true, NoticePlan::AlreadyHeld),
            ("already holds a later write, carried", Some(&r3), Some(&r1), &r2, true, NoticePlan::AlreadyHeld),
            ("already holds a later write, not carried", Some(&r3), Some(&r1), &r2, false, NoticePlan::AlreadyHeld),
        ];
        for (what, stored, previous, committed, carried, expected) in cases {
            assert_eq!(on_notice(stored, previous, committed, carried), expected, "{what}");
        }
    }
}
