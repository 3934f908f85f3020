//! Protocol errors, the one place where an error becomes a `common_response.status` and an HTTP
//! status, and the error responses themselves.
//!
//! The spec requires an error response to carry a non-zero code and a message and nothing else,
//! because the 3.x agent checks neither the HTTP status nor the code: it applies whatever update
//! lists it finds. So an error body sets only `request_id` (echoed, when the request could be
//! read) and `common_response`. The code is the HTTP status number, as in the reference server.
//! All four response messages put `request_id` at field 1 and `common_response` at field 2, so an
//! error body decodes as any of them.

use axum::http::StatusCode;

use crate::control::agents::model::ModelError;
use crate::control::agents::proto;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidParameter,
    Unauthorized,
    AgentNotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedEncoding,
    ServerBusy,
}

impl ErrorCode {
    /// The single mapping from an error code to HTTP.
    pub fn http_status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidParameter => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::AgentNotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedEncoding => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::ServerBusy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// `common_response.status`: never 0.
    pub fn wire_status(self) -> i32 {
        i32::from(self.http_status().as_u16())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("malformed {message}: {reason}")]
    Malformed {
        message: &'static str,
        reason: String,
    },
    #[error("invalid instance_id: {0}")]
    InstanceId(#[from] ModelError),
    #[error("{list} has {count} entries; at most {max} are accepted")]
    TooManyEntries {
        list: &'static str,
        count: usize,
        max: usize,
    },
    #[error("gzip body is corrupt: {reason}")]
    BadGzip { reason: String },
    #[error("missing or wrong agent token (header {header})")]
    Unauthorized { header: &'static str },
    #[error("agent {instance_id} is not registered on this node; send a heartbeat first")]
    UnknownAgent { instance_id: String },
    #[error("{method} is not allowed; agent API calls are POST")]
    MethodNotAllowed { method: String },
    #[error("body is larger than {limit} bytes{after}", after = if *decompressed { " after decompression" } else { "" })]
    PayloadTooLarge { limit: usize, decompressed: bool },
    #[error("Content-Encoding {encoding:?} is not supported; send identity or gzip")]
    UnsupportedEncoding { encoding: String },
    #[error("server busy: {reason}")]
    ServerBusy { reason: String },
}

impl ProtocolError {
    pub fn code(&self) -> ErrorCode {
        match self {
            ProtocolError::Malformed { .. }
            | ProtocolError::InstanceId(_)
            | ProtocolError::TooManyEntries { .. }
            | ProtocolError::BadGzip { .. } => ErrorCode::InvalidParameter,
            ProtocolError::Unauthorized { .. } => ErrorCode::Unauthorized,
            ProtocolError::UnknownAgent { .. } => ErrorCode::AgentNotFound,
            ProtocolError::MethodNotAllowed { .. } => ErrorCode::MethodNotAllowed,
            ProtocolError::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            ProtocolError::UnsupportedEncoding { .. } => ErrorCode::UnsupportedEncoding,
            ProtocolError::ServerBusy { .. } => ErrorCode::ServerBusy,
        }
    }

    pub fn common_response(&self) -> proto::CommonResponse {
        proto::CommonResponse {
            status: self.code().wire_status(),
            error_message: self.to_string().into_bytes(),
        }
    }
}

/// The success `common_response`: status 0, no message.
pub fn ok_common_response() -> Option<proto::CommonResponse> {
    Some(proto::CommonResponse {
        status: 0,
        error_message: Vec::new(),
    })
}

/// A heartbeat error: request id and common response only.
pub fn heartbeat_error(request_id: Vec<u8>, error: &ProtocolError) -> proto::HeartbeatResponse {
    proto::HeartbeatResponse {
        request_id,
        common_response: Some(error.common_response()),
        ..Default::default()
    }
}

/// A fetch error: request id and common response only.
pub fn fetch_error(request_id: Vec<u8>, error: &ProtocolError) -> proto::FetchConfigResponse {
    proto::FetchConfigResponse {
        request_id,
        common_response: Some(error.common_response()),
        ..Default::default()
    }
}

/// A report-status error: request id and common response only.
pub fn report_error(request_id: Vec<u8>, error: &ProtocolError) -> proto::ReportStatusResponse {
    proto::ReportStatusResponse {
        request_id,
        common_response: Some(error.common_response()),
    }
}
