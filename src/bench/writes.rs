//! Write and list benchmarks against an in-process node on RocksDB over loopback HTTP.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::client::{AdminClient, with_query};
use crate::node::testing::NodeBuilder;
use crate::node::{NodeSettings, RunningNode};
use crate::store::kv::KvEngine;

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: PREFIX
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc']).rate('PT1M')
";

fn rule(prefix: &str, minutes: usize) -> Vec<u8> {
    RULE.replace("PREFIX", prefix).replace("PT1M", &format!("PT{}M", minutes % 2 + 1)).into_bytes()
}

#[cfg(feature = "rocksdb")]
fn engine(path: &Path) -> Result<Arc<dyn KvEngine>, String> {
    Ok(Arc::new(crate::store::kv::RocksEngine::open(path).map_err(|e| e.to_string())?))
}

#[cfg(not(feature = "rocksdb"))]
fn engine(_path: &Path) -> Result<Arc<dyn KvEngine>, String> {
    Err("benchmarks need the rocksdb feature".into())
}

async fn start(dir: &Path, name: &str) -> Result<(RunningNode, AdminClient), String> {
    let data = dir.join(name);
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let settings = NodeSettings { lock_timeout: Duration::from_secs(35), ..NodeSettings::for_test() };
    let settings = NodeSettings { scan: crate::control::scan::ScanSettings::default(), ..settings };
    let node = NodeBuilder::new(settings).start(engine(&data.join("db"))?, listener).await.map_err(|e| e.to_string())?;
    let client = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?;
    Ok((node, client))
}

async fn push(client: &AdminClient, name: &str, content: Vec<u8>, expect: &str) -> Result<Duration, String> {
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", name)]);
    let start = Instant::now();
    let reply = client.post(&path, content).await.map_err(|e| e.to_string())?;
    let took = start.elapsed();
    let status = reply.json().and_then(|j| j["applyStatus"].as_str().map(str::to_string)).unwrap_or_default();
    if status != expect {
        return Err(format!("{name}: expected {expect}, got {} {}", reply.status, reply.text()));
    }
    Ok(took)
}

/// Synced 4 KiB writes per second on this disk (like `dd bs=4k oflag=dsync`).
fn disk_sync_rate(dir: &Path, writes: usize) -> Result<f64, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("dsync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_DSYNC)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let block = [0u8; 4096];
    let start = Instant::now();
    for _ in 0..writes {
        file.write_all(&block).map_err(|e| e.to_string())?;
    }
    let rate = writes as f64 / start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

/// Synced single-put batches per second straight into RocksDB (the storage floor of a write).
fn engine_sync_rate(dir: &Path, writes: usize) -> Result<f64, String> {
    use crate::store::kv::KvOp;
    let path = dir.join("engine-probe");
    let _ = std::fs::remove_dir_all(&path);
    let engine = engine(&path)?;
    let value = vec![7u8; 512];
    let start = Instant::now();
    for i in 0..writes {
        let op = KvOp::Put { key: format!("probe/{}", i % 16).into_bytes(), value: value.clone() };
        engine.write(&[op], true).map_err(|e| e.to_string())?;
    }
    let rate = writes as f64 / start.elapsed().as_secs_f64();
    drop(engine);
    let _ = std::fs::remove_dir_all(&path);
    Ok(rate)
}

/// Sequential `GET /healthz` round trips per second (the HTTP floor of a write).
async fn http_floor(client: &AdminClient, requests: usize) -> Result<f64, String> {
    let start = Instant::now();
    for _ in 0..requests {
        client.get("/healthz").await.map_err(|e| e.to_string())?;
    }
    Ok(requests as f64 / start.elapsed().as_secs_f64())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub async fn run(dir: &Path, sequential: usize, clients: usize, per_client: usize) -> Result<(), String> {
    const ROUNDS: usize = 5;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (node, client) = start(dir, "writes").await?;
    let http_floor = http_floor(&client, 2000).await?;
    push(&client, "seq", rule("seq", 0), "structural_applied").await?;

    // The disk's speed drifts with whatever else the machine does, so each round measures the
    // disk right before its own round trips and the ratio is taken per round.
    let per_round = sequential.div_ceil(ROUNDS).max(1);
    let mut latencies = Vec::with_capacity(per_round * ROUNDS);
    let (mut disk_writes, mut disk_secs, mut trips, mut trip_secs) = (0usize, 0f64, 0usize, 0f64);
    let mut counter = 0usize;
    println!("round  disk O_DSYNC 4KiB writes/s  sequential filter-only round trips/s  ratio");
    for round in 1..=ROUNDS {
        let probe = 400;
        let disk = disk_sync_rate(dir, probe)?;
        let start = Instant::now();
        for _ in 0..per_round {
            counter += 1;
            latencies.push(push(&client, "seq", rule("seq", counter), "filter_only_applied").await?);
        }
        let secs = start.elapsed().as_secs_f64();
        let rate = per_round as f64 / secs;
        println!("{round:>5}  {disk:>27.0}  {rate:>37.0}  {:>4.0}%", 100.0 * rate / disk);
        disk_writes += probe;
        disk_secs += probe as f64 / disk;
        trips += per_round;
        trip_secs += secs;
    }
    let disk = disk_writes as f64 / disk_secs;
    let seq_rate = trips as f64 / trip_secs;
    latencies.sort();

    eprintln!("concurrent: {clients} clients x {per_client} round trips on their own files...");
    for c in 0..clients {
        push(&client, &format!("c{c}"), rule(&format!("c{c}"), 0), "structural_applied").await?;
    }
    let disk_before = disk_sync_rate(dir, 400)?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("c{c}");
            for i in 1..=per_client {
                push(&client, &name, rule(&name, i), "filter_only_applied").await?;
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let concurrent_rate = (clients * per_client) as f64 / start.elapsed().as_secs_f64();
    node.shutdown().await;
    let engine_rate = engine_sync_rate(dir, 1000)?;

    println!("total  {disk:>27.0}  {seq_rate:>37.0}  {:>4.0}%", 100.0 * seq_rate / disk);
    println!(
        "sequential latency: p50 {:?}, p99 {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    println!(
        "concurrent filter-only round trips/s ({clients} clients, own files): {concurrent_rate:.0} (disk just before: {disk_before:.0} writes/s)"
    );
    println!("floor: GET /healthz round trips/s over loopback HTTP, no storage: {http_floor:.0}");
    println!("floor: RocksDB synced 512-byte batches/s, in-process, no HTTP: {engine_rate:.0}");
    Ok(())
}

pub async fn list(dir: &Path, rules: usize, requests: usize) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (node, client) = start(dir, "list").await?;
    eprintln!("storing {rules} rules...");
    let mut tasks = Vec::new();
    for chunk in 0..16usize {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = chunk;
            while i < rules {
                push(&client, &format!("bulk/r{i}"), rule(&format!("r{i}"), 0), "structural_applied").await?;
                i += 16;
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let mut latencies = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        let reply = client.get("/runtime/rule/list").await.map_err(|e| e.to_string())?;
        latencies.push(start.elapsed());
        if !reply.status.is_success() {
            return Err(format!("list answered {}", reply.status));
        }
    }
    let rows = client
        .get("/runtime/rule/list")
        .await
        .map_err(|e| e.to_string())?
        .json()
        .and_then(|j| j["rules"].as_array().map(Vec::len))
        .unwrap_or(0);
    node.shutdown().await;
    latencies.sort();
    println!(
        "GET /runtime/rule/list with {rows} rules, {requests} sequential requests: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default()
    );
    Ok(())
}
