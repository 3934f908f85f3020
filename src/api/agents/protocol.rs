//! The protocol decisions, as pure functions: fold a request into what the server remembers about
//! the agent, and decide the response from that and the desired state. No IO and no clock: the
//! caller passes `now_ms`.
//!
//! A heartbeat goes through three steps, which [`AgentService`](super::service::AgentService)
//! chains: [`merge_heartbeat`] (request × remembered → record, and whether to ask for full
//! state), then [`ConfigSnapshot::desired_for`] on the merged record, then [`plan_heartbeat`]
//! (record × desired → response). The rules, and why:
//!
//! - **Sequence numbers.** An unknown agent, or `remembered + 1 != sequence_num`, gets
//!   `ReportFullState`, and the request is still processed and its sequence number stored;
//!   answering early would leave the stored number stale and the agent asked forever.
//! - **Compression.** A request that carries no state (no `FullState` flag and only
//!   `instance_id`/`sequence_num`) keeps everything remembered. A request with state replaces what
//!   it carries; the config lists are then authoritative even when empty, because the 3.x agent
//!   always sends its full state but never sets `FullState`.
//! - **Capabilities.** A config kind or onetime commands go only to agents that advertise them.
//! - **Versions.** Any difference between the held and the assigned version is an update. A config
//!   the agent holds but none of its groups has any more gets version `-1`. Version `0` cannot
//!   occur: snapshots refuse it.
//! - **Detail.** Inline, or (fetch mode) left out with `FetchContinuousPipelineConfigDetail |
//!   FetchInstanceConfigDetail` set. The 3.x agent reads only the first bit, for both kinds, and
//!   calls both fetch paths; an agent that follows the spec reads each bit for its kind. Setting
//!   both serves either. The bits are set only when something is to be fetched, since the 3.x
//!   agent calls both fetch paths whenever the first is set.
//! - **Onetime commands.** Sent while the agent has neither reported nor (from earlier reports)
//!   been remembered to hold them, until they expire.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::{ProtocolError, ok_common_response};
use crate::control::agents::model::{ConfigKind, DELETE_VERSION, InstanceId};
use crate::control::agents::proto;
use super::snapshot::{ConfigSnapshot, DeliverableConfig, DesiredState};
use super::state::{AgentRecord, AttributesRecord, ConfigStatusRecord};

/// Most entries accepted in one config list of a request.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// Most tags accepted in one heartbeat.
pub const MAX_TAGS: usize = 256;

/// The server remembers attributes and the status of all three config kinds, so agents that
/// compress heartbeats may leave them out.
pub const SERVER_CAPABILITIES: u64 = proto::SERVER_REMEMBERS_ATTRIBUTE
    | proto::SERVER_REMEMBERS_PIPELINE_STATUS
    | proto::SERVER_REMEMBERS_INSTANCE_STATUS
    | proto::SERVER_REMEMBERS_ONETIME_STATUS;

/// How config details reach agents; chosen per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DetailDelivery {
    /// In the heartbeat response.
    #[default]
    Inline,
    /// Through the fetch paths; heartbeats carry names and versions only.
    Fetch,
}

/// A heartbeat folded into the remembered state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedHeartbeat {
    pub record: AgentRecord,
    /// The response must carry `ReportFullState`.
    pub report_full_state: bool,
    /// The request carried state (as opposed to a compressed heartbeat).
    pub carried_state: bool,
}

fn check_list(list: &'static str, count: usize, max: usize) -> Result<(), ProtocolError> {
    if count > max {
        return Err(ProtocolError::TooManyEntries { list, count, max });
    }
    Ok(())
}

fn check_config_lists(
    pipeline: &[proto::ConfigInfo],
    instance: &[proto::ConfigInfo],
    onetime: &[proto::ConfigInfo],
) -> Result<(), ProtocolError> {
    check_list(
        "continuous_pipeline_configs",
        pipeline.len(),
        MAX_LIST_ENTRIES,
    )?;
    check_list("instance_configs", instance.len(), MAX_LIST_ENTRIES)?;
    check_list("onetime_pipeline_configs", onetime.len(), MAX_LIST_ENTRIES)
}

fn records(infos: &[proto::ConfigInfo]) -> Vec<ConfigStatusRecord> {
    infos.iter().map(ConfigStatusRecord::from_wire).collect()
}

/// Reported entries first, then remembered ones the report does not mention: the spec's
/// "reported + known" state for onetime commands, which agents may stop reporting.
fn union_onetime(
    remembered: &[ConfigStatusRecord],
    reported: &[proto::ConfigInfo],
) -> Vec<ConfigStatusRecord> {
    let mut merged = records(reported);
    let mentioned: BTreeSet<String> = merged.iter().map(|r| r.name.clone()).collect();
    merged.extend(
        remembered
            .iter()
            .filter(|r| !mentioned.contains(&r.name))
            .cloned(),
    );
    merged
}

