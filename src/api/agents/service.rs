//! [`AgentService`]: the agent protocol of one node, between the HTTP handlers and the pure
//! decisions. It reads the desired state from the [`AgentConfigSource`], keeps agent state in the
//! [`AgentRegistry`], and carries out what [`protocol`](super::protocol) decides.
//!
//! Requests arrive decoded and leave as messages; bytes, HTTP and the error body are the
//! router's business. The clock is injected so tests control time.

use std::sync::{Arc, RwLock};

use serde::Serialize;

use super::error::{ProtocolError, ok_common_response};
use super::liveness::{Liveness, LivenessPolicy};
use crate::control::agents::proto;
use super::protocol::{
    DetailDelivery, KnownAgent, check_fetch, check_report, decide_heartbeat, merge_report,
    plan_fetch, plan_holding_fetch,
};
use super::registry::{AgentRegistry, FlushReport, RegistryError, default_max_agents};
use super::snapshot::ConfigSnapshot;
use super::source::AgentConfigSource;
use super::state::AgentRecord;

/// Largest request body, before and after gzip decompression.
pub fn default_max_body_bytes() -> usize {
    4 * 1024 * 1024
}

/// The agent protocol settings of one node (built by the node from its validated config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentServiceSettings {
    pub detail_delivery: DetailDelivery,
    /// When set, every request must carry it in [`AGENT_TOKEN_HEADER`](super::AGENT_TOKEN_HEADER).
    /// The 3.x agent cannot send headers, so this is for agents behind a proxy that adds it.
    pub agent_token: Option<String>,
    pub liveness: LivenessPolicy,
    /// Agents one node holds in memory at most.
    pub max_agents: usize,
    pub max_body_bytes: usize,
}

impl Default for AgentServiceSettings {
    fn default() -> Self {
        AgentServiceSettings {
            detail_delivery: DetailDelivery::Inline,
            agent_token: None,
            liveness: LivenessPolicy::default(),
            max_agents: default_max_agents(),
            max_body_bytes: default_max_body_bytes(),
        }
    }
}

/// Milliseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// An agent with its liveness, as the management API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentView {
    #[serde(flatten)]
    pub record: AgentRecord,
    pub liveness: Liveness,
}

/// What one maintenance pass did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MaintenanceReport {
    pub forgotten: usize,
    pub flushed: FlushReport,
}

pub struct AgentService {
    settings: AgentServiceSettings,
    agent_token: RwLock<Option<String>>,
    source: Arc<dyn AgentConfigSource>,
    registry: Arc<AgentRegistry>,
    clock: Clock,
    /// True once this node's desired state is confirmed against the cluster; until then
    /// heartbeats are recorded but answered with nothing to do (see `plan_holding_heartbeat`).
    caught_up: tokio::sync::watch::Receiver<bool>,
    /// Agent records stored cut to their bounds (see `agent::bounds`).
    truncated_records: std::sync::atomic::AtomicU64,
}

