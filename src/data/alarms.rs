//! The alarm rules on the data they watch: the minute values the engine reads
//! ([`StoreValues`], the metric store filtered to the entities this node owns), and the worker
//! that checks the rules and hands what fires and recovers to the hooks ([`AlarmWorker`]).
//!
//! Each (rule, entity) is checked on one node, the entity's owner (`base::owner`): the node that
//! holds the entity's merged minute values once the others handed theirs off, so the value a
//! rule sees is the cluster's exact value, and a notification is sent once, not once per node.
//! A lone node owns everything.
//!
//! Schedule: as SkyWalking's `AlarmCore`, a look every 10 s and a check once per minute, the
//! first look after second 15 (`alarms.check_interval` replaces that with a fixed interval, for
//! tests and demos).

use std::sync::Arc;
use std::time::Duration;

use hotrule_mal_engine::ScopeType;

use crate::base::clock::wall_clock_ms;
use crate::base::owner::LiveNodes;
use crate::base::worker::{Worker, WorkerState};
use crate::control::alarms::SharedAlarms;
use crate::control::alarms::engine::{AlarmValues, Checked, StateRecord};
use crate::control::alarms::entity::AlarmEntity;
use crate::control::alarms::hooks::delivery::AlarmNotifier;
use crate::control::alarms::state::AlarmUuid;
use crate::control::alarms::window::{EpochMinute, MetricValue};
use crate::data::alarm_records::{AlarmRecordWriter, AlarmStateKeeper};
use crate::data::metrics::cells::keys::owner_key;
use crate::data::metrics::{Entity, Granularity, MetricReader, SeriesFilter, Value};

/// SkyWalking's `AlarmCore` tick.
const LOOK_EVERY: Duration = Duration::from_secs(10);

/// SkyWalking checks only past this second of the minute ("avoid to trigger false alarm").
const FIRST_SECOND: i64 = 15;

/// The metric store, as the alarm engine reads it: the entities this node owns.
pub struct StoreValues {
    pub reader: Arc<dyn MetricReader>,
    pub live: Arc<dyn LiveNodes>,
    /// The owner key of every alarm entity a read met (owned or not), for
    /// [`AlarmValues::moved_away`]; at most [`MAX_OWNER_KEYS`] are remembered.
    owner_keys: std::sync::Mutex<std::collections::HashMap<AlarmEntity, Vec<u8>>>,
}

/// The most owner keys [`StoreValues`] remembers (past it, the map starts over: an entity not
/// met again is then forgotten, not handed over).
pub const MAX_OWNER_KEYS: usize = 1_000_000;

impl StoreValues {
    pub fn new(reader: Arc<dyn MetricReader>, live: Arc<dyn LiveNodes>) -> StoreValues {
        StoreValues { reader, live, owner_keys: std::sync::Mutex::new(std::collections::HashMap::new()) }
    }
}

impl AlarmValues for StoreValues {
    fn metric_scope(&self, metric: &str) -> Option<String> {
        let metrics = self.reader.metrics().ok()?;
        metrics.into_iter().find(|info| info.name == metric).map(|info| info.scope.as_str().to_string())
    }