/// Folds a heartbeat into what is remembered about the agent (if anything).
pub fn merge_heartbeat(
    request: &proto::HeartbeatRequest,
    remembered: Option<&AgentRecord>,
    now_ms: u64,
) -> Result<MergedHeartbeat, ProtocolError> {
    let instance_id = InstanceId::from_wire(&request.instance_id)?;
    check_config_lists(
        &request.continuous_pipeline_configs,
        &request.instance_configs,
        &request.onetime_pipeline_configs,
    )?;
    check_list("tags", request.tags.len(), MAX_TAGS)?;

    let declared_full = request.flags & proto::REQUEST_FULL_STATE != 0;
    let carried_state = declared_full
        || !request.agent_type.is_empty()
        || request.attributes.is_some()
        || request.capabilities != 0
        || request.startup_time != 0
        || !request.running_status.is_empty()
        || !request.tags.is_empty()
        || !request.continuous_pipeline_configs.is_empty()
        || !request.instance_configs.is_empty()
        || !request.onetime_pipeline_configs.is_empty();
    let report_full_state = match remembered {
        None => true,
        Some(known) => known.sequence_num.checked_add(1) != Some(request.sequence_num),
    };

    let mut record = remembered
        .cloned()
        .unwrap_or_else(|| AgentRecord::new(instance_id, now_ms));
    if carried_state {
        // With FullState every field is authoritative; without it, absent fields keep their
        // remembered value (only the config lists are always taken, see the module docs).
        if declared_full || !request.agent_type.is_empty() {
            record.agent_type = request.agent_type.clone();
        }
        if declared_full || request.attributes.is_some() {
            record.attributes = request
                .attributes
                .as_ref()
                .map(AttributesRecord::from_wire)
                .unwrap_or_default();
        }
        if declared_full || !request.tags.is_empty() {
            record.tags = request
                .tags
                .iter()
                .map(|t| crate::control::agents::model::AgentTag {
                    name: t.name.clone(),
                    value: t.value.clone(),
                })
                .collect();
        }
        if declared_full || request.capabilities != 0 {
            record.capabilities = request.capabilities;
        }
        if declared_full || !request.running_status.is_empty() {
            record.running_status = request.running_status.clone();
        }
        if declared_full || request.startup_time != 0 {
            record.startup_time = request.startup_time;
        }
        record.pipeline_configs = records(&request.continuous_pipeline_configs);
        record.instance_configs = records(&request.instance_configs);
        record.onetime_commands =
            union_onetime(&record.onetime_commands, &request.onetime_pipeline_configs);
    }
    record.sequence_num = request.sequence_num;
    record.last_heartbeat_ms = now_ms;
    super::bounds::bound(&mut record);
    Ok(MergedHeartbeat {
        record,
        report_full_state,
        carried_state,
    })
}

/// Drops remembered onetime entries that matter no more: neither in this report nor a command
/// still live for the agent. Keeps the history bounded by the live commands.
pub fn prune_onetime_history(
    record: &mut AgentRecord,
    desired: &DesiredState,
    reported: &[proto::ConfigInfo],
) {
    let reported: BTreeSet<&str> = reported.iter().map(|i| i.name.as_str()).collect();
    record
        .onetime_commands
        .retain(|r| reported.contains(r.name.as_str()) || desired.commands.contains_key(&r.name));
}

/// The whole heartbeat decision, as the service makes it: merge the request into what is
/// remembered, then answer from `snapshot`, or hold back when there is none yet (a node whose
/// state is not confirmed against the cluster). Returns the record to keep and the answer.
pub fn decide_heartbeat(
    request: &proto::HeartbeatRequest,
    remembered: Option<&AgentRecord>,
    snapshot: Option<&ConfigSnapshot>,
    delivery: DetailDelivery,
    now_ms: u64,
) -> Result<(AgentRecord, proto::HeartbeatResponse), ProtocolError> {
    let merged = merge_heartbeat(request, remembered, now_ms)?;
    let Some(snapshot) = snapshot else {
        let response = plan_holding_heartbeat(request.request_id.clone(), merged.report_full_state);
        return Ok((merged.record, response));
    };
    let mut record = merged.record;
    let desired = snapshot.desired_for(&record.identity(), now_ms);
    if merged.carried_state {
        prune_onetime_history(&mut record, &desired, &request.onetime_pipeline_configs);
    }
    let response = plan_heartbeat(
        request.request_id.clone(),
        &record,
        &desired,
        merged.report_full_state,
        delivery,
    );
    Ok((record, response))
}

