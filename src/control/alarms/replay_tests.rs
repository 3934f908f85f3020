//! The dry run over in-memory minute values: a threshold rule fires at the right minute, repeats
//! after its silence, recovers after its observation period; names filter entities; a rule on a
//! metric nobody produces waits; the work is bounded before it starts.

use super::*;
use crate::control::alarms::settings::AlarmSettings;

const SETTINGS: &str = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 2
    period: 3
    silence-period: 2
    recovery-observation-period: 1
    message: "CPU of {name} is high"
hooks:
  webhook:
    default:
      is-default: true
      urls: [http://127.0.0.1:9/alarm]
"#;

fn settings(text: &str) -> AlarmSettings {
    AlarmSettings::parse(text, &crate::control::alarms::verify::verify).expect("valid settings")
}

/// `cpu` of `entity` at minutes `first..`, one value each.
fn put(values: &mut MinuteValues, metric: &str, entity: &AlarmEntity, first: i64, series: &[f64]) {
    values.set_scope(metric, "SERVICE");
    for (at, value) in series.iter().enumerate() {
        values.insert(metric, entity.clone(), EpochMinute(first + at as i64), MetricValue::Single(*value));
    }
}

fn range(first: i64, last: i64) -> ReplayRange {
    ReplayRange { first: EpochMinute(first), last: EpochMinute(last) }
}

/// (minute, before → after, what was sent) of each line.
fn story(replay: &Replay) -> Vec<(i64, String, String)> {
    replay
        .lines
        .iter()
        .map(|line| {
            let sent = match &line.sent {
                Some(Sent::Firing { uuid, .. }) => format!("FIRING {uuid}"),
                Some(Sent::Recovered { uuid, .. }) => format!("RECOVERED {uuid}"),
                None => String::new(),
            };
            (line.minute.0, format!("{:?} -> {:?}", line.before.phase, line.after.phase), sent)
        })
        .collect()
}

fn line(minute: i64, phases: &str, sent: &str) -> (i64, String, String) {
    (minute, phases.to_string(), sent.to_string())
}

/// Above 80 at 100 and 101..=104, then 10: the engine test's story, minute by minute.
fn high_then_low() -> (AlarmEntity, MinuteValues) {
    let svc = AlarmEntity::service("host-1");
    let mut values = MinuteValues::new();
    put(&mut values, "cpu", &svc, 100, &[90.0, 95.0, 95.0, 95.0, 95.0, 10.0, 10.0, 10.0, 10.0]);
    (svc, values)
}

#[test]
fn fires_at_the_minute_the_threshold_holds_repeats_after_silence_and_recovers() {
    let (svc, values) = high_then_low();
    let settings = settings(SETTINGS);
    assert_eq!(plan(&settings, &values, range(100, 108)), Ok(9));
    let replay = replay(&settings, &values, range(100, 108), false, MAX_LINES);
    assert_eq!(
        story(&replay),
        [
            // 100: one of the last three minutes above 80: no line (no transition).
            line(101, "Normal -> Firing", "FIRING dry-run-1"),
            line(102, "Firing -> SilencedFiring", ""),
            // 103: still silenced, no line; 104: silence over, a new fire with a new id.
            line(104, "SilencedFiring -> Firing", "FIRING dry-run-2"),
            line(105, "Firing -> SilencedFiring", ""),
            line(106, "SilencedFiring -> ObservingRecovery", ""),
            // R + 1 = 2 false checks with the silence over: the last fire recovers.
            line(107, "ObservingRecovery -> Recovered", "RECOVERED dry-run-2"),
            line(108, "Recovered -> Normal", ""),
        ]
    );
    let fire = &replay.lines[0];
    assert_eq!((fire.rule.as_str(), &fire.entity, fire.matched), ("cpu_rule", &svc, true));
    assert_eq!(fire.sent, Some(Sent::Firing { uuid: "dry-run-1".into(), message: "CPU of host-1 is high".into(), hooks: vec!["webhook.default".into()] }));
    assert_eq!((fire.after.silence_countdown, fire.after.recovery_countdown), (2, 1), "entering FIRING sets S and R");
    match &replay.lines[5].sent {
        Some(Sent::Recovered { start_time_ms, .. }) => assert_eq!(*start_time_ms, 104 * 60_000 + 20_000, "the recovered fire's check time"),
        other => panic!("{other:?}"),
    }
    assert!(!replay.lines[4].matched && replay.lines[3].matched);
    assert_eq!((replay.windows, replay.fires, replay.recoveries, replay.lines_left_out), (9, 2, 1, 0));
    assert_eq!(replay.rules, [RuleSummary { rule: "cpu_rule".into(), expression: "sum(cpu > 80) >= 2".into(), outcome: RuleOutcome::Ran, windows: 9, entities: 1, fires: 2, recoveries: 1 }]);
}

#[test]
fn every_check_lists_each_minute_and_lines_are_capped() {
    let (_, values) = high_then_low();
    let settings = settings(SETTINGS);
    let all = replay(&settings, &values, range(100, 108), true, MAX_LINES);
    assert_eq!(all.lines.iter().map(|l| l.minute.0).collect::<Vec<_>>(), (100..=108).collect::<Vec<_>>());
    assert_eq!(all.lines.iter().map(|l| l.matched).collect::<Vec<_>>(), [false, true, true, true, true, true, false, false, false]);
    let capped = replay(&settings, &values, range(100, 108), false, 2);
    assert_eq!((capped.lines.len(), capped.lines_left_out), (2, 5));
    assert_eq!((capped.fires, capped.recoveries), (2, 1), "the summary counts every check");
}

#[test]
fn the_first_check_sees_the_minutes_before_the_range() {
    let (_, values) = high_then_low();
    let settings = settings(SETTINGS);
    assert_eq!(read_from(&settings, range(102, 102)), EpochMinute(100), "a window of 3 minutes");
    // 100..=102 hold three values above 80: the replay's first check fires.
    let replay = replay(&settings, &values, range(102, 102), false, MAX_LINES);
    assert_eq!(story(&replay), [line(102, "Normal -> Firing", "FIRING dry-run-1")]);
}

#[test]
fn include_names_leave_other_entities_out() {
    let text = SETTINGS.replace("    period: 3\n", "    period: 3\n    include-names: [host-2]\n");
    let settings = settings(&text);
    let (host1, host2) = (AlarmEntity::service("host-1"), AlarmEntity::service("host-2"));
    let mut values = MinuteValues::new();
    put(&mut values, "cpu", &host1, 100, &[90.0, 90.0, 90.0]);
    put(&mut values, "cpu", &host2, 100, &[50.0, 90.0, 90.0]);
    assert_eq!(plan(&settings, &values, range(100, 102)), Ok(3), "one entity × three minutes");
    let replay = replay(&settings, &values, range(100, 102), true, MAX_LINES);
    assert!(replay.lines.iter().all(|l| l.entity == host2), "{:?}", replay.lines);
    assert_eq!(story(&replay)[2], line(102, "Normal -> Firing", "FIRING dry-run-1"));
    assert_eq!((replay.rules[0].entities, replay.windows), (1, 3));
}

#[test]
fn a_rule_on_a_metric_nobody_produces_waits_and_a_mixed_scope_rule_is_in_error() {
    let text = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 1
  mem_rule:
    expression: sum(mem > 80) >= 1
  mixed_rule:
    expression: sum((cpu > 1) && (inst_cpu > 1)) >= 1
"#;
    let settings = settings(text);
    let svc = AlarmEntity::service("host-1");
    let mut values = MinuteValues::new();
    put(&mut values, "cpu", &svc, 100, &[90.0, 10.0]);
    values.set_scope("inst_cpu", "SERVICE_INSTANCE");
    let replay = replay(&settings, &values, range(100, 101), false, MAX_LINES);
    let outcomes: Vec<(&str, &RuleOutcome)> = replay.rules.iter().map(|r| (r.rule.as_str(), &r.outcome)).collect();
    assert_eq!(outcomes[0], ("cpu_rule", &RuleOutcome::Ran));
    assert_eq!(outcomes[1], ("mem_rule", &RuleOutcome::Waiting { missing: vec!["mem".into()] }));
    assert!(matches!(outcomes[2].1, RuleOutcome::Error { reason } if reason.contains("same scope")), "{outcomes:?}");
    assert_eq!((replay.waiting(), replay.errors()), (1, 1));
    assert!(replay.lines.iter().all(|l| l.rule == "cpu_rule"));
    assert_eq!(story(&replay), [line(100, "Normal -> Firing", "FIRING dry-run-1"), line(101, "Firing -> ObservingRecovery", "")]);
}

#[test]
fn the_work_is_bounded_before_it_starts() {
    let narrowed = settings(&SETTINGS.replace("    period: 3\n", "    period: 3\n    include-names: [host-7]\n"));
    let settings = settings(SETTINGS);
    let mut values = MinuteValues::new();
    assert_eq!(plan(&AlarmSettings::empty(), &values, range(0, 0)), Err(ReplayError::NoRules));
    assert_eq!(plan(&settings, &values, range(5, 4)), Err(ReplayError::Backwards { first: 5, last: 4 }));
    assert_eq!(plan(&settings, &values, range(0, MAX_MINUTES)), Err(ReplayError::RangeTooLong { minutes: MAX_MINUTES + 1, max: MAX_MINUTES }));
    assert_eq!(plan(&settings, &values, range(1, MAX_MINUTES)), Ok(0), "a day, no values");
    for n in 0..1500 {
        put(&mut values, "cpu", &AlarmEntity::service(&format!("host-{n}")), 0, &[1.0]);
    }
    let refused = plan(&settings, &values, range(1, MAX_MINUTES)).expect_err("1500 entities × a day");
    assert_eq!(refused, ReplayError::TooManyChecks { checks: 1500 * 1440, minutes: 1440, entities: 1500, max: MAX_CHECKS });
    assert!(refused.to_string().contains("include-names"), "{refused}");
    assert_eq!(plan(&narrowed, &values, range(1, MAX_MINUTES)), Ok(1440));
}

#[test]
fn minute_values_answer_their_range_only() {
    let svc = AlarmEntity::service("s");
    let mut values = MinuteValues::new();
    put(&mut values, "cpu", &svc, 10, &[1.0, 2.0, 3.0]);
    let read = values.minute_values("cpu", EpochMinute(11), EpochMinute(20)).expect("read");
    assert_eq!(read.iter().map(|(_, m, _)| m.0).collect::<Vec<_>>(), [11, 12]);
    assert!(values.minute_values("cpu", EpochMinute(12), EpochMinute(11)).expect("read").is_empty());
    assert_eq!((values.metric_scope("cpu").as_deref(), values.metric_scope("mem")), (Some("SERVICE"), None));
    assert_eq!(values.len(), 3);
}

#[test]
fn only_a_dry_run_engine_traces() {
    let (_, values) = high_then_low();
    let mut mint = || AlarmUuid(7);
    let mut running = AlarmEngine::new(settings(SETTINGS));
    let checked = running.check(101 * 60_000 + 20_000, &values, &mut mint);
    assert_eq!((checked.windows, checked.firing.len(), checked.trace.len()), (1, 1, 0), "the running rules list nothing more");
    let mut traced = AlarmEngine::new(settings(SETTINGS)).with_trace();
    let checked = traced.check(101 * 60_000 + 20_000, &values, &mut mint);
    assert_eq!(checked.trace.len(), 1);
    let check = &checked.trace[0];
    assert_eq!((check.rule.as_str(), check.matched, check.before.phase, check.after.phase), ("cpu_rule", true, AlarmPhase::Normal, AlarmPhase::Firing));
}
