//! `POST /runtime/alarm/test`: a dry run of alarm rules over the stored values
//! (`hotrule alarm test`). The body is an `alarm-settings.yml` (one or more rules; its hooks are
//! read, and nothing is sent to them).
//!
//! The settings are validated as a settings push would validate them (a refusal is
//! `400 compile_failed` naming the rule and the reason), then each rule's metrics are read once,
//! cluster-wide (`QueryService::read`: every live node's partial state merged exactly, every
//! entity, not only the ones this node owns), over the range plus the largest window before it,
//! and the pure replay (`control::alarms::replay`) checks a fresh engine once per minute. The
//! answer lists each minute's checks with a transition or a message (`verbose=true`: every
//! check), each rule's outcome (ran, waiting for a metric, in error) and a summary.
//!
//! Parameters: `start`/`end` as `/query/alarms` reads them (epoch ms, RFC 3339 or
//! `yyyy-MM-dd HHmm`, UTC; `end` defaults to now), or `since` (`30m`, `1h`: `start` that long
//! before `end`; the default is [`DEFAULT_SPAN_MS`]), and `verbose`.
//!
//! Nothing is sent, stored or changed: the running rules, their windows and states are not
//! touched. The work is bounded: a day of minutes, `replay::MAX_CHECKS` window checks,
//! [`MAX_VALUES`] values read, `replay::MAX_LINES` lines, [`MAX_CONCURRENT_TESTS`] at a time.
// A refusal is built once per request and answered at once: its size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_body, status_code};
use crate::api::query::time::{parse_duration, query_range};
use crate::control::alarms::replay::{self, MinuteValues, Replay, ReplayLine, ReplayRange, RuleOutcome, Sent, StateView};
use crate::control::alarms::settings::{AlarmSettings, MAX_SETTINGS_BYTES};
use crate::control::alarms::window::EpochMinute;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::data::alarms::{alarm_entity, alarm_value};
use crate::data::metrics::{Granularity, SeriesFilter};

/// The range replayed when neither `start` nor `since` is given.
pub const DEFAULT_SPAN_MS: i64 = 60 * 60_000;

/// The most minute values one dry run reads (every metric, entity and minute together).
pub const MAX_VALUES: usize = 2_000_000;

/// Dry runs replayed at the same time; more wait their turn.
pub const MAX_CONCURRENT_TESTS: usize = 2;

static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CONCURRENT_TESTS);

const KNOWN: [&str; 4] = ["start", "end", "since", "verbose"];

/// A refusal: its outcome, and the rule it is about.
struct Refusal {
    outcome: Outcome,
    rule: Option<String>,
}

impl From<Outcome> for Refusal {
    fn from(outcome: Outcome) -> Refusal {
        Refusal { outcome, rule: None }
    }
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal::from(Outcome::new(ApplyStatus::InvalidParameter, message))
}

/// What the query string asks for.
struct TestRequest {
    start_ms: i64,
    end_ms: i64,
    verbose: bool,
}

fn test_request(params: &Params, now_ms: i64) -> Result<TestRequest, Refusal> {
    let mut unknown: Vec<&str> = params.map.keys().map(String::as_str).filter(|k| !KNOWN.contains(k)).collect();
    unknown.sort_unstable();
    if let Some(name) = unknown.first() {
        return Err(invalid(format!("unknown query parameter {name}; known: {}", KNOWN.join(", "))));
    }
    let text = |name: &str| params.get(name).map(str::trim).filter(|v| !v.is_empty());
    let span_ms = match text("since") {
        None => DEFAULT_SPAN_MS,
        Some(_) if text("start").is_some() => return Err(invalid("give start or since, not both")),
        Some(since) => match parse_duration(since) {
            Ok(ms) if ms > 0 => ms,
            Ok(_) => return Err(invalid(format!("query parameter since: {since:?} is not a positive duration"))),
            Err(e) => return Err(invalid(format!("query parameter since: {e}"))),
        },
    };
    let (start_ms, end_ms) = query_range(text, now_ms, span_ms).map_err(invalid)?;
    let verbose = crate::api::query::bool_param("verbose", text("verbose"))?.unwrap_or(false);
    Ok(TestRequest { start_ms, end_ms, verbose })
}