/// The heartbeat response for a merged record and its desired state.
pub fn plan_heartbeat(
    request_id: Vec<u8>,
    record: &AgentRecord,
    desired: &DesiredState,
    report_full_state: bool,
    delivery: DetailDelivery,
) -> proto::HeartbeatResponse {
    let inline = delivery == DetailDelivery::Inline;
    let pipeline = plan_config_updates(ConfigKind::Pipeline, record, desired, inline);
    let instance = plan_config_updates(ConfigKind::Instance, record, desired, inline);
    let commands = plan_commands(record, desired);
    let mut flags = 0;
    if report_full_state {
        flags |= proto::RESPONSE_REPORT_FULL_STATE;
    }
    let something_to_fetch = !pipeline.is_empty() || !instance.is_empty();
    if !inline && something_to_fetch {
        flags |= proto::RESPONSE_FETCH_PIPELINE_DETAIL | proto::RESPONSE_FETCH_INSTANCE_DETAIL;
    }
    proto::HeartbeatResponse {
        request_id,
        common_response: ok_common_response(),
        capabilities: SERVER_CAPABILITIES,
        continuous_pipeline_config_updates: pipeline,
        instance_config_updates: instance,
        onetime_pipeline_config_updates: commands,
        flags,
        opaque: Vec::new(),
    }
}

/// The heartbeat answer of a node holding back: one whose desired state is not yet confirmed
/// against the cluster (a new or wiped node before its first sync). The request is recorded as
/// usual, but nothing is sent (no config, no `-1`, no command), so agents keep what they hold
/// instead of being told to delete everything an empty store lacks.
pub fn plan_holding_heartbeat(request_id: Vec<u8>, report_full_state: bool) -> proto::HeartbeatResponse {
    proto::HeartbeatResponse {
        request_id,
        common_response: ok_common_response(),
        capabilities: SERVER_CAPABILITIES,
        flags: if report_full_state { proto::RESPONSE_REPORT_FULL_STATE } else { 0 },
        ..proto::HeartbeatResponse::default()
    }
}

/// The fetch answer of a node holding back: empty lists, which update nothing.
pub fn plan_holding_fetch(request: &proto::FetchConfigRequest) -> proto::FetchConfigResponse {
    proto::FetchConfigResponse {
        request_id: request.request_id.clone(),
        common_response: ok_common_response(),
        ..proto::FetchConfigResponse::default()
    }
}

fn held(record: &AgentRecord, kind: ConfigKind) -> &[ConfigStatusRecord] {
    match kind {
        ConfigKind::Pipeline => &record.pipeline_configs,
        ConfigKind::Instance => &record.instance_configs,
    }
}

fn config_detail(config: &DeliverableConfig, inline: bool) -> proto::ConfigDetail {
    proto::ConfigDetail {
        name: config.name.clone(),
        version: config.version,
        detail: if inline {
            config.json_detail.to_vec()
        } else {
            Vec::new()
        },
        extra: HashMap::new(),
    }
}

fn deletion(name: &str) -> proto::ConfigDetail {
    proto::ConfigDetail {
        name: name.to_string(),
        version: DELETE_VERSION,
        detail: Vec::new(),
        extra: HashMap::new(),
    }
}

/// Updates for one kind: assigned configs whose version differs from the held one, then `-1` for
/// held configs no group of the agent has any more. Nothing for a kind the agent cannot accept.
fn plan_config_updates(
    kind: ConfigKind,
    record: &AgentRecord,
    desired: &DesiredState,
    inline: bool,
) -> Vec<proto::ConfigDetail> {
    if !record.accepts(kind.capability()) {
        return Vec::new();
    }
    // A name reported twice counts with its last entry.
    let held_versions: BTreeMap<&str, i64> = held(record, kind)
        .iter()
        .map(|h| (h.name.as_str(), h.version))
        .collect();
    let assigned = desired.configs(kind);
    let mut updates: Vec<proto::ConfigDetail> = assigned
        .values()
        .filter(|config| held_versions.get(config.name.as_str()) != Some(&config.version))
        .map(|config| config_detail(config, inline))
        .collect();
    updates.extend(
        held_versions
            .iter()
            .filter(|(name, version)| {
                **version != DELETE_VERSION
                    && !assigned.contains_key(**name)
                    && !desired.withheld.contains(kind, name)
            })
            .map(|(name, _)| deletion(name)),
    );
    updates
}

fn command_detail(command: &super::snapshot::DeliverableCommand) -> proto::CommandDetail {
    proto::CommandDetail {
        name: command.name.clone(),
        detail: command.json_detail.to_vec(),
        expire_time: command.expire_time_s,
        extra: HashMap::new(),
    }
}

