//! The query APIs over real HTTP against in-process nodes on ephemeral ports, each reading an
//! in-memory metric store (`query::memory::MemMetrics`): the Prometheus API envelope, status
//! codes and formats, the JSON API, the admin token, and the cluster fan-out over the in-memory
//! bus (merge by downsampling function; a silent peer named in a warning, never a hang).

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::MemNetwork;
use hotrule::api::client::{AdminClient, Reply, with_query};
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::compiler::{DataType, Downsampling, ScopeType};
use hotrule::base::ids::NodeId;
use hotrule::data::metrics::{Entity, Granularity, MetricInfo, MetricReader, MetricStoreError, PartialSeries, SeriesFilter, Value};
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{NodeSettings, RunningNode};
use hotrule::api::query::memory::MemMetrics;
use hotrule::api::query::time::bucket_of;
use hotrule::store::kv::MemKv;
use serde_json::{Value as Json, json};

/// 2025-01-01T12:00:00Z.
const T0: i64 = 1_735_732_800_000;
const MINUTE: i64 = 60_000;

fn info(name: &str, downsampling: Downsampling) -> MetricInfo {
    MetricInfo { name: name.into(), scope: ScopeType::Service, data_type: DataType::Single, downsampling }
}

fn service(name: &str) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = name.into();
    entity.layer = "GENERAL".into();
    entity
}

/// `meter_cpu` (avg) for services a and b, one point a minute for 10 minutes from T0 (value
/// = minute index for a, 100 + index for b); `meter_requests` (sum) for a, labeled by status.
fn sample_store() -> Arc<MemMetrics> {
    let store = Arc::new(MemMetrics::new());
    for minute in 0..10 {
        let at = T0 + minute * MINUTE;
        let bucket = bucket_of(Granularity::Minute, at);
        store.put(&info("meter_cpu", Downsampling::Avg), &service("a"), Granularity::Minute, bucket, Value::Single(minute));
        store.put(&info("meter_cpu", Downsampling::Avg), &service("b"), Granularity::Minute, bucket, Value::Single(100 + minute));
        let labeled = Value::Labeled(vec![("status=200".into(), 10), ("status=500".into(), 1)]);
        let requests = MetricInfo { data_type: DataType::Labeled, ..info("meter_requests", Downsampling::Sum) };
        store.put(&requests, &service("a"), Granularity::Minute, bucket, labeled);
    }
    store.put(&info("meter_cpu", Downsampling::Avg), &service("a"), Granularity::Hour, bucket_of(Granularity::Hour, T0), Value::Single(4));
    store
}

async fn node_with(reader: Option<Arc<dyn MetricReader>>, token: Option<&str>) -> TestNode {
    let settings = NodeSettings { admin_token: token.map(str::to_string), ..NodeSettings::for_test() };
    let node = match reader {
        Some(reader) => NodeBuilder::new(settings).metric_reader(reader),
        None => NodeBuilder::new(settings),
    };
    TestNode::start(node, Arc::new(MemKv::new())).await
}

async fn get(client: &AdminClient, path: &str, pairs: &[(&str, &str)]) -> (u16, Json) {
    let reply = client.get(&with_query(path, pairs)).await.expect("request");
    (reply.status.as_u16(), reply.json().unwrap_or(Json::Null))
}

async fn post_form(client: &AdminClient, path: &str, form: &str) -> Reply {
    // The admin client sends no content type; a form needs one, so build the request here.
    let url = format!("{}{path}", client.base());
    let request = hyper::Request::post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(http_body_util::Full::new(bytes::Bytes::from(form.to_string())))
        .expect("request");
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let response = http.request(request).await.expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.expect("body").to_bytes();
    Reply { status, headers, body }
}

fn secs(ms: i64) -> String {
    format!("{}", ms as f64 / 1000.0)
}

