//! The agent API over plain HTTP: one route table, bodies read with a bound and gunzipped when
//! asked, protobuf in and out, and every failure on a known route answered with that route's
//! protocol error body.
//!
//! Routes (all POST, `application/x-protobuf`):
//!
//! | path | request → response |
//! |---|---|
//! | `/Agent/Heartbeat` | `HeartbeatRequest` → `HeartbeatResponse` |
//! | `/Agent/FetchPipelineConfig`, `/Agent/FetchInstanceConfig` (what the 3.x agent calls), `/Agent/FetchConfig` (the spec's) | `FetchConfigRequest` → `FetchConfigResponse` |
//! | `/Agent/ReportStatus` (spec only; the 3.x agent never calls it) | `ReportStatusRequest` → `ReportStatusResponse` |
//!
//! `Content-Type` is not checked (the 3.x agent always sends `application/x-protobuf`; nothing is
//! gained by refusing others). `Content-Encoding: gzip` bodies are accepted. `Expect:
//! 100-continue` is answered by hyper when the handler first reads the body, so a request refused
//! before that (token, declared size) never has to send it. Unknown paths get a plain-text 404,
//! because no protocol message is implied by them.

use std::io::Read;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use flate2::read::MultiGzDecoder;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use prost::Message;

use super::error::{ProtocolError, fetch_error, heartbeat_error, report_error};
use crate::control::agents::proto;
use super::AGENT_TOKEN_HEADER;
use super::service::AgentService;


const PROTOBUF: &str = "application/x-protobuf";

/// Which message family a route speaks; decides the error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Heartbeat,
    Fetch,
    ReportStatus,
}

/// The agent API router. Serve it on its own listener (the data port), not the admin port: agents
/// cannot authenticate, and the paths are fixed by the agent.
pub fn router(state: Arc<AgentService>) -> Router {
    let route = |route: Route| {
        post(
            move |State(service): State<Arc<AgentService>>, request: Request| {
                serve(service, route, request)
            },
        )
        .fallback(move |method: Method| async move { wrong_method(route, method) })
    };
    Router::new()
        .route("/Agent/Heartbeat", route(Route::Heartbeat))
        .route("/Agent/FetchPipelineConfig", route(Route::Fetch))
        .route("/Agent/FetchInstanceConfig", route(Route::Fetch))
        .route("/Agent/FetchConfig", route(Route::Fetch))
        .route("/Agent/ReportStatus", route(Route::ReportStatus))
        .fallback(unknown_path)
        .with_state(state)
}

async fn serve(service: Arc<AgentService>, route: Route, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let presented = parts
        .headers
        .get(AGENT_TOKEN_HEADER)
        .map(HeaderValue::as_bytes);
    if let Err(e) = service.check_token(presented) {
        return error_response(route, Vec::new(), &e);
    }
    let bytes = match read_body(&parts.headers, body, service.settings().max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(e) => return error_response(route, Vec::new(), &e),
    };
    match route {
        Route::Heartbeat => match proto::HeartbeatRequest::decode(bytes) {
            Ok(request) => {
                let request_id = request.request_id.clone();
                match service.off_async(move |service| service.heartbeat(&request)).await.unwrap_or_else(shutting_down) {
                    Ok(response) => protobuf(StatusCode::OK, &response),
                    Err(e) => error_response(route, request_id, &e),
                }
            }
            Err(e) => error_response(route, Vec::new(), &malformed("HeartbeatRequest", e)),
        },
        Route::Fetch => match proto::FetchConfigRequest::decode(bytes) {
            Ok(request) => {
                let request_id = request.request_id.clone();
                match service.off_async(move |service| service.fetch_config(&request)).await.unwrap_or_else(shutting_down) {
                    Ok(response) => protobuf(StatusCode::OK, &response),
                    Err(e) => error_response(route, request_id, &e),
                }
            }
            Err(e) => error_response(route, Vec::new(), &malformed("FetchConfigRequest", e)),
        },
        Route::ReportStatus => match proto::ReportStatusRequest::decode(bytes) {
            Ok(request) => match service.report_status(&request) {
                Ok(response) => protobuf(StatusCode::OK, &response),
                Err(e) => error_response(route, request.request_id, &e),
            },
            Err(e) => error_response(route, Vec::new(), &malformed("ReportStatusRequest", e)),
        },
    }
}

/// The answer when a call could not run because the node is shutting down.
fn shutting_down<T>() -> Result<T, ProtocolError> {
    Err(ProtocolError::ServerBusy { reason: "the node is shutting down".to_string() })
}

fn malformed(message: &'static str, error: prost::DecodeError) -> ProtocolError {
    ProtocolError::Malformed {
        message,
        reason: error.to_string(),
    }
}

/// Reads the body within `limit` bytes, then gunzips it (again within `limit`) if it is gzip.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ProtocolError> {
    let gzip = match headers
        .get(header::CONTENT_ENCODING)
        .map(|v| v.to_str().map(str::trim))
    {
        None => false,
        Some(Ok(encoding)) if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") => {
            false
        }
        Some(Ok(encoding))
            if encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip") =>
        {
            true
        }
        Some(other) => {
            let encoding = other.unwrap_or("(not text)").to_string();
            return Err(ProtocolError::UnsupportedEncoding { encoding });
        }
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(ProtocolError::PayloadTooLarge {
            limit,
            decompressed: false,
        });
    }
    let raw = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(ProtocolError::PayloadTooLarge {
                limit,
                decompressed: false,
            });
        }
        Err(e) => {
            return Err(ProtocolError::Malformed {
                message: "request body",
                reason: e.to_string(),
            });
        }
    };
    if !gzip {
        return Ok(raw);
    }
    let mut inflated = Vec::new();
    MultiGzDecoder::new(raw.as_ref())
        .take(limit as u64 + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| ProtocolError::BadGzip {
            reason: e.to_string(),
        })?;
    if inflated.len() > limit {
        return Err(ProtocolError::PayloadTooLarge {
            limit,
            decompressed: true,
        });
    }
    Ok(Bytes::from(inflated))
}

fn protobuf(status: StatusCode, message: &impl Message) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, PROTOBUF)],
        message.encode_to_vec(),
    )
        .into_response()
}

fn error_response(route: Route, request_id: Vec<u8>, error: &ProtocolError) -> Response {
    let status = error.code().http_status();
    tracing::debug!(?route, %status, %error, "agent request refused");
    match route {
        Route::Heartbeat => protobuf(status, &heartbeat_error(request_id, error)),
        Route::Fetch => protobuf(status, &fetch_error(request_id, error)),
        Route::ReportStatus => protobuf(status, &report_error(request_id, error)),
    }
}

fn wrong_method(route: Route, method: Method) -> Response {
    error_response(
        route,
        Vec::new(),
        &ProtocolError::MethodNotAllowed {
            method: method.to_string(),
        },
    )
}

async fn unknown_path(uri: Uri, headers: axum::http::HeaderMap) -> Response {
    // A gRPC call of a service the data listener does not serve (an agent's trace or profile
    // service): UNIMPLEMENTED, which agents take as "not here", not as a broken connection.
    if crate::base::listen::is_grpc(&headers) {
        return crate::data::ingest::skywalking::grpc::unimplemented(uri.path());
    }
    let message = format!(
        "unknown agent API path {}; this port serves POST /Agent/Heartbeat, /Agent/FetchPipelineConfig, \
         /Agent/FetchInstanceConfig, /Agent/FetchConfig and /Agent/ReportStatus\n",
        uri.path()
    );
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}