pub async fn test_rules(State(state): State<Arc<AdminState>>, raw: RawQuery, body: Body) -> Response {
    match dry_run(&state, raw, body).await {
        Ok(body) => axum::Json(body).into_response(),
        Err(refusal) => {
            let mut body = outcome_body(&refusal.outcome, "", "");
            if let Some(rule) = refusal.rule {
                body["rule"] = Value::String(rule);
            }
            (status_code(refusal.outcome.status), axum::Json(body)).into_response()
        }
    }
}

async fn dry_run(state: &AdminState, raw: RawQuery, body: Body) -> Result<Value, Refusal> {
    let params = Params::from(raw)?;
    let request = test_request(&params, crate::base::clock::now_ms() as i64)?;
    let settings = read_settings(body).await?;
    let range = ReplayRange::of_ms(request.start_ms, request.end_ms);
    // The range and the rules first, before anything is read.
    replay::plan(&settings, &MinuteValues::new(), range).map_err(|e| invalid(e.to_string()))?;
    let _permit = RUNNING.acquire().await.map_err(|_| Refusal::from(Outcome::new(ApplyStatus::NotReady, "the dry-run pool is closed")))?;
    let read = read_values(state, &settings, range).await?;
    replay::plan(&settings, &read.values, range).map_err(|e| invalid(e.to_string()))?;
    let verbose = request.verbose;
    let replay_settings = settings.clone();
    let replayed = tokio::task::spawn_blocking(move || replay::replay(&replay_settings, &read.values, range, verbose, replay::MAX_LINES))
        .await
        .map_err(|e| Refusal::from(Outcome::new(ApplyStatus::ApplyFailed, format!("the dry run did not finish: {e}"))))?;
    let mut message = "dry run: nothing was sent, stored or changed".to_string();
    if replayed.lines_left_out > 0 {
        message.push_str(&format!("; {} more lines left out past the first {} (shorten the range)", replayed.lines_left_out, replay::MAX_LINES));
    }
    let mut body = outcome_body(&Outcome::new(ApplyStatus::NoChange, message), "", "");
    body["start"] = json!(request.start_ms);
    body["end"] = json!(request.end_ms);
    body["verbose"] = json!(verbose);
    body["warnings"] = settings.warnings.iter().map(|w| Value::String(w.to_string())).collect();
    body["nodes"] = read.nodes.iter().map(|n| Value::String(n.clone())).collect();
    body["partial"] = read.partial.iter().map(|(node, reason)| json!({"node": node, "reason": reason})).collect();
    if let (Some(body), Value::Object(report)) = (body.as_object_mut(), report_json(&replayed)) {
        body.extend(report);
    }
    Ok(body)
}

/// The body, as validated settings with at least one rule.
async fn read_settings(body: Body) -> Result<AlarmSettings, Refusal> {
    let bytes = match axum::body::to_bytes(body, MAX_SETTINGS_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let too_large = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) || e.to_string().contains("length limit");
            return Err(Refusal::from(if too_large {
                Outcome::new(ApplyStatus::PayloadTooLarge, format!("the body is larger than {MAX_SETTINGS_BYTES} bytes"))
            } else {
                Outcome::new(ApplyStatus::InvalidParameter, format!("reading the body: {e}"))
            }));
        }
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Err(invalid("the body is not UTF-8 text"));
    };
    if text.trim().is_empty() {
        return Err(Refusal::from(Outcome::new(ApplyStatus::EmptyBody, "the body must hold alarm settings (alarm-settings.yml)")));
    }
    let settings = AlarmSettings::parse(text, &crate::control::alarms::verify::verify)
        .map_err(|e| Refusal { rule: e.rule().map(str::to_string), outcome: Outcome::new(ApplyStatus::CompileFailed, e.to_string()) })?;
    Ok(settings)
}

/// What the cluster-wide reads gathered.
struct Read {
    values: MinuteValues,
    nodes: BTreeSet<String>,
    partial: BTreeMap<String, String>,
}

