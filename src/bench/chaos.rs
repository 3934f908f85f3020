//! `hotrule bench chaos`: randomized rounds of writes, kill -9, restarts and partitions on a
//! cluster of real node processes, then a check that no acknowledged write was lost.
//!
//! Nodes listen on 127.0.<net>.x. Partitions are iptables DROP rules between two of those
//! loopback addresses, in a dedicated chain that is removed at the end (root and iptables are
//! needed; without them partition rounds are skipped and the report says so). Every loop is
//! bounded in count and in time.

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

/// One planned write of a round.
#[derive(Debug, Clone)]
enum Write {
    Rule { key: &'static str, content: Vec<u8> },
    AlarmSettings { content: Vec<u8> },
    AgentConfig { name: &'static str, content: String },
}

/// What one writer saw in a round: acknowledged writes `(key, revision, content hash)` (alarm
/// settings under the key `alarm-settings`), and what its reads answered `(key, content hash)`.
#[derive(Default)]
struct Seen {
    acked: Vec<(String, (u64, u32, String), String)>,
    reads: Vec<(String, String)>,
}

const KEYS: [&str; 5] = ["k0", "k1", "k2", "k3", "k4"];
const ALARM_KEY: &str = "alarm-settings";

fn alarm_settings(n: u64) -> Vec<u8> {
    format!("rules:\n  chaos_rule:\n    expression: sum(chaos_load > {n}) >= 1\n    period: 10\n").into_bytes()
}

fn agent_config(n: u64) -> String {
    format!("enable: true\ninputs:\n  - Type: input_file\n    FilePaths: [/var/log/chaos-{n}.log]\nflushers:\n  - Type: flusher_stdout\n")
}

/// One writer's round on `client`: its writes, then a read of the rule list and the alarm settings.
async fn write_round(client: crate::api::client::AdminClient, writes: Vec<Write>) -> Result<Seen, String> {
    let mut seen = Seen::default();
    for write in writes {
        let (key, content, reply) = match &write {
            Write::Rule { key, content } => {
                let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", key)]);
                (key.to_string(), content.clone(), client.post(&path, content.clone()).await)
            }
            Write::AlarmSettings { content } => (ALARM_KEY.to_string(), content.clone(), client.post("/runtime/alarm/settings", content.clone()).await),
            Write::AgentConfig { name, content } => {
                let body = serde_json::json!({"kind": "pipeline", "name": name, "content": content, "format": "yaml"});
                let _ = client.post("/agent/configs", serde_json::to_vec(&body).unwrap_or_default()).await;
                continue;
            }
        };
        if let Ok(reply) = reply
            && reply.status.is_success()
        {
            let json = reply.json().unwrap_or_default();
            if json["applyStatus"] == "no_change" {
                continue;
            }
            let revision = json["revision"].as_str().and_then(parse_revision).ok_or_else(|| format!("a 200 without a revision: {json}"))?;
            seen.acked.push((key, revision, crate::base::ids::ContentHash::of(&content).0));
        }
    }
    if let Some(list) = client.get("/runtime/rule/list").await.ok().filter(|r| r.status.is_success()).and_then(|r| r.json()) {
        for row in list["rules"].as_array().map_or(&[][..], Vec::as_slice) {
            let name = row["name"].as_str().unwrap_or("");
            if row["catalog"] == "otel-rules" && KEYS.contains(&name) && row["status"] != "DELETED" {
                seen.reads.push((name.to_string(), row["contentHash"].as_str().unwrap_or("").to_string()));
            }
        }
    }
    if let Some(settings) = client.get("/runtime/alarm/settings").await.ok().filter(|r| r.status.is_success()).and_then(|r| r.json())
        && settings["source"] == "runtime"
    {
        seen.reads.push((ALARM_KEY.to_string(), settings["contentHash"].as_str().unwrap_or("").to_string()));
    }
    Ok(seen)
}

/// One node's view for the convergence check: rules, alarm settings, agent configs and the history
/// of the written keys (each revision with its content hash and status).
async fn view(client: &crate::api::client::AdminClient, history: bool) -> Option<serde_json::Value> {
    let get = |path: String| async move { client.get(&path).await.ok().filter(|r| r.status.is_success()).and_then(|r| r.json()) };
    let list = get("/runtime/rule/list".to_string()).await?;
    let mut rules: Vec<serde_json::Value> = list["rules"]
        .as_array()?
        .iter()
        .map(|r| serde_json::json!([r["catalog"], r["name"], r["revision"], r["contentHash"], r["status"], r["appliedContentHash"] == r["contentHash"]]))
        .collect();
    rules.sort_by_key(|r| r.to_string());
    let alarm = get("/runtime/alarm/settings".to_string()).await?;
    let configs = get("/agent/configs".to_string()).await?;
    let mut view = serde_json::json!({"rules": rules, "alarm": [alarm["revision"], alarm["contentHash"]], "agents": configs["configs"]});
    if history {
        for (catalog, name) in KEYS.iter().map(|k| ("otel-rules", *k)).chain([(ALARM_KEY, "alarm-settings")]) {
            let path = with_query("/runtime/rule/history", &[("catalog", catalog), ("name", name)]);
            let answer = client.get(&path).await.ok()?;
            let revisions: Vec<serde_json::Value> = match answer.status.as_u16() {
                404 => Vec::new(),
                200 => answer.json()?["revisions"].as_array()?.iter().map(|r| serde_json::json!([r["revision"], r["contentHash"], r["status"]])).collect(),
                _ => return None,
            };
            view[format!("history {catalog}/{name}")] = serde_json::Value::Array(revisions);
        }
    }
    Some(view)
}

/// What `bench chaos` runs.
pub struct ChaosBench {
    pub rounds: usize,
    pub seed: u64,
    pub net: u8,
    pub time_limit: Duration,
    /// Concurrent writers, writer `w` on node `w mod nodes` (or the next live one).
    pub writers: usize,
    /// Check the rule history of every written key too (`rules.history_max_revisions` should
    /// exceed the writes per key).
    pub history: bool,
}

pub async fn run(dir: &Path, bench: &ChaosBench, sets: &[String]) -> Result<(), String> {
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
    let net = bench.net;
    let host = |i: usize| format!("127.0.{net}.{}", i + 1);
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for i in 1..=NODES {
        nodes.push(Some(spawn_with(&bin, dir, net, i, &secret, fast)?));
    }
    let partitions = Partitions::new();
    if !partitions.enabled {
        eprintln!("note: iptables unavailable or not root; partition rounds are skipped");
    }
    let mut rng = Rng(bench.seed | 1);
    let writers = bench.writers.max(1);
    let mut acked: Vec<(String, (u64, u32, String), String)> = Vec::new();
    let mut reads: Vec<(String, String)> = Vec::new();
    let mut written: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let (mut attempted, mut counter, mut kills, mut partitions_run) = (0usize, 0u64, 0usize, 0usize);
    let started = Instant::now();
    let mut rounds_run = 0;
    for _ in 0..bench.rounds {
        if started.elapsed() > bench.time_limit {
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
        // One writer alone writes 2..5 rules a round; several write 1..3 each, at once, on
        // overlapping keys, now and then the alarm settings or an agent config too.
        let mut rounds_of_writers = Vec::new();
        for w in 0..writers {
            let home = (w % NODES..NODES).chain(0..w % NODES).find(|i| nodes[*i].is_some());
            let Some(client) = home.and_then(|i| nodes[i].as_ref()).map(|n| n.client.clone()) else { continue };
            let count = if writers == 1 { 2 + rng.below(4) } else { 1 + rng.below(3) };
            let mut writes = Vec::new();
            for _ in 0..count {
                counter += 1;
                attempted += 1;
                let write = match (writers > 1).then(|| rng.below(10)) {
                    Some(0) => Write::AlarmSettings { content: alarm_settings(counter) },
                    Some(1) => Write::AgentConfig { name: ["cfg-a", "cfg-b"][rng.below(2)], content: agent_config(counter) },
                    _ => {
                        let key = KEYS[rng.below(KEYS.len())];
                        Write::Rule { key, content: rule(key, counter) }
                    }
                };
                match &write {
                    Write::Rule { key, content } => written.insert((key.to_string(), crate::base::ids::ContentHash::of(content).0)),
                    Write::AlarmSettings { content } => written.insert((ALARM_KEY.to_string(), crate::base::ids::ContentHash::of(content).0)),
                    Write::AgentConfig { .. } => false,
                };
                writes.push(write);
            }
            rounds_of_writers.push(write_round(client, writes));
        }
        for seen in futures_util::future::join_all(rounds_of_writers).await {
            let seen = seen?;
            acked.extend(seen.acked);
            reads.extend(seen.reads);
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
    // Every node must hold the same entries (applied), alarm settings, agent configs and, when
    // checked, history, within a bound.
    let deadline = Instant::now() + Duration::from_secs(180);
    let states = loop {
        let mut views = Vec::new();
        for node in nodes.iter().flatten() {
            if let Some(view) = view(&node.client, bench.history).await {
                views.push(view);
            }
        }
        let applied = views.iter().all(|v| v["rules"].as_array().is_some_and(|rules| rules.iter().all(|r| r[5] == true)));
        if applied && views.len() == NODES && views.windows(2).all(|w| w[0] == w[1]) {
            break views;
        }
        if Instant::now() > deadline {
            return Err("the cluster did not converge within 180 s after the last round".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let final_state = &states[0];
    let current = |key: &str| -> Option<((u64, u32, String), String)> {
        if key == ALARM_KEY {
            let alarm = &final_state["alarm"];
            return Some((parse_revision(alarm[0].as_str()?)?, alarm[1].as_str()?.to_string()));
        }
        final_state["rules"].as_array()?.iter().find(|r| r[0] == "otel-rules" && r[1] == key).and_then(|r| {
            Some((parse_revision(r[2].as_str()?)?, r[3].as_str()?.to_string()))
        })
    };
    let mut lost = 0;
    for (key, revision, hash) in &acked {
        match current(key) {
            Some((final_rev, final_hash)) if *revision < final_rev || (*revision == final_rev && *hash == final_hash) => {}
            _ => {
                lost += 1;
                eprintln!("LOST: {key} acknowledged at {revision:?}");
            }
        }
    }
    let phantom_reads = reads.iter().filter(|read| !written.contains(*read)).count();
    for read in reads.iter().filter(|read| !written.contains(*read)) {
        eprintln!("PHANTOM READ: {read:?} was never written");
    }
    let (mut missing_from_history, mut phantom_history, mut history_revisions) = (0, 0, 0);
    if bench.history {
        for (key, revision, hash) in &acked {
            let catalog = if key == ALARM_KEY { ALARM_KEY } else { "otel-rules" };
            let name = if key == ALARM_KEY { "alarm-settings" } else { key.as_str() };
            let kept = final_state[format!("history {catalog}/{name}")].as_array().cloned().unwrap_or_default();
            let found = kept.iter().any(|r| r[0].as_str().and_then(parse_revision).as_ref() == Some(revision) && r[1] == hash.as_str());
            if !found {
                missing_from_history += 1;
                eprintln!("NOT IN HISTORY: {key} at {revision:?}");
            }
        }
        for (name, revisions) in final_state.as_object().into_iter().flatten().filter(|(name, _)| name.starts_with("history ")) {
            let key = if name.ends_with("/alarm-settings") { ALARM_KEY.to_string() } else { name.rsplit('/').next().unwrap_or("").to_string() };
            for r in revisions.as_array().into_iter().flatten() {
                history_revisions += 1;
                let hash = r[1].as_str().unwrap_or("").to_string();
                if r[2] != "DELETED" && !written.contains(&(key.clone(), hash)) {
                    phantom_history += 1;
                    eprintln!("PHANTOM HISTORY: {name} {r}");
                }
            }
        }
    }
    println!(
        "chaos: {rounds_run} rounds ({kills} kill -9, {partitions_run} partitions), {writers} writers, {attempted} writes attempted, {} acknowledged, {lost} acknowledged writes lost, {} reads with {phantom_reads} answering a value never written{}; {NODES} nodes converged to identical rules, alarm settings and agent configs{} in {:?}",
        acked.len(),
        reads.len(),
        if bench.history {
            format!(", history: {history_revisions} revisions kept, {missing_from_history} acknowledged writes missing, {phantom_history} never written")
        } else {
            String::new()
        },
        if bench.history { " and history" } else { "" },
        started.elapsed()
    );
    if lost + phantom_reads + missing_from_history + phantom_history > 0 {
        return Err(format!(
            "{lost} acknowledged writes lost, {phantom_reads} phantom reads, {missing_from_history} acknowledged writes missing from history, {phantom_history} history revisions never written"
        ));
    }
    Ok(())
}
