//! `hotrule bench graphql`: SkyWalking's query protocol (issue 24). One booster-ui dashboard
//! batch — a `queryData` document of six aliased `execExpression` fields, as booster-ui sends a
//! dashboard's widgets — over one day at minute steps, `POST /graphql` over loopback HTTP,
//! sequentially, after a warm-up. Targets: p99 < 50 ms on one node, < 100 ms with a 3-node
//! cluster read.
//!
//! - **Data.** One day (2025-01-01, UTC) of minute values of six metrics of the Linux dashboard
//!   (`config/ui-templates/os_linux/linux-service.json`) for `hosts` hosts (`host-1` is read, the
//!   others are what a read skips), written as dispatch writes them (`MetricValue`s through the
//!   node's metric writer) into the node's own metric store: the real `MetricStore`, on RocksDB
//!   (the `rocksdb` feature, in `--dir`) or on the in-memory key space (`--in-memory`, or a
//!   build without RocksDB).
//! - **One node**: the batch sent to a node holding the whole day.
//! - **3-node cluster** (in-memory bus and gossip): node `g{i}` is given the minutes `m` with
//!   `m % 3 == i - 1`; every read asks the three nodes and merges their answers (see [`cluster`]
//!   for where the cells are when the reads are timed); the batch goes to `g1` and its answer
//!   must equal the one-node answer.
//!
//! Every answer is checked: six results, no error, 1440 values per series, none missing, and a
//! known value; the bench fails otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hotrule_mal_engine::{DataType, Downsampling, Entity, MetricValue, ScopeType, Value};
use serde_json::{Value as Json, json};

use super::store::{load_average, percentile};
use crate::api::client::AdminClient;
use crate::api::query::time::bucket_of;
use crate::base::ids::NodeId;
use crate::cluster::bus::MemNetwork;
use crate::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use crate::data::metrics::Granularity;
use crate::data::metrics::cells::handoff::DELIVERED_KEPT;
use crate::node::testing::NodeBuilder;
use crate::node::{BusWiring, ClusterWiring, Listeners, NodeSettings, RunningNode};
use crate::store::kv::{KvEngine, MemKv};

/// What `bench graphql` runs.
#[derive(Debug, Clone, clap::Args)]
pub struct GraphqlArgs {
    /// Timed sequential requests per case (after a warm-up of a tenth as many, at least 1).
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
    /// Hosts stored (`host-1` is read; the others are what the reads skip).
    #[arg(long, default_value_t = 20)]
    pub hosts: usize,
    /// Where the nodes' RocksDB stores go (removed afterwards).
    #[arg(long, default_value = "./bench-data")]
    pub dir: PathBuf,
    /// The metric store on the in-memory key space instead of RocksDB (any build).
    #[arg(long)]
    pub in_memory: bool,
    /// Time the cluster's reads at once instead of after the L2 hop settled (see [`cluster`]).
    #[arg(long)]
    pub no_settle: bool,
}

/// The first minute of the day read: 2025-01-01T00:00:00Z.
pub const DAY_START_MS: i64 = 1_735_689_600_000;
const MINUTES: i64 = 1440;
/// The host read.
pub const HOST: &str = "host-1";

/// Six expressions of the Linux service dashboard, as one booster-ui batch sends them: every one
/// a time series (one series each, three for the filesystem's mountpoints).
pub const EXPRESSIONS: [&str; 6] = [
    "meter_vm_cpu_average_used",
    "meter_vm_memory_used/1024/1024",
    "meter_vm_filesystem_percentage",
    "meter_vm_cpu_load1/100",
    "meter_vm_network_receive/1024",
    "meter_vm_tcp_curr_estab",
];

/// Series per expression of [`EXPRESSIONS`].
const SERIES: [usize; 6] = [1, 1, 3, 1, 1, 1];
const MOUNTPOINTS: [&str; 3] = ["/", "/boot", "/data"];

/// booster-ui's `execExpression` selection (`src/hooks/data.ts`).
const EXPRESSION_FIELDS: &str = "type results { metric { labels { key value } } values { name: id value refId: traceID owner { scope serviceID serviceName normal serviceInstanceID serviceInstanceName endpointID endpointName } } } error";

/// booster-ui's batch document for `count` expressions (`useExpressionsProcessor.ts`).
pub fn batch_document(count: usize) -> String {
    let variables: Vec<String> = (0..count).map(|i| format!("$expression{i:02}: String!")).collect();
    let fields: Vec<String> = (0..count)
        .map(|i| format!("expression{i:02}: execExpression(expression: $expression{i:02}, entity: $entity, duration: $duration) {{ {EXPRESSION_FIELDS} }}"))
        .collect();
    format!("query queryData({}, $entity: Entity!, $duration: Duration!) {{ {} }}", variables.join(", "), fields.join("\n"))
}

