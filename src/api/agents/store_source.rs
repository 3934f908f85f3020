//! The node's implementations of the agent seams over management storage:
//! [`StoreConfigSource`] reads the agent catalogs (replicated entries) into a [`ConfigSnapshot`],
//! and [`StoreAgentState`] keeps agent state node-locally under `agent-state/`.
//!
//! The snapshot is cached and rebuilt only after the store reports a commit (`Store::subscribe`),
//! so a heartbeat costs a version check, not a storage read. The version is read before the
//! catalogs, so a commit racing the rebuild only causes one more rebuild later, never a stale
//! snapshot kept for good. The rebuild reads storage: async callers check
//! [`AgentConfigSource::is_current`] and run a stale snapshot's rebuild on the blocking pool.

use std::sync::{Arc, Mutex};

use crate::control::agents::manage::decode_objects;
use super::snapshot::ConfigSnapshot;
use super::source::{AgentConfigSource, SourceError};
use super::state::{AgentRecord, AgentStateBatch, AgentStateStore, AgentStoreError};
use crate::base::ids::Catalog;
use crate::store::{RuleEntry, Store};

pub struct StoreConfigSource {
    store: Arc<Store>,
    changes_rx: tokio::sync::watch::Receiver<u64>,
    cached: Mutex<Option<(u64, Arc<ConfigSnapshot>)>>,
}

impl StoreConfigSource {
    pub fn new(store: Arc<Store>) -> StoreConfigSource {
        StoreConfigSource {
            changes_rx: store.subscribe(),
            store,
            cached: Mutex::new(None),
        }
    }

    fn live_contents(&self, catalog: Catalog) -> Result<Vec<Vec<u8>>, SourceError> {
        let entries =
            self.store
                .read_catalog_now(catalog)
                .map_err(|e| SourceError::Unavailable {
                    reason: format!("reading {catalog}: {e}"),
                })?;
        Ok(entries
            .into_iter()
            .filter(RuleEntry::is_live)
            .map(|e| e.content)
            .collect())
    }

    fn build(&self) -> Result<ConfigSnapshot, SourceError> {
        let groups = self.live_contents(Catalog::AgentGroups)?;
        let mut configs = self.live_contents(Catalog::AgentPipelineConfigs)?;
        configs.extend(self.live_contents(Catalog::AgentInstanceConfigs)?);
        let commands = self.live_contents(Catalog::AgentCommands)?;
        let (groups, configs, commands) = decode_objects(&groups, &configs, &commands);
        Ok(ConfigSnapshot::build(groups, configs, commands))
    }
}

impl AgentConfigSource for StoreConfigSource {
    fn snapshot(&self) -> Result<Arc<ConfigSnapshot>, SourceError> {
        let version = *self.changes_rx.borrow();
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, snapshot)) = cached.as_ref()
            && *at == version
        {
            return Ok(Arc::clone(snapshot));
        }
        let snapshot = Arc::new(self.build()?);
        *cached = Some((version, Arc::clone(&snapshot)));
        Ok(snapshot)
    }

    fn is_current(&self) -> bool {
        let version = *self.changes_rx.borrow();
        // A rebuild in progress holds the lock: not current, the caller must not wait on it.
        match self.cached.try_lock() {
            Ok(cached) => cached.as_ref().is_some_and(|(at, _)| *at == version),
            Err(_) => false,
        }
    }
}

/// Agent state in management storage, one record per instance under `agent-state/<id>`, as JSON.
pub struct StoreAgentState {
    store: Arc<Store>,
}

impl StoreAgentState {
    pub fn new(store: Arc<Store>) -> StoreAgentState {
        StoreAgentState { store }
    }
}

