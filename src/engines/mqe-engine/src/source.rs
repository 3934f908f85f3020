//! The reader seam: what the evaluator asks of the caller ([`MetricSource`]), the query window
//! ([`Duration`]), and an in-memory implementation ([`MemSource`]) for tests and for the alarm
//! engine to evaluate over a window of values.

use std::collections::{BTreeMap, HashMap};

use crate::ast::{AttrCondition, BaselineKind, Order};
use crate::result::{KeyValue, Owner};

/// The query step (upstream `Step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Second,
    Minute,
    Hour,
    Day,
}

impl Step {
    pub fn seconds(self) -> i64 {
        match self {
            Step::Second => 1,
            Step::Minute => 60,
            Step::Hour => 3600,
            Step::Day => 86_400,
        }
    }
    pub fn millis(self) -> i64 {
        self.seconds() * 1000
    }
}

/// Most points one duration may span (a larger window is an error result, not an allocation).
pub const MAX_POINTS: i64 = 100_000;

/// The query window: points `start_ms, start_ms + step, ..., <= end_ms` (epoch milliseconds,
/// aligned to the step by the caller). Each point's epoch-ms value is the `id` of its MQE value.
/// Entity, scope and anything else the source needs stay with the source. A `Day` step is
/// 86 400 000 ms (UTC days; upstream aligns days in the OAP's time zone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration {
    pub start_ms: i64,
    pub end_ms: i64,
    pub step: Step,
}

impl Duration {
    pub fn new(start_ms: i64, end_ms: i64, step: Step) -> Self {
        Duration { start_ms, end_ms, step }
    }
    /// The number of points (0 when `end < start`), `None` when above [`MAX_POINTS`].
    pub fn point_count(&self) -> Option<usize> {
        if self.end_ms < self.start_ms {
            return Some(0);
        }
        let n = (self.end_ms as i128 - self.start_ms as i128) / self.step.millis() as i128 + 1;
        if n > MAX_POINTS as i128 { None } else { Some(n as usize) }
    }
    /// The points' epoch-ms timestamps (empty when too many; check [`Duration::point_count`]).
    pub fn points(&self) -> Vec<i64> {
        let n = self.point_count().unwrap_or(0);
        (0..n as i64).map(|i| self.start_ms.saturating_add(i.saturating_mul(self.step.millis()))).collect()
    }
    /// The window `steps` points earlier at the start (what `increase(m, N)` reads).
    pub fn extended_back(&self, steps: i64) -> Duration {
        Duration {
            start_ms: self.start_ms.saturating_sub(steps.saturating_mul(self.step.millis())),
            ..*self
        }
    }
}

/// How a metric stores its values (upstream `ValueColumnMetadata` data types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// COMMON_VALUE: one series; `top_n` sorts entities by it.
    Common,
    /// LABELED_VALUE: one series per label set.
    Labeled,
    /// SAMPLED_RECORD: only readable through `top_n` (RECORD_LIST).
    Record,
}

/// One labeled series: labels and one value per duration point (`None` = missing).
#[derive(Debug, Clone, PartialEq)]
pub struct LabeledSeries {
    pub labels: Vec<KeyValue>,
    pub values: Vec<Option<f64>>,
}

/// One `top_n` entry: entity or record name, value, and (records) trace id / (metrics) owner.
#[derive(Debug, Clone, PartialEq)]
pub struct TopNItem {
    pub name: String,
    pub value: f64,
    pub trace_id: Option<String>,
    pub owner: Option<Owner>,
}

/// A `top_n` request.
#[derive(Debug, Clone, PartialEq)]
pub struct TopNRequest<'a> {
    pub metric: &'a str,
    pub top_n: usize,
    pub order: Order,
    pub attrs: &'a [AttrCondition],
}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// Becomes the result error as is (upstream `IllegalExpressionException`).
    #[error("{0}")]
    Illegal(String),
    /// A backend failure; the result says `Internal IO exception, query metrics error.` as upstream.
    #[error("Internal IO exception, query metrics error.")]
    Io(String),
}