fn plan_commands(record: &AgentRecord, desired: &DesiredState) -> Vec<proto::CommandDetail> {
    if !record.accepts(proto::AGENT_ACCEPTS_ONETIME) {
        return Vec::new();
    }
    let known: BTreeSet<&str> = record
        .onetime_commands
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    desired
        .commands
        .values()
        .filter(|c| !known.contains(c.name.as_str()))
        .map(|c| command_detail(c))
        .collect()
}

/// Checks a fetch request and returns the agent it names.
pub fn check_fetch(request: &proto::FetchConfigRequest) -> Result<InstanceId, ProtocolError> {
    let instance_id = InstanceId::from_wire(&request.instance_id)?;
    check_config_lists(
        &request.continuous_pipeline_configs,
        &request.instance_configs,
        &request.onetime_pipeline_configs,
    )?;
    Ok(instance_id)
}

/// What a fetch knows about the agent when this node holds it.
#[derive(Debug, Clone, Copy)]
pub struct KnownAgent<'a> {
    pub record: &'a AgentRecord,
    pub desired: &'a DesiredState,
}

/// The fetch response: for each requested config, its current detail, or `-1` when it is to be
/// deleted (asked with `-1`, which the 3.x agent does in fetch mode, or no longer assigned).
/// When this node holds the agent, its desired state and capabilities decide; otherwise configs
/// are served by name, since the agent may heartbeat through another node. Every list is answered
/// on every fetch path: the 3.x agent reads only its own list from each, so extra lists are
/// harmless.
pub fn plan_fetch(
    request: &proto::FetchConfigRequest,
    snapshot: &ConfigSnapshot,
    known: Option<KnownAgent<'_>>,
    now_ms: u64,
) -> proto::FetchConfigResponse {
    let answer = |kind: ConfigKind, asked: &[proto::ConfigInfo]| -> Vec<proto::ConfigDetail> {
        if known.is_some_and(|k| !k.record.accepts(kind.capability())) {
            return Vec::new();
        }
        let mut seen = BTreeSet::new();
        asked
            .iter()
            .filter(|info| seen.insert(info.name.clone()))
            .filter_map(|info| {
                let current = match known {
                    Some(known) => known.desired.configs(kind).get(&info.name).map(Arc::as_ref),
                    None if info.version == DELETE_VERSION => None,
                    None => snapshot.config(kind, &info.name),
                };
                match current {
                    Some(config) => Some(config_detail(config, true)),
                    // A stored config this node cannot serve is left alone, not deleted.
                    None if snapshot.withheld().contains(kind, &info.name) => None,
                    None => Some(deletion(&info.name)),
                }
            })
            .collect()
    };
    let commands = if known.is_some_and(|k| !k.record.accepts(proto::AGENT_ACCEPTS_ONETIME)) {
        Vec::new()
    } else {
        request
            .onetime_pipeline_configs
            .iter()
            .filter_map(|info| match known {
                Some(known) => known.desired.commands.get(&info.name).map(Arc::as_ref),
                None => snapshot
                    .command(&info.name)
                    .filter(|c| !crate::control::agents::model::expired(c.expire_time_s, now_ms)),
            })
            .map(command_detail)
            .collect()
    };
    proto::FetchConfigResponse {
        request_id: request.request_id.clone(),
        common_response: ok_common_response(),
        continuous_pipeline_config_updates: answer(
            ConfigKind::Pipeline,
            &request.continuous_pipeline_configs,
        ),
        instance_config_updates: answer(ConfigKind::Instance, &request.instance_configs),
        onetime_pipeline_config_updates: commands,
    }
}

/// Checks a status report and returns the agent it names.
pub fn check_report(request: &proto::ReportStatusRequest) -> Result<InstanceId, ProtocolError> {
    let instance_id = InstanceId::from_wire(&request.instance_id)?;
    check_config_lists(
        &request.continuous_pipeline_configs,
        &request.instance_configs,
        &request.onetime_pipeline_configs,
    )?;
    Ok(instance_id)
}

/// Folds a status report into the record: each non-empty list replaces the remembered one
/// (onetime entries are merged). Not a heartbeat: liveness and sequence are untouched.
pub fn merge_report(request: &proto::ReportStatusRequest, record: &AgentRecord) -> AgentRecord {
    let mut merged = record.clone();
    if !request.continuous_pipeline_configs.is_empty() {
        merged.pipeline_configs = records(&request.continuous_pipeline_configs);
    }
    if !request.instance_configs.is_empty() {
        merged.instance_configs = records(&request.instance_configs);
    }
    merged.onetime_commands =
        union_onetime(&record.onetime_commands, &request.onetime_pipeline_configs);
    super::bounds::bound(&mut merged);
    merged
}
