//! Per-file live LAL evaluation state, shown in `GET /runtime/rule/list` (`evaluation` of a
//! `lal` row): logs in, what the rules decided, samples emitted, logs dropped while suspended,
//! errors and the last error. Counters are atomics the LAL threads bump once per batch; readers
//! take a snapshot.

use serde::Serialize;

use super::stats::{Counter, Runs};

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
    logs_in: Counter,
    kept: Counter,
    sampled: Counter,
    dropped: Counter,
    aborted: Counter,
    no_sink: Counter,
    no_layer: Counter,
    errors: Counter,
    suspended: Counter,
    samples_out: Counter,
    kept_not_written: Counter,
    runs: Runs,
}

impl LogRuleStats {
    /// Adds the tally of a group of batches; `evaluated`: how many of them the file's rules
    /// ran on (not only dropped), each an evaluation.
    pub fn add(&self, tally: &LogTally, evaluated: u64, now_ms: u64) {
        self.logs_in.add(tally.logs_in);
        self.kept.add(tally.kept);
        self.sampled.add(tally.sampled);
        self.dropped.add(tally.dropped);
        self.aborted.add(tally.aborted);
        self.no_sink.add(tally.no_sink);
        self.no_layer.add(tally.no_layer);
        self.errors.add(tally.failed);
        self.suspended.add(tally.suspended);
        self.samples_out.add(tally.samples_out);
        self.kept_not_written.add(tally.kept_not_written);
        if evaluated > 0 {
            self.runs.evaluated_times(evaluated, now_ms);
        }
        if let Some(message) = &tally.last_error {
            self.runs.set_error(message.clone(), now_ms);
        }
    }

    pub fn view(&self) -> LogEvaluationView {
        let runs = self.runs.view();
        LogEvaluationView {
            logs_in: self.logs_in.get(),
            kept: self.kept.get(),
            sampled: self.sampled.get(),
            dropped: self.dropped.get(),
            aborted: self.aborted.get(),
            no_sink: self.no_sink.get(),
            no_layer: self.no_layer.get(),
            errors: self.errors.get(),
            logs_dropped: self.suspended.get(),
            samples_out: self.samples_out.get(),
            kept_not_written: self.kept_not_written.get(),
            evaluations: runs.evaluations,
            last_evaluation_time: runs.last_evaluation_time,
            last_error: runs.last_error,
            last_error_time: runs.last_error_time,
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
