//! The scan plan: stored entries × this node's runtime state × bundled files → actions.
//!
//! Pure, so every convergence case is a table test. Per key:
//! - ACTIVE entry, loaded with the same hash from a runtime source → nothing, or `SelfHeal`
//!   when the file has been PEER-suspended past the threshold (the main died mid-apply);
//! - ACTIVE entry otherwise → `LoadEntry` (this also catches up a missed pause and resumes a
//!   peer that a successful apply left paused);
//! - INACTIVE entry, still loaded → `Unload`;
//! - tombstone or no entry → the bundled file if there is one (`LoadBundled` unless it is
//!   already what runs), else `Unload` whatever is still loaded;
//! - tombstones past their retention → `PurgeTombstone`;
//! - a file a roll holds whose rolling content this node runs (`rolling::content_for` gave it
//!   the rolling content; `rolling` in the input) → `LoadRolling` unless that content already
//!   runs, whatever the entry says; on the master side of a roll the entry (untouched by the
//!   roll) is the master, so the rows above apply.
//!
//! Entries of agent catalogs are desired state for agents, not rules: the plan never loads
//! them, and only purges their tombstones.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::base::ids::{ContentHash, RuleKey};
use crate::control::runtime::LoaderKind;
use crate::store::{EntryMeta, EntryStatus};

/// What the plan needs to know about one file's runtime state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalView {
    pub loaded: Option<(ContentHash, LoaderKind)>,
    pub peer_suspended_for: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    LoadEntry(RuleKey),
    LoadBundled(RuleKey),
    Unload(RuleKey),
    SelfHeal(RuleKey),
    PurgeTombstone(RuleKey),
    /// Load the rolling content of a roll that assigns it to this node.
    LoadRolling(RuleKey),
}

pub struct PlanInput<'a> {
    pub stored: &'a [EntryMeta],
    pub local: &'a BTreeMap<RuleKey, LocalView>,
    pub bundled: &'a BTreeMap<RuleKey, ContentHash>,
    pub now_ms: u64,
    pub self_heal_after: Duration,
    pub tombstone_retention: Duration,
    /// The files this node runs the rolling content of (a roll holds them), with that
    /// content's hash.
    pub rolling: &'a BTreeMap<RuleKey, ContentHash>,
}

