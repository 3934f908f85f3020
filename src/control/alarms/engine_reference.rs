//! The engine as it was before frames (commit 8a1a05d: a `Window` per (rule, entity) fed the
//! reads, a MemSource per window), kept for `engine_tests` to check the engine against it over
//! generated runs. Not used outside tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use hotrule_mqe_engine::{Duration, Expr, MemSource, ResultType, Step, evaluate};

use super::engine::{AlarmValues, Checked, EntityState, RuleStatus, RuleView, StateRecord, rule_fingerprint};
use super::entity::AlarmEntity;
use super::hooks::message::{AlarmMessage, AlarmRecoveryMessage, Tag};
use super::settings::{AlarmRule, AlarmSettings, diff};
use super::state::{AlarmPhase, AlarmState, AlarmUuid, FiredAlarm, Output, check};
use super::window::{EpochMinute, MetricValue, Window};

/// The reads of one check, per metric.
type Reads = BTreeMap<String, Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String>>;

struct RunningRule {
    rule: AlarmRule,
    expr: Option<Expr>,
    status: RuleStatus,
    entities: BTreeMap<AlarmEntity, EntityState>,
}

impl RunningRule {
    fn new(rule: AlarmRule) -> RunningRule {
        let (expr, status) = match super::verify::compile(&rule.expression) {
            Ok(expr) => (Some(expr), RuleStatus::NotChecked),
            Err(reason) => (None, RuleStatus::Error { reason }),
        };
        RunningRule { rule, expr, status, entities: BTreeMap::new() }
    }
}

/// The running rules.
pub struct ReferenceEngine {
    settings: AlarmSettings,
    rules: Vec<RunningRule>,
    resets: u64,
    /// States peers sent for entities they evaluate: (rule, entity) → (fingerprint, state).
    kept: BTreeMap<(String, AlarmEntity), (u64, AlarmState)>,
}

impl ReferenceEngine {
    pub fn new(settings: AlarmSettings) -> ReferenceEngine {
        let rules = settings.rules.iter().cloned().map(RunningRule::new).collect();
        ReferenceEngine { settings, rules, resets: 0, kept: BTreeMap::new() }
    }

    pub fn settings(&self) -> &AlarmSettings {
        &self.settings
    }

    /// New settings: rules equal in every attribute keep their states, the others start fresh
    /// (dropped states send no recovery). Returns the names of the rules that started fresh.
    pub fn replace(&mut self, settings: AlarmSettings) -> Vec<String> {
        let changes = diff(&self.settings, &settings);
        let mut old: BTreeMap<String, RunningRule> = self.rules.drain(..).map(|r| (r.rule.name.clone(), r)).collect();
        self.rules = settings
            .rules
            .iter()
            .map(|rule| match old.remove(&rule.name) {
                Some(running) if changes.unchanged.contains(&rule.name) => running,
                _ => RunningRule::new(rule.clone()),
            })
            .collect();
        self.settings = settings;
        changes.changed.into_iter().chain(changes.added).collect()
    }

    /// `AlarmKernelService.reset`: every rule reading one of `metrics` forgets all its entities'
    /// windows and states (no recovery is sent). Returns the rules reset, in settings order.
    pub fn reset(&mut self, metrics: &BTreeSet<String>) -> Vec<String> {
        let mut reset = Vec::new();
        for running in &mut self.rules {
            if running.rule.metrics.iter().any(|m| metrics.contains(m)) {
                running.entities.clear();
                self.kept.retain(|(rule, _), _| *rule != running.rule.name);
                reset.push(running.rule.name.clone());
            }
        }
        self.resets += reset.len() as u64;
        reset
    }

    /// States a peer sent: kept until this node evaluates the entity (then taken, if the rule is
    /// the same) or the peer says it is gone.
    pub fn adopt(&mut self, records: Vec<StateRecord>) {
        for record in records {
            let key = (record.rule, record.entity);
            match record.state {
                Some(state) => {
                    self.kept.insert(key, (record.fingerprint, state));
                }
                None => {
                    self.kept.remove(&key);
                }
            }
        }
    }

    /// States kept for peers' entities.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }

    /// Rules reset so far (one per rule per reset).
    pub fn reset_count(&self) -> u64 {
        self.resets
    }

