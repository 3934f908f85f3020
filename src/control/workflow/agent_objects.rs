//! Writes of agent objects (groups, configs, onetime commands): the same single write path as
//! rule entries, without compiling or loading anything ([`Workflow::write_object`], which
//! alarm settings use too).
//!
//! Under the object's lock: read the prior entry (a read failure is `storage_unavailable`),
//! take the next revision from the clock, let [`AgentOp::edit`] decide, persist one synced
//! [`Change`], then tell peers (the notice carries the entry). A config's version is derived from that
//! revision (`millis * 1000 + counter`, raised above the current version if need be): it grows
//! with every content change, also across a delete and re-create of the same name, because the
//! clock orders after the tombstone.

use super::Workflow;
use crate::control::agents::manage::{AgentObjectKey, AgentObjectKind, AgentOp, Edit, ManageError};
use crate::control::agents::model::DEFAULT_GROUP;
use crate::base::clock::now_ms;
use crate::base::ids::{ContentHash, Revision};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::{Change, EntryStatus, RuleEntry};

/// The config version carried by content written at `revision`.
pub fn version_of(revision: &Revision) -> i64 {
    i64::try_from(revision.millis)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000)
        + i64::from(revision.counter % 1000)
}

/// The API answer for a refused management operation.
pub fn manage_outcome(error: &ManageError) -> Outcome {
    let status = match error {
        ManageError::Invalid(_) => ApplyStatus::InvalidParameter,
        ManageError::BadKey { .. } => ApplyStatus::InvalidName,
        ManageError::Content { .. } => ApplyStatus::CompileFailed,
        ManageError::DefaultGroupFixed => ApplyStatus::DeleteRefused,
        ManageError::GroupNotFound { .. } => ApplyStatus::GroupNotFound,
        ManageError::ConfigNotFound { .. } => ApplyStatus::ConfigNotFound,
        ManageError::CommandNotFound { .. } => ApplyStatus::CommandNotFound,
        ManageError::Corrupt { .. } => ApplyStatus::ApplyFailed,
    };
    Outcome::new(status, error.to_string())
}

impl Workflow {
    /// Runs one management operation on the agents' desired state (on the main).
    pub async fn agent_op(&self, op: &AgentOp) -> Outcome {
        let key = match op.validate().and_then(|()| op.key()) {
            Ok(key) => key.entry_key(),
            Err(e) => return manage_outcome(&e),
        };
        let write = self.write_object(&key, |prior, revision| {
            let group_exists = |name: &str| {
                name == DEFAULT_GROUP
                    || AgentObjectKey::new(AgentObjectKind::Group, name)
                        .ok()
                        .and_then(|k| self.store.entry_meta(&k.entry_key()))
                        .is_some_and(|m| m.status != EntryStatus::Deleted)
            };
            op.edit(prior.map(|e| e.content.as_slice()), version_of(revision), group_exists).map_err(|e| manage_outcome(&e))
        });
        write.await.0
    }

    /// The write of one object that is stored, not compiled (agent objects, alarm settings):
    /// under the object's lock, read the prior entry (a read failure is `storage_unavailable`),
    /// take the next revision from the clock, let `decide` say what to write, persist one synced
    /// [`Change`], then tell peers (the notice carries the entry). Returns the answer and, when
    /// something was written, the entry.
    pub(super) async fn write_object(
        &self,
        key: &crate::base::ids::RuleKey,
        decide: impl FnOnce(Option<&RuleEntry>, &Revision) -> Result<Edit, Outcome>,
    ) -> (Outcome, Option<RuleEntry>) {
        let (_guard, prior) = match self.begin(key).await {
            Ok(started) => started,
            Err(outcome) => return (outcome, None),
        };
        let now = now_ms();
        let revision = self.clock.next(now, prior.last_revision.as_ref());
        let edit = match decide(prior.entry.as_ref(), &revision) {
            Ok(edit) => edit,
            Err(outcome) => return (outcome, None),
        };
        let (content, status, outcome_status, message, version) = match edit {
            Edit::NoChange { version, message } => {
                return (Outcome::new(ApplyStatus::NoChange, message).with_version(version), None);
            }
            Edit::Put { content, version, message } => (content, EntryStatus::Active, ApplyStatus::Stored, message, version),
            Edit::Remove { message } => (Vec::new(), EntryStatus::Deleted, ApplyStatus::Deleted, message, None),
        };
        let entry = RuleEntry {
            key: key.clone(),
            content_hash: ContentHash::of(&content),
            content,
            status,
            update_time_ms: now,
            revision: revision.clone(),
        };
        if let Err(e) = self.persist(Change { entries: vec![entry.clone()], ..Change::default() }).await {
            return (Outcome::new(ApplyStatus::PersistFailed, format!("{key} not persisted, nothing changed: {e}")), None);
        }
        let confirmed = self.peers.notify_committed(&entry, prior.last_revision.as_ref()).await;
        let note = super::replicas_note(self.peers.replicas_required(), confirmed);
        let outcome = Outcome::new(outcome_status, format!("{message}{note}")).at(&revision).with_version(version);
        (outcome, Some(entry))
    }
}
