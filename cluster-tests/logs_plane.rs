//! The LAL data plane end to end on a real `hotrule serve` process (issue 14):
//!
//! - the shipped `lal/nginx.yaml` and `log-mal-rules/nginx.yaml` pushed through the admin API;
//! - nginx error logs sent over both HTTP log APIs: SkyWalking's native `POST /v3/logs` and
//!   OTLP/HTTP `POST /v1/logs` (JSON);
//! - the logs the LAL sink keeps read back from `GET /query/logs`, with what the extractor added;
//! - the samples the LAL `metrics {}` block emits turned into `meter_nginx_*` values by the
//!   log-MAL file, read back from `GET /query/metrics`;
//! - hotrule's own `/metrics` counting the logs by protocol and by rule outcome;
//! - while logs flow: a structural change of `lal/nginx` shows the data boundary (no log sent
//!   after the 200 is evaluated by the old rule, and none of them is lost);
//! - slow-SQL logs through the shipped `lal/mysql-slowsql.yaml` as the MySQL dashboard's
//!   `top_n(top_n_database_statement, …)` records over SkyWalking's GraphQL protocol.
//!
//! A `hotrule` built without RocksDB cannot run `serve`: the test prints `SKIP: …` and passes.

mod components;
mod harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use components::hotrule_node::HotruleNode;
use components::prom::exposition_value;
use components::{require_node, unix_now_ms};
use harness::wait_until;
use hotrule::api::client::with_query;

/// Long enough for a start and a few evaluations on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(60);
const SERVICE: &str = "nginx-e2e";
const LOG_MAL_METRIC: &str = "meter_nginx_service_error_log_count";
/// The sequence numbers of the logs sent while the rule changes start here.
const FLOW_SEQ: u64 = 100_000;

