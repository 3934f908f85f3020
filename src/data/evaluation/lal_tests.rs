//! LAL dispatch against a real runtime, a map registry, a recording log writer and a recording
//! metric writer: the shipped nginx files end to end (kept logs, samples through
//! `log-mal-rules`), the gate (suspended drops, the drain of a structural swap), the queue bound,
//! per-file errors, sampler state and the list row. No sleeps: tests wait on idleness or on the
//! writer's record.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hotrule_lal_engine::{Body, LogData};
use hotrule_mal_engine::{MetricValue, Value};

use super::*;
use crate::compiler::{DslKind, compile};
use crate::data::seam::{LogBatch, LogProtocol};
use crate::base::ids::{Catalog as RuleCatalog, ContentHash, RuleName};
use crate::data::logs::{KeptLog, LogStoreError};
use crate::data::metrics::MetricStoreError;
use crate::control::runtime::{LoaderKind, loaded_rule};
use crate::base::self_metrics::{SelfMetrics, labels};

const WAIT: Duration = Duration::from_secs(10);
const T0: i64 = 1_795_598_820_000;

fn shipped(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn lal_key(name: &str) -> RuleKey {
    RuleKey::new(RuleCatalog::Lal, RuleName::parse(name).expect("name"))
}

fn install(runtime: &Runtime, key: &RuleKey, kind: DslKind, content: &str) -> ContentHash {
    let compiled = compile(kind, content.as_bytes()).expect("compiles");
    let hash = ContentHash::of(content.as_bytes());
    runtime.install(key, loaded_rule(compiled, hash.clone(), None, LoaderKind::Runtime), BTreeSet::new());
    hash
}

/// A LAL file of `(name, layer, dsl)` rules.
fn lal_file(rules: &[(&str, &str, &str)]) -> String {
    let mut yaml = String::from("rules:\n");
    for (name, layer, dsl) in rules {
        yaml.push_str(&format!("  - name: {name}\n    layer: {layer}\n    dsl: |\n"));
        for line in dsl.lines() {
            yaml.push_str(&format!("      {line}\n"));
        }
    }
    yaml
}

/// A GENERAL rule that keeps every log and stamps it with `version`.
fn versioned(version: &str) -> String {
    lal_file(&[("keep", "GENERAL", &format!("filter {{\n  extractor {{ tag version: '{version}' }}\n  sink {{}}\n}}"))])
}

#[derive(Default)]
struct MapRegistry(Mutex<HashMap<String, MetricShape>>);

impl MeasureRegistry for MapRegistry {
    fn shape(&self, metric: &str) -> Option<MetricShape> {
        self.0.lock().expect("lock").get(metric).copied()
    }
}

/// The metric writer twin: records the values and counts the calls.
#[derive(Default)]
struct Metrics(Mutex<Vec<MetricValue>>, std::sync::atomic::AtomicUsize);

impl MetricWriter for Metrics {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.lock().expect("lock").extend_from_slice(values);
        Ok(())
    }
}

/// The log writer twin: records; can be held shut (a slow write) and can fail. `after_drain`
/// marks logs written after a test's drain returned.
#[derive(Default)]
struct Logs {
    written: Mutex<Vec<(KeptLog, bool)>>,
    held: Mutex<bool>,
    changed: Condvar,
    blocked: Mutex<usize>,
    fail: std::sync::atomic::AtomicBool,
    drained: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicUsize,
}

impl Logs {
    fn hold(&self) {
        *self.held.lock().expect("lock") = true;
    }

    fn release(&self) {
        *self.held.lock().expect("lock") = false;
        self.changed.notify_all();
    }

    fn wait_blocked(&self) {
        let deadline = Instant::now() + WAIT;
        let mut blocked = self.blocked.lock().expect("lock");
        while *blocked == 0 {
            assert!(Instant::now() < deadline, "no write blocked");
            blocked = self.changed.wait_timeout(blocked, Duration::from_millis(50)).expect("wait").0;
        }
    }

    fn logs(&self) -> Vec<KeptLog> {
        self.written.lock().expect("lock").iter().map(|(log, _)| log.clone()).collect()
    }

