//! Per-file live evaluation state, shown in `GET /runtime/rule/list` (`evaluation`): samples
//! in, values out, values rejected, samples dropped, evaluations, errors and the last error.
//! Counters are atomics the evaluation threads bump; readers take a snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;

use crate::base::ids::RuleKey;

#[derive(Debug, Default)]
pub struct RuleStats {
    pub samples_in: AtomicU64,
    pub values_out: AtomicU64,
    pub values_rejected: AtomicU64,
    pub samples_dropped: AtomicU64,
    pub evaluations: AtomicU64,
    pub errors: AtomicU64,
    pub last_evaluation_ms: AtomicU64,
    last_error: Mutex<Option<(String, u64)>>,
}

impl RuleStats {
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn set_error(&self, message: String, at_ms: u64) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some((message, at_ms));
    }

    pub fn view(&self) -> EvaluationView {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let last_error = self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let last_evaluation = load(&self.last_evaluation_ms);
        EvaluationView {
            samples_in: load(&self.samples_in),
            values_out: load(&self.values_out),
            values_rejected: load(&self.values_rejected),
            samples_dropped: load(&self.samples_dropped),
            evaluations: load(&self.evaluations),
            errors: load(&self.errors),
            last_evaluation_time: (last_evaluation > 0).then_some(last_evaluation),
            last_error: last_error.as_ref().map_or_else(String::new, |(m, _)| m.clone()),
            last_error_time: last_error.map(|(_, at)| at),
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
