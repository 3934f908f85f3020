//! The workflow's view of the other nodes: best-effort suspend, resume and commit notices.
//!
//! A single node uses [`NoPeers`]: "this node is the main and has no peers" is the degenerate
//! case of the cluster, and the workflow runs the same steps either way.

use crate::base::ids::{NodeId, Revision, RuleKey};
use crate::store::RuleEntry;
use super::error::PersistError;

pub use crate::BoxFuture;

/// The collective answer to a Suspend broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuspendVote {
    /// Every reachable peer suspended (or had nothing to suspend). Unreachable peers are
    /// logged and skipped; the periodic scan covers them.
    Accepted,
    /// A peer was already suspended by another origin: a competing main.
    Rejected { peer: NodeId, detail: String },
}

pub trait Peers: Send + Sync + 'static {
    fn suspend_all<'a>(&'a self, key: &'a RuleKey) -> BoxFuture<'a, SuspendVote>;
    fn resume_all<'a>(&'a self, key: &'a RuleKey) -> BoxFuture<'a, ()>;
    /// Tells peers `entry` is committed (carrying it, so they need not fetch it); `previous` is
    /// the revision the key had before (tombstones included), so a peer can tell whether it
    /// missed a write. Returns how many peers confirmed they hold it (see `replicas_required`).
    fn notify_committed<'a>(&'a self, entry: &'a RuleEntry, previous: Option<&'a Revision>) -> BoxFuture<'a, usize>;
    /// How many peers must confirm a commit before the write is answered (`--commit-replicas`).
    fn replicas_required(&self) -> usize {
        0
    }
    /// Whether this node is the main now (roll records are written by the main only). A node
    /// without peers always is.
    fn is_main(&self) -> bool {
        true
    }
    /// The live peers (not this node): the members a roll is ordered over, with this node.
    fn live_members(&self) -> Vec<NodeId> {
        Vec::new()
    }
    /// Tells peers a roll record was written (`record` is its encoded bytes, at `revision`):
    /// best effort, off the answer's path; peers also pull newer records on their sync.
    fn notify_roll<'a>(&'a self, _key: &'a RuleKey, _revision: &'a Revision, _record: &'a [u8]) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    /// Commits `entry`: runs `persist` (this node's synced write, the commit point) and tells
    /// the peers. By default one after the other: persist, then [`Peers::notify_committed`].
    /// Over the bus with `commit_replicas` > 0 the entry is prepared on the peers while it is
    /// persisted here (prepare/commit, docs/consistency.md).
    fn commit<'a>(&'a self, entry: &'a RuleEntry, previous: Option<&'a Revision>, persist: PersistFuture<'a>) -> BoxFuture<'a, CommitOutcome> {
        Box::pin(async move {
            match persist.await {
                Ok(()) => CommitOutcome::Committed { confirmed: self.notify_committed(entry, previous).await },
                Err(error) => CommitOutcome::Failed { error, withdrawn: true },
            }
        })
    }
}

/// This node's synced write of an entry, handed to [`Peers::commit`].
pub type PersistFuture<'a> = BoxFuture<'a, Result<(), PersistError>>;

/// How [`Peers::commit`] ended.
#[derive(Debug)]
pub enum CommitOutcome {
    /// Persisted here; `confirmed` peers hold it (stored, or staged durably).
    Committed { confirmed: usize },
    /// Not persisted here. `withdrawn`: no peer keeps a copy (none was prepared, or every peer
    /// prepared confirmed the abort); otherwise a peer may still hold a staged copy, which it
    /// applies if this node is lost before it learns the write failed.
    Failed { error: PersistError, withdrawn: bool },
}

/// A node without peers.
pub struct NoPeers;

impl Peers for NoPeers {
    fn suspend_all<'a>(&'a self, _key: &'a RuleKey) -> BoxFuture<'a, SuspendVote> {
        Box::pin(async { SuspendVote::Accepted })
    }

    fn resume_all<'a>(&'a self, _key: &'a RuleKey) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn notify_committed<'a>(&'a self, _entry: &'a RuleEntry, _previous: Option<&'a Revision>) -> BoxFuture<'a, usize> {
        Box::pin(async { 0 })
    }
}
