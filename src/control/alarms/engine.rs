//! The running alarm rules: SkyWalking's `AlarmCore` + `RunningRule`, without the clock and the
//! network (the alarm worker in `node` owns both).
//!
//! Once a minute the worker calls [`AlarmEngine::check`]. For every rule and every entity this
//! node evaluates, the window (`period` + the expression's trend range minutes) is **rebuilt from
//! the stored minute values** ([`AlarmValues`]): SkyWalking feeds windows from each L2 flush and
//! keeps them in memory; reading them from the store gives the same values (the minute's merged
//! value so far, the latest write winning) and a window that survives a restart or a change of
//! owner instead of starting empty. The expression is evaluated over the window with the MQE
//! engine; a match is a single value of 1 (for a labeled result, any label group's 1). The
//! boolean goes through the 10.4+ state machine ([`super::state::check`]), whose state per
//! (rule, entity) is what this engine keeps between checks.
//!
//! The cost is one pass per (rule, entity) a check (issue 23: 100 rules × 10,000 entities in
//! well under a second): each metric is read once into the check's `frame` (a row of minute
//! cells per entity, shared by the rules), a window is a slice of those rows, the usual
//! expressions are evaluated straight over it (`compiled`, the MQE engine for the others), and
//! a rule keeps its states by the entity's position in the frame, in entity order.
//!
//! - A window with no value left expires silently (no recovery), as SkyWalking's.
//! - [`AlarmEngine::reset`] is `AlarmKernelService.reset`: every rule that reads one of the
//!   metrics loses all its entities' states, and no recovery is sent.
//! - [`AlarmEngine::replace`] is the settings watcher: a rule equal in every attribute keeps its
//!   states; any other rule starts fresh.
//! - A rule whose metrics are not all produced yet (no loaded MAL file makes them) is held
//!   waiting and runs once they are; a rule whose metrics have different scopes is held in error
//!   (SkyWalking refuses both at load).
//! - **Firing state survives its owner.** Each check returns the states it changed
//!   ([`Checked::states`]); the worker hands them to every peer before it sends a notification,
//!   and a peer keeps them ([`AlarmEngine::adopt`]). When an entity's owner dies, the new owner
//!   finds the state there at its first check of the entity (`uuid`, start time, countdowns),
//!   so a firing alarm is neither fired again nor left without its recovery. A kept state is
//!   taken only by the same rule (same name, expression and periods: [`rule_fingerprint`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use hotrule_mqe_engine::{Duration, Expr, ResultType, Step, evaluate};

use super::compiled::{Compiled, Scratch};
use super::entity::AlarmEntity;
use super::frame::{Frame, WindowCells};
use super::hooks::message::{AlarmMessage, AlarmRecoveryMessage, Tag};
use super::settings::{AlarmRule, AlarmSettings, diff};
use super::state::{AlarmPhase, AlarmState, AlarmUuid, FiredAlarm, Output, check};
use super::window::{EpochMinute, MetricValue, Window};

/// Where the engine reads minute values: the metric store, for the entities this node
/// evaluates (in a cluster, the entities it owns).
pub trait AlarmValues {
    /// The scope of a metric (`SERVICE`, …), `None` while it has no stored value (no loaded rule
    /// has produced it yet).
    fn metric_scope(&self, metric: &str) -> Option<String>;
    /// `metric`'s values in minutes `from..=to`, per entity.
    fn minute_values(&self, metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String>;
    /// Whether `entity` is now evaluated by another node (its owner changed), rather than out
    /// of values: its state is then handed over to the peers instead of forgotten.
    fn moved_away(&self, _entity: &AlarmEntity) -> bool {
        false
    }
}

/// Where a rule stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleStatus {
    /// Loaded, not checked yet.
    NotChecked,
    Running,
    /// Some metrics are not produced by any loaded rule yet.
    Waiting { missing: Vec<String> },
    /// The rule cannot run as written (its metrics' scopes differ, a read failed).
    Error { reason: String },
}