    fn minute_values(&self, metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String> {
        let filter = SeriesFilter { metric: metric.to_string(), ..SeriesFilter::default() };
        let (start_ms, end_ms) = (from.0.saturating_mul(60_000), to.0.saturating_mul(60_000).saturating_add(59_999));
        let series = self.reader.read(&filter, Granularity::Minute, start_ms, end_ms).map_err(|e| e.to_string())?;
        let live = self.live.live();
        let mut out = Vec::new();
        let mut owner_keys = self.owner_keys.lock().unwrap_or_else(|p| p.into_inner());
        for series in series {
            let Some(entity) = alarm_entity(&series.entity) else { continue };
            let key = owner_key(&series.entity);
            let owned = live.owns(&key);
            if !owner_keys.contains_key(&entity) {
                if owner_keys.len() >= MAX_OWNER_KEYS {
                    owner_keys.clear();
                }
                owner_keys.insert(entity.clone(), key);
            }
            if !owned {
                continue;
            }
            for point in series.points {
                if let Some(value) = alarm_value(&point.value) {
                    out.push((entity.clone(), EpochMinute::from_epoch_ms(point.start_ms), value));
                }
            }
        }
        Ok(out)
    }

    fn moved_away(&self, entity: &AlarmEntity) -> bool {
        let owner_keys = self.owner_keys.lock().unwrap_or_else(|p| p.into_inner());
        owner_keys.get(entity).is_some_and(|key| !self.live.live().owns(key))
    }
}

/// The alarm entity of a meter entity; none for the scopes SkyWalking's alarms do not see
/// (processes).
pub fn alarm_entity(entity: &Entity) -> Option<AlarmEntity> {
    match entity.scope {
        ScopeType::Service => Some(AlarmEntity::service(&entity.service_name)),
        ScopeType::ServiceInstance => Some(AlarmEntity::instance(&entity.service_name, &entity.instance_name)),
        ScopeType::Endpoint => Some(AlarmEntity::endpoint(&entity.service_name, &entity.endpoint_name)),
        ScopeType::ServiceRelation => Some(AlarmEntity::service_relation(&entity.source_service_name, &entity.dest_service_name)),
        ScopeType::ServiceInstanceRelation => Some(AlarmEntity::instance_relation(
            &entity.source_service_name,
            &entity.source_instance_name,
            &entity.dest_service_name,
            &entity.dest_instance_name,
        )),
        ScopeType::Process | ScopeType::ProcessRelation => None,
    }
}

/// A stored value as a window holds it: common and labeled values, and a histogram's
/// percentiles (`histogram_percentile([...])`) as values labeled `p` beside the histogram's own
/// labels, as SkyWalking's percentile functions hold them (`m{p='50,99'}` selects them). A
/// histogram without percentiles is not alarmable (SkyWalking refuses it too).
pub(crate) fn alarm_value(value: &Value) -> Option<MetricValue> {
    match value {
        Value::Single(v) => Some(MetricValue::Single(*v as f64)),
        Value::Labeled(pairs) => Some(MetricValue::Labeled(pairs.iter().map(|(k, v)| (k.clone(), *v as f64)).collect())),
        Value::Histogram { percentiles, .. } if percentiles.is_empty() => None,
        Value::Histogram { labels, buckets, percentiles } => Some(MetricValue::Labeled(
            percentiles
                .iter()
                .map(|rank| {
                    let key = if labels.is_empty() { format!("p={rank}") } else { format!("{labels},p={rank}") };
                    (key, crate::data::metrics::prom::percentile(buckets, *rank) as f64)
                })
                .collect(),
        )),
    }
}

/// The other nodes, as alarm states reach them (the bus in a node; nothing alone).
#[async_trait::async_trait]
pub trait AlarmPeers: Send + Sync + 'static {
    /// Hands `states` (and a rule change's `reset` metrics) to every live peer; how many took
    /// them. Bounded in time.
    async fn share(&self, reset: Vec<String>, states: Vec<StateRecord>) -> usize;
}

/// When the worker checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Once a minute, at the first look past second 15 (SkyWalking's).
    EveryMinute,
    /// Every this long (tests and demos).
    Every(Duration),
}

/// Checks the rules on schedule and hands the notifications to the hooks.
pub struct AlarmWorker {
    alarms: SharedAlarms,
    values: Arc<dyn AlarmValues + Send + Sync>,
    notifier: AlarmNotifier,
    schedule: Schedule,
    /// The minute of the last check (for [`Schedule::EveryMinute`]).
    last_minute: Option<i64>,
    /// Where changed states go before any notification (none alone).
    peers: Option<Arc<dyn AlarmPeers>>,
    /// Where each check's firing messages and recoveries are stored (`data::alarm_records`).
    records: Option<Arc<dyn AlarmRecordWriter>>,
    /// Where the states this node holds that are not NORMAL are kept across a restart, and the
    /// set last kept (written again only when it changes).
    keeper: Option<(Arc<dyn AlarmStateKeeper>, Vec<StateRecord>)>,
}

