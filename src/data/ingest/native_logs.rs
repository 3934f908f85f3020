//! SkyWalking's native log HTTP API, `POST /v3/logs`: a JSON array of `LogData` in proto3 JSON
//! (`LogReportServiceHTTPHandler`). Pure: bytes in, one [`LogBatch`] (or an error naming the
//! element and its field) out. Each element is read by [`LogData::from_json`]; the logs are
//! passed on as sent (SkyWalking's handler hands every element to the analyzer, whose intake
//! ignores a log without service and stamps a zero timestamp with the time of analysis).

use serde_json::Value;

use crate::data::seam::{LogBatch, LogData, LogProtocol};

/// Why a `/v3/logs` body was refused (400, nothing taken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NativeLogsError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body must be a JSON array of LogData, found {0}")]
    NotAnArray(&'static str),
    #[error("[{index}]: {error}")]
    Log { index: usize, error: hotrule_lal_engine::LogDataError },
}

/// Decodes a `/v3/logs` body; an empty array gives a batch without logs.
pub fn decode(body: &[u8], received_ms: i64) -> Result<LogBatch, NativeLogsError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| NativeLogsError::NotJson(e.to_string()))?;
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(_) => return Err(NativeLogsError::NotAnArray("an object")),
        Value::Null => return Err(NativeLogsError::NotAnArray("null")),
        Value::Bool(_) => return Err(NativeLogsError::NotAnArray("a boolean")),
        Value::Number(_) => return Err(NativeLogsError::NotAnArray("a number")),
        Value::String(_) => return Err(NativeLogsError::NotAnArray("a string")),
    };
    let logs = items
        .iter()
        .enumerate()
        .map(|(index, item)| LogData::from_json(item).map_err(|error| NativeLogsError::Log { index, error }))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LogBatch { protocol: LogProtocol::SkyWalking, logs, received_ms })
}