fn corpus(relative: &str) -> String {
    let path = harness::corpus_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `lal/nginx.yaml` with the error rule also tagging each log `version: v2`.
fn nginx_lal_v2(v1: &str) -> String {
    let anchor = "            tag level: parsed.level\n";
    assert!(v1.contains(anchor), "the shipped nginx.yaml changed: no `tag level` line");
    v1.replacen(anchor, &format!("{anchor}            tag version: 'v2'\n"), 1)
}

/// `yyyy/MM/dd HH:mm:ss` in UTC, as nginx writes its error log and the LAL rule parses it.
fn nginx_time(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let seconds = ms.rem_euclid(86_400_000) / 1000;
    let (year, month, day) = hotrule_mal_engine::civil_from_days(days);
    format!("{year:04}/{month:02}/{day:02} {:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

fn error_line(seq: u64, ms: i64) -> String {
    format!("{} [error] 7#7: *{seq} connect() failed (111: Connection refused) seq={seq}", nginx_time(ms))
}

/// One element of a native `/v3/logs` array.
fn native_log(seq: u64, ms: i64) -> serde_json::Value {
    serde_json::json!({
        "service": SERVICE,
        "serviceInstance": "native-1",
        "layer": "NGINX",
        "timestamp": ms,
        "tags": {"data": [{"key": "LOG_KIND", "value": "NGINX_ERROR_LOG"}]},
        "body": {"text": {"text": error_line(seq, ms)}},
    })
}

/// An OTLP/JSON `ExportLogsServiceRequest` with one record per sequence number.
fn otlp_logs(seqs: std::ops::Range<u64>, ms: i64) -> serde_json::Value {
    let records: Vec<serde_json::Value> = seqs
        .map(|seq| {
            serde_json::json!({
                "timeUnixNano": (ms * 1_000_000).to_string(),
                "body": {"stringValue": error_line(seq, ms)},
                "attributes": [{"key": "LOG_KIND", "value": {"stringValue": "NGINX_ERROR_LOG"}}],
            })
        })
        .collect();
    let attribute = |key: &str, value: &str| serde_json::json!({"key": key, "value": {"stringValue": value}});
    serde_json::json!({"resourceLogs": [{
        "resource": {"attributes": [
            attribute("service.name", SERVICE),
            attribute("service.instance.id", "otlp-1"),
            attribute("service.layer", "NGINX"),
        ]},
        "scopeLogs": [{"logRecords": records}],
    }]})
}

/// `POST url` with a JSON body and its media type; the status and the body text.
async fn post_json(url: &str, body: &serde_json::Value) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<bytes::Bytes>>();
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .expect("request");
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok::<_, String>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    match tokio::time::timeout(Duration::from_secs(10), exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => (0, e),
        Err(_) => (0, "timed out".into()),
    }
}

/// The kept logs of the service in `[start, end]`, oldest first.
async fn stored_logs(node: &HotruleNode, start_ms: i64, end_ms: i64) -> Vec<serde_json::Value> {
    let (start, end) = (start_ms.to_string(), end_ms.to_string());
    let path = with_query(
        "/query/logs",
        &[
            ("service", SERVICE),
            ("tag", "LOG_KIND:NGINX_ERROR_LOG"),
            ("start", &start),
            ("end", &end),
            ("order", "oldest"),
            ("limit", "1000"),
        ],
    );
    let reply = node.client.get(&path).await.expect("GET /query/logs");
    assert!(reply.status.is_success(), "GET {path}: {} {}", reply.status, reply.text());
    let body = reply.json().expect("a JSON answer");
    assert!(body["next"].is_null(), "more than one page of logs: {body}");
    body["logs"].as_array().cloned().unwrap_or_default()
}

/// A point's value: a number, or the sum of a labeled value's numbers.
fn labeled_sum(value: &serde_json::Value) -> f64 {
    match value {
        serde_json::Value::Object(groups) => groups.values().filter_map(serde_json::Value::as_f64).sum(),
        other => other.as_f64().unwrap_or(0.0),
    }
}

fn tag<'a>(log: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    log["tags"].as_array()?.iter().find(|t| t["key"] == key).and_then(|t| t["value"].as_str())
}

/// The `seq=` a log's content carries.
fn seq_of(log: &serde_json::Value) -> Option<u64> {
    log["content"].as_str()?.rsplit("seq=").next()?.trim().parse().ok()
}

async fn push_rule(node: &HotruleNode, catalog: &str, name: &str, content: &str) -> String {
    let (code, json, text) =
        node.post("/runtime/rule/addOrUpdate", &[("catalog", catalog), ("name", name)], content).await;
    assert_eq!(code, 200, "push {catalog}/{name}: {text}");
    json["applyStatus"].as_str().unwrap_or_default().to_string()
}

/// One log every few milliseconds over `/v3/logs` until told to stop (bounded in count and
/// time); each entry: the sequence number, when its request was sent, and the answer's status.
async fn flow(url: String, stop: Arc<AtomicBool>) -> Vec<(u64, Instant, u16)> {
    let mut sent = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for seq in FLOW_SEQ..FLOW_SEQ + 3000 {
        if stop.load(Ordering::SeqCst) || Instant::now() > deadline {
            break;
        }
        let at = Instant::now();
        let (status, _) = post_json(&url, &serde_json::json!([native_log(seq, unix_now_ms())])).await;
        sent.push((seq, at, status));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_over_both_apis_become_stored_logs_and_metrics_and_a_structural_change_is_the_boundary() {
    let test = "logs_over_both_apis_become_stored_logs_and_metrics_and_a_structural_change_is_the_boundary";
    if !require_node(test) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = HotruleNode::start(&dir.path().join("node"), &dir.path().join("rules"), "", &[]).await;
    let lal = corpus("lal/nginx.yaml");
    assert_eq!(push_rule(&node, "log-mal-rules", "nginx", &corpus("log-mal-rules/nginx.yaml")).await, "structural_applied");
    assert_eq!(push_rule(&node, "lal", "nginx", &lal).await, "structural_applied");

    eprintln!("[logs] nginx error logs over /v3/logs (native) and /v1/logs (OTLP JSON)");
    let started_ms = unix_now_ms();
    let native: Vec<serde_json::Value> = (0..30).map(|seq| native_log(seq, started_ms)).collect();
    let (status, body) = post_json(&format!("{}/v3/logs", node.data_url()), &serde_json::Value::Array(native)).await;
    assert_eq!(status, 200, "/v3/logs: {body}");
    let (status, body) = post_json(&format!("{}/v1/logs", node.data_url()), &otlp_logs(30..50, started_ms)).await;
    assert_eq!(status, 200, "/v1/logs: {body}");
    assert!(!body.contains("rejectedLogRecords\":\"") && !body.contains("rejectedLogRecords\":1"), "/v1/logs refused records: {body}");

    // The extracted timestamp has second precision: read a window around the send.
    let (from, to) = (started_ms - 120_000, started_ms + 120_000);
    wait_until(WAIT, "the 50 logs are stored", || async { stored_logs(&node, from, to).await.len() == 50 }).await;
    let logs = stored_logs(&node, from, to).await;
    let mut seqs: Vec<u64> = logs.iter().filter_map(seq_of).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..50).collect::<Vec<_>>(), "every log once");
    for log in &logs {
        assert_eq!(tag(log, "level"), Some("error"), "the extractor's tag: {log}");
        assert_eq!(log["layer"], "NGINX", "{log}");
        assert_eq!(log["file"], "lal/nginx", "{log}");
        let expected_instance = if seq_of(log).is_some_and(|s| s < 30) { "native-1" } else { "otlp-1" };
        assert_eq!(log["instance"], expected_instance, "{log}");
        // `timestamp parsed.time`: the time written in the line, to the second.
        let ts = log["timestamp"].as_i64().expect("timestamp");
        assert_eq!(ts, started_ms / 1000 * 1000, "{log}");
    }

    eprintln!("[logs] the LAL metrics {{}} samples reached log-mal-rules/nginx");
    // The rule sums by level and instance: each point is a labeled value, `{"level=…,…": n}`.
    wait_until(WAIT, "meter_nginx_service_error_log_count sums to 50", || async {
        node.query_points(LOG_MAL_METRIC, SERVICE, from, to)
            .await
            .is_some_and(|points| points.iter().map(|p| labeled_sum(&p.raw)).sum::<f64>() == 50.0)
    })
    .await;
    let points = node.query_points(LOG_MAL_METRIC, SERVICE, from, to).await.expect("points");
    let groups: Vec<&String> = points.iter().filter_map(|p| p.raw.as_object()).flat_map(|o| o.keys()).collect();
    assert!(groups.iter().all(|g| g.contains("error")), "every group is level error: {groups:?}");

    let own = node.own_metrics().await;
    let received = |protocol: &str| exposition_value(&own, "hotrule_logs_received_total", &[("protocol", protocol)]);
    assert_eq!(received("skywalking"), Some(30.0), "{own}");
    assert_eq!(received("otlp"), Some(20.0), "{own}");
    let kept = exposition_value(&own, "hotrule_logs_by_rule_total", &[("rule", "lal/nginx"), ("outcome", "kept")]);
    assert_eq!(kept, Some(50.0), "{own}");

    eprintln!("[logs] a structural change of lal/nginx while logs flow");
    let stop = Arc::new(AtomicBool::new(false));
    let flowing = tokio::spawn(flow(format!("{}/v3/logs", node.data_url()), stop.clone()));
    let flow_from = unix_now_ms() - 2_000;
    wait_until(WAIT, "logs of the flow are stored by the first version", || async {
        stored_logs(&node, flow_from, unix_now_ms() + 60_000).await.iter().filter(|l| seq_of(l).is_some_and(|s| s >= FLOW_SEQ)).count() >= 10
    })
    .await;
    assert_eq!(push_rule(&node, "lal", "nginx", &nginx_lal_v2(&lal)).await, "structural_applied");
    let applied = Instant::now();
    wait_until(WAIT, "logs of the flow are stored by the second version", || async {
        stored_logs(&node, flow_from, unix_now_ms() + 60_000).await.iter().filter(|l| tag(l, "version") == Some("v2")).count() >= 10
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let sent = flowing.await.expect("the flow task");
    let after: Vec<u64> = sent.iter().filter(|(_, at, status)| *at > applied && *status == 200).map(|(seq, _, _)| *seq).collect();
    assert!(after.len() >= 10, "logs were sent after the 200: {}", after.len());

    // Every log accepted after the 200 is evaluated (the dispatcher drains quickly), by the
    // second version only.
    let flow_logs = || async {
        stored_logs(&node, flow_from, unix_now_ms() + 60_000)
            .await
            .into_iter()
            .filter(|l| seq_of(l).is_some_and(|s| s >= FLOW_SEQ))
            .collect::<Vec<_>>()
    };
    wait_until(WAIT, "every log sent after the 200 is stored", || async {
        let stored: Vec<u64> = flow_logs().await.iter().filter_map(seq_of).collect();
        after.iter().all(|seq| stored.contains(seq))
    })
    .await;
    let stored = flow_logs().await;
    let mut old_version = 0;
    for log in &stored {
        let seq = seq_of(log).expect("seq");
        let v2 = tag(log, "version") == Some("v2");
        if after.contains(&seq) {
            assert!(v2, "log {seq} was sent after the 200 but evaluated by the old rule: {log}");
        } else if !v2 {
            old_version += 1;
        }
    }
    assert!(old_version >= 10, "the first version evaluated the flow before the change ({old_version} logs)");
    let mut seen: Vec<u64> = stored.iter().filter_map(seq_of).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), stored.len(), "no log stored twice");
    eprintln!(
        "[logs] flow: {} sent, {} after the 200 (all by v2), {} stored by v1",
        sent.len(),
        after.len(),
        old_version
    );
}

/// `yyyy-MM-dd HHmm` in UTC, a SkyWalking minute Duration bound.
fn minute_text(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let minutes = ms.rem_euclid(86_400_000) / 60_000;
    let (year, month, day) = hotrule_mal_engine::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}{:02}", minutes / 60, minutes % 60)
}

