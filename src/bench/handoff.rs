//! `hotrule bench handoff`: what the L2 hop costs (issue 22). The same remote-write stream as
//! `bench ingest` (node_exporter hosts against the bundled rules) goes to one node, then to a
//! cluster of `--nodes` nodes behind a round-robin balancer (each connection sends its requests
//! to the nodes in turn), in one run:
//!
//! - **CPU per sample**: the nodes' CPU time (user + system, from `/proc/<pid>/stat`) during the
//!   load, summed over the nodes, divided by the samples they accepted. The load generator's own
//!   CPU is not counted. The difference between the cluster and the lone node is the cost of the
//!   cluster: evaluation is the same, the handoff of cells to their owners and its bus calls are
//!   added.
//! - **Visibility delay**: after the load, `--markers` single samples of new services, each sent
//!   to one node in turn; the time from the ingest answer until the marker's value is in the
//!   store of its entity's owner (a local read, `cluster=false`). On the lone node that is
//!   dispatch and the write; in the cluster the handoff round (500 ms) and the bus call are
//!   added. (A cluster read, `cluster=true`, sees a value before it reaches the owner.)
//!
//! Behind round-robin, a counter series' samples alternate between nodes, so the stream's
//! `rate`/`increase` values are wrong in the cluster run (see docs/ingest.md); the work per sample
//! is the same, which is what is measured here.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;

use super::cluster::{node_command_with_rules, wait_for};
use super::ingest::{Outcome, client, run_stream, send};
use super::ingest_stream::{Stream, prompb};
use crate::api::client::{AdminClient, with_query};
use crate::base::ids::NodeId;
use crate::base::owner::LiveSet;
use crate::data::metrics::Entity;
use crate::data::metrics::cells::keys::owner_key;

#[derive(Debug, Clone, clap::Args)]
pub struct HandoffArgs {
    /// Nodes of the cluster run.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Simulated node_exporter hosts (507 series each).
    #[arg(long, default_value_t = 60)]
    hosts: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 6)]
    connections: usize,
    /// Seconds of load per run (after the warm-up round).
    #[arg(long, default_value_t = 15)]
    seconds: u64,
    /// Marker samples for the visibility delay, per run.
    #[arg(long, default_value_t = 20)]
    markers: usize,
    /// Where the nodes' data goes.
    #[arg(long, default_value = "./bench-data/handoff")]
    dir: PathBuf,
    /// The bundled rules of the nodes.
    #[arg(long, default_value = "./config/rules")]
    rules_dir: PathBuf,
    /// The loopback network `127.0.<net>.x` of the lone node (the cluster uses `<net>+1`).
    #[arg(long, default_value_t = 61)]
    net: u8,
}

const MARKER_RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: bench_handoff
metricsRules:
  - name: marker
    exp: bench_marker.sum(['svc']).downsampling(LATEST)
";

/// How long one marker may take to reach its owner before the run fails.
const MARKER_TIMEOUT: Duration = Duration::from_secs(20);

struct Node {
    child: Child,
    admin: AdminClient,
    id: String,
    write_url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    /// User + system CPU seconds of the process so far.
    fn cpu_seconds(&self, ticks_per_second: f64) -> Result<f64, String> {
        let path = format!("/proc/{}/stat", self.child.id());
        let stat = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        // The fields after the command name (which may hold spaces) start after its ')'.
        let rest = stat.rsplit_once(')').map(|(_, rest)| rest).ok_or_else(|| format!("{path}: no ')'"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line: 12 and 13 after the ')'.
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).ok_or_else(|| format!("{path}: field {i}"));
        Ok((ticks(11)? + ticks(12)?) / ticks_per_second)
    }
}

/// What one run measured.
struct RunReport {
    outcome: Outcome,
    cpu_seconds: f64,
    /// Markers sent to a node that does not own their entity (in the lone run: every marker).
    visibility: Vec<Duration>,
    /// Markers sent to their entity's owner (the cluster run only).
    direct: Vec<Duration>,
    /// The lone node's run.
    alone: bool,
}

impl RunReport {
    fn cpu_per_sample_us(&self) -> f64 {
        self.cpu_seconds * 1e6 / (self.outcome.accepted_samples.max(1) as f64)
    }

    fn visibility_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.visibility, p)
    }
}

