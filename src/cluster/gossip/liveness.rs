//! What this node observed about each member's liveness, beyond chitchat's own verdict: when the
//! member's heartbeat last moved (to compute its phi) and the latest failed bus call to it.
//!
//! The bus side reports what its calls met ([`BusReports`], fed by `Membership::report_bus_call`);
//! the view worker keeps a [`LivenessBook`] and asks it, member by member, for the
//! [`LivenessEvidence`] that `main_select::judge_liveness` decides on. Nothing here decides.
//!
//! phi is chitchat's: the time since the last heartbeat over the mean heartbeat interval.
//! chitchat does not expose it, but it exposes the time at which phi reaches the threshold
//! (`failure_detection_timeout` = mean × threshold), so phi = elapsed × threshold / timeout. The
//! heartbeat is observed when the view worker looks (8 times a gossip interval), so the
//! elapsed time, and phi with it, is under-estimated by at most one look: a late call, never an
//! early one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chitchat::{ChitchatId, Heartbeat};

use super::main_select::{BusFailure, Liveness, LivenessEvidence, judge_liveness};
use crate::base::ids::NodeId;

/// Bus calls that failed, per node: the latest failure and when. A success clears it. Clones
/// share the book.
#[derive(Debug, Clone, Default)]
pub struct BusReports {
    failures: Arc<Mutex<HashMap<NodeId, (BusFailure, Instant)>>>,
}

impl BusReports {
    pub fn record_failure(&self, node: &NodeId, failure: BusFailure, at: Instant) {
        self.lock().insert(node.clone(), (failure, at));
    }

    /// A call that got through: whatever failed before says nothing any more.
    pub fn record_success(&self, node: &NodeId) -> bool {
        self.lock().remove(node).is_some()
    }