pub fn plan(input: &PlanInput<'_>) -> Vec<Action> {
    let mut actions = Vec::new();
    let stored: BTreeMap<&RuleKey, &EntryMeta> = input.stored.iter().map(|e| (&e.key, e)).collect();
    let keys: BTreeSet<&RuleKey> = stored
        .keys()
        .copied()
        .chain(input.local.keys())
        .chain(input.bundled.keys())
        .chain(input.rolling.keys())
        .collect();
    for key in keys {
        if !key.catalog.is_rule() {
            // Agent catalogs are never loaded or compiled; only their tombstones age out.
            if let Some(entry) = stored.get(key)
                && entry.status == EntryStatus::Deleted
                && input.now_ms.saturating_sub(entry.update_time_ms) >= input.tombstone_retention.as_millis() as u64
            {
                actions.push(Action::PurgeTombstone(key.clone()));
            }
            continue;
        }
        let local = input.local.get(key);
        let loaded = local.and_then(|l| l.loaded.as_ref());
        if let Some(rolling) = input.rolling.get(key) {
            let current = loaded.is_some_and(|(hash, kind)| hash == rolling && *kind == LoaderKind::Runtime);
            if !current {
                actions.push(Action::LoadRolling(key.clone()));
            } else if local.and_then(|l| l.peer_suspended_for).is_some_and(|age| age >= input.self_heal_after) {
                actions.push(Action::SelfHeal(key.clone()));
            }
            continue;
        }
        match stored.get(key).map(|e| (e.status, *e)) {
            Some((EntryStatus::Active, entry)) => {
                let current = loaded.is_some_and(|(hash, kind)| *hash == entry.content_hash && *kind == LoaderKind::Runtime);
                if !current {
                    actions.push(Action::LoadEntry(key.clone()));
                } else if local
                    .and_then(|l| l.peer_suspended_for)
                    .is_some_and(|age| age >= input.self_heal_after)
                {
                    actions.push(Action::SelfHeal(key.clone()));
                }
            }
            Some((EntryStatus::Inactive, _)) => {
                if loaded.is_some() {
                    actions.push(Action::Unload(key.clone()));
                }
            }
            Some((EntryStatus::Deleted, _)) | None => {
                if let Some((EntryStatus::Deleted, entry)) = stored.get(key).map(|e| (e.status, *e))
                    && input.now_ms.saturating_sub(entry.update_time_ms) >= input.tombstone_retention.as_millis() as u64
                {
                    actions.push(Action::PurgeTombstone(key.clone()));
                }
                match (input.bundled.get(key), loaded) {
                    (Some(hash), Some((loaded_hash, LoaderKind::Bundled))) if loaded_hash == hash => {}
                    (Some(_), _) => actions.push(Action::LoadBundled(key.clone())),
                    (None, Some(_)) => actions.push(Action::Unload(key.clone())),
                    (None, None) => {}
                }
            }
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, NodeId, Revision, RuleName};

    fn key(n: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(n).expect("name"))
    }
    fn h(s: &str) -> ContentHash {
        ContentHash(s.to_string())
    }
    fn stored(n: &str, status: EntryStatus, hash: &str, time: u64) -> EntryMeta {
        EntryMeta {
            key: key(n),
            status,
            update_time_ms: time,
            content_hash: h(hash),
            revision: Revision { millis: time, counter: 0, node: NodeId("n".into()) },
        }
    }
    fn local(hash: &str, kind: LoaderKind, peer_age_s: Option<u64>) -> LocalView {
        LocalView { loaded: Some((h(hash), kind)), peer_suspended_for: peer_age_s.map(Duration::from_secs) }
    }

    fn run(stored: &[EntryMeta], local: &[(&str, LocalView)], bundled: &[(&str, &str)]) -> Vec<Action> {
        run_rolling(stored, local, bundled, &[])
    }

    fn run_rolling(
        stored: &[EntryMeta],
        local: &[(&str, LocalView)],
        bundled: &[(&str, &str)],
        rolling: &[(&str, &str)],
    ) -> Vec<Action> {
        let local: BTreeMap<_, _> = local.iter().map(|(n, v)| (key(n), v.clone())).collect();
        let bundled: BTreeMap<_, _> = bundled.iter().map(|(n, hash)| (key(n), h(hash))).collect();
        let rolling: BTreeMap<_, _> = rolling.iter().map(|(n, hash)| (key(n), h(hash))).collect();
        plan(&PlanInput {
            stored,
            local: &local,
            bundled: &bundled,
            now_ms: 100_000,
            self_heal_after: Duration::from_secs(60),
            tombstone_retention: Duration::from_secs(50),
            rolling: &rolling,
        })
    }

    /// (stored, loaded, bundled, rolling assignment) → actions: the rolling content wins over
    /// the entry while a roll gives it to this node, and only a node that does not run it yet
    /// loads it.
    #[test]
    fn a_roll_assigning_the_rolling_content_overrides_the_entry() {
        let active = [stored("a", EntryStatus::Active, "master", 1)];
        let inactive = [stored("a", EntryStatus::Inactive, "master", 1)];
        let rt = |hash| [("a", local(hash, LoaderKind::Runtime, None))];
        let cases: Vec<(&str, Vec<Action>, Vec<Action>)> = vec![
            ("master runs", run_rolling(&active, &rt("master"), &[], &[("a", "new")]), vec![Action::LoadRolling(key("a"))]),
            ("already rolled", run_rolling(&active, &rt("new"), &[], &[("a", "new")]), vec![]),
            ("nothing runs", run_rolling(&[], &[], &[], &[("a", "new")]), vec![Action::LoadRolling(key("a"))]),
            ("over inactive", run_rolling(&inactive, &[], &[], &[("a", "new")]), vec![Action::LoadRolling(key("a"))]),
            (
                "bundled runs with the same bytes",
                run_rolling(&[], &[("a", local("new", LoaderKind::Bundled, None))], &[("a", "b")], &[("a", "new")]),
                vec![Action::LoadRolling(key("a"))],
            ),
            (
                "stuck pause",
                run_rolling(&active, &[("a", local("new", LoaderKind::Runtime, Some(61)))], &[], &[("a", "new")]),
                vec![Action::SelfHeal(key("a"))],
            ),
            // Not assigned (the master side, or the roll finished): the entry rules.
            ("master side", run_rolling(&active, &rt("new"), &[], &[]), vec![Action::LoadEntry(key("a"))]),
        ];
        for (what, got, want) in cases {
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn a_converged_node_has_nothing_to_do() {
        let s = [stored("a", EntryStatus::Active, "h1", 1), stored("b", EntryStatus::Inactive, "h2", 1)];
        let l = [("a", local("h1", LoaderKind::Runtime, None)), ("c", local("hc", LoaderKind::Bundled, None))];
        assert_eq!(run(&s, &l, &[("c", "hc")]), vec![]);
    }

    #[test]
    fn new_or_changed_active_entries_load() {
        let s = [stored("a", EntryStatus::Active, "new", 1), stored("b", EntryStatus::Active, "h", 1)];
        let l = [("a", local("old", LoaderKind::Runtime, None))];
        assert_eq!(run(&s, &l, &[]), vec![Action::LoadEntry(key("a")), Action::LoadEntry(key("b"))]);
    }

    #[test]
    fn an_active_override_of_a_bundled_file_loads_even_with_equal_bytes() {
        let s = [stored("a", EntryStatus::Active, "same", 1)];
        let l = [("a", local("same", LoaderKind::Bundled, None))];
        assert_eq!(run(&s, &l, &[("a", "same")]), vec![Action::LoadEntry(key("a"))]);
    }

    #[test]
    fn a_missed_pause_is_caught_up_by_loading_the_new_content() {
        let s = [stored("a", EntryStatus::Active, "new", 1)];
        let l = [("a", local("old", LoaderKind::Runtime, Some(5)))];
        assert_eq!(run(&s, &l, &[]), vec![Action::LoadEntry(key("a"))]);
    }

    #[test]
    fn self_heal_fires_only_past_the_threshold_with_an_unmoved_entry() {
        let s = [stored("a", EntryStatus::Active, "h", 1)];
        assert_eq!(run(&s, &[("a", local("h", LoaderKind::Runtime, Some(61)))], &[]), vec![Action::SelfHeal(key("a"))]);
        assert_eq!(run(&s, &[("a", local("h", LoaderKind::Runtime, Some(59)))], &[]), vec![]);
        // The entry moved: load instead of a blind resume.
        assert_eq!(
            run(&s, &[("a", local("other", LoaderKind::Runtime, Some(61)))], &[]),
            vec![Action::LoadEntry(key("a"))]
        );
        // INACTIVE entries never self-heal; they unload.
        let s = [stored("a", EntryStatus::Inactive, "h", 1)];
        assert_eq!(run(&s, &[("a", local("h", LoaderKind::Runtime, Some(61)))], &[]), vec![Action::Unload(key("a"))]);
    }

    #[test]
    fn inactive_entries_unload_what_still_runs() {
        let s = [stored("a", EntryStatus::Inactive, "h", 1)];
        assert_eq!(run(&s, &[("a", local("h", LoaderKind::Bundled, None))], &[("a", "h")]), vec![Action::Unload(key("a"))]);
        assert_eq!(run(&s, &[], &[("a", "h")]), vec![]);
    }

    #[test]
    fn gone_entries_fall_back_to_bundled_or_unload() {
        let l = [("a", local("rt", LoaderKind::Runtime, None)), ("b", local("rt", LoaderKind::Runtime, None))];
        assert_eq!(run(&[], &l, &[("a", "bundled")]), vec![Action::LoadBundled(key("a")), Action::Unload(key("b"))]);
        // Static rehydrate: a bundled file that runs nowhere is loaded.
        assert_eq!(run(&[], &[], &[("c", "x")]), vec![Action::LoadBundled(key("c"))]);
    }

    #[test]
    fn tombstones_are_purged_after_retention_only() {
        let old = stored("a", EntryStatus::Deleted, "", 10_000);
        let fresh = stored("b", EntryStatus::Deleted, "", 99_000);
        assert_eq!(run(&[old, fresh], &[], &[]), vec![Action::PurgeTombstone(key("a"))]);
    }

    #[test]
    fn agent_catalog_entries_are_never_loaded_only_purged() {
        let agent = |status, time| EntryMeta {
            key: RuleKey::new(Catalog::AgentGroups, RuleName::parse("web").expect("name")),
            ..stored("x", status, "a", time)
        };
        let live = [agent(EntryStatus::Active, 1)];
        let none = BTreeMap::new();
        let input = PlanInput {
            stored: &live,
            local: &none,
            bundled: &BTreeMap::new(),
            now_ms: 10,
            self_heal_after: Duration::from_secs(60),
            tombstone_retention: Duration::from_millis(5),
            rolling: &BTreeMap::new(),
        };
        assert!(plan(&input).is_empty());
        let dead = [agent(EntryStatus::Deleted, 1)];
        let input = PlanInput { stored: &dead, ..input };
        assert_eq!(plan(&input), vec![Action::PurgeTombstone(dead[0].key.clone())]);
    }
}