fn percentile_ms(delays: &[Duration], p: f64) -> f64 {
    let mut sorted = delays.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

/// `hotrule bench handoff`.
pub async fn run(args: HandoffArgs) -> Result<(), String> {
    if !(2..=9).contains(&args.nodes) || args.hosts == 0 || args.connections == 0 || args.seconds == 0 || args.markers == 0 {
        return Err("--nodes must be 2..9; --hosts, --connections, --seconds and --markers at least 1".into());
    }
    if !args.rules_dir.join("otel-rules").is_dir() {
        return Err(format!("{} has no otel-rules directory: run from the repository root or pass --rules-dir", args.rules_dir.display()));
    }
    let ticks = ticks_per_second()?;
    let bin = std::env::current_exe().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&args.dir);
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    let now_ms = crate::base::clock::wall_clock_ms();
    let stream = Arc::new(Stream::node_exporter(args.hosts, now_ms - now_ms.rem_euclid(1000))?);
    println!(
        "stream: {} node_exporter hosts, {} series, {} connections, {} s per run; {} markers per run",
        stream.hosts(),
        stream.series(),
        args.connections,
        args.seconds,
        args.markers
    );
    let lone = measure(&bin, &args, &stream, 1, args.net, ticks).await?;
    print_report("1 node", &lone, &args, stream.series());
    let net = args.net.checked_add(1).ok_or("--net must be below 255")?;
    let cluster = measure(&bin, &args, &stream, args.nodes, net, ticks).await?;
    print_report(&format!("{} nodes, round-robin", args.nodes), &cluster, &args, stream.series());
    println!(
        "the L2 hop: {:+.2} µs CPU per sample ({:.2}×); visibility p50 {:+.0} ms, p99 {:+.0} ms",
        cluster.cpu_per_sample_us() - lone.cpu_per_sample_us(),
        cluster.cpu_per_sample_us() / lone.cpu_per_sample_us().max(f64::EPSILON),
        cluster.visibility_ms(0.5) - lone.visibility_ms(0.5),
        cluster.visibility_ms(0.99) - lone.visibility_ms(0.99),
    );
    Ok(())
}

fn print_report(name: &str, report: &RunReport, args: &HandoffArgs, series: usize) {
    println!("{}", report.outcome.line(name, args.connections, series));
    println!("  CPU: {:.2} s over the nodes, {:.2} µs per accepted sample", report.cpu_seconds, report.cpu_per_sample_us());
    let which = if report.alone { "visibility (the answer to the value in the store)" } else { "visibility at the owner, sent to another node" };
    println!(
        "  {which}: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} markers)",
        report.visibility_ms(0.5),
        report.visibility_ms(0.99),
        report.visibility_ms(1.0),
        report.visibility.len()
    );
    if !report.direct.is_empty() {
        println!(
            "  visibility at the owner, sent to the owner: p50 {:.0} ms, max {:.0} ms ({} markers)",
            percentile_ms(&report.direct, 0.5),
            percentile_ms(&report.direct, 1.0),
            report.direct.len()
        );
    }
}

