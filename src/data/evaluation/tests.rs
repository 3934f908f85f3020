//! Dispatch against a real runtime, a map registry and a recording writer: the gate (suspended
//! drops, drain, one version per batch, unload), the queue bound, the registry check, writer
//! errors and the per-file stats. No sleeps: tests wait on the writer's record or on idleness.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hotrule_mal_engine::{MetricValue, Sample, labels as sample_labels};

use super::*;
use crate::compiler::{DslKind, compile};
use crate::data::seam::Protocol;
use crate::base::ids::{Catalog as RuleCatalog, ContentHash, RuleName};
use crate::data::metrics::MetricStoreError;
use crate::control::runtime::{LoaderKind, loaded_rule};
use crate::base::self_metrics::{SelfMetrics, labels};

const WAIT: Duration = Duration::from_secs(10);

const V1: &str = "metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";
/// A filter-only change of V1: only service `a` passes.
const V2_FILTER: &str = "metricPrefix: t\nfilter: \"{ tags -> tags.svc == 'a' }\"\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";

fn key(name: &str) -> RuleKey {
    RuleKey::new(RuleCatalog::OtelRules, RuleName::parse(name).expect("name"))
}

fn install(runtime: &Runtime, key: &RuleKey, content: &str) -> ContentHash {
    let compiled = compile(DslKind::Mal, content.as_bytes()).expect("compiles");
    let hash = ContentHash::of(content.as_bytes());
    runtime.install(key, loaded_rule(compiled, hash.clone(), None, LoaderKind::Runtime), BTreeSet::new());
    hash
}

/// A registry holding exactly the shapes it was given.
#[derive(Default)]
struct MapRegistry(Mutex<HashMap<String, MetricShape>>);

impl MapRegistry {
    fn register(&self, content: &str) {
        let Ok(Compiled::Mal(file)) = compile(DslKind::Mal, content.as_bytes()) else { panic!("MAL") };
        self.0.lock().expect("lock").extend(file.metrics());
    }
}

impl MeasureRegistry for MapRegistry {
    fn shape(&self, metric: &str) -> Option<MetricShape> {
        self.0.lock().expect("lock").get(metric).copied()
    }
}

/// The writer twin: records every write; can be held shut (a slow batch) and can fail.
#[derive(Default)]
struct Twin {
    written: Mutex<Vec<MetricValue>>,
    writes: Condvar,
    held: Mutex<bool>,
    released: Condvar,
    /// Writers currently blocked in `write` because the twin is held.
    blocked: Mutex<usize>,
    fail: std::sync::atomic::AtomicBool,
    /// Every shape announced through `ensure_shape`, in order.
    shapes: Mutex<Vec<crate::data::metrics::MetricInfo>>,
}

impl Twin {
    fn hold(&self) {
        *self.held.lock().expect("lock") = true;
    }

    fn release(&self) {
        *self.held.lock().expect("lock") = false;
        self.released.notify_all();
    }

    fn wait_blocked(&self) {
        let deadline = Instant::now() + WAIT;
        let mut blocked = self.blocked.lock().expect("lock");
        while *blocked == 0 {
            assert!(Instant::now() < deadline, "no write blocked");
            blocked = self.released.wait_timeout(blocked, Duration::from_millis(50)).expect("wait").0;
        }
    }

    fn values(&self) -> Vec<MetricValue> {
        self.written.lock().expect("lock").clone()
    }
}

impl MetricWriter for Twin {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        let mut held = self.held.lock().expect("lock");
        if *held {
            *self.blocked.lock().expect("lock") += 1;
            self.released.notify_all();
            while *held {
                held = self.released.wait(held).expect("wait");
            }
            *self.blocked.lock().expect("lock") -= 1;
        }
        drop(held);
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(MetricStoreError::Corrupt { key: "twin".into(), detail: "refused".into() });
        }
        self.written.lock().expect("lock").extend_from_slice(values);
        self.writes.notify_all();
        Ok(())
    }

    fn ensure_shape(&self, info: &crate::data::metrics::MetricInfo) -> Result<bool, MetricStoreError> {
        self.shapes.lock().expect("lock").push(info.clone());
        Ok(false)
    }
}

