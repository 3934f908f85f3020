//! Counter history for `increase`, `rate` and `irate` (SkyWalking's `CounterWindow`), kept in a
//! [`CounterState`] the caller owns and passes to every evaluation: there is no global state.
//!
//! A series is keyed by the rule (its metric name and its ordinal among the file's rules of that
//! metric), the call site inside the expression, and the sample's name and labels at that point of
//! the chain. Upstream keys by (name, labels) only and shares one queue across rules, so two rules
//! with different windows on the same counter evict each other's history; keying by rule and site
//! keeps them apart.
//!
//! The window algorithm is upstream's: points sit in a timestamp-ordered queue; with
//! `W = ts − window`, if the oldest point is newer than `W` it is the reference (warm-up), else the
//! points older than `W` are popped and the reference is whichever of {last popped, first
//! remaining} is closer to `W` (tie → the older). `irate` uses the previous point of the series.
//!
//! Two deliberate additions: counter resets (a value below the newest point's) restart the
//! series' history, so the reset point yields 0 (what upstream stores for its negative delta) and
//! the next points give true increases instead of upstream's zeros for up to one window; and
//! series idle for longer than their window plus a grace period are dropped by [`CounterState::prune`].

use std::collections::{HashMap, VecDeque};

use crate::sample::Labels;

/// Which rule of a file a series belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleKey {
    pub metric: String,
    /// Ordinal among the file's rules with the same metric name (usually 0).
    pub ordinal: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    rule: RuleKey,
    site: u32,
    name: String,
    labels: Labels,
}

#[derive(Debug, Clone, Default)]
struct Series {
    window_ms: i64,
    /// Ordered by (timestamp, value), like upstream's `PriorityQueue<Tuple2<Long, Double>>`.
    points: VecDeque<(i64, f64)>,
    newest_ts: i64,
}

/// Tunables of the counter store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterConfig {
    /// Restart a series' history when its value decreases (a counter reset).
    pub handle_resets: bool,
    /// A series is dropped when `now − newest point > window + idle_grace_ms`.
    pub idle_grace_ms: i64,
}

impl Default for CounterConfig {
    fn default() -> Self {
        CounterConfig {
            handle_resets: true,
            idle_grace_ms: 5 * 60_000,
        }
    }
}

/// The counter windows of one rule file.
#[derive(Debug, Clone, Default)]
pub struct CounterState {
    config: CounterConfig,
    series: HashMap<SeriesKey, Series>,
}

/// The reference point chosen for a new sample: `(timestamp_ms, value)`.
pub(crate) type Reference = (i64, f64);

impl CounterState {
    pub fn new(config: CounterConfig) -> CounterState {
        CounterState {
            config,
            series: HashMap::new(),
        }
    }

    /// Number of series held (for memory accounting and tests).
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Approximate number of points held across all series.
    pub fn points(&self) -> usize {
        self.series.values().map(|series| series.points.len()).sum()
    }

    /// `increase`/`rate`: records the point and returns the reference point.
    pub(crate) fn window(
        &mut self,
        rule: &RuleKey,
        site: u32,
        name: &str,
        labels: &Labels,
        point: (i64, f64),
        window_ms: i64,
    ) -> Reference {
        let handle_resets = self.config.handle_resets;
        let series = self.series_mut(rule, site, name, labels, window_ms);
        let (ts, value) = point;
        if handle_resets
            && ts >= series.newest_ts
            && series.points.back().is_some_and(|&(_, last)| value < last)
        {
            series.points.clear();
        }
        insert_ordered(&mut series.points, point);
        series.newest_ts = series.newest_ts.max(ts);
        let water = ts - window_ms;
        let Some(&oldest) = series.points.front() else {
            return point;
        };
        if oldest.0 > water {
            return oldest;
        }
        let mut popped = oldest;
        while let Some(&front) = series.points.front() {
            if front.0 >= water || series.points.len() == 1 {
                break;
            }
            popped = front;
            series.points.pop_front();
        }
        let remaining = series.points.front().copied().unwrap_or(point);
        if water - popped.0 <= remaining.0 - water {
            popped
        } else {
            remaining
        }
    }

    /// `irate`: records the point and returns the previous one (itself the first time).
    pub(crate) fn previous(
        &mut self,
        rule: &RuleKey,
        site: u32,
        name: &str,
        labels: &Labels,
        point: (i64, f64),
    ) -> Reference {
        let series = self.series_mut(rule, site, name, labels, 0);
        let previous = series.points.back().copied().unwrap_or(point);
        series.points.clear();
        series.points.push_back(point);
        series.newest_ts = series.newest_ts.max(point.0);
        previous
    }

    fn series_mut(
        &mut self,
        rule: &RuleKey,
        site: u32,
        name: &str,
        labels: &Labels,
        window_ms: i64,
    ) -> &mut Series {
        let key = SeriesKey {
            rule: rule.clone(),
            site,
            name: name.to_owned(),
            labels: labels.clone(),
        };
        let series = self.series.entry(key).or_insert_with(|| Series {
            window_ms,
            points: VecDeque::new(),
            newest_ts: i64::MIN,
        });
        series.window_ms = series.window_ms.max(window_ms);
        series
    }

    /// Drops series whose newest point is older than their window plus the idle grace.
    pub fn prune(&mut self, now_ms: i64) {
        let grace = self.config.idle_grace_ms;
        self.series.retain(|_, series| {
            series
                .newest_ts
                .saturating_add(series.window_ms)
                .saturating_add(grace)
                >= now_ms
        });
    }

    /// Keeps the series for which `keep(rule, sample name)` holds (see
    /// [`EngineState::carry_over`](crate::EngineState::carry_over)).
    pub fn retain(&mut self, keep: impl Fn(&RuleKey, &str) -> bool) {
        self.series.retain(|key, _| keep(&key.rule, &key.name));
    }

    /// Starts `metric` fresh (a structural change of its rule).
    pub fn forget_metric(&mut self, metric: &str) {
        self.series.retain(|key, _| key.rule.metric != metric);
    }
}

fn insert_ordered(points: &mut VecDeque<(i64, f64)>, point: (i64, f64)) {
    let at = points.partition_point(|&(ts, value)| {
        ts < point.0 || (ts == point.0 && value.total_cmp(&point.1).is_le())
    });
    points.insert(at, point);
}
