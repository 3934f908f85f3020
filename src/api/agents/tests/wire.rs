//! Wire compatibility: messages decoded from and encoded to bytes written by hand from the
//! field numbers and wire types of the official `agentV2.proto`.

use std::collections::HashMap;

use prost::Message;

use crate::api::agents::error::{ProtocolError, heartbeat_error};
use crate::control::agents::proto;

/// A HeartbeatRequest with every field set, one map entry, tag by tag.
#[rustfmt::skip]
const HEARTBEAT_REQUEST: &[u8] = &[
    0x0a, 0x02, b'r', b'1',                  // 1 request_id (bytes) "r1"
    0x10, 0x05,                              // 2 sequence_num (varint) 5
    0x18, 0x03,                              // 3 capabilities (varint) 3
    0x22, 0x01, b'i',                        // 4 instance_id (bytes) "i"
    0x2a, 0x02, b'L', b'C',                  // 5 agent_type (string) "LC"
    0x32, 0x1d,                              // 6 attributes (message), 29 bytes
        0x0a, 0x01, b'1',                    //   1 version "1"
        0x12, 0x08, b'1', b'0', b'.', b'0', b'.', b'0', b'.', b'1', // 2 ip "10.0.0.1"
        0x1a, 0x01, b'h',                    //   3 hostname "h"
        0x22, 0x01, b'x',                    //   4 hostid "x"
        0xa2, 0x06, 0x07,                    //   100 extras (map entry), 7 bytes
            0x0a, 0x02, b'o', b's',          //     key "os"
            0x12, 0x01, b'l',                //     value "l"
    0x3a, 0x0b,                              // 7 tags (AgentGroupTag), 11 bytes
        0x0a, 0x03, b'e', b'n', b'v',        //   1 name "env"
        0x12, 0x04, b'p', b'r', b'o', b'd',  //   2 value "prod"
    0x42, 0x07, b'r', b'u', b'n', b'n', b'i', b'n', b'g', // 8 running_status "running"
    0x48, 0xac, 0x02,                        // 9 startup_time (varint) 300
    0x52, 0x07,                              // 10 continuous_pipeline_configs (ConfigInfo), 7 bytes
        0x0a, 0x01, b'p',                    //   1 name "p"
        0x10, 0x07,                          //   2 version 7
        0x18, 0x02,                          //   3 status APPLIED
    0x5a, 0x0f,                              // 11 instance_configs (ConfigInfo), 15 bytes
        0x0a, 0x02, b'i', b'1',              //   1 name "i1"
        0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // 2 version -1 (10-byte varint)
    0x62, 0x03,                              // 12 onetime_pipeline_configs (ConfigInfo), 3 bytes
        0x0a, 0x01, b'c',                    //   1 name "c"
    0x68, 0x01,                              // 13 flags (varint) FullState
    0x72, 0x01, b'z',                        // 14 opaque (bytes) "z"
];

/// A HeartbeatResponse with updates of all three kinds.
#[rustfmt::skip]
const HEARTBEAT_RESPONSE: &[u8] = &[
    0x0a, 0x02, b'r', b'1',                  // 1 request_id "r1"
    0x12, 0x00,                              // 2 common_response: empty (status 0)
    0x18, 0x0f,                              // 3 capabilities: all four Rembers* bits
    0x22, 0x09,                              // 4 continuous_pipeline_config_updates (ConfigDetail), 9 bytes
        0x0a, 0x01, b'p',                    //   1 name "p"
        0x10, 0x08,                          //   2 version 8
        0x1a, 0x02, b'{', b'}',              //   3 detail "{}"
    0x2a, 0x0f,                              // 5 instance_config_updates (ConfigDetail), 15 bytes
        0x0a, 0x02, b'i', b'1',              //   1 name "i1"
        0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // 2 version -1
    0x32, 0x09,                              // 6 onetime_pipeline_config_updates (CommandDetail), 9 bytes
        0x0a, 0x01, b'c',                    //   1 name "c"
        0x12, 0x02, b'{', b'}',              //   2 detail "{}"
        0x18, 0x64,                          //   3 expire_time 100
    0x38, 0x03,                              // 7 flags: ReportFullState | FetchContinuousPipelineConfigDetail
];

/// An error body: request_id and common_response{status 400, errorMessage "bad"} only.
#[rustfmt::skip]
const ERROR_BODY: &[u8] = &[
    0x0a, 0x02, b'r', b'1',                  // 1 request_id "r1"
    0x12, 0x08,                              // 2 common_response, 8 bytes
        0x08, 0x90, 0x03,                    //   1 status (int32) 400
        0x12, 0x03, b'b', b'a', b'd',        //   2 errorMessage (bytes) "bad"
];

