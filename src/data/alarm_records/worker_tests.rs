//! The alarm worker's write path: a check's fire is stored as a record, and its recovery joins
//! it, through `AlarmWorker::with_records` over the in-memory key space; the states it holds are
//! kept across a restart (`AlarmWorker::with_state_keeper`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::store::{AlarmRecordStore, DEFAULT_RETENTION};
use super::{AlarmFilter, AlarmRecordReader};
use crate::control::alarms::engine::{AlarmEngine, AlarmValues};
use crate::control::alarms::entity::AlarmEntity;
use crate::control::alarms::settings::AlarmSettings;
use crate::control::alarms::window::{EpochMinute, MetricValue};
use crate::data::alarms::{AlarmWorker, Schedule};
use crate::store::series::MemSeriesKv;

/// `cpu` of one service by minute.
#[derive(Default)]
struct Cpu(Mutex<BTreeMap<i64, f64>>);

impl AlarmValues for Cpu {
    fn metric_scope(&self, metric: &str) -> Option<String> {
        (metric == "cpu").then(|| "SERVICE".to_string())
    }

    fn minute_values(&self, _metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String> {
        let values = self.0.lock().map_err(|e| e.to_string())?;
        let entity = AlarmEntity::service("checkout");
        Ok(values.range(from.0..=to.0).map(|(m, v)| (entity.clone(), EpochMinute(*m), MetricValue::Single(*v))).collect())
    }
}

const SETTINGS: &str = r#"
rules:
  cpu_rule:
    expression: sum(cpu > 80) >= 1
    period: 1
    silence-period: 0
    message: "CPU of {name} is high"
    tags:
      level: WARNING
"#;

#[tokio::test]
async fn a_check_s_fire_is_stored_and_its_recovery_joins_it() {
    let settings = AlarmSettings::parse(SETTINGS, &crate::control::alarms::verify::verify).expect("settings");
    let engine = Arc::new(Mutex::new(AlarmEngine::new(settings)));
    let (notifier, _hooks) = crate::control::alarms::hooks::delivery::hook_delivery(
        Vec::new(),
        crate::control::alarms::hooks::target::DeliverySettings::for_test(),
        Arc::new(crate::control::alarms::hooks::twin::MemHookSender::default()),
        Arc::new(crate::base::self_metrics::SelfMetrics::new()),
    )
    .expect("no targets");
    let minute = 29_930_000; // 2026-11-27
    let store = Arc::new(AlarmRecordStore::open(Arc::new(MemSeriesKv::new()), DEFAULT_RETENTION).with_clock(Arc::new(move || minute * 60_000)));
    let cpu = Arc::new(Cpu::default());
    let mut worker = AlarmWorker::new(engine, cpu.clone(), notifier, Schedule::EveryMinute).with_records(store.clone());
    let check = |m: i64| m * 60_000 + 20_000;
    let read = || store.query(&AlarmFilter { start_ms: 0, end_ms: i64::MAX, limit: 10, ..AlarmFilter::default() }).expect("read");

    cpu.0.lock().expect("cpu").insert(minute, 95.0);
    let checked = worker.check_now(check(minute)).await;
    assert_eq!(checked.firing.len(), 1, "{checked:?}");
    let page = read();
    assert_eq!(page.total, 1);
    let record = &page.records[0];
    assert_eq!((record.rule_name.as_str(), record.name.as_str(), record.alarm_message.as_str()), ("cpu_rule", "checkout", "CPU of checkout is high"));
    assert_eq!(record.uuid, checked.firing[0].uuid);
    assert_eq!(record.expression, "sum(cpu > 80) >= 1");
    assert!(record.recovery_time.is_none());

    // The condition clears: once the engine sends the recovery, the record carries it.
    let mut recovered_at = None;
    for m in minute + 1..minute + 5 {
        cpu.0.lock().expect("cpu").insert(m, 10.0);
        if !worker.check_now(check(m)).await.recoveries.is_empty() {
            recovered_at = Some(check(m));
            break;
        }
    }
    let recovered_at = recovered_at.expect("a recovery within 4 checks");
    let page = read();
    assert_eq!(page.total, 1);
    assert_eq!(page.records[0].recovery_time, Some(recovered_at));
}

/// A restart while an alarm fires: the states the worker kept are read back, and the restarted
/// worker neither fires again nor forgets the recovery, which names the first fire's uuid.
#[tokio::test]
async fn a_restarted_worker_resumes_a_firing_alarm_from_the_kept_states() {
    use super::AlarmStateKeeper;
    let kv = Arc::new(MemSeriesKv::new());
    let minute = 29_930_000;
    let store = || Arc::new(AlarmRecordStore::open(kv.clone(), DEFAULT_RETENTION).with_clock(Arc::new(move || minute * 60_000)));
    let notifier = || {
        crate::control::alarms::hooks::delivery::hook_delivery(
            Vec::new(),
            crate::control::alarms::hooks::target::DeliverySettings::for_test(),
            Arc::new(crate::control::alarms::hooks::twin::MemHookSender::default()),
            Arc::new(crate::base::self_metrics::SelfMetrics::new()),
        )
        .expect("no targets")
        .0
    };
    // Silence long enough that a fresh engine would fire again at once, and a recovery that
    // needs one false check.
    let settings = || {
        let text = SETTINGS.replace("silence-period: 0", "silence-period: 10");
        AlarmSettings::parse(&text, &crate::control::alarms::verify::verify).expect("settings")
    };
    let check = |m: i64| m * 60_000 + 20_000;
    let cpu = Arc::new(Cpu::default());
    cpu.0.lock().expect("cpu").insert(minute, 95.0);

    let first = store();
    let engine = Arc::new(Mutex::new(AlarmEngine::new(settings())));
    let mut worker = AlarmWorker::new(engine, cpu.clone(), notifier(), Schedule::EveryMinute).with_state_keeper(first.clone(), Vec::new());
    let fired = worker.check_now(check(minute)).await;
    assert_eq!(fired.firing.len(), 1);
    let kept = first.kept_states().expect("kept");
    assert_eq!(kept.len(), 1, "the firing state is kept: {kept:?}");
    assert_eq!(kept[0].state.and_then(|s| s.last_fired).map(|f| f.uuid.to_string()), Some(fired.firing[0].uuid.clone()));
    drop(worker);

    // The restart: a new engine adopts what the store kept.
    let second = store();
    let kept = second.kept_states().expect("kept");
    let engine = Arc::new(Mutex::new(AlarmEngine::new(settings())));
    engine.lock().expect("engine").adopt(kept.clone());
    let mut worker = AlarmWorker::new(engine, cpu.clone(), notifier(), Schedule::EveryMinute).with_state_keeper(second.clone(), kept);
    cpu.0.lock().expect("cpu").insert(minute + 1, 96.0);
    let again = worker.check_now(check(minute + 1)).await;
    assert!(again.firing.is_empty(), "no second FIRING after the restart: {again:?}");
    let mut recovery = None;
    for m in minute + 2..minute + 16 {
        cpu.0.lock().expect("cpu").insert(m, 10.0);
        let checked = worker.check_now(check(m)).await;
        assert!(checked.firing.is_empty());
        if let Some(r) = checked.recoveries.first() {
            recovery = Some(r.alarm.uuid.clone());
            break;
        }
    }
    assert_eq!(recovery, Some(fired.firing[0].uuid.clone()), "the recovery names the first fire");
    // RECOVERED is kept (it still decides the next check); back to NORMAL, nothing is.
    assert_eq!(second.kept_states().expect("kept").len(), 1);
    cpu.0.lock().expect("cpu").insert(minute + 20, 10.0);
    worker.check_now(check(minute + 20)).await;
    assert!(second.kept_states().expect("kept").is_empty(), "a NORMAL state is not kept");
}

#[test]
fn kept_states_replace_each_other_and_a_bad_value_is_reported() {
    use super::AlarmStateKeeper;
    use crate::control::alarms::engine::StateRecord;
    use crate::control::alarms::state::{AlarmPhase, AlarmState};
    use crate::store::series::{SeriesKv, SeriesOp};
    let kv = Arc::new(MemSeriesKv::new());
    let store = AlarmRecordStore::open(kv.clone(), DEFAULT_RETENTION);
    let record = |rule: &str| {
        let settings = AlarmSettings::parse(SETTINGS, &crate::control::alarms::verify::verify).expect("settings");
        let mut state = AlarmState::new(settings.rules[0].periods);
        state.phase = AlarmPhase::SilencedFiring;
        StateRecord { rule: rule.to_string(), fingerprint: 7, entity: AlarmEntity::service("checkout"), state: Some(state) }
    };
    store.keep_states(&[record("a_rule"), record("b_rule")]).expect("keep");
    assert_eq!(store.kept_states().expect("kept"), vec![record("a_rule"), record("b_rule")]);
    store.keep_states(&[record("c_rule")]).expect("keep");
    assert_eq!(store.kept_states().expect("kept"), vec![record("c_rule")], "the set is replaced whole");
    // Records and their retention do not touch the states.
    assert!(!store.expire(i64::MAX / 2).expect("expire"));
    assert_eq!(store.kept_states().expect("kept").len(), 1);
    kv.write(&[SeriesOp::Put { key: super::keys::state_key(0), value: vec![9, b'{'] }], false).expect("put");
    let error = store.kept_states().expect_err("format version 9");
    assert!(error.to_string().contains("format version 9"), "{error}");
}
