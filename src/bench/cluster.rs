//! `hotrule bench cluster`: real node processes on loopback addresses with default gossip and
//! scan settings. Measures healthy-commit visibility (from the 200 to the moment every node's
//! `/runtime/rule` returns the new contentHash) and failover (from kill -9 of the main to the
//! first write the new main accepts).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::{AdminClient, with_query};

pub(super) struct Node {
    pub(super) child: Child,
    pub(super) client: AdminClient,
    pub(super) id: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rule(step: usize) -> Vec<u8> {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: bench_cluster\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{}M')\n",
        step % 50 + 1
    )
    .into_bytes()
}

pub(super) fn spawn(bin: &Path, dir: &Path, net: u8, i: usize, secret: &Path) -> Result<Node, String> {
    spawn_with(bin, dir, net, i, secret, &[])
}

pub(super) fn spawn_with(bin: &Path, dir: &Path, net: u8, i: usize, secret: &Path, extra: &[&str]) -> Result<Node, String> {
    let (mut command, host) = node_command(bin, dir, net, i, secret)?;
    let child = command.args(extra).spawn().map_err(|e| format!("spawning {}: {e}", bin.display()))?;
    let client = AdminClient::new(&format!("{host}:17128"), None).map_err(|e| e.to_string())?;
    Ok(Node { child, client, id: format!("{host}:17128") })
}

/// The `hotrule serve` command of node `i` of a loopback cluster, and its host
/// `127.0.<net>.<i+1>`: admin on :17128, bus on :17129, gossip on :17130, seeded with node 1,
/// the bus secret from `secret`, no bundled rules, stderr to `dir/n<i>.log`. Shared with the
/// real-process cluster tests; callers add flags and environment before spawning.
pub fn node_command(bin: &Path, dir: &Path, net: u8, i: usize, secret: &Path) -> Result<(Command, String), String> {
    let host = format!("127.0.{net}.{}", i + 1);
    let log = std::fs::File::create(dir.join(format!("n{i}.log"))).map_err(|e| e.to_string())?;
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .args(["--data-dir", &dir.join(format!("n{i}")).display().to_string()])
        .args(["--admin-listen", &format!("{host}:17128")])
        .args(["--gossip-listen", &format!("{host}:17130")])
        .args(["--bus-listen", &format!("{host}:17129")])
        .args(["--seed", &format!("127.0.{net}.2:17130")])
        .args(["--cluster-secret-file", &secret.display().to_string(), "--rules-dir", "no-bundled-rules"])
        .env_remove("HOTRULE_ADMIN_TOKEN")
        .env_remove("HOTRULE_CLUSTER_SECRET")
        .stdout(Stdio::null())
        .stderr(log);
    Ok((command, host))
}

pub(super) async fn wait_for(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("timed out waiting for {what}"))
}

async fn stored_hash(client: &AdminClient) -> Option<String> {
    let reply = client.get("/runtime/rule?catalog=otel-rules&name=bench").await.ok()?;
    reply.headers.get("x-sw-content-hash")?.to_str().ok().map(str::to_string)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

pub async fn run(dir: &Path, nodes: usize, writes: usize, net: u8) -> Result<(), String> {
    if !(2..=9).contains(&nodes) {
        return Err("--nodes must be 2..9".into());
    }
    let bin = std::env::current_exe().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let secret = dir.join("secret");
    std::fs::write(&secret, "bench-cluster-secret").map_err(|e| e.to_string())?;
    let mut cluster = Vec::new();
    for i in 1..=nodes {
        cluster.push(spawn(&bin, dir, net, i, &secret)?);
    }
    let main_id = cluster[0].id.clone();
    for node in &cluster {
        wait_for(&format!("{} to agree on the main", node.id), Duration::from_secs(60), async || {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json());
            status.is_some_and(|s| {
                s["main"] == main_id.as_str() && s["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == nodes)
            })
        })
        .await?;
    }
    eprintln!("{nodes} nodes agree on main {main_id}; {writes} commits...");
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "bench")]);
    let mut visible = Vec::with_capacity(writes);
    for w in 0..writes {
        let content = rule(w);
        let hash = crate::ids::ContentHash::of(&content).0;
        let reply = cluster[0].client.post(&path, content).await.map_err(|e| e.to_string())?;
        if !reply.status.is_success() {
            return Err(format!("write {w}: {} {}", reply.status, reply.text()));
        }
        let acked = Instant::now();
        let mut slowest = Duration::ZERO;
        let polls: Vec<_> = cluster
            .iter()
            .map(|node| {
                let client = node.client.clone();
                let hash = hash.clone();
                tokio::spawn(async move {
                    let deadline = acked + Duration::from_secs(60);
                    while Instant::now() < deadline {
                        if stored_hash(&client).await.as_deref() == Some(hash.as_str()) {
                            return Some(acked.elapsed());
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    None
                })
            })
            .collect();
        for poll in polls {
            match poll.await {
                Ok(Some(seen)) => slowest = slowest.max(seen),
                _ => return Err(format!("write {w} not visible on every node within 60 s")),
            }
        }
        visible.push(slowest);
    }
    visible.sort();
    println!(
        "healthy commit visible on all {nodes} nodes: p50 {:?}, p99 {:?}, max {:?} ({writes} commits)",
        percentile(&visible, 0.5),
        percentile(&visible, 0.99),
        visible.last().copied().unwrap_or_default()
    );

    // Failover: kill -9 the main, then write through node 2 until the new main accepts.
    let mut main = cluster.remove(0);
    let killed = Instant::now();
    let _ = main.child.kill();
    let _ = main.child.wait();
    let mut attempts = 0;
    loop {
        attempts += 1;
        if killed.elapsed() > Duration::from_secs(120) {
            return Err("no write accepted within 120 s of killing the main".into());
        }
        let reply = cluster[0].client.post(&path, rule(10_000 + attempts)).await;
        if reply.is_ok_and(|r| r.status.is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("failover: first write accepted {:?} after kill -9 of the main ({attempts} attempts)", killed.elapsed());
    Ok(())
}