/// Every metric the rules read, once, over the range and the largest window before it: the
/// cluster's merged values of every entity.
async fn read_values(state: &AdminState, settings: &AlarmSettings, range: ReplayRange) -> Result<Read, Refusal> {
    let metrics: BTreeSet<&str> = settings.rules.iter().flat_map(|rule| rule.metrics.iter().map(String::as_str)).collect();
    let from_ms = replay::read_from(settings, range).0.saturating_mul(60_000);
    let to_ms = range.last.0.saturating_mul(60_000).saturating_add(59_999);
    let reach = state.query.reach(true, None);
    let mut read = Read { values: MinuteValues::new(), nodes: BTreeSet::new(), partial: BTreeMap::new() };
    let mut count = 0usize;
    for metric in metrics {
        let filter = SeriesFilter { metric: metric.to_string(), ..SeriesFilter::default() };
        let gathered = state.query.read(&filter, Granularity::Minute, from_ms, to_ms, reach).await.map_err(|e| Refusal::from(Outcome::from(e)))?;
        read.nodes.extend(gathered.nodes.iter().map(|n| n.0.clone()));
        for missing in &gathered.missing {
            read.partial.insert(missing.node.0.clone(), missing.reason.clone());
        }
        if let Some(info) = gathered.metrics.get(metric) {
            read.values.set_scope(metric, info.scope.as_str());
        }
        for series in gathered.series {
            let Some(entity) = alarm_entity(&series.entity) else { continue };
            for point in series.points {
                if let Some(value) = alarm_value(&point.value) {
                    count += 1;
                    if count > MAX_VALUES {
                        return Err(invalid(format!(
                            "the rules' metrics hold more than {MAX_VALUES} minute values over the range and its windows: shorten the range or test fewer rules"
                        )));
                    }
                    read.values.insert(metric, entity.clone(), EpochMinute::from_epoch_ms(point.start_ms), value);
                }
            }
        }
    }
    Ok(read)
}

/// The replay's lines, rules and summary, as the answer carries them.
fn report_json(replayed: &Replay) -> Value {
    let rules: Vec<Value> = replayed
        .rules
        .iter()
        .map(|rule| {
            let mut body = json!({
                "ruleName": rule.rule,
                "expression": rule.expression,
                "windows": rule.windows,
                "entities": rule.entities,
                "fires": rule.fires,
                "recoveries": rule.recoveries,
            });
            match &rule.outcome {
                RuleOutcome::Ran => body["status"] = json!("ran"),
                RuleOutcome::Waiting { missing } => {
                    body["status"] = json!("waiting");
                    body["missingMetrics"] = json!(missing);
                }
                RuleOutcome::Error { reason } => {
                    body["status"] = json!("error");
                    body["reason"] = json!(reason);
                }
            }
            body
        })
        .collect();
    json!({
        "firstMinute": replayed.range.first.0.saturating_mul(60_000),
        "lastMinute": replayed.range.last.0.saturating_mul(60_000),
        "lines": replayed.lines.iter().map(line_json).collect::<Vec<_>>(),
        "linesLeftOut": replayed.lines_left_out,
        "rules": rules,
        "summary": {
            "minutes": replayed.range.minutes(),
            "windows": replayed.windows,
            "fires": replayed.fires,
            "recoveries": replayed.recoveries,
            "rulesWaiting": replayed.waiting(),
            "rulesInError": replayed.errors(),
        },
    })
}

fn state_json(state: &StateView) -> Value {
    json!({
        "state": state.phase,
        "silenceCountdown": state.silence_countdown,
        "recoveryObservationCountdown": state.recovery_countdown,
    })
}

fn line_json(line: &ReplayLine) -> Value {
    let sent = match &line.sent {
        None => Value::Null,
        Some(Sent::Firing { uuid, message, hooks }) => json!({"type": "FIRING", "uuid": uuid, "message": message, "hooks": hooks}),
        Some(Sent::Recovered { uuid, message, hooks, start_time_ms }) => {
            json!({"type": "RECOVERED", "uuid": uuid, "message": message, "hooks": hooks, "startTime": start_time_ms})
        }
    };
    json!({
        "minute": line.minute.0.saturating_mul(60_000),
        "ruleName": line.rule,
        "scope": line.entity.scope.name(),
        "name": line.entity.name,
        "id0": line.entity.id0,
        "id1": line.entity.id1,
        "matched": line.matched,
        "before": state_json(&line.before),
        "after": state_json(&line.after),
        "sent": sent,
    })
}
