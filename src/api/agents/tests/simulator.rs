//! The simulated agent copies the 3.x agent where a server must cope with it: its capabilities,
//! the shape of its instance id, and heartbeats that always carry the full state.

use crate::control::agents::model::{ConfigKind, DELETE_VERSION};
use crate::control::agents::proto::{self, ConfigStatus};
use crate::api::agents::sim::{AGENT_TYPE, REAL_AGENT_CAPABILITIES, SimAgent, SimAgentSpec};

use super::NOW_S;

fn detail(name: &str, version: i64, detail: &[u8]) -> proto::ConfigDetail {
    proto::ConfigDetail {
        name: name.to_string(),
        version,
        detail: detail.to_vec(),
        ..Default::default()
    }
}

/// A random (version 4, RFC 4122 variant) UUID in its lowercase 8-4-4-4-12 form.
fn assert_uuid_v4(text: &str) {
    let groups: Vec<&str> = text.split('-').collect();
    assert_eq!(
        groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "8-4-4-4-12 groups: {text:?}"
    );
    assert!(
        groups.iter().all(|g| g
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))),
        "lowercase hex: {text:?}"
    );
    assert!(groups[2].starts_with('4'), "version 4: {text:?}");
    assert!(
        groups[3].starts_with(['8', '9', 'a', 'b']),
        "RFC 4122 variant: {text:?}"
    );
}

#[test]
fn the_simulator_advertises_pipeline_and_instance_configs_like_the_real_agent() {
    assert_eq!(
        REAL_AGENT_CAPABILITIES, 3,
        "the 3.x agent sends capabilities 3"
    );
    assert_eq!(
        REAL_AGENT_CAPABILITIES,
        proto::AGENT_ACCEPTS_PIPELINE | proto::AGENT_ACCEPTS_INSTANCE
    );
    assert_eq!(REAL_AGENT_CAPABILITIES & proto::AGENT_ACCEPTS_ONETIME, 0);
    assert_eq!(SimAgentSpec::numbered(1).capabilities, 3);
    let mut agent = SimAgent::new(SimAgentSpec::numbered(1), NOW_S);
    let heartbeat = agent.build_heartbeat(NOW_S);
    assert_eq!(heartbeat.capabilities, 3);
    assert_eq!(heartbeat.agent_type, AGENT_TYPE);
}

#[test]
fn the_instance_id_is_uuid_ip_and_start_time_and_changes_on_restart() {
    let spec = SimAgentSpec::numbered(0x01_02_03);
    assert_eq!(spec.ip, "10.1.2.3");
    let mut agent = SimAgent::new(spec.clone(), NOW_S);
    let id = agent.instance_id().to_string();
    let parts: Vec<&str> = id.split('_').collect();
    assert_eq!(parts.len(), 3, "<uuid>_<ip>_<starttime>: {id:?}");
    assert_uuid_v4(parts[0]);
    assert_eq!(parts[1], "10.1.2.3", "{id:?}");
    assert_eq!(parts[2], NOW_S.to_string(), "{id:?}");
    let heartbeat = agent.build_heartbeat(NOW_S);
    assert_eq!(heartbeat.instance_id, id.as_bytes());
    assert_eq!(heartbeat.startup_time, NOW_S);
    assert_eq!(
        heartbeat.sequence_num, 0,
        "a fresh agent starts at sequence 0"
    );

    let twin = SimAgent::new(spec, NOW_S);
    assert_ne!(
        twin.instance_id(),
        id,
        "same host, same second: the UUID tells them apart"
    );

    agent.restart(NOW_S + 60);
    let restarted = agent.instance_id().to_string();
    assert_ne!(restarted, id, "a restart is a new instance");
    let parts: Vec<&str> = restarted.split('_').collect();
    assert_eq!(parts.len(), 3, "{restarted:?}");
    assert_uuid_v4(parts[0]);
    assert_eq!(parts[2], (NOW_S + 60).to_string());
    assert_eq!(agent.sequence_num(), 0);
}

#[test]
fn every_heartbeat_carries_the_full_state_without_the_full_state_flag() {
    let mut spec = SimAgentSpec::numbered(9);
    spec.tags = vec![("env".to_string(), "prod".to_string())];
    let mut agent = SimAgent::new(spec, NOW_S);
    let (applied, _) = agent.apply_updates(
        ConfigKind::Pipeline,
        &[
            detail("nginx", 5, b"{\"inputs\":[]}"),
            detail("broken", 6, b"not json"),
            detail("array", 7, b"[1, 2]"),
        ],
    );
    assert_eq!(applied, 3);
    agent.apply_updates(ConfigKind::Instance, &[detail("host", 11, b"{}")]);

    let statuses = |configs: &[proto::ConfigInfo]| -> Vec<(String, i64, i32)> {
        configs
            .iter()
            .map(|c| (c.name.clone(), c.version, c.status))
            .collect()
    };
    let expected_pipeline = vec![
        ("array".to_string(), 7, ConfigStatus::Failed as i32),
        ("broken".to_string(), 6, ConfigStatus::Failed as i32),
        ("nginx".to_string(), 5, ConfigStatus::Applied as i32),
    ];
    let expected_instance = vec![("host".to_string(), 11, ConfigStatus::Applied as i32)];
    for round in 0..3 {
        let heartbeat = agent.build_heartbeat(NOW_S + 10 * round);
        assert_eq!(
            heartbeat.flags, 0,
            "the 3.x agent never sets FullState (round {round})"
        );
        assert_eq!(
            statuses(&heartbeat.continuous_pipeline_configs),
            expected_pipeline,
            "every held pipeline config, every time (round {round})"
        );
        assert_eq!(
            statuses(&heartbeat.instance_configs),
            expected_instance,
            "round {round}"
        );
        let attributes = heartbeat
            .attributes
            .as_ref()
            .expect("attributes every time");
        assert_eq!(attributes.ip, b"10.0.0.9");
        assert_eq!(attributes.hostname, b"sim-agent-9");
        assert_eq!(heartbeat.tags.len(), 1);
        assert_eq!(heartbeat.running_status, "running");
    }

    agent.apply_updates(
        ConfigKind::Pipeline,
        &[detail("nginx", DELETE_VERSION, b"")],
    );
    let heartbeat = agent.build_heartbeat(NOW_S + 40);
    assert_eq!(
        heartbeat
            .continuous_pipeline_configs
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["array", "broken"],
        "a deleted config is no longer reported"
    );
}
