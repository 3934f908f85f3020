//! A dry run of alarm rules over stored minute values (`hotrule alarm test`,
//! `POST /runtime/alarm/test`): pure, no IO, no clock, nothing sent.
//!
//! The caller reads the rules' metrics once, up front, into [`MinuteValues`] (every minute from
//! [`read_from`] to the range's last minute; in a node, the cluster's merged values of every
//! entity), then [`replay`] runs a fresh [`AlarmEngine`] over them as the alarm worker would:
//! one [`AlarmEngine::check`] per minute of the range, at second 20 of the minute (the worker
//! checks at its first look past second 15). The engine rebuilds each window from the values
//! at every check, so a replayed check sees what a live check at that minute would have seen,
//! with one difference: the live check saw the current minute's value so far, the replay sees
//! the minute's final value.
//!
//! The answer lists, per minute, each (rule, entity) window checked: whether the expression
//! matched, the state before and after (phase and countdowns), and the FIRING or RECOVERED
//! message the check would have sent. Alarm ids are minted deterministically (`dry-run-1`, …,
//! in the order of the fires). Rules that could not run (waiting for a metric nobody produces,
//! or in error) are reported once, in the per-rule summary.
//!
//! The work is bounded before it starts ([`plan`]): at most [`MAX_MINUTES`] minutes and
//! [`MAX_CHECKS`] window checks; at most `max_lines` lines are kept (the summary counts all).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::engine::{AlarmEngine, AlarmValues, RuleStatus};
use super::entity::AlarmEntity;
use super::hooks::message::{AlarmMessage, AlarmRecoveryMessage};
use super::settings::AlarmSettings;
use super::state::{AlarmPhase, AlarmState, AlarmUuid};
use super::window::{EpochMinute, MetricValue};

/// The longest range a dry run replays: a day of minutes.
pub const MAX_MINUTES: i64 = 24 * 60;

/// The most window checks (rules × entities × minutes) one dry run may do.
pub const MAX_CHECKS: u64 = 2_000_000;

/// The most lines one dry run answers with (the summary counts every check).
pub const MAX_LINES: usize = 10_000;

/// Where in its minute a replayed check runs.
const CHECK_AT_MS: i64 = 20_000;

/// The minutes replayed: `first..=last`, one check each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayRange {
    pub first: EpochMinute,
    pub last: EpochMinute,
}

impl ReplayRange {
    /// The minutes holding `start_ms` and `end_ms`.
    pub fn of_ms(start_ms: i64, end_ms: i64) -> ReplayRange {
        ReplayRange { first: EpochMinute::from_epoch_ms(start_ms), last: EpochMinute::from_epoch_ms(end_ms) }
    }

    pub fn minutes(&self) -> i64 {
        self.last.0.saturating_sub(self.first.0).saturating_add(1)
    }
}

/// Why a dry run does not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("the settings hold no rule (rules are keyed `*_rule` under `rules:`)")]
    NoRules,
    #[error("the range ends (minute {last}) before it starts (minute {first})")]
    Backwards { first: i64, last: i64 },
    #[error("the range is {minutes} minutes; a dry run replays at most {max} (24 h): shorten it")]
    RangeTooLong { minutes: i64, max: i64 },
    #[error(
        "replaying would check {checks} windows ({minutes} minutes × {entities} (rule, entity) pairs), more than {max}: shorten the range or narrow the rules (include-names)"
    )]
    TooManyChecks { checks: u64, minutes: i64, entities: u64, max: u64 },
}

/// Minute values held in memory: what a dry run replays over. Each metric's scope, and its
/// values by minute.
#[derive(Debug, Default, Clone)]
pub struct MinuteValues {
    scopes: BTreeMap<String, String>,
    values: BTreeMap<String, BTreeMap<EpochMinute, Vec<(AlarmEntity, MetricValue)>>>,
}

impl MinuteValues {
    pub fn new() -> MinuteValues {
        MinuteValues::default()
    }

    /// `metric` is produced, at `scope` (`SERVICE`, …): a rule reading it is not waiting.
    pub fn set_scope(&mut self, metric: &str, scope: &str) {
        self.scopes.insert(metric.to_string(), scope.to_string());
    }

    /// One minute's value of `metric` for `entity`.
    pub fn insert(&mut self, metric: &str, entity: AlarmEntity, minute: EpochMinute, value: MetricValue) {
        self.values.entry(metric.to_string()).or_default().entry(minute).or_default().push((entity, value));
    }

    /// The entities with a value of `metric`.
    pub fn entities_of(&self, metric: &str) -> BTreeSet<&AlarmEntity> {
        self.values.get(metric).into_iter().flat_map(|minutes| minutes.values()).flat_map(|points| points.iter().map(|(entity, _)| entity)).collect()
    }

