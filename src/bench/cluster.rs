//! `hotrule bench cluster`: real node processes on loopback addresses with default gossip and
//! scan settings. Measures healthy-commit visibility (from the 200 to the moment every node's
//! `/runtime/rule` returns the new contentHash) and failover: over N rounds of kill -9 of the
//! main, with one write every 50 ms through a surviving node that is not the next main, the
//! median time from the kill to the first accepted write sent after it, and how many writes sent
//! during the failover got an error (the forward wait should make that zero).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::api::client::{AdminClient, with_query};

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

/// The file client `client` rewrites in the throughput load: its own metric prefix (names are
/// owned by one file), and a window that changes every step (a filter-only change).
fn throughput_rule(client: usize, step: usize) -> Vec<u8> {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: bench_tp{client}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{}M')\n",
        step % 50 + 1
    )
    .into_bytes()
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
    node_command_with_rules(bin, dir, net, i, secret, Path::new("no-bundled-rules"))
}

/// [`node_command`] with the bundled rules of `rules_dir`.
pub fn node_command_with_rules(bin: &Path, dir: &Path, net: u8, i: usize, secret: &Path, rules_dir: &Path) -> Result<(Command, String), String> {
    let host = format!("127.0.{net}.{}", i + 1);
    let log = std::fs::File::create(dir.join(format!("n{i}.log"))).map_err(|e| e.to_string())?;
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .args(["--data-dir", &dir.join(format!("n{i}")).display().to_string()])
        .args(["--admin-listen", &format!("{host}:17128")])
        .args(["--gossip-listen", &format!("{host}:17130")])
        .args(["--bus-listen", &format!("{host}:17129")])
        .args(["--grpc-listen", &format!("{host}:11800")])
        .args(["--seed", &format!("127.0.{net}.2:17130")])
        .args(["--cluster-secret-file", &secret.display().to_string(), "--rules-dir", &rules_dir.display().to_string()])
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

/// What `bench cluster` runs, besides the nodes and the healthy commits.
#[derive(Debug, Clone)]
pub struct ClusterBench {
    pub failover_rounds: usize,
    /// Settings passed to every node (`--set`).
    pub sets: Vec<String>,
    /// A closed-loop write load on the main (clients, duration); none: skipped.
    pub throughput: Option<(usize, Duration)>,
}

pub async fn run(dir: &Path, nodes: usize, writes: usize, net: u8, bench: &ClusterBench) -> Result<(), String> {
    let (failover_rounds, sets) = (bench.failover_rounds, &bench.sets);
    let extra: Vec<String> = sets.iter().flat_map(|set| ["--set".to_string(), set.clone()]).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
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
        cluster.push(spawn_with(&bin, dir, net, i, &secret, &extra)?);
    }
    let main_id = cluster[0].id.clone();
    wait_agreement(&cluster.iter().collect::<Vec<_>>(), &main_id, nodes).await?;
    eprintln!("{nodes} nodes agree on main {main_id}; {writes} commits...");
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "bench")]);
    let mut visible = Vec::with_capacity(writes);
    for w in 0..writes {
        let content = rule(w);
        let hash = crate::base::ids::ContentHash::of(&content).0;
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

    if let Some((clients, duration)) = bench.throughput {
        // Each client rewrites its own file (filter-only changes: a synced write, plus the peer
        // confirmations `cluster.commit_replicas` asks for).
        let main = cluster[0].client.clone();
        let run = super::throughput::closed_loop(clients, duration, move |client, step| {
            let main = main.clone();
            async move {
                let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", &format!("tp-{client}"))]);
                match main.post(&path, throughput_rule(client, step)).await {
                    Ok(reply) if reply.status.is_success() => true,
                    Ok(reply) => {
                        if step == 0 {
                            eprintln!("  client {client}: {} {}", reply.status, reply.text());
                        }
                        false
                    }
                    Err(e) => {
                        if step == 0 {
                            eprintln!("  client {client}: {e}");
                        }
                        false
                    }
                }
            }
        })
        .await;
        println!("{}", run.line(&format!("writes to the main of {nodes} nodes ({})", sets.join(" "))));
    }

    let (main, rest) = cluster.split_first_mut().ok_or("no nodes")?;
    let through_id = rest.last().ok_or("no surviving node")?.id.clone();
    eprintln!("failover: {failover_rounds} rounds of kill -9 of the main, one write every 50 ms through {through_id}");
    let mut rounds = Vec::with_capacity(failover_rounds);
    for round in 1..=failover_rounds {
        let result = failover_round(&bin, dir, net, &secret, &extra, main, rest, &path).await?;
        eprintln!(
            "  round {round}: first write accepted {:?} after kill -9; {} of {} writes sent during the failover failed",
            result.first_accepted, result.errors, result.sent
        );
        rounds.push(result);
    }
    let summary = FailoverSummary::of(&rounds);
    println!(
        "failover ({} rounds, one write every 50 ms through {}): kill -9 to first accepted write median {:?} (min {:?}, max {:?}); client-visible errors {} of {} writes sent after the kill ({} rounds with errors)",
        rounds.len(),
        through_id,
        summary.median,
        summary.min,
        summary.max,
        summary.errors,
        summary.sent,
        summary.rounds_with_errors
    );
    Ok(())
}

