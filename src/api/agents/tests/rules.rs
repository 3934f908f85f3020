//! One test per protocol behaviour rule (capabilities, sequence numbers, compression, versions), over
//! the pure decision functions (no IO, fixed time).

use crate::control::agents::model::ConfigKind;
use crate::control::agents::proto::{self, ConfigStatus};
use crate::api::agents::protocol::{DetailDelivery, KnownAgent, SERVER_CAPABILITIES, plan_fetch};

use super::{
    NOW_MS, NOW_S, agent_heartbeat, command, compressed_heartbeat, config, decide, info, snapshot,
};

const ALL_KINDS: u64 =
    proto::AGENT_ACCEPTS_PIPELINE | proto::AGENT_ACCEPTS_INSTANCE | proto::AGENT_ACCEPTS_ONETIME;

fn names(updates: &[proto::ConfigDetail]) -> Vec<(&str, i64)> {
    updates
        .iter()
        .map(|u| (u.name.as_str(), u.version))
        .collect()
}

#[test]
fn server_advertises_the_remembers_capabilities_it_has() {
    let (_, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &snapshot(vec![], vec![]),
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(SERVER_CAPABILITIES, 0x0f);
    assert_eq!(response.capabilities, 0x0f);
    assert_eq!(
        response.common_response,
        Some(proto::CommonResponse::default())
    );
    assert_eq!(response.request_id, b"req-0");
}

#[test]
fn a_config_kind_goes_only_to_agents_that_advertise_it() {
    let desired = snapshot(
        vec![
            config(ConfigKind::Pipeline, "p", 4, &["prod"]),
            config(ConfigKind::Instance, "i", 5, &["prod"]),
        ],
        vec![command("once", "prod", NOW_S + 600)],
    );
    let run = |capabilities| {
        decide(
            &agent_heartbeat("a", 0, capabilities),
            None,
            &desired,
            DetailDelivery::Inline,
            NOW_MS,
        )
        .1
    };

    let pipeline_only = run(proto::AGENT_ACCEPTS_PIPELINE);
    assert_eq!(
        names(&pipeline_only.continuous_pipeline_config_updates),
        vec![("p", 4)]
    );
    assert!(pipeline_only.instance_config_updates.is_empty());
    assert!(pipeline_only.onetime_pipeline_config_updates.is_empty());

    let instance_only = run(proto::AGENT_ACCEPTS_INSTANCE);
    assert!(instance_only.continuous_pipeline_config_updates.is_empty());
    assert_eq!(
        names(&instance_only.instance_config_updates),
        vec![("i", 5)]
    );

    let nothing = run(0);
    assert!(
        nothing.continuous_pipeline_config_updates.is_empty()
            && nothing.instance_config_updates.is_empty()
    );

    let everything = run(ALL_KINDS);
    assert_eq!(everything.onetime_pipeline_config_updates.len(), 1);
}

#[test]
fn a_fetch_from_a_known_agent_also_respects_its_capabilities() {
    let desired = snapshot(
        vec![
            config(ConfigKind::Pipeline, "p", 4, &["prod"]),
            config(ConfigKind::Instance, "i", 5, &["prod"]),
        ],
        vec![command("once", "prod", NOW_S + 600)],
    );
    let fetch = proto::FetchConfigRequest {
        request_id: b"f".to_vec(),
        instance_id: b"a".to_vec(),
        continuous_pipeline_configs: vec![info("p", 1, ConfigStatus::Applied)],
        instance_configs: vec![info("i", 1, ConfigStatus::Applied)],
        onetime_pipeline_configs: vec![info("once", 0, ConfigStatus::Unset)],
    };
    let fetched = |capabilities| {
        let (record, _) = decide(&agent_heartbeat("a", 0, capabilities), None, &desired, DetailDelivery::Fetch, NOW_MS);
        let wanted = desired.desired_for(&record.identity(), NOW_MS);
        plan_fetch(&fetch, &desired, Some(KnownAgent { record: &record, desired: &wanted }), NOW_MS)
    };
    let pipeline_only = fetched(proto::AGENT_ACCEPTS_PIPELINE);
    assert_eq!(names(&pipeline_only.continuous_pipeline_config_updates), vec![("p", 4)]);
    assert!(pipeline_only.instance_config_updates.is_empty(), "not advertised: not sent, not deleted");
    assert!(pipeline_only.onetime_pipeline_config_updates.is_empty());
    let everything = fetched(ALL_KINDS);
    assert_eq!(names(&everything.instance_config_updates), vec![("i", 5)]);
    assert_eq!(everything.onetime_pipeline_config_updates.len(), 1);
}

#[test]
fn an_unknown_agent_is_asked_for_full_state_and_still_served() {
    let desired = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 4, &["default"])],
        vec![],
    );
    let (record, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(
        response.flags & proto::RESPONSE_REPORT_FULL_STATE,
        proto::RESPONSE_REPORT_FULL_STATE
    );
    assert_eq!(
        names(&response.continuous_pipeline_config_updates),
        vec![("p", 4)]
    );
    assert_eq!(record.sequence_num, 0);
}