impl AgentStateStore for StoreAgentState {
    fn write_batch(&self, batch: &AgentStateBatch) -> Result<(), AgentStoreError> {
        let mut upserts = Vec::with_capacity(batch.upserts.len());
        for record in &batch.upserts {
            let bytes = serde_json::to_vec(record).map_err(|e| AgentStoreError::Unavailable {
                reason: format!("encoding {}: {e}", record.instance_id),
            })?;
            upserts.push((record.instance_id.as_str().to_string(), bytes));
        }
        let removals: Vec<String> = batch
            .removals
            .iter()
            .map(|id| id.as_str().to_string())
            .collect();
        self.store
            .write_agent_states(&upserts, &removals)
            .map_err(|e| AgentStoreError::Unavailable {
                reason: e.to_string(),
            })
    }

    fn load_all(&self) -> Result<Vec<AgentRecord>, AgentStoreError> {
        let stored = self
            .store
            .read_agent_states()
            .map_err(|e| AgentStoreError::Unavailable {
                reason: e.to_string(),
            })?;
        stored
            .into_iter()
            .map(|(instance_id, bytes)| {
                serde_json::from_slice(&bytes).map_err(|e| AgentStoreError::Corrupt {
                    instance_id,
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::agents::manage::AgentOp;
    use crate::control::agents::model::{ConfigKind, ContentFormat, InstanceId};
    use crate::base::ids::{ContentHash, NodeId, Revision};
    use crate::store::kv::MemKv;
    use crate::store::{Change, EntryStatus};

    fn entry(op: &AgentOp, version: i64, prior: Option<&[u8]>) -> RuleEntry {
        let content = match op.edit(prior, version, |_| true).expect("edit") {
            crate::control::agents::manage::Edit::Put { content, .. } => content,
            other => panic!("{other:?}"),
        };
        RuleEntry {
            key: op.key().expect("key").entry_key(),
            content_hash: ContentHash::of(&content),
            content,
            status: EntryStatus::Active,
            update_time_ms: 1,
            revision: Revision {
                millis: version as u64,
                counter: 0,
                node: NodeId("n".into()),
            },
        }
    }

    #[tokio::test]
    async fn the_snapshot_follows_commits_and_agent_state_round_trips() {
        let store = Arc::new(Store::open(Arc::new(MemKv::new())).expect("open"));
        let source = StoreConfigSource::new(store.clone());
        assert!(!source.is_current(), "nothing built yet: a caller must rebuild off the async threads");
        assert!(
            source
                .snapshot()
                .expect("snapshot")
                .config(ConfigKind::Pipeline, "a")
                .is_none()
        );
        assert!(source.is_current(), "built and unchanged");
        let push = AgentOp::PushConfig {
            kind: ConfigKind::Pipeline,
            name: "a".into(),
            content: "k: v\n".into(),
            format: ContentFormat::Yaml,
        };
        let stored = entry(&push, 7, None);
        store
            .commit(Change {
                entries: vec![stored],
                ..Change::default()
            })
            .await
            .expect("commit");
        assert!(!source.is_current(), "a commit makes the cached snapshot stale");
        let snapshot = source.snapshot().expect("snapshot");
        assert!(source.is_current());
        assert_eq!(
            snapshot
                .config(ConfigKind::Pipeline, "a")
                .map(|c| c.version),
            Some(7)
        );
        assert!(
            Arc::ptr_eq(&snapshot, &source.snapshot().expect("again")),
            "cached until the next commit"
        );

        let state = StoreAgentState::new(store.clone());
        let record = AgentRecord::new(InstanceId::from_wire(b"agent-1").expect("id"), 5);
        state
            .write_batch(&AgentStateBatch {
                upserts: vec![record.clone()],
                removals: Vec::new(),
            })
            .expect("write");
        assert_eq!(state.load_all().expect("load"), vec![record.clone()]);
        assert!(
            store
                .read_all_entries()
                .await
                .expect("entries")
                .iter()
                .all(|e| !e.key.catalog.is_rule())
        );
        state
            .write_batch(&AgentStateBatch {
                upserts: Vec::new(),
                removals: vec![record.instance_id],
            })
            .expect("remove");
        assert!(state.load_all().expect("load").is_empty());
    }
}