/// What one failover round measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverRound {
    /// From kill -9 to the first 200 for a write sent after it.
    pub first_accepted: Duration,
    /// Writes sent from the kill until the writer stopped, and how many of them did not get 200.
    pub sent: usize,
    pub errors: usize,
}

/// One write of a round: when it was sent and answered, relative to the kill (negative: before
/// it), and its HTTP status (0: no answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    pub sent_ms: i64,
    pub answered_ms: i64,
    pub status: u16,
}

impl FailoverRound {
    /// The round's figures from its write log; `None` if no write sent after the kill was accepted.
    pub fn of(log: &[WriteRecord]) -> Option<FailoverRound> {
        let after: Vec<&WriteRecord> = log.iter().filter(|w| w.sent_ms >= 0).collect();
        let first = after.iter().filter(|w| w.status == 200).map(|w| w.answered_ms).min()?;
        Some(FailoverRound {
            first_accepted: Duration::from_millis(first.max(0) as u64),
            sent: after.len(),
            errors: after.iter().filter(|w| w.status != 200).count(),
        })
    }
}

/// The figures over every round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverSummary {
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
    pub sent: usize,
    pub errors: usize,
    pub rounds_with_errors: usize,
}

impl FailoverSummary {
    pub fn of(rounds: &[FailoverRound]) -> FailoverSummary {
        let mut times: Vec<Duration> = rounds.iter().map(|r| r.first_accepted).collect();
        times.sort();
        let median = match times.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => times[n / 2],
            n => (times[n / 2 - 1] + times[n / 2]) / 2,
        };
        FailoverSummary {
            median,
            min: times.first().copied().unwrap_or_default(),
            max: times.last().copied().unwrap_or_default(),
            sent: rounds.iter().map(|r| r.sent).sum(),
            errors: rounds.iter().map(|r| r.errors).sum(),
            rounds_with_errors: rounds.iter().filter(|r| r.errors > 0).count(),
        }
    }
}

/// Waits until every node sees `main_id` as main and `live` live members.
async fn wait_agreement(nodes: &[&Node], main_id: &str, live: usize) -> Result<(), String> {
    for node in nodes {
        wait_for(&format!("{} to agree on the main {main_id}", node.id), Duration::from_secs(60), async || {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json());
            status.is_some_and(|s| {
                s["main"] == main_id && s["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == live)
            })
        })
        .await?;
    }
    Ok(())
}