    fn tags(&self, key: &str) -> Vec<String> {
        self.logs().iter().filter_map(|log| log.record.tag(key).map(str::to_string)).collect()
    }
}

impl LogWriter for Logs {
    fn write(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut held = self.held.lock().expect("lock");
        if *held {
            *self.blocked.lock().expect("lock") += 1;
            self.changed.notify_all();
            while *held {
                held = self.changed.wait(held).expect("wait");
            }
            *self.blocked.lock().expect("lock") -= 1;
        }
        drop(held);
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(LogStoreError::Corrupt { key: "twin".into(), detail: "refused".into() });
        }
        let after = self.drained.load(std::sync::atomic::Ordering::SeqCst);
        self.written.lock().expect("lock").extend(logs.iter().map(|log| (log.clone(), after)));
        Ok(())
    }
}

struct Fixture {
    runtime: Arc<Runtime>,
    registry: Arc<MapRegistry>,
    telemetry: Arc<SelfMetrics>,
    metrics: Arc<Metrics>,
    logs: Arc<Logs>,
    dispatcher: Dispatcher,
}

fn fixture(settings: DispatchSettings) -> Fixture {
    let runtime = Arc::new(Runtime::new());
    let registry = Arc::new(MapRegistry::default());
    let telemetry = Arc::new(SelfMetrics::new());
    let metrics = Arc::new(Metrics::default());
    let logs = Arc::new(Logs::default());
    let dispatcher =
        Dispatcher::new(settings, runtime.clone(), registry.clone(), telemetry.clone(), vec![metrics.clone()]).expect("threads");
    dispatcher.add_log_writer(logs.clone());
    Fixture { runtime, registry, telemetry, metrics, logs, dispatcher }
}

impl Fixture {
    fn idle(&self) {
        assert!(self.dispatcher.wait_idle(WAIT), "dispatch did not go idle");
    }

    fn submit(&self, logs: Vec<LogData>) {
        let batch = LogBatch { protocol: LogProtocol::SkyWalking, logs, received_ms: T0 };
        self.dispatcher.submit_logs(vec![batch]).expect("accepted");
    }

    fn by_rule(&self, rule: &str, outcome: &str) -> u64 {
        SelfMetrics::counter_value(&self.telemetry.logs_by_rule, &labels([("rule", rule), ("outcome", outcome)]))
    }

    fn view(&self, key: &RuleKey) -> LogEvaluationView {
        match self.dispatcher.evaluation_of(key) {
            RuleEvaluation::Logs(view) => view,
            RuleEvaluation::Metrics(view) => panic!("a LAL file shows logs, got {view:?}"),
        }
    }
}

/// Waits (bounded) for a condition another thread makes true.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn log(layer: &str, body: &str, tags: &[(&str, &str)]) -> LogData {
    LogData {
        timestamp_ms: T0,
        service: "nginx::frontend".into(),
        service_instance: "nginx-0".into(),
        layer: layer.into(),
        body: Body::Text(body.into()),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..LogData::default()
    }
}

fn access_log() -> LogData {
    let line = r#"10.0.0.1 - - [01/Jan/2021:00:01:00 +0000] "GET /api/orders HTTP/1.1" 200 1234 "-" "curl/8.0""#;
    log("NGINX", line, &[("LOG_KIND", "NGINX_ACCESS_LOG")])
}

fn error_log() -> LogData {
    let line = "2021/01/01 00:00:00 [error] 123#123: *5 connect() failed (111: Connection refused) while connecting to upstream";
    log("NGINX", line, &[("LOG_KIND", "NGINX_ERROR_LOG")])
}

fn general(n: usize) -> Vec<LogData> {
    (0..n).map(|i| log("GENERAL", &format!("line {i}"), &[])).collect()
}

