//! The bus against an attacker on the network, over real sockets on 127.0.0.1: replayed calls,
//! answers from a server without the secret, bodies that are never read because their headers
//! fail, and the ration of concurrent large bodies. The in-memory twin runs the same gate.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::super::auth::{MAC_HEADER, NONCE_HEADER, Nonce, TIMESTAMP_HEADER, new_nonce};
use super::super::gate::{LARGE_BODY_BYTES, MAX_LARGE_BODIES};
use super::super::messages::{encode_request, encode_response};
use super::*;
use crate::base::clock::now_ms;

const SECRET: &str = "bus-secret";


/// Serves `app` on 127.0.0.1:0 (a fake peer), stopped when the token is cancelled.
async fn start_fake(app: Router) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, app, stop.clone().cancelled_owned()));
    (addr, stop)
}

/// One HTTP/1.1 exchange on a raw connection: `head` then `body`, and the status line's code.
async fn raw_exchange(addr: &str, head: String, body: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(body).await.expect("body");
    read_status(&mut stream).await
}

async fn read_status(stream: &mut TcpStream) -> u16 {
    let mut answer = vec![0u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("the server answers without waiting for the body")
        .expect("read");
    let text = String::from_utf8_lossy(&answer[..read]);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

fn head(addr: &str, content_length: u64, auth: &[(&str, String)]) -> String {
    let mut head =
        format!("POST {BUS_PATH} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {content_length}\r\n");
    for (name, value) in auth {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head + "\r\n"
}

fn signed(nonce: &Nonce, sent_ms: u64, body: &[u8]) -> Vec<(&'static str, String)> {
    let s = BusAuth::secret(SECRET)
        .sign(sent_ms, nonce, BUS_PATH, body)
        .expect("signs");
    vec![
        (TIMESTAMP_HEADER, s.timestamp),
        (NONCE_HEADER, s.nonce_hex),
        (MAC_HEADER, s.mac_hex),
    ]
}

#[tokio::test]
async fn a_replayed_call_is_refused_and_counted_and_never_handled_twice() {
    let handler = ScriptedHandler::new("b");
    let server = start_gated(handler.clone(), BusGate::new(BusAuth::secret(SECRET))).await;
    let forward = encode_request(&samples_forward()).expect("encode");
    let captured = signed(&new_nonce(), now_ms(), &forward);

    let first = raw_exchange(
        &server.addr,
        head(&server.addr, forward.len() as u64, &captured),
        &forward,
    )
    .await;
    assert_eq!(first, 200);
    for _ in 0..3 {
        let replay = raw_exchange(
            &server.addr,
            head(&server.addr, forward.len() as u64, &captured),
            &forward,
        )
        .await;
        assert_eq!(replay, 401, "a replay within the window");
    }
    assert_eq!(handler.seen().len(), 1, "the forward ran once");
    let counters = server.gate.snapshot();
    assert_eq!(
        (counters.accepted, counters.replayed),
        (1, 3),
        "{counters:?}"
    );
    // A genuine new call still passes.
    let client = HttpBusClient::new(BusAuth::secret(SECRET));
    assert!(
        client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
}

fn samples_forward() -> BusRequest {
    BusRequest::Forward {
        op: ForwardOp::Inactivate { key: key() },
        sender: node("a"),
        issued_at_ms: now_ms(),
    }
}

#[tokio::test]
async fn answers_that_do_not_prove_the_secret_are_refused() {
    let client = HttpBusClient::new(BusAuth::secret(SECRET));
    let counters = Arc::new(super::super::gate::BusCounters::default());
    let client = client.with_counters(counters.clone());

    // A server without the secret that answers every pull with entries of its own.
    let rogue = start_gated(
        ScriptedHandler::new("rogue"),
        BusGate::new(BusAuth::Insecure),
    )
    .await;
    let answer = client
        .call(&node("rogue"), &rogue.addr, digest(), CALL_TIMEOUT)
        .await;
    assert!(
        matches!(answer, Err(BusError::UnauthenticatedAnswer { .. })),
        "{answer:?}"
    );

    // A fake peer that signs with a guessed secret, and one replaying a genuine answer signed
    // for another call.
    let reply = encode_response(&BusResponse::DigestReply { entries: vec![] }).expect("encode");
    let guessed = BusAuth::secret("guess")
        .sign_answer(now_ms(), &new_nonce(), 200, &reply)
        .expect("signs");
    let genuine_for_another_call = BusAuth::secret(SECRET)
        .sign_answer(now_ms(), &new_nonce(), 200, &reply)
        .expect("signs");
    for signature in [guessed, genuine_for_another_call] {
        let reply = reply.clone();
        let app = Router::new().route(
            BUS_PATH,
            post(move || async move {
                (
                    StatusCode::OK,
                    [
                        (TIMESTAMP_HEADER, signature.timestamp.clone()),
                        (MAC_HEADER, signature.mac_hex.clone()),
                    ],
                    reply.clone(),
                )
                    .into_response()
            }),
        );
        let (addr, stop) = start_fake(app).await;
        let answer = client
            .call(&node("fake"), &addr, digest(), CALL_TIMEOUT)
            .await;
        assert!(
            matches!(answer, Err(BusError::UnauthenticatedAnswer { .. })),
            "{answer:?}"
        );
        stop.cancel();
    }
    assert_eq!(counters.snapshot(true).unauthenticated_answers, 3);

    // The genuine server's answer passes.
    let server = start_gated(
        ScriptedHandler::new("b"),
        BusGate::new(BusAuth::secret(SECRET)),
    )
    .await;
    assert!(
        client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn headers_are_refused_before_any_body_is_read() {
    let handler = ScriptedHandler::new("b");
    let server = start_gated(handler.clone(), BusGate::new(BusAuth::secret(SECRET))).await;
    let huge = (MAX_MESSAGE_BYTES - 1) as u64;
    // Each answer comes while the declared body is still unsent: the server never waited for it.
    type Case = (&'static str, Vec<(&'static str, String)>, u64, u16);
    let cases: [Case; 4] = [
        ("no auth headers", vec![], huge, 401),
        (
            "a malformed nonce",
            vec![
                (TIMESTAMP_HEADER, now_ms().to_string()),
                (NONCE_HEADER, "not hex".into()),
                (MAC_HEADER, "ab".repeat(32)),
            ],
            huge,
            401,
        ),
        (
            "a stale timestamp",
            signed(&new_nonce(), now_ms() - 60_000, b""),
            huge,
            401,
        ),
        (
            "a declared length over the limit",
            signed(&new_nonce(), now_ms(), b""),
            MAX_MESSAGE_BYTES as u64 + 1,
            413,
        ),
    ];
    for (case, auth, declared, expected) in cases {
        let mut stream = TcpStream::connect(&server.addr).await.expect("connect");
        stream
            .write_all(head(&server.addr, declared, &auth).as_bytes())
            .await
            .expect("head");
        assert_eq!(read_status(&mut stream).await, expected, "{case}");
    }
    assert!(handler.seen().is_empty());
    let counters = server.gate.snapshot();
    assert_eq!(
        (counters.unauthenticated, counters.stale, counters.too_large),
        (2, 1, 1),
        "{counters:?}"
    );
}

#[tokio::test]
async fn concurrent_large_bodies_are_rationed() {
    let server = start_gated(
        ScriptedHandler::new("b"),
        BusGate::new(BusAuth::secret(SECRET)),
    )
    .await;
    let large = LARGE_BODY_BYTES as u64 + 1;
    // Authentic headers for bodies that are then sent slowly: each holds a permit.
    let mut slow = Vec::new();
    for _ in 0..MAX_LARGE_BODIES {
        let mut stream = TcpStream::connect(&server.addr).await.expect("connect");
        let auth = signed(&new_nonce(), now_ms(), b"never sent in full");
        stream
            .write_all(head(&server.addr, large, &auth).as_bytes())
            .await
            .expect("head");
        stream.write_all(&[0u8; 1024]).await.expect("some body");
        slow.push(stream);
    }
    // Wait (bounded) until the server holds every permit, then one more is refused at once.
    let mut refused = 0;
    for _ in 0..100 {
        let auth = signed(&new_nonce(), now_ms(), b"");
        let mut stream = TcpStream::connect(&server.addr).await.expect("connect");
        stream
            .write_all(head(&server.addr, large, &auth).as_bytes())
            .await
            .expect("head");
        if read_status_or_wait(&mut stream).await == Some(503) {
            refused += 1;
            break;
        }
    }
    assert_eq!(
        refused, 1,
        "a fifth large body is refused while four are read"
    );
    assert!(server.gate.snapshot().busy >= 1);
    drop(slow);
    // Small calls were never affected, and once the slow callers left, large ones pass again.
    let client = HttpBusClient::new(BusAuth::secret(SECRET));
    assert!(
        client
            .call(&node("b"), &server.addr, digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
}

/// The status if the server answers within 200 ms (it does at once when refusing), else `None`.
async fn read_status_or_wait(stream: &mut TcpStream) -> Option<u16> {
    let mut answer = vec![0u8; 256];
    match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut answer)).await {
        Ok(Ok(read)) if read > 0 => String::from_utf8_lossy(&answer[..read])
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok()),
        _ => None,
    }
}

#[tokio::test]
async fn the_memory_twin_runs_the_same_gate() {
    let network = MemNetwork::with_auth(BusAuth::secret(SECRET));
    let gate = BusGate::new(BusAuth::secret(SECRET));
    let handler = ScriptedHandler::new("b");
    network.register_with_gate(node("b"), handler.clone(), gate.clone());
    assert!(
        network
            .client(node("a"))
            .call(&node("b"), "", digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
    let rogue = network.client_with_auth(node("rogue"), BusAuth::Insecure);
    assert_eq!(
        rogue.call(&node("b"), "", digest(), CALL_TIMEOUT).await,
        Err(BusError::Unauthorized { to: node("b") })
    );
    let guessing = network.client_with_auth(node("guess"), BusAuth::secret("guess"));
    assert_eq!(
        guessing.call(&node("b"), "", digest(), CALL_TIMEOUT).await,
        Err(BusError::Unauthorized { to: node("b") })
    );
    // A node without the secret answering (its gate checks nothing, signs nothing): its answer
    // is not believed.
    network.register_with_gate(
        node("c"),
        ScriptedHandler::new("c"),
        BusGate::new(BusAuth::Insecure),
    );
    let refused = network
        .client(node("a"))
        .call(&node("c"), "", digest(), CALL_TIMEOUT)
        .await;
    assert!(
        matches!(refused, Err(BusError::UnauthenticatedAnswer { .. })),
        "{refused:?}"
    );
    let counters = gate.snapshot();
    assert_eq!(
        (counters.accepted, counters.unauthenticated),
        (1, 2),
        "{counters:?}"
    );
    assert_eq!(handler.seen().len(), 1);
}
