//! One test per protocol behaviour rule (detail delivery, fetch, onetime commands, errors), over the
//! pure decision functions (no IO, fixed time).

use crate::api::agents::error::{ErrorCode, ProtocolError, fetch_error, heartbeat_error, report_error};
use crate::control::agents::model::{ConfigKind, ModelError};
use crate::control::agents::proto::{self, ConfigStatus};
use crate::api::agents::protocol::{DetailDelivery, KnownAgent, merge_heartbeat, plan_fetch};
use crate::api::agents::state::ApplyStatus;

use super::{NOW_MS, NOW_S, agent_heartbeat, command, config, decide, info, snapshot};

const ALL_KINDS: u64 =
    proto::AGENT_ACCEPTS_PIPELINE | proto::AGENT_ACCEPTS_INSTANCE | proto::AGENT_ACCEPTS_ONETIME;

fn names(updates: &[proto::ConfigDetail]) -> Vec<(&str, i64)> {
    updates
        .iter()
        .map(|u| (u.name.as_str(), u.version))
        .collect()
}

#[test]
fn inline_delivery_carries_the_json_detail_and_no_fetch_flag() {
    let desired = snapshot(
        vec![config(ConfigKind::Pipeline, "p", 4, &["prod"])],
        vec![],
    );
    let (_, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    let update = &response.continuous_pipeline_config_updates[0];
    let detail: serde_json::Value = serde_json::from_slice(&update.detail).expect("JSON detail");
    assert!(detail.is_object());
    assert_eq!(response.flags & !proto::RESPONSE_REPORT_FULL_STATE, 0);
}

#[test]
fn fetch_delivery_sets_the_pipeline_fetch_bit_only_when_there_is_something_to_fetch() {
    let desired = snapshot(
        vec![config(ConfigKind::Instance, "i", 4, &["prod"])],
        vec![],
    );
    let (record, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &desired,
        DetailDelivery::Fetch,
        NOW_MS,
    );
    let fetch_bits = proto::RESPONSE_FETCH_PIPELINE_DETAIL | proto::RESPONSE_FETCH_INSTANCE_DETAIL;
    assert_eq!(
        response.flags & fetch_bits,
        fetch_bits,
        "0x2 for the 3.x agent, 0x4 for spec agents, never 0x4 alone"
    );
    assert_eq!(names(&response.instance_config_updates), vec![("i", 4)]);
    assert!(response.instance_config_updates[0].detail.is_empty());

    let mut settled = agent_heartbeat("a", 1, 3);
    settled.instance_configs = vec![info("i", 4, ConfigStatus::Applied)];
    let (_, quiet) = decide(
        &settled,
        Some(&record),
        &desired,
        DetailDelivery::Fetch,
        NOW_MS,
    );
    assert_eq!(
        quiet.flags, 0,
        "no fetch bit, so the 3.x agent makes no fetch calls"
    );
}

#[test]
fn fetch_serves_details_and_deletions() {
    let desired_state = snapshot(
        vec![
            config(ConfigKind::Pipeline, "p", 4, &["prod"]),
            config(ConfigKind::Instance, "i", 6, &["other"]),
        ],
        vec![],
    );
    let request = proto::FetchConfigRequest {
        request_id: b"f1".to_vec(),
        instance_id: b"a".to_vec(),
        continuous_pipeline_configs: vec![
            info("p", 4, ConfigStatus::Unset),
            info("old", -1, ConfigStatus::Unset),
        ],
        instance_configs: vec![info("i", 6, ConfigStatus::Unset)],
        onetime_pipeline_configs: Vec::new(),
    };
    let (record, _) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &desired_state,
        DetailDelivery::Fetch,
        NOW_MS,
    );
    let desired = desired_state.desired_for(&record.identity(), NOW_MS);
    let known = plan_fetch(
        &request,
        &desired_state,
        Some(KnownAgent {
            record: &record,
            desired: &desired,
        }),
        NOW_MS,
    );
    assert_eq!(known.request_id, b"f1");
    assert_eq!(
        names(&known.continuous_pipeline_config_updates),
        vec![("p", 4), ("old", -1)]
    );
    assert!(
        !known.continuous_pipeline_config_updates[0]
            .detail
            .is_empty()
    );
    assert_eq!(
        names(&known.instance_config_updates),
        vec![("i", -1)],
        "not assigned to this agent's groups"
    );

    // An agent heartbeating through another node is served by name.
    let by_name = plan_fetch(&request, &desired_state, None, NOW_MS);
    assert_eq!(
        names(&by_name.continuous_pipeline_config_updates),
        vec![("p", 4), ("old", -1)]
    );
    assert_eq!(names(&by_name.instance_config_updates), vec![("i", 6)]);
}

#[test]
fn yaml_content_is_delivered_as_json() {
    let mut entry = config(ConfigKind::Pipeline, "yaml", 2, &["prod"]);
    entry.format = crate::control::agents::model::ContentFormat::Yaml;
    entry.content = "enable: true\ninputs:\n  - Type: input_file\n    FilePaths: [/var/log/*.log]\n    MaxDirSearchDepth: 2\nflushers:\n  - Type: flusher_stdout\n".to_string();
    let (_, response) = decide(
        &agent_heartbeat("a", 0, 3),
        None,
        &snapshot(vec![entry], vec![]),
        DetailDelivery::Inline,
        NOW_MS,
    );
    let detail: serde_json::Value =
        serde_json::from_slice(&response.continuous_pipeline_config_updates[0].detail)
            .expect("JSON");
    assert_eq!(
        detail,
        serde_json::json!({
            "enable": true,
            "inputs": [{"Type": "input_file", "FilePaths": ["/var/log/*.log"], "MaxDirSearchDepth": 2}],
            "flushers": [{"Type": "flusher_stdout"}]
        })
    );
}