    /// One check of every rule at `now_ms` (the worker calls it once a minute, after second 15).
    /// `mint` gives a new alarm id for each fire.
    pub fn check(&mut self, now_ms: i64, values: &dyn AlarmValues, mint: &mut dyn FnMut() -> AlarmUuid) -> Checked {
        let now = EpochMinute::from_epoch_ms(now_ms);
        let mut out = Checked::default();
        // Each metric read once, over the longest window that reads it.
        let mut longest: BTreeMap<&str, usize> = BTreeMap::new();
        for running in &self.rules {
            for metric in &running.rule.metrics {
                let size = longest.entry(metric.as_str()).or_default();
                *size = (*size).max(running.rule.window_size());
            }
        }
        // Each metric's scope asked once per check: the reads and every rule's status use it.
        let scopes: BTreeMap<String, Option<String>> = longest.keys().map(|metric| (metric.to_string(), values.metric_scope(metric))).collect();
        let mut read: Reads = BTreeMap::new();
        for (metric, size) in &longest {
            if scopes.get(*metric).is_some_and(Option::is_some) {
                let from = EpochMinute(now.0 - *size as i64 + 1);
                read.insert(metric.to_string(), values.minute_values(metric, from, now));
            }
        }
        // The entities of every read, indexed once per check: a rule's windows are then a vector
        // by index, not a map keyed by cloned entities.
        let index = EntityIndex::of(&read);
        let mut windows: Vec<Option<Window>> = Vec::new();
        for running in &mut self.rules {
            let Some(expr) = running.expr.as_ref() else {
                if let RuleStatus::Error { reason } = &running.status {
                    out.errors.push((running.rule.name.clone(), reason.clone()));
                }
                continue;
            };
            running.status = status_of(&running.rule, &scopes);
            if running.status != RuleStatus::Running {
                if let RuleStatus::Error { reason } = &running.status {
                    out.errors.push((running.rule.name.clone(), reason.clone()));
                }
                continue;
            }
            windows.clear();
            windows.resize(index.entities.len(), None);
            // Whether the rule's name filters accept an entity, asked once per entity.
            let mut accepted: Vec<Option<bool>> = vec![None; index.entities.len()];
            let mut failed = None;
            for metric in &running.rule.metrics {
                match (read.get(metric), index.points.get(metric.as_str())) {
                    (Some(Ok(_)), Some(points)) => {
                        for &(at, minute, value) in points {
                            let accepts = *accepted[at].get_or_insert_with(|| running.rule.accepts_entity(&index.entities[at].name));
                            if accepts {
                                let window = windows[at].get_or_insert_with(|| fresh_window(running.rule.window_size(), now));
                                window.add(metric, minute, value.clone());
                            }
                        }
                    }
                    (Some(Err(reason)), _) => failed = Some(reason.clone()),
                    _ => {}
                }
            }
            if let Some(reason) = failed {
                running.status = RuleStatus::Error { reason: format!("reading the metric values: {reason}") };
                out.errors.push((running.rule.name.clone(), reason));
                continue;
            }
            let fingerprint = rule_fingerprint(&running.rule);
            let dropped = |entity: &AlarmEntity| StateRecord { rule: running.rule.name.clone(), fingerprint, entity: entity.clone(), state: None };
            // Entities whose window emptied expire silently (no recovery).
            {
                let live = |entity: &AlarmEntity| index.position(entity).is_some_and(|at| windows[at].as_ref().is_some_and(|w| !w.is_expired()));
                // Peers hold only non-NORMAL states (below): those are the ones to forget.
                for (entity, held) in &running.entities {
                    if !live(entity) && held.state.phase != AlarmPhase::Normal {
                        out.states.push(dropped(entity));
                    }
                }
                running.entities.retain(|entity, _| live(entity));
            }
            // In entity order, as the map of windows was walked.
            for &at in &index.sorted {
                let Some(window) = windows[at].take() else { continue };
                let entity = index.entities[at];
                if window.is_expired() {
                    continue;
                }
                out.windows += 1;
                let matched = evaluate_window(expr, &running.rule, &window, now);
                let periods = running.rule.periods;
                let held = running.entities.get(entity).map(|e| e.state);
                // A state a peer kept for this entity (its owner before this node) comes first.
                let handed = match held {
                    Some(_) => None,
                    None => self.kept.remove(&(running.rule.name.clone(), entity.clone())).filter(|(f, _)| *f == fingerprint).map(|(_, s)| s),
                };
                let kept = held.or(handed).unwrap_or_else(|| AlarmState::new(periods));
                let fresh = FiredAlarm { uuid: mint(), start_time_ms: now_ms };
                let (state, output) = check(kept, matched, periods, fresh);
                // The metrics' values, only for a window that sends something.
                match output {
                    Some(Output::Fire(fired)) => out.firing.push(message(&running.rule, entity, fired, snapshot(&running.rule, &window))),
                    Some(Output::Recover(fired)) => {
                        let sent = message(&running.rule, entity, fired, snapshot(&running.rule, &window));
                        out.recoveries.push(AlarmRecoveryMessage::of(sent, now_ms));
                    }
                    None => {}
                }
                // NORMAL is what a new owner starts from anyway (its countdowns only drift, and a
                // match fires whatever they are): peers keep only the other states.
                let shared = match (kept.phase, state.phase) {
                    (AlarmPhase::Normal, AlarmPhase::Normal) => None,
                    (_, AlarmPhase::Normal) => Some(None),
                    _ if state != kept || handed.is_some() => Some(Some(state)),
                    _ => None,
                };
                if let Some(state) = shared {
                    out.states.push(StateRecord { rule: running.rule.name.clone(), fingerprint, entity: entity.clone(), state });
                }
                match running.entities.get_mut(entity) {
                    Some(held) => *held = EntityState { state, window },
                    None => {
                        running.entities.insert(entity.clone(), EntityState { state, window });
                    }
                }
            }
        }
        out
    }

