//! Pull requests from the bus handler to the sync worker.
//!
//! A commit notice normally carries its entry, and the handler applies it through the workflow
//! without calling anyone back. When it cannot (the entry was too large for a notice) or when
//! the notice shows this node missed writes (a gap), the handler does not call the sender
//! itself: it queues a request here, and the sync worker, which owns every pull, carries it out.

use tokio::sync::{mpsc, oneshot};

use crate::base::ids::{NodeId, RuleKey};

use super::error::SyncError;

/// How many requests wait at most; beyond that a request is dropped (the periodic sync covers it).
pub const PULL_QUEUE_CAPACITY: usize = 64;

/// What the sync worker is asked to pull.
#[derive(Debug)]
pub enum PullRequest {
    /// A notice showed that this node missed writes: pull everything `from` holds newer.
    Newer { from: NodeId },
    /// A notice came without its entry: fetch `keys` from `from`, and report how many entries
    /// moved (or why not).
    Keys { from: NodeId, keys: Vec<RuleKey>, done: oneshot::Sender<Result<usize, SyncError>> },
}

/// The sending end, held by the bus handler.
#[derive(Clone)]
pub struct PullQueue {
    requests_tx: mpsc::Sender<PullRequest>,
}

impl PullQueue {
    /// A queue and the receiving end for the sync worker.
    pub fn new() -> (PullQueue, mpsc::Receiver<PullRequest>) {
        let (requests_tx, requests_rx) = mpsc::channel(PULL_QUEUE_CAPACITY);
        (PullQueue { requests_tx }, requests_rx)
    }

    /// Queues `request`; false when the queue is full or the worker is gone.
    pub fn request(&self, request: PullRequest) -> bool {
        self.requests_tx.try_send(request).is_ok()
    }
}
