//! Evaluation errors. Every error is scoped to one rule and one batch: the rule's output for that
//! batch is skipped, the error is returned with the rule's name, and the other rules run.

/// What went wrong while evaluating a rule; `line` is the 1-based line in the rule file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("line {line}: unknown variable '{name}' in a closure")]
    UnknownVariable { name: String, line: usize },
    #[error("line {line}: cannot call '{method}' on {receiver}")]
    NoMethod {
        method: String,
        receiver: &'static str,
        line: usize,
    },
    #[error("line {line}: cannot read property '{property}' of {receiver}")]
    NoProperty {
        property: String,
        receiver: &'static str,
        line: usize,
    },
    #[error("line {line}: type mismatch: {detail}")]
    TypeMismatch { detail: String, line: usize },
    #[error("line {line}: invalid regular expression '{pattern}': {reason}")]
    Regex {
        pattern: String,
        reason: String,
        line: usize,
    },
    #[error("line {line}: label '{label}' set to null")]
    NullLabel { label: String, line: usize },
    #[error("line {line}: '{value}' of label '{label}' is not a number")]
    NotANumber {
        label: String,
        value: String,
        line: usize,
    },
    #[error("line {line}: bad argument to '{function}': {detail}")]
    BadArgument {
        function: String,
        detail: String,
        line: usize,
    },
    #[error("line {line}: {what} is not supported by the engine")]
    Unsupported { what: String, line: usize },
}

/// A rule's failure for one batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("rule '{rule}' (metric {metric}): {error}")]
pub struct RuleError {
    pub rule: String,
    pub metric: String,
    pub error: EvalError,
}

/// Something the engine could not do but that does not fail the rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum Warning {
    #[error(
        "retagByK8sMeta has no Kubernetes metadata source: samples keep their labels (first seen in rule '{rule}')"
    )]
    NoK8sMetadata { rule: String },
    #[error(
        "the file filter failed ({reason}); rule '{rule}' ran on the unfiltered input, as SkyWalking does"
    )]
    FilterFailed { rule: String, reason: String },
}