/// The request body: the batch of [`EXPRESSIONS`] for [`HOST`] over the day at MINUTE step.
pub fn batch_body() -> Vec<u8> {
    let mut variables = json!({
        "entity": {"serviceName": HOST, "normal": true},
        "duration": {"start": "2025-01-01 0000", "end": "2025-01-01 2359", "step": "MINUTE", "coldStage": false},
    });
    for (i, e) in EXPRESSIONS.iter().enumerate() {
        variables[format!("expression{i:02}")] = json!(e);
    }
    serde_json::to_vec(&json!({"query": batch_document(EXPRESSIONS.len()), "operationName": "queryData", "variables": variables}))
        .unwrap_or_default()
}

fn host(i: usize) -> Entity {
    linux_service(format!("host-{i}"))
}

/// A value of the vm rules for `entity` in the minute of `timestamp_ms`, as dispatch writes it.
pub(super) fn vm_value(metric: &str, entity: &Entity, timestamp_ms: i64, value: Value, downsampling: Downsampling) -> MetricValue {
    let data_type = match &value {
        Value::Single(_) => DataType::Single,
        Value::Labeled(_) => DataType::Labeled,
        Value::Histogram { .. } => DataType::Histogram,
    };
    MetricValue {
        metric: metric.into(),
        rule: "otel-rules/vm".into(),
        entity: entity.clone(),
        time_bucket: bucket_of(Granularity::Minute, timestamp_ms),
        timestamp_ms,
        value,
        data_type,
        downsampling,
    }
}

/// The OS_LINUX service `name`, as the vm rules' metrics name a host.
pub(super) fn linux_service(name: String) -> Entity {
    let mut entity = Entity::new(ScopeType::Service);
    entity.service_name = name;
    entity.layer = "OS_LINUX".into();
    entity
}

/// The memory used (bytes) of host `h` at minute `m`: `(2048 + m + h) MiB`.
fn memory_used(h: usize, m: i64) -> i64 {
    (2048 + m + h as i64) * 1024 * 1024
}

/// The values dispatch would write for `minutes` of the day, every host.
pub fn values(hosts: usize, minutes: impl Iterator<Item = i64>) -> Vec<MetricValue> {
    let mut out = Vec::new();
    for m in minutes {
        let timestamp_ms = DAY_START_MS + m * 60_000;
        for h in 1..=hosts {
            let entity = host(h);
            let mut value = |metric: &str, value: Value| out.push(vm_value(metric, &entity, timestamp_ms, value, Downsampling::Avg));
            let k = h as i64;
            value("meter_vm_cpu_average_used", Value::Single((m * 7 + k) % 100));
            value("meter_vm_memory_used", Value::Single(memory_used(h, m)));
            let fs = MOUNTPOINTS.iter().enumerate().map(|(i, p)| (format!("mountpoint={p}"), (m / 10 + 20 * i as i64 + k) % 100)).collect();
            value("meter_vm_filesystem_percentage", Value::Labeled(fs));
            value("meter_vm_cpu_load1", Value::Single((m * 13 + k) % 400));
            value("meter_vm_network_receive", Value::Single(1024 * ((m * 31 + k) % 5000)));
            value("meter_vm_tcp_curr_estab", Value::Single(100 + (m + k) % 50));
        }
    }
    out
}

/// A node's key space: RocksDB in `dir/name` or the in-memory twin.
fn engine(args: &GraphqlArgs, name: &str) -> Result<Arc<dyn KvEngine>, String> {
    if args.in_memory || !cfg!(feature = "rocksdb") {
        return Ok(Arc::new(MemKv::new()));
    }
    let path = args.dir.join(name);
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    super::store::engine(&path)
}

fn settings(node_id: Option<String>) -> NodeSettings {
    // The day measured is long past: retention keeps it.
    let long = Duration::from_secs(3650 * 86_400);
    let retention = crate::data::metrics::cells::Retention { minute: long, hour: long, day: long, logs: long, alarms: long };
    NodeSettings { node_id, retention, ..NodeSettings::for_test() }
}

