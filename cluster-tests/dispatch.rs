//! Dispatch through a real in-process node and its admin API: the data boundary of a
//! structural apply (the 200 comes after the batch in flight finished; nothing evaluated after
//! it used the old content), inactivate stopping evaluation, and the live evaluation state in
//! `/runtime/rule/list`. Batches are submitted to the node's dispatcher as a receiver would.

mod harness;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{SlowWriter, TestNode, wait_until};
use hotrule::data::seam::{Batch, BatchSink, Catalog, Protocol, Sample};
use hotrule::data::evaluation::EvaluationProbe;
use hotrule::base::ids::{ContentHash, RuleKey};
use hotrule::node::NodeSettings;
use hotrule_mal_engine::{MetricValue, labels};

const WAIT: Duration = Duration::from_secs(10);

const OLD: &str = "metricPrefix: d\nmetricsRules:\n  - name: old_requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";
const NEW: &str = "metricPrefix: d\nmetricsRules:\n  - name: new_requests\n    exp: requests_total.sum(['svc']).service(['svc'], Layer.GENERAL)\n";

/// The content version of every evaluation that wrote, with when it finished.
#[derive(Default)]
struct Versions(Mutex<Vec<(Instant, ContentHash)>>);

impl EvaluationProbe for Versions {
    fn evaluated(&self, _key: &RuleKey, content: &ContentHash, _values: &[MetricValue]) {
        self.0.lock().expect("lock").push((Instant::now(), content.clone()));
    }
}

fn batch(service: &str) -> Vec<Batch> {
    let sample = Sample::new("requests_total", labels([("svc", service)]), 7.0, 1_795_598_820_000);
    vec![Batch { protocol: Protocol::Otlp, catalog: Catalog::Otel, samples: vec![sample], received_ms: 0 }]
}

