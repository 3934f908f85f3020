//! The node's health report for a file it rolls, assembled purely from plain inputs: what the
//! runtime holds for the file ([`FileFacts`]), dispatch's counters now ([`Counters`]), and the
//! counters when the current content started running ([`Baseline`]).
//!
//! The baseline is taken the first time the publisher sees a loaded content (hash and load
//! time); the publisher wakes on every runtime change, so that is moments after the apply. The
//! report's span starts at the baseline, so its counters cover exactly `running_since_ms` to
//! `reported_ms`. Counters that went backwards (dispatch forgot the file) restart the baseline,
//! and with it the health window: the report never claims a span it did not watch.
//!
//! Which files a node reports on ([`reported_files`]): those whose roll holds the file (in
//! progress or stopped) and list this node at or before the index, i.e. where it was asked to
//! run the rolling content.

use crate::base::ids::{ContentHash, NodeId, RuleKey};
use crate::control::rolling::{HealthReport, RollRecord};

/// What the runtime holds for one file on this node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFacts {
    /// The loaded content's hash and when it was installed (ms); `None` when nothing is loaded.
    pub loaded: Option<(ContentHash, u64)>,
    /// The last apply error ("" when the last apply succeeded).
    pub apply_error: String,
    /// Loaded and not suspended (by itself, a peer, or both).
    pub gate_running: bool,
}

/// The dispatch counters a report uses. For a MAL file: evaluation errors, samples read, values
/// written. For a LAL file: rule errors, logs in, and what its rules produced (kept logs and
/// samples emitted for the log-MAL files): a LAL file that takes logs and neither keeps one nor
/// emits a sample fails the `values` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub errors: u64,
    pub samples_in: u64,
    pub values_out: u64,
}

impl Counters {
    /// Every counter is at least `earlier`'s.
    fn covers(&self, earlier: &Counters) -> bool {
        self.errors >= earlier.errors && self.samples_in >= earlier.samples_in && self.values_out >= earlier.values_out
    }
}

/// The counters when the loaded content started being watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    pub hash: ContentHash,
    pub loaded_at_ms: u64,
    /// When the baseline was taken: the start of the report's span.
    pub since_ms: u64,
    pub counters: Counters,
}

/// The baseline to use now: `previous` while the same content (hash and load time) runs and
/// the counters only grew; a fresh one at `now_ms` otherwise; none when nothing is loaded.
pub fn next_baseline(previous: Option<&Baseline>, facts: &FileFacts, now: Counters, now_ms: u64) -> Option<Baseline> {
    let (hash, loaded_at_ms) = facts.loaded.clone()?;
    match previous {
        Some(kept) if kept.hash == hash && kept.loaded_at_ms == loaded_at_ms && now.covers(&kept.counters) => {
            Some(kept.clone())
        }
        _ => Some(Baseline { hash, loaded_at_ms, since_ms: now_ms.max(loaded_at_ms), counters: now }),
    }
}

/// The report of one file at `now_ms`.
pub fn assemble(facts: &FileFacts, baseline: Option<&Baseline>, now: Counters, now_ms: u64) -> HealthReport {
    let (since_ms, base) = match baseline {
        Some(b) => (b.since_ms, b.counters),
        // Nothing loaded: no span, no traffic of the content.
        None => (now_ms, now),
    };
    HealthReport {
        running_hash: facts.loaded.as_ref().map(|(hash, _)| hash.clone()),
        running_since_ms: since_ms,
        reported_ms: now_ms,
        apply_error: (!facts.apply_error.is_empty()).then(|| facts.apply_error.clone()),
        dispatch_running: facts.gate_running,
        eval_errors_rise: now.errors.saturating_sub(base.errors),
        samples_in: now.samples_in.saturating_sub(base.samples_in),
        values_out: now.values_out.saturating_sub(base.values_out),
    }
}