impl AlarmWorker {
    pub fn new(alarms: SharedAlarms, values: Arc<dyn AlarmValues + Send + Sync>, notifier: AlarmNotifier, schedule: Schedule) -> AlarmWorker {
        AlarmWorker { alarms, values, notifier, schedule, last_minute: None, peers: None, records: None, keeper: None }
    }

    /// The same worker, handing the states each check changes to `peers` before it notifies:
    /// a new owner then resumes a firing alarm instead of firing it again.
    pub fn with_peers(mut self, peers: Arc<dyn AlarmPeers>) -> AlarmWorker {
        self.peers = Some(peers);
        self
    }

    /// The same worker, storing what each check sends in `records`.
    pub fn with_records(mut self, records: Arc<dyn AlarmRecordWriter>) -> AlarmWorker {
        self.records = Some(records);
        self
    }

    /// The same worker, keeping the states it holds that are not NORMAL in `keeper` (synced,
    /// before any notification) whenever they change. The engine should have adopted
    /// `kept` (what `keeper` held at start) already.
    pub fn with_state_keeper(mut self, keeper: Arc<dyn AlarmStateKeeper>, kept: Vec<StateRecord>) -> AlarmWorker {
        self.keeper = Some((keeper, kept));
        self
    }

    /// Whether a check is due at `now_ms`.
    fn due(&self, now_ms: i64) -> bool {
        match self.schedule {
            Schedule::Every(_) => true,
            Schedule::EveryMinute => {
                let minute = now_ms.div_euclid(60_000);
                self.last_minute.is_none_or(|last| minute > last) && now_ms.rem_euclid(60_000) / 1000 > FIRST_SECOND
            }
        }
    }

    /// One check now; what it sent.
    pub async fn check_now(&mut self, now_ms: i64) -> Checked {
        self.last_minute = Some(now_ms.div_euclid(60_000));
        let (alarms, values) = (self.alarms.clone(), self.values.clone());
        let keeping = self.keeper.is_some();
        let checked = tokio::task::spawn_blocking(move || {
            let mut engine = alarms.lock().unwrap_or_else(|p| p.into_inner());
            let checked = engine.check(now_ms, values.as_ref(), &mut || AlarmUuid(rand::random()));
            let held = if keeping { engine.held_states() } else { Vec::new() };
            (checked, held)
        })
        .await;
        let (checked, held) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                tracing::error!(error = %e, "alarm check task failed");
                return Checked::default();
            }
        };
        for (rule, reason) in &checked.errors {
            tracing::warn!(rule, reason, "alarm rule not checked");
        }
        for message in &checked.firing {
            tracing::info!(rule = %message.rule_name, entity = %message.name, uuid = %message.uuid, "alarm firing");
        }
        for recovery in &checked.recoveries {
            tracing::info!(rule = %recovery.alarm.rule_name, entity = %recovery.alarm.name, uuid = %recovery.alarm.uuid, "alarm recovered");
        }
        // The peers first: a notification whose state no peer holds could be sent twice.
        if let Some(peers) = &self.peers
            && !checked.states.is_empty()
        {
            peers.share(Vec::new(), checked.states.clone()).await;
        }
        self.keep(held).await;
        crate::data::alarm_records::store::record_check(self.records.as_ref(), &checked.firing, &checked.recoveries).await;
        let report = self.notifier.notify(&checked.firing, &checked.recoveries);
        if !report.unknown_hooks.is_empty() {
            tracing::warn!(hooks = ?report.unknown_hooks, "alarm messages name hooks that are not configured");
        }
        checked
    }
}

