//! Which history records retention compacts: a pure plan over one key's records.
//!
//! A key keeps its newest `max_revisions` records that are younger than `max_age`. The newest
//! record is always kept (it is what the entry holds, and a restore of the current state must
//! work), unless it is a delete older than `max_age`: then the file is gone and so is its
//! history. Every node computes the same plan from the same records, so compaction converges
//! with replication; a record pulled from a peer that the plan would drop is dropped in the
//! batch that would have stored it, so a compacted revision never comes back.

use std::time::Duration;

use crate::base::ids::Revision;

/// Default number of revisions kept per key.
pub const DEFAULT_MAX_REVISIONS: usize = 50;
/// Default age after which a revision is compacted (30 days).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// The retention of history records (`rules.history_max_revisions`, `rules.history_max_age`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_revisions: usize,
    pub max_age: Duration,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { max_revisions: DEFAULT_MAX_REVISIONS, max_age: DEFAULT_MAX_AGE }
    }
}

/// What the plan reads of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub revision: Revision,
    /// When the revision was committed (ms since the epoch).
    pub time_ms: u64,
    /// The revision deleted the file (a tombstone, a revert to bundled).
    pub deleted: bool,
}

/// The revisions of one key's `records` (any order) that retention compacts at `now_ms`, oldest
/// first.
pub fn plan(records: &[Kept], now_ms: u64, retention: Retention) -> Vec<Revision> {
    let mut newest_first: Vec<&Kept> = records.iter().collect();
    newest_first.sort_by(|a, b| b.revision.cmp(&a.revision));
    let max_age_ms = u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX);
    let expired = |record: &Kept| now_ms.saturating_sub(record.time_ms) > max_age_ms;
    let mut compacted: Vec<Revision> = newest_first
        .iter()
        .enumerate()
        .filter(|(position, record)| match position {
            0 => record.deleted && expired(record),
            _ => *position >= retention.max_revisions.max(1) || expired(record),
        })
        .map(|(_, record)| record.revision.clone())
        .collect();
    compacted.reverse();
    compacted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::NodeId;

    const DAY: u64 = 24 * 3600 * 1000;

    fn rev(millis: u64) -> Revision {
        Revision { millis, counter: 0, node: NodeId("m".into()) }
    }
    fn kept(millis: u64, deleted: bool) -> Kept {
        Kept { revision: rev(millis), time_ms: millis, deleted }
    }
    fn policy(max_revisions: usize, days: u64) -> Retention {
        Retention { max_revisions, max_age: Duration::from_millis(days * DAY) }
    }

    #[test]
    fn count_keeps_the_newest_n_whatever_the_input_order() {
        let records = [kept(3, false), kept(1, false), kept(5, false), kept(2, false), kept(4, false)];
        assert_eq!(plan(&records, 10, policy(3, 30)), vec![rev(1), rev(2)]);
        assert!(plan(&records, 10, policy(5, 30)).is_empty());
        assert!(plan(&[], 10, policy(1, 1)).is_empty());
    }

    #[test]
    fn age_drops_old_revisions_but_never_the_current_one() {
        let now = 100 * DAY;
        let records = [kept(10 * DAY, false), kept(50 * DAY, false), kept(95 * DAY, false)];
        assert_eq!(plan(&records, now, policy(50, 30)), vec![rev(10 * DAY), rev(50 * DAY)]);
        // Everything is old: the newest stays, it is what the file holds.
        let old = [kept(DAY, false), kept(2 * DAY, false)];
        assert_eq!(plan(&old, now, policy(50, 30)), vec![rev(DAY)]);
    }

    #[test]
    fn a_delete_older_than_the_age_takes_the_whole_history_with_it() {
        let now = 100 * DAY;
        let records = [kept(DAY, false), kept(2 * DAY, true)];
        assert_eq!(plan(&records, now, policy(50, 30)), vec![rev(DAY), rev(2 * DAY)]);
        // A recent delete is kept, with what it deleted while that is young enough.
        let recent = [kept(95 * DAY, false), kept(99 * DAY, true)];
        assert!(plan(&recent, now, policy(50, 30)).is_empty());
    }

    #[test]
    fn a_count_of_zero_still_keeps_the_current_revision() {
        assert_eq!(plan(&[kept(1, false), kept(2, false)], 3, policy(0, 30)), vec![rev(1)]);
    }

    #[test]
    fn the_plan_is_the_same_on_every_node_holding_the_same_records() {
        let a = [kept(1, false), kept(2, false), kept(3, false)];
        let b = [kept(3, false), kept(2, false), kept(1, false)];
        assert_eq!(plan(&a, 5, policy(2, 30)), plan(&b, 5, policy(2, 30)));
    }
}