/// Installs the shipped `lal/nginx` and `log-mal-rules/nginx` and registers the latter's
/// metrics; their keys.
fn install_nginx(f: &Fixture) -> (RuleKey, RuleKey) {
    let lal = lal_key("nginx");
    let mal = RuleKey::new(RuleCatalog::LogMalRules, RuleName::parse("nginx").expect("name"));
    install(&f.runtime, &lal, DslKind::Lal, &shipped("lal/nginx.yaml"));
    let log_mal = shipped("log-mal-rules/nginx.yaml");
    install(&f.runtime, &mal, DslKind::Mal, &log_mal);
    let Ok(Compiled::Mal(file)) = compile(DslKind::Mal, log_mal.as_bytes()) else { panic!("MAL") };
    f.registry.0.lock().expect("lock").extend(file.metrics());
    (lal, mal)
}

#[test]
fn nginx_logs_are_kept_and_their_samples_reach_the_log_mal_file() {
    let f = fixture(DispatchSettings::for_test());
    let (lal, mal) = install_nginx(&f);
    f.submit(vec![access_log(), error_log()]);
    f.idle();

    let kept = f.logs.logs();
    let rules: Vec<(&str, &str)> = kept.iter().map(|k| (k.rule.as_str(), k.file.as_str())).collect();
    assert_eq!(rules, [("NGINX:nginx-access-log", "lal/nginx"), ("NGINX:nginx-error-log", "lal/nginx")]);
    assert_eq!(kept[0].record.tag("http.status_code"), Some("200"));
    assert_eq!(kept[1].record.tag("level"), Some("error"));
    assert_eq!(kept[1].record.timestamp_ms, 1_609_459_200_000, "the extracted time, in UTC");
    assert!(kept.iter().all(|k| k.received_ms == T0));

    let mut values: Vec<(String, String, Value)> =
        f.metrics.0.lock().expect("lock").iter().map(|v| (v.metric.clone(), v.entity.service_name.clone(), v.value.clone())).collect();
    values.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        values,
        [
            // The instance entity takes `service_instance_id`; `level` stays a label.
            ("meter_nginx_instance_error_log_count".to_string(), "nginx::frontend".to_string(), Value::Labeled(vec![("level=error".into(), 1)])),
            (
                "meter_nginx_service_error_log_count".to_string(),
                "nginx::frontend".to_string(),
                Value::Labeled(vec![("level=error,service_instance_id=nginx-0".into(), 1)])
            ),
        ]
    );
    assert_eq!(f.dispatcher.evaluation(&mal).samples_in, 1, "the emitted sample went through the MAL path");

    let view = f.view(&lal);
    assert_eq!((view.logs_in, view.kept, view.no_sink, view.samples_out, view.evaluations), (2, 2, 2, 1, 1), "{view:?}");
    assert_eq!((view.errors, view.logs_dropped, view.last_error.as_str()), (0, 0, ""));
    assert!(view.last_evaluation_time.is_some());
    assert_eq!((f.by_rule("lal/nginx", "kept"), f.by_rule("lal/nginx", "no_sink")), (2, 2));
}

/// A rule whose two sinks both persist keeps two logs, each named after the rule and file.
#[test]
fn every_copy_a_rule_keeps_carries_its_rule_and_file() {
    let f = fixture(DispatchSettings::for_test());
    let key = lal_key("twice");
    let dsl = "filter {\n  extractor { tag copy: 'first' }\n  sink {}\n  extractor { tag copy: 'second' }\n  sink {}\n}";
    install(&f.runtime, &key, DslKind::Lal, &lal_file(&[("both", "GENERAL", dsl)]));
    f.submit(general(2));
    f.idle();
    let kept = f.logs.logs();
    // Tags append (keys may repeat): the second copy holds both `copy` tags.
    let copies = |k: &KeptLog| k.record.tags.iter().filter(|(key, _)| key == "copy").map(|(_, v)| v.as_str()).collect::<Vec<_>>().join("+");
    let names: Vec<(&str, &str, String)> = kept.iter().map(|k| (k.rule.as_str(), k.file.as_str(), copies(k))).collect();
    let expected = |copy: &str| ("GENERAL:both", "lal/twice", copy.to_string());
    assert_eq!(names, [expected("first"), expected("first+second"), expected("first"), expected("first+second")]);
}

