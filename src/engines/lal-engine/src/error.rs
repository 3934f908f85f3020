//! Errors of one rule on one log. A rule that fails stops there for that log; other rules and
//! other logs are unaffected. Nothing here panics.

/// Why a rule failed on a log.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("'{text}' is not a number")]
    NotANumber { text: String },
    #[error("null used as a number")]
    NullNumber,
    #[error("no group named '{name}' in the text parser's pattern")]
    NoSuchGroup { name: String },
    #[error("the regexp cannot run here: {reason}")]
    Regex { reason: String },
    #[error("unknown name '{name}'")]
    UnknownName { name: String },
    #[error("unsupported function '{name}'")]
    UnknownFunction { name: String },
    #[error("unsupported method '{method}' on {on}")]
    UnknownMethod { method: String, on: &'static str },
    #[error("unsupported {what} in a LAL script")]
    Unsupported { what: &'static str },
    #[error("'{statement}' is missing its {part}")]
    Missing {
        statement: &'static str,
        part: &'static str,
    },
    #[error("'{statement}' expects {expected}, got '{got}'")]
    BadValue {
        statement: &'static str,
        expected: &'static str,
        got: String,
    },
    #[error("timestamp '{text}' does not match the format '{format}' ({reason})")]
    Format {
        text: String,
        format: String,
        reason: String,
    },
}

/// A rule's failure on one log, with the rule it belongs to.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("rule '{rule}': {error}")]
pub struct RuleError {
    /// The rule key `layer:name`.
    pub rule: String,
    pub error: EvalError,
}