/// Writes `minutes` of the day into `node`'s metric store, an hour per write call.
fn write(node: &RunningNode, hosts: usize, minutes: &[i64]) -> Result<(), String> {
    let writer = node.metric_writer();
    for chunk in minutes.chunks(60) {
        writer.write(&values(hosts, chunk.iter().copied())).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Latencies of one case and its last answer.
pub struct Timed {
    pub latencies: Vec<Duration>,
    pub answer: Json,
    pub bytes: usize,
}

impl Timed {
    fn line(&self, what: &str) -> String {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let mean = sorted.iter().sum::<Duration>() / sorted.len().max(1) as u32;
        format!(
            "{what}: {} requests ({} KiB answers): p50 {:.2?}, p90 {:.2?}, p99 {:.2?}, max {:.2?}, mean {:.2?}",
            sorted.len(),
            self.bytes / 1024,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.9),
            percentile(&sorted, 0.99),
            sorted.last().copied().unwrap_or_default(),
            mean
        )
    }
}

/// Why an answer is not the full day of the batch, if it is not.
pub fn check(answer: &Json) -> Result<(), String> {
    if let Some(errors) = answer.get("errors") {
        return Err(format!("errors: {errors}"));
    }
    for (i, series) in SERIES.iter().enumerate() {
        let result = &answer["data"][format!("expression{i:02}")];
        if !result["error"].is_null() {
            return Err(format!("{}: {}", EXPRESSIONS[i], result["error"]));
        }
        let results = result["results"].as_array().map_or(&[][..], Vec::as_slice);
        if results.len() != *series {
            return Err(format!("{}: {} series, not {series}", EXPRESSIONS[i], results.len()));
        }
        for one in results {
            let values = one["values"].as_array().map_or(&[][..], Vec::as_slice);
            if values.len() != MINUTES as usize || values.iter().any(|v| !v["value"].is_string()) {
                let present = values.iter().filter(|v| v["value"].is_string()).count();
                return Err(format!("{}: {} values ({present} present), not {MINUTES}", EXPRESSIONS[i], values.len()));
            }
        }
    }
    // Minute 5 of host-1's memory: 2048 + 5 + 1 MiB.
    let memory = &answer["data"]["expression01"]["results"][0]["values"][5]["value"];
    if memory != &json!((2048 + 5 + 1).to_string()) {
        return Err(format!("meter_vm_memory_used/1024/1024 at minute 5 is {memory}, not 2054"));
    }
    Ok(())
}

/// `requests` sequential POSTs of the batch after a warm-up, each answer checked.
pub async fn time_batch(client: &AdminClient, requests: usize) -> Result<Timed, String> {
    let body = batch_body();
    let warm_up = (requests / 10).max(1);
    let mut latencies = Vec::with_capacity(requests);
    let mut last = (Json::Null, 0);
    for i in 0..warm_up + requests.max(1) {
        let started = Instant::now();
        let reply = client.post("/graphql", body.clone()).await.map_err(|e| e.to_string())?;
        let elapsed = started.elapsed();
        if !reply.status.is_success() {
            return Err(format!("POST /graphql answered {}: {}", reply.status, reply.text()));
        }
        let answer = reply.json().ok_or("the answer is not JSON")?;
        check(&answer)?;
        if i >= warm_up {
            latencies.push(elapsed);
        }
        last = (answer, reply.text().len());
    }
    Ok(Timed { latencies, answer: last.0, bytes: last.1 })
}

/// One node holding the whole day.
pub async fn one_node(args: &GraphqlArgs) -> Result<Timed, String> {
    let kv = engine(args, "graphql-one")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let node = NodeBuilder::new(settings(None)).start(kv, listener).await.map_err(|e| e.to_string())?;
    let result = async {
        let minutes: Vec<i64> = (0..MINUTES).collect();
        tokio::task::block_in_place(|| write(&node, args.hosts, &minutes))?;
        let client = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?;
        time_batch(&client, args.requests).await
    }
    .await;
    node.shutdown().await;
    result
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 43_500 + i as u16))
}

/// Node `g{i}` of a cluster of `size` on the in-memory bus and gossip.
async fn cluster_node(args: &GraphqlArgs, i: usize, size: usize, gossip: &GossipNetwork, bus: &MemNetwork) -> Result<RunningNode, String> {
    let id = NodeId(format!("g{i}"));
    let mut membership = MembershipSettings::for_test(id.clone(), gossip_addr(i));
    membership.seeds = (1..=size).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let admin_advertise = admin.local_addr().map_err(|e| e.to_string())?.to_string();
    let wiring = ClusterWiring {
        membership,
        gossip: GossipTransport::InMemory(gossip.clone()),
        bus: BusWiring::Memory { network: bus.clone() },
        replication: crate::cluster::replication::ReplicationSettings {
            sync_timeout: Duration::from_secs(2),
            ..crate::cluster::replication::ReplicationSettings::default()
        },
        admin_advertise,
    };
    let kv = engine(args, &format!("graphql-g{i}"))?;
    NodeBuilder::new(settings(Some(id.0)))
        .start_with_listeners(kv, Listeners { admin, data: Some(data), grpc: None }, Some(wiring))
        .await
        .map_err(|e| e.to_string())
}

