//! The workflow's typed errors at its seams: a persist that failed, and a replicated entry that
//! could not be applied. Operator answers are `Outcome`s; these are what the callers of the
//! write path (the workflow's own operations, sync) match on.

use crate::base::ids::RuleKey;
use crate::store::StoreError;

/// Why a change was not persisted (nothing changed in storage).
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A persist failpoint fired (fault-injection tests, chaos runs).
    #[error("failpoint {point} ({argument})")]
    Injected { point: &'static str, argument: String },
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A roll record did not encode (nothing was written).
    #[error("the record does not encode: {0}")]
    Encode(String),
}

/// Why a replicated entry was not applied; the entries before it in the batch were.
#[derive(Debug, thiserror::Error)]
pub enum ReplicatedError {
    #[error("{key}: file lock busy")]
    LockBusy { key: RuleKey },
    #[error("{key}: {source}")]
    Store { key: RuleKey, source: StoreError },
}
