//! The receiving side of the bus: one route, `POST /bus/v1`.
//!
//! A call passes the node's [`BusGate`]: headers, freshness, replay and declared length before
//! any body is read (401, 411, 413 or 503), then the body streams into the MAC (401 on a
//! mismatch); it is then decoded (else 400 with the reason) and handed to the node's
//! [`BusHandler`]. On a secure bus the 200 answer is signed for the call's nonce. The handler runs on its own task: a caller that times out and hangs up does not
//! cancel a Suspend or a forwarded write half-way, and a handler that panics answers 500 instead
//! of taking the connection task down.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, OriginalUri, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::BodyExt;
use tracing::{error, warn};

use super::auth::{BusAuth, MAC_HEADER, NONCE_HEADER, Nonce, PendingMac, TIMESTAMP_HEADER};
use super::gate::{Admission, BusGate, Refusal};
use super::messages::{
    BusRequest, BusResponse, MAX_MESSAGE_BYTES, decode_request, encode_response,
};
use crate::base::clock::now_ms;
use crate::BoxFuture;

/// The one bus route.
pub const BUS_PATH: &str = "/bus/v1";

/// What a node does with a bus request. Implemented by the node's composition root over the
/// workflow, the runtime and the store.
pub trait BusHandler: Send + Sync + 'static {
    fn handle<'a>(&'a self, request: BusRequest) -> BoxFuture<'a, BusResponse>;
}

struct BusService {
    handler: Arc<dyn BusHandler>,
    gate: BusGate,
}

/// The bus router with a fresh [`BusGate`] over `auth`.
pub fn router(handler: Arc<dyn BusHandler>, auth: BusAuth) -> Router {
    router_with_gate(handler, BusGate::new(auth))
}

/// The bus router behind `gate` (whose counters the node reports). Serve it with [`serve`] (or
/// `into_make_service_with_connect_info`) so a refused call logs the peer's address.
pub fn router_with_gate(handler: Arc<dyn BusHandler>, gate: BusGate) -> Router {
    Router::new()
        .route(BUS_PATH, post(serve_call))
        .with_state(Arc::new(BusService { handler, gate }))
}

/// Serves `router` on an already-bound listener until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

async fn serve_call(State(service): State<Arc<BusService>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.to_string())
        .unwrap_or_else(|| "unknown".to_string());
    // The MAC covers the path the caller used, which is the original one if this router is
    // nested under a prefix.
    let path = parts
        .extensions
        .get::<OriginalUri>()
        .map(|OriginalUri(uri)| uri.path())
        .unwrap_or(parts.uri.path());

    let header_text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
    };
    // HTTP/1.1: no Content-Length and no Transfer-Encoding means no body; a chunked body has no
    // declared length and is refused (411).
    let declared_len = match header_text(header::CONTENT_LENGTH.as_str()) {
        Some(len) => len.parse::<u64>().ok(),
        None if !parts.headers.contains_key(header::TRANSFER_ENCODING) => Some(0),
        None => None,
    };
    // Headers, freshness, replay and declared length first: an unauthenticated caller never
    // gets a byte of its body read.
    let admission = match service.gate.admit(
        now_ms(),
        path,
        header_text(TIMESTAMP_HEADER),
        header_text(NONCE_HEADER),
        header_text(MAC_HEADER),
        declared_len,
    ) {
        Ok(admission) => admission,
        Err(refusal) => return refused(&peer, &refusal),
    };
    let Admission {
        mut checked,
        declared_len,
        permit,
    } = admission;
    let bytes = match read_body(body, declared_len, checked.as_mut().map(|(_, mac)| mac)).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLong(len)) => return refused(&peer, &service.gate.refuse_body(len)),
        Err(BodyError::Unreadable(reason)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("unreadable bus request body: {reason}\n"),
            )
                .into_response();
        }
    };
    drop(permit);
    let nonce = match service.gate.accept(now_ms(), checked) {
        Ok(nonce) => nonce,
        Err(refusal) => return refused(&peer, &refusal),
    };
    let request = match decode_request(&bytes) {
        Ok(request) => request,
        Err(decode_error) => {
            warn!(%peer, error = %decode_error, "bus call refused: malformed body");
            return (
                StatusCode::BAD_REQUEST,
                format!("malformed bus request: {decode_error}\n"),
            )
                .into_response();
        }
    };
    let request_name = request.name();
    let handler = service.handler.clone();
    let response = match tokio::spawn(async move { handler.handle(request).await }).await {
        Ok(response) => response,
        Err(join_error) => {
            error!(%peer, request = request_name, error = %join_error, "bus handler failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, "bus handler failed\n").into_response();
        }
    };
    encoded(service.gate.auth(), nonce.as_ref(), &response, request_name)
}

fn refused(peer: &str, refusal: &Refusal) -> Response {
    match refusal {
        Refusal::Unauthorized(failure) => {
            warn!(%peer, reason = %failure, "bus call refused: authentication failed");
            (StatusCode::UNAUTHORIZED, "unauthorized bus call\n").into_response()
        }
        Refusal::LengthRequired => (
            StatusCode::LENGTH_REQUIRED,
            "bus calls must declare their length\n",
        )
            .into_response(),
        Refusal::TooLarge { len } => {
            warn!(%peer, len, "bus call refused: too large");
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("bus request over {MAX_MESSAGE_BYTES} bytes\n"),
            )
                .into_response()
        }
        Refusal::Busy(why) => {
            warn!(%peer, why, "bus call refused: busy");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("bus busy: {why}\n"),
            )
                .into_response()
        }
    }
}

enum BodyError {
    TooLong(u64),
    Unreadable(String),
}

/// Streams the body into `mac` (if any) and a buffer, refusing more than `declared_len` bytes.
async fn read_body(
    mut body: Body,
    declared_len: usize,
    mut mac: Option<&mut PendingMac>,
) -> Result<Vec<u8>, BodyError> {
    // The declared length is at most MAX_MESSAGE_BYTES (the gate checked), and a large one holds
    // a permit; still, grow with the data rather than trusting the declaration up front.
    let mut bytes = Vec::with_capacity(declared_len.min(64 * 1024));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let len = bytes.len() + data.len();
        if len > declared_len {
            return Err(BodyError::TooLong(len as u64));
        }
        if let Some(mac) = mac.as_deref_mut() {
            mac.update(&data);
        }
        bytes.extend_from_slice(&data);
    }
    if bytes.len() != declared_len {
        return Err(BodyError::Unreadable(format!(
            "{} bytes of a declared {declared_len}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The encoded answer, signed for the call `nonce` on a secure bus.
fn encoded(
    auth: &BusAuth,
    nonce: Option<&Nonce>,
    response: &BusResponse,
    request_name: &str,
) -> Response {
    match encode_response(response) {
        Ok(bytes) => {
            let signature = nonce.and_then(|nonce| auth.sign_answer(now_ms(), nonce, 200, &bytes));
            let mut answer =
                ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
            if let Some(signature) = signature {
                let headers = answer.headers_mut();
                for (name, value) in [
                    (TIMESTAMP_HEADER, signature.timestamp),
                    (MAC_HEADER, signature.mac_hex),
                ] {
                    if let Ok(value) = HeaderValue::from_str(&value) {
                        headers.insert(name, value);
                    }
                }
            }
            answer
        }
        Err(encode_error) => {
            error!(request = request_name, error = %encode_error, "bus response does not encode");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("bus response does not encode: {encode_error}\n"),
            )
                .into_response()
        }
    }
}