/// Three clustered nodes, each given a third of the day's minutes; the batch sent to `g1`.
///
/// Each node writes its share as dispatch writes what it evaluated; the L2 hop (issue 22) then
/// hands the cells of `host-*` a node does not own to their owner, and a node keeps the records
/// it delivered for [`DELIVERED_KEPT`] so that a read in the meantime counts them once. Unless
/// `no_settle`, the reads are timed once that is over (no record in any outbox, then
/// `DELIVERED_KEPT`): the steady state, where a read asks all three nodes and merges their
/// answers. A whole day in flight at once is not what a node holds under a steady load (a
/// minute of values is).
pub async fn cluster(args: &GraphqlArgs) -> Result<Timed, String> {
    const SIZE: usize = 3;
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let mut nodes = Vec::new();
    let mut result = Ok(());
    for i in 1..=SIZE {
        match cluster_node(args, i, SIZE, &gossip, &bus).await {
            Ok(node) => nodes.push(node),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let timed = match result {
        Ok(()) => async {
            for (i, node) in nodes.iter().enumerate() {
                let minutes: Vec<i64> = (0..MINUTES).filter(|m| m % SIZE as i64 == i as i64).collect();
                tokio::task::block_in_place(|| write(node, args.hosts, &minutes))?;
            }
            let client = AdminClient::new(&nodes[0].admin_addr.to_string(), None).map_err(|e| e.to_string())?;
            wait_for_members(&client, SIZE).await?;
            if !args.no_settle {
                settle(&nodes).await?;
            }
            time_batch(&client, args.requests).await
        }
        .await,
        Err(e) => Err(e),
    };
    for node in nodes {
        node.shutdown().await;
    }
    timed
}

/// Waits until no node has a record in its handoff outbox, then until the records delivered are
/// no longer kept ([`DELIVERED_KEPT`]).
async fn settle(nodes: &[RunningNode]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let clients: Vec<AdminClient> = nodes.iter().filter_map(|n| AdminClient::new(&n.admin_addr.to_string(), None).ok()).collect();
    let mut empty_looks = 0;
    while empty_looks < 2 {
        if Instant::now() > deadline {
            return Err("the handoff outboxes did not empty within 120 s".into());
        }
        let mut empty = true;
        for client in &clients {
            let text = client.get("/metrics").await.map_err(|e| e.to_string())?.text();
            empty &= !text.lines().any(|l| l.starts_with("hotrule_handoff_outbox_records ") && !l.ends_with(" 0"));
        }
        empty_looks = if empty { empty_looks + 1 } else { 0 };
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(DELIVERED_KEPT + Duration::from_secs(1)).await;
    Ok(())
}

/// Waits (20 s at most) until every node sees `size` live members.
async fn wait_for_members(client: &AdminClient, size: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
        if status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == size) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the cluster did not see {size} live members in 20 s: {status}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Both cases; the report lines.
pub async fn measure(args: &GraphqlArgs) -> Result<Vec<String>, String> {
    if args.hosts == 0 || args.requests == 0 {
        return Err("--hosts and --requests must be at least 1".into());
    }
    let one = one_node(args).await?;
    let three = cluster(args).await?;
    if one.answer["data"] != three.answer["data"] {
        return Err("the 3-node cluster's answer differs from the one node's".into());
    }
    Ok(vec![
        one.line("one node                   "),
        three.line("3-node cluster (read at g1)"),
        "the cluster's answer equals the one node's".to_string(),
    ])
}

/// `hotrule bench graphql`.
pub async fn run(args: &GraphqlArgs) -> Result<(), String> {
    let store = if args.in_memory || !cfg!(feature = "rocksdb") { "the in-memory key space" } else { "RocksDB" };
    println!(
        "one booster-ui batch of 6 execExpression (Linux service dashboard) x 1 day at MINUTE step for {HOST}; {} hosts stored; metric store on {store}",
        args.hosts
    );
    println!("expressions: {}", EXPRESSIONS.join(", "));
    println!("load average before: {}", load_average());
    let lines = measure(args).await?;
    for line in lines {
        println!("{line}");
    }
    println!("load average after: {}", load_average());
    if args.dir.join("graphql-one").exists() {
        for name in ["graphql-one", "graphql-g1", "graphql-g2", "graphql-g3"] {
            let _ = std::fs::remove_dir_all(args.dir.join(name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_node_and_a_cluster_answer_the_full_day_alike() {
        let args = GraphqlArgs { requests: 2, hosts: 3, dir: PathBuf::new(), in_memory: true, no_settle: true };
        let lines = measure(&args).await.expect("bench runs");
        assert!(lines[0].contains("2 requests"), "{lines:?}");
        assert!(lines[1].contains("2 requests"), "{lines:?}");
    }

    #[test]
    fn a_short_answer_fails_the_check() {
        assert!(check(&json!({"data": {}})).is_err());
        assert!(check(&json!({"errors": [{"message": "bad"}]})).is_err());
    }
}
