//! The receiving side of the bus: one route, `POST /bus/v1`.
//!
//! A call is read (bounded by [`MAX_MESSAGE_BYTES`], else 413), authenticated (else 401, with the
//! peer address logged), decoded (else 400 with the reason) and handed to the node's
//! [`BusHandler`]. The handler runs on its own task: a caller that times out and hangs up does not
//! cancel a Suspend or a forwarded write half-way, and a handler that panics answers 500 instead
//! of taking the connection task down.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, OriginalUri, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tracing::{error, warn};

use super::auth::{AuthFailure, BusAuth, MAC_HEADER, TIMESTAMP_HEADER};
use super::messages::{
    BusRequest, BusResponse, MAX_MESSAGE_BYTES, decode_request, encode_response,
};
use crate::clock::now_ms;
use crate::workflow::peers::BoxFuture;

/// The one bus route.
pub const BUS_PATH: &str = "/bus/v1";

/// What a node does with a bus request. Implemented by the node's composition root over the
/// workflow, the runtime and the store.
pub trait BusHandler: Send + Sync + 'static {
    fn handle<'a>(&'a self, request: BusRequest) -> BoxFuture<'a, BusResponse>;
}

struct BusService {
    handler: Arc<dyn BusHandler>,
    auth: BusAuth,
}

/// The bus router. Serve it with [`serve`] (or `into_make_service_with_connect_info`) so a
/// refused call logs the peer's address.
pub fn router(handler: Arc<dyn BusHandler>, auth: BusAuth) -> Router {
    Router::new()
        .route(BUS_PATH, post(serve_call))
        .with_state(Arc::new(BusService { handler, auth }))
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
    let (timestamp, mac_hex) = (header_text(TIMESTAMP_HEADER), header_text(MAC_HEADER));
    // Headers and freshness first: an unauthenticated caller never gets a body buffered.
    if let Err(failure) = service.auth.precheck(now_ms(), timestamp, mac_hex) {
        return unauthorized(&peer, &failure);
    }
    let bytes = match read_body(body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
    };
    if let Err(failure) = service
        .auth
        .verify(now_ms(), path, &bytes, timestamp, mac_hex)
    {
        return unauthorized(&peer, &failure);
    }
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
    encoded(&response, request_name)
}

fn unauthorized(peer: &str, failure: &AuthFailure) -> Response {
    warn!(%peer, reason = %failure, "bus call refused: authentication failed");
    (StatusCode::UNAUTHORIZED, "unauthorized bus call\n").into_response()
}

/// Reads the whole body, refusing more than [`MAX_MESSAGE_BYTES`].
async fn read_body(body: Body) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(body, MAX_MESSAGE_BYTES)
        .await
        .map_err(|read_error| {
            let too_large = std::error::Error::source(&read_error)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            if too_large {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("bus request over {MAX_MESSAGE_BYTES} bytes\n"),
                )
                    .into_response()
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("unreadable bus request body: {read_error}\n"),
                )
                    .into_response()
            }
        })
}

fn encoded(response: &BusResponse, request_name: &str) -> Response {
    match encode_response(response) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
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