    fn latest(&self, node: &NodeId) -> Option<(BusFailure, Instant)> {
        self.lock().get(node).copied()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<NodeId, (BusFailure, Instant)>> {
        self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// chitchat's phi from the elapsed time since the last heartbeat and its detection timeout at
/// `phi_threshold`. `None` when chitchat has no timeout (fewer than two heartbeats) or it is 0.
pub fn phi_of(since_heartbeat: Duration, detection_timeout: Option<Duration>, phi_threshold: f64) -> Option<f64> {
    let timeout = detection_timeout?.as_secs_f64();
    (timeout > 0.0).then(|| since_heartbeat.as_secs_f64() * phi_threshold / timeout)
}

/// The evidence rule with what it needs across views: the thresholds, the heartbeat book and
/// the bus reports.
#[derive(Debug)]
pub struct LivenessJudge {
    phi_threshold: f64,
    suspect_phi_threshold: f64,
    book: LivenessBook,
    reports: BusReports,
}

impl LivenessJudge {
    pub fn new(phi_threshold: f64, suspect_phi_threshold: f64, reports: BusReports) -> LivenessJudge {
        LivenessJudge { phi_threshold, suspect_phi_threshold, book: LivenessBook::default(), reports }
    }

    /// `id`'s liveness now, given its current heartbeat, gossip's verdict and chitchat's
    /// detection timeout for it.
    pub fn liveness(
        &mut self,
        id: &ChitchatId,
        heartbeat: Heartbeat,
        gossip_live: bool,
        detection_timeout: Option<Duration>,
        now: Instant,
    ) -> Liveness {
        let evidence =
            self.book
                .evidence(id, heartbeat, gossip_live, detection_timeout, self.phi_threshold, &self.reports, now);
        judge_liveness(evidence, self.suspect_phi_threshold)
    }

    /// Forgets members gossip no longer lists.
    pub fn retain(&mut self, known: impl Fn(&ChitchatId) -> bool) {
        self.book.retain(known);
    }
}

/// When each member's heartbeat was last seen to move.
#[derive(Debug, Default)]
pub struct LivenessBook {
    heartbeats: HashMap<ChitchatId, (Heartbeat, Instant)>,
}

impl LivenessBook {
    /// Records `heartbeat` for `id` (a new value restarts its clock) and returns the evidence.
    #[allow(clippy::too_many_arguments)]
    pub fn evidence(
        &mut self,
        id: &ChitchatId,
        heartbeat: Heartbeat,
        gossip_live: bool,
        detection_timeout: Option<Duration>,
        phi_threshold: f64,
        reports: &BusReports,
        now: Instant,
    ) -> LivenessEvidence {
        let seen_at = match self.heartbeats.get_mut(id) {
            Some((known, at)) if *known == heartbeat => *at,
            Some(entry) => {
                *entry = (heartbeat, now);
                now
            }
            None => {
                self.heartbeats.insert(id.clone(), (heartbeat, now));
                now
            }
        };
        let node = NodeId(id.node_id.to_string());
        // A failure before the last heartbeat is old news: the member spoke since.
        let bus_failure = reports
            .latest(&node)
            .filter(|(_, failed_at)| *failed_at > seen_at)
            .map(|(failure, _)| failure);
        LivenessEvidence {
            gossip_live,
            phi: phi_of(now.saturating_duration_since(seen_at), detection_timeout, phi_threshold),
            bus_failure,
        }
    }

    /// Forgets members gossip no longer lists.
    pub fn retain(&mut self, known: impl Fn(&ChitchatId) -> bool) {
        self.heartbeats.retain(|id, _| known(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn id(name: &str) -> ChitchatId {
        ChitchatId::new(name.to_string(), 1, SocketAddr::from(([127, 0, 0, 1], 7000)))
    }

    #[test]
    fn phi_is_elapsed_over_the_mean_interval() {
        // timeout 4 s at threshold 8: mean interval 0.5 s.
        let timeout = Some(Duration::from_secs(4));
        assert_eq!(phi_of(Duration::from_millis(1500), timeout, 8.0), Some(3.0));
        assert_eq!(phi_of(Duration::ZERO, timeout, 8.0), Some(0.0));
        assert_eq!(phi_of(Duration::from_secs(1), None, 8.0), None);
        assert_eq!(phi_of(Duration::from_secs(1), Some(Duration::ZERO), 8.0), None);
    }

    #[test]
    fn a_failure_counts_only_after_the_last_heartbeat_and_until_a_success() {
        let reports = BusReports::default();
        let mut book = LivenessBook::default();
        let a = id("a");
        let start = Instant::now();
        let timeout = Some(Duration::from_secs(4));
        let look = |book: &mut LivenessBook, heartbeat: Heartbeat, now: Instant| {
            book.evidence(&a, heartbeat, true, timeout, 8.0, &reports, now)
        };
        let beat = Heartbeat::default();
        assert_eq!(look(&mut book, beat, start).bus_failure, None);
        reports.record_failure(&NodeId("a".into()), BusFailure::Refused, start + Duration::from_millis(10));
        let later = start + Duration::from_millis(1500);
        let evidence = look(&mut book, beat, later);
        assert_eq!(evidence.bus_failure, Some(BusFailure::Refused));
        assert_eq!(evidence.phi, Some(3.0));
        // Another member's heartbeat value: the clock restarts and the old refusal is stale.
        let moved: Heartbeat = serde_json::from_str("7").expect("heartbeat");
        let evidence = look(&mut book, moved, later + Duration::from_millis(1));
        assert_eq!((evidence.bus_failure, evidence.phi), (None, Some(0.0)));
        // A fresh refusal counts again, until a call succeeds.
        reports.record_failure(&NodeId("a".into()), BusFailure::Reset, later + Duration::from_millis(5));
        assert_eq!(look(&mut book, moved, later + Duration::from_millis(6)).bus_failure, Some(BusFailure::Reset));
        assert!(reports.record_success(&NodeId("a".into())));
        assert_eq!(look(&mut book, moved, later + Duration::from_millis(7)).bus_failure, None);
        book.retain(|_| false);
        assert!(book.heartbeats.is_empty());
    }

    #[test]
    fn the_judge_deposes_a_silent_refusing_member_and_not_a_slow_one() {
        let reports = BusReports::default();
        let mut judge = LivenessJudge::new(8.0, 3.0, reports.clone());
        let (a, start) = (id("a"), Instant::now());
        // Mean heartbeat interval 0.25 s (timeout 2 s at phi 8).
        let timeout = Some(Duration::from_secs(2));
        let beat = Heartbeat::default();
        assert_eq!(judge.liveness(&a, beat, true, timeout, start), Liveness::Live);
        reports.record_failure(&NodeId("a".into()), BusFailure::TimedOut, start + Duration::from_millis(100));
        // 1 s of silence (phi 4) and only a timeout: suspect, still live.
        assert_eq!(judge.liveness(&a, beat, true, timeout, start + Duration::from_secs(1)), Liveness::Suspect);
        reports.record_failure(&NodeId("a".into()), BusFailure::Refused, start + Duration::from_millis(900));
        assert_eq!(judge.liveness(&a, beat, true, timeout, start + Duration::from_secs(1)), Liveness::Dead);
        // A refusal with heartbeats arriving (phi 0.4 after a new beat): suspect only.
        let moved: Heartbeat = serde_json::from_str("3").expect("heartbeat");
        let later = start + Duration::from_millis(1100);
        assert_eq!(judge.liveness(&a, moved, true, timeout, later), Liveness::Live, "the new beat makes the refusal stale");
        reports.record_failure(&NodeId("a".into()), BusFailure::Refused, later + Duration::from_millis(1));
        assert_eq!(judge.liveness(&a, moved, true, timeout, later + Duration::from_millis(100)), Liveness::Suspect);
    }
}