#[tokio::test]
async fn instant_queries_answer_vectors_and_scalars_in_prometheus_form() {
    let node = node_with(Some(sample_store()), None).await;
    let at = secs(T0 + 9 * MINUTE + 30_000);
    let (status, body) = get(&node.client, "/api/v1/query", &[("query", "meter_cpu{service=\"a\"}"), ("time", &at)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "success");
    assert_eq!(body["data"]["resultType"], "vector");
    let result = body["data"]["result"].as_array().expect("result");
    assert_eq!(result.len(), 1, "{body}");
    assert_eq!(result[0]["metric"], json!({"__name__": "meter_cpu", "service": "a", "layer": "GENERAL", "scope": "SERVICE"}));
    assert_eq!(result[0]["value"], json!([1_735_733_370, "9"]), "evaluation time and the latest value");
    assert!(body.get("warnings").is_none(), "a lone node has nothing to warn about");

    // Lookback: 6 minutes after the last point there is nothing with the default 5m ...
    let late = secs(T0 + 15 * MINUTE);
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "meter_cpu"), ("time", &late)]).await;
    assert_eq!(body["data"]["result"], json!([]));
    // ... and both series with a 10m lookback_delta, sorted by labels.
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "meter_cpu"), ("time", &late), ("lookback_delta", "10m")]).await;
    let services: Vec<&str> = body["data"]["result"].as_array().expect("result").iter().map(|r| r["metric"]["service"].as_str().unwrap_or("")).collect();
    assert_eq!(services, ["a", "b"]);

    // Matchers: regex, negative, and labeled values expanded into series.
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "{__name__=~\"meter_.*\", service!=\"b\"}"), ("time", &at)]).await;
    assert_eq!(body["data"]["result"].as_array().map(Vec::len), Some(3), "{body}");
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "meter_requests{status=~\"5..\"}"), ("time", &at)]).await;
    assert_eq!(body["data"]["result"][0]["value"][1], "1", "{body}");

    // Grafana's "Test" query: a scalar.
    let (status, body) = get(&node.client, "/api/v1/query", &[("query", "1+1"), ("time", "4")]).await;
    assert_eq!((status, body["data"].clone()), (200, json!({"resultType": "scalar", "result": [4, "2"]})));
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "1/2"), ("time", "2015-07-01T20:10:51.781Z")]).await;
    assert_eq!(body["data"]["result"], json!([1_435_781_451.781, "0.5"]));
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "1/0")]).await;
    assert_eq!(body["data"]["result"][1], "+Inf");

    // Form-encoded POST (what Grafana and promtool send).
    let reply = post_form(&node.client, "/api/v1/query", &format!("query=meter_cpu%7Bservice%3D%22b%22%7D&time={at}")).await;
    let body = reply.json().expect("json");
    assert_eq!(body["data"]["result"][0]["value"][1], "109", "{body}");
    node.node.shutdown().await;
}

#[tokio::test]
async fn bad_queries_are_400_bad_data_naming_the_construct() {
    let node = node_with(Some(sample_store()), None).await;
    let cases = [
        // Native histograms: hotrule stores classic `le` buckets only.
        ("histogram_count(meter_cpu)", "unsupported PromQL construct: function histogram_count"),
        ("histogram_fraction(0, 1, meter_cpu)", "unsupported PromQL construct: function histogram_fraction"),
        ("{service=~\".*\"}", "at least one non-empty matcher"),
        ("meter_cpu{", "parse error"),
        ("", "parse error"),
    ];
    for (query, needle) in cases {
        let (status, body) = get(&node.client, "/api/v1/query", &[("query", query)]).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["status"], "error");
        assert_eq!(body["errorType"], "bad_data");
        assert!(body["error"].as_str().is_some_and(|e| e.contains(needle)), "{query}: {body}");
    }
    let (status, body) = get(&node.client, "/api/v1/query", &[("query", "up"), ("time", "noon")]).await;
    assert_eq!((status, body["errorType"].as_str()), (400, Some("bad_data")));
    assert!(body["error"].as_str().unwrap_or("").contains("\"time\""), "{body}");
    node.node.shutdown().await;
}

