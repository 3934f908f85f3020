//! The engine over an in-memory store of minute values: fire, silence, recovery, reset, reload,
//! waiting rules, expiry and labeled values, each check at second 20 of its minute.

use std::collections::{BTreeMap, BTreeSet};

use super::engine::{AlarmEngine, AlarmValues, RuleStatus};
use super::entity::AlarmEntity;
use super::settings::AlarmSettings;
use super::state::{AlarmPhase, AlarmUuid};
use super::window::{EpochMinute, MetricValue};

/// Minute values by metric, and the metrics' scopes; `moved` entities are another node's now
/// (their values are not read here).
#[derive(Default)]
struct MemValues {
    scopes: BTreeMap<String, String>,
    values: BTreeMap<String, Vec<(AlarmEntity, EpochMinute, MetricValue)>>,
    moved: BTreeSet<AlarmEntity>,
}

impl MemValues {
    fn put(&mut self, metric: &str, entity: &AlarmEntity, minute: i64, value: f64) {
        self.scopes.entry(metric.to_string()).or_insert_with(|| "SERVICE".to_string());
        self.values.entry(metric.to_string()).or_default().push((entity.clone(), EpochMinute(minute), MetricValue::Single(value)));
    }
}

impl AlarmValues for MemValues {
    fn metric_scope(&self, metric: &str) -> Option<String> {
        self.scopes.get(metric).cloned()
    }

