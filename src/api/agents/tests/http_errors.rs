//! What the agent API does with requests no agent should send: each gets a clear error (a
//! protocol error body where the route is known) and the server keeps serving.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::api::agents::AGENT_TOKEN_HEADER;
use crate::control::agents::proto;
use crate::api::agents::service::{AgentServiceSettings, default_max_body_bytes};
use crate::api::agents::sim::{AgentClient, RawReply};

use super::{TestServer, agent_heartbeat};

const HEARTBEAT: &str = "/Agent/Heartbeat";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("in memory");
    encoder.finish().expect("in memory")
}

/// The protocol error carried by a reply: (HTTP status, common_response.status, message).
fn protocol_error(reply: &RawReply) -> (u16, i32, String) {
    let decoded =
        proto::HeartbeatResponse::decode(reply.body.clone()).expect("a protocol error body");
    assert!(
        decoded.continuous_pipeline_config_updates.is_empty()
            && decoded.instance_config_updates.is_empty()
    );
    assert_eq!(
        (decoded.flags, decoded.capabilities),
        (0, 0),
        "an error body carries nothing else"
    );
    let common = decoded.common_response.expect("common_response is set");
    (
        reply.status.as_u16(),
        common.status,
        String::from_utf8_lossy(&common.error_message).into_owned(),
    )
}

/// A good heartbeat still works: the server kept serving.
async fn still_serving(client: &AgentClient, seq: u64) {
    let response: proto::HeartbeatResponse = client
        .call(HEARTBEAT, &agent_heartbeat("healthy", seq, 3))
        .await
        .expect("the server keeps serving");
    assert_eq!(response.common_response.map(|c| c.status), Some(0));
}

/// Sends raw HTTP/1.1 over TCP and reads until the server closes or `until` is seen.
async fn raw_exchange(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).await.expect("write");
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .expect("the server answers");
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
        if response_complete(&received) {
            break;
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// A whole response (headers and Content-Length bytes of body) has arrived.
fn response_complete(received: &[u8]) -> bool {
    let text = String::from_utf8_lossy(received);
    let Some(end) = text.find("\r\n\r\n") else {
        return false;
    };
    let head = text[..end].to_ascii_lowercase();
    if head.starts_with("http/1.1 100") {
        return false;
    }
    let length = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    received.len() >= end + 4 + length
}

#[tokio::test]
async fn malformed_protobuf_is_a_400_with_a_protocol_error() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let client = server.client();
    for path in [
        HEARTBEAT,
        "/Agent/FetchPipelineConfig",
        "/Agent/FetchInstanceConfig",
        "/Agent/FetchConfig",
        "/Agent/ReportStatus",
    ] {
        let reply = client
            .post_raw(path, vec![0x0a, 0xff, 0x01], &[])
            .await
            .expect("an answer");
        let (http, code, message) = protocol_error(&reply);
        assert_eq!((http, code), (400, 400), "{path}");
        assert!(message.starts_with("malformed"), "{path}: {message}");
        assert_eq!(
            reply.content_type.as_deref(),
            Some("application/x-protobuf")
        );
    }
    let missing_id = proto::HeartbeatRequest {
        request_id: b"r9".to_vec(),
        ..Default::default()
    };
    let reply = client
        .post_raw(HEARTBEAT, missing_id.encode_to_vec(), &[])
        .await
        .expect("an answer");
    let decoded = proto::HeartbeatResponse::decode(reply.body.clone()).expect("protocol body");
    assert_eq!(
        decoded.request_id, b"r9",
        "the request id is echoed once the request could be read"
    );
    assert_eq!(protocol_error(&reply).1, 400);
    still_serving(&client, 0).await;
}

#[tokio::test]
async fn gzip_bodies_are_accepted_and_bounded() {
    let server = TestServer::start(AgentServiceSettings {
        max_body_bytes: 64 * 1024,
        ..Default::default()
    })
    .await;
    let client = server.client();

    let body = gzip(&agent_heartbeat("zipped", 0, 3).encode_to_vec());
    let reply = client
        .post_raw(HEARTBEAT, body, &[("content-encoding", "gzip")])
        .await
        .expect("an answer");
    assert_eq!(reply.status.as_u16(), 200);
    let response = proto::HeartbeatResponse::decode(reply.body).expect("a heartbeat response");
    assert_eq!(response.request_id, b"req-0");

    let bomb = gzip(&vec![0u8; 65 * 1024]);
    assert!(bomb.len() < 1024);
    let reply = client
        .post_raw(HEARTBEAT, bomb, &[("content-encoding", "gzip")])
        .await
        .expect("an answer");
    let (http, code, message) = protocol_error(&reply);
    assert_eq!((http, code), (413, 413));
    assert!(message.contains("after decompression"), "{message}");

    let reply = client
        .post_raw(
            HEARTBEAT,
            b"not gzip".to_vec(),
            &[("content-encoding", "gzip")],
        )
        .await
        .expect("answer");
    assert_eq!(protocol_error(&reply).0, 400);
    let reply = client
        .post_raw(HEARTBEAT, vec![], &[("content-encoding", "br")])
        .await
        .expect("an answer");
    assert_eq!(protocol_error(&reply).0, 415);
    still_serving(&client, 0).await;
}