/// The files `node` reports on: rolls that hold their file and list it at or before the index.
pub fn reported_files<'a>(records: &'a [RollRecord], node: &NodeId) -> Vec<&'a RuleKey> {
    records
        .iter()
        .filter(|r| r.state.holds_the_file())
        .filter(|r| r.position_of(node).is_some_and(|p| p <= r.index as usize))
        .map(|r| &r.key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, Revision, RuleName};
    use crate::control::rolling::{HealthSettings, RollState, StartRoll};

    fn hash(text: &str) -> ContentHash {
        ContentHash::of(text.as_bytes())
    }

    fn facts(loaded: Option<(&str, u64)>, apply_error: &str, gate_running: bool) -> FileFacts {
        FileFacts { loaded: loaded.map(|(c, at)| (hash(c), at)), apply_error: apply_error.into(), gate_running }
    }

    fn counters(errors: u64, samples_in: u64, values_out: u64) -> Counters {
        Counters { errors, samples_in, values_out }
    }

    fn baseline(content: &str, loaded_at_ms: u64, since_ms: u64, counters: Counters) -> Baseline {
        Baseline { hash: hash(content), loaded_at_ms, since_ms, counters }
    }

    #[test]
    fn the_baseline_follows_the_loaded_content() {
        let kept = baseline("new", 1_000, 1_050, counters(2, 100, 40));
        let cases: [(&str, Option<&Baseline>, FileFacts, Counters, Option<Baseline>); 6] = [
            ("nothing loaded: none", Some(&kept), facts(None, "", false), counters(9, 9, 9), None),
            ("first sight: taken now", None, facts(Some(("new", 1_000)), "", true), counters(2, 100, 40), Some(kept.clone())),
            ("same content, counters grew: kept", Some(&kept), facts(Some(("new", 1_000)), "", true), counters(5, 900, 80), Some(kept.clone())),
            (
                "another content: retaken",
                Some(&kept),
                facts(Some(("newer", 2_000)), "", true),
                counters(5, 900, 80),
                Some(baseline("newer", 2_000, 2_100, counters(5, 900, 80))),
            ),
            (
                "same content reloaded: retaken",
                Some(&kept),
                facts(Some(("new", 1_900)), "", true),
                counters(5, 900, 80),
                Some(baseline("new", 1_900, 2_100, counters(5, 900, 80))),
            ),
            (
                "counters went back: retaken, the window restarts",
                Some(&kept),
                facts(Some(("new", 1_000)), "", true),
                counters(0, 3, 1),
                Some(baseline("new", 1_000, 2_100, counters(0, 3, 1))),
            ),
        ];
        for (what, previous, facts, now, expected) in cases {
            // "first sight" is taken at 1 050; the others at 2 100.
            let now_ms = if previous.is_none() { 1_050 } else { 2_100 };
            assert_eq!(next_baseline(previous, &facts, now, now_ms), expected, "{what}");
        }
        let early = next_baseline(None, &facts(Some(("new", 5_000)), "", true), counters(0, 0, 0), 4_000);
        assert_eq!(early.map(|b| b.since_ms), Some(5_000), "never before the load");
    }

    #[test]
    fn the_report_covers_the_span_since_the_baseline() {
        let base = baseline("new", 1_000, 1_050, counters(2, 100, 40));
        let report = |facts: FileFacts, baseline: Option<&Baseline>, now: Counters| assemble(&facts, baseline, now, 31_050);
        let healthy = report(facts(Some(("new", 1_000)), "", true), Some(&base), counters(2, 1_100, 340));
        assert_eq!(
            healthy,
            HealthReport {
                running_hash: Some(hash("new")),
                running_since_ms: 1_050,
                reported_ms: 31_050,
                apply_error: None,
                dispatch_running: true,
                eval_errors_rise: 0,
                samples_in: 1_000,
                values_out: 300,
            }
        );
        let cases: [(&str, HealthReport, fn(&HealthReport) -> bool); 4] = [
            (
                "errors rose",
                report(facts(Some(("new", 1_000)), "", true), Some(&base), counters(7, 1_100, 340)),
                |r| r.eval_errors_rise == 5,
            ),
            (
                "an apply error is carried, the old content still runs",
                report(facts(Some(("old", 10)), "line 3: unknown function", true), Some(&base), counters(2, 100, 40)),
                |r| r.apply_error.as_deref() == Some("line 3: unknown function") && r.running_hash == Some(hash("old")),
            ),
            (
                "suspended: dispatch not running",
                report(facts(Some(("new", 1_000)), "", false), Some(&base), counters(2, 100, 40)),
                |r| !r.dispatch_running,
            ),
            (
                "nothing loaded: no hash, an empty span, no traffic",
                report(facts(None, "", false), None, counters(2, 100, 40)),
                |r| r.running_hash.is_none() && r.running_since_ms == 31_050 && r.samples_in == 0 && r.eval_errors_rise == 0,
            ),
        ];
        for (what, report, holds) in cases {
            assert!(holds(&report), "{what}: {report:?}");
        }
    }

    #[test]
    fn a_node_reports_the_rolls_that_reached_it() {
        let node = |n: &str| NodeId(n.into());
        let record = |name: &str, index: u32, state: RollState| {
            let mut record = RollRecord::start(StartRoll {
                key: RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name")),
                master: Some(b"old".to_vec()),
                rolling: b"new".to_vec(),
                nodes: vec![node("a"), node("b"), node("c")],
                step_timeout_ms: 60_000,
                health: HealthSettings::default(),
                now_ms: 0,
                revision: Revision::zero(),
            })
            .expect("starts");
            record.index = index;
            record.state = state;
            record
        };
        let records = [
            record("at-b", 1, RollState::InProgress),
            record("before-b", 0, RollState::InProgress),
            record("past-b", 2, RollState::InProgress),
            record("completed", 3, RollState::Completed),
            record("rolled-back", 1, RollState::RolledBack),
        ];
        let names = |node_id: &str| -> Vec<String> {
            reported_files(&records, &node(node_id)).into_iter().map(|k| k.name.as_str().to_string()).collect()
        };
        assert_eq!(names("b"), ["at-b", "past-b"]);
        assert_eq!(names("a"), ["at-b", "before-b", "past-b"]);
        assert_eq!(names("z"), Vec::<String>::new(), "not in the list");
    }
}
