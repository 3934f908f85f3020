//! Per-file live LAL evaluation state, shown in `GET /runtime/rule/list` (`evaluation` of a
//! `lal` row): logs in, what the rules decided, samples emitted, logs dropped while suspended,
//! errors and the last error. Counters are atomics the LAL threads bump once per batch; readers
//! take a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;


/// What one file's rules did with one batch, summed before it is published.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogTally {
    pub logs_in: u64,
    pub kept: u64,
    pub sampled: u64,
    pub dropped: u64,
    pub aborted: u64,
    pub no_sink: u64,
    pub no_layer: u64,
    pub failed: u64,
    pub suspended: u64,
    pub samples_out: u64,
    pub kept_not_written: u64,
    pub last_error: Option<String>,
}

impl LogTally {
    /// `(outcome label, count)` for `logs_by_rule`.
    pub fn outcomes(&self) -> [(&'static str, u64); 8] {
        [
            ("kept", self.kept),
            ("sampled", self.sampled),
            ("dropped", self.dropped),
            ("aborted", self.aborted),
            ("failed", self.failed),
            ("no_sink", self.no_sink),
            ("no_layer", self.no_layer),
            ("suspended", self.suspended),
        ]
    }
}

#[derive(Debug, Default)]
pub struct LogRuleStats {
    logs_in: AtomicU64,
    kept: AtomicU64,
    sampled: AtomicU64,
    dropped: AtomicU64,
    aborted: AtomicU64,
    no_sink: AtomicU64,
    no_layer: AtomicU64,
    errors: AtomicU64,
    suspended: AtomicU64,
    samples_out: AtomicU64,
    kept_not_written: AtomicU64,
    evaluations: AtomicU64,
    last_evaluation_ms: AtomicU64,
    last_error: Mutex<Option<(String, u64)>>,
}

impl LogRuleStats {
    /// Adds one batch's tally; `evaluated` when the file's rules ran on it (not only dropped).
    pub fn add(&self, tally: &LogTally, evaluated: bool, now_ms: u64) {
        let add = |counter: &AtomicU64, n: u64| {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&self.logs_in, tally.logs_in);
        add(&self.kept, tally.kept);
        add(&self.sampled, tally.sampled);
        add(&self.dropped, tally.dropped);
        add(&self.aborted, tally.aborted);
        add(&self.no_sink, tally.no_sink);
        add(&self.no_layer, tally.no_layer);
        add(&self.errors, tally.failed);
        add(&self.suspended, tally.suspended);
        add(&self.samples_out, tally.samples_out);
        add(&self.kept_not_written, tally.kept_not_written);
        if evaluated {
            add(&self.evaluations, 1);
            self.last_evaluation_ms.store(now_ms, Ordering::Relaxed);
        }
        if let Some(message) = &tally.last_error {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some((message.clone(), now_ms));
        }
    }

    pub fn view(&self) -> LogEvaluationView {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let last_error = self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let last_evaluation = load(&self.last_evaluation_ms);
        LogEvaluationView {
            logs_in: load(&self.logs_in),
            kept: load(&self.kept),
            sampled: load(&self.sampled),
            dropped: load(&self.dropped),
            aborted: load(&self.aborted),
            no_sink: load(&self.no_sink),
            no_layer: load(&self.no_layer),
            errors: load(&self.errors),
            logs_dropped: load(&self.suspended),
            samples_out: load(&self.samples_out),
            kept_not_written: load(&self.kept_not_written),
            evaluations: load(&self.evaluations),
            last_evaluation_time: (last_evaluation > 0).then_some(last_evaluation),
            last_error: last_error.as_ref().map_or_else(String::new, |(m, _)| m.clone()),
            last_error_time: last_error.map(|(_, at)| at),
        }
    }
}

/// The `evaluation` object of a `lal` list row. The decision counters count rule runs (a log
/// that two rules of the file run on counts in both); `logsIn` counts logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEvaluationView {
    /// Logs at least one rule of the file ran on.
    pub logs_in: u64,
    /// Rule runs whose sink kept the log (one stored copy each).
    pub kept: u64,
    /// Rule runs whose last decision was a sampler refusing the log.
    pub sampled: u64,
    /// Rule runs whose sink dropped the log (`dropper`, or a decision other than a sampler's).
    pub dropped: u64,
    pub aborted: u64,
    /// Rule runs that ended without reaching a sink.
    pub no_sink: u64,
    /// `auto` rule runs that claimed the log without setting a layer.
    pub no_layer: u64,
    /// Rule runs stopped by a runtime error.
    pub errors: u64,
    /// Logs not evaluated because the file was suspended.
    pub logs_dropped: u64,
    /// Samples the file's `metrics {}` blocks emitted for the `log-mal-rules` files.
    pub samples_out: u64,
    /// Kept logs some log writer refused.
    pub kept_not_written: u64,
    pub evaluations: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_evaluation_time: Option<u64>,
    /// The last rule error's message ("" when none).
    pub last_error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_time: Option<u64>,
}

impl super::stats::FileStats for LogRuleStats {
    type View = LogEvaluationView;
    fn view(&self) -> LogEvaluationView {
        LogRuleStats::view(self)
    }
}

/// The stats of every LAL file dispatch has seen.
pub type LogStatsMap = super::stats::StatsMap<LogRuleStats>;
