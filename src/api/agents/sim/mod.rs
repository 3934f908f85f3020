//! A protocol client that behaves like the LoongCollector 3.x agent (`CommonConfigProvider`), for
//! tests and for load generation ([`run_agents`]).
//!
//! What it copies from the real agent, because a server must cope with exactly that:
//! - every heartbeat carries the full state and never sets `FullState`; `ReportFullState` and the
//!   server's capabilities are ignored;
//! - `instance_id` is `<uuid>_<ip>_<starttime>`, new on every restart, and `sequence_num` starts
//!   at 0 and goes up only after a heartbeat got an HTTP answer;
//! - capabilities are 3 (pipeline and instance configs) unless a test asks for onetime too;
//! - when the response has `FetchContinuousPipelineConfigDetail`, it calls both
//!   `/Agent/FetchPipelineConfig` and `/Agent/FetchInstanceConfig`, asking with the names and
//!   versions the heartbeat announced (including `-1`), and applies what the fetch returns;
//! - a detail that is not a JSON object fails (FAILED); a good one is APPLYING, and APPLIED on the
//!   next heartbeat (the agent's config watcher confirms in between); version `-1` deletes.
//!
//! Unlike the real agent, it reports a non-zero `common_response.status` as an error, so tests and
//! benchmarks see server errors.

mod bench;
mod client;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};


pub use bench::{AgentBenchReport, AgentBenchSettings, run_agents};
pub use client::{AgentClient, RawReply, SimError};

use crate::control::agents::model::{ConfigKind, DELETE_VERSION};
use crate::control::agents::proto;
use super::state::ApplyStatus;

/// The agent type the 3.x agent reports.
pub const AGENT_TYPE: &str = "LoongCollector";

/// The capabilities the 3.x agent advertises: pipeline and instance configs.
pub const REAL_AGENT_CAPABILITIES: u64 =
    proto::AGENT_ACCEPTS_PIPELINE | proto::AGENT_ACCEPTS_INSTANCE;

/// Who a simulated agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAgentSpec {
    pub ip: String,
    pub hostname: String,
    pub tags: Vec<(String, String)>,
    pub capabilities: u64,
    pub version: String,
}

impl SimAgentSpec {
    /// Agent number `index` of a fleet: a distinct 10.x.y.z address and host name.
    pub fn numbered(index: usize) -> SimAgentSpec {
        let ip = format!(
            "10.{}.{}.{}",
            (index >> 16) & 0xff,
            (index >> 8) & 0xff,
            index & 0xff
        );
        SimAgentSpec {
            ip,
            hostname: format!("sim-agent-{index}"),
            tags: Vec::new(),
            capabilities: REAL_AGENT_CAPABILITIES,
            version: "3.3.2".to_string(),
        }
    }
}

/// A config the simulated agent holds (what it wrote to `common_v2/<name>.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldConfig {
    pub version: i64,
    pub status: ApplyStatus,
    pub detail: Vec<u8>,
}

/// A onetime command the simulated agent received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCommand {
    pub detail: Vec<u8>,
    pub expire_time_s: i64,
    pub status: ApplyStatus,
}

/// What one heartbeat cycle did.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRound {
    pub response: proto::HeartbeatResponse,
    /// Heartbeat round trip only (not the fetches).
    pub latency: Duration,
    pub fetches: usize,
    pub fetch_errors: Vec<SimError>,
    pub applied: usize,
    pub deleted: usize,
    pub commands_received: usize,
}

pub struct SimAgent {
    spec: SimAgentSpec,
    instance_id: String,
    startup_time_s: i64,
    sequence_num: u64,
    pipeline: BTreeMap<String, HeldConfig>,
    instance: BTreeMap<String, HeldConfig>,
    onetime: BTreeMap<String, HeldCommand>,
}


/// The 3.x agent parses a detail as JSON and needs an object (it adds `"version"` to it).
fn valid_detail(detail: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<serde_json::Value>(detail),
        Ok(serde_json::Value::Object(_))
    )
}

impl SimAgent {
    /// A freshly started agent with nothing on disk.
    pub fn new(spec: SimAgentSpec, now_s: i64) -> SimAgent {
        let instance_id = format!("{}_{}_{now_s}", crate::base::ids::random_uuid(), spec.ip);
        SimAgent {
            spec,
            instance_id,
            startup_time_s: now_s,
            sequence_num: 0,
            pipeline: BTreeMap::new(),
            instance: BTreeMap::new(),
            onetime: BTreeMap::new(),
        }
    }