    /// Every rule, its status and its entities' windows and states.
    pub fn view(&self) -> Vec<RuleView> {
        self.rules
            .iter()
            .map(|running| RuleView {
                name: running.rule.name.clone(),
                expression: running.rule.expression.clone(),
                metrics: running.rule.metrics.clone(),
                status: running.status.clone(),
                window_size: running.rule.window_size(),
                entities: running.entities.iter().map(|(e, s)| (e.clone(), s.clone())).collect(),
            })
            .collect()
    }

    /// Whether some entity of some rule is firing (FIRING or SILENCED_FIRING).
    pub fn firing(&self) -> usize {
        self.rules
            .iter()
            .flat_map(|r| r.entities.values())
            .filter(|e| matches!(e.state.phase, AlarmPhase::Firing | AlarmPhase::SilencedFiring))
            .count()
    }
}

fn fresh_window(size: usize, now: EpochMinute) -> Window {
    let mut window = Window::new(size);
    window.move_to(now);
    window
}

/// Running, waiting for metrics, or in error because its metrics' scopes differ.
fn status_of(rule: &AlarmRule, known: &BTreeMap<String, Option<String>>) -> RuleStatus {
    let mut missing = Vec::new();
    let mut scopes = BTreeSet::new();
    for metric in &rule.metrics {
        match known.get(metric).and_then(Option::as_ref) {
            Some(scope) => {
                scopes.insert(scope);
            }
            None => missing.push(metric.clone()),
        }
    }
    if !missing.is_empty() {
        RuleStatus::Waiting { missing }
    } else if scopes.len() > 1 {
        RuleStatus::Error { reason: format!("Metrics in expression: {} must have the same scope level, but got: {scopes:?}.", rule.expression) }
    } else {
        RuleStatus::Running
    }
}

/// The entities of one check's reads, each once, by position; each metric's points by position.
struct EntityIndex<'r> {
    entities: Vec<&'r AlarmEntity>,
    /// Positions in entity order.
    sorted: Vec<usize>,
    positions: HashMap<&'r AlarmEntity, usize>,
    /// metric → (entity position, minute, value), in read order.
    points: HashMap<&'r str, Vec<(usize, EpochMinute, &'r MetricValue)>>,
}

