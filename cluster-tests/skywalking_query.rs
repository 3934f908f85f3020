//! SkyWalking's GraphQL query protocol (`POST /graphql`) over real HTTP against in-process nodes
//! reading an in-memory metric store: what booster-ui sends to open the Linux dashboard (the
//! start-up fields, `listServices`, aliased batches of six `execExpression`), errors that stay in
//! one expression, ids, and MQE against the Prometheus API on the same stored values (the
//! oracle). A cluster of three answers the same on every node. No RocksDB needed.

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::api::client::{AdminClient, with_query};
use hotrule::api::query::memory::MemMetrics;
use hotrule::api::query::time::bucket_of;
use hotrule::base::ids::NodeId;
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::compiler::{DataType, Downsampling, ScopeType};
use hotrule::data::metrics::{Entity, Granularity, MetricInfo, MetricReader, Value};
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{NodeSettings, RunningNode};
use hotrule::store::kv::MemKv;
use serde_json::{Value as Json, json};

const MINUTE: i64 = 60_000;
/// The host the Linux metrics belong to, and its service id (`base64(name).1`).
const HOST: &str = "host-1";
const HOST_ID: &str = "aG9zdC0x.1";

/// The start of the minute ten minutes ago: the stored minutes are the ten before now, so the
/// metadata window (the last days) holds them.
fn t0() -> i64 {
    let now = hotrule::base::clock::wall_clock_ms();
    now - now.rem_euclid(MINUTE) - 10 * MINUTE
}

/// `yyyy-MM-dd HHmm` (UTC) of an instant, as booster-ui writes a MINUTE duration.
fn minute_text(ms: i64) -> String {
    let bucket = bucket_of(Granularity::Minute, ms);
    format!("{:04}-{:02}-{:02} {:02}{:02}", bucket / 100_000_000, bucket / 1_000_000 % 100, bucket / 10_000 % 100, bucket / 100 % 100, bucket % 100)
}

fn info(name: &str, data_type: DataType, downsampling: Downsampling) -> MetricInfo {
    MetricInfo { name: name.into(), scope: ScopeType::Service, data_type, downsampling }
}

fn service(name: &str, layer: &str) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = name.into();
    entity.layer = layer.into();
    entity
}

/// The Linux dashboard's metrics for HOST over ten minutes from `t0` (minute i: cpu = 10 + i,
/// memory used = (1000 + i) KiB·1024, load1 = 100·i, filesystem by mountpoint), a second
/// host's cpu, and the stored hour and day values a real store would downsample.
fn linux_store(t0: i64) -> Arc<MemMetrics> {
    let store = Arc::new(MemMetrics::new());
    let host = service(HOST, "OS_LINUX");
    let single = |name: &str, d| info(name, DataType::Single, d);
    for i in 0..10 {
        let bucket = bucket_of(Granularity::Minute, t0 + i * MINUTE);
        store.put(&single("meter_vm_cpu_total_percentage", Downsampling::Avg), &host, Granularity::Minute, bucket, Value::Single(10 + i));
        store.put(&single("meter_vm_memory_used", Downsampling::Avg), &host, Granularity::Minute, bucket, Value::Single((1000 + i) * 1024));
        store.put(&single("meter_vm_cpu_load1", Downsampling::Avg), &host, Granularity::Minute, bucket, Value::Single(100 * i));
        let fs = info("meter_vm_filesystem_percentage", DataType::Labeled, Downsampling::Avg);
        store.put(&fs, &host, Granularity::Minute, bucket, Value::Labeled(vec![("mountpoint=/".into(), 40 + i), ("mountpoint=/boot".into(), 7)]));
        store.put(&single("meter_vm_cpu_total_percentage", Downsampling::Avg), &service("host-2", "OS_LINUX"), Granularity::Minute, bucket, Value::Single(50));
    }
    for granularity in [Granularity::Hour, Granularity::Day] {
        let bucket = bucket_of(granularity, t0);
        store.put(&single("meter_vm_cpu_total_percentage", Downsampling::Avg), &host, granularity, bucket, Value::Single(14));
        store.put(&single("meter_vm_cpu_total_percentage", Downsampling::Avg), &service("host-2", "OS_LINUX"), granularity, bucket, Value::Single(50));
    }
    store
}

fn templates_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ui-templates")
}

fn settings() -> NodeSettings {
    NodeSettings { ui_templates_dir: Some(templates_dir()), ..NodeSettings::for_test() }
}

async fn node_with(reader: Arc<dyn MetricReader>) -> TestNode {
    TestNode::start(NodeBuilder::new(settings()).metric_reader(reader), Arc::new(MemKv::new())).await
}

