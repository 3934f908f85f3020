//! The alarm worker's write path: a check's fire is stored as a record, and its recovery joins
//! it, through `AlarmWorker::with_records` over the in-memory key space.

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