#[tokio::test]
async fn oversized_bodies_are_a_413() {
    let server = TestServer::start(AgentServiceSettings {
        max_body_bytes: 16 * 1024,
        ..Default::default()
    })
    .await;
    let client = server.client();
    let reply = client
        .post_raw(HEARTBEAT, vec![0u8; 16 * 1024 + 1], &[])
        .await
        .expect("an answer");
    assert_eq!(protocol_error(&reply).0, 413);

    // Without a Content-Length the limit applies while reading (chunked upload).
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let chunk = vec![b'x'; 20 * 1024];
    let mut request = format!(
        "POST {HEARTBEAT} HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n",
        chunk.len()
    )
    .into_bytes();
    request.extend_from_slice(&chunk);
    request.extend_from_slice(b"\r\n0\r\n\r\n");
    let answer = raw_exchange(&mut stream, &request).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    still_serving(&client, 0).await;
}

#[tokio::test]
async fn the_default_limit_is_4_mib_and_is_checked_before_reading() {
    assert_eq!(default_max_body_bytes(), 4 * 1024 * 1024);
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let request = format!(
        "POST {HEARTBEAT} HTTP/1.1\r\nhost: test\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\r\n",
        4 * 1024 * 1024 + 1
    );
    let answer = raw_exchange(&mut stream, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "refused without asking for the body: {answer}"
    );
    still_serving(&server.client(), 0).await;
}

#[tokio::test]
async fn expect_100_continue_is_answered_before_the_body() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let body = agent_heartbeat("curl-like", 0, 3).encode_to_vec();
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let head = format!(
        "POST {HEARTBEAT} HTTP/1.1\r\nhost: test\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    let mut interim = [0u8; 25];
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_exact(&mut interim),
    )
    .await
    .expect("100 Continue arrives")
    .expect("read");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    let answer = raw_exchange(&mut stream, &body).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let id = crate::control::agents::model::InstanceId::from_wire(b"curl-like").expect("valid");
    assert!(server.service.registry().get(&id).is_some());
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods_are_clear_errors() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let client = server.client();
    let reply = client
        .post_raw("/Agent/HeartBeat", vec![], &[])
        .await
        .expect("an answer");
    assert_eq!(reply.status.as_u16(), 404);
    assert!(
        String::from_utf8_lossy(&reply.body).contains("unknown agent API path /Agent/HeartBeat")
    );

    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let answer = raw_exchange(
        &mut stream,
        format!("GET {HEARTBEAT} HTTP/1.1\r\nhost: test\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(answer.contains("GET is not allowed"), "{answer}");
    still_serving(&client, 0).await;
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_a_401_with_a_protocol_error() {
    let settings = AgentServiceSettings {
        agent_token: Some("s3cret".to_string()),
        ..Default::default()
    };
    let server = TestServer::start(settings).await;
    let anonymous = server.client();
    let body = agent_heartbeat("a", 0, 3).encode_to_vec();

    let reply = anonymous
        .post_raw(HEARTBEAT, body.clone(), &[])
        .await
        .expect("an answer");
    let (http, code, message) = protocol_error(&reply);
    assert_eq!((http, code), (401, 401));
    assert!(message.contains(AGENT_TOKEN_HEADER), "{message}");
    let reply = anonymous
        .post_raw(HEARTBEAT, body.clone(), &[(AGENT_TOKEN_HEADER, "guess")])
        .await
        .expect("answer");
    assert_eq!(protocol_error(&reply).0, 401);
    assert!(
        server.service.registry().is_empty(),
        "refused requests change nothing"
    );

    let authorized =
        AgentClient::new(&server.addr.to_string(), Some("s3cret".to_string())).expect("address");
    still_serving(&authorized, 0).await;
    server.service.set_agent_token(None);
    still_serving(&anonymous, 1).await;
}

#[tokio::test]
async fn report_status_updates_a_known_agent_and_refuses_an_unknown_one() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let client = server.client();
    let report = proto::ReportStatusRequest {
        request_id: b"s1".to_vec(),
        instance_id: b"healthy".to_vec(),
        continuous_pipeline_configs: vec![super::info("p", 3, proto::ConfigStatus::Failed)],
        ..Default::default()
    };
    let reply = client
        .post_raw("/Agent/ReportStatus", report.encode_to_vec(), &[])
        .await
        .expect("an answer");
    let (http, code, _) = protocol_error(&reply);
    assert_eq!((http, code), (404, 404));

    still_serving(&client, 0).await;
    let response: proto::ReportStatusResponse = client
        .call("/Agent/ReportStatus", &report)
        .await
        .expect("accepted");
    assert_eq!(response.request_id, b"s1");
    let id = crate::control::agents::model::InstanceId::from_wire(b"healthy").expect("valid");
    let record = server.service.registry().get(&id).expect("held");
    assert_eq!(
        record.pipeline_configs[0].status,
        crate::api::agents::state::ApplyStatus::Failed
    );
}
