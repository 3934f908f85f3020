//! The HTTP bus end to end on 127.0.0.1:0: every message, authentication refusals on the wire,
//! malformed input, error classification and the drop switch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{Request, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::super::auth::{MAC_HEADER, NONCE_HEADER, TIMESTAMP_HEADER, new_nonce};
use super::super::messages::{encode_request, tests as samples};
use super::*;
use crate::base::clock::now_ms;

struct Panicking;

impl BusHandler for Panicking {
    fn handle<'a>(&'a self, _request: BusRequest) -> BoxFuture<'a, BusResponse> {
        Box::pin(async { panic!("handler bug") })
    }
}


/// Posts raw bytes with chosen headers, bypassing [`HttpBusClient`].
async fn post_raw(addr: &str, body: Vec<u8>, headers: &[(&str, String)]) -> (StatusCode, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut builder = Request::post(format!("http://{addr}{BUS_PATH}"));
    for (name, value) in headers {
        builder = builder.header(*name, value);
    }
    let response = client
        .request(builder.body(Full::new(Bytes::from(body))).expect("request"))
        .await
        .expect("sent");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn signed_headers(auth: &BusAuth, now: u64, body: &[u8]) -> Vec<(&'static str, String)> {
    let signature = auth.sign(now, &new_nonce(), BUS_PATH, body).expect("secret bus");
    vec![
        (TIMESTAMP_HEADER, signature.timestamp),
        (NONCE_HEADER, signature.nonce_hex),
        (MAC_HEADER, signature.mac_hex),
    ]
}

#[tokio::test]
async fn every_request_crosses_a_real_http_bus_with_a_secret() {
    let handler = ScriptedHandler::new("b");
    let server = start_server(handler.clone(), BusAuth::secret("cluster-secret")).await;
    let client = HttpBusClient::new(BusAuth::secret("cluster-secret"));
    for request in samples::every_request() {
        let expected = handler.answer(&request);
        let answer = client
            .call(&node("b"), &server.addr, request.clone(), CALL_TIMEOUT)
            .await;
        assert_eq!(answer, Ok(expected), "{}", request.name());
    }
    assert_eq!(handler.seen(), samples::every_request());
}

#[tokio::test]
async fn an_insecure_bus_works_without_headers_and_a_secure_one_refuses_it() {
    let insecure = start_server(ScriptedHandler::new("b"), BusAuth::Insecure).await;
    let client = HttpBusClient::new(BusAuth::Insecure);
    assert_eq!(
        client
            .call(&node("b"), &insecure.addr, digest(), CALL_TIMEOUT)
            .await,
        Ok(BusResponse::DigestReply { entries: vec![] })
    );
    let secure = start_server(ScriptedHandler::new("c"), BusAuth::secret("s")).await;
    assert_eq!(
        client
            .call(&node("c"), &secure.addr, digest(), CALL_TIMEOUT)
            .await,
        Err(BusError::Unauthorized { to: node("c") })
    );
    let wrong_secret = HttpBusClient::new(BusAuth::secret("not-s"));
    assert_eq!(
        wrong_secret
            .call(&node("c"), &secure.addr, digest(), CALL_TIMEOUT)
            .await,
        Err(BusError::Unauthorized { to: node("c") })
    );
}

#[tokio::test]
async fn forged_tampered_stale_and_unsigned_calls_get_401_and_never_reach_the_handler() {
    let handler = ScriptedHandler::new("b");
    let auth = BusAuth::secret("s");
    let server = start_server(handler.clone(), auth.clone()).await;
    let body = encode_request(&suspend()).expect("encode");

    let (status, _) = post_raw(
        &server.addr,
        body.clone(),
        &signed_headers(&auth, now_ms(), &body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "a correctly signed raw call passes");

    let mut tampered = body.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let refusals = [
        (
            "tampered body",
            tampered,
            signed_headers(&auth, now_ms(), &body),
        ),
        (
            "wrong secret",
            body.clone(),
            signed_headers(&BusAuth::secret("x"), now_ms(), &body),
        ),
        (
            "stale timestamp",
            body.clone(),
            signed_headers(&auth, now_ms() - 60 * 1000, &body),
        ),
        (
            "future timestamp",
            body.clone(),
            signed_headers(&auth, now_ms() + 60 * 1000, &body),
        ),
        ("no headers", body.clone(), vec![]),
        (
            "no mac",
            body.clone(),
            signed_headers(&auth, now_ms(), &body)
                .into_iter()
                .filter(|(name, _)| *name != MAC_HEADER)
                .collect(),
        ),
        (
            "no nonce",
            body.clone(),
            signed_headers(&auth, now_ms(), &body)
                .into_iter()
                .filter(|(name, _)| *name != NONCE_HEADER)
                .collect(),
        ),
        (
            "garbage mac",
            body.clone(),
            vec![
                (TIMESTAMP_HEADER, now_ms().to_string()),
                (NONCE_HEADER, "00".repeat(16)),
                (MAC_HEADER, "zz".into()),
            ],
        ),
    ];
    for (case, body, headers) in refusals {
        let (status, _) = post_raw(&server.addr, body, &headers).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}");
    }
    assert_eq!(
        handler.seen().len(),
        1,
        "only the valid call reached the handler"
    );
}

#[tokio::test]
async fn malformed_bodies_get_400_with_a_reason_and_oversized_ones_413() {
    let server = start_server(ScriptedHandler::new("b"), BusAuth::Insecure).await;
    for garbage in [
        vec![],
        vec![1],
        vec![7, 0, 0],
        vec![1, 200, 200, 200, 200, 200],
        b"GET / HTTP/1.1".to_vec(),
    ] {
        let (status, reason) = post_raw(&server.addr, garbage.clone(), &[]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{garbage:?}");
        assert!(reason.contains("malformed bus request"), "{reason}");
    }
    let huge = vec![1u8; MAX_MESSAGE_BYTES + 1];
    let (status, _) = post_raw(&server.addr, huge, &[]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // The server still serves after all that.
    let client = HttpBusClient::new(BusAuth::Insecure);
    assert!(
        client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_server_survives() {
    let server = start_server(Arc::new(Panicking), BusAuth::Insecure).await;
    let client = HttpBusClient::new(BusAuth::Insecure);
    for _ in 0..2 {
        let answer = client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await;
        assert!(
            matches!(answer, Err(BusError::Status { status: 500, .. })),
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn dead_slow_and_misaddressed_peers_are_classified() {
    let closed_addr = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let client = HttpBusClient::new(BusAuth::Insecure);
    let answer = client
        .call(&node("gone"), &closed_addr, digest(), CALL_TIMEOUT)
        .await;
    assert!(
        matches!(answer, Err(BusError::Unreachable { .. })),
        "{answer:?}"
    );

    let slow = start_server(
        ScriptedHandler::slow("slow", Duration::from_secs(30)),
        BusAuth::Insecure,
    )
    .await;
    let started = Instant::now();
    let answer = client
        .call(
            &node("slow"),
            &slow.addr,
            digest(),
            Duration::from_millis(200),
        )
        .await;
    assert_eq!(
        answer,
        Err(BusError::Timeout {
            to: node("slow"),
            after: Duration::from_millis(200)
        })
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    for bad in ["", "no spaces allowed", "host:port/path", "[::1"] {
        let answer = client.call(&node("x"), bad, digest(), CALL_TIMEOUT).await;
        assert!(
            matches!(answer, Err(BusError::BadAddress { .. })),
            "{bad:?}: {answer:?}"
        );
    }
}

#[tokio::test]
async fn the_drop_switch_swallows_suspend_and_resume_to_chosen_peers_only() {
    let handler = ScriptedHandler::new("b");
    let server = start_server(handler.clone(), BusAuth::Insecure).await;
    let client = HttpBusClient::new(BusAuth::Insecure);
    let switch = client.drop_switch().clone();
    switch.drop_calls_to(node("b"));
    assert_eq!(switch.dropped_peers(), vec![node("b")]);

    let resume = BusRequest::Resume {
        key: key(),
        sender: node("a"),
        issued_at_ms: 2,
    };
    for request in [suspend(), resume.clone()] {
        let answer = client
            .call(&node("b"), &server.addr, request.clone(), CALL_TIMEOUT)
            .await;
        assert_eq!(
            answer,
            Err(BusError::Dropped {
                to: node("b"),
                request: request.name()
            })
        );
    }
    assert!(
        client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await
            .is_ok(),
        "other requests pass"
    );
    assert!(
        client
            .call(&node("other"), &server.addr, suspend(), CALL_TIMEOUT)
            .await
            .is_ok(),
        "other peers are not dropped"
    );
    switch.restore(&node("b"));
    assert!(
        client
            .call(&node("b"), &server.addr, resume, CALL_TIMEOUT)
            .await
            .is_ok()
    );
    assert_eq!(
        handler
            .seen()
            .iter()
            .map(BusRequest::name)
            .collect::<Vec<_>>(),
        ["digest", "suspend", "resume"]
    );
}