/// Waits until the nodes are idle after the load: nothing waits in a handoff outbox and no
/// value was stored between two looks half a second apart (the dispatch queue drained), so the
/// markers time the hop, not the backlog.
async fn settle(nodes: &[Node]) -> Result<(), String> {
    let stored = async || -> Option<f64> {
        let mut total = 0.0;
        for node in nodes {
            let text = node.admin.get("/metrics").await.ok()?.text();
            for line in text.lines() {
                if line.starts_with("hotrule_handoff_outbox_records ") && !line.ends_with(" 0") {
                    return None;
                }
                if line.starts_with("hotrule_values_stored_total") {
                    total += line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
                }
            }
        }
        Some(total)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = None;
    while Instant::now() < deadline {
        let now = stored().await;
        if now.is_some() && now == last {
            return Ok(());
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err("the nodes did not settle within 120 s after the load".into())
}

/// `getconf CLK_TCK`: the unit of `/proc/<pid>/stat` times.
fn ticks_per_second() -> Result<f64, String> {
    let output = std::process::Command::new("getconf").arg("CLK_TCK").output().map_err(|e| format!("getconf CLK_TCK: {e}"))?;
    String::from_utf8_lossy(&output.stdout).trim().parse::<f64>().map_err(|e| format!("getconf CLK_TCK: {e}"))
}

/// One run: `count` nodes on `127.0.<net>.x`, the load, then the markers.
async fn measure(bin: &Path, args: &HandoffArgs, stream: &Arc<Stream>, count: usize, net: u8, ticks: f64) -> Result<RunReport, String> {
    let dir = args.dir.join(format!("{count}-nodes"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let secret = dir.join("secret");
    std::fs::write(&secret, "bench-handoff-secret").map_err(|e| e.to_string())?;
    let mut nodes = Vec::new();
    for i in 1..=count {
        let (mut command, host) = node_command_with_rules(bin, &dir, net, i, &secret, &args.rules_dir)?;
        let data = format!("{host}:17131");
        let child = command
            .args(["--data-listen", &data, "--set", "log.level=warn"])
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", bin.display()))?;
        let id = format!("{host}:17128");
        let admin = AdminClient::new(&id, None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(10));
        nodes.push(Node { child, admin, id, write_url: format!("http://{data}/api/v1/write") });
    }
    wait_for(&format!("{count} nodes to see each other"), Duration::from_secs(120), async || {
        for node in &nodes {
            let status = node.admin.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
            let live = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
            if live != count {
                return false;
            }
        }
        true
    })
    .await?;
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "bench_handoff")]);
    let reply = nodes[0].admin.post(&path, MARKER_RULE.as_bytes().to_vec()).await.map_err(|e| e.to_string())?;
    if !reply.status.is_success() {
        return Err(format!("the marker rule: {} {}", reply.status, reply.text()));
    }
    wait_for("the marker rule on every node", Duration::from_secs(60), async || {
        for node in &nodes {
            let ok = node.admin.get("/runtime/rule?catalog=otel-rules&name=bench_handoff").await.is_ok_and(|r| r.status.is_success());
            if !ok {
                return false;
            }
        }
        true
    })
    .await?;

    let urls: Vec<String> = nodes.iter().map(|n| n.write_url.clone()).collect();
    let cpu = |nodes: &[Node]| -> Result<f64, String> { nodes.iter().map(|n| n.cpu_seconds(ticks)).sum() };
    let before = cpu(&nodes)?;
    let outcome = run_stream(&urls, stream.clone(), args.connections, Duration::from_secs(args.seconds)).await;
    let cpu_seconds = cpu(&nodes)? - before;
    if outcome.accepted_samples == 0 {
        return Err(format!("{count} nodes accepted no sample: {:?}", outcome.errors));
    }
    settle(&nodes).await?;
    let (visibility, direct) = markers(&nodes, args.markers, net).await?;
    Ok(RunReport { outcome, cpu_seconds, visibility, direct, alone: count == 1 })
}

/// Sends marker `m` to node `m % n` and times its arrival in its owner's store: the delays of
/// markers sent to another node than the owner, and of those sent to the owner.
async fn markers(nodes: &[Node], count: usize, net: u8) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let ids: Vec<NodeId> = nodes.iter().map(|n| NodeId(n.id.clone())).collect();
    let live = LiveSet::new(ids[0].clone(), ids.clone());
    let http = client();
    let (mut handed, mut direct) = (Vec::with_capacity(count), Vec::new());
    for m in 0..count {
        let service = format!("marker-{net}-{m}");
        let mut entity = Entity::new(hotrule_mal_engine::ScopeType::Service);
        entity.service_name = service.clone();
        entity.layer = "GENERAL".to_string();
        let owner = live.owner(&owner_key(&entity));
        let owner_node = nodes.iter().find(|n| n.id == owner.0).ok_or("the owner is not a node")?;
        let receiver = &nodes[m % nodes.len()];
        let now = crate::base::clock::wall_clock_ms();
        send(&http, &receiver.write_url, marker_request(&service, now)).await.map_err(|(kind, answer)| format!("marker {m}: {kind} {answer}"))?;
        let acked = Instant::now();
        let minute = (now - now.rem_euclid(60_000)).to_string();
        let read = with_query(
            "/query/metrics",
            &[("name", "bench_handoff_marker"), ("service", &service), ("start", &minute), ("end", &minute), ("cluster", "false")],
        );
        let arrived = async {
            while acked.elapsed() < MARKER_TIMEOUT {
                let body = owner_node.admin.get(&read).await.ok().and_then(|r| r.json()).unwrap_or_default();
                if body["series"][0]["points"][0]["value"] == 1 {
                    return Some(acked.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            None
        };
        match arrived.await {
            Some(delay) if nodes.len() > 1 && receiver.id == owner.0 => direct.push(delay),
            Some(delay) => handed.push(delay),
            None => return Err(format!("marker {m} never reached its owner {owner} within {MARKER_TIMEOUT:?}")),
        }
    }
    Ok((handed, direct))
}

/// One remote-write request: `bench_marker{svc=<service>} 1` at `at_ms`.
fn marker_request(service: &str, at_ms: i64) -> Vec<u8> {
    let label = |name: &str, value: &str| prompb::Label { name: name.to_string(), value: value.to_string() };
    let request = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries {
            labels: vec![label("__name__", "bench_marker"), label("svc", service)],
            samples: vec![prompb::Sample { value: 1.0, timestamp: at_ms }],
            exemplars: Vec::new(),
        }],
        metadata: Vec::new(),
    };
    snap::raw::Encoder::new().compress_vec(&request.encode_to_vec()).unwrap_or_default()
}
