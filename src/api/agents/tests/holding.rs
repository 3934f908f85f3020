//! What a node must never tell agents to delete: everything its own store lacks before it has
//! synced with the cluster (a new or wiped node), and a stored config it cannot serve.

use std::sync::Arc;

use crate::control::agents::model::{ConfigKind, ContentFormat};
use crate::control::agents::proto::{self, ConfigStatus};
use crate::api::agents::protocol::{DetailDelivery, plan_fetch};
use crate::api::agents::registry::AgentRegistry;
use crate::api::agents::service::{AgentService, AgentServiceSettings};
use crate::api::agents::source::MemConfigSource;
use crate::api::agents::state::MemAgentStateStore;

use super::{NOW_MS, agent_heartbeat, config, decide, info, snapshot};

fn updates(response: &proto::HeartbeatResponse) -> Vec<(String, i64)> {
    response
        .continuous_pipeline_config_updates
        .iter()
        .chain(&response.instance_config_updates)
        .map(|u| (u.name.clone(), u.version))
        .collect()
}

#[test]
fn a_node_not_yet_caught_up_records_agents_but_sends_them_nothing() {
    let registry = Arc::new(AgentRegistry::load(Arc::new(MemAgentStateStore::new()), 100).expect("empty store"));
    let (caught_up, receiver) = tokio::sync::watch::channel(false);
    // An empty desired state: what a new node has before its first sync.
    let service = AgentService::new(AgentServiceSettings::default(), Arc::new(MemConfigSource::new()), registry.clone())
        .with_clock(Arc::new(|| NOW_MS))
        .with_catch_up(receiver);
    let mut request = agent_heartbeat("web-1", 7, 3);
    request.continuous_pipeline_configs = vec![info("nginx", 5, ConfigStatus::Applied)];
    request.instance_configs = vec![info("host", 2, ConfigStatus::Applied)];
    request.onetime_pipeline_configs = vec![info("probe", 1, ConfigStatus::Applied)];

    let held_back = service.heartbeat(&request).expect("answered");
    assert!(!service.serving());
    assert_eq!(updates(&held_back), Vec::new(), "no -1 for configs an unsynced store lacks");
    assert!(held_back.onetime_pipeline_config_updates.is_empty());
    assert_eq!(held_back.common_response.as_ref().map(|c| c.status), Some(0));
    assert_eq!(held_back.flags, proto::RESPONSE_REPORT_FULL_STATE, "an unknown agent is still asked for full state");
    let recorded = registry.get(&crate::control::agents::model::InstanceId::from_wire(b"web-1").expect("id")).expect("recorded");
    assert_eq!(recorded.pipeline_configs.len(), 1, "the agent's state is kept while holding back");

    let fetch = proto::FetchConfigRequest {
        request_id: b"f".to_vec(),
        instance_id: b"web-1".to_vec(),
        continuous_pipeline_configs: vec![info("nginx", 5, ConfigStatus::Applied)],
        ..Default::default()
    };
    let fetched = service.fetch_config(&fetch).expect("answered");
    assert!(fetched.continuous_pipeline_config_updates.is_empty(), "fetch deletes nothing either");

    // Once caught up, the (still empty) desired state is authoritative: both are deleted.
    caught_up.send_replace(true);
    request.sequence_num += 1;
    let served = service.heartbeat(&request).expect("answered");
    assert_eq!(updates(&served), vec![("nginx".to_string(), -1), ("host".to_string(), -1)]);
}

#[test]
fn a_stored_config_the_snapshot_cannot_serve_is_not_deleted_from_agents() {
    let mut broken = config(ConfigKind::Pipeline, "broken", 4, &["prod"]);
    broken.content = "{\"inputs\": [".to_string();
    broken.format = ContentFormat::Json;
    let desired = snapshot(vec![broken, config(ConfigKind::Pipeline, "good", 3, &["prod"])], vec![]);
    assert_eq!(desired.rejected().len(), 1, "the broken entry is left out");

    let mut request = agent_heartbeat("web-1", 0, 3);
    request.continuous_pipeline_configs = vec![
        info("broken", 4, ConfigStatus::Applied),
        info("good", 3, ConfigStatus::Applied),
        info("gone", 2, ConfigStatus::Applied),
    ];
    let (record, response) = decide(&request, None, &desired, DetailDelivery::Inline, NOW_MS);
    assert_eq!(updates(&response), vec![("gone".to_string(), -1)], "only the really unassigned one");

    let fetch = proto::FetchConfigRequest {
        request_id: b"f".to_vec(),
        instance_id: b"web-1".to_vec(),
        continuous_pipeline_configs: vec![info("broken", 4, ConfigStatus::Applied), info("gone", 2, ConfigStatus::Applied)],
        ..Default::default()
    };
    for known in [false, true] {
        let agent_desired = desired.desired_for(&record.identity(), NOW_MS);
        let known_agent = known.then_some(crate::api::agents::protocol::KnownAgent { record: &record, desired: &agent_desired });
        let fetched = plan_fetch(&fetch, &desired, known_agent, NOW_MS);
        let names: Vec<_> = fetched.continuous_pipeline_config_updates.iter().map(|u| (u.name.as_str(), u.version)).collect();
        assert_eq!(names, vec![("gone", -1)], "known agent: {known}");
    }
}