async fn idle(node: &TestNode) {
    let dispatcher = node.node.state.dispatcher.clone();
    let idle = tokio::task::spawn_blocking(move || dispatcher.wait_idle(WAIT)).await.expect("wait");
    assert!(idle, "dispatch went idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structural_apply_answers_after_the_batch_in_flight_and_nothing_later_uses_the_old_rule() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let dispatcher = node.node.state.dispatcher.clone();
    let writer = Arc::new(SlowWriter::default());
    let versions = Arc::new(Versions::default());
    dispatcher.add_writer(writer.clone());
    dispatcher.set_probe(Some(versions.clone()));
    let (code, json) = node.push("otel-rules", "boundary", OLD, &[]).await;
    assert_eq!(code, 200, "{json}");

    // Phase 1: a batch of the old content is in flight, blocked in the writer.
    writer.set_held(true);
    dispatcher.submit(batch("a")).expect("accepted");
    let blocked = writer.clone();
    tokio::task::spawn_blocking(move || blocked.wait_blocked()).await.expect("blocked");

    // Phase 2: the structural apply suspends, then waits for that batch.
    let apply = {
        let client = node.client.clone();
        tokio::spawn(async move {
            let url = hotrule::api::client::with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "boundary")]);
            let reply = client.post(&url, NEW.as_bytes().to_vec()).await.expect("post");
            (reply.status.as_u16(), reply.json().unwrap_or_default(), Instant::now())
        })
    };
    wait_until(WAIT, "the file is suspended by the apply (or the apply answered)", || async {
        apply.is_finished() || node.row("otel-rules", "boundary").await.is_some_and(|row| row["localState"] == "SUSPENDED")
    })
    .await;
    assert!(!apply.is_finished(), "the apply answered while a batch of the old content was in flight");
    let mut apply = apply;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut apply).await.is_err(),
        "the apply must not answer while a batch of the old content is in flight"
    );
    // A batch arriving now reaches the gate either while suspended (dropped) or after the
    // resume (the new content); never the old content.
    dispatcher.submit(batch("paused")).expect("accepted");

    // Phase 3: the batch finishes; only then the 200.
    writer.set_held(false);
    let (code, json, answered) = apply.await.expect("apply task");
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    let old_writes: Vec<Instant> = writer.written().iter().filter(|(_, m)| m == "d_old_requests").map(|(at, _)| *at).collect();
    assert_eq!(old_writes.len(), 1, "the in-flight batch was written: {:?}", writer.written());
    assert!(old_writes[0] <= answered, "the old content's values were written before the 200");

    // Phase 4: everything after the 200 runs the new content.
    for service in ["b", "c", "d"] {
        dispatcher.submit(batch(service)).expect("accepted");
    }
    idle(&node).await;
    let old_hash = ContentHash::of(OLD.as_bytes());
    let new_hash = ContentHash::of(NEW.as_bytes());
    let after: Vec<ContentHash> =
        versions.0.lock().expect("lock").iter().filter(|(at, _)| *at > answered).map(|(_, hash)| hash.clone()).collect();
    assert!(after.len() >= 3 && after.iter().all(|hash| *hash == new_hash), "no evaluation after the 200 used the old content: {after:?}");
    let old_evaluations = versions.0.lock().expect("lock").iter().filter(|(_, hash)| *hash == old_hash).count();
    assert_eq!(old_evaluations, 1, "the batch in flight, and only it");
    let row = node.row("otel-rules", "boundary").await.expect("row");
    let dropped = row["evaluation"]["samplesDropped"].as_u64().expect("dropped");
    let paused_evaluated = after.len() - 3;
    assert_eq!(dropped as usize + paused_evaluated, 1, "the paused batch was dropped or evaluated by the new content: {row}");
    node.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactivate_stops_evaluation_and_the_list_shows_the_live_state() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let dispatcher = node.node.state.dispatcher.clone();
    let writer = Arc::new(SlowWriter::default());
    dispatcher.add_writer(writer.clone());
    let (code, json) = node.push("otel-rules", "live", OLD, &[]).await;
    assert_eq!(code, 200, "{json}");
    dispatcher.submit(batch("a")).expect("accepted");
    dispatcher.submit(batch("b")).expect("accepted");
    idle(&node).await;
    let row = node.row("otel-rules", "live").await.expect("row");
    let evaluation = &row["evaluation"];
    assert_eq!((evaluation["samplesIn"].as_u64(), evaluation["valuesOut"].as_u64()), (Some(2), Some(2)), "{row}");
    assert_eq!(evaluation["evaluations"], 2, "{row}");
    assert_eq!(evaluation["lastError"], "", "{row}");
    assert!(evaluation["lastEvaluationTime"].is_u64(), "{row}");

    let (code, json) = node.post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "live")]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("inactivated")), "{json}");
    dispatcher.submit(batch("c")).expect("accepted");
    idle(&node).await;
    assert_eq!(writer.written().len(), 2, "nothing evaluated after the inactivate");
    let row = node.row("otel-rules", "live").await.expect("row");
    assert_eq!(row["evaluation"]["samplesIn"], 2, "{row}");
    node.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_past_its_bound_fails_the_apply_and_changes_nothing() {
    let settings = NodeSettings {
        dispatch: hotrule::data::evaluation::DispatchSettings {
            drain_timeout: Duration::from_millis(200),
            ..hotrule::data::evaluation::DispatchSettings::for_test()
        },
        ..NodeSettings::for_test()
    };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let dispatcher = node.node.state.dispatcher.clone();
    let writer = Arc::new(SlowWriter::default());
    dispatcher.add_writer(writer.clone());
    let (code, json) = node.push("otel-rules", "stuck", OLD, &[]).await;
    assert_eq!(code, 200, "{json}");
    writer.set_held(true);
    dispatcher.submit(batch("a")).expect("accepted");
    let blocked = writer.clone();
    tokio::task::spawn_blocking(move || blocked.wait_blocked()).await.expect("blocked");

    let (code, json) = node.push("otel-rules", "stuck", NEW, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (500, Some("apply_failed")), "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.contains("dispatch.drain_timeout")), "{json}");
    let row = node.row("otel-rules", "stuck").await.expect("row");
    assert_eq!(row["localState"], "RUNNING", "resumed: {row}");
    assert_eq!(row["contentHash"], ContentHash::of(OLD.as_bytes()).as_str(), "nothing persisted: {row}");

    writer.set_held(false);
    idle(&node).await;
    let (code, json) = node.push("otel-rules", "stuck", NEW, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "a retry passes: {json}");
    node.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_exporter_scrape_runs_through_the_bundled_vm_rules() {
    let settings = NodeSettings { rules_dir: Some(harness::corpus_dir()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let dispatcher = node.node.state.dispatcher.clone();
    let writer = Arc::new(SlowWriter::default());
    dispatcher.add_writer(writer.clone());
    let text = include_str!("../src/engines/mal-engine/tests/data/node-exporter/scrape1.prom");
    let parsed = hotrule_mal_engine::exposition::parse(text, 1_795_598_820_000, usize::MAX).expect("fixture parses");
    let samples: Vec<Sample> = parsed
        .samples
        .into_iter()
        .map(|s| {
            let mut labels = s.labels.as_ref().clone();
            labels.insert("job_name".into(), "vm-monitoring".into());
            labels.insert("node_identifier_host_name".into(), "host-1".into());
            Sample::new(s.name, Arc::new(labels), s.value, s.timestamp_ms)
        })
        .collect();
    let count = samples.len();
    dispatcher
        .submit(vec![Batch { protocol: Protocol::Scrape, catalog: Catalog::Otel, samples, received_ms: 0 }])
        .expect("accepted");
    idle(&node).await;
    let row = node.row("otel-rules", "vm").await.expect("vm row");
    let evaluation = &row["evaluation"];
    assert!(evaluation["samplesIn"].as_u64().is_some_and(|n| n > 20 && n < count as u64), "{row}");
    assert!(evaluation["valuesOut"].as_u64().is_some_and(|n| n > 0), "{row}");
    assert_eq!((evaluation["errors"].as_u64(), evaluation["valuesRejected"].as_u64()), (Some(0), Some(0)), "{row}");
    assert!(writer.written().iter().all(|(_, metric)| metric.starts_with("meter_vm_")), "only vm.yaml reads node_exporter names");
    node.node.shutdown().await;
}

// ---- LAL: the same boundary for log batches (the node's dispatcher as the log receivers' sink).

/// A GENERAL rule (`lal/<file>`) that keeps every log, stamped with `version`.
fn lal_content(version: &str) -> String {
    format!("rules:\n  - name: boundary\n    layer: GENERAL\n    dsl: |\n      filter {{\n        extractor {{ tag version: '{version}' }}\n        sink {{}}\n      }}\n")
}

/// A log writer that records `(when, file, version tag)` and can be held shut.
#[derive(Default)]
struct HeldLogs {
    held: Mutex<bool>,
    blocked: Mutex<usize>,
    changed: std::sync::Condvar,
    written: Mutex<Vec<(Instant, String, String)>>,
}

impl HeldLogs {
    fn set_held(&self, held: bool) {
        *self.held.lock().expect("lock") = held;
        self.changed.notify_all();
    }

    fn wait_blocked(&self) {
        let deadline = Instant::now() + WAIT;
        let mut blocked = self.blocked.lock().expect("lock");
        while *blocked == 0 {
            assert!(Instant::now() < deadline, "no log write blocked");
            blocked = self.changed.wait_timeout(blocked, Duration::from_millis(50)).expect("wait").0;
        }
    }

    /// `(when, version)` of the logs `lal/boundary` kept.
    fn boundary(&self) -> Vec<(Instant, String)> {
        let written = self.written.lock().expect("lock");
        written.iter().filter(|(_, file, _)| file == "lal/boundary").map(|(at, _, v)| (*at, v.clone())).collect()
    }
}

impl hotrule::data::logs::LogWriter for HeldLogs {
    fn write(&self, logs: &[hotrule::data::logs::KeptLog]) -> Result<(), hotrule::data::logs::LogStoreError> {
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
        let now = Instant::now();
        let mut written = self.written.lock().expect("lock");
        written.extend(logs.iter().map(|log| (now, log.file.clone(), log.record.tag("version").unwrap_or_default().to_string())));
        Ok(())
    }
}

fn log_batch(n: usize) -> Vec<hotrule::data::seam::LogBatch> {
    let log = hotrule::data::seam::LogData {
        timestamp_ms: 1_795_598_820_000,
        service: "svc".into(),
        layer: "GENERAL".into(),
        body: hotrule_lal_engine::Body::Text("a line".into()),
        ..hotrule::data::seam::LogData::default()
    };
    vec![hotrule::data::seam::LogBatch { protocol: hotrule::data::seam::LogProtocol::SkyWalking, logs: vec![log; n], received_ms: 0 }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structural_lal_apply_answers_after_the_log_batch_in_flight_and_nothing_later_uses_the_old_rule() {
    use hotrule::data::seam::LogSink;
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let dispatcher = node.node.state.dispatcher.clone();
    let logs = Arc::new(HeldLogs::default());
    dispatcher.add_log_writer(logs.clone());
    let (code, json) = node.push("lal", "boundary", &lal_content("old"), &[]).await;
    assert_eq!(code, 200, "{json}");

    // Phase 1: a log batch of the old content is in flight, blocked in the log writer.
    logs.set_held(true);
    dispatcher.submit_logs(log_batch(2)).expect("accepted");
    let blocked = logs.clone();
    tokio::task::spawn_blocking(move || blocked.wait_blocked()).await.expect("blocked");

    // Phase 2: the structural apply suspends, then waits for that batch.
    let apply = {
        let client = node.client.clone();
        let content = lal_content("new");
        tokio::spawn(async move {
            let url = hotrule::api::client::with_query("/runtime/rule/addOrUpdate", &[("catalog", "lal"), ("name", "boundary")]);
            let reply = client.post(&url, content.into_bytes()).await.expect("post");
            (reply.status.as_u16(), reply.json().unwrap_or_default(), Instant::now())
        })
    };
    wait_until(WAIT, "the LAL file is suspended by the apply (or the apply answered)", || async {
        apply.is_finished() || node.row("lal", "boundary").await.is_some_and(|row| row["localState"] == "SUSPENDED")
    })
    .await;
    let mut apply = apply;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut apply).await.is_err(),
        "the apply must not answer while a log batch of the old content is in flight"
    );
    dispatcher.submit_logs(log_batch(1)).expect("accepted");

    // Phase 3: the batch is written; only then the 200.
    logs.set_held(false);
    let (code, json, answered) = apply.await.expect("apply task");
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    let old: Vec<Instant> = logs.boundary().into_iter().filter(|(_, v)| v == "old").map(|(at, _)| at).collect();
    assert_eq!(old.len(), 2, "the in-flight batch was written: {:?}", logs.boundary());
    assert!(old.iter().all(|at| *at <= answered), "the old content's logs were written before the 200");

    // Phase 4: everything after the 200 runs the new content.
    dispatcher.submit_logs(log_batch(3)).expect("accepted");
    idle(&node).await;
    let after: Vec<String> = logs.boundary().into_iter().filter(|(at, _)| *at > answered).map(|(_, v)| v).collect();
    assert!(after.len() >= 3 && after.iter().all(|v| v == "new"), "no log after the 200 used the old content: {after:?}");
    let row = node.row("lal", "boundary").await.expect("row");
    let evaluation = &row["evaluation"];
    let (logs_in, dropped) = (evaluation["logsIn"].as_u64(), evaluation["logsDropped"].as_u64());
    assert_eq!(
        logs_in.zip(dropped).map(|(i, d)| i + d),
        Some(6),
        "2 old + 3 new evaluated, the paused one dropped or evaluated by the new content: {row}"
    );
    assert_eq!(evaluation["kept"].as_u64(), logs_in, "{row}");
    node.node.shutdown().await;
}
