//! The errors of parsing, planning and evaluating a query.

/// Why a query could not be answered. The API maps `Parse`/`Unsupported` to 400 bad_data,
/// `TooManySamples` to 422 execution and `Timeout` to 503 timeout.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("parse error: {message}")]
    Parse { message: String },
    #[error("unsupported PromQL construct: {construct}")]
    Unsupported { construct: String },
    #[error("query processing would load too many samples into memory (limit {limit})")]
    TooManySamples { limit: usize },
    /// An execution error Prometheus reports at evaluation (e.g. "many-to-many matching not allowed").
    #[error("{message}")]
    Execution { message: String },
    #[error("query timed out")]
    Timeout,
}
