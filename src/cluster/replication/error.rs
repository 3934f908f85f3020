//! Why a pull from a peer stopped: the sync worker's error, also what a commit notice that asked
//! for a pull (`pulls::PullRequest::Keys`) gets back.

use crate::cluster::bus::BusError;
use crate::base::ids::NodeId;
use crate::control::workflow::error::ReplicatedError;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{peer} answered {answer} to a {request}")]
    UnexpectedAnswer { peer: NodeId, request: &'static str, answer: &'static str },
    #[error("{request} from {peer}: {source}")]
    Bus { peer: NodeId, request: &'static str, source: BusError },
    #[error("{peer} is not a member")]
    NotMember { peer: NodeId },
    #[error("{0}")]
    Apply(#[from] ReplicatedError),
    #[error("roll records: {0}")]
    Roll(#[from] crate::control::workflow::RollError),
    #[error("history records: {0}")]
    History(#[from] crate::control::workflow::history::HistoryError),
}
