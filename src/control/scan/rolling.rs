//! What the scan needs of roll records: which files' rolling content a roll assigns this node
//! ([`assigned`], over `rolling::content_for`), and whether loading it over the content that
//! runs is filter-only ([`is_filter_only`], over `rules::classify`). Pure.

use crate::compiler::Compiled;
use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::control::rolling::{Assignment, RollContent, codec, content_for};
use crate::control::rules::classify::{self, ChangeKind};
use crate::control::runtime::LoadedRule;
use crate::store::rolling::StoredRoll;

/// The rolling content a roll assigns this node, with what the local apply needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub rolling: RollContent,
    /// The master, to classify the swap against when it is what runs.
    pub master: Option<RollContent>,
    /// The record's revision: the loaded content's origin.
    pub revision: Revision,
}

/// `Some` when `stored` is a roll that holds its file and gives `node` the rolling content.
/// An unreadable record is logged and gives nothing (the node runs the entry).
pub fn assigned(stored: &StoredRoll, node: &NodeId) -> Option<(RuleKey, Assigned)> {
    let record = match codec::decode(&stored.bytes) {
        Ok(record) => record,
        Err(e) => {
            tracing::warn!(rule = %stored.key, error = %e, "scan: unreadable roll record ignored");
            return None;
        }
    };
    if !record.state.holds_the_file() || record.key != stored.key {
        return None;
    }
    match content_for(&record, node) {
        Assignment::Rolling(rolling) => Some((
            stored.key.clone(),
            Assigned { rolling: rolling.clone(), master: record.master.clone(), revision: record.revision.clone() },
        )),
        Assignment::Master(_) | Assignment::NoMaster => None,
    }
}

/// Whether swapping `loaded` (what runs) for the rolling content is filter-only: only when the
/// master runs, compiled, and the classification against it says so. Anything unknown is
/// structural (the safe side: a local pause).
pub fn is_filter_only(loaded: Option<LoadedRule>, roll: &Assigned, compiled: &Compiled) -> bool {
    let (Some(loaded), Some(master)) = (loaded, roll.master.as_ref()) else { return false };
    if loaded.content_hash != master.hash {
        return false;
    }
    let prior = classify::Prior::Compiled { bytes: &master.bytes, compiled: loaded.compiled.as_ref() };
    classify::classify(prior, &roll.rolling.bytes, compiled).kind == ChangeKind::FilterOnly
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, RuleName};
    use crate::control::rolling::{HealthSettings, RollRecord, StartRoll};

    fn record(nodes: &[&str]) -> RollRecord {
        RollRecord::start(StartRoll {
            key: RuleKey::new(Catalog::Lal, RuleName::parse("a").expect("name")),
            master: Some(b"m".to_vec()),
            rolling: b"r".to_vec(),
            nodes: nodes.iter().map(|n| NodeId(n.to_string())).collect(),
            step_timeout_ms: 60_000,
            health: HealthSettings::default(),
            now_ms: 1,
            revision: Revision::zero(),
        })
        .expect("start")
    }

    fn stored(record: &RollRecord) -> StoredRoll {
        StoredRoll { key: record.key.clone(), bytes: codec::encode(record).expect("encode") }
    }

    #[test]
    fn only_a_held_roll_at_or_before_the_index_assigns_the_rolling_content() {
        let node = |n: &str| NodeId(n.to_string());
        let mut roll = record(&["a", "b"]);
        assert!(assigned(&stored(&roll), &node("a")).is_some());
        assert!(assigned(&stored(&roll), &node("b")).is_none(), "after the index: the master (the entry)");
        assert!(assigned(&stored(&roll), &node("joined-later")).is_none());
        roll.index = 1;
        assert!(assigned(&stored(&roll), &node("b")).is_some());
        let done = crate::control::rolling::force_commit(&roll, 5).expect("force");
        assert!(assigned(&stored(&done), &node("a")).is_none(), "a finished roll's outcome is the entry");
        let unreadable = StoredRoll { key: roll.key.clone(), bytes: vec![42] };
        assert!(assigned(&unreadable, &node("a")).is_none());
    }
}