/// The first panels a Grafana user builds (issue 25), answered by the PromQL engine over the
/// stored values: at minute 9, `a` is 9 and `b` is 109; each minute adds 1.
#[tokio::test]
async fn grafanas_first_panels_are_answered() {
    let node = node_with(Some(sample_store()), None).await;
    let at = secs(T0 + 9 * MINUTE);
    let value_of = |body: &Json, service: Option<&str>| -> Option<String> {
        let result = body["data"]["result"].as_array()?;
        let one = result.iter().find(|r| service.is_none_or(|s| r["metric"]["service"] == s))?;
        one["value"][1].as_str().map(str::to_string)
    };
    for (query, service, want) in [
        ("sum(meter_cpu)", None, "118"),
        ("sum by (service) (meter_cpu)", Some("b"), "109"),
        ("meter_cpu{service=\"a\"} / 2", Some("a"), "4.5"),
        ("max_over_time(meter_cpu{service=\"b\"}[5m])", Some("b"), "109"),
        ("topk(1, meter_cpu)", Some("b"), "109"),
        ("meter_cpu > bool 50", Some("a"), "0"),
    ] {
        let (status, body) = get(&node.client, "/api/v1/query", &[("query", query), ("time", &at)]).await;
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(value_of(&body, service).as_deref(), Some(want), "{query}: {body}");
    }
    // A counter-like series: `a` rises by 1 a minute, so its rate over 5 minutes is 1/60 per second.
    let (_, body) = get(&node.client, "/api/v1/query", &[("query", "rate(meter_cpu{service=\"a\"}[5m])"), ("time", &at)]).await;
    let rate: f64 = value_of(&body, Some("a")).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    assert!((rate - 1.0 / 60.0).abs() < 1e-9, "{body}");
    node.node.shutdown().await;
}

