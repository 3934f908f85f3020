//! Taking commit notices on the in-memory store: a notice without a gap is applied from the
//! message alone (no pull asked), a gap asks the sync worker to pull, and a notice without its
//! entry waits for the pull.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::Receiver;
use tokio::sync::mpsc::error::TryRecvError;

use super::*;
use crate::control::bundled::Bundled;
use crate::base::clock::RevisionClock;
use crate::base::ids::{Catalog, ContentHash, RuleName};
use crate::control::runtime::Runtime;
use crate::control::runtime::locks::FileLocks;
use crate::control::scan::ScanSettings;
use crate::store::EntryStatus;
use crate::store::kv::MemKv;
use crate::control::workflow::NoPeers;
use crate::cluster::replication::error::SyncError;

const RULE: &str = "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: nt\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc'])\n";

struct Peer {
    receiver: NoticeReceiver,
    pull_requests_rx: Receiver<PullRequest>,
}

fn peer() -> Peer {
    let store = Arc::new(Store::open(Arc::new(MemKv::new())).expect("store"));
    let runtime = Arc::new(Runtime::new());
    let bundled = Arc::new(Bundled::empty());
    let locks = Arc::new(FileLocks::default());
    let clock = Arc::new(RevisionClock::new(NodeId("peer".into())));
    let workflow =
        Arc::new(Workflow::new(store.clone(), runtime.clone(), bundled.clone(), clock, Arc::new(NoPeers), locks.clone()));
    let scanner = Arc::new(Scanner::new(store.clone(), runtime, bundled, locks, ScanSettings::default(), workflow.clone()));
    let (pulls, pull_requests_rx) = PullQueue::new();
    let receiver = NoticeReceiver { workflow, store, scanner, pulls, pull_wait: Duration::from_secs(5) };
    Peer { receiver, pull_requests_rx }
}

fn key() -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse("notice").expect("name"))
}

fn main_id() -> NodeId {
    NodeId("main".into())
}

fn rev(millis: u64) -> Revision {
    Revision { millis, counter: 0, node: main_id() }
}

fn entry(millis: u64, status: EntryStatus) -> RuleEntry {
    let content = if status == EntryStatus::Deleted { Vec::new() } else { format!("{RULE}# {millis}\n").into_bytes() };
    RuleEntry { key: key(), content_hash: ContentHash::of(&content), content, status, update_time_ms: millis, revision: rev(millis) }
}

fn notice(entry: &RuleEntry, previous: Option<u64>, carried: bool) -> Notice {
    Notice {
        durable: true,
        key: entry.key.clone(),
        revision: entry.revision.clone(),
        previous: previous.map(rev),
        entry: carried.then(|| entry.clone()),
        sender: main_id(),
    }
}

impl Peer {
    fn stored(&self) -> Option<Revision> {
        self.receiver.store.entry_meta(&key()).map(|m| m.revision)
    }

    fn no_pull_asked(&mut self) -> bool {
        matches!(self.pull_requests_rx.try_recv(), Err(TryRecvError::Empty))
    }
}

#[tokio::test]
async fn notices_without_a_gap_are_applied_from_the_message_alone() {
    let mut peer = peer();
    let first = entry(10, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&first, None, true)).await, BusResponse::Ack);
    assert_eq!(peer.stored(), Some(rev(10)));
    assert!(peer.no_pull_asked(), "a first write with nothing before it is no gap");

    let second = entry(20, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&second, Some(10), true)).await, BusResponse::Ack);
    assert_eq!(peer.stored(), Some(rev(20)));
    let stored = peer.receiver.store.get_entry(&key()).await.expect("read").expect("entry");
    assert_eq!(stored, second, "the carried entry is stored as sent");

    let tombstone = entry(30, EntryStatus::Deleted);
    assert_eq!(peer.receiver.receive(notice(&tombstone, Some(20), true)).await, BusResponse::Ack);
    assert_eq!(peer.receiver.store.entry_meta(&key()).map(|m| m.status), Some(EntryStatus::Deleted));
    assert!(peer.no_pull_asked(), "no notice of this sequence had a gap");
}