impl AgentService {
    pub fn new(
        settings: AgentServiceSettings,
        source: Arc<dyn AgentConfigSource>,
        registry: Arc<AgentRegistry>,
    ) -> AgentService {
        let agent_token = RwLock::new(settings.agent_token.clone().filter(|t| !t.is_empty()));
        AgentService {
            settings,
            agent_token,
            source,
            registry,
            clock: Arc::new(crate::base::clock::now_ms),
            caught_up: tokio::sync::watch::channel(true).1,
            truncated_records: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Serves configs only once `caught_up` says so (a clustered node, after its first sync).
    /// Without it a node serves from the start (a lone node is its own source of truth).
    pub fn with_catch_up(mut self, caught_up: tokio::sync::watch::Receiver<bool>) -> AgentService {
        self.caught_up = caught_up;
        self
    }

    /// Whether configs are being served (false while holding back before the first sync).
    pub fn serving(&self) -> bool {
        *self.caught_up.borrow()
    }

    /// Replaces the wall clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> AgentService {
        self.clock = clock;
        self
    }

    pub fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    pub fn settings(&self) -> &AgentServiceSettings {
        &self.settings
    }

    pub fn registry(&self) -> &Arc<AgentRegistry> {
        &self.registry
    }

    /// Replaces the agent token at run time (config reload); `None` or empty turns the check off.
    pub fn set_agent_token(&self, token: Option<String>) {
        *self.agent_token.write().unwrap_or_else(|p| p.into_inner()) =
            token.filter(|t| !t.is_empty());
    }

    /// Checks the token header value, if a token is configured.
    pub fn check_token(&self, presented: Option<&[u8]>) -> Result<(), ProtocolError> {
        let expected = self
            .agent_token
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match expected {
            None => Ok(()),
            Some(expected)
                if presented.is_some_and(|p| crate::base::secret::constant_time_eq(p, expected.as_bytes())) =>
            {
                Ok(())
            }
            Some(_) => Err(ProtocolError::Unauthorized {
                header: super::AGENT_TOKEN_HEADER,
            }),
        }
    }

    /// The desired state this node serves now (for the management views).
    pub fn desired(&self) -> Result<Arc<ConfigSnapshot>, super::source::SourceError> {
        self.source.snapshot()
    }

    /// Runs `call` (a heartbeat, a fetch, a management view) from an async thread: inline when
    /// the snapshot is cached, on the blocking pool when it must be rebuilt from storage. None:
    /// the runtime is shutting down and the call never ran.
    pub async fn off_async<T: Send + 'static>(
        self: &Arc<Self>,
        call: impl FnOnce(&AgentService) -> T + Send + 'static,
    ) -> Option<T> {
        if self.source.is_current() {
            return Some(call(self));
        }
        let service = Arc::clone(self);
        match tokio::task::spawn_blocking(move || call(&service)).await {
            Ok(value) => Some(value),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }

    fn snapshot(&self) -> Result<Arc<ConfigSnapshot>, ProtocolError> {
        self.source
            .snapshot()
            .map_err(|e| ProtocolError::ServerBusy {
                reason: e.to_string(),
            })
    }

    /// `/Agent/Heartbeat`.
    pub fn heartbeat(
        &self,
        request: &proto::HeartbeatRequest,
    ) -> Result<proto::HeartbeatResponse, ProtocolError> {
        let now_ms = self.now_ms();
        let instance_id = crate::control::agents::model::InstanceId::from_wire(&request.instance_id)?;
        // Read, decide, write back without holding a lock across the decision: an agent sends one
        // heartbeat at a time, so two concurrent heartbeats of one instance do not happen in
        // practice, and if they did the later write would simply win.
        let remembered = self.registry.get(&instance_id);
        let snapshot = match self.serving() {
            true => Some(self.snapshot()?),
            false => None,
        };
        let (record, response) = decide_heartbeat(
            request,
            remembered.as_ref(),
            snapshot.as_deref(),
            self.settings.detail_delivery,
            now_ms,
        )?;
        self.note_truncation(remembered.as_ref(), &record);
        self.registry.upsert(record).map_err(registry_busy)?;
        Ok(response)
    }

    /// Counts records stored cut (see `agent::bounds`), and warns when an agent's cut fields
    /// change (so a misbehaving agent is one line, not one per heartbeat).
    fn note_truncation(&self, remembered: Option<&AgentRecord>, record: &AgentRecord) {
        if record.truncated.is_empty() {
            return;
        }
        self.truncated_records.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if remembered.is_none_or(|r| r.truncated != record.truncated) {
            tracing::warn!(
                instance = %record.instance_id,
                fields = ?record.truncated,
                "agent sent more than the server stores; fields cut (see agent::bounds)"
            );
        }
    }

    /// How many agent records were stored cut to their bounds since start.
    pub fn truncated_records(&self) -> u64 {
        self.truncated_records.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `/Agent/FetchPipelineConfig`, `/Agent/FetchInstanceConfig` and `/Agent/FetchConfig`.
    pub fn fetch_config(
        &self,
        request: &proto::FetchConfigRequest,
    ) -> Result<proto::FetchConfigResponse, ProtocolError> {
        let now_ms = self.now_ms();
        let instance_id = check_fetch(request)?;
        if !self.serving() {
            return Ok(plan_holding_fetch(request));
        }
        let snapshot = self.snapshot()?;
        let record = self.registry.get(&instance_id);
        let response = match &record {
            Some(record) => {
                let desired = snapshot.desired_for(&record.identity(), now_ms);
                plan_fetch(
                    request,
                    &snapshot,
                    Some(KnownAgent {
                        record,
                        desired: &desired,
                    }),
                    now_ms,
                )
            }
            None => plan_fetch(request, &snapshot, None, now_ms),
        };
        Ok(response)
    }

    /// `/Agent/ReportStatus`.
    pub fn report_status(
        &self,
        request: &proto::ReportStatusRequest,
    ) -> Result<proto::ReportStatusResponse, ProtocolError> {
        let instance_id = check_report(request)?;
        let record =
            self.registry
                .get(&instance_id)
                .ok_or_else(|| ProtocolError::UnknownAgent {
                    instance_id: instance_id.to_string(),
                })?;
        let merged = merge_report(request, &record);
        self.note_truncation(Some(&record), &merged);
        self.registry.upsert(merged).map_err(registry_busy)?;
        Ok(proto::ReportStatusResponse {
            request_id: request.request_id.clone(),
            common_response: ok_common_response(),
        })
    }

    /// Every agent this node holds, with its liveness now.
    pub fn agents(&self) -> Vec<AgentView> {
        let now_ms = self.now_ms();
        self.registry
            .list()
            .into_iter()
            .map(|record| {
                let liveness = self
                    .settings
                    .liveness
                    .liveness(record.last_heartbeat_ms, now_ms);
                AgentView { record, liveness }
            })
            .collect()
    }

    /// One unit of background work: forget agents past the retention, then flush changed agents
    /// to the store in one batch.
    pub fn maintain(&self) -> Result<MaintenanceReport, RegistryError> {
        let forgotten = self
            .registry
            .forget_expired(self.now_ms(), &self.settings.liveness)
            .len();
        let flushed = self.registry.flush()?;
        Ok(MaintenanceReport { forgotten, flushed })
    }
}

fn registry_busy(error: RegistryError) -> ProtocolError {
    ProtocolError::ServerBusy {
        reason: error.to_string(),
    }
}

