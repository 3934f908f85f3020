//! Per-peer batching of the write path's bus messages: prepares and commit notices.
//!
//! Under concurrent writes each one used to be its own bus call (an HTTP request, its MAC, its
//! decode, its handler wakeups) on both ends. A peer's [`Outbox`] queue instead sends what queued
//! up while its previous call was in flight as one [`BusRequest::Replicate`]: one call per peer
//! at a time, each carrying everything that waited for it. The peer handles one key's items in
//! order and different keys' concurrently, so the stagings of a batch share one synced write
//! (the store's group commit).
//!
//! The decision of what goes into the next call is [`take_batch`] (pure, tested on its own); the
//! sender task around it is the IO. A lone item goes as its own request (`Prepare`,
//! `NotifyCommitted`), exactly as before batching: a single writer pays nothing for it.
//!
//! Every caller keeps its own deadline ([`Outbox::enqueue`], then [`Pending::wait`]): it waits
//! for its answer at most its timeout and then reports [`BusError::Timeout`] (an item may still
//! have reached the peer: a prepare that timed out is "unknown", as before). An item whose
//! caller stopped waiting before its batch left is not sent. The calls keep one order per peer: a batch leaves only after the previous one was
//! answered, and items leave in the order they were queued. The main queues a write's commit
//! notices before it releases the file's lock, so one key's notices (and the prepare of its next
//! write) reach each peer in commit order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::cluster::bus::BusError;
use crate::cluster::bus::messages::{BusRequest, BusResponse, ReplicaAnswer, ReplicaItem};
use crate::cluster::gossip::view::Member;
use crate::base::ids::NodeId;

use super::Cluster;

/// At most this many items in one call.
pub const MAX_BATCH_ITEMS: usize = 64;

/// At most this many bytes of entry content in one call (an item larger than this goes alone).
pub const MAX_BATCH_CONTENT_BYTES: usize = 1024 * 1024;

/// The per-peer queues of one node.
#[derive(Default)]
pub struct Outbox {
    peers: Mutex<HashMap<NodeId, Arc<PeerQueue>>>,
}

#[derive(Default)]
struct PeerQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    items: Vec<Queued>,
    /// A sender task is running for this peer (it sends until the queue is empty).
    sending: bool,
}

struct Queued {
    item: ReplicaItem,
    deadline: Instant,
    done: oneshot::Sender<Result<BusResponse, BusError>>,
}

impl Outbox {
    /// Queues `item` for `peer` now (so items queued one after the other leave in that order)
    /// and returns the wait for its answer. Dropping the wait before the item left withdraws it.
    pub fn enqueue(&self, cluster: &Arc<Cluster>, peer: &Member, item: ReplicaItem, timeout: Duration) -> Pending {
        let queue = self.queue(&peer.node_id);
        let (done, answer) = oneshot::channel();
        let start_sender = {
            let mut state = lock(&queue.state);
            state.items.push(Queued { item, deadline: Instant::now() + timeout, done });
            !std::mem::replace(&mut state.sending, true)
        };
        if start_sender {
            tokio::spawn(send_queued(queue, cluster.clone(), peer.clone()));
        }
        Pending { answer, peer: peer.node_id.clone(), timeout, deadline: tokio::time::Instant::now() + timeout }
    }

    fn queue(&self, peer: &NodeId) -> Arc<PeerQueue> {
        lock(&self.peers).entry(peer.clone()).or_default().clone()
    }
}

/// A queued item's answer, to wait for (see [`Outbox::enqueue`]).
pub struct Pending {
    answer: oneshot::Receiver<Result<BusResponse, BusError>>,
    peer: NodeId,
    timeout: Duration,
    deadline: tokio::time::Instant,
}

impl Pending {
    /// The item's answer, or [`BusError::Timeout`] once its timeout has passed since it was queued.
    pub async fn wait(self) -> Result<BusResponse, BusError> {
        match tokio::time::timeout_at(self.deadline, self.answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(BusError::Transport { to: self.peer, reason: "the batch sender stopped".into() }),
            Err(_) => Err(BusError::Timeout { to: self.peer, after: self.timeout }),
        }
    }
}

