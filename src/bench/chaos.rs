//! `hotrule bench chaos`: randomized rounds of writes, kill -9, restarts and partitions on a
//! cluster of real node processes, then a check that no acknowledged write was lost.
//!
//! Nodes listen on 127.0.<net>.x. Partitions are iptables DROP rules between two of those
//! loopback addresses, in a dedicated chain that is removed at the end (root and iptables are
//! needed; without them partition rounds are skipped and the report says so). Every loop is
//! bounded in count and in time.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::cluster::{Node, spawn_with};
use crate::api::client::with_query;

const CHAIN: &str = "HR-CHAOS";

fn iptables(args: &[&str]) -> bool {
    Command::new("iptables").args(args).output().is_ok_and(|o| o.status.success())
}

/// Loopback partitions between node addresses, removed on drop.
struct Partitions {
    enabled: bool,
}

impl Partitions {
    fn new() -> Partitions {
        let enabled = iptables(&["-N", CHAIN]) || iptables(&["-F", CHAIN]);
        let enabled = enabled && (iptables(&["-C", "INPUT", "-j", CHAIN]) || iptables(&["-I", "INPUT", "-j", CHAIN]));
        Partitions { enabled }
    }

    fn cut(&self, a: &str, b: &str) {
        if self.enabled {
            iptables(&["-A", CHAIN, "-s", a, "-d", b, "-j", "DROP"]);
            iptables(&["-A", CHAIN, "-s", b, "-d", a, "-j", "DROP"]);
        }
    }

    fn heal_all(&self) {
        if self.enabled {
            iptables(&["-F", CHAIN]);
        }
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        if self.enabled {
            iptables(&["-D", "INPUT", "-j", CHAIN]);
            iptables(&["-F", CHAIN]);
            iptables(&["-X", CHAIN]);
        }
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

fn parse_revision(text: &str) -> Option<(u64, u32, String)> {
    let (clock, node) = text.split_once('@')?;
    let (millis, counter) = clock.split_once('.')?;
    Some((millis.parse().ok()?, counter.parse().ok()?, node.to_string()))
}

fn rule(key: &str, n: u64) -> Vec<u8> {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: chaos_{key}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{}M')\n",
        n % 1000 + 1
    )
    .into_bytes()
}

pub async fn run(dir: &Path, rounds: usize, seed: u64, net: u8, time_limit: Duration, sets: &[String]) -> Result<(), String> {
    const NODES: usize = 3;
    let bin = std::env::current_exe().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let secret = dir.join("secret");
    std::fs::write(&secret, "bench-chaos-secret").map_err(|e| e.to_string())?;
    let mut fast = vec!["--scan-interval", "1", "--self-heal-threshold", "3"];
    for set in sets {
        fast.extend(["--set", set.as_str()]);
    }
    let fast = fast.as_slice();
    let host = |i: usize| format!("127.0.{net}.{}", i + 1);
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for i in 1..=NODES {
        nodes.push(Some(spawn_with(&bin, dir, net, i, &secret, fast)?));
    }
    let partitions = Partitions::new();
    if !partitions.enabled {
        eprintln!("note: iptables unavailable or not root; partition rounds are skipped");
    }
    let mut rng = Rng(seed | 1);
    let keys = ["k0", "k1", "k2", "k3", "k4"];
    let mut acked: Vec<(String, (u64, u32, String), String)> = Vec::new();
    let (mut attempted, mut counter, mut kills, mut partitions_run) = (0usize, 0u64, 0usize, 0usize);
    let started = Instant::now();
    let mut rounds_run = 0;
    for _ in 0..rounds {
        if started.elapsed() > time_limit {
            eprintln!("time limit reached");
            break;
        }
        rounds_run += 1;
        let action = rng.below(4);
        let victim = 1 + rng.below(NODES);
        match action {
            1 => {
                if let Some(mut node) = nodes[victim - 1].take() {
                    let _ = node.child.kill();
                    let _ = node.child.wait();
                    kills += 1;
                }
            }
            2 if partitions.enabled => {
                for other in (1..=NODES).filter(|o| *o != victim) {
                    partitions.cut(&host(victim), &host(other));
                }
                partitions_run += 1;
                // Let failure detection split the cluster, so both sides take writes.
                tokio::time::sleep(Duration::from_millis(3_000)).await;
            }
            _ => {}
        }
        for _ in 0..(2 + rng.below(4)) {
            let node = 1 + rng.below(NODES);
            let Some(target) = nodes[node - 1].as_ref() else { continue };
            let key = keys[rng.below(keys.len())];
            counter += 1;
            attempted += 1;
            let content = rule(key, counter);
            let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", key)]);
            if let Ok(reply) = target.client.post(&path, content.clone()).await
                && reply.status.is_success()
            {
                let json = reply.json().unwrap_or_default();
                let revision = json["revision"].as_str().and_then(parse_revision).ok_or("a 200 without a revision")?;
                acked.push((key.to_string(), revision, crate::base::ids::ContentHash::of(&content).0));
            }
        }
        match action {
            1 => {
                nodes[victim - 1] = Some(spawn_with(&bin, dir, net, victim, &secret, fast)?);
            }
            2 => partitions.heal_all(),
            3 => {
                // kill -9 node 1, which is the main whenever it is live, then restart it.
                let main = 1;
                if let Some(mut node) = nodes[main - 1].take() {
                    let _ = node.child.kill();
                    let _ = node.child.wait();
                    kills += 1;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                nodes[main - 1] = Some(spawn_with(&bin, dir, net, main, &secret, fast)?);
            }
            _ => {}
        }
    }
    partitions.heal_all();
    eprintln!("{rounds_run} rounds done; converging...");
    // Every node must hold the same entries, applied, within a bound.
    let deadline = Instant::now() + Duration::from_secs(120);
    let states = loop {
        let mut views = Vec::new();
        let mut applied = true;
        for node in nodes.iter().flatten() {
            let list = node.client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
            let rows = list["rules"].as_array().cloned().unwrap_or_default();
            applied &= rows.iter().all(|r| r["appliedContentHash"] == r["contentHash"]);
            let view: BTreeMap<String, (String, String)> = rows
                .iter()
                .map(|r| {
                    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                    (s("name"), (s("revision"), s("contentHash")))
                })
                .collect();
            views.push(view);
        }
        if applied && views.len() == NODES && views.windows(2).all(|w| w[0] == w[1]) {
            break views;
        }
        if Instant::now() > deadline {
            return Err("the cluster did not converge within 120 s after the last round".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let final_state = &states[0];
    let mut lost = 0;
    for (key, revision, hash) in &acked {
        match final_state.get(key).and_then(|(rev, h)| parse_revision(rev).map(|r| (r, h))) {
            Some((final_rev, final_hash)) if *revision < final_rev || (*revision == final_rev && hash == final_hash) => {}
            _ => {
                lost += 1;
                eprintln!("LOST: {key} acknowledged at {revision:?}");
            }
        }
    }
    println!(
        "chaos: {rounds_run} rounds ({kills} kill -9, {partitions_run} partitions), {attempted} writes attempted, {} acknowledged, {lost} acknowledged writes lost, in {:?}",
        acked.len(),
        started.elapsed()
    );
    if lost > 0 {
        return Err(format!("{lost} acknowledged writes lost"));
    }
    Ok(())
}