    /// Values held, all metrics together.
    pub fn len(&self) -> usize {
        self.values.values().flat_map(|minutes| minutes.values()).map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AlarmValues for MinuteValues {
    fn metric_scope(&self, metric: &str) -> Option<String> {
        self.scopes.get(metric).cloned()
    }

    fn minute_values(&self, metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String> {
        let Some(minutes) = self.values.get(metric) else { return Ok(Vec::new()) };
        if to < from {
            return Ok(Vec::new());
        }
        Ok(minutes.range(from..=to).flat_map(|(minute, points)| points.iter().map(|(entity, value)| (entity.clone(), *minute, value.clone()))).collect())
    }
}

/// The first minute to read for `range`: the first check's window reaches back the largest
/// window of the rules.
pub fn read_from(settings: &AlarmSettings, range: ReplayRange) -> EpochMinute {
    let largest = settings.rules.iter().map(|rule| rule.window_size()).max().unwrap_or(1);
    EpochMinute(range.first.0.saturating_sub(largest as i64).saturating_add(1))
}

/// Whether a dry run of `settings` over `range` may start: the range's length, then the checks
/// it would do (per rule, the entities its filters accept among those with a value of its
/// metrics, times the minutes). Returns the number of checks.
pub fn plan(settings: &AlarmSettings, values: &MinuteValues, range: ReplayRange) -> Result<u64, ReplayError> {
    if settings.rules.is_empty() {
        return Err(ReplayError::NoRules);
    }
    if range.last < range.first {
        return Err(ReplayError::Backwards { first: range.first.0, last: range.last.0 });
    }
    let minutes = range.minutes();
    if minutes > MAX_MINUTES {
        return Err(ReplayError::RangeTooLong { minutes, max: MAX_MINUTES });
    }
    let mut pairs: u64 = 0;
    for rule in &settings.rules {
        let entities: BTreeSet<&AlarmEntity> = rule.metrics.iter().flat_map(|metric| values.entities_of(metric)).filter(|e| rule.accepts_entity(&e.name)).collect();
        pairs = pairs.saturating_add(entities.len() as u64);
    }
    let checks = pairs.saturating_mul(minutes as u64);
    if checks > MAX_CHECKS {
        return Err(ReplayError::TooManyChecks { checks, minutes, entities: pairs, max: MAX_CHECKS });
    }
    Ok(checks)
}

/// A window's state as a dry run shows it (the alarm it last fired is in the messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateView {
    pub phase: AlarmPhase,
    pub silence_countdown: i64,
    pub recovery_countdown: i64,
}

impl From<AlarmState> for StateView {
    fn from(state: AlarmState) -> StateView {
        StateView { phase: state.phase, silence_countdown: state.silence_countdown, recovery_countdown: state.recovery_countdown }
    }
}

/// What a check would have sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// A FIRING message: its (dry-run) id, text and the hooks it would go to.
    Firing { uuid: String, message: String, hooks: Vec<String> },
    /// The recovery of an earlier fire (its id and start time).
    Recovered { uuid: String, message: String, hooks: Vec<String>, start_time_ms: i64 },
}

/// One (rule, entity) window checked at one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayLine {
    pub minute: EpochMinute,
    pub rule: String,
    pub entity: AlarmEntity,
    pub matched: bool,
    pub before: StateView,
    pub after: StateView,
    pub sent: Option<Sent>,
}

impl ReplayLine {
    /// A change of phase, or a message.
    pub fn is_transition(&self) -> bool {
        self.before.phase != self.after.phase || self.sent.is_some()
    }
}

/// Whether a rule ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOutcome {
    Ran,
    /// Some of its metrics are produced by no loaded rule (no value and no scope anywhere).
    Waiting { missing: Vec<String> },
    /// It cannot run as written (its metrics' scopes differ, its expression does not compile).
    Error { reason: String },
}

/// One rule over the whole replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSummary {
    pub rule: String,
    pub expression: String,
    pub outcome: RuleOutcome,
    /// Windows checked (entities × minutes with a value in the window).
    pub windows: u64,
    /// Distinct entities checked.
    pub entities: usize,
    pub fires: u64,
    pub recoveries: u64,
}

/// A dry run's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub range: ReplayRange,
    /// Lines in minute order, then rule order, then entity order: every check, or (without
    /// `every_check`) those with a transition or a message; at most `max_lines`.
    pub lines: Vec<ReplayLine>,
    /// Lines left out past `max_lines`.
    pub lines_left_out: u64,
    pub rules: Vec<RuleSummary>,
    pub windows: u64,
    pub fires: u64,
    pub recoveries: u64,
}

impl Replay {
    pub fn waiting(&self) -> usize {
        self.rules.iter().filter(|r| matches!(r.outcome, RuleOutcome::Waiting { .. })).count()
    }

    pub fn errors(&self) -> usize {
        self.rules.iter().filter(|r| matches!(r.outcome, RuleOutcome::Error { .. })).count()
    }
}