/// Sends `queue`'s items, a batch at a time, until it is empty.
async fn send_queued(queue: Arc<PeerQueue>, cluster: Arc<Cluster>, peer: Member) {
    loop {
        let batch = {
            let mut state = lock(&queue.state);
            // Callers that stopped waiting are not sent for.
            state.items.retain(|queued| !queued.done.is_closed());
            if state.items.is_empty() {
                state.sending = false;
                return;
            }
            let sizes: Vec<usize> = state.items.iter().map(|queued| content_len(&queued.item)).collect();
            let count = take_batch(&sizes, MAX_BATCH_ITEMS, MAX_BATCH_CONTENT_BYTES);
            state.items.drain(..count).collect::<Vec<_>>()
        };
        // The peer's address as the view has it now (a peer that restarted may listen elsewhere).
        let current = cluster.view().member(&peer.node_id).cloned().unwrap_or_else(|| peer.clone());
        send_batch(&cluster, &current, batch).await;
    }
}

/// How many of the queued items (their content sizes, in queue order) go into the next call:
/// at least one, at most `max_items`, and no more than `max_bytes` of content unless the first
/// item alone is larger.
pub fn take_batch(sizes: &[usize], max_items: usize, max_bytes: usize) -> usize {
    let mut total = 0usize;
    let mut count = 0;
    for &size in sizes.iter().take(max_items.max(1)) {
        if count > 0 && total.saturating_add(size) > max_bytes {
            break;
        }
        total = total.saturating_add(size);
        count += 1;
    }
    count
}

async fn send_batch(cluster: &Arc<Cluster>, peer: &Member, batch: Vec<Queued>) {
    let now = Instant::now();
    // The call waits as long as its most patient caller (at least a millisecond).
    let timeout = batch
        .iter()
        .map(|queued| queued.deadline.saturating_duration_since(now))
        .max()
        .unwrap_or_default()
        .max(Duration::from_millis(1));
    let sender = cluster.self_id().clone();
    if batch.len() == 1 {
        let Some(queued) = batch.into_iter().next() else { return };
        let result = cluster.call(peer, request_of(queued.item, sender), timeout).await;
        let _ = queued.done.send(result);
        return;
    }
    let (items, dones): (Vec<ReplicaItem>, Vec<_>) = batch.into_iter().map(|queued| (queued.item, queued.done)).unzip();
    let count = items.len();
    let results = split_answer(cluster.call(peer, BusRequest::Replicate { items, sender }, timeout).await, count, &peer.node_id);
    for (done, result) in dones.into_iter().zip(results) {
        // A caller that stopped waiting is gone: nobody to tell.
        let _ = done.send(result);
    }
}

/// The request an item stands for when it goes alone.
fn request_of(item: ReplicaItem, sender: NodeId) -> BusRequest {
    match item {
        ReplicaItem::Prepare { entry } => BusRequest::Prepare { entry, sender },
        ReplicaItem::Commit { key, revision, previous, entry, durable } => {
            BusRequest::NotifyCommitted { key, revision, previous, entry, durable, sender }
        }
    }
}


/// Each item's result from the batch call's: its own answer, or the call's error for every
/// item (a batch that never reached the peer reached it for none of them).
pub fn split_answer(result: Result<BusResponse, BusError>, count: usize, peer: &NodeId) -> Vec<Result<BusResponse, BusError>> {
    match result {
        Ok(BusResponse::Replicated { answers }) if answers.len() == count => answers
            .into_iter()
            .map(|answer| {
                Ok(match answer {
                    ReplicaAnswer::Staged => BusResponse::Staged,
                    ReplicaAnswer::Ack => BusResponse::Ack,
                    ReplicaAnswer::Error { message } => BusResponse::Error { message },
                })
            })
            .collect(),
        // The peer answered, but not item by item: what it did with each item is unknown.
        Ok(other) => {
            let reason = match &other {
                BusResponse::Replicated { answers } => format!("{} answers to a batch of {count}", answers.len()),
                BusResponse::Error { message } => format!("{peer} refused the batch: {message}"),
                other => format!("a {} answer to a batch", other.name()),
            };
            vec![Err(BusError::Decode(reason)); count]
        }
        Err(e) => vec![Err(e); count],
    }
}

