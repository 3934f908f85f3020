//! One key's commit notices reach each peer in commit order.
//!
//! The main answers at its first `commit_replicas` confirmations, so a slower peer can still be
//! taking one write's notice when the next write of the same file is committed. Sent at once, the
//! two could overtake each other; the peer would then see a gap (the newer notice does not follow
//! what it holds) and pull everything newer from the main, for nothing. So each notice to a peer
//! first waits until the previous notice of the same key to that peer has ended (answered, failed
//! or timed out), but at most for its own timeout (so a hung peer's timeouts do not add up).
//! Notices of different keys, or to different peers, never wait for each other;
//! the answer never waits for this, since a peer that confirmed the previous write has no notice
//! of the key in flight.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::ids::{NodeId, RuleKey};

type Lane = (NodeId, RuleKey);

/// The last notice entered per (peer, key), while it is in flight.
#[derive(Default)]
pub struct NoticeOrder {
    next_id: Mutex<u64>,
    lanes: Mutex<HashMap<Lane, (u64, oneshot::Receiver<()>)>>,
}

/// A notice's place in its lane: wait for `previous` before sending, then call [`NoticeOrder::leave`].
pub struct Ticket {
    id: u64,
    lane: Lane,
    previous: Option<oneshot::Receiver<()>>,
    done: oneshot::Sender<()>,
}

impl Ticket {
    /// Waits until the previous notice of this lane ended (at once if there is none, or if its
    /// task is gone).
    pub async fn wait_turn(&mut self) {
        if let Some(previous) = self.previous.take() {
            let _ = previous.await;
        }
    }
}

impl NoticeOrder {
    /// Takes the next place in `(peer, key)`'s lane. Called synchronously when the notice is
    /// created, so places follow commit order.
    pub fn enter(&self, peer: &NodeId, key: &RuleKey) -> Ticket {
        let id = {
            let mut next_id = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *next_id += 1;
            *next_id
        };
        let (done, done_rx) = oneshot::channel();
        let lane = (peer.clone(), key.clone());
        let previous = self.lanes().insert(lane.clone(), (id, done_rx)).map(|(_, previous)| previous);
        Ticket { id, lane, previous, done }
    }

    /// Ends the ticket's notice: the next one in its lane may go, and an empty lane is forgotten.
    pub fn leave(&self, ticket: Ticket) {
        let Ticket { id, lane, done, .. } = ticket;
        let _ = done.send(());
        let mut lanes = self.lanes();
        if lanes.get(&lane).is_some_and(|(last, _)| *last == id) {
            lanes.remove(&lane);
        }
    }

    /// How many lanes have a notice in flight.
    pub fn len(&self) -> usize {
        self.lanes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, HashMap<Lane, (u64, oneshot::Receiver<()>)>> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Catalog, RuleName};
    use std::time::Duration;

    fn key(n: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(n).expect("name"))
    }

    #[tokio::test]
    async fn a_keys_notices_to_a_peer_go_one_after_the_other_and_others_do_not_wait() {
        let order = NoticeOrder::default();
        let (p1, p2) = (NodeId("p1".into()), NodeId("p2".into()));
        let first = order.enter(&p1, &key("a"));
        let mut second = order.enter(&p1, &key("a"));
        let mut other_key = order.enter(&p1, &key("b"));
        let mut other_peer = order.enter(&p2, &key("a"));
        let quick = Duration::from_millis(50);
        assert!(tokio::time::timeout(quick, other_key.wait_turn()).await.is_ok(), "another key does not wait");
        assert!(tokio::time::timeout(quick, other_peer.wait_turn()).await.is_ok(), "another peer does not wait");
        assert!(tokio::time::timeout(quick, second.wait_turn()).await.is_err(), "the second waits for the first");
        order.leave(first);
        assert!(tokio::time::timeout(Duration::from_secs(5), second.wait_turn()).await.is_ok(), "its turn came");
        for ticket in [second, other_key, other_peer] {
            order.leave(ticket);
        }
        assert!(order.is_empty(), "ended lanes are forgotten");
    }

    #[tokio::test]
    async fn a_notice_whose_predecessor_vanished_does_not_wait() {
        let order = NoticeOrder::default();
        let peer = NodeId("p".into());
        let first = order.enter(&peer, &key("a"));
        let mut second = order.enter(&peer, &key("a"));
        drop(first); // its task was aborted (shutdown)
        assert!(tokio::time::timeout(Duration::from_secs(5), second.wait_turn()).await.is_ok());
        order.leave(second);
        assert!(order.is_empty());
    }
}