/// What the evaluator reads. `values` slices must have one entry per point of the duration asked
/// for; a series of another length is dropped, as upstream does.
pub trait MetricSource {
    /// The metric's kind, `None` when it does not exist (`Metric: [x] does not exist.`).
    fn metric_kind(&self, name: &str) -> Option<MetricKind>;
    /// A common metric's values over `duration`.
    fn read_values(&self, name: &str, duration: &Duration) -> Result<Vec<Option<f64>>, SourceError>;
    /// A labeled metric's series; `selectors` are the `{k='v1,v2'}` pairs already split per value
    /// (a series matches when, for every selector key, its value is one of that key's values).
    fn read_labeled_values(&self, name: &str, selectors: &[KeyValue], duration: &Duration) -> Result<Vec<LabeledSeries>, SourceError>;
    /// `top_n` over a common metric (SORTED_LIST), best first.
    fn sort_metrics(&self, request: &TopNRequest<'_>, duration: &Duration) -> Result<Vec<TopNItem>, SourceError>;
    /// `top_n` over a sampled-record metric (RECORD_LIST).
    fn read_records(&self, request: &TopNRequest<'_>, duration: &Duration) -> Result<Vec<TopNItem>, SourceError>;
    /// Baseline predictions for a common metric, one per point; `None` (the default: no baseline
    /// service) gives an all-empty series, as SkyWalking without a baseline service.
    fn read_baseline(&self, _name: &str, _kind: BaselineKind, _duration: &Duration) -> Result<Option<Vec<Option<f64>>>, SourceError> {
        Ok(None)
    }
    /// Baseline predictions for a labeled metric; the default (no baseline service) has none.
    fn read_labeled_baseline(
        &self,
        _name: &str,
        _selectors: &[KeyValue],
        _kind: BaselineKind,
        _duration: &Duration,
    ) -> Result<Vec<LabeledSeries>, SourceError> {
        Ok(Vec::new())
    }
}

/// An in-memory [`MetricSource`]: values by point timestamp (epoch ms).
#[derive(Debug, Clone, Default)]
pub struct MemSource {
    metrics: HashMap<String, MemMetric>,
    baselines: HashMap<(String, u8), BTreeMap<i64, f64>>,
}

#[derive(Debug, Clone)]
enum MemMetric {
    Common(BTreeMap<i64, f64>),
    Labeled(Vec<(Vec<KeyValue>, BTreeMap<i64, f64>)>),
    /// (name, value, trace id / owner)
    TopN(Vec<TopNItem>),
    Records(Vec<TopNItem>),
}

fn kind_key(k: BaselineKind) -> u8 {
    match k {
        BaselineKind::Value => 0,
        BaselineKind::Upper => 1,
        BaselineKind::Lower => 2,
    }
}

impl MemSource {
    pub fn new() -> Self {
        Self::default()
    }
    /// Declares a common metric (so it exists even with no points).
    pub fn declare_common(&mut self, name: &str) {
        // Looked up first: `entry` would allocate the name on every point set.
        if self.metrics.contains_key(name) {
            return;
        }
        self.metrics.entry(name.to_string()).or_insert_with(|| MemMetric::Common(BTreeMap::new()));
    }
    /// Sets a common metric's value at a point.
    pub fn set(&mut self, name: &str, ts_ms: i64, value: f64) {
        self.declare_common(name);
        if let Some(MemMetric::Common(m)) = self.metrics.get_mut(name) {
            m.insert(ts_ms, value);
        }
    }
    /// Sets a common metric's values at several points: the same as [`MemSource::set`] for each
    /// in turn (nothing for none), with one lookup of the metric.
    pub fn set_points(&mut self, name: &str, points: &[(i64, f64)]) {
        if points.is_empty() {
            return;
        }
        self.declare_common(name);
        if let Some(MemMetric::Common(m)) = self.metrics.get_mut(name) {
            m.extend(points.iter().copied());
        }
    }
    /// Declares a labeled metric.
    pub fn declare_labeled(&mut self, name: &str) {
        if self.metrics.contains_key(name) {
            return;
        }
        self.metrics.entry(name.to_string()).or_insert_with(|| MemMetric::Labeled(Vec::new()));
    }
    /// Sets a labeled metric's value for a label set at a point (labels are stored sorted by key).
    pub fn set_labeled(&mut self, name: &str, labels: &[(&str, &str)], ts_ms: i64, value: f64) {
        self.declare_labeled(name);
        let mut key: Vec<KeyValue> = labels.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect();
        key.sort();
        if let Some(MemMetric::Labeled(series)) = self.metrics.get_mut(name) {
            match series.iter_mut().find(|(k, _)| *k == key) {
                Some((_, m)) => {
                    m.insert(ts_ms, value);
                }
                None => series.push((key, BTreeMap::from([(ts_ms, value)]))),
            }
        }
    }
    /// A common metric's `top_n` candidates (sorted at read time).
    pub fn set_top_n(&mut self, name: &str, items: Vec<TopNItem>) {
        self.metrics.insert(name.to_string(), MemMetric::TopN(items));
    }
    /// A sampled-record metric's records.
    pub fn set_records(&mut self, name: &str, items: Vec<TopNItem>) {
        self.metrics.insert(name.to_string(), MemMetric::Records(items));
    }
    /// A baseline prediction for a common metric at a point.
    pub fn set_baseline(&mut self, name: &str, kind: BaselineKind, ts_ms: i64, value: f64) {
        self.baselines.entry((name.to_string(), kind_key(kind))).or_default().insert(ts_ms, value);
    }
}

fn top(items: &[TopNItem], request: &TopNRequest<'_>) -> Vec<TopNItem> {
    let mut v = items.to_vec();
    v.sort_by(|a, b| {
        let o = a.value.total_cmp(&b.value);
        if request.order == Order::Asc { o } else { o.reverse() }
    });
    v.truncate(request.top_n);
    v
}

impl MetricSource for MemSource {
    fn metric_kind(&self, name: &str) -> Option<MetricKind> {
        self.metrics.get(name).map(|m| match m {
            MemMetric::Common(_) | MemMetric::TopN(_) => MetricKind::Common,
            MemMetric::Labeled(_) => MetricKind::Labeled,
            MemMetric::Records(_) => MetricKind::Record,
        })
    }
    fn read_values(&self, name: &str, duration: &Duration) -> Result<Vec<Option<f64>>, SourceError> {
        let points = duration.points();
        Ok(match self.metrics.get(name) {
            Some(MemMetric::Common(m)) => points.iter().map(|p| m.get(p).copied()).collect(),
            _ => vec![None; points.len()],
        })
    }
    fn read_labeled_values(&self, name: &str, selectors: &[KeyValue], duration: &Duration) -> Result<Vec<LabeledSeries>, SourceError> {
        let Some(MemMetric::Labeled(series)) = self.metrics.get(name) else { return Ok(Vec::new()) };
        let points = duration.points();
        let matches = |labels: &[KeyValue]| {
            selectors.iter().all(|s| {
                let wanted = selectors.iter().filter(|o| o.key == s.key);
                let have = labels.iter().find(|l| l.key == s.key).map(|l| l.value.as_str());
                wanted.into_iter().any(|w| Some(w.value.as_str()) == have)
            })
        };
        Ok(series
            .iter()
            .filter(|(labels, _)| matches(labels))
            .map(|(labels, m)| LabeledSeries { labels: labels.clone(), values: points.iter().map(|p| m.get(p).copied()).collect() })
            .collect())
    }
    fn sort_metrics(&self, request: &TopNRequest<'_>, _duration: &Duration) -> Result<Vec<TopNItem>, SourceError> {
        match self.metrics.get(request.metric) {
            Some(MemMetric::TopN(items)) => Ok(top(items, request)),
            _ => Ok(Vec::new()),
        }
    }
    fn read_records(&self, request: &TopNRequest<'_>, _duration: &Duration) -> Result<Vec<TopNItem>, SourceError> {
        match self.metrics.get(request.metric) {
            Some(MemMetric::Records(items)) => Ok(top(items, request)),
            _ => Ok(Vec::new()),
        }
    }
    fn read_baseline(&self, name: &str, kind: BaselineKind, duration: &Duration) -> Result<Option<Vec<Option<f64>>>, SourceError> {
        Ok(self.baselines.get(&(name.to_string(), kind_key(kind))).map(|m| duration.points().iter().map(|p| m.get(p).copied()).collect()))
    }
}

#[cfg(test)]
mod set_points_tests {
    use super::*;

    #[test]
    fn set_points_is_set_in_turn() {
        let mut one = MemSource::new();
        one.set("m", 60_000, 1.0);
        one.set("m", 0, 2.0);
        one.set("m", 60_000, 3.0);
        let mut many = MemSource::new();
        many.set_points("m", &[(60_000, 1.0), (0, 2.0), (60_000, 3.0)]);
        many.set_points("empty", &[]);
        let d = Duration::new(0, 60_000, Step::Minute);
        assert_eq!(many.read_values("m", &d), one.read_values("m", &d));
        assert_eq!(many.read_values("m", &d), Ok(vec![Some(2.0), Some(3.0)]));
        assert_eq!(many.metric_kind("empty"), None, "no point declares nothing");
        let mut labeled = MemSource::new();
        labeled.set_labeled("l", &[("p", "50")], 0, 1.0);
        labeled.set_points("l", &[(0, 2.0)]);
        assert_eq!(labeled.metric_kind("l"), Some(MetricKind::Labeled), "the first kind stays, as with set");
    }
}