#[test]
fn a_sequence_gap_asks_for_full_state_but_is_processed_and_stored() {
    let desired = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 4, &["default"])],
        vec![],
    );
    let (first, _) = decide(
        &agent_heartbeat("a", 5, 3),
        None,
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );

    let (next, in_order) = decide(
        &agent_heartbeat("a", 6, 3),
        Some(&first),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(in_order.flags & proto::RESPONSE_REPORT_FULL_STATE, 0);

    let (after_gap, gap) = decide(
        &agent_heartbeat("a", 9, 3),
        Some(&next),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_ne!(gap.flags & proto::RESPONSE_REPORT_FULL_STATE, 0);
    assert_eq!(
        names(&gap.continuous_pipeline_config_updates),
        vec![("p", 4)],
        "the request is still processed"
    );
    assert_eq!(
        after_gap.sequence_num, 9,
        "the stored sequence moves on, so the agent is not asked forever"
    );

    let (_, resumed) = decide(
        &agent_heartbeat("a", 10, 3),
        Some(&after_gap),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(resumed.flags & proto::RESPONSE_REPORT_FULL_STATE, 0);
}

#[test]
fn a_compressed_heartbeat_keeps_remembered_attributes_and_statuses() {
    let desired = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 4, &["prod"])],
        vec![],
    );
    let mut full = agent_heartbeat("a", 0, 3);
    full.continuous_pipeline_configs = vec![info("p", 4, ConfigStatus::Applied)];
    let (remembered, _) = decide(&full, None, &desired, DetailDelivery::Inline, NOW_MS);

    let (record, response) = decide(
        &compressed_heartbeat("a", 1),
        Some(&remembered),
        &desired,
        DetailDelivery::Inline,
        NOW_MS + 10_000,
    );
    assert_eq!(record.attributes, remembered.attributes);
    assert_eq!(record.tags, remembered.tags);
    assert_eq!(record.capabilities, 3);
    assert_eq!(record.pipeline_configs, remembered.pipeline_configs);
    assert_eq!(record.last_heartbeat_ms, NOW_MS + 10_000);
    assert_eq!(response.flags, 0);
    assert!(
        response.continuous_pipeline_config_updates.is_empty(),
        "remembered as holding p v4"
    );

    // A new version reaches the agent through its remembered capabilities and groups.
    let newer = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 5, &["prod"])],
        vec![],
    );
    let (_, update) = decide(
        &compressed_heartbeat("a", 2),
        Some(&record),
        &newer,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(
        names(&update.continuous_pipeline_config_updates),
        vec![("p", 5)]
    );
}

#[test]
fn a_full_heartbeat_replaces_statuses_even_with_empty_lists() {
    let desired = snapshot(vec![], vec![]);
    let mut holding = agent_heartbeat("a", 0, 3);
    holding.continuous_pipeline_configs = vec![info("gone", 2, ConfigStatus::Applied)];
    let (remembered, _) = decide(&holding, None, &desired, DetailDelivery::Inline, NOW_MS);
    assert_eq!(remembered.pipeline_configs.len(), 1);

    let (record, response) = decide(
        &agent_heartbeat("a", 1, 3),
        Some(&remembered),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert!(
        record.pipeline_configs.is_empty(),
        "the 3.x agent reports all it holds without the FullState flag"
    );
    assert!(response.continuous_pipeline_config_updates.is_empty());
}

#[test]
fn versions_are_compared_by_inequality_only() {
    let desired = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 5, &["prod"])],
        vec![],
    );
    let with_held = |version, status| {
        let mut request = agent_heartbeat("a", 0, 3);
        request.continuous_pipeline_configs = vec![info("p", version, status)];
        decide(&request, None, &desired, DetailDelivery::Inline, NOW_MS).1
    };
    assert_eq!(
        names(&with_held(9, ConfigStatus::Applied).continuous_pipeline_config_updates),
        vec![("p", 5)]
    );
    assert_eq!(
        names(&with_held(1, ConfigStatus::Applied).continuous_pipeline_config_updates),
        vec![("p", 5)]
    );
    assert!(
        with_held(5, ConfigStatus::Applied)
            .continuous_pipeline_config_updates
            .is_empty()
    );
    assert!(
        with_held(5, ConfigStatus::Failed)
            .continuous_pipeline_config_updates
            .is_empty(),
        "a failed apply of the same version is not resent in a loop"
    );
}

#[test]
fn a_held_config_no_group_assigns_gets_minus_one_once() {
    let desired = snapshot(
        vec![
            config(ConfigKind::Pipeline, "kept", 3, &["prod"]),
            config(ConfigKind::Instance, "elsewhere", 3, &["other"]),
        ],
        vec![],
    );
    let mut request = agent_heartbeat("a", 0, 3);
    request.continuous_pipeline_configs = vec![
        info("kept", 3, ConfigStatus::Applied),
        info("old", 2, ConfigStatus::Applied),
    ];
    request.instance_configs = vec![info("elsewhere", 3, ConfigStatus::Applied)];
    let (_, response) = decide(&request, None, &desired, DetailDelivery::Inline, NOW_MS);
    assert_eq!(
        names(&response.continuous_pipeline_config_updates),
        vec![("old", -1)]
    );
    assert_eq!(
        names(&response.instance_config_updates),
        vec![("elsewhere", -1)],
        "its group is not the agent's"
    );
    assert!(
        response.continuous_pipeline_config_updates[0]
            .detail
            .is_empty()
    );

    // An agent that reports the config as deleted (version -1) is not told again.
    request.continuous_pipeline_configs = vec![
        info("kept", 3, ConfigStatus::Applied),
        info("old", -1, ConfigStatus::Unset),
    ];
    let (_, again) = decide(&request, None, &desired, DetailDelivery::Inline, NOW_MS);
    assert!(again.continuous_pipeline_config_updates.is_empty());
}

#[test]
fn version_zero_and_minus_one_are_never_assigned() {
    let desired = snapshot(
        vec![
            config(ConfigKind::Pipeline, "zero", 0, &["prod"]),
            config(ConfigKind::Pipeline, "minus", -1, &["prod"]),
        ],
        vec![],
    );
    assert_eq!(desired.rejected().len(), 2);
    let (_, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert!(response.continuous_pipeline_config_updates.is_empty());
}
