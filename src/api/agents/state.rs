//! What the server remembers about one agent ([`AgentRecord`]), and the seam that persists it:
//! [`AgentStateStore`], written in batches and read once at start, with an in-memory twin.
//!
//! The record keeps what the agent last reported (attributes, tags, capabilities, running status,
//! the status of every config it holds) plus what the server observed (sequence number, first and
//! last heartbeat). Byte fields of the protocol are kept as text (lossy UTF-8): agents send text
//! there, and the management API shows them as text.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::control::agents::matching::parse_agent_ip;
use crate::control::agents::model::AgentIdentity;
use crate::control::agents::model::{AgentTag, InstanceId};
use crate::control::agents::proto;

#[derive(Debug, thiserror::Error)]
pub enum AgentStoreError {
    #[error("agent state store unavailable: {reason}")]
    Unavailable { reason: String },
    #[error("stored agent state for {instance_id:?} is unreadable: {reason}")]
    Corrupt { instance_id: String, reason: String },
}

/// The apply status an agent reports for a config or command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApplyStatus {
    Unset,
    Applying,
    Applied,
    Failed,
}

impl ApplyStatus {
    /// Unknown numbers (from a newer agent) count as unset rather than failing the request.
    pub fn from_wire(status: i32) -> ApplyStatus {
        match proto::ConfigStatus::try_from(status) {
            Ok(proto::ConfigStatus::Applying) => ApplyStatus::Applying,
            Ok(proto::ConfigStatus::Applied) => ApplyStatus::Applied,
            Ok(proto::ConfigStatus::Failed) => ApplyStatus::Failed,
            Ok(proto::ConfigStatus::Unset) | Err(_) => ApplyStatus::Unset,
        }
    }

    pub fn to_wire(self) -> proto::ConfigStatus {
        match self {
            ApplyStatus::Unset => proto::ConfigStatus::Unset,
            ApplyStatus::Applying => proto::ConfigStatus::Applying,
            ApplyStatus::Applied => proto::ConfigStatus::Applied,
            ApplyStatus::Failed => proto::ConfigStatus::Failed,
        }
    }
}

/// One config (or onetime command) as the agent reported holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStatusRecord {
    pub name: String,
    /// `-1` when the agent reports a config it has deleted.
    pub version: i64,
    pub status: ApplyStatus,
    #[serde(default)]
    pub message: String,
}

impl ConfigStatusRecord {
    pub fn from_wire(info: &proto::ConfigInfo) -> ConfigStatusRecord {
        ConfigStatusRecord {
            name: info.name.clone(),
            version: info.version,
            status: ApplyStatus::from_wire(info.status),
            message: info.message.clone(),
        }
    }
}

/// `AgentAttributes`, as text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AttributesRecord {
    pub version: String,
    pub ip: String,
    pub hostname: String,
    pub hostid: String,
    #[serde(default)]
    pub extras: BTreeMap<String, String>,
}

impl AttributesRecord {
    pub fn from_wire(attributes: &proto::AgentAttributes) -> AttributesRecord {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        AttributesRecord {
            version: text(&attributes.version),
            ip: text(&attributes.ip),
            hostname: text(&attributes.hostname),
            hostid: text(&attributes.hostid),
            extras: attributes
                .extras
                .iter()
                .map(|(k, v)| (k.clone(), text(v)))
                .collect(),
        }
    }
}

/// Everything remembered about one agent instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub instance_id: InstanceId,
    pub agent_type: String,
    pub attributes: AttributesRecord,
    pub tags: Vec<AgentTag>,
    /// `AgentCapabilities` bits.
    pub capabilities: u64,
    pub running_status: String,
    /// As the agent reports it (the 3.x agent: Unix seconds).
    pub startup_time: i64,
    pub sequence_num: u64,
    pub first_seen_ms: u64,
    pub last_heartbeat_ms: u64,
    pub pipeline_configs: Vec<ConfigStatusRecord>,
    pub instance_configs: Vec<ConfigStatusRecord>,
    pub onetime_commands: Vec<ConfigStatusRecord>,
    /// The fields the server cut or dropped entries of to keep the record within its bounds
    /// (see `agent::bounds`); empty when it holds everything the agent sent.
    #[serde(default)]
    pub truncated: Vec<String>,
}

impl AgentRecord {
    /// A record for an agent first heard of at `now_ms`, before its request is merged in.
    pub fn new(instance_id: InstanceId, now_ms: u64) -> AgentRecord {
        AgentRecord {
            instance_id,
            agent_type: String::new(),
            attributes: AttributesRecord::default(),
            tags: Vec::new(),
            capabilities: 0,
            running_status: String::new(),
            startup_time: 0,
            sequence_num: 0,
            first_seen_ms: now_ms,
            last_heartbeat_ms: now_ms,
            pipeline_configs: Vec::new(),
            instance_configs: Vec::new(),
            onetime_commands: Vec::new(),
            truncated: Vec::new(),
        }
    }

    /// What group matching looks at.
    pub fn identity(&self) -> AgentIdentity<'_> {
        AgentIdentity {
            tags: &self.tags,
            ip: parse_agent_ip(&self.attributes.ip),
        }
    }

    pub fn accepts(&self, capability: u64) -> bool {
        self.capabilities & capability != 0
    }
}

/// One write to the agent state store: records to upsert and instances to forget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentStateBatch {
    pub upserts: Vec<AgentRecord>,
    pub removals: Vec<InstanceId>,
}

impl AgentStateBatch {
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.removals.is_empty()
    }
}

/// Durable agent state. Writes are batched by the [`AgentRegistry`](super::registry::AgentRegistry);
/// a batch is applied as a whole or not at all.
pub trait AgentStateStore: Send + Sync {
    fn write_batch(&self, batch: &AgentStateBatch) -> Result<(), AgentStoreError>;
    fn load_all(&self) -> Result<Vec<AgentRecord>, AgentStoreError>;
}

/// The in-memory twin of the agent state store. Counts batches, and can be made to fail, so
/// tests can see batching and failure handling.
#[derive(Default)]
pub struct MemAgentStateStore {
    records: Mutex<HashMap<InstanceId, AgentRecord>>,
    batches_written: Mutex<usize>,
    failing: Mutex<bool>,
}

impl MemAgentStateStore {
    pub fn new() -> MemAgentStateStore {
        MemAgentStateStore::default()
    }

    /// Makes every later write fail (or succeed again).
    pub fn set_failing(&self, failing: bool) {
        *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = failing;
    }

    pub fn batches_written(&self) -> usize {
        *self
            .batches_written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: &InstanceId) -> Option<AgentRecord> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.records.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AgentStateStore for MemAgentStateStore {
    fn write_batch(&self, batch: &AgentStateBatch) -> Result<(), AgentStoreError> {
        if *self.failing.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(AgentStoreError::Unavailable {
                reason: "failing on purpose (test)".to_string(),
            });
        }
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        for record in &batch.upserts {
            records.insert(record.instance_id.clone(), record.clone());
        }
        for id in &batch.removals {
            records.remove(id);
        }
        *self
            .batches_written
            .lock()
            .unwrap_or_else(|p| p.into_inner()) += 1;
        Ok(())
    }

    fn load_all(&self) -> Result<Vec<AgentRecord>, AgentStoreError> {
        Ok(self
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect())
    }
}
