//! The node's in-memory agent state: every agent whose heartbeats this node receives, which of
//! them changed since the last flush, and the flush that writes those changes to the
//! [`AgentStateStore`] in one batch.
//!
//! Heartbeats update memory only; durability is batched so that thousands of agents heartbeating
//! every ten seconds cost one store write per flush, not one per heartbeat. Losing the last
//! unflushed changes is harmless: an agent whose remembered sequence number is stale is asked for
//! its full state on its next heartbeat.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::liveness::{Liveness, LivenessPolicy};
use crate::control::agents::model::InstanceId;
use super::state::{AgentRecord, AgentStateBatch, AgentStateStore, AgentStoreError};

/// Default cap on agents held in memory by one node.
pub fn default_max_agents() -> usize {
    200_000
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("this node already holds {max} agents; refusing new agent {instance_id}")]
    Full { max: usize, instance_id: InstanceId },
    #[error(transparent)]
    Store(#[from] AgentStoreError),
}

/// What one flush wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushReport {
    pub upserted: usize,
    pub removed: usize,
}

#[derive(Default)]
struct Held {
    agents: HashMap<InstanceId, AgentRecord>,
    dirty: HashSet<InstanceId>,
    removed: HashSet<InstanceId>,
}

pub struct AgentRegistry {
    held: Mutex<Held>,
    store: Arc<dyn AgentStateStore>,
    max_agents: usize,
}

impl AgentRegistry {
    /// Loads every stored agent. A node restart thus keeps agents (and their config status)
    /// visible; their sequence numbers are likely stale, which only triggers a full report.
    pub fn load(
        store: Arc<dyn AgentStateStore>,
        max_agents: usize,
    ) -> Result<AgentRegistry, RegistryError> {
        let agents = store
            .load_all()?
            .into_iter()
            .map(|r| (r.instance_id.clone(), r))
            .collect();
        Ok(AgentRegistry {
            held: Mutex::new(Held {
                agents,
                ..Held::default()
            }),
            store,
            max_agents,
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &InstanceId) -> Option<AgentRecord> {
        self.held().agents.get(id).cloned()
    }

    /// Every held agent, ordered by instance id.
    pub fn list(&self) -> Vec<AgentRecord> {
        let mut all: Vec<AgentRecord> = self.held().agents.values().cloned().collect();
        all.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        all
    }

    pub fn len(&self) -> usize {
        self.held().agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many agents changed since the last flush.
    pub fn dirty_count(&self) -> usize {
        let held = self.held();
        held.dirty.len() + held.removed.len()
    }

    /// Stores a record (new or updated) and marks it for the next flush. A new agent beyond the
    /// cap is refused, so forged instance ids cannot exhaust memory.
    pub fn upsert(&self, record: AgentRecord) -> Result<(), RegistryError> {
        let mut held = self.held();
        if !held.agents.contains_key(&record.instance_id) && held.agents.len() >= self.max_agents {
            return Err(RegistryError::Full {
                max: self.max_agents,
                instance_id: record.instance_id,
            });
        }
        held.removed.remove(&record.instance_id);
        held.dirty.insert(record.instance_id.clone());
        held.agents.insert(record.instance_id.clone(), record);
        Ok(())
    }

    /// Forgets agents silent for longer than the retention; they are deleted from the store at
    /// the next flush. Returns who was forgotten.
    pub fn forget_expired(&self, now_ms: u64, policy: &LivenessPolicy) -> Vec<InstanceId> {
        let mut held = self.held();
        let expired: Vec<InstanceId> = held
            .agents
            .values()
            .filter(|r| policy.liveness(r.last_heartbeat_ms, now_ms) == Liveness::Forgotten)
            .map(|r| r.instance_id.clone())
            .collect();
        for id in &expired {
            held.agents.remove(id);
            held.dirty.remove(id);
            held.removed.insert(id.clone());
        }
        expired
    }

    /// Writes every changed agent, and every forgotten one, in one batch. On failure the changes
    /// stay marked and the next flush retries them.
    pub fn flush(&self) -> Result<FlushReport, RegistryError> {
        let (batch, dirty, removed) = {
            let mut held = self.held();
            let dirty = std::mem::take(&mut held.dirty);
            let removed = std::mem::take(&mut held.removed);
            let upserts = dirty
                .iter()
                .filter_map(|id| held.agents.get(id).cloned())
                .collect();
            let batch = AgentStateBatch {
                upserts,
                removals: removed.iter().cloned().collect(),
            };
            (batch, dirty, removed)
        };
        if batch.is_empty() {
            return Ok(FlushReport::default());
        }
        match self.store.write_batch(&batch) {
            Ok(()) => Ok(FlushReport {
                upserted: batch.upserts.len(),
                removed: batch.removals.len(),
            }),
            Err(e) => {
                let mut held = self.held();
                for id in dirty {
                    if held.agents.contains_key(&id) {
                        held.dirty.insert(id);
                    }
                }
                for id in removed {
                    if !held.agents.contains_key(&id) {
                        held.removed.insert(id);
                    }
                }
                Err(e.into())
            }
        }
    }
}