/// One `POST /graphql`: the HTTP status and the body.
async fn graphql(client: &AdminClient, query: &str, variables: Json) -> (u16, Json) {
    let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
    let reply = client.post("/graphql", body).await.expect("request");
    (reply.status.as_u16(), reply.json().unwrap_or(Json::Null))
}

/// The data of a GraphQL answer that must have no errors.
async fn data(client: &AdminClient, query: &str, variables: Json) -> Json {
    let (status, body) = graphql(client, query, variables).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("errors").is_none(), "{query}: {body}");
    body["data"].clone()
}

/// booster-ui's batch document: six aliased `execExpression` fields (the benchmark's own).
use hotrule::bench::graphql::batch_document;

fn batch_variables(expressions: &[&str], entity: Json, duration: Json) -> Json {
    let mut variables = json!({"entity": entity, "duration": duration});
    for (i, e) in expressions.iter().enumerate() {
        variables[format!("expression{i:02}")] = json!(e);
    }
    variables
}

fn minute_duration(t0: i64) -> Json {
    json!({"start": minute_text(t0), "end": minute_text(t0 + 9 * MINUTE), "step": "MINUTE", "coldStage": false})
}

/// The values of one series of a result, as strings (null: missing).
fn values(result: &Json, series: usize) -> Vec<Option<String>> {
    result["results"][series]["values"].as_array().expect("values").iter().map(|v| v["value"].as_str().map(str::to_string)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn booster_ui_opens_the_linux_dashboard() {
    let t0 = t0();
    let node = node_with(linux_store(t0)).await;
    let client = &node.client;

    eprintln!("[start] what booster-ui asks first");
    let start = data(
        client,
        "query queryMenuItems { getMenuItems { title icon layer activate description documentLink i18nKey subItems { title icon layer activate description documentLink i18nKey } } }",
        Json::Null,
    )
    .await;
    let groups = start["getMenuItems"].as_array().expect("menu");
    let linux = groups.iter().flat_map(|g| g["subItems"].as_array().into_iter().flatten()).find(|i| i["layer"] == "OS_LINUX").expect("Linux item");
    assert_eq!(linux["activate"], true, "OS_LINUX has services: {linux}");
    let windows = groups.iter().flat_map(|g| g["subItems"].as_array().into_iter().flatten()).find(|i| i["layer"] == "OS_WINDOWS").expect("Windows item");
    assert_eq!(windows["activate"], false, "no Windows service");
    let info = data(
        client,
        "query { getTimeInfo { timezone currentTimestamp } version getMetricsTTL { minute hour day coldMinute coldHour coldDay } getRecordsTTL { normal trace zipkinTrace log browserErrorLog coldNormal coldTrace coldZipkinTrace coldLog coldBrowserErrorLog } hasQueryTracesV2Support checkHealth { score details } }",
        Json::Null,
    )
    .await;
    assert_eq!(info["getTimeInfo"]["timezone"], "+0000");
    assert!(info["version"].as_str().is_some_and(|v| v.starts_with("10.")), "{info}");
    assert_eq!(info["getMetricsTTL"]["minute"], 7, "storage.retention.minute is 7d by default: {info}");
    assert_eq!(info["hasQueryTracesV2Support"], false);
    assert_eq!(info["checkHealth"]["score"], 0);

    eprintln!("[start] templates and the service list");
    let templates = data(client, "query { getAllTemplates { id configuration } }", Json::Null).await;
    let service_dashboard = templates["getAllTemplates"]
        .as_array()
        .expect("templates")
        .iter()
        .find(|t| t["id"] == "Linux-Service")
        .and_then(|t| serde_json::from_str::<Json>(t["configuration"].as_str()?).ok())
        .expect("Linux-Service's configuration is JSON text");
    let services = data(client, "query queryServices($layer: String!) { services: listServices(layer: $layer) { id value: name label: name group layers normal shortName } }", json!({"layer": "OS_LINUX"})).await;
    let ids: Vec<&str> = services["services"].as_array().expect("services").iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, [HOST_ID, "aG9zdC0y.1"], "{services}");
    assert_eq!(services["services"][0]["layers"], json!(["OS_LINUX"]));

    eprintln!("[dashboard] every widget's expressions, six per document");
    let mut expressions: Vec<String> = Vec::new();
    for widget in service_dashboard["children"].as_array().expect("widgets") {
        for key in ["expressions", "subExpressions"] {
            expressions.extend(widget[key].as_array().into_iter().flatten().filter_map(|e| e.as_str()).filter(|e| !e.is_empty()).map(str::to_string));
        }
    }
    assert!(expressions.len() >= 20, "{expressions:?}");
    let entity = json!({"serviceName": HOST, "normal": true});
    let mut answered = std::collections::BTreeMap::new();
    for chunk in expressions.chunks(6) {
        let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let batch = data(client, &batch_document(texts.len()), batch_variables(&texts, entity.clone(), minute_duration(t0))).await;
        for (i, text) in texts.iter().enumerate() {
            let result = &batch[format!("expression{i:02}")];
            // Metrics this store does not hold are OAP's "does not exist"; nothing else fails.
            let error = result["error"].as_str().unwrap_or("");
            assert!(error.is_empty() || error.contains("does not exist"), "{text}: {result}");
            answered.insert(text.to_string(), result.clone());
        }
    }
    let cpu = &answered["avg(meter_vm_cpu_total_percentage)"];
    assert_eq!(cpu["type"], "SINGLE_VALUE");
    assert_eq!(values(cpu, 0), [Some("14.5".to_string())], "the mean of 10..19");
    let memory = &answered["meter_vm_memory_used/1024/1024"];
    assert_eq!(memory["type"], "TIME_SERIES_VALUES");
    let memory_values = values(memory, 0);
    assert_eq!(memory_values.len(), 10, "one value per minute, start and end inclusive");
    assert_eq!(memory_values[0].as_deref(), Some("0.977"), "1000 KiB in MiB, three decimals");
    assert_eq!(memory["results"][0]["values"][0]["name"], json!((t0).to_string()), "a point's id is its epoch ms");
    let fs = &answered["meter_vm_filesystem_percentage"];
    let labels: Vec<&Json> = fs["results"].as_array().expect("series").iter().map(|r| &r["metric"]["labels"]).collect();
    assert_eq!(labels, [&json!([{"key": "mountpoint", "value": "/"}]), &json!([{"key": "mountpoint", "value": "/boot"}])]);
    assert_eq!(values(fs, 0)[9].as_deref(), Some("49"));
    let load = &answered["meter_vm_cpu_load1/100"];
    assert_eq!(values(load, 0)[3].as_deref(), Some("3"));

    eprintln!("[root] the ServiceList widget: one avg per service, and the sparkline at an hour step");
    let hour = json!({"start": minute_text(t0)[..13].to_string(), "end": minute_text(t0)[..13].to_string(), "step": "HOUR"});
    let row = data(client, &batch_document(1), batch_variables(&["avg(meter_vm_cpu_total_percentage)"], json!({"serviceName": "host-2", "normal": true}), hour)).await;
    assert_eq!(values(&row["expression00"], 0), [Some("50".to_string())]);

    node.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_expression_does_not_lose_the_batch_and_bad_documents_are_errors() {
    let t0 = t0();
    let node = node_with(linux_store(t0)).await;
    let client = &node.client;
    let entity = json!({"serviceName": HOST, "normal": true});
    let texts = ["meter_vm_cpu_total_percentage", "avg(", "no_such_metric", "meter_vm_cpu_load1", "top_n(meter_vm_cpu_total_percentage, 1, des)", "latest(meter_vm_cpu_total_percentage)"];
    let batch = data(client, &batch_document(texts.len()), batch_variables(&texts, entity.clone(), minute_duration(t0))).await;
    assert_eq!(batch["expression00"]["type"], "TIME_SERIES_VALUES");
    assert_eq!(batch["expression01"]["type"], "UNKNOWN");
    assert!(batch["expression01"]["error"].as_str().is_some_and(|e| e.contains("1:")), "a syntax error with its position: {}", batch["expression01"]);
    assert_eq!(batch["expression02"]["error"], "Metric: [no_such_metric] does not exist.");
    assert_eq!(values(&batch["expression03"], 0)[9].as_deref(), Some("900"));
    let top = &batch["expression04"];
    assert_eq!(top["type"], "SORTED_LIST", "{top}");
    assert_eq!(top["results"][0]["values"][0]["name"], "host-2", "host-2's mean (50) is the top: {top}");
    assert_eq!(top["results"][0]["values"][0]["owner"]["serviceID"], "aG9zdC0y.1");
    assert_eq!(values(&batch["expression05"], 0), [Some("19".to_string())]);

    eprintln!("[errors] an entity without the scope's names, a duration in the wrong format, SECOND");
    let bad = data(client, &batch_document(1), batch_variables(&["meter_vm_cpu_load1"], json!({"normal": true}), minute_duration(t0))).await;
    assert!(bad["expression00"]["error"].as_str().is_some_and(|e| e.contains("serviceName")), "{bad}");
    let hourly = json!({"start": "2024-01-01 12", "end": "2024-01-01 1300", "step": "MINUTE"});
    let bad = data(client, &batch_document(1), batch_variables(&["meter_vm_cpu_load1"], entity.clone(), hourly)).await;
    assert!(bad["expression00"]["error"].as_str().is_some_and(|e| e.contains("yyyy-MM-dd HHmm")), "{bad}");

    eprintln!("[errors] a malformed document, a field the schema lacks, a missing variable: top-level errors");
    for (query, variables, needle) in [
        ("query { version ", Json::Null, "Invalid syntax"),
        ("query { getAllTemplates { id nope } }", Json::Null, "FieldUndefined"),
        (&batch_document(1) as &str, json!({"entity": entity}), "expression00"),
    ] {
        let (status, body) = graphql(client, query, variables).await;
        assert_eq!(status, 200, "{body}");
        let message = body["errors"][0]["message"].as_str().unwrap_or("");
        assert!(message.contains(needle), "{needle}: {body}");
        assert!(body.get("data").is_none_or(Json::is_null), "{body}");
    }
    let reply = client.post("/graphql", b"not json".to_vec()).await.expect("request");
    assert!(reply.json().is_some_and(|b| b["errors"][0]["message"].as_str().is_some_and(|m| m.contains("JSON"))));

    eprintln!("[null variables] swctl's client sends `variables: null`");
    let (status, body) = graphql(client, "query { result: listLayers }", Json::Null).await;
    assert_eq!((status, body["data"]["result"].clone()), (200, json!(["OS_LINUX"])));

    eprintln!("[ids] findService, getService, getAllServices");
    let found = data(client, "query findService($serviceName: String!) { result: findService(serviceName: $serviceName) { id name group shortName layers normal } }", json!({"serviceName": HOST})).await;
    assert_eq!(found["result"], json!({"id": HOST_ID, "name": HOST, "group": "", "shortName": HOST, "layers": ["OS_LINUX"], "normal": true}));
    let by_id = data(client, &format!("{{ getService(serviceId: \"{HOST_ID}\") {{ name }} missing: getService(serviceId: \"bm9uZQ==.1\") {{ name }} }}"), Json::Null).await;
    assert_eq!(by_id, json!({"getService": {"name": HOST}, "missing": null}));
    node.node.shutdown().await;
}

/// The oracle: on the same stored values, MQE through `/graphql` and the Prometheus API
/// (`/api/v1/query_range` at a minute step) agree wherever both express the same thing. The
/// Prometheus API serves vector selectors, so the aggregations over the range are computed
/// from its samples here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqe_agrees_with_the_prometheus_api_on_the_same_values() {
    let t0 = t0();
    let node = node_with(linux_store(t0)).await;
    let client = &node.client;
    let entity = json!({"serviceName": HOST, "normal": true});
    let range = |selector: &str| {
        with_query("/api/v1/query_range", &[("query", selector), ("start", &(t0 / 1000).to_string()), ("end", &((t0 + 9 * MINUTE) / 1000).to_string()), ("step", "60")])
    };
    let prom = |path: String| async move {
        let body = client.get(&path).await.expect("prom").json().expect("json");
        body["data"]["result"].as_array().expect("matrix").clone()
    };
    let samples = |series: &Json| -> Vec<f64> {
        series["values"].as_array().expect("values").iter().map(|v| v[1].as_str().and_then(|s| s.parse().ok()).expect("number")).collect()
    };
    let mqe = |expression: &'static str| {
        let variables = batch_variables(&[expression], entity.clone(), minute_duration(t0));
        async move {
            let answer = data(client, &batch_document(1), variables).await;
            let result = answer["expression00"].clone();
            assert!(result["error"].is_null(), "{expression}: {result}");
            result["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|r| r["values"].as_array().expect("values").iter().map(|v| v["value"].as_str().and_then(|s| s.parse::<f64>().ok())).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        }
    };
    let round3 = |v: f64| (v * 1000.0).round() / 1000.0;
    let host = format!("{{service=\"{HOST}\"}}");

    // A metric, point by point.
    let cpu = prom(range(&format!("meter_vm_cpu_total_percentage{host}"))).await;
    assert_eq!(cpu.len(), 1, "{cpu:?}");
    let cpu_samples = samples(&cpu[0]);
    assert_eq!(cpu_samples.len(), 10);
    assert_eq!(mqe("meter_vm_cpu_total_percentage").await, [cpu_samples.iter().map(|v| Some(*v)).collect::<Vec<_>>()]);
    // avg / sum / max / min over the range.
    let mean = cpu_samples.iter().sum::<f64>() / cpu_samples.len() as f64;
    assert_eq!(mqe("avg(meter_vm_cpu_total_percentage)").await, [[Some(round3(mean))]]);
    assert_eq!(mqe("sum(meter_vm_cpu_total_percentage)").await, [[Some(cpu_samples.iter().sum::<f64>())]]);
    assert_eq!(mqe("max(meter_vm_cpu_total_percentage)").await[0][0], cpu_samples.iter().copied().reduce(f64::max));
    assert_eq!(mqe("min(meter_vm_cpu_total_percentage)").await[0][0], cpu_samples.iter().copied().reduce(f64::min));
    // Arithmetic.
    let memory = samples(&prom(range(&format!("meter_vm_memory_used{host}"))).await[0]);
    assert_eq!(mqe("meter_vm_memory_used/1024/1024").await, [memory.iter().map(|v| Some(round3(v / 1024.0 / 1024.0))).collect::<Vec<_>>()]);
    assert_eq!(
        mqe("meter_vm_cpu_total_percentage*2+meter_vm_cpu_load1").await,
        [cpu_samples.iter().zip(samples(&prom(range(&format!("meter_vm_cpu_load1{host}"))).await[0])).map(|(c, l)| Some(c * 2.0 + l)).collect::<Vec<_>>()]
    );
    // Label aggregation: sum and max over the mountpoints.
    let fs = prom(range(&format!("meter_vm_filesystem_percentage{host}"))).await;
    assert_eq!(fs.len(), 2, "one series per mountpoint: {fs:?}");
    let per_label: Vec<Vec<f64>> = fs.iter().map(samples).collect();
    let summed: Vec<Option<f64>> = (0..10).map(|i| Some(per_label.iter().map(|s| s[i]).sum())).collect();
    assert_eq!(mqe("aggregate_labels(meter_vm_filesystem_percentage,sum)").await, [summed]);
    let maxed: Vec<Option<f64>> = (0..10).map(|i| per_label.iter().map(|s| s[i]).reduce(f64::max)).collect();
    assert_eq!(mqe("aggregate_labels(meter_vm_filesystem_percentage,max)").await, [maxed]);
    assert_eq!(mqe("meter_vm_filesystem_percentage{mountpoint='/boot'}").await, [samples(&fs[1]).into_iter().map(Some).collect::<Vec<_>>()]);
    node.node.shutdown().await;
}

// ---- a cluster: every node answers the same ----

fn node_id(i: usize) -> NodeId {
    NodeId(format!("g{i}"))
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 43_000 + i as u16))
}