/// One (rule, entity) between checks.
#[derive(Debug, Clone)]
pub struct EntityState {
    pub state: AlarmState,
    /// The window as the last check saw it.
    pub window: Window,
}

struct RunningRule {
    rule: AlarmRule,
    expr: Option<Expr>,
    /// The expression evaluated straight over window cells, when it has the shapes alarms use.
    compiled: Option<Compiled>,
    status: RuleStatus,
    /// The frame of the last check that ran the rule: its entities' windows are there.
    frame: Option<Arc<Frame>>,
    /// The entities of that check with a live window, in entity order.
    held: Vec<Held>,
}

/// One (rule, entity) between checks: the entity's position in the rule's frame, and its state.
#[derive(Debug, Clone, Copy)]
struct Held {
    at: u32,
    state: AlarmState,
}

impl RunningRule {
    fn new(rule: AlarmRule) -> RunningRule {
        let (expr, status) = match super::verify::compile(&rule.expression) {
            Ok(expr) => (Some(expr), RuleStatus::NotChecked),
            Err(reason) => (None, RuleStatus::Error { reason }),
        };
        let compiled = expr.as_ref().and_then(|expr| Compiled::compile(expr, &rule.metrics, rule.periods.period));
        RunningRule { rule, expr, compiled, status, frame: None, held: Vec::new() }
    }
}

/// One (rule, entity)'s state as it travels to the peers: `state` none when the entity's
/// window expired or the rule was reset (the peers forget it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRecord {
    pub rule: String,
    pub fingerprint: u64,
    pub entity: AlarmEntity,
    pub state: Option<AlarmState>,
}

/// The identity of a rule as states are kept for it: name, expression and periods (FNV-1a).
pub fn rule_fingerprint(rule: &AlarmRule) -> u64 {
    let periods = rule.periods;
    let text = format!("{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}", rule.name, rule.expression, periods.period, periods.silence_period, periods.recovery_observation_period);
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// What one check asks to send, and what went wrong.
#[derive(Debug, Default)]
pub struct Checked {
    /// The states this check changed or dropped: for the peers, before any notification.
    pub states: Vec<StateRecord>,
    pub firing: Vec<AlarmMessage>,
    pub recoveries: Vec<AlarmRecoveryMessage>,
    /// (rule, entity) windows checked.
    pub windows: usize,
    /// Rules that could not be checked, and why.
    pub errors: Vec<(String, String)>,
    /// Every window's check, when the engine traces ([`AlarmEngine::with_trace`]); else empty.
    pub trace: Vec<WindowCheck>,
}

/// One (rule, entity) window's check as a dry run shows it: whether the expression matched, and
/// the state before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCheck {
    pub rule: String,
    pub entity: AlarmEntity,
    pub matched: bool,
    pub before: AlarmState,
    pub after: AlarmState,
}

/// One rule as `/runtime/alarm/rules` shows it.
#[derive(Debug, Clone)]
pub struct RuleView {
    pub name: String,
    pub expression: String,
    pub metrics: Vec<String>,
    pub status: RuleStatus,
    pub window_size: usize,
    pub entities: Vec<(AlarmEntity, EntityState)>,
}

/// The running rules.
pub struct AlarmEngine {
    settings: AlarmSettings,
    rules: Vec<RunningRule>,
    resets: u64,
    /// States peers sent for entities they evaluate: (rule, entity) → (fingerprint, state).
    kept: BTreeMap<(String, AlarmEntity), (u64, AlarmState)>,
    /// Whether each check lists its windows' checks in [`Checked::trace`] (a dry run).
    trace: bool,
    /// The frame of the last check, and one before it that no rule uses any more (emptied by
    /// the next check and filled again).
    last: Option<Arc<Frame>>,
    spare: Option<Frame>,
}

impl AlarmEngine {
    pub fn new(settings: AlarmSettings) -> AlarmEngine {
        let rules = settings.rules.iter().cloned().map(RunningRule::new).collect();
        AlarmEngine { settings, rules, resets: 0, kept: BTreeMap::new(), trace: false, last: None, spare: None }
    }