#[test]
fn onetime_commands_are_resent_until_reported_then_remembered() {
    let desired = snapshot(vec![], vec![command("once", "prod", NOW_S + 600)]);
    let (first, sent) = decide(
        &agent_heartbeat("a", 0, ALL_KINDS),
        None,
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(sent.onetime_pipeline_config_updates.len(), 1);
    assert_eq!(
        sent.onetime_pipeline_config_updates[0].expire_time,
        NOW_S + 600
    );

    let (second, resent) = decide(
        &agent_heartbeat("a", 1, ALL_KINDS),
        Some(&first),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert_eq!(
        resent.onetime_pipeline_config_updates.len(),
        1,
        "not reported yet, so sent again"
    );

    let mut reporting = agent_heartbeat("a", 2, ALL_KINDS);
    reporting.onetime_pipeline_configs = vec![info("once", 1, ConfigStatus::Applied)];
    let (third, quiet) = decide(
        &reporting,
        Some(&second),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert!(quiet.onetime_pipeline_config_updates.is_empty());
    assert_eq!(third.onetime_commands[0].status, ApplyStatus::Applied);

    // Reported once is known: a later heartbeat that leaves it out does not bring it back.
    let (_, later) = decide(
        &agent_heartbeat("a", 3, ALL_KINDS),
        Some(&third),
        &desired,
        DetailDelivery::Inline,
        NOW_MS,
    );
    assert!(later.onetime_pipeline_config_updates.is_empty());
}

#[test]
fn onetime_commands_are_dropped_after_their_expire_time() {
    let desired = snapshot(vec![], vec![command("once", "prod", NOW_S + 60)]);
    let at = |now_ms| {
        decide(
            &agent_heartbeat("a", 0, ALL_KINDS),
            None,
            &desired,
            DetailDelivery::Inline,
            now_ms,
        )
        .1
    };
    assert_eq!(at(NOW_MS + 59_999).onetime_pipeline_config_updates.len(), 1);
    assert!(
        at(NOW_MS + 60_000)
            .onetime_pipeline_config_updates
            .is_empty()
    );
    let fetch = proto::FetchConfigRequest {
        instance_id: b"a".to_vec(),
        onetime_pipeline_configs: vec![info("once", 1, ConfigStatus::Unset)],
        ..Default::default()
    };
    assert!(
        plan_fetch(&fetch, &desired, None, NOW_MS + 60_000)
            .onetime_pipeline_config_updates
            .is_empty()
    );
}

#[test]
fn error_responses_carry_a_code_and_a_message_and_nothing_else() {
    let errors = [
        ProtocolError::Malformed {
            message: "HeartbeatRequest",
            reason: "truncated".to_string(),
        },
        ProtocolError::InstanceId(ModelError::EmptyInstanceId),
        ProtocolError::TooManyEntries {
            list: "tags",
            count: 300,
            max: 256,
        },
        ProtocolError::BadGzip {
            reason: "bad header".to_string(),
        },
        ProtocolError::Unauthorized { header: "x" },
        ProtocolError::UnknownAgent {
            instance_id: "a".to_string(),
        },
        ProtocolError::MethodNotAllowed {
            method: "GET".to_string(),
        },
        ProtocolError::PayloadTooLarge {
            limit: 10,
            decompressed: true,
        },
        ProtocolError::UnsupportedEncoding {
            encoding: "br".to_string(),
        },
        ProtocolError::ServerBusy {
            reason: "store down".to_string(),
        },
    ];
    for error in &errors {
        let common = Some(error.common_response());
        let status = error.code().wire_status();
        assert_ne!(status, 0);
        assert_eq!(
            status,
            i32::from(error.code().http_status().as_u16()),
            "the HTTP status matches the code"
        );
        assert!(!error.common_response().error_message.is_empty());
        assert_eq!(
            heartbeat_error(b"r".to_vec(), error),
            proto::HeartbeatResponse {
                request_id: b"r".to_vec(),
                common_response: common.clone(),
                ..Default::default()
            }
        );
        assert_eq!(
            fetch_error(b"r".to_vec(), error),
            proto::FetchConfigResponse {
                request_id: b"r".to_vec(),
                common_response: common.clone(),
                ..Default::default()
            }
        );
        assert_eq!(report_error(b"r".to_vec(), error).common_response, common);
    }
    assert_eq!(ErrorCode::PayloadTooLarge.wire_status(), 413);
}

#[test]
fn a_heartbeat_without_instance_id_is_refused() {
    let mut request = agent_heartbeat("a", 0, 3);
    request.instance_id.clear();
    let error = merge_heartbeat(&request, None, NOW_MS).expect_err("instance_id is required");
    assert_eq!(error.code(), ErrorCode::InvalidParameter);
    request.instance_id = vec![0xff, 0xfe];
    assert!(
        merge_heartbeat(&request, None, NOW_MS).is_err(),
        "not UTF-8"
    );
    request.instance_id = vec![b'x'; 300];
    assert!(merge_heartbeat(&request, None, NOW_MS).is_err(), "too long");
}