impl<'r> EntityIndex<'r> {
    fn of(read: &'r Reads) -> EntityIndex<'r> {
        let mut index = EntityIndex { entities: Vec::new(), sorted: Vec::new(), positions: HashMap::new(), points: HashMap::new() };
        for (metric, result) in read {
            let Ok(values) = result else { continue };
            let mut points = Vec::with_capacity(values.len());
            for (entity, minute, value) in values {
                let at = *index.positions.entry(entity).or_insert_with(|| {
                    index.entities.push(entity);
                    index.entities.len() - 1
                });
                points.push((at, *minute, value));
            }
            index.points.insert(metric.as_str(), points);
        }
        index.sorted = (0..index.entities.len()).collect();
        index.sorted.sort_unstable_by(|a, b| index.entities[*a].cmp(index.entities[*b]));
        index
    }

    fn position(&self, entity: &AlarmEntity) -> Option<usize> {
        self.positions.get(entity).copied()
    }
}

/// Whether the expression matched over one window.
fn evaluate_window(expr: &Expr, rule: &AlarmRule, window: &Window, now: EpochMinute) -> bool {
    let mut source = MemSource::new();
    let mut common = Vec::new();
    for metric in &rule.metrics {
        let series = window.series(metric);
        // Only common values (the usual case): set in one call, as one `set` per point would.
        if series.iter().all(|(_, value)| !matches!(value, Some(MetricValue::Labeled(_)))) {
            common.clear();
            common.extend(series.iter().filter_map(|(minute, value)| match value {
                Some(MetricValue::Single(v)) => Some((minute.0.saturating_mul(60_000), *v)),
                _ => None,
            }));
            source.set_points(metric, &common);
            continue;
        }
        for (minute, value) in series {
            let ts = minute.0.saturating_mul(60_000);
            match value {
                Some(MetricValue::Single(v)) => source.set(metric, ts, *v),
                Some(MetricValue::Labeled(pairs)) => {
                    for (key, v) in pairs {
                        let labels = label_pairs(key);
                        let refs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                        source.set_labeled(metric, &refs, ts, *v);
                    }
                }
                None => {}
            }
        }
    }
    let first = EpochMinute(now.0 - i64::from(rule.periods.period) + 1);
    let duration = Duration::new(first.0.saturating_mul(60_000), now.0.saturating_mul(60_000), Step::Minute);
    let result = evaluate(expr, &source, &duration);
    result.error.is_none()
        && result.result_type == ResultType::SingleValue
        && result.results.iter().any(|series| series.values.first().and_then(|v| v.value).is_some_and(|v| v == 1.0))
}

/// The metrics' values over a window as the message's `mqeMetricsSnapshot` (metric → JSON of its
/// minute values).
fn snapshot(rule: &AlarmRule, window: &Window) -> BTreeMap<String, String> {
    let mut snapshot = BTreeMap::new();
    for metric in &rule.metrics {
        let mut points = Vec::new();
        for (minute, value) in window.series(metric) {
            let ts = minute.0.saturating_mul(60_000);
            match value {
                Some(MetricValue::Single(v)) => points.push(serde_json::json!({"id": ts.to_string(), "value": v})),
                Some(MetricValue::Labeled(pairs)) => {
                    for (key, v) in pairs {
                        points.push(serde_json::json!({"id": ts.to_string(), "labels": key, "value": v}));
                    }
                }
                None => {}
            }
        }
        snapshot.insert(metric.clone(), serde_json::Value::Array(points).to_string());
    }
    snapshot
}

/// A stored label key `k1=v1,k2=v2` as pairs; a part without `=` is the value of label `label`.
fn label_pairs(key: &str) -> Vec<(String, String)> {
    if key.is_empty() {
        return Vec::new();
    }
    key.split(',')
        .map(|part| match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => ("label".to_string(), part.to_string()),
        })
        .collect()
}

/// SkyWalking's `AlarmMessage` for a fire of `rule` on `entity`.
fn message(rule: &AlarmRule, entity: &AlarmEntity, fired: FiredAlarm, snapshot: BTreeMap<String, String>) -> AlarmMessage {
    AlarmMessage {
        scope_id: entity.scope.id(),
        scope: entity.scope.name().to_string(),
        name: entity.name.clone(),
        id0: entity.id0.clone(),
        id1: entity.id1.clone(),
        rule_name: rule.name.clone(),
        alarm_message: rule.message.render(&entity.name, &entity.id0),
        tags: rule.tags.iter().map(|(k, v)| Tag::new(k, v)).collect(),
        start_time: fired.start_time_ms,
        period: i32::try_from(rule.periods.period).unwrap_or(i32::MAX),
        hooks: rule.hooks.iter().map(|h| h.to_string()).collect(),
        expression: rule.expression.clone(),
        mqe_metrics_snapshot: snapshot,
        uuid: fired.uuid.to_string(),
        layers: Vec::new(),
    }
}