/// Kills the main (node 1) with SIGKILL while a writer sends one write every 50 ms through the
/// last node, until 1 s after the first write the new main accepts; then restarts node 1 and
/// waits for it to be the main again.
#[allow(clippy::too_many_arguments)]
async fn failover_round(
    bin: &Path,
    dir: &Path,
    net: u8,
    secret: &Path,
    extra: &[&str],
    main: &mut Node,
    rest: &[Node],
    path: &str,
) -> Result<FailoverRound, String> {
    let through = rest.last().ok_or("no surviving node")?.client.clone();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<WriteRecord>::new()));
    let accepted_after_kill = std::sync::Arc::new(tokio::sync::Notify::new());
    let killed_at = std::sync::Arc::new(std::sync::OnceLock::<Instant>::new());
    let stop = tokio_util::sync::CancellationToken::new();
    let writer = {
        let (log, accepted, killed_at, stop) = (log.clone(), accepted_after_kill.clone(), killed_at.clone(), stop.clone());
        let path = path.to_string();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            let mut writes = Vec::new();
            for step in 0..2_400usize {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let (client, path, log, accepted, killed_at) = (through.clone(), path.clone(), log.clone(), accepted.clone(), killed_at.clone());
                writes.push(tokio::spawn(async move {
                    let sent = Instant::now();
                    let status = match client.post(&path, rule(20_000 + step)).await {
                        Ok(reply) => reply.status.as_u16(),
                        Err(_) => 0,
                    };
                    let answered = Instant::now();
                    let Some(killed) = killed_at.get().copied() else { return };
                    let relative = |at: Instant| match at.checked_duration_since(killed) {
                        Some(after) => after.as_millis() as i64,
                        None => -(killed.duration_since(at).as_millis() as i64),
                    };
                    let record = WriteRecord { sent_ms: relative(sent), answered_ms: relative(answered), status };
                    if record.sent_ms >= 0 && status == 200 {
                        accepted.notify_one();
                    }
                    if let Ok(mut log) = log.lock() {
                        log.push(record);
                    }
                }));
            }
            for write in writes {
                let _ = write.await;
            }
        })
    };
    // A few healthy writes first, so the kill lands in a steady stream.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The clock starts once the process is gone (kill -9, then reaped): a write sent before
    // that may have reached the main while it still ran, and is in flight, not after the kill.
    let _ = main.child.kill();
    let _ = main.child.wait();
    let _ = killed_at.set(Instant::now());
    let accepted = tokio::time::timeout(Duration::from_secs(120), accepted_after_kill.notified()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let _ = writer.await;
    if accepted.is_err() {
        return Err("no write accepted within 120 s of killing the main".into());
    }
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    let result = FailoverRound::of(&log).ok_or("no write sent after the kill was accepted")?;
    let failed: Vec<(i64, u16)> = log.iter().filter(|w| w.sent_ms >= 0 && w.status != 200).map(|w| (w.sent_ms, w.status)).collect();
    if !failed.is_empty() {
        eprintln!("    failed writes (sent ms after the kill, HTTP status; 0: no answer): {failed:?}");
    }

    // Node 1 returns on its data dir and is the main again (smallest id).
    let host = main.id.trim_end_matches(":17128").to_string();
    let i = host.rsplit('.').next().and_then(|last| last.parse::<usize>().ok()).map(|last| last - 1).ok_or("node id")?;
    *main = spawn_with(bin, dir, net, i, secret, extra)?;
    let mut everyone: Vec<&Node> = vec![&*main];
    everyone.extend(rest.iter());
    let main_id = main.id.clone();
    wait_agreement(&everyone, &main_id, everyone.len()).await?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(sent_ms: i64, answered_ms: i64, status: u16) -> WriteRecord {
        WriteRecord { sent_ms, answered_ms, status }
    }

    #[test]
    fn a_round_counts_writes_sent_after_the_kill() {
        let log = [
            write(-100, -90, 200),
            // in flight at the kill: neither the first accepted nor an error of the failover
            write(-20, 900, 502),
            write(0, 1200, 200),
            write(50, 1150, 200),
            write(100, 150, 421),
            write(150, 1300, 200),
            write(200, 250, 0),
        ];
        assert_eq!(
            FailoverRound::of(&log),
            Some(FailoverRound { first_accepted: Duration::from_millis(1150), sent: 5, errors: 2 })
        );
        assert_eq!(FailoverRound::of(&[write(-5, 10, 200), write(5, 10, 502)]), None);
    }

    #[test]
    fn the_summary_takes_the_median_and_sums_the_errors() {
        let round = |ms: u64, errors: usize| FailoverRound { first_accepted: Duration::from_millis(ms), sent: 30, errors };
        let summary = FailoverSummary::of(&[round(900, 0), round(1500, 2), round(700, 0)]);
        assert_eq!(
            summary,
            FailoverSummary {
                median: Duration::from_millis(900),
                min: Duration::from_millis(700),
                max: Duration::from_millis(1500),
                sent: 90,
                errors: 2,
                rounds_with_errors: 1
            }
        );
        assert_eq!(FailoverSummary::of(&[round(800, 0), round(1000, 0)]).median, Duration::from_millis(900));
        assert_eq!(FailoverSummary::of(&[]).median, Duration::ZERO);
    }
}