fn expected_request() -> proto::HeartbeatRequest {
    let mut extras = HashMap::new();
    extras.insert("os".to_string(), b"l".to_vec());
    proto::HeartbeatRequest {
        request_id: b"r1".to_vec(),
        sequence_num: 5,
        capabilities: 3,
        instance_id: b"i".to_vec(),
        agent_type: "LC".to_string(),
        attributes: Some(proto::AgentAttributes {
            version: b"1".to_vec(),
            ip: b"10.0.0.1".to_vec(),
            hostname: b"h".to_vec(),
            hostid: b"x".to_vec(),
            extras,
        }),
        tags: vec![proto::AgentGroupTag {
            name: "env".to_string(),
            value: "prod".to_string(),
        }],
        running_status: "running".to_string(),
        startup_time: 300,
        continuous_pipeline_configs: vec![proto::ConfigInfo {
            name: "p".to_string(),
            version: 7,
            status: proto::ConfigStatus::Applied as i32,
            ..Default::default()
        }],
        instance_configs: vec![proto::ConfigInfo {
            name: "i1".to_string(),
            version: -1,
            ..Default::default()
        }],
        onetime_pipeline_configs: vec![proto::ConfigInfo {
            name: "c".to_string(),
            ..Default::default()
        }],
        flags: proto::REQUEST_FULL_STATE,
        opaque: b"z".to_vec(),
    }
}

fn expected_response() -> proto::HeartbeatResponse {
    proto::HeartbeatResponse {
        request_id: b"r1".to_vec(),
        common_response: Some(proto::CommonResponse::default()),
        capabilities: 0x0f,
        continuous_pipeline_config_updates: vec![proto::ConfigDetail {
            name: "p".to_string(),
            version: 8,
            detail: b"{}".to_vec(),
            extra: HashMap::new(),
        }],
        instance_config_updates: vec![proto::ConfigDetail {
            name: "i1".to_string(),
            version: -1,
            detail: Vec::new(),
            extra: HashMap::new(),
        }],
        onetime_pipeline_config_updates: vec![proto::CommandDetail {
            name: "c".to_string(),
            detail: b"{}".to_vec(),
            expire_time: 100,
            extra: HashMap::new(),
        }],
        flags: proto::RESPONSE_REPORT_FULL_STATE | proto::RESPONSE_FETCH_PIPELINE_DETAIL,
        opaque: Vec::new(),
    }
}

#[test]
fn heartbeat_request_decodes_from_hand_built_bytes() {
    let decoded =
        proto::HeartbeatRequest::decode(HEARTBEAT_REQUEST).expect("hand-built bytes decode");
    assert_eq!(decoded, expected_request());
}

#[test]
fn heartbeat_request_encodes_to_hand_built_bytes() {
    assert_eq!(expected_request().encode_to_vec(), HEARTBEAT_REQUEST);
}

#[test]
fn heartbeat_response_decodes_from_hand_built_bytes() {
    let decoded =
        proto::HeartbeatResponse::decode(HEARTBEAT_RESPONSE).expect("hand-built bytes decode");
    assert_eq!(decoded, expected_response());
}

#[test]
fn heartbeat_response_encodes_to_hand_built_bytes() {
    assert_eq!(expected_response().encode_to_vec(), HEARTBEAT_RESPONSE);
}

#[test]
fn error_body_decodes_as_every_response_message() {
    let heartbeat = proto::HeartbeatResponse::decode(ERROR_BODY).expect("decodes");
    let fetch = proto::FetchConfigResponse::decode(ERROR_BODY).expect("decodes");
    let report = proto::ReportStatusResponse::decode(ERROR_BODY).expect("decodes");
    let expected = Some(proto::CommonResponse {
        status: 400,
        error_message: b"bad".to_vec(),
    });
    assert_eq!(heartbeat.common_response, expected);
    assert_eq!(fetch.common_response, expected);
    assert_eq!(report.common_response, expected);
    assert!(heartbeat.continuous_pipeline_config_updates.is_empty() && heartbeat.flags == 0);
}

#[test]
fn our_error_body_has_only_fields_one_and_two() {
    let error = ProtocolError::Malformed {
        message: "HeartbeatRequest",
        reason: "bad".to_string(),
    };
    let bytes = heartbeat_error(b"r1".to_vec(), &error).encode_to_vec();
    // request_id, then common_response, then nothing: the body ends right after field 2.
    assert_eq!(&bytes[..4], b"\x0a\x02r1");
    assert_eq!(bytes[4], 0x12);
    assert_eq!(usize::from(bytes[5]), bytes.len() - 6);
    assert_eq!(&bytes[6..9], &[0x08, 0x90, 0x03]);
}

#[test]
fn unknown_fields_from_a_newer_agent_are_skipped() {
    let mut bytes = HEARTBEAT_REQUEST.to_vec();
    // Field 99 (varint 7) and field 101 (bytes "q"): not in the proto.
    bytes.extend_from_slice(&[0x98, 0x06, 0x07, 0xaa, 0x06, 0x01, b'q']);
    let decoded =
        proto::HeartbeatRequest::decode(bytes.as_slice()).expect("unknown fields are skipped");
    assert_eq!(decoded, expected_request());
}