fn content_len(item: &ReplicaItem) -> usize {
    match item {
        ReplicaItem::Prepare { entry } => entry.content.len(),
        ReplicaItem::Commit { entry, .. } => entry.as_ref().map_or(0, |entry| entry.content.len()),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, ContentHash, Revision, RuleKey, RuleName};
    use crate::store::{EntryStatus, RuleEntry};

    fn node(id: &str) -> NodeId {
        NodeId(id.into())
    }

    fn entry(content: &[u8]) -> RuleEntry {
        RuleEntry {
            key: RuleKey::new(Catalog::OtelRules, RuleName::parse("vm").expect("name")),
            content: content.to_vec(),
            status: EntryStatus::Active,
            update_time_ms: 1,
            content_hash: ContentHash::of(content),
            revision: Revision { millis: 2, counter: 0, node: node("a") },
        }
    }

    /// The item a request stands for in a batch, if it is one that batches.
    fn item_of(request: BusRequest) -> Result<ReplicaItem, BusRequest> {
        match request {
            BusRequest::Prepare { entry, .. } => Ok(ReplicaItem::Prepare { entry }),
            BusRequest::NotifyCommitted { key, revision, previous, entry, durable, .. } => {
                Ok(ReplicaItem::Commit { key, revision, previous, entry, durable })
            }
            other => Err(other),
        }
    }

    #[test]
    fn a_batch_takes_what_fits_and_at_least_one_item() {
        let cases: &[(&[usize], usize, usize, usize)] = &[
            (&[10], 64, 100, 1),
            (&[10, 10, 10], 64, 100, 3),
            (&[60, 30, 20], 64, 100, 2),
            (&[500, 1], 64, 100, 1), // the first item alone may be larger than the bound
            (&[0, 0, 0, 0], 2, 100, 2),
            (&[1, 2, 3], 0, 100, 1), // a zero item bound still sends one
            (&[], 64, 100, 0),
        ];
        for &(sizes, max_items, max_bytes, want) in cases {
            assert_eq!(take_batch(sizes, max_items, max_bytes), want, "{sizes:?} {max_items} {max_bytes}");
        }
    }

    #[test]
    fn a_batch_answer_is_split_item_by_item_and_an_error_reaches_every_item() {
        let peer = node("b");
        let answers = BusResponse::Replicated {
            answers: vec![ReplicaAnswer::Staged, ReplicaAnswer::Ack, ReplicaAnswer::Error { message: "no".into() }],
        };
        assert_eq!(
            split_answer(Ok(answers), 3, &peer),
            vec![Ok(BusResponse::Staged), Ok(BusResponse::Ack), Ok(BusResponse::Error { message: "no".into() })]
        );
        let unreachable = BusError::Unreachable { to: peer.clone(), reason: "refused".into() };
        assert_eq!(split_answer(Err(unreachable.clone()), 2, &peer), vec![Err(unreachable.clone()), Err(unreachable)]);
        // A wrong count or kind of answer is no answer for any item.
        let short = BusResponse::Replicated { answers: vec![ReplicaAnswer::Ack] };
        assert!(split_answer(Ok(short), 2, &peer).iter().all(|r| matches!(r, Err(BusError::Decode(_)))));
        assert!(split_answer(Ok(BusResponse::Ack), 2, &peer).iter().all(|r| matches!(r, Err(BusError::Decode(_)))));
    }

    #[test]
    fn only_prepares_and_commit_notices_batch_and_a_lone_item_is_its_own_request() {
        let entry = entry(b"x");
        let sender = node("a");
        let prepare = BusRequest::Prepare { entry: entry.clone(), sender: sender.clone() };
        let commit = BusRequest::NotifyCommitted {
            key: entry.key.clone(),
            revision: entry.revision.clone(),
            previous: Some(Revision { millis: 1, counter: 0, node: node("a") }),
            entry: None,
            durable: true,
            sender: sender.clone(),
        };
        for request in [prepare, commit] {
            let item = item_of(request.clone()).expect("batches");
            assert_eq!(request_of(item, sender.clone()), request);
        }
        assert!(item_of(BusRequest::Digest { sender }).is_err());
        assert_eq!(content_len(&ReplicaItem::Prepare { entry: entry.clone() }), 1);
    }
}