/// The configured bounds (`query.max_samples`, `query.evaluation_interval`) are the ones a query
/// meets: over the cap is `422 execution`, and a subquery without a step takes the interval.
#[tokio::test]
async fn the_configured_query_bounds_hold() {
    let query = hotrule::api::query::QuerySettings { max_samples: 12, subquery_step_ms: 2 * MINUTE, ..Default::default() };
    let settings = NodeSettings { query, ..NodeSettings::for_test() };
    let node = TestNode::start(NodeBuilder::new(settings).metric_reader(sample_store()), Arc::new(MemKv::new())).await;
    let at = secs(T0 + 9 * MINUTE);
    let (status, body) = get(&node.client, "/api/v1/query", &[("query", "meter_cpu[10m]"), ("time", &at)]).await;
    assert_eq!((status, body["errorType"].as_str()), (422, Some("execution")), "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("too many samples into memory (limit 12)")), "{body}");
    // Minutes 0..=9 of `a`: a 2-minute step from minute 1 to 9 sees minutes 2, 4, 6, 8 (4 samples).
    let (status, body) = get(&node.client, "/api/v1/query", &[("query", "count_over_time(meter_cpu{service=\"a\"}[8m:])"), ("time", &at)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"][0]["value"][1], "4", "{body}");
    node.node.shutdown().await;
}

/// Pathological queries (a subquery of a million steps a second, over a month) run off the async
/// workers: with both of this runtime's two workers' worth of them in flight, the node still
/// answers at once, and each ends at `query.timeout` with `503 timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pathological_queries_time_out_without_stalling_the_node() {
    let query = hotrule::api::query::QuerySettings { timeout: Duration::from_secs(2), max_samples: usize::MAX, max_concurrency: 2, ..Default::default() };
    let settings = NodeSettings { query, ..NodeSettings::for_test() };
    let node = TestNode::start(NodeBuilder::new(settings).metric_reader(sample_store()), Arc::new(MemKv::new())).await;
    let at = secs(T0 + 9 * MINUTE);
    let heavy = |client: AdminClient, at: String| {
        tokio::spawn(async move { get(&client, "/api/v1/query", &[("query", "count_over_time(meter_cpu[30d:1ms])"), ("time", &at)]).await })
    };
    let running = [heavy(node.client.clone(), at.clone()), heavy(node.client.clone(), at.clone())];
    let mut answered_meanwhile = 0;
    let started = Instant::now();
    for _ in 0..1000 {
        if running.iter().all(|task| task.is_finished()) || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        let asked = Instant::now();
        let health = node.client.get("/healthz").await.expect("healthz");
        assert!(health.status.is_success() && asked.elapsed() < Duration::from_secs(1), "healthz took {:?}", asked.elapsed());
        answered_meanwhile += usize::from(!running.iter().all(|task| task.is_finished()));
    }
    assert!(answered_meanwhile > 0, "the node answered while the heavy queries ran");
    for task in running {
        let (status, body) = task.await.expect("the heavy query's task");
        assert_eq!((status, body["errorType"].as_str()), (503, Some("timeout")), "{body}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn range_queries_step_from_start_to_end_and_validate_their_parameters() {
    let node = node_with(Some(sample_store()), None).await;
    let (start, end) = (secs(T0 + 30_000), secs(T0 + 4 * MINUTE + 30_000));
    let (status, body) =
        get(&node.client, "/api/v1/query_range", &[("query", "meter_cpu{service=\"a\"}"), ("start", &start), ("end", &end), ("step", "60")]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["resultType"], "matrix");
    let values = &body["data"]["result"][0]["values"];
    assert_eq!(
        *values,
        json!([[1_735_732_830, "0"], [1_735_732_890, "1"], [1_735_732_950, "2"], [1_735_733_010, "3"], [1_735_733_070, "4"]])
    );
    // An hour step reads hour buckets; the value holds for the bucket.
    let (_, body) = get(
        &node.client,
        "/api/v1/query_range",
        &[("query", "meter_cpu{service=\"a\"}"), ("start", &secs(T0)), ("end", &secs(T0 + 3_600_000)), ("step", "1h")],
    )
    .await;
    assert_eq!(body["data"]["result"][0]["values"], json!([[1_735_732_800, "4"]]), "{body}");
    // A scalar is a matrix of one series without labels.
    let (_, body) = get(&node.client, "/api/v1/query_range", &[("query", "2"), ("start", "0"), ("end", "120"), ("step", "1m")]).await;
    assert_eq!(body["data"]["result"], json!([{"metric": {}, "values": [[0, "2"], [60, "2"], [120, "2"]]}]));
    let bad = [
        (vec![("query", "up"), ("end", "10"), ("step", "1")], "\"start\""),
        (vec![("query", "up"), ("start", "10"), ("end", "5"), ("step", "1")], "end timestamp must not be before start time"),
        (vec![("query", "up"), ("start", "0"), ("end", "5"), ("step", "0")], "zero or negative query resolution step widths"),
        (vec![("query", "up"), ("start", "0"), ("end", "5"), ("step", "x")], "\"step\""),
        (vec![("query", "up"), ("start", "0"), ("end", "86400"), ("step", "1")], "exceeded maximum resolution of 11,000 points"),
    ];
    for (pairs, needle) in bad {
        let (status, body) = get(&node.client, "/api/v1/query_range", &pairs).await;
        assert_eq!((status, body["errorType"].as_str()), (400, Some("bad_data")), "{pairs:?}: {body}");
        assert!(body["error"].as_str().unwrap_or("").contains(needle), "{pairs:?}: {body}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn series_labels_and_label_values_with_match() {
    let node = node_with(Some(sample_store()), None).await;
    let window = [("start", secs(T0)), ("end", secs(T0 + 10 * MINUTE))];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut pairs: Vec<(&str, &str)> = window.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pairs.extend_from_slice(extra);
        pairs
    };
    let (status, body) = get(&node.client, "/api/v1/series", &with(&[("match[]", "meter_cpu")])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(body["data"][0]["__name__"], "meter_cpu");
    let (_, body) = get(&node.client, "/api/v1/series", &with(&[("match[]", "meter_cpu{service=\"b\"}"), ("match[]", "meter_requests")])).await;
    assert_eq!(body["data"].as_array().map(Vec::len), Some(3), "{body}");
    let (status, body) = get(&node.client, "/api/v1/series", &with(&[])).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("no match[] parameter provided")));

    let (_, body) = get(&node.client, "/api/v1/labels", &with(&[])).await;
    assert_eq!(body["data"], json!(["__name__", "layer", "scope", "service", "status"]));
    let (_, body) = get(&node.client, "/api/v1/labels", &with(&[("match[]", "meter_cpu")])).await;
    assert_eq!(body["data"], json!(["__name__", "layer", "scope", "service"]));

    let (_, body) = get(&node.client, "/api/v1/label/__name__/values", &[]).await;
    assert_eq!(body["data"], json!(["meter_cpu", "meter_requests"]));
    let (_, body) = get(&node.client, "/api/v1/label/service/values", &with(&[("match[]", "meter_cpu")])).await;
    assert_eq!(body["data"], json!(["a", "b"]));
    let (_, body) = get(&node.client, "/api/v1/label/status/values", &with(&[])).await;
    assert_eq!(body["data"], json!(["200", "500"]));
    let (_, body) = get(&node.client, "/api/v1/label/service/values", &with(&[("match[]", "meter_cpu"), ("limit", "1")])).await;
    assert_eq!((body["data"].clone(), body["warnings"].clone()), (json!(["a"]), json!(["results truncated due to limit"])));
    let (_, body) = get(&node.client, "/api/v1/label/nothing/values", &with(&[])).await;
    assert_eq!(body["data"], json!([]));

    let (status, body) = get(&node.client, "/api/v1/status/buildinfo", &[]).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("success")));
    assert!(body["data"]["version"].is_string() && body["data"].get("features").is_none());
    let (_, body) = get(&node.client, "/api/v1/metadata", &[]).await;
    assert_eq!(body["data"]["meter_cpu"][0]["type"], "gauge");
    let (status, body) = get(&node.client, "/api/v1/query_exemplars", &[("query", "meter_cpu")]).await;
    assert_eq!((status, body["data"].clone()), (200, json!([])));
    let (status, body) = get(&node.client, "/api/v1/label/0bad/values", &[]).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid label name: \"0bad\"")), "{body}");
    node.node.shutdown().await;
}