/// Records the content version of every evaluation that wrote values.
#[derive(Default)]
struct Versions(Mutex<Vec<(ContentHash, Vec<MetricValue>)>>);

impl EvaluationProbe for Versions {
    fn evaluated(&self, _key: &RuleKey, content: &ContentHash, values: &[MetricValue]) {
        self.0.lock().expect("lock").push((content.clone(), values.to_vec()));
    }
}

struct Fixture {
    runtime: Arc<Runtime>,
    registry: Arc<MapRegistry>,
    telemetry: Arc<SelfMetrics>,
    twin: Arc<Twin>,
    dispatcher: Dispatcher,
}

fn fixture(settings: DispatchSettings) -> Fixture {
    let runtime = Arc::new(Runtime::new());
    let registry = Arc::new(MapRegistry::default());
    let telemetry = Arc::new(SelfMetrics::new());
    let twin = Arc::new(Twin::default());
    let dispatcher =
        Dispatcher::new(settings, runtime.clone(), registry.clone(), telemetry.clone(), vec![twin.clone()]).expect("threads");
    Fixture { runtime, registry, telemetry, twin, dispatcher }
}

fn batch(services: &[&str], value: f64) -> Batch {
    let samples = services
        .iter()
        .map(|svc| Sample::new("requests_total", sample_labels([("svc", *svc)]), value, 1_795_598_820_000))
        .collect();
    Batch { protocol: Protocol::RemoteWrite, catalog: crate::data::seam::Catalog::Otel, samples, received_ms: 0 }
}

fn idle(f: &Fixture) {
    assert!(f.dispatcher.wait_idle(WAIT), "dispatch did not go idle");
}

#[test]
fn values_of_registered_measures_are_written_and_counted_per_file() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.dispatcher.submit(vec![batch(&["a", "b"], 3.0)]).expect("accepted");
    idle(&f);
    let values = f.twin.values();
    assert_eq!(values.len(), 2, "{values:?}");
    assert!(values.iter().all(|v| v.metric == "t_requests"));
    let stats = f.dispatcher.evaluation(&vm);
    assert_eq!((stats.samples_in, stats.values_out, stats.evaluations, stats.errors), (2, 2, 1, 0), "{stats:?}");
    assert!(stats.last_evaluation_time.is_some());
    let seconds = f.telemetry.render();
    assert!(seconds.contains("hotrule_evaluation_seconds_count{rule=\"otel-rules/vm\"} 1"), "{seconds}");
}

#[test]
fn a_suspended_file_drops_its_samples_and_counts_them() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    assert_eq!(f.runtime.suspend(&vm, Origin::Peer, true), SuspendResult::Suspended);
    f.dispatcher.submit(vec![batch(&["a", "b", "c"], 1.0)]).expect("accepted");
    idle(&f);
    assert!(f.twin.values().is_empty(), "nothing evaluated while suspended");
    let dropped = labels([("rule", "otel-rules/vm"), ("reason", "suspended")]);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.samples_dropped, &dropped), 3);
    assert_eq!(f.dispatcher.evaluation(&vm).samples_dropped, 3);
    f.runtime.resume(&vm, Origin::Peer);
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    idle(&f);
    assert_eq!(f.twin.values().len(), 1, "evaluated again once resumed");
}

#[test]
fn an_unregistered_or_reshaped_measure_is_rejected_and_counted() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.dispatcher.submit(vec![batch(&["a", "b"], 1.0)]).expect("accepted");
    idle(&f);
    assert!(f.twin.values().is_empty());
    let unregistered = labels([("reason", "unregistered_measure")]);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.values_rejected, &unregistered), 2);
    // Registered with another shape (sum instead of avg): still rejected.
    let other = V1.replace(".service(", ".downsampling(SUM).service(");
    f.registry.register(&other);
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    idle(&f);
    assert!(f.twin.values().is_empty());
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.values_rejected, &unregistered), 3);
    assert_eq!(f.dispatcher.evaluation(&vm).values_rejected, 3);
}