    /// The same engine, listing every window's check in [`Checked::trace`] (for a dry run; the
    /// running rules do not trace).
    pub fn with_trace(mut self) -> AlarmEngine {
        self.trace = true;
        self
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
                running.held.clear();
                running.frame = None;
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
        // The reads laid out once for every rule: a rule's window of an entity is a slice of
        // its metrics' rows, found by the entity's position. Each read is taken in before the
        // next is made.
        let mut frame = match self.spare.take() {
            Some(spare) => spare.reuse(now),
            None => Frame::new(now),
        };
        for (metric, size) in &longest {
            if scopes.get(*metric).is_some_and(Option::is_some) {
                let from = EpochMinute(now.0 - *size as i64 + 1);
                frame.add(metric.to_string(), *size, values.minute_values(metric, from, now));
            }
        }
        let frame = Arc::new(frame.finish());
        let mut remaps: Vec<(Arc<Frame>, Vec<u32>)> = Vec::new();
        let mut scratch = Scratch::default();
        let mut cells = WindowCells::default();
        let mut previous: Vec<u32> = Vec::new();
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
            // The last metric's failure, as it was read.
            let failed = running.rule.metrics.iter().rev().find_map(|metric| frame.read(metric).and_then(Result::err));
            if let Some(reason) = failed {
                running.status = RuleStatus::Error { reason: format!("reading the metric values: {reason}") };
                out.errors.push((running.rule.name.clone(), reason.to_string()));
                continue;
            }
            let tables = frame.tables(&running.rule.metrics);
            let size = running.rule.window_size();
            let fingerprint = rule_fingerprint(&running.rule);
            // The states of the last check by position in this one; an entity not read this
            // time has no window left.
            let held = std::mem::take(&mut running.held);
            let mut dropped = vec![false; held.len()];
            previous.clear();
            previous.resize(frame.len(), NOT_HELD);
            if let Some(old) = &running.frame {
                let remap = remap(&mut remaps, old, &frame);
                for (i, entry) in held.iter().enumerate() {
                    match remap[entry.at as usize] {
                        NOT_HELD => dropped[i] = true,
                        at => previous[at as usize] = i as u32,
                    }
                }
            }
            let mut records = Vec::new();
            let mut next = Vec::with_capacity(held.len());
            scratch.reset();
            // In entity order.
            for &at in frame.sorted() {
                let was = previous[at as usize];
                let entity = frame.entity(at);
                // Entities whose window emptied (or that the rule's filters refuse) expire
                // silently (no recovery).
                if !frame.fill(&tables, at, size, &mut cells) || !running.rule.accepts_entity(&entity.name) {
                    if was != NOT_HELD {
                        dropped[was as usize] = true;
                    }
                    continue;
                }
                out.windows += 1;
                let matched = match running.compiled.as_ref().and_then(|compiled| compiled.matches(&frame, &cells, &mut scratch)) {
                    Some(matched) => matched,
                    None => evaluate_window(expr, &running.rule.metrics, running.rule.periods.period, &frame, &cells),
                };
                let periods = running.rule.periods;
                let held_state = (was != NOT_HELD).then(|| held[was as usize].state);
                // A state a peer kept for this entity (its owner before this node) comes first.
                let handed = match held_state {
                    Some(_) => None,
                    None if self.kept.is_empty() => None,
                    None => self.kept.remove(&(running.rule.name.clone(), entity.clone())).filter(|(f, _)| *f == fingerprint).map(|(_, s)| s),
                };
                let kept = held_state.or(handed).unwrap_or_else(|| AlarmState::new(periods));
                let fresh = FiredAlarm { uuid: mint(), start_time_ms: now_ms };
                let (state, output) = check(kept, matched, periods, fresh);
                if self.trace {
                    out.trace.push(WindowCheck { rule: running.rule.name.clone(), entity: entity.clone(), matched, before: kept, after: state });
                }
                // The metrics' values, only for a window that sends something.
                match output {
                    Some(Output::Fire(fired)) => out.firing.push(message(&running.rule, entity, fired, frame.snapshot(&running.rule.metrics, &cells))),
                    Some(Output::Recover(fired)) => {
                        let sent = message(&running.rule, entity, fired, frame.snapshot(&running.rule.metrics, &cells));
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
                    records.push(StateRecord { rule: running.rule.name.clone(), fingerprint, entity: entity.clone(), state });
                }
                next.push(Held { at, state });
            }
            // Peers hold only non-NORMAL states: the dropped ones are to forget, before the
            // others, in entity order.
            if let Some(old) = &running.frame {
                // One now evaluated by another node hands its state over instead: its new owner
                // resumes it.
                for (entry, _) in held.iter().zip(&dropped).filter(|(entry, dropped)| **dropped && entry.state.phase != AlarmPhase::Normal) {
                    let entity = old.entity(entry.at);
                    let state = values.moved_away(entity).then_some(entry.state);
                    out.states.push(StateRecord { rule: running.rule.name.clone(), fingerprint, entity: entity.clone(), state });
                }
            }
            out.states.append(&mut records);
            running.held = next;
            running.frame = Some(frame.clone());
        }
        drop(remaps);
        // The last check's frame is the spare once every rule has moved on from it.
        if let Some(previous) = self.last.replace(frame) {
            self.spare = Arc::try_unwrap(previous).ok();
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
                entities: running
                    .frame
                    .iter()
                    .flat_map(|frame| {
                        running.held.iter().map(|held| {
                            let window = frame.window(&running.rule.metrics, held.at, running.rule.window_size());
                            (frame.entity(held.at).clone(), EntityState { state: held.state, window })
                        })
                    })
                    .collect(),
            })
            .collect()
    }

    /// The states of the entities this node evaluates that are not NORMAL (what a restart must
    /// not lose), in rule and entity order.
    pub fn held_states(&self) -> Vec<StateRecord> {
        let mut out = Vec::new();
        for running in &self.rules {
            let (Some(frame), fingerprint) = (&running.frame, rule_fingerprint(&running.rule)) else { continue };
            for held in running.held.iter().filter(|held| held.state.phase != AlarmPhase::Normal) {
                out.push(StateRecord { rule: running.rule.name.clone(), fingerprint, entity: frame.entity(held.at).clone(), state: Some(held.state) });
            }
        }
        out
    }

    /// Whether some entity of some rule is firing (FIRING or SILENCED_FIRING).
    pub fn firing(&self) -> usize {
        self.rules
            .iter()
            .flat_map(|r| r.held.iter())
            .filter(|e| matches!(e.state.phase, AlarmPhase::Firing | AlarmPhase::SilencedFiring))
            .count()
    }
}

