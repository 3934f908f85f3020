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

/// Series of one call site: sample name → labels → history. Nested so that a lookup borrows the
/// sample's name and labels instead of building an owned key.
type SiteSeries = HashMap<String, HashMap<Labels, Series>>;

/// The counter windows of one rule file.
#[derive(Debug, Clone)]
pub struct CounterState {
    config: CounterConfig,
    /// Rule → call sites (indexed by site) → series.
    series: HashMap<RuleKey, Vec<SiteSeries>>,
    /// A time no series expires before: at most the smallest `newest_ts + window + grace` of
    /// the series held (those only grow, so it stays a lower bound until the next full pass).
    /// [`CounterState::prune`] walks the series only once `now` has passed it.
    no_expiry_before: i64,
}

impl Default for CounterState {
    fn default() -> Self {
        CounterState::new(CounterConfig::default())
    }
}

/// When a series becomes idle enough for [`CounterState::prune`] to drop it: it is kept while
/// this is at least the pruning time.
fn expiry(series: &Series, grace_ms: i64) -> i64 {
    series
        .newest_ts
        .saturating_add(series.window_ms)
        .saturating_add(grace_ms)
}

/// The reference point chosen for a new sample: `(timestamp_ms, value)`.
pub(crate) type Reference = (i64, f64);

impl CounterState {
    pub fn new(config: CounterConfig) -> CounterState {
        CounterState {
            config,
            series: HashMap::new(),
            no_expiry_before: i64::MIN,
        }
    }

    /// Number of series held (for memory accounting and tests).
    pub fn len(&self) -> usize {
        self.all_series().count()
    }

    pub fn is_empty(&self) -> bool {
        self.all_series().next().is_none()
    }

    /// Approximate number of points held across all series.
    pub fn points(&self) -> usize {
        self.all_series().map(|series| series.points.len()).sum()
    }

    fn all_series(&self) -> impl Iterator<Item = &Series> {
        self.series
            .values()
            .flatten()
            .flat_map(HashMap::values)
            .flat_map(HashMap::values)
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
        let (handle_resets, grace_ms) = (self.config.handle_resets, self.config.idle_grace_ms);
        let series = series_mut(&mut self.series, rule, site, name, labels, window_ms);
        let (ts, value) = point;
        if handle_resets
            && ts >= series.newest_ts
            && series.points.back().is_some_and(|&(_, last)| value < last)
        {
            series.points.clear();
        }
        insert_ordered(&mut series.points, point);
        series.newest_ts = series.newest_ts.max(ts);
        self.no_expiry_before = self.no_expiry_before.min(expiry(series, grace_ms));
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
        let grace_ms = self.config.idle_grace_ms;
        let series = series_mut(&mut self.series, rule, site, name, labels, 0);
        let previous = series.points.back().copied().unwrap_or(point);
        series.points.clear();
        series.points.push_back(point);
        series.newest_ts = series.newest_ts.max(point.0);
        self.no_expiry_before = self.no_expiry_before.min(expiry(series, grace_ms));
        previous
    }

    /// Keeps the series for which `keep(series)` holds; drops emptied levels.
    fn retain_series(&mut self, keep: impl Fn(&RuleKey, &str, &Series) -> bool) {
        self.series.retain(|rule, sites| {
            for by_name in sites.iter_mut() {
                by_name.retain(|name, by_labels| {
                    by_labels.retain(|_, series| keep(rule, name, series));
                    !by_labels.is_empty()
                });
            }
            sites.iter().any(|by_name| !by_name.is_empty())
        });
    }

    /// Drops series whose newest point is older than their window plus the idle grace.
    /// Walks the series only when one may be due (see `no_expiry_before`): called after every
    /// evaluation, it would otherwise visit every series of the file each time.
    pub fn prune(&mut self, now_ms: i64) {
        if now_ms <= self.no_expiry_before {
            return;
        }
        let grace = self.config.idle_grace_ms;
        self.retain_series(|_, _, series| expiry(series, grace) >= now_ms);
        self.no_expiry_before = self
            .all_series()
            .map(|series| expiry(series, grace))
            .min()
            .unwrap_or(i64::MAX);
    }

    /// Keeps the series for which `keep(rule, sample name)` holds (see
    /// [`EngineState::carry_over`](crate::EngineState::carry_over)).
    pub fn retain(&mut self, keep: impl Fn(&RuleKey, &str) -> bool) {
        self.retain_series(|rule, name, _| keep(rule, name));
    }

    /// Starts `metric` fresh (a structural change of its rule).
    pub fn forget_metric(&mut self, metric: &str) {
        self.series.retain(|rule, _| rule.metric != metric);
    }
}

/// The series of `(rule, site, name, labels)`, created empty if new; its window grows to
/// `window_ms`.
fn series_mut<'a>(
    all: &'a mut HashMap<RuleKey, Vec<SiteSeries>>,
    rule: &RuleKey,
    site: u32,
    name: &str,
    labels: &Labels,
    window_ms: i64,
) -> &'a mut Series {
    if !all.contains_key(rule) {
        all.insert(rule.clone(), Vec::new());
    }
    let sites = all.get_mut(rule).expect("inserted above");
    let site = site as usize;
    if sites.len() <= site {
        sites.resize_with(site + 1, HashMap::new);
    }
    let by_name = &mut sites[site];
    if !by_name.contains_key(name) {
        by_name.insert(name.to_owned(), HashMap::new());
    }
    let by_labels = by_name.get_mut(name).expect("inserted above");
    let series = by_labels.entry(labels.clone()).or_insert_with(|| Series {
        window_ms,
        points: VecDeque::new(),
        newest_ts: i64::MIN,
    });
    series.window_ms = series.window_ms.max(window_ms);
    series
}

fn insert_ordered(points: &mut VecDeque<(i64, f64)>, point: (i64, f64)) {
    let at = points.partition_point(|&(ts, value)| {
        ts < point.0 || (ts == point.0 && value.total_cmp(&point.1).is_le())
    });
    points.insert(at, point);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Pruning only when a series may be due keeps exactly the series a full pass every time
    /// keeps: random updates (windows, `irate`, old and new points) and prunes at random times.
    #[test]
    fn lazy_prune_keeps_what_a_full_pass_keeps() {
        let mut state = CounterState::new(CounterConfig { handle_resets: true, idle_grace_ms: 1_000 });
        let rules = [RuleKey { metric: "a".into(), ordinal: 0 }, RuleKey { metric: "b".into(), ordinal: 1 }];
        let labels: Vec<Labels> = (0..5).map(|i| Arc::new([("i".to_owned(), i.to_string())].into())).collect();
        // A small deterministic generator (no test dependency).
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let mut now = 0i64;
        for _ in 0..5_000 {
            now += next(400) as i64;
            let rule = &rules[next(2) as usize];
            let label = &labels[next(5) as usize];
            let ts = now - next(3_000) as i64;
            match next(4) {
                0 => {
                    state.previous(rule, next(2) as u32, "x", label, (ts, next(10) as f64));
                }
                1 | 2 => {
                    state.window(rule, next(2) as u32, "x", label, (ts, next(10) as f64), next(2_000) as i64);
                }
                _ => {
                    let mut eager = state.clone();
                    eager.no_expiry_before = i64::MIN;
                    eager.prune(now);
                    state.prune(now);
                    assert_eq!((state.len(), state.points()), (eager.len(), eager.points()));
                    assert!(state.all_series().all(|s| expiry(s, 1_000) >= now), "nothing due is left");
                }
            }
        }
    }
}
