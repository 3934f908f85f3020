//! The health predicate of a roll step: is the node at the index healthy on the rolling content?
//!
//! A node fills a [`HealthReport`] about itself (from its runtime and dispatch counters) and
//! publishes it in gossip; the main judges it here. Healthy means, in this order of checks:
//! no apply error, running the rolling content's hash, dispatch running, the rule's evaluation
//! error count did not rise since the content was applied, the report covers the whole health
//! window, and (for a rule that received traffic) values were produced. A failed check is either
//! not yet healthy (wait) or unhealthy; both stop the roll only when the step timeout passes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::base::ids::ContentHash;

/// What the node at the index reports about the file being rolled. The counters cover the span
/// from `running_since_ms` (when its current content was applied) to `reported_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// The hash of the content the node runs for the file; `None` when it runs nothing.
    pub running_hash: Option<ContentHash>,
    pub running_since_ms: u64,
    pub reported_ms: u64,
    /// The node's last apply error for the file, if its last apply failed.
    pub apply_error: Option<String>,
    /// The file's dispatch gate is running (not suspended, not draining).
    pub dispatch_running: bool,
    /// How much the file's evaluation error count rose over the span.
    pub eval_errors_rise: u64,
    /// Samples or log records routed to the file over the span (its traffic).
    pub samples_in: u64,
    /// Values the file produced over the span.
    pub values_out: u64,
}

/// Which optional checks a roll applies (`healthChecks=` on the start request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthChecks {
    pub eval_errors: bool,
    pub values: bool,
}

/// How a roll judges a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSettings {
    /// How long a node must have run the rolling content, with clean counters, to be healthy.
    pub window_ms: u64,
    /// After this many consecutive ticks on which the node at the index is unreachable, it is
    /// skipped (Exhibitor: 4).
    pub unreachable_tries: u32,
    pub checks: HealthChecks,
}

impl HealthSettings {
    pub const DEFAULT_WINDOW_MS: u64 = 30_000;
    pub const DEFAULT_UNREACHABLE_TRIES: u32 = 4;
}

impl Default for HealthSettings {
    fn default() -> HealthSettings {
        HealthSettings {
            window_ms: HealthSettings::DEFAULT_WINDOW_MS,
            unreachable_tries: HealthSettings::DEFAULT_UNREACHABLE_TRIES,
            checks: HealthChecks { eval_errors: true, values: true },
        }
    }
}

/// Why a node is not (yet) healthy. Stored in the record, so new variants go at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthFailure {
    /// Live, but nothing reported yet.
    NoReport,
    NotRunningRolling { running: Option<ContentHash> },
    ApplyError { message: String },
    DispatchNotRunning,
    EvalErrorsRose { by: u64 },
    WindowOpen { observed_ms: u64, window_ms: u64 },
    NoValues { samples_in: u64 },
}

impl fmt::Display for HealthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HealthFailure::NoReport => f.write_str("no health report yet"),
            HealthFailure::NotRunningRolling { running: Some(hash) } => {
                write!(f, "runs {} instead of the rolling content", short(hash))
            }
            HealthFailure::NotRunningRolling { running: None } => f.write_str("runs nothing for the file yet"),
            HealthFailure::ApplyError { message } => write!(f, "apply failed: {message}"),
            HealthFailure::DispatchNotRunning => f.write_str("dispatch is not running"),
            HealthFailure::EvalErrorsRose { by } => write!(f, "evaluation errors rose by {by}"),
            HealthFailure::WindowOpen { observed_ms, window_ms } => {
                write!(f, "observed {observed_ms} ms of a {window_ms} ms health window")
            }
            HealthFailure::NoValues { samples_in } => write!(f, "{samples_in} samples in, no values produced"),
        }
    }
}

fn short(hash: &ContentHash) -> &str {
    hash.as_str().get(..12).unwrap_or(hash.as_str())
}

/// The judgement of one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// Nothing wrong yet, but not proven: wait.
    NotYet(HealthFailure),
    /// Something is wrong; the roll waits for it to clear until the step timeout.
    Unhealthy(HealthFailure),
}

/// Judges `report` against the rolling content's hash.
pub fn judge(report: &HealthReport, rolling_hash: &ContentHash, settings: &HealthSettings) -> Verdict {
    if let Some(message) = &report.apply_error {
        return Verdict::Unhealthy(HealthFailure::ApplyError { message: message.clone() });
    }
    if report.running_hash.as_ref() != Some(rolling_hash) {
        return Verdict::NotYet(HealthFailure::NotRunningRolling { running: report.running_hash.clone() });
    }
    if !report.dispatch_running {
        return Verdict::Unhealthy(HealthFailure::DispatchNotRunning);
    }
    if settings.checks.eval_errors && report.eval_errors_rise > 0 {
        return Verdict::Unhealthy(HealthFailure::EvalErrorsRose { by: report.eval_errors_rise });
    }
    let observed_ms = report.reported_ms.saturating_sub(report.running_since_ms);
    if observed_ms < settings.window_ms {
        return Verdict::NotYet(HealthFailure::WindowOpen { observed_ms, window_ms: settings.window_ms });
    }
    if settings.checks.values && report.samples_in > 0 && report.values_out == 0 {
        return Verdict::Unhealthy(HealthFailure::NoValues { samples_in: report.samples_in });
    }
    Verdict::Healthy
}
