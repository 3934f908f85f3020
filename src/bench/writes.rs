//! Write and list benchmarks against an in-process node on RocksDB over loopback HTTP.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{AdminClient, with_query};
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
    let settings = NodeSettings { scan: crate::scan::ScanSettings::default(), ..settings };
    let node = RunningNode::start(settings, engine(&data.join("db"))?, listener).await.map_err(|e| e.to_string())?;
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub async fn run(dir: &Path, sequential: usize, clients: usize, per_client: usize) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!("measuring this disk's synced 4 KiB write rate...");
    let disk = disk_sync_rate(dir, 2000)?;
    let (node, client) = start(dir, "writes").await?;

    eprintln!("sequential: {sequential} filter-only round trips by one client...");
    push(&client, "seq", rule("seq", 0), "structural_applied").await?;
    let mut latencies = Vec::with_capacity(sequential);
    let start = Instant::now();
    for i in 1..=sequential {
        latencies.push(push(&client, "seq", rule("seq", i), "filter_only_applied").await?);
    }
    let seq_rate = sequential as f64 / start.elapsed().as_secs_f64();
    latencies.sort();

    eprintln!("concurrent: {clients} clients x {per_client} round trips on their own files...");
    for c in 0..clients {
        push(&client, &format!("c{c}"), rule(&format!("c{c}"), 0), "structural_applied").await?;
    }
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

    println!("disk synced 4KiB writes/s (O_DSYNC):          {disk:.0}");
    println!(
        "sequential filter-only round trips/s (1 client): {seq_rate:.0}  ({:.0}% of the disk rate; p50 {:?}, p99 {:?})",
        100.0 * seq_rate / disk,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    println!("concurrent filter-only round trips/s ({clients} clients): {concurrent_rate:.0}");
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