#[test]
fn a_suspended_file_drops_its_logs_and_counts_them() {
    let f = fixture(DispatchSettings::for_test());
    let lal = lal_key("nginx");
    install(&f.runtime, &lal, DslKind::Lal, &shipped("lal/nginx.yaml"));
    assert_eq!(f.runtime.suspend(&lal, Origin::Peer, true), SuspendResult::Suspended);
    let mut batch = vec![access_log(), error_log(), access_log()];
    batch.push(log("GENERAL", "not nginx's", &[]));
    f.submit(batch);
    f.idle();
    assert!(f.logs.logs().is_empty(), "nothing evaluated while suspended");
    assert_eq!(f.by_rule("lal/nginx", "suspended"), 3, "the GENERAL log was never nginx's");
    let view = f.view(&lal);
    assert_eq!((view.logs_dropped, view.logs_in, view.evaluations), (3, 0, 0));
    f.runtime.resume(&lal, Origin::Peer);
    f.submit(vec![access_log()]);
    f.idle();
    assert_eq!(f.logs.logs().len(), 1, "evaluated again once resumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structural_swap_drains_and_no_log_is_evaluated_by_the_old_version_after_it() {
    let f = fixture(DispatchSettings::for_test());
    let key = lal_key("default");
    install(&f.runtime, &key, DslKind::Lal, &versioned("v1"));
    f.logs.hold();
    f.submit(general(2));
    let logs = f.logs.clone();
    tokio::task::spawn_blocking(move || logs.wait_blocked()).await.expect("blocked");
    // The workflow's structural path: suspend, drain, swap, resume.
    assert_eq!(f.runtime.suspend(&key, Origin::SelfOrigin, true), SuspendResult::Suspended);
    assert_eq!(f.runtime.in_flight(&key), 1, "the blocked batch holds the gate");
    assert!(!f.runtime.wait_drained(&key, Instant::now() + Duration::from_millis(100)).await, "not drained while its logs are unwritten");
    f.submit(general(3));
    let runtime = f.runtime.clone();
    let drain = tokio::spawn(async move { runtime.wait_drained(&lal_key("default"), Instant::now() + WAIT).await });
    f.logs.release();
    assert!(drain.await.expect("drain"), "drained once the open batch was written");
    f.logs.drained.store(true, std::sync::atomic::Ordering::SeqCst);
    // The batch submitted during the pause meets the closed gate before the swap.
    tokio::task::block_in_place(|| wait_until("the paused batch dropped", || f.view(&key).logs_dropped == 3));
    install(&f.runtime, &key, DslKind::Lal, &versioned("v2"));
    f.runtime.resume(&key, Origin::SelfOrigin);
    f.submit(general(1));
    let idle = {
        let d = &f.dispatcher;
        tokio::task::block_in_place(|| d.wait_idle(WAIT))
    };
    assert!(idle);
    let written = f.logs.written.lock().expect("lock").clone();
    let stamped: Vec<(String, bool)> =
        written.iter().map(|(log, after)| (log.record.tag("version").unwrap_or_default().to_string(), *after)).collect();
    assert_eq!(stamped, [("v1".into(), false), ("v1".into(), false), ("v2".into(), true)], "v1 only before the drain returned");
}

#[test]
fn a_backlog_is_worked_as_one_group_with_one_write_and_per_batch_counters() {
    let settings = DispatchSettings { log_workers: 1, ..DispatchSettings::for_test() };
    let f = fixture(settings);
    let (lal, mal) = install_nginx(&f);
    f.logs.hold();
    f.submit(vec![access_log(), error_log()]);
    f.logs.wait_blocked();
    // A backlog of three batches, received at different times, forms behind the held write.
    let batch = |received_ms| LogBatch { protocol: LogProtocol::SkyWalking, logs: vec![access_log(), error_log()], received_ms };
    f.dispatcher.submit_logs(vec![batch(T0 + 1), batch(T0 + 2), batch(T0 + 3)]).expect("accepted");
    f.logs.release();
    f.idle();

    let calls = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(calls(&f.logs.calls), 2, "the first batch, then the backlog in one write");
    let received: Vec<i64> = f.logs.logs().iter().map(|k| k.received_ms).collect();
    assert_eq!(received, [T0, T0, T0 + 1, T0 + 1, T0 + 2, T0 + 2, T0 + 3, T0 + 3], "each log keeps its batch's receipt time");
    assert_eq!(calls(&f.metrics.1), 2, "one metric write per log-MAL file per group");
    assert_eq!(f.metrics.0.lock().expect("lock").len(), 8, "four samples, each evaluated on its own into two values");
    assert_eq!(f.dispatcher.evaluation(&mal).samples_in, 4);
    let view = f.view(&lal);
    assert_eq!((view.logs_in, view.kept, view.samples_out, view.evaluations), (8, 8, 4, 4), "evaluations count batches: {view:?}");
}

#[test]
fn a_full_log_queue_refuses_whole_submissions_and_leaves_the_count_to_the_receiver() {
    let settings = DispatchSettings { log_queue_batches: 2, log_workers: 1, ..DispatchSettings::for_test() };
    let f = fixture(settings);
    install(&f.runtime, &lal_key("default"), DslKind::Lal, &versioned("v1"));
    f.logs.hold();
    f.submit(general(1));
    f.logs.wait_blocked();
    let batch = |n| LogBatch { protocol: LogProtocol::Otlp, logs: general(n), received_ms: T0 };
    f.dispatcher.submit_logs(vec![batch(1), batch(1)]).expect("fills the queue");
    assert_eq!(f.dispatcher.queued_logs(), 2);
    let refused = f.dispatcher.submit_logs(vec![batch(3), batch(2)]);
    assert_eq!(refused, Err(SubmitError::QueueFull { retry_after: RETRY_AFTER }));
    // The receiver counts the refusal once (`ingest`'s tests); the queue does not count it again.
    let full = labels([("protocol", "otlp"), ("reason", "queue_full")]);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.logs_rejected, &full), 0);
    f.logs.release();
    f.idle();
    assert_eq!(f.logs.logs().len(), 3, "the accepted batches were all evaluated");
    f.dispatcher.stop();
    assert_eq!(f.dispatcher.submit_logs(vec![batch(1)]), Err(SubmitError::Stopped));
}