/// Node i holds minutes i, i+3, i+6, ... of HOST's cpu (sum), so only the merge of all three
/// nodes has every minute, and minute 0 also on every node (the merged sum adds them).
fn node_store(i: usize, t0: i64) -> Arc<MemMetrics> {
    let store = Arc::new(MemMetrics::new());
    let hits = info("meter_vm_hits", DataType::Single, Downsampling::Sum);
    for minute in (0..9).filter(|m| m % 3 == i as i64 - 1 || *m == 0) {
        let bucket = bucket_of(Granularity::Minute, t0 + minute * MINUTE);
        store.put(&hits, &service(HOST, "OS_LINUX"), Granularity::Minute, bucket, Value::Single(10 * minute + 1));
    }
    store.put(&hits, &service(HOST, "OS_LINUX"), Granularity::Day, bucket_of(Granularity::Day, t0), Value::Single(1));
    store
}

async fn start_cluster(size: usize, t0: i64, gossip: &GossipNetwork, bus: &MemNetwork) -> Vec<RunningNode> {
    let mut nodes = Vec::new();
    for i in 1..=size {
        let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
        membership.seeds = (1..=size).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let reader: Arc<dyn MetricReader> = node_store(i, t0);
        let settings = NodeSettings { node_id: Some(node_id(i).0), ..settings() };
        nodes.push(TestNode::clustered_in_memory(NodeBuilder::new(settings).metric_reader(reader), membership, gossip, bus).await.node);
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_of_a_cluster_answers_the_clusters_values() {
    let t0 = t0();
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let nodes = start_cluster(3, t0, &gossip, &bus).await;
    let clients: Vec<AdminClient> = nodes.iter().map(|n| AdminClient::new(&n.admin_addr.to_string(), None).expect("client")).collect();
    for client in &clients {
        wait_until(Duration::from_secs(20), "3 live members", || async {
            let status = client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
            status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 3)
        })
        .await;
    }
    // Minute 0 is on all three (3 × 1); minute m > 0 on one node (10m + 1); minute 9 nowhere.
    let want: Vec<Option<String>> = (0..10).map(|m| match m {
        0 => Some("3".to_string()),
        9 => None,
        m => Some((10 * m + 1).to_string()),
    }).collect();
    let entity = json!({"serviceName": HOST, "normal": true});
    for (i, client) in clients.iter().enumerate() {
        let answer = data(client, &batch_document(2), batch_variables(&["meter_vm_hits", "sum(meter_vm_hits)"], entity.clone(), minute_duration(t0))).await;
        assert_eq!(values(&answer["expression00"], 0), want, "node g{}", i + 1);
        assert_eq!(values(&answer["expression01"], 0), [Some("371".to_string())], "node g{}", i + 1);
        let services = data(client, "{ listServices(layer: \"OS_LINUX\") { name } }", Json::Null).await;
        assert_eq!(services["listServices"], json!([{"name": HOST}]), "node g{}", i + 1);
    }
    for node in nodes {
        node.shutdown().await;
    }
}

// ---- a second, independent client ----

/// A Python with `gql`: `$HOTRULE_GQL_PYTHON`, else the virtualenv `.ci/run` makes
/// (`$HOTRULE_GQL_VENV`, default `~/.cache/hotrule-gql-venv`).
fn gql_python() -> Option<std::path::PathBuf> {
    if let Some(python) = std::env::var_os("HOTRULE_GQL_PYTHON") {
        return Some(python.into());
    }
    let venv = std::env::var_os("HOTRULE_GQL_VENV")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cache/hotrule-gql-venv")))?;
    let python = venv.join("bin/python");
    let works = std::process::Command::new(&python).args(["-c", "import gql.transport.requests, graphql"]).output().is_ok_and(|o| o.status.success());
    works.then_some(python)
}

/// Python's `gql` fetches hotrule's schema by introspection, diffs it against SkyWalking's
/// official `.graphqls` files, validates swctl's documents against it and sends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gql_client_validates_swctls_documents_against_the_introspected_schema() {
    let Some(python) = gql_python() else {
        hotrule::base::skips::skip("the_gql_client_validates_swctls_documents", "no Python with gql (run .ci/run, or set HOTRULE_GQL_PYTHON)");
        return;
    };
    let t0 = t0();
    let node = node_with(linux_store(t0)).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-tests/fixtures/gql_client.py");
    let schema_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engines/graphql/tests/data/skywalking-query-protocol");
    let url = format!("http://{}/graphql", node.node.admin_addr);
    let (start, end) = (minute_text(t0), minute_text(t0 + 9 * MINUTE));
    let run = |expression: &str| {
        let mut command = tokio::process::Command::new(&python);
        command.arg(&script).arg(&url).arg(&schema_dir).args([HOST, expression, &start, &end, "MINUTE"]).kill_on_drop(true);
        async move { tokio::time::timeout(Duration::from_secs(120), command.output()).await.expect("gql client finished").expect("gql client ran") }
    };
    let output = run("meter_vm_cpu_total_percentage").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "gql client: {stderr}");
    let answers: Json = serde_json::from_slice(&output.stdout).expect("the client's JSON");
    assert!(answers["comparedTypes"].as_u64().is_some_and(|n| n >= 40), "{answers}");
    assert!(answers["version"].as_str().is_some_and(|v| v.starts_with("10.")), "{answers}");
    assert_eq!(answers["timeInfo"]["timezone"], "+0000");
    assert_eq!(answers["findService"]["id"], HOST_ID);
    assert_eq!(answers["layers"], json!(["OS_LINUX"]));
    assert_eq!(answers["services"].as_array().map(Vec::len), Some(2), "{answers}");
    let exec = &answers["exec"];
    assert_eq!(exec["type"], "TIME_SERIES_VALUES", "{exec}");
    let got: Vec<&str> = exec["results"][0]["values"].as_array().expect("values").iter().filter_map(|v| v["value"].as_str()).collect();
    assert_eq!(got, ["10", "11", "12", "13", "14", "15", "16", "17", "18", "19"]);
    assert!(answers["refused"].as_str().is_some_and(|r| r.contains("entity") || r.contains("duration")), "{answers}");
    node.node.shutdown().await;
}