#[test]
fn a_disabled_metric_is_rejected() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    let compiled = compile(DslKind::Mal, V1.as_bytes()).expect("compiles");
    let disabled: BTreeSet<String> = ["t_requests".to_string()].into();
    f.runtime.install(&vm, loaded_rule(compiled, ContentHash::of(V1.as_bytes()), None, LoaderKind::Runtime), disabled);
    f.registry.register(V1);
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    idle(&f);
    assert!(f.twin.values().is_empty());
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.values_rejected, &labels([("reason", "unregistered_measure")])), 1);
}

#[test]
fn a_writer_error_is_counted_not_raised() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.twin.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    f.dispatcher.submit(vec![batch(&["a", "b"], 1.0)]).expect("accepted");
    idle(&f);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.values_rejected, &labels([("reason", "storage_error")])), 2);
    let stats = f.dispatcher.evaluation(&vm);
    assert_eq!((stats.values_out, stats.values_rejected), (0, 2));
}

#[test]
fn a_full_queue_refuses_whole_submissions_and_leaves_the_count_to_the_receiver() {
    let f = fixture(DispatchSettings { queue_batches: 2, workers: 1, ..DispatchSettings::for_test() });
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.twin.hold();
    // The one thread takes the first batch and blocks in the writer; two more fill the queue.
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    f.twin.wait_blocked();
    f.dispatcher.submit(vec![batch(&["a"], 1.0), batch(&["b"], 1.0)]).expect("fills the queue");
    let refused = f.dispatcher.submit(vec![batch(&["a", "b", "c"], 1.0)]);
    assert_eq!(refused, Err(SubmitError::QueueFull { retry_after: RETRY_AFTER }));
    // The receiver counts the refusal once (`ingest`'s tests); the queue does not count it again.
    let full = labels([("protocol", "remote_write"), ("reason", "queue_full")]);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.samples_rejected, &full), 0);
    f.twin.release();
    idle(&f);
    assert_eq!(f.twin.values().len(), 3, "the accepted batches were all evaluated");
    f.dispatcher.stop();
    assert_eq!(f.dispatcher.submit(vec![batch(&["a"], 1.0)]), Err(SubmitError::Stopped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_after_suspend_waits_for_the_open_evaluation_and_no_more() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.twin.hold();
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    let twin = f.twin.clone();
    tokio::task::spawn_blocking(move || twin.wait_blocked()).await.expect("blocked");
    assert_eq!(f.runtime.suspend(&vm, Origin::SelfOrigin, true), SuspendResult::Suspended);
    assert_eq!(f.runtime.in_flight(&vm), 1, "the blocked batch is open");
    let soon = Instant::now() + Duration::from_millis(100);
    assert!(!f.runtime.wait_drained(&vm, soon).await, "not drained while the write is blocked");
    // Batches arriving now are dropped, never opened.
    f.dispatcher.submit(vec![batch(&["b"], 1.0)]).expect("accepted");
    let runtime = f.runtime.clone();
    let waiter = tokio::spawn(async move { runtime.wait_drained(&key("vm"), Instant::now() + WAIT).await });
    f.twin.release();
    assert!(waiter.await.expect("waiter"), "drained once the open evaluation finished");
    idle(&f);
    let services: Vec<String> = f.twin.values().iter().map(|v| v.entity.service_name.clone()).collect();
    assert_eq!(services, ["a"], "only the batch opened before the suspend was evaluated");
    assert_eq!(f.dispatcher.evaluation(&vm).samples_dropped, 1);
}

#[test]
fn a_filter_only_swap_is_atomic_per_batch() {
    let f = fixture(DispatchSettings { workers: 1, ..DispatchSettings::for_test() });
    let vm = key("vm");
    let v1 = install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    let versions = Arc::new(Versions::default());
    f.dispatcher.set_probe(Some(versions.clone()));
    f.twin.hold();
    f.dispatcher.submit(vec![batch(&["a", "b"], 1.0)]).expect("accepted");
    f.twin.wait_blocked();
    // Swapped while the first batch is between evaluation and write.
    let v2 = install(&f.runtime, &vm, V2_FILTER);
    f.dispatcher.submit(vec![batch(&["a", "b"], 1.0)]).expect("accepted");
    f.twin.release();
    idle(&f);
    let seen = versions.0.lock().expect("lock").clone();
    let per_batch: Vec<(ContentHash, usize)> = seen.iter().map(|(hash, values)| (hash.clone(), values.len())).collect();
    assert_eq!(per_batch, [(v1, 2), (v2, 1)], "the first batch ran V1 whole, the second V2 whole");
}

#[test]
fn an_unloaded_file_is_no_longer_evaluated_and_a_reload_starts_fresh() {
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    let counter = "metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n";
    install(&f.runtime, &vm, counter);
    f.registry.register(counter);
    let at = |value: f64, minute: i64| {
        let mut b = batch(&["a"], value);
        b.samples[0].timestamp_ms += minute * 60_000;
        b
    };
    // One at a time: two evaluation threads could otherwise take the two batches in either order.
    f.dispatcher.submit(vec![at(10.0, 0)]).expect("accepted");
    idle(&f);
    f.dispatcher.submit(vec![at(15.0, 1)]).expect("accepted");
    idle(&f);
    f.runtime.unload(&vm);
    f.dispatcher.submit(vec![at(20.0, 2)]).expect("accepted");
    idle(&f);
    assert_eq!(f.twin.values().len(), 2, "nothing evaluated after the unload");
    install(&f.runtime, &vm, counter);
    f.dispatcher.submit(vec![at(30.0, 3)]).expect("accepted");
    idle(&f);
    let increases: Vec<Value> = f.twin.values().into_iter().map(|v| v.value).collect();
    use hotrule_mal_engine::Value;
    assert_eq!(increases, [Value::Single(0), Value::Single(5), Value::Single(0)], "the reloaded file's windows start fresh");
}

#[test]
fn a_content_change_carries_counter_windows_unless_the_shape_changed() {
    let counter = |extra: &str| {
        format!("metricPrefix: t\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).increase('PT5M'){extra}.service(['svc'], Layer.GENERAL)\n")
    };
    let old: BTreeMap<String, MetricShape> = match compile(DslKind::Mal, counter("").as_bytes()) {
        Ok(Compiled::Mal(file)) => file.metrics(),
        _ => panic!("MAL"),
    };
    let same_shape = match compile(DslKind::Mal, counter(".tagNotEqual('svc', 'x')").as_bytes()) {
        Ok(Compiled::Mal(file)) => file.metrics(),
        _ => panic!("MAL"),
    };
    let reshaped = match compile(DslKind::Mal, counter(".downsampling(SUM)").as_bytes()) {
        Ok(Compiled::Mal(file)) => file.metrics(),
        _ => panic!("MAL"),
    };
    assert!(evaluate::restarted_metrics(&old, &same_shape).is_empty());
    assert_eq!(evaluate::restarted_metrics(&old, &reshaped), ["t_requests".to_string()].into());
}

use std::collections::BTreeMap;

#[tokio::test]
async fn the_node_registry_prefers_stored_measures_and_falls_back_to_active_claims() {
    use crate::control::rules::ownership::FileClaims;
    use crate::store::{Change, Measure, Store, kv::MemKv};
    let store = Arc::new(Store::open(Arc::new(MemKv::new())).expect("store"));
    let runtime = Arc::new(Runtime::new());
    let registry = NodeRegistry::new(store.clone(), runtime.clone());
    let vm = key("vm");
    let compiled = compile(DslKind::Mal, V1.as_bytes()).expect("compiles");
    let Compiled::Mal(file) = &compiled else { panic!("MAL") };
    let claimed = file.metrics()["t_requests"];
    assert_eq!(registry.shape("t_requests"), None, "nothing claims it");
    runtime.claims.set(&vm, FileClaims::of(&compiled, false, false));
    assert_eq!(registry.shape("t_requests"), Some(claimed), "an ACTIVE file's claim stands in");
    runtime.claims.set(&vm, FileClaims::of(&compiled, true, false));
    assert_eq!(registry.shape("t_requests"), None, "an INACTIVE file's claim does not");
    let stored = MetricShape { downsampling: hotrule_mal_engine::Downsampling::Sum, ..claimed };
    let measure = Measure { metric: "t_requests".into(), shape: stored, owner: vm.clone(), revision: crate::base::ids::Revision::zero() };
    store.commit(Change { measures: vec![measure], ..Change::default() }).await.expect("commit");
    runtime.claims.set(&vm, FileClaims::of(&compiled, false, false));
    assert_eq!(registry.shape("t_requests"), Some(stored), "the stored measure wins");
}

#[test]
fn a_new_version_reading_other_names_is_evaluated_at_once() {
    let f = fixture(DispatchSettings { workers: 1, ..DispatchSettings::for_test() });
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    let errors = V1.replace("requests_total", "errors_total");
    f.registry.register(V1);
    let errors_batch = || {
        let mut b = batch(&["a"], 1.0);
        b.samples[0].name = "errors_total".into();
        b
    };
    f.dispatcher.submit(vec![errors_batch()]).expect("accepted");
    idle(&f);
    assert!(f.twin.values().is_empty(), "V1 reads no errors_total");
    assert_eq!(f.dispatcher.evaluation(&vm).evaluations, 0, "a batch the file reads nothing of is not evaluated");
    install(&f.runtime, &vm, &errors);
    f.dispatcher.submit(vec![errors_batch()]).expect("accepted");
    idle(&f);
    assert_eq!(f.twin.values().len(), 1, "the new version reads it");
}

#[test]
fn each_new_version_announces_its_shapes_to_the_writers_before_its_first_values() {
    use hotrule_mal_engine::{DataType, Downsampling, ScopeType};
    let f = fixture(DispatchSettings::for_test());
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    idle(&f);
    f.dispatcher.submit(vec![batch(&["a"], 2.0)]).expect("accepted");
    idle(&f);
    let expected = crate::data::metrics::MetricInfo {
        name: "t_requests".into(),
        scope: ScopeType::Service,
        data_type: DataType::Single,
        downsampling: Downsampling::Avg,
    };
    assert_eq!(*f.twin.shapes.lock().expect("lock"), vec![expected.clone()], "once per version, not per batch");
    assert_eq!(f.twin.values().len(), 2);
    // A new version announces again, before it writes.
    install(&f.runtime, &vm, V2_FILTER);
    f.registry.register(V2_FILTER);
    f.dispatcher.submit(vec![batch(&["a"], 3.0)]).expect("accepted");
    idle(&f);
    assert_eq!(*f.twin.shapes.lock().expect("lock"), vec![expected.clone(), expected]);
}

/// The next batch of a file evaluates while the previous batch's values are being written (the
/// file's lock is not held across the write); its values wait for the write and follow in
/// evaluation order, and its gate stays open until they are written.
#[test]
fn a_file_evaluates_its_next_batch_during_the_previous_write() {
    let f = fixture(DispatchSettings { workers: 2, ..DispatchSettings::for_test() });
    let vm = key("vm");
    install(&f.runtime, &vm, V1);
    f.registry.register(V1);
    f.twin.hold();
    f.dispatcher.submit(vec![batch(&["a"], 1.0)]).expect("accepted");
    f.twin.wait_blocked();
    f.dispatcher.submit(vec![batch(&["b"], 1.0)]).expect("accepted");
    let deadline = Instant::now() + WAIT;
    while f.dispatcher.evaluation(&vm).evaluations < 2 {
        assert!(Instant::now() < deadline, "the second batch was not evaluated during the first write");
        std::thread::yield_now();
    }
    assert_eq!(f.runtime.in_flight(&vm), 2, "both evaluations stay open until their values are written");
    assert!(f.twin.values().is_empty(), "nothing written yet");
    f.twin.release();
    idle(&f);
    let services: Vec<String> = f.twin.values().iter().map(|v| v.entity.service_name.clone()).collect();
    assert_eq!(services, ["a", "b"], "written in evaluation order");
    assert_eq!(f.runtime.in_flight(&vm), 0);
    assert_eq!(f.dispatcher.evaluation(&vm).values_out, 2);
}