    fn minute_values(&self, metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String> {
        let wanted = |(entity, minute, _): &&(AlarmEntity, EpochMinute, MetricValue)| (from..=to).contains(minute) && !self.moved.contains(entity);
        Ok(self.values.get(metric).map(|v| v.iter().filter(wanted).cloned().collect()).unwrap_or_default())
    }

    fn moved_away(&self, entity: &AlarmEntity) -> bool {
        self.moved.contains(entity)
    }
}

const SETTINGS: &str = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 2
    period: 3
    silence-period: 2
    recovery-observation-period: 1
    message: "CPU of {name} ({id}) is high"
    tags:
      level: WARNING
hooks:
  webhook:
    default:
      is-default: true
      urls: [http://127.0.0.1:9/alarm]
"#;

fn settings(text: &str) -> AlarmSettings {
    AlarmSettings::parse(text, &super::verify::verify).expect("valid settings")
}

/// Checks at second 20 of `minute` with ids 1, 2, 3, ...
fn at(minute: i64) -> i64 {
    minute * 60_000 + 20_000
}

struct Run {
    engine: AlarmEngine,
    values: MemValues,
    next_id: u128,
}

impl Run {
    fn new(text: &str) -> Run {
        Run { engine: AlarmEngine::new(settings(text)), values: MemValues::default(), next_id: 0 }
    }

    /// Puts `cpu` for `entity` at `minute`, checks, and says what was sent: "fire:<uuid>",
    /// "recover:<uuid>" or "".
    fn minute(&mut self, entity: &AlarmEntity, minute: i64, cpu: Option<f64>) -> Vec<String> {
        if let Some(cpu) = cpu {
            self.values.put("cpu", entity, minute, cpu);
        }
        let next = &mut self.next_id;
        let checked = self.engine.check(at(minute), &self.values, &mut || {
            *next += 1;
            AlarmUuid(*next)
        });
        assert!(checked.errors.is_empty(), "{:?}", checked.errors);
        let mut out: Vec<String> = checked.firing.iter().map(|m| format!("fire:{}", m.uuid)).collect();
        out.extend(checked.recoveries.iter().map(|r| format!("recover:{}", r.alarm.uuid)));
        out
    }

    fn phase(&self, entity: &AlarmEntity) -> Option<AlarmPhase> {
        self.engine.view()[0].entities.iter().find(|(e, _)| e == entity).map(|(_, s)| s.state.phase)
    }
}

fn id(n: u128) -> String {
    AlarmUuid(n).to_string()
}

#[test]
fn fires_repeats_after_silence_and_recovers_once_with_the_last_uuid() {
    let svc = AlarmEntity::service("host-1");
    let mut run = Run::new(SETTINGS);
    assert!(run.minute(&svc, 100, Some(90.0)).is_empty(), "1 of the last 3 minutes above 80");
    // Minute 101: 2 of 3 → fire with the id minted in this check (the 2nd).
    assert_eq!(run.minute(&svc, 101, Some(95.0)), [format!("fire:{}", id(2))]);
    // Silence 2: two more true checks say nothing, the third fires again with a new id.
    assert!(run.minute(&svc, 102, Some(95.0)).is_empty());
    assert!(run.minute(&svc, 103, Some(95.0)).is_empty());
    assert_eq!(run.minute(&svc, 104, Some(95.0)), [format!("fire:{}", id(5))]);
    // Falling back (fired at 104 with S = 2, R = 1): 105 still matches (103 and 104 above) and
    // uses one silence check; 106 is the first false check (silence 0: observing); 107 the
    // second, R + 1 = 2 false checks with silence over: recovered.
    assert!(run.minute(&svc, 105, Some(10.0)).is_empty(), "104 and 103 still above: 2 of 3");
    assert!(run.minute(&svc, 106, Some(10.0)).is_empty(), "1 of 3: first false check");
    assert_eq!(run.phase(&svc), Some(AlarmPhase::ObservingRecovery));
    assert_eq!(run.minute(&svc, 107, Some(10.0)), [format!("recover:{}", id(5))], "only the last fire recovers");
    assert_eq!(run.phase(&svc), Some(AlarmPhase::Recovered));
    assert!(run.minute(&svc, 108, Some(10.0)).is_empty());
    assert_eq!(run.phase(&svc), Some(AlarmPhase::Normal));
}

#[test]
fn the_message_carries_skywalkings_fields() {
    let svc = AlarmEntity::service("host-1");
    let mut run = Run::new(SETTINGS);
    run.values.put("cpu", &svc, 99, 90.0);
    run.values.put("cpu", &svc, 100, 91.0);
    let checked = run.engine.check(at(100), &run.values, &mut || AlarmUuid(7));
    let message = &checked.firing[0];
    assert_eq!((message.scope_id, message.scope.as_str(), message.name.as_str(), message.id0.as_str()), (1, "SERVICE", "host-1", "aG9zdC0x.1"));
    assert_eq!(message.alarm_message, "CPU of host-1 (aG9zdC0x.1) is high");
    assert_eq!((message.rule_name.as_str(), message.start_time, message.uuid.as_str()), ("cpu_rule", at(100), id(7).as_str()));
    assert_eq!(message.tags.len(), 1);
    assert_eq!(message.hooks.iter().collect::<Vec<_>>(), ["webhook.default"]);
    assert!(message.mqe_metrics_snapshot["cpu"].contains("91"), "{:?}", message.mqe_metrics_snapshot);
}

#[test]
fn a_reset_forgets_every_entity_without_a_recovery() {
    let (a, b) = (AlarmEntity::service("a"), AlarmEntity::service("b"));
    let mut run = Run::new(SETTINGS);
    run.values.put("cpu", &b, 100, 99.0);
    run.minute(&a, 100, Some(99.0));
    run.values.put("cpu", &b, 101, 99.0);
    assert_eq!(run.minute(&a, 101, Some(99.0)).len(), 2, "both fire");
    assert_eq!(run.engine.reset(&BTreeSet::from(["other".to_string()])), Vec::<String>::new());
    assert_eq!(run.engine.reset(&BTreeSet::from(["cpu".to_string()])), ["cpu_rule"]);
    assert_eq!(run.engine.reset_count(), 1);
    assert!(run.engine.view()[0].entities.is_empty(), "windows and states gone");
    // The values are still stored: the next check rebuilds the window and fires anew; nothing
    // recovers the alarms the reset dropped.
    run.values.put("cpu", &b, 102, 10.0);
    let sent = run.minute(&a, 102, Some(10.0));
    assert!(sent.iter().all(|s| s.starts_with("fire:")), "{sent:?}");
}

#[test]
fn a_reload_keeps_unchanged_rules_and_restarts_changed_ones() {
    let svc = AlarmEntity::service("s");
    let mut run = Run::new(SETTINGS);
    run.minute(&svc, 100, Some(99.0));
    assert_eq!(run.minute(&svc, 101, Some(99.0)).len(), 1);
    assert_eq!(run.engine.replace(settings(SETTINGS)), Vec::<String>::new(), "the same file changes nothing");
    assert!(run.minute(&svc, 102, Some(99.0)).is_empty(), "still silenced: the state was kept");
    let changed = SETTINGS.replace("level: WARNING", "level: CRITICAL");
    assert_eq!(run.engine.replace(settings(&changed)), ["cpu_rule"]);
    assert_eq!(run.minute(&svc, 103, Some(99.0)).len(), 1, "a changed rule starts from NORMAL and fires at once");
}

#[test]
fn a_rule_waits_for_its_metrics_and_refuses_mixed_scopes() {
    let text = r#"
rules:
  both_rule:
    expression: sum((cpu > 80) && (mem > 80)) >= 1
"#;
    let svc = AlarmEntity::service("s");
    let mut run = Run::new(text);
    run.values.put("cpu", &svc, 100, 99.0);
    let checked = run.engine.check(at(100), &run.values, &mut || AlarmUuid(1));
    assert!(checked.firing.is_empty());
    assert_eq!(run.engine.view()[0].status, RuleStatus::Waiting { missing: vec!["mem".to_string()] });
    run.values.put("mem", &svc, 100, 99.0);
    assert_eq!(run.engine.check(at(100), &run.values, &mut || AlarmUuid(2)).firing.len(), 1, "runs once mem is produced");
    run.values.scopes.insert("mem".into(), "SERVICE_INSTANCE".into());
    let checked = run.engine.check(at(101), &run.values, &mut || AlarmUuid(3));
    assert!(checked.errors[0].1.contains("must have the same scope level"), "{:?}", checked.errors);
}

#[test]
fn filters_pick_entities_and_an_empty_window_expires_silently() {
    let text = r#"
rules:
  one_rule:
    expression: sum(cpu > 80) >= 1
    include-names-regex: "prod-.*"
"#;
    let (prod, dev) = (AlarmEntity::service("prod-1"), AlarmEntity::service("dev-1"));
    let mut run = Run::new(text);
    run.values.put("cpu", &dev, 100, 99.0);
    assert_eq!(run.minute(&prod, 100, Some(99.0)).len(), 1, "only prod-1");
    // Period 1: the next minute without values leaves the window empty: gone, no recovery.
    assert!(run.minute(&prod, 101, None).is_empty());
    assert!(run.engine.view()[0].entities.is_empty());
}

#[test]
fn a_labeled_metric_matches_when_any_label_group_does() {
    let text = r#"
rules:
  pct_rule:
    expression: sum(pct{p='50,99'} > 1000) >= 1
"#;
    let svc = AlarmEntity::service("s");
    let mut values = MemValues::default();
    values.scopes.insert("pct".into(), "SERVICE".into());
    let labeled = |p50: f64, p99: f64| MetricValue::Labeled(vec![("p=50".into(), p50), ("p=99".into(), p99)]);
    values.values.insert("pct".into(), vec![(svc.clone(), EpochMinute(100), labeled(10.0, 2000.0))]);
    let mut engine = AlarmEngine::new(settings(text));
    assert_eq!(engine.check(at(100), &values, &mut || AlarmUuid(1)).firing.len(), 1, "p99 above");
    // Both below from 101: silence (S = period = 1) still counts at the first false check, so
    // the second recovers.
    values.values.insert("pct".into(), vec![(svc.clone(), EpochMinute(101), labeled(10.0, 20.0)), (svc, EpochMinute(102), labeled(10.0, 20.0))]);
    assert!(engine.check(at(101), &values, &mut || AlarmUuid(2)).recoveries.is_empty());
    assert_eq!(engine.check(at(102), &values, &mut || AlarmUuid(3)).recoveries.len(), 1);
}

/// The owner's states reach a peer before its notifications; when the owner dies and the peer
/// becomes the entity's owner, it resumes the alarm: no second fire, and the recovery carries
/// the first fire's uuid. A peer whose rule differs (another fingerprint) starts fresh.
#[test]
fn a_new_owner_resumes_a_firing_alarm_from_the_states_it_was_sent() {
    let text = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 1
    silence-period: 3
"#;
    let svc = AlarmEntity::service("s");
    let (mut owner, mut peer, mut other) = (Run::new(text), Run::new(text), Run::new(&text.replace("silence-period: 3", "silence-period: 4")));
    owner.values.put("cpu", &svc, 100, 99.0);
    let checked = owner.engine.check(at(100), &owner.values, &mut || AlarmUuid(1));
    assert_eq!(checked.firing.len(), 1);
    assert_eq!(checked.states.len(), 1, "the new FIRING state goes to the peers");
    peer.engine.adopt(checked.states.clone());
    other.engine.adopt(checked.states);
    assert_eq!(peer.engine.kept(), 1);
    // One more check on the owner (silenced), shared too.
    owner.values.put("cpu", &svc, 101, 99.0);
    let checked = owner.engine.check(at(101), &owner.values, &mut || AlarmUuid(2));
    assert!(checked.firing.is_empty());
    peer.engine.adopt(checked.states);

    // The owner dies; the peer now gets the entity's values: still above (silenced), then below.
    peer.next_id = 10;
    assert!(peer.minute(&svc, 102, Some(99.0)).is_empty(), "no second fire");
    assert_eq!(peer.engine.kept(), 0, "taken");
    assert!(peer.minute(&svc, 103, Some(10.0)).is_empty(), "silence still counts");
    assert_eq!(peer.minute(&svc, 104, Some(10.0)), [format!("recover:{}", id(1))], "the first fire's uuid");

    // A peer running another version of the rule does not take the state.
    other.next_id = 20;
    assert_eq!(other.minute(&svc, 102, Some(99.0)), [format!("fire:{}", id(21))]);
}

/// A node that stops owning a firing entity (another node joined, or returned) hands its state
/// over instead of telling the peers to forget it: the new owner resumes the alarm.
#[test]
fn an_entity_that_moves_away_is_handed_over_not_forgotten() {
    let text = "rules:\n  cpu_rule:\n    expression: sum(cpu > 80) >= 1\n    silence-period: 3\n";
    let svc = AlarmEntity::service("s");
    let (mut old, mut new) = (Run::new(text), Run::new(text));
    old.values.put("cpu", &svc, 100, 99.0);
    assert_eq!(old.minute(&svc, 101, Some(99.0)), [format!("fire:{}", id(1))]);
    old.values.moved.insert(svc.clone());
    let checked = old.engine.check(at(102), &old.values, &mut || AlarmUuid(50));
    assert_eq!(checked.states.len(), 1);
    assert_eq!(checked.states[0].state.map(|s| s.phase), Some(AlarmPhase::Firing), "handed over, not dropped");
    assert!(old.engine.view()[0].entities.is_empty(), "the old owner no longer holds it");
    new.engine.adopt(checked.states);
    new.next_id = 10;
    assert!(new.minute(&svc, 102, Some(99.0)).is_empty(), "no second fire from the new owner");
    // Below from 103: silence (3 from the fire at 101) runs out, then the recovery.
    let sent: Vec<Vec<String>> = (103..=106).map(|minute| new.minute(&svc, minute, Some(10.0))).collect();
    assert_eq!(sent, [vec![], vec![], vec![format!("recover:{}", id(1))], vec![]], "one recovery, with the first fire's uuid");
}

#[test]
fn an_expired_or_reset_entity_is_forgotten_by_the_peers() {
    let svc = AlarmEntity::service("s");
    let mut owner = Run::new(SETTINGS);
    let mut peer = Run::new(SETTINGS);
    owner.values.put("cpu", &svc, 100, 99.0);
    owner.values.put("cpu", &svc, 101, 99.0);
    peer.engine.adopt(owner.engine.check(at(101), &owner.values, &mut || AlarmUuid(1)).states);
    assert_eq!(peer.engine.kept(), 1);
    // Period 3: four minutes later the window is empty: the owner drops it and says so.
    let checked = owner.engine.check(at(105), &owner.values, &mut || AlarmUuid(2));
    assert_eq!(checked.states.len(), 1);
    assert_eq!(checked.states[0].state, None);
    peer.engine.adopt(checked.states);
    assert_eq!(peer.engine.kept(), 0);
    // A NORMAL entity is not shared at every check (its countdowns drift).
    let quiet = AlarmEntity::service("quiet");
    owner.values.put("cpu", &quiet, 110, 10.0);
    owner.values.put("cpu", &quiet, 111, 10.0);
    assert!(owner.engine.check(at(110), &owner.values, &mut || AlarmUuid(4)).states.iter().all(|r| r.entity != quiet));
    assert!(owner.engine.check(at(111), &owner.values, &mut || AlarmUuid(5)).states.iter().all(|r| r.entity != quiet));
    // A reset forgets kept states of the rule.
    peer.engine.adopt(owner.engine.check(at(101), &owner.values, &mut || AlarmUuid(3)).states);
    assert_eq!(peer.engine.kept(), 1);
    peer.engine.reset(&BTreeSet::from(["cpu".to_string()]));
    assert_eq!(peer.engine.kept(), 0);
}

#[test]
fn fires_come_in_entity_order_whatever_the_read_order_and_carry_the_window() {
    let text = r#"
rules:
  one_rule:
    expression: sum(cpu > 80) >= 1
"#;
    let mut run = Run::new(text);
    for name in ["c", "a", "b"] {
        run.values.put("cpu", &AlarmEntity::service(name), 100, 90.0);
    }
    run.values.put("cpu", &AlarmEntity::service("d"), 100, 10.0);
    let checked = run.engine.check(at(100), &run.values, &mut || AlarmUuid(1));
    assert_eq!(checked.windows, 4);
    let names: Vec<&str> = checked.firing.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(checked.firing[0].mqe_metrics_snapshot["cpu"], r#"[{"id":"6000000","value":90.0}]"#);
    let view = &run.engine.view()[0];
    assert_eq!(view.entities.len(), 4, "d is kept, NORMAL");
    assert!(view.entities.iter().all(|(_, s)| s.window.end() == Some(EpochMinute(100))));
}

const MIXED: &str = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 2
    period: 3
    silence-period: 2
    recovery-observation-period: 1
  both_rule:
    expression: sum((cpu > 80) && (mem > 50)) >= 1
    period: 2
    silence-period: 1
    include-names-regex: "s[0-4]"
  trend_rule:
    expression: sum(increase(cpu, 2) > 10) >= 1
    period: 2
  pct_rule:
    expression: sum(pct{p='50,99'} > 1000) >= 1
    period: 2
    recovery-observation-period: 2
  abs_rule:
    expression: sum(abs(cpu) > 80) >= 1
    exclude-names: [s3]
  two_labeled_rule:
    expression: sum(pct{p='99'} > 1000) >= sum(pct{p='50'} > 10)
    period: 3
"#;

/// The engine against the one before frames ([`super::engine_reference`]) over generated runs:
/// entities coming and going, values around the thresholds, labeled values, checks one to
/// three minutes apart, resets, reloads and states handed back: the same messages, states,
/// windows and views at every check.
#[test]
fn checks_as_the_engine_before_frames() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::engine_reference::ReferenceEngine;

    let mut rng = StdRng::seed_from_u64(23);
    // Fires, recoveries, states dropped, states taken back: all happen.
    let (mut fires, mut recoveries, mut dropped, mut taken) = (0, 0, 0, 0);
    for run in 0..20 {
        let mut engine = AlarmEngine::new(settings(MIXED));
        let mut reference = ReferenceEngine::new(settings(MIXED));
        let mut values = MemValues::default();
        let entities: Vec<AlarmEntity> = (0..8).map(|i| AlarmEntity::service(&format!("s{i}"))).collect();
        let mut present = vec![true; entities.len()];
        let (mut next, mut reference_next) = (0u128, 0u128);
        let mut minute = 1000;
        for step in 0..60 {
            for _ in 0..rng.random_range(1..=3) {
                minute += 1;
                for (i, entity) in entities.iter().enumerate() {
                    if rng.random_bool(0.1) {
                        present[i] = !present[i];
                    }
                    if !present[i] {
                        continue;
                    }
                    let high = i % 3 == 0;
                    if rng.random_bool(0.9) {
                        values.put("cpu", entity, minute, if high { rng.random_range(60.0..120.0) } else { rng.random_range(0.0..90.0) });
                    }
                    if rng.random_bool(0.8) {
                        values.put("mem", entity, minute, rng.random_range(0.0..100.0));
                    }
                    if rng.random_bool(0.8) {
                        values.scopes.entry("pct".to_string()).or_insert_with(|| "SERVICE".to_string());
                        let pair = |rng: &mut StdRng| rng.random_range(0.0..2000.0);
                        let value = MetricValue::Labeled(vec![("p=50".into(), pair(&mut rng)), ("p=99".into(), pair(&mut rng))]);
                        values.values.entry("pct".to_string()).or_default().push((entity.clone(), EpochMinute(minute), value));
                    }
                }
            }
            match rng.random_range(0..40) {
                0 => assert_eq!(engine.reset(&BTreeSet::from(["mem".to_string()])), reference.reset(&BTreeSet::from(["mem".to_string()]))),
                1 => {
                    let changed = settings(&MIXED.replace("period: 2\n    silence-period: 1", "period: 2\n    silence-period: 2"));
                    assert_eq!(engine.replace(changed.clone()), reference.replace(changed));
                }
                _ => {}
            }
            let kept = engine.kept();
            let checked = engine.check(at(minute), &values, &mut || {
                next += 1;
                AlarmUuid(next)
            });
            let expected = reference.check(at(minute), &values, &mut || {
                reference_next += 1;
                AlarmUuid(reference_next)
            });
            assert_eq!(format!("{checked:?}"), format!("{expected:?}"), "run {run}, step {step}, minute {minute}");
            assert_eq!(format!("{:?}", engine.view()), format!("{:?}", reference.view()), "run {run}, step {step}");
            assert_eq!(engine.firing(), reference.firing());
            assert_eq!(engine.reset_count(), reference.reset_count());
            assert_eq!(engine.settings(), reference.settings());
            fires += checked.firing.len();
            recoveries += checked.recoveries.len();
            dropped += checked.states.iter().filter(|r| r.state.is_none()).count();
            taken += usize::from(engine.kept() < kept);
            // States handed back now and then: taken when an entity comes back.
            if rng.random_bool(0.3) {
                engine.adopt(checked.states.clone());
                reference.adopt(expected.states.clone());
            }
            assert_eq!(engine.kept(), reference.kept());
        }
    }
    assert!(fires > 100 && recoveries > 100 && dropped > 10 && taken > 0, "{fires} fires, {recoveries} recoveries, {dropped} dropped, {taken} taken");
}