    /// A process restart: new instance id, sequence from 0, configs reloaded from disk as
    /// APPLYING until the watcher confirms them.
    pub fn restart(&mut self, now_s: i64) {
        self.instance_id = format!("{}_{}_{now_s}", crate::base::ids::random_uuid(), self.spec.ip);
        self.startup_time_s = now_s;
        self.sequence_num = 0;
        for held in self.pipeline.values_mut().chain(self.instance.values_mut()) {
            held.status = ApplyStatus::Applying;
        }
    }

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub fn sequence_num(&self) -> u64 {
        self.sequence_num
    }

    pub fn configs(&self, kind: ConfigKind) -> &BTreeMap<String, HeldConfig> {
        match kind {
            ConfigKind::Pipeline => &self.pipeline,
            ConfigKind::Instance => &self.instance,
        }
    }

    pub fn commands(&self) -> &BTreeMap<String, HeldCommand> {
        &self.onetime
    }

    fn report(configs: &BTreeMap<String, HeldConfig>) -> Vec<proto::ConfigInfo> {
        configs
            .iter()
            .map(|(name, held)| proto::ConfigInfo {
                name: name.clone(),
                version: held.version,
                status: held.status.to_wire() as i32,
                ..Default::default()
            })
            .collect()
    }

    /// The next heartbeat. The config watcher has run since the last one, so what was APPLYING
    /// is APPLIED now. Expired commands are no longer reported.
    pub fn build_heartbeat(&mut self, now_s: i64) -> proto::HeartbeatRequest {
        for held in self.pipeline.values_mut().chain(self.instance.values_mut()) {
            if held.status == ApplyStatus::Applying {
                held.status = ApplyStatus::Applied;
            }
        }
        let now_ms = u64::try_from(now_s).unwrap_or(0).saturating_mul(1000);
        let mut extras = std::collections::HashMap::new();
        extras.insert("osDetail".to_string(), b"Linux; sim".to_vec());
        proto::HeartbeatRequest {
            request_id: crate::base::ids::random_uuid().into_bytes(),
            sequence_num: self.sequence_num,
            capabilities: self.spec.capabilities,
            instance_id: self.instance_id.clone().into_bytes(),
            agent_type: AGENT_TYPE.to_string(),
            attributes: Some(proto::AgentAttributes {
                version: self.spec.version.clone().into_bytes(),
                ip: self.spec.ip.clone().into_bytes(),
                hostname: self.spec.hostname.clone().into_bytes(),
                hostid: Vec::new(),
                extras,
            }),
            tags: self
                .spec
                .tags
                .iter()
                .map(|(name, value)| proto::AgentGroupTag {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            running_status: "running".to_string(),
            startup_time: self.startup_time_s,
            continuous_pipeline_configs: Self::report(&self.pipeline),
            instance_configs: Self::report(&self.instance),
            onetime_pipeline_configs: self
                .onetime
                .iter()
                .filter(|(_, c)| !crate::control::agents::model::expired(c.expire_time_s, now_ms))
                .map(|(name, c)| proto::ConfigInfo {
                    name: name.clone(),
                    version: 1,
                    status: c.status.to_wire() as i32,
                    ..Default::default()
                })
                .collect(),
            flags: 0,
            opaque: Vec::new(),
        }
    }

    /// Applies config updates like `UpdateRemotePipelineConfig`: `-1` deletes, anything else is
    /// written (APPLYING) or fails (FAILED). Returns (applied, deleted).
    pub fn apply_updates(
        &mut self,
        kind: ConfigKind,
        updates: &[proto::ConfigDetail],
    ) -> (usize, usize) {
        let held = match kind {
            ConfigKind::Pipeline => &mut self.pipeline,
            ConfigKind::Instance => &mut self.instance,
        };
        let (mut applied, mut deleted) = (0, 0);
        for update in updates {
            if update.version == DELETE_VERSION {
                held.remove(&update.name);
                deleted += 1;
                continue;
            }
            let status = if valid_detail(&update.detail) {
                ApplyStatus::Applying
            } else {
                ApplyStatus::Failed
            };
            held.insert(
                update.name.clone(),
                HeldConfig {
                    version: update.version,
                    status,
                    detail: update.detail.clone(),
                },
            );
            applied += 1;
        }
        (applied, deleted)
    }

    /// Accepts onetime commands (only with the onetime capability), skipping expired ones.
    pub fn apply_commands(&mut self, commands: &[proto::CommandDetail], now_s: i64) -> usize {
        if self.spec.capabilities & proto::AGENT_ACCEPTS_ONETIME == 0 {
            return 0;
        }
        let now_ms = u64::try_from(now_s).unwrap_or(0).saturating_mul(1000);
        let mut received = 0;
        for command in commands
            .iter()
            .filter(|c| !crate::control::agents::model::expired(c.expire_time, now_ms))
        {
            let status = if valid_detail(&command.detail) {
                ApplyStatus::Applied
            } else {
                ApplyStatus::Failed
            };
            let held = HeldCommand {
                detail: command.detail.clone(),
                expire_time_s: command.expire_time,
                status,
            };
            self.onetime.insert(command.name.clone(), held);
            received += 1;
        }
        received
    }

    /// One `GetConfigUpdate` cycle: heartbeat, fetch if told to, apply.
    pub async fn heartbeat(
        &mut self,
        client: &AgentClient,
        now_s: i64,
    ) -> Result<HeartbeatRound, SimError> {
        let request = self.build_heartbeat(now_s);
        let started = Instant::now();
        let outcome = client
            .call::<proto::HeartbeatResponse>("/Agent/Heartbeat", &request)
            .await;
        let latency = started.elapsed();
        if !matches!(
            outcome,
            Err(SimError::Transport { .. } | SimError::Timeout { .. })
        ) {
            self.sequence_num += 1;
        }
        let response = outcome?;
        let mut round = HeartbeatRound {
            latency,
            ..HeartbeatRound::default()
        };
        let (pipeline, instance) = if response.flags & proto::RESPONSE_FETCH_PIPELINE_DETAIL != 0 {
            let pipeline = self
                .fetch(
                    client,
                    "/Agent/FetchPipelineConfig",
                    ConfigKind::Pipeline,
                    &response,
                    &mut round,
                )
                .await;
            let instance = self
                .fetch(
                    client,
                    "/Agent/FetchInstanceConfig",
                    ConfigKind::Instance,
                    &response,
                    &mut round,
                )
                .await;
            (pipeline, instance)
        } else {
            (
                response.continuous_pipeline_config_updates.clone(),
                response.instance_config_updates.clone(),
            )
        };
        for (kind, updates) in [
            (ConfigKind::Pipeline, pipeline),
            (ConfigKind::Instance, instance),
        ] {
            let (applied, deleted) = self.apply_updates(kind, &updates);
            round.applied += applied;
            round.deleted += deleted;
        }
        round.commands_received =
            self.apply_commands(&response.onetime_pipeline_config_updates, now_s);
        round.response = response;
        Ok(round)
    }

    /// `FetchPipelineConfigFromServer` / `FetchInstanceConfigFromServer`: asks with the
    /// announced names and versions, keeps only its own list of the answer.
    async fn fetch(
        &self,
        client: &AgentClient,
        path: &str,
        kind: ConfigKind,
        response: &proto::HeartbeatResponse,
        round: &mut HeartbeatRound,
    ) -> Vec<proto::ConfigDetail> {
        let announced = match kind {
            ConfigKind::Pipeline => &response.continuous_pipeline_config_updates,
            ConfigKind::Instance => &response.instance_config_updates,
        };
        let asked: Vec<proto::ConfigInfo> = announced
            .iter()
            .map(|u| proto::ConfigInfo {
                name: u.name.clone(),
                version: u.version,
                ..Default::default()
            })
            .collect();
        let mut request = proto::FetchConfigRequest {
            request_id: crate::base::ids::random_uuid().into_bytes(),
            instance_id: self.instance_id.clone().into_bytes(),
            ..Default::default()
        };
        match kind {
            ConfigKind::Pipeline => request.continuous_pipeline_configs = asked,
            ConfigKind::Instance => request.instance_configs = asked,
        }
        round.fetches += 1;
        match client
            .call::<proto::FetchConfigResponse>(path, &request)
            .await
        {
            Ok(fetched) => match kind {
                ConfigKind::Pipeline => fetched.continuous_pipeline_config_updates,
                ConfigKind::Instance => fetched.instance_config_updates,
            },
            Err(e) => {
                round.fetch_errors.push(e);
                Vec::new()
            }
        }
    }
}