/// The MySQL dashboard's slow-SQL widget (`top_n(top_n_database_statement,10,des)`, a RECORD_LIST)
/// over SkyWalking's GraphQL protocol: the shipped `lal/mysql-slowsql.yaml` turns slow-SQL logs
/// into records, ranked by latency; logs of another kind and of another service are not records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_sql_logs_are_the_mysql_dashboards_top_n_records() {
    let test = "slow_sql_logs_are_the_mysql_dashboards_top_n_records";
    if !require_node(test) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = HotruleNode::start(&dir.path().join("node"), &dir.path().join("rules"), "", &[]).await;
    assert_eq!(push_rule(&node, "lal", "mysql-slowsql", &corpus("lal/mysql-slowsql.yaml")).await, "structural_applied");

    let now = unix_now_ms();
    let slow = |service: &str, i: i64, kind: &str| {
        let body = serde_json::json!({
            "time": (now - i * 1000).to_string(), "id": format!("q{i}"), "service": service, "layer": "MYSQL",
            "statement": format!("SELECT * FROM t{i} WHERE id = ?"), "query_time": 100 * i,
        });
        serde_json::json!({
            "service": service, "layer": "MYSQL", "timestamp": now - i * 1000, "traceContext": {"traceId": format!("trace-{i}")},
            "tags": {"data": [{"key": "LOG_KIND", "value": kind}]},
            "body": {"json": {"json": body.to_string()}},
        })
    };
    // Twelve slow statements of `mysql-1` (latency 100·i ms), one of another service, and a log
    // of another kind (no slowSql fields, so not a record).
    let mut logs: Vec<serde_json::Value> = (1..=12).map(|i| slow("mysql-1", i, "SLOW_SQL")).collect();
    logs.push(slow("mysql-2", 50, "SLOW_SQL"));
    logs.push(slow("mysql-1", 40, "GENERAL"));
    let (status, body) = post_json(&format!("{}/v3/logs", node.data_url()), &serde_json::Value::Array(logs)).await;
    assert_eq!(status, 200, "/v3/logs: {body}");

    let query = "query ($e: String!, $entity: Entity!, $d: Duration!) { r: execExpression(expression: $e, entity: $entity, duration: $d) { type error results { values { id value traceID } } } }";
    let variables = serde_json::json!({
        "e": "top_n(top_n_database_statement,10,des)",
        "entity": {"serviceName": "mysql-1", "normal": true},
        "d": {"start": minute_text(now - 3_600_000), "end": minute_text(now + 60_000), "step": "MINUTE"},
    });
    let body = serde_json::json!({"query": query, "variables": variables}).to_string();
    let answer = std::cell::RefCell::new(serde_json::Value::Null);
    wait_until(WAIT, "the ten slowest statements are the widget's records", || async {
        let (code, json, _) = node.post("/graphql", &[], &body).await;
        let done = code == 200 && json["data"]["r"]["results"][0]["values"].as_array().is_some_and(|v| v.len() == 10);
        *answer.borrow_mut() = json;
        done
    })
    .await;
    let answer = answer.into_inner();
    let result = &answer["data"]["r"];
    assert_eq!(result["type"], "RECORD_LIST", "{answer}");
    assert_eq!(result["error"], serde_json::Value::Null, "{answer}");
    let values = result["results"][0]["values"].as_array().expect("values");
    eprintln!("[slow sql] top_n records: {}", serde_json::Value::Array(values.clone()));
    let expected: Vec<serde_json::Value> = (3..=12)
        .rev()
        .map(|i| serde_json::json!({"id": format!("SELECT * FROM t{i} WHERE id = ?"), "value": (100 * i).to_string(), "traceID": format!("trace-{i}")}))
        .collect();
    assert_eq!(values, &expected, "slowest first, mysql-1 only, the GENERAL log left out");
}