/// A store whose reads fail, for the `execution` error.
struct BrokenStore;

impl MetricReader for BrokenStore {
    fn metrics(&self) -> Result<Vec<MetricInfo>, MetricStoreError> {
        Ok(Vec::new())
    }
    fn read_partials(&self, _: &SeriesFilter, _: Granularity, _: i64, _: i64) -> Result<Vec<PartialSeries>, MetricStoreError> {
        Err(MetricStoreError::Corrupt { key: "k".into(), detail: "test".into() })
    }
}

#[tokio::test]
async fn store_failures_are_422_execution() {
    let broken = node_with(Some(Arc::new(BrokenStore)), None).await;
    let (status, body) = get(&broken.client, "/api/v1/query", &[("query", "up")]).await;
    assert_eq!((status, body["errorType"].as_str()), (422, Some("execution")), "{body}");
    let (status, body) = get(&broken.client, "/query/metrics", &[("name", "up")]).await;
    assert_eq!((status, body["applyStatus"].as_str()), (503, Some("storage_unavailable")), "{body}");
    broken.node.shutdown().await;
}

#[tokio::test]
async fn the_prometheus_api_takes_the_admin_bearer_token() {
    let node = node_with(Some(sample_store()), Some("s3cret")).await;
    let anonymous = AdminClient::new(&node.node.admin_addr.to_string(), None).expect("client");
    for path in ["/api/v1/query?query=1", "/api/v1/status/buildinfo", "/query/metrics/list"] {
        let reply = anonymous.get(path).await.expect("request");
        assert_eq!(reply.status.as_u16(), 401, "{path}");
        let reply = node.client.get(path).await.expect("request");
        assert_eq!(reply.status.as_u16(), 200, "{path} with the token: {}", reply.text());
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn the_json_api_reads_series_lists_metrics_and_entities() {
    let node = node_with(Some(sample_store()), None).await;
    let (start, end) = ("2025-01-01 1200", "2025-01-01T12:02:00Z");
    let (status, body) = get(&node.client, "/query/metrics", &[("name", "meter_cpu"), ("service", "a"), ("start", start), ("end", end)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metric"]["function"], "avg");
    assert_eq!(body["series"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["series"][0]["entity"]["service"], "a");
    let values: Vec<i64> = body["series"][0]["points"].as_array().expect("points").iter().filter_map(|p| p["value"].as_i64()).collect();
    assert_eq!(values, [0, 1, 2]);
    assert_eq!(body["series"][0]["points"][0]["bucket"], 202_501_011_200i64);
    assert_eq!(body["partial"], json!([]));

    let (_, body) = get(&node.client, "/query/metrics", &[("name", "meter_requests"), ("start", start), ("end", start)]).await;
    assert_eq!(body["series"][0]["points"][0]["value"], json!({"status=200": 10, "status=500": 1}));

    let (_, body) = get(&node.client, "/query/metrics/list", &[]).await;
    let names: Vec<&str> = body["metrics"].as_array().expect("metrics").iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["meter_cpu", "meter_requests"]);
    assert_eq!(body["metrics"][1]["function"], "sumLabeled");
    assert_eq!(body["metrics"][1]["scope"], "SERVICE");

    let (_, body) = get(&node.client, "/query/metrics/entities", &[("name", "meter_cpu"), ("step", "MINUTE"), ("start", start), ("end", end)]).await;
    let services: Vec<&str> = body["entities"].as_array().expect("entities").iter().filter_map(|e| e["service"].as_str()).collect();
    assert_eq!(services, ["a", "b"]);

    for (pairs, needle) in [
        (vec![("service", "a")], "name"),
        (vec![("name", "m"), ("step", "WEEK")], "step"),
        (vec![("name", "m"), ("start", "tomorrow")], "start"),
        (vec![("name", "m"), ("serivce", "a")], "serivce"),
        (vec![("name", "m"), ("name", "n")], "more than once"),
    ] {
        let (status, body) = get(&node.client, "/query/metrics", &pairs).await;
        assert_eq!((status, body["applyStatus"].as_str()), (400, Some("invalid_parameter")), "{pairs:?}: {body}");
        assert!(body["message"].as_str().unwrap_or("").contains(needle), "{pairs:?}: {body}");
    }
    node.node.shutdown().await;
}

// ---- cluster fan-out ----

fn node_id(i: usize) -> NodeId {
    NodeId(format!("q{i}"))
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 41_000 + i as u16))
}

/// Node i stores `meter_hits` (sum) = i and `meter_load` (avg) = 10·i for service s at T0, and
/// `meter_only_i` on itself alone.
fn node_store(i: usize) -> Arc<MemMetrics> {
    let store = Arc::new(MemMetrics::new());
    let bucket = bucket_of(Granularity::Minute, T0);
    store.put(&info("meter_hits", Downsampling::Sum), &service("s"), Granularity::Minute, bucket, Value::Single(i as i64));
    store.put(&info("meter_load", Downsampling::Avg), &service("s"), Granularity::Minute, bucket, Value::Single(10 * i as i64));
    store.put(&info(&format!("meter_only_{i}"), Downsampling::Latest), &service("s"), Granularity::Minute, bucket, Value::Single(1));
    store
}

async fn start_cluster(size: usize, gossip: &GossipNetwork, bus: &MemNetwork) -> Vec<RunningNode> {
    let mut nodes = Vec::new();
    for i in 1..=size {
        let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
        membership.seeds = (1..=size).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let reader: Arc<dyn MetricReader> = node_store(i);
        let settings = NodeSettings { node_id: Some(node_id(i).0), ..NodeSettings::for_test() };
        let node = NodeBuilder::new(settings).metric_reader(reader);
        nodes.push(TestNode::clustered_in_memory(node, membership, gossip, bus).await.node);
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queries_merge_by_function_and_name_a_silent_peer_without_hanging() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let nodes = start_cluster(3, &gossip, &bus).await;
    let client = AdminClient::new(&nodes[0].admin_addr.to_string(), None).expect("client");
    eprintln!("[fan-out] waiting for q1 to see two live peers");
    wait_until(Duration::from_secs(20), "q1 sees 3 live members", || async {
        let status = client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
        status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 3)
    })
    .await;
    let at = secs(T0 + 30_000);

    eprintln!("[fan-out] healthy: sum adds, avg averages, every node's metrics listed");
    let (status, body) = get(&client, "/api/v1/query", &[("query", "{__name__=~\"meter_(hits|load)\"}"), ("time", &at)]).await;
    assert_eq!(status, 200, "{body}");
    let values: Vec<(String, String)> = body["data"]["result"]
        .as_array()
        .expect("result")
        .iter()
        .map(|r| (r["metric"]["__name__"].as_str().unwrap_or("").to_string(), r["value"][1].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(values, [("meter_hits".to_string(), "6".to_string()), ("meter_load".to_string(), "20".to_string())], "{body}");
    assert!(body.get("warnings").is_none(), "{body}");
    // PromQL evaluates over the merged cluster read: the engine sees one exact value per series.
    let (_, body) = get(&client, "/api/v1/query", &[("query", "scalar(sum(meter_hits)) * 2 + max_over_time(meter_load[5m])"), ("time", &at)]).await;
    assert_eq!(body["data"]["result"][0]["value"][1], "32", "(1 + 2 + 3) * 2 + 20: {body}");
    let (_, body) = get(&client, "/api/v1/query", &[("query", "meter_hits"), ("time", &at), ("cluster", "false")]).await;
    assert_eq!(body["data"]["result"][0]["value"][1], "1", "cluster=false reads this node only");
    let (_, body) = get(&client, "/api/v1/label/__name__/values", &[]).await;
    assert_eq!(body["data"], json!(["meter_hits", "meter_load", "meter_only_1", "meter_only_2", "meter_only_3"]));
    let (_, body) = get(&client, "/query/metrics", &[("name", "meter_hits"), ("start", &T0.to_string()), ("end", &T0.to_string()), ("cluster", "true")]).await;
    assert_eq!(body["series"][0]["points"][0]["value"], 6, "{body}");
    assert_eq!(body["nodes"], json!(["q1", "q2", "q3"]));
    let (_, body) = get(&client, "/query/metrics", &[("name", "meter_hits"), ("start", &T0.to_string()), ("end", &T0.to_string())]).await;
    assert_eq!(body["series"][0]["points"][0]["value"], 1, "the JSON API reads locally by default");

    eprintln!("[fan-out] q3 goes silent (its answers are lost): partial, within the deadline");
    bus.drop_responses(&node_id(1), &node_id(3), 1.0);
    let started = Instant::now();
    let (status, body) = get(&client, "/api/v1/query", &[("query", "meter_hits"), ("time", &at), ("timeout", "500ms")]).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"][0]["value"][1], "3", "q1 + q2: {body}");
    let warnings = body["warnings"].as_array().expect("a warning");
    assert_eq!(warnings.len(), 1, "{body}");
    assert!(warnings[0].as_str().unwrap_or("").contains("q3"), "{body}");
    assert!(took < Duration::from_secs(3), "the silent peer cost {took:?}");
    let (_, body) = get(&client, "/query/metrics", &[("name", "meter_hits"), ("start", &T0.to_string()), ("end", &T0.to_string()), ("cluster", "true")]).await;
    assert_eq!(body["partial"][0]["node"], "q3", "{body}");
    assert_eq!(body["series"][0]["points"][0]["value"], 3);

    bus.heal_all();
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test]
async fn the_metrics_cli_prints_tables_and_json() {
    let node = node_with(Some(sample_store()), Some("s3cret")).await;
    let server = format!("http://{}", node.node.admin_addr);
    let env = [("HOTRULE_ADMIN_TOKEN", "s3cret")];
    let (code, stdout, _) = harness::hotrule_cli(&["metrics", "list", "--server", &server], &env).await;
    assert_eq!(code, 0);
    assert!(stdout.starts_with("NAME") && stdout.contains("meter_requests  SERVICE  sumLabeled"), "{stdout}");
    let args = ["metrics", "query", "--server", &server, "--name", "meter_cpu", "--service", "b", "--start", "2025-01-01 1200", "--end", "2025-01-01 1201"];
    let (code, stdout, _) = harness::hotrule_cli(&args, &env).await;
    assert_eq!(code, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[1].contains("2025-01-01T12:00:00.000Z") && lines[1].contains("service=b") && lines[1].ends_with("100"), "{stdout}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (code, stdout, _) = harness::hotrule_cli(&json_args, &env).await;
    assert_eq!(code, 0);
    let body: Json = serde_json::from_str(&stdout).expect("json");
    assert_eq!(body["series"][0]["points"][1]["value"], 101);
    let (code, _, stderr) = harness::hotrule_cli(&["metrics", "query", "--server", &server, "--name", "m", "--step", "WEEK"], &env).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("invalid_parameter") && stderr.contains("step"), "{stderr}");
    node.node.shutdown().await;
}