// ---- logs, alarms, the token ----

fn kept_log(service: &str, timestamp_ms: i64, content: &str, tags: &[(&str, &str)]) -> hotrule::data::logs::KeptLog {
    hotrule::data::logs::KeptLog {
        rule: "NGINX:nginx".into(),
        file: "lal/nginx".into(),
        record: hotrule_lal_engine::LogRecord {
            service: service.into(),
            instance: format!("{service}-1"),
            endpoint: String::new(),
            layer: "NGINX".into(),
            timestamp_ms,
            trace_id: String::new(),
            segment_id: String::new(),
            span_id: None,
            content_type: hotrule_lal_engine::ContentType::Text,
            content: content.into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            output_type: None,
            fields: Default::default(),
        },
        received_ms: timestamp_ms,
    }
}

/// `yyyy-MM-dd HHmmss` (UTC), a SECOND duration's format.
fn second_text(ms: i64) -> String {
    let minute = minute_text(ms);
    format!("{minute}{:02}", ms.rem_euclid(MINUTE) / 1000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_alarms_read_as_the_ui_and_swctl_ask() {
    use hotrule::control::alarms::hooks::message::{AlarmMessage, Tag};
    use hotrule::data::alarm_records::AlarmRecordWriter;
    use hotrule::data::logs::LogWriter;
    let t0 = t0();
    let node = node_with(linux_store(t0)).await;
    let client = &node.client;

    eprintln!("[logs] a LAL-only service is listed in its layer; queryLogs filters and pages");
    let writer: Arc<dyn LogWriter> = node.node.log_store.clone();
    let logs: Vec<_> = (0..30)
        .map(|i| {
            let level = if i % 3 == 0 { "error" } else { "warn" };
            kept_log("nginx-1", t0 + i * 1000, &format!("[{level}] request {i} upstream timed out"), &[("level", level), ("LOG_KIND", "NGINX_ERROR_LOG")])
        })
        .collect();
    writer.write(&logs).expect("write logs");
    let services = data(client, "{ listServices(layer: \"NGINX\") { id name } }", Json::Null).await;
    assert_eq!(services["listServices"], json!([{"id": "bmdpbngtMQ==.1", "name": "nginx-1"}]), "{services}");
    let query = "query queryLogs($condition: LogQueryCondition) { queryLogs(condition: $condition) { logs { serviceName serviceId serviceInstanceName serviceInstanceId endpointName endpointId traceId timestamp contentType content tags { key value } } } }";
    let duration = json!({"start": second_text(t0 - 60_000), "end": second_text(t0 + 60_000), "step": "SECOND"});
    let condition = |extra: Json| {
        let mut c = json!({"serviceId": "bmdpbngtMQ==.1", "queryDuration": duration, "paging": {"pageNum": 1, "pageSize": 21}});
        c.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        json!({"condition": c})
    };
    let page = data(client, query, condition(json!({}))).await;
    let listed = page["queryLogs"]["logs"].as_array().expect("logs");
    assert_eq!(listed.len(), 21, "a full page (the UI asks 21 to know there is more)");
    assert_eq!(listed[0]["content"], "[warn] request 29 upstream timed out", "newest first");
    assert_eq!(listed[0]["serviceInstanceId"], "bmdpbngtMQ==.1_bmdpbngtMS0x");
    assert_eq!(listed[0]["contentType"], "TEXT");
    let second = data(client, query, condition(json!({"paging": {"pageNum": 2, "pageSize": 21}}))).await;
    assert_eq!(second["queryLogs"]["logs"].as_array().map(Vec::len), Some(9), "the rest");
    let keyed = data(client, query, condition(json!({"keywordsOfContent": ["error", "timed"], "excludingKeywordsOfContent": ["request 3 "], "tags": [{"key": "level", "value": "error"}]}))).await;
    let contents: Vec<&str> = keyed["queryLogs"]["logs"].as_array().expect("logs").iter().filter_map(|l| l["content"].as_str()).collect();
    assert_eq!(contents.len(), 9, "10 error logs but request 3: {contents:?}");
    assert!(contents.iter().all(|c| c.contains("[error]") && !c.contains("request 3 ")), "{contents:?}");
    // swctl sends an empty trace id with a duration: no trace filter.
    let swctl = data(client, query, condition(json!({"relatedTrace": {"traceId": ""}}))).await;
    assert_eq!(swctl["queryLogs"]["logs"].as_array().map(Vec::len), Some(21));
    let keys = data(client, "query ($d: Duration!) { keys: queryLogTagAutocompleteKeys(duration: $d) values: queryLogTagAutocompleteValues(tagKey: \"level\", duration: $d) supportQueryLogsByKeywords }", json!({"d": duration})).await;
    assert_eq!(keys, json!({"keys": ["LOG_KIND", "level"], "values": ["error", "warn"], "supportQueryLogsByKeywords": true}));

    eprintln!("[alarms] getAlarm (10.x) and queryAlarms (11.0) over the alarm records");
    let alarms: Arc<dyn AlarmRecordWriter> = node.node.alarm_store.clone();
    let fire = |rule: &str, name: &str, at: i64, uuid: &str| AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: name.into(),
        id0: format!("{name}.1"),
        rule_name: rule.into(),
        alarm_message: format!("CPU of {name} is high"),
        tags: vec![Tag::new("level", "WARNING")],
        start_time: at,
        expression: "sum(meter_vm_cpu_total_percentage > 90) >= 1".into(),
        mqe_metrics_snapshot: [("meter_vm_cpu_total_percentage".to_string(), format!("[{{\"id\":\"{at}\",\"value\":95.5}}]"))].into(),
        uuid: uuid.into(),
        layers: vec!["OS_LINUX".into()],
        ..AlarmMessage::default()
    };
    alarms.write(&[fire("cpu_rule", HOST, t0, "a1"), fire("cpu_rule", "host-2", t0 + 1000, "a2")], &[]).expect("write alarms");
    let minutes = json!({"start": minute_text(t0 - MINUTE), "end": minute_text(t0 + MINUTE), "step": "MINUTE"});
    let get_alarm = "query ($d: Duration!, $p: Pagination!, $k: String, $tags: [AlarmTag]) { getAlarm(duration: $d, paging: $p, keyword: $k, tags: $tags) { msgs { startTime recoveryTime scope id name message events { uuid } tags { key value } snapshot { expression metrics { name results { metric { labels { key value } } values { id value } } } } } } }";
    let all = data(client, get_alarm, json!({"d": minutes, "p": {"pageNum": 1, "pageSize": 20}})).await;
    let msgs = all["getAlarm"]["msgs"].as_array().expect("msgs");
    assert_eq!(msgs.iter().map(|m| m["name"].as_str().unwrap_or("")).collect::<Vec<_>>(), ["host-2", HOST], "newest first");
    assert_eq!(msgs[1]["scope"], "Service");
    assert_eq!(msgs[1]["snapshot"]["metrics"][0]["results"][0]["values"][0]["value"], "95.5");
    let keyword = data(client, get_alarm, json!({"d": minutes, "p": {"pageSize": 20}, "k": "host-2", "tags": [{"key": "level", "value": "WARNING"}]})).await;
    assert_eq!(keyword["getAlarm"]["msgs"].as_array().map(Vec::len), Some(1), "{keyword}");
    let query_alarms = "query ($c: AlarmQueryCondition!) { queryAlarms(condition: $c) { msgs { name } } }";
    let by_entity = data(client, query_alarms, json!({"c": {"duration": minutes, "paging": {"pageSize": 20}, "entities": [{"serviceName": HOST, "normal": true}], "ruleNames": ["cpu_rule"], "layer": "OS_LINUX"}})).await;
    assert_eq!(by_entity["queryAlarms"]["msgs"], json!([{"name": HOST}]));
    let other_rule = data(client, query_alarms, json!({"c": {"duration": minutes, "paging": {"pageSize": 20}, "ruleNames": ["nope"]}})).await;
    assert_eq!(other_rule["queryAlarms"]["msgs"], json!([]));
    node.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_takes_the_admin_token_and_healthcheck_is_open() {
    let settings = NodeSettings { admin_token: Some("s3cret".into()), ..settings() };
    let node = TestNode::start(NodeBuilder::new(settings).metric_reader(linux_store(t0())), Arc::new(MemKv::new())).await;
    let anonymous = AdminClient::new(&node.node.admin_addr.to_string(), None).expect("client");
    let body = serde_json::to_vec(&json!({"query": "{ version }"})).expect("body");
    let refused = anonymous.post("/graphql", body.clone()).await.expect("request");
    assert_eq!(refused.status.as_u16(), 401);
    let health = anonymous.get("/healthcheck").await.expect("healthcheck");
    assert_eq!(health.status.as_u16(), 200, "the stock UI image's proxy probes it without a token");
    let with_token = AdminClient::new(&node.node.admin_addr.to_string(), Some("s3cret".into())).expect("client");
    let answered = with_token.post("/graphql", body).await.expect("request");
    assert_eq!(answered.status.as_u16(), 200);
    assert!(answered.json().is_some_and(|b| b["data"]["version"].as_str().is_some_and(|v| v.starts_with("10."))));
    node.node.shutdown().await;
}