/// Replays `settings` over `values`, one check per minute of `range` (call [`plan`] first to
/// bound the work). `every_check` keeps every check's line, not only transitions and messages.
pub fn replay(settings: &AlarmSettings, values: &MinuteValues, range: ReplayRange, every_check: bool, max_lines: usize) -> Replay {
    let mut engine = AlarmEngine::new(settings.clone()).with_trace();
    let mut rules: Vec<RuleSummary> = settings
        .rules
        .iter()
        .map(|rule| RuleSummary { rule: rule.name.clone(), expression: rule.expression.clone(), outcome: RuleOutcome::Ran, windows: 0, entities: 0, fires: 0, recoveries: 0 })
        .collect();
    let position: HashMap<String, usize> = rules.iter().enumerate().map(|(at, r)| (r.rule.clone(), at)).collect();
    let mut entities: Vec<BTreeSet<AlarmEntity>> = vec![BTreeSet::new(); rules.len()];
    let mut out = Replay { range, lines: Vec::new(), lines_left_out: 0, rules: Vec::new(), windows: 0, fires: 0, recoveries: 0 };
    let mut minted: u128 = 0;
    let mut dry_ids: HashMap<String, String> = HashMap::new();
    for minute in range.first.0..=range.last.0 {
        let now_ms = minute.saturating_mul(60_000).saturating_add(CHECK_AT_MS);
        let checked = engine.check(now_ms, values, &mut || {
            minted += 1;
            AlarmUuid(minted)
        });
        if minute == range.first.0 {
            // The statuses hold for the whole replay: the values do not change under it.
            for view in engine.view() {
                if let Some(&at) = position.get(&view.name) {
                    rules[at].outcome = match view.status {
                        RuleStatus::Waiting { missing } => RuleOutcome::Waiting { missing },
                        RuleStatus::Error { reason } => RuleOutcome::Error { reason },
                        RuleStatus::Running | RuleStatus::NotChecked => RuleOutcome::Ran,
                    };
                }
            }
        }
        for (rule, reason) in &checked.errors {
            if let Some(&at) = position.get(rule)
                && rules[at].outcome == RuleOutcome::Ran
            {
                rules[at].outcome = RuleOutcome::Error { reason: reason.clone() };
            }
        }
        out.windows += checked.windows as u64;
        out.fires += checked.firing.len() as u64;
        out.recoveries += checked.recoveries.len() as u64;
        let firing: HashMap<&str, &AlarmMessage> = checked.firing.iter().map(|m| (m.uuid.as_str(), m)).collect();
        let recovered: HashMap<&str, &AlarmRecoveryMessage> = checked.recoveries.iter().map(|r| (r.alarm.uuid.as_str(), r)).collect();
        for traced in checked.trace {
            let fired = traced.after.last_fired.map(|f| f.uuid.to_string()).filter(|uuid| firing.contains_key(uuid.as_str()));
            let recovered_uuid =
                traced.before.last_fired.filter(|_| traced.after.last_fired.is_none()).map(|f| f.uuid.to_string()).filter(|uuid| recovered.contains_key(uuid.as_str()));
            let sent = match (fired, recovered_uuid) {
                (Some(uuid), _) => firing.get(uuid.as_str()).map(|message| {
                    let dry = format!("dry-run-{}", dry_ids.len() + 1);
                    dry_ids.insert(uuid.clone(), dry.clone());
                    Sent::Firing { uuid: dry, message: message.alarm_message.clone(), hooks: message.hooks.iter().cloned().collect() }
                }),
                (None, Some(uuid)) => recovered.get(uuid.as_str()).map(|recovery| Sent::Recovered {
                    uuid: dry_ids.get(&uuid).cloned().unwrap_or(uuid.clone()),
                    message: recovery.alarm.alarm_message.clone(),
                    hooks: recovery.alarm.hooks.iter().cloned().collect(),
                    start_time_ms: recovery.alarm.start_time,
                }),
                (None, None) => None,
            };
            if let Some(&at) = position.get(&traced.rule) {
                let summary = &mut rules[at];
                summary.windows += 1;
                match &sent {
                    Some(Sent::Firing { .. }) => summary.fires += 1,
                    Some(Sent::Recovered { .. }) => summary.recoveries += 1,
                    None => {}
                }
                if !entities[at].contains(&traced.entity) {
                    entities[at].insert(traced.entity.clone());
                }
            }
            let line = ReplayLine {
                minute: EpochMinute(minute),
                rule: traced.rule,
                entity: traced.entity,
                matched: traced.matched,
                before: traced.before.into(),
                after: traced.after.into(),
                sent,
            };
            if !every_check && !line.is_transition() {
                continue;
            }
            if out.lines.len() < max_lines {
                out.lines.push(line);
            } else {
                out.lines_left_out += 1;
            }
        }
    }
    for (summary, seen) in rules.iter_mut().zip(&entities) {
        summary.entities = seen.len();
    }
    out.rules = rules;
    out
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