/// No position (an entity not held, or not in the frame).
const NOT_HELD: u32 = u32::MAX;

/// The position in `frame` of each entity of `old` (rules checked in the same earlier check
/// share one).
fn remap<'r>(remaps: &'r mut Vec<(Arc<Frame>, Vec<u32>)>, old: &Arc<Frame>, frame: &Frame) -> &'r [u32] {
    let index = match remaps.iter().position(|(known, _)| Arc::ptr_eq(known, old)) {
        Some(index) => index,
        None => {
            let positions = (0..old.len() as u32).map(|at| frame.position_of(old.entity(at)).unwrap_or(NOT_HELD)).collect();
            remaps.push((old.clone(), positions));
            remaps.len() - 1
        }
    };
    &remaps[index].1
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

/// Whether the expression matched over one window, by the MQE engine over the window's values.
pub(super) fn evaluate_window(expr: &Expr, metrics: &[String], period: u32, frame: &Frame, window: &WindowCells) -> bool {
    let source = frame.mem_source(metrics, window);
    let now = frame.now();
    let first = now - i64::from(period) + 1;
    let duration = Duration::new(first.saturating_mul(60_000), now.saturating_mul(60_000), Step::Minute);
    let result = evaluate(expr, &source, &duration);
    result.error.is_none()
        && result.result_type == ResultType::SingleValue
        && result.results.iter().any(|series| series.values.first().and_then(|v| v.value).is_some_and(|v| v == 1.0))
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
