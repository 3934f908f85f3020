//! Per-file live evaluation state, shown in `GET /runtime/rule/list` (`evaluation`): samples
//! in, values out, values rejected, samples dropped, evaluations, errors and the last error.
//! Counters are atomics the evaluation threads bump; readers take a snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;

use crate::base::ids::RuleKey;

/// A count the evaluation threads bump and readers load, with no ordering between counters.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn add(&self, n: u64) {
        if n > 0 {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What MAL and LAL files both keep about their runs: how many, when the last one was, and
/// the last rule error with its time.
#[derive(Debug, Default)]
pub struct Runs {
    evaluations: Counter,
    last_evaluation_ms: AtomicU64,
    last_error: Mutex<Option<(String, u64)>>,
}

/// A snapshot of [`Runs`], in the fields both list views show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunsView {
    pub evaluations: u64,
    /// None before the first run.
    pub last_evaluation_time: Option<u64>,
    /// The last rule error's message ("" when none).
    pub last_error: String,
    pub last_error_time: Option<u64>,
}

impl Runs {
    /// Counts one run, at `now_ms`.
    pub fn evaluated(&self, now_ms: u64) {
        self.evaluated_times(1, now_ms);
    }

    /// `times` evaluations that ended at `now_ms` (the batches of one group).
    pub fn evaluated_times(&self, times: u64, now_ms: u64) {
        self.evaluations.add(times);
        self.last_evaluation_ms.store(now_ms, Ordering::Relaxed);
    }

    pub fn set_error(&self, message: String, at_ms: u64) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some((message, at_ms));
    }

    pub fn view(&self) -> RunsView {
        let last_error = self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let last_evaluation = self.last_evaluation_ms.load(Ordering::Relaxed);
        RunsView {
            evaluations: self.evaluations.get(),
            last_evaluation_time: (last_evaluation > 0).then_some(last_evaluation),
            last_error: last_error.as_ref().map_or_else(String::new, |(m, _)| m.clone()),
            last_error_time: last_error.map(|(_, at)| at),
        }
    }
}

/// A MAL file's live counters.
#[derive(Debug, Default)]
pub struct RuleStats {
    pub samples_in: Counter,
    pub values_out: Counter,
    pub values_rejected: Counter,
    pub samples_dropped: Counter,
    pub errors: Counter,
    pub runs: Runs,
}

impl RuleStats {
    pub fn view(&self) -> EvaluationView {
        let runs = self.runs.view();
        EvaluationView {
            samples_in: self.samples_in.get(),
            values_out: self.values_out.get(),
            values_rejected: self.values_rejected.get(),
            samples_dropped: self.samples_dropped.get(),
            evaluations: runs.evaluations,
            errors: self.errors.get(),
            last_evaluation_time: runs.last_evaluation_time,
            last_error: runs.last_error,
            last_error_time: runs.last_error_time,
        }
    }
}

/// The `evaluation` object of a list row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationView {
    /// Samples of the batches offered to the file that it reads (by name), evaluated.
    pub samples_in: u64,
    /// Values computed and written.
    pub values_out: u64,
    /// Values computed but not written (unregistered measure, storage error).
    pub values_rejected: u64,
    /// Samples not evaluated because the file was suspended.
    pub samples_dropped: u64,
    pub evaluations: u64,
    /// Rule errors (one per rule and batch that failed).
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_evaluation_time: Option<u64>,
    /// The last rule error's message ("" when none).
    pub last_error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_time: Option<u64>,
}

/// A file's live counters and the view the list renders of them.
pub trait FileStats: Default + Send + Sync + 'static {
    type View: Default;
    fn view(&self) -> Self::View;
}

impl FileStats for RuleStats {
    type View = EvaluationView;
    fn view(&self) -> EvaluationView {
        RuleStats::view(self)
    }
}

/// The stats of every file dispatch has seen (MAL files' [`RuleStats`], or LAL files').
pub struct StatsMap<S = RuleStats> {
    files: RwLock<HashMap<RuleKey, Arc<S>>>,
}

impl<S> Default for StatsMap<S> {
    fn default() -> Self {
        StatsMap { files: RwLock::new(HashMap::new()) }
    }
}

impl<S: FileStats> StatsMap<S> {
    pub fn of(&self, key: &RuleKey) -> Arc<S> {
        if let Some(stats) = self.files.read().unwrap_or_else(|p| p.into_inner()).get(key) {
            return stats.clone();
        }
        self.files.write().unwrap_or_else(|p| p.into_inner()).entry(key.clone()).or_default().clone()
    }

    pub fn view(&self, key: &RuleKey) -> S::View {
        self.files.read().unwrap_or_else(|p| p.into_inner()).get(key).map(|s| s.view()).unwrap_or_default()
    }

    /// Forgets the files `keep` says no longer exist.
    pub fn retain(&self, keep: impl Fn(&RuleKey) -> bool) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).retain(|key, _| keep(key));
    }
}