impl AlarmWorker {
    /// Keeps `held` if it differs from the set last kept (a failure is logged; the next check
    /// tries again).
    async fn keep(&mut self, held: Vec<StateRecord>) {
        let Some((keeper, last)) = self.keeper.as_mut() else { return };
        if *last == held {
            return;
        }
        let (writer, states) = (keeper.clone(), held.clone());
        match tokio::task::spawn_blocking(move || writer.keep_states(&states)).await {
            Ok(Ok(())) => *last = held,
            Ok(Err(e)) => tracing::warn!(error = %e, "alarm states not kept; a restart now would start them from NORMAL"),
            Err(e) => tracing::error!(error = %e, "alarm state task failed"),
        }
    }
}

#[async_trait::async_trait]
impl Worker for AlarmWorker {
    fn name(&self) -> &'static str {
        "alarm-check"
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        let now = wall_clock_ms();
        if self.due(now) {
            self.check_now(now).await;
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let pause = match self.schedule {
            Schedule::EveryMinute => LOOK_EVERY,
            Schedule::Every(interval) => interval,
        };
        tokio::time::sleep(pause).await;
        WorkerState::Busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Arc<crate::data::metrics::cells::MetricStore> {
        let kv = Arc::new(crate::store::series::MemSeriesKv::new());
        let telemetry = Arc::new(crate::base::self_metrics::SelfMetrics::new());
        Arc::new(crate::data::metrics::cells::MetricStore::open(kv, crate::data::metrics::cells::Retention::default(), telemetry).expect("open"))
    }

    #[test]
    fn every_minute_checks_once_past_second_15() {
        let notifier_parts = crate::control::alarms::hooks::delivery::hook_delivery(
            Vec::new(),
            crate::control::alarms::hooks::target::DeliverySettings::for_test(),
            Arc::new(crate::control::alarms::hooks::twin::MemHookSender::default()),
            Arc::new(crate::base::self_metrics::SelfMetrics::new()),
        );
        let (notifier, _worker) = notifier_parts.expect("no targets");
        let engine = crate::control::alarms::engine::AlarmEngine::new(crate::control::alarms::settings::AlarmSettings::empty());
        let values = Arc::new(StoreValues::new(store(), Arc::new(crate::base::owner::Alone(crate::base::ids::NodeId("a".into())))));
        let mut worker = AlarmWorker::new(Arc::new(std::sync::Mutex::new(engine)), values, notifier, Schedule::EveryMinute);
        let minute = 29_000_000 * 60_000;
        assert!(!worker.due(minute + 15_000), "second 15 is not past 15");
        assert!(worker.due(minute + 16_000));
        worker.last_minute = Some(29_000_000);
        assert!(!worker.due(minute + 40_000), "once per minute");
        assert!(worker.due(minute + 60_000 + 20_000));
    }

    #[test]
    fn percentiles_are_labeled_values_and_plain_histograms_are_not_alarmable() {
        let buckets = vec![(100, 5), (250, 3), (500, 2)];
        let with = |labels: &str, percentiles: Vec<u32>| Value::Histogram { labels: labels.into(), buckets: buckets.clone(), percentiles };
        assert_eq!(alarm_value(&with("", vec![50, 90])), Some(MetricValue::Labeled(vec![("p=50".into(), 100.0), ("p=90".into(), 500.0)])));
        assert_eq!(alarm_value(&with("route=/a", vec![99])), Some(MetricValue::Labeled(vec![("route=/a,p=99".into(), 500.0)])));
        assert_eq!(alarm_value(&with("", Vec::new())), None);
        assert_eq!(alarm_value(&Value::Single(7)), Some(MetricValue::Single(7.0)));
    }

    /// An entity another node owns now is not read here, and is said to have moved away; one
    /// never read is not.
    #[test]
    fn an_entity_owned_elsewhere_is_not_read_and_has_moved_away() {
        use crate::base::ids::NodeId;
        use crate::base::owner::{Fixed, LiveSet};
        use crate::data::metrics::MetricWriter;
        use hotrule_mal_engine::{DataType, Downsampling, Entity, ScopeType};
        let store = store();
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = "checkout".into();
        entity.layer = "GENERAL".into();
        let now_ms = crate::base::clock::wall_clock_ms();
        let bucket = crate::data::metrics::Granularity::Minute.bucket_of(now_ms);
        let value = crate::data::metrics::MetricValue {
            metric: "cpu".into(),
            rule: "test".into(),
            entity: entity.clone(),
            time_bucket: bucket,
            timestamp_ms: now_ms,
            value: Value::Single(90),
            data_type: DataType::Single,
            downsampling: Downsampling::Latest,
        };
        store.write(&[value]).expect("write");
        let live = Arc::new(Fixed::new(LiveSet::alone(NodeId("a".into()))));
        let values = StoreValues::new(store, live.clone());
        let minute = EpochMinute::from_epoch_ms(now_ms);
        let checkout = AlarmEntity::service("checkout");
        assert_eq!(values.minute_values("cpu", minute, minute).expect("read").len(), 1);
        assert!(!values.moved_away(&checkout));
        // A node that owns the entity joins.
        let key = owner_key(&entity);
        let other = (0..100).map(|n| NodeId(format!("n{n}"))).find(|n| !LiveSet::new(NodeId("a".into()), vec![n.clone()]).owns(&key)).expect("an owner");
        live.set(LiveSet::new(NodeId("a".into()), vec![other]));
        assert!(values.minute_values("cpu", minute, minute).expect("read").is_empty(), "not read here");
        assert!(values.moved_away(&checkout));
        assert!(!values.moved_away(&AlarmEntity::service("never-seen")));
    }

    /// A MAL `histogram_percentile` metric, stored, read by the engine through the store and
    /// selected by `p`: the p99 rule fires, the p50 rule does not.
    #[test]
    fn a_percentile_rule_fires_on_a_stored_histogram() {
        use crate::data::metrics::MetricWriter;
        use hotrule_mal_engine::{DataType, Downsampling, Entity, ScopeType};
        let store = store();
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = "checkout".into();
        entity.layer = "GENERAL".into();
        // Now (the store keeps minute values for a while only), at second 20 of the minute.
        let now_ms = crate::base::clock::wall_clock_ms() / 60_000 * 60_000 + 20_000;
        let bucket = crate::data::metrics::Granularity::Minute.bucket_of(now_ms);
        let value = crate::data::metrics::MetricValue {
            metric: "latency_percentile".into(),
            rule: "test".into(),
            entity,
            time_bucket: bucket,
            timestamp_ms: now_ms,
            value: Value::Histogram { labels: String::new(), buckets: vec![(100, 5), (250, 3), (500, 2)], percentiles: vec![50, 99] },
            data_type: DataType::HistogramPercentile,
            downsampling: Downsampling::Avg,
        };
        store.write(&[value]).expect("write");
        let settings = crate::control::alarms::settings::AlarmSettings::parse(
            "rules:\n  p99_rule:\n    expression: sum(latency_percentile{p='99'} > 400) >= 1\n  p50_rule:\n    expression: sum(latency_percentile{p='50'} > 400) >= 1\n",
            &crate::control::alarms::verify::verify,
        )
        .expect("settings");
        let mut engine = crate::control::alarms::engine::AlarmEngine::new(settings);
        let values = StoreValues::new(store, Arc::new(crate::base::owner::Alone(crate::base::ids::NodeId("a".into()))));
        let mut n = 0;
        let checked = engine.check(now_ms, &values, &mut || {
            n += 1;
            crate::control::alarms::state::AlarmUuid(n)
        });
        assert!(checked.errors.is_empty(), "{:?}", checked.errors);
        let fired: Vec<&str> = checked.firing.iter().map(|m| m.rule_name.as_str()).collect();
        assert_eq!(fired, vec!["p99_rule"]);
        assert_eq!(checked.windows, 2, "both rules checked the entity");
    }
}