#[test]
fn runtime_errors_are_counted_per_file_and_kept_as_the_last_error() {
    let f = fixture(DispatchSettings::for_test());
    let failing = lal_key("failing");
    let healthy = lal_key("healthy");
    let bad = lal_file(&[("bad", "GENERAL", "filter {\n  extractor { timestamp tag('when') }\n  sink {}\n}")]);
    install(&f.runtime, &failing, DslKind::Lal, &bad);
    install(&f.runtime, &healthy, DslKind::Lal, &lal_file(&[("fine", "GENERAL", "filter {\n  sink {}\n}")]));
    let mut logs = general(2);
    logs[0].tags.push(("when".into(), "yesterday".into()));
    logs[1].tags.push(("when".into(), "1795598820000".into()));
    f.submit(logs);
    f.idle();
    let view = f.view(&failing);
    assert_eq!((view.errors, view.kept, view.logs_in), (1, 1, 2), "{view:?}");
    assert!(view.last_error.contains("GENERAL:bad") && view.last_error.contains("yesterday"), "{}", view.last_error);
    assert!(view.last_error_time.is_some());
    assert_eq!(f.by_rule("lal/failing", "failed"), 1);
    assert_eq!(SelfMetrics::counter_value(&f.telemetry.evaluation_errors, &labels([("rule", "lal/failing")])), 1);
    assert_eq!(f.view(&healthy).kept, 2, "the other file is unaffected");
    assert_eq!(f.view(&healthy).errors, 0);
}

#[test]
fn a_writer_error_is_counted_against_the_file_not_raised() {
    let f = fixture(DispatchSettings::for_test());
    let key = lal_key("default");
    install(&f.runtime, &key, DslKind::Lal, &versioned("v1"));
    f.logs.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    f.submit(general(2));
    f.idle();
    let view = f.view(&key);
    assert_eq!((view.kept, view.kept_not_written), (2, 2));
}