#[tokio::test]
async fn a_notice_with_a_gap_is_applied_and_asks_for_a_sync_with_the_sender() {
    let mut peer = peer();
    let first = entry(10, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&first, None, true)).await, BusResponse::Ack);
    // The write at 20 never arrived: the notice for 30 says it follows 20, this node holds 10.
    let third = entry(30, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&third, Some(20), true)).await, BusResponse::Ack);
    assert_eq!(peer.stored(), Some(rev(30)), "the carried entry is applied all the same");
    match peer.pull_requests_rx.try_recv() {
        Ok(PullRequest::Newer { from }) => assert_eq!(from, main_id()),
        other => panic!("expected a sync with the sender, got {other:?}"),
    }
    assert!(peer.no_pull_asked(), "one sync is asked, nothing more");
}

#[tokio::test]
async fn a_notice_for_a_key_never_received_is_a_gap() {
    let mut peer = peer();
    let second = entry(20, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&second, Some(10), true)).await, BusResponse::Ack);
    assert!(matches!(peer.pull_requests_rx.try_recv(), Ok(PullRequest::Newer { .. })));
}

#[tokio::test]
async fn a_notice_already_held_changes_nothing_and_pulls_nothing() {
    let mut peer = peer();
    let newer = entry(30, EntryStatus::Active);
    assert_eq!(peer.receiver.receive(notice(&newer, None, true)).await, BusResponse::Ack);
    let older = entry(20, EntryStatus::Deleted);
    assert_eq!(peer.receiver.receive(notice(&older, Some(10), true)).await, BusResponse::Ack);
    assert_eq!(peer.receiver.receive(notice(&older, Some(10), false)).await, BusResponse::Ack);
    assert_eq!(peer.stored(), Some(rev(30)));
    assert!(peer.no_pull_asked());
}

#[tokio::test]
async fn a_notice_without_its_entry_waits_for_the_pull() {
    let Peer { receiver, mut pull_requests_rx } = peer();
    let big = entry(10, EntryStatus::Active);
    let receiver = Arc::new(receiver);
    let taking = tokio::spawn({
        let receiver = receiver.clone();
        let notice = notice(&big, None, false);
        async move { receiver.receive(notice).await }
    });
    // Play the sync worker: fetch (here: hand over) the entry, then report.
    let request = tokio::time::timeout(Duration::from_secs(5), pull_requests_rx.recv()).await.expect("a pull is asked");
    match request {
        Some(PullRequest::Keys { from, keys, done }) => {
            assert_eq!((from, keys), (main_id(), vec![key()]));
            let applied = receiver.workflow.apply_replicated(vec![big.clone()]).await;
            done.send(applied.map_err(SyncError::from)).expect("the notice waits");
        }
        other => panic!("expected a pull of the key, got {other:?}"),
    }
    assert_eq!(taking.await.expect("task"), BusResponse::Ack);

    // A pull that fails is answered as not held.
    let later = entry(20, EntryStatus::Active);
    let taking = tokio::spawn({
        let receiver = receiver.clone();
        let notice = notice(&later, Some(10), false);
        async move { receiver.receive(notice).await }
    });
    match tokio::time::timeout(Duration::from_secs(5), pull_requests_rx.recv()).await.expect("a pull is asked") {
        Some(PullRequest::Keys { done, .. }) => {
            done.send(Err(SyncError::NotMember { peer: main_id() })).expect("the notice waits")
        }
        other => panic!("expected a pull of the key, got {other:?}"),
    }
    assert!(matches!(taking.await.expect("task"), BusResponse::Error { .. }));
}

#[tokio::test]
async fn a_notice_whose_entry_is_not_the_announced_one_is_refused() {
    let mut peer = peer();
    let announced = entry(20, EntryStatus::Active);
    let mut wrong = notice(&announced, None, true);
    wrong.entry = Some(entry(30, EntryStatus::Active));
    assert!(matches!(peer.receiver.receive(wrong).await, BusResponse::Error { .. }));
    assert_eq!(peer.stored(), None);
    assert!(peer.no_pull_asked());
}