#[test]
fn sampler_state_lives_as_long_as_the_content_version() {
    let f = fixture(DispatchSettings { log_workers: 1, ..DispatchSettings::for_test() });
    let key = lal_key("sampled");
    let limited = |tag: &str| {
        lal_file(&[("one", "GENERAL", &format!("filter {{\n  extractor {{ tag v: '{tag}' }}\n  sink {{ sampler {{ rateLimit('all') {{ rpm 1 }} }} }}\n}}"))])
    };
    install(&f.runtime, &key, DslKind::Lal, &limited("a"));
    f.submit(general(2));
    f.idle();
    assert_eq!((f.view(&key).kept, f.view(&key).sampled), (1, 1), "rpm 1");
    // Suspend and resume keep the counters; the same content installed again too.
    f.runtime.suspend(&key, Origin::SelfOrigin, true);
    f.runtime.resume(&key, Origin::SelfOrigin);
    install(&f.runtime, &key, DslKind::Lal, &limited("a"));
    f.submit(general(1));
    f.idle();
    assert_eq!(f.view(&key).kept, 1, "the window's budget is still spent");
    // A new content version starts fresh.
    install(&f.runtime, &key, DslKind::Lal, &limited("b"));
    f.submit(general(1));
    f.idle();
    assert_eq!(f.view(&key).kept, 2);
    assert_eq!(f.logs.tags("v"), ["a", "b"]);
    assert_eq!(f.by_rule("lal/sampled", "sampled"), 2);
}

#[test]
fn a_suspended_auto_file_withholds_the_general_fallback_it_might_have_preempted() {
    let f = fixture(DispatchSettings::for_test());
    let auto = lal_key("auto");
    let fallback = lal_key("default");
    let claim = "filter {\n  if (tag('kind') != 'mine') { abort {} }\n  extractor { layer 'GENERAL' }\n  sink {}\n}";
    install(&f.runtime, &auto, DslKind::Lal, &lal_file(&[("claim", "auto", claim)]));
    install(&f.runtime, &fallback, DslKind::Lal, &versioned("fallback"));
    let unlayered = |kind: &str| LogData { layer: String::new(), ..log("", "x", &[("kind", kind)]) };
    f.submit(vec![unlayered("mine"), unlayered("other")]);
    f.idle();
    let files: Vec<String> = f.logs.logs().iter().map(|k| k.file.clone()).collect();
    assert_eq!(files, ["lal/auto", "lal/default"], "claimed by auto; the unclaimed one fell back to GENERAL");
    f.runtime.suspend(&auto, Origin::Peer, true);
    f.submit(vec![unlayered("mine"), unlayered("other")]);
    f.idle();
    assert_eq!(f.logs.logs().len(), 2, "no fallback while the auto file that might claim is paused");
    assert_eq!(f.view(&auto).logs_dropped, 2);
    f.runtime.resume(&auto, Origin::Peer);
    let evaluations = f.view(&auto).evaluations;
    f.submit(vec![log("GENERAL", "layered", &[])]);
    f.idle();
    assert_eq!(f.logs.logs().len(), 3, "a layered log is not the auto file's");
    assert_eq!(f.view(&auto).logs_dropped, 2);
    assert_eq!(f.view(&auto).evaluations, evaluations, "a batch none of the file's rules ran on is not its evaluation");
}

#[test]
fn an_unloaded_file_is_no_longer_evaluated_and_the_list_row_shows_logs() {
    let f = fixture(DispatchSettings::for_test());
    let key = lal_key("default");
    install(&f.runtime, &key, DslKind::Lal, &versioned("v1"));
    f.submit(general(1));
    f.idle();
    let row = serde_json::to_value(f.dispatcher.evaluation_of(&key)).expect("json");
    assert_eq!(row["logsIn"], 1, "{row}");
    assert_eq!(row["kept"], 1, "{row}");
    assert!(row.get("samplesIn").is_none(), "a LAL row has no MAL counters: {row}");
    f.runtime.unload(&key);
    f.submit(general(1));
    f.idle();
    assert_eq!(f.logs.logs().len(), 1, "nothing evaluated after the unload");
    assert!(evaluates(RuleCatalog::Lal));
}
