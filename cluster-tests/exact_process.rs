//! Issue 22 on real `hotrule` processes: the cluster's numbers are exact (`exact.rs` runs the
//! same rule and emissions in process).
//!
//! 1. Three clustered processes on loopback addresses (real UDP gossip, the HTTP bus with a
//!    shared secret, RocksDB data dirs) and a lone reference process. Emissions spread unevenly
//!    over the three (all of them to the reference) read, on every node's cluster read and on the
//!    Prometheus API, as the reference reads them. Then a non-owner of the entity is killed -9
//!    just after it stored one more emission (before its handoff round, when the timing allows)
//!    and restarted on its data dir; then the owner itself is killed -9 and restarted. While the
//!    owner is down the survivors' reads name it in `partial`; once it is back and the handoff has
//!    settled (the owner holds everything, the others nothing) every read equals the reference.
//! 2. The same cluster exporting by remote-write to a real Prometheus, a lone reference node
//!    exporting to a second one: each exported series is in the cluster's Prometheus once, with
//!    no label telling nodes apart, and its latest value is the reference's. Only the owner sent.
//!
//! A third runs the same with every read also checked while each handoff settles. One more is
//! `#[ignore]`d, as it fails today: a non-owner killed as soon as its push is answered (the push
//! can be lost, see below). Run it with `-- --ignored`.
//!
//! A push is answered once its batch is queued for evaluation, not once it is stored
//! (docs/ingest.md), so before a kill the test waits until the victim's store holds the
//! emission: what is stored is synced (docs/storage.md) and must survive; what is still queued
//! may not.
//!
//! Real processes store in RocksDB: without the `rocksdb` feature there is nothing to run.
#![cfg(feature = "rocksdb")]

mod components;
mod harness;

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use components::cluster_member::{Member, live_count};
use components::hotrule_node::{HotruleNode, node_config};
use components::prom::exposition_sum;
use components::{PromSample, Prometheus, PrometheusSettings, require};
use harness::exact_samples::{METRICS, RULE, emission, sum_of};
use harness::wait_until;
use hotrule::api::client::{AdminClient, with_query};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// How long the export test waits for a minute to close and be exported.
const EXPORT_WAIT: Duration = Duration::from_secs(120);

/// The cluster under test: three members sharing a secret in `dir`.
struct Cluster {
    dir: PathBuf,
    net: u8,
    secret: PathBuf,
    config: Option<PathBuf>,
    members: Vec<Member>,
}

impl Cluster {
    async fn start(dir: &Path, net: u8, config: Option<PathBuf>) -> Cluster {
        let secret = dir.join("secret");
        std::fs::write(&secret, "exact-process-secret").expect("secret");
        let mut members = Vec::new();
        for i in 1..=3 {
            members.push(Member::spawn(dir, net, i, &secret, config.as_deref()).await);
        }
        let cluster = Cluster { dir: dir.to_path_buf(), net, secret, config, members };
        cluster.wait_live(&[0, 1, 2], 3).await;
        cluster
    }

    /// Waits until each member of `which` sees `live` live members.
    async fn wait_live(&self, which: &[usize], live: usize) {
        for &k in which {
            let member = &self.members[k];
            wait_until(WAIT, &format!("{} sees {live} live", member.host), || async { live_count(&member.client).await == live })
            .await;
        }
    }

    /// SIGKILL of member `k`.
    fn kill9(&mut self, k: usize) {
        self.members[k].kill9();
    }

    /// Member `k` again on its data dir; waits until every member sees three live and the rule
    /// runs on it.
    async fn restart(&mut self, k: usize) {
        let i = self.members[k].i;
        self.members[k] = Member::spawn(&self.dir, self.net, i, &self.secret, self.config.as_deref()).await;
        self.wait_live(&[0, 1, 2], 3).await;
        wait_running(&self.members[k].client).await;
    }
}

async fn push_samples(data: &SocketAddr, text: &str) {
    let client = AdminClient::new(&data.to_string(), None).expect("client");
    let path = with_query("/ingest/prometheus", &[("job", "exact"), ("instance", "i")]);
    let reply = client.post(&path, text.as_bytes().to_vec()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 204, "{}", reply.text());
}

async fn post_rule(client: &AdminClient) {
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "exact")]);
    let reply = client.post(&path, RULE.as_bytes().to_vec()).await.expect("push the rule");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
}

async fn wait_running(client: &AdminClient) {
    wait_until(WAIT, "the rule runs", || async {
        let list = client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
        list["rules"].as_array().is_some_and(|rows| rows.iter().any(|r| r["name"] == "exact" && r["localState"] == "RUNNING"))
    })
    .await;
}

/// One metric's `/query/metrics` answer at `step` (the bucket holding `minute_ms`).
async fn read(client: &AdminClient, metric: &str, minute_ms: i64, cluster: bool, step: &str) -> Value {
    let at = minute_ms.to_string();
    let reach = if cluster { "true" } else { "false" };
    let pairs = [("name", metric), ("service", "s"), ("start", at.as_str()), ("end", at.as_str()), ("cluster", reach), ("step", step)];
    let reply = client.get(&with_query("/query/metrics", &pairs)).await;
    reply.ok().and_then(|r| r.json()).unwrap_or_default()
}

/// Every metric's series, at the minute and at the hour.
async fn all_series(client: &AdminClient, minute_ms: i64, cluster: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for metric in METRICS {
        for step in ["MINUTE", "HOUR"] {
            out.push(read(client, metric, minute_ms, cluster, step).await["series"].clone());
        }
    }
    out
}

fn empty(reads: &[Value]) -> bool {
    reads.iter().all(|series| series.as_array().is_some_and(Vec::is_empty))
}

/// `x_sum` by the minute (the sum of idle + user over the emissions a read holds).
async fn x_sum(client: &AdminClient, minute_ms: i64, cluster: bool) -> Option<i64> {
    read(client, "x_sum", minute_ms, cluster, "MINUTE").await["series"][0]["points"][0]["value"].as_i64()
}

/// `/api/v1/query` of `expr` at `time_s`, sorted by labels.
async fn prom_instant(client: &AdminClient, expr: &str, time_s: i64) -> Option<Vec<PromSample>> {
    let time = time_s.to_string();
    let reply = client.get(&with_query("/api/v1/query", &[("query", expr), ("time", &time)])).await.ok()?;
    let json = reply.json()?;
    if json["status"] != "success" {
        return None;
    }
    let mut samples = components::parse_vector(&json["data"]["result"]).ok()?;
    samples.sort_by(|a, b| a.labels.cmp(&b.labels));
    Some(samples)
}

/// Waits until the reference and every live member's cluster read hold `expected` in `x_sum`.
async fn wait_all_hold(cluster: &Cluster, live: &[usize], reference: &AdminClient, minute_ms: i64, expected: i64, what: &str) {
    wait_until(WAIT, what, || async {
        if x_sum(reference, minute_ms, false).await != Some(expected) {
            return false;
        }
        for &k in live {
            if x_sum(&cluster.members[k].client, minute_ms, true).await != Some(expected) {
                return false;
            }
        }
        true
    })
    .await;
}

/// Every member's cluster read of every metric (minute and hour) equals the reference's, and so
/// does its Prometheus API for a few metrics.
async fn assert_reads_equal_reference(cluster: &Cluster, reference: &AdminClient, minute_ms: i64, when: &str) {
    let want = all_series(reference, minute_ms, false).await;
    let empties: Vec<_> = METRICS.iter().zip(want.chunks(2)).filter(|(_, reads)| empty(reads)).map(|(m, _)| *m).collect();
    assert!(empties.is_empty(), "every metric has a value on the reference ({when}); none for {empties:?}");
    let time_s = minute_ms / 1000 + 30;
    for member in &cluster.members {
        assert_eq!(all_series(&member.client, minute_ms, true).await, want, "{} reads the one-node values ({when})", member.host);
        for expr in ["x_avg", "x_latest", "x_labeled", "x_pct"] {
            let want = prom_instant(reference, expr, time_s).await.expect("the reference's Prometheus API");
            assert!(!want.is_empty(), "{expr} on the reference's Prometheus API ({when})");
            let got = prom_instant(&member.client, expr, time_s).await;
            assert_eq!(got.as_ref(), Some(&want), "{} /api/v1/query {expr} ({when})", member.host);
        }
    }
}

/// The member whose own store holds `want` (the entity's owner merged what the others
/// received) while the others' hold nothing of it; `None` while a handoff is under way.
async fn settled_owner(cluster: &Cluster, want: &[Value], minute_ms: i64) -> Option<usize> {
    let (mut owners, mut empties) = (Vec::new(), 0);
    for (k, member) in cluster.members.iter().enumerate() {
        let local = all_series(&member.client, minute_ms, false).await;
        if local == want {
            owners.push(k);
        } else if empty(&local) {
            empties += 1;
        }
    }
    (owners.len() == 1 && empties == cluster.members.len() - 1).then(|| owners[0])
}

/// Waits until the handoff settles (see [`settled_owner`]); returns the owner's index.
async fn wait_for_the_owner(cluster: &Cluster, reference: &AdminClient, minute_ms: i64) -> usize {
    let want = all_series(reference, minute_ms, false).await;
    let owner = Cell::new(None);
    wait_until(WAIT, "the owner holds the merged values, the others nothing", || async {
        owner.set(settled_owner(cluster, &want, minute_ms).await);
        owner.get().is_some()
    })
    .await;
    owner.get().expect("an owner")
}

/// Every metric's cluster read (minute and hour), and whether any of them left a node out.
async fn cluster_reads(client: &AdminClient, minute_ms: i64) -> (Vec<Value>, bool, Vec<String>) {
    let (mut out, mut partial, mut nodes) = (Vec::new(), false, Vec::new());
    for metric in METRICS {
        for step in ["MINUTE", "HOUR"] {
            let answer = read(client, metric, minute_ms, true, step).await;
            partial |= answer["partial"].as_array().is_none_or(|p| !p.is_empty());
            out.push(answer["series"].clone());
            nodes.push(answer["nodes"].to_string());
        }
    }
    (out, partial, nodes)
}

/// While the handoff settles, every member's reads are checked against the reference, round
/// after round: a read that names no node left out counts a cell in flight between two nodes
/// once, never twice or not at all. Returns the owner once settled, the rounds of reads and how
/// many reads were partial (not checked).
async fn exact_until_settled(cluster: &Cluster, reference: &AdminClient, minute_ms: i64, when: &str) -> (usize, usize, usize) {
    let want = all_series(reference, minute_ms, false).await;
    let names: Vec<String> = METRICS.iter().flat_map(|m| ["MINUTE", "HOUR"].map(|step| format!("{m} by {step}"))).collect();
    let deadline = Instant::now() + WAIT;
    let (mut partial_reads, mut wrong_reads) = (0, Vec::new());
    for round in 1..=1000 {
        for member in &cluster.members {
            let (got, partial, nodes) = cluster_reads(&member.client, minute_ms).await;
            if partial {
                partial_reads += 1;
                continue;
            }
            let wrong: Vec<String> = names
                .iter()
                .zip(got.iter().zip(&want).zip(&nodes))
                .filter(|(_, ((got, want), _))| got != want)
                .map(|(name, ((got, want), nodes))| format!("{name}: {} instead of {} (answered: {nodes})", got[0]["points"][0]["value"], want[0]["points"][0]["value"]))
                .collect();
            if !wrong.is_empty() {
                wrong_reads.push(format!("{} in round {round}: {}", member.host, wrong.join("; ")));
            }
        }
        if let Some(owner) = settled_owner(cluster, &want, minute_ms).await {
            // Reported once settled, to tell a passing miscount from a lasting one.
            assert!(wrong_reads.is_empty(), "reads naming no node left out were wrong ({when}; settled after {round} rounds):\n{}", wrong_reads.join("\n"));
            return (owner, round, partial_reads);
        }
        assert!(Instant::now() < deadline, "the handoff did not settle within {WAIT:?} ({when})");
    }
    panic!("the handoff did not settle in 1000 rounds of reads ({when})")
}

/// How a scenario checks the reads around a handoff.
#[derive(Clone, Copy, PartialEq)]
enum Reads {
    /// Once the handoff settled (the owner holds everything).
    OnceSettled,
    /// Also round after round while it settles.
    WhileSettling,
}

/// Waits for the handoff to settle (checking the reads meanwhile with `Reads::WhileSettling`),
/// then checks every read against the reference; returns the owner.
async fn settle(cluster: &Cluster, reference: &AdminClient, minute_ms: i64, reads: Reads, when: &str) -> usize {
    let owner = match reads {
        Reads::OnceSettled => wait_for_the_owner(cluster, reference, minute_ms).await,
        Reads::WhileSettling => {
            let (owner, rounds, partial) = exact_until_settled(cluster, reference, minute_ms, when).await;
            eprintln!("[exact-process] {rounds} rounds of exact reads ({partial} partial, not checked) until settled ({when})");
            owner
        }
    };
    assert_reads_equal_reference(cluster, reference, minute_ms, when).await;
    owner
}

/// The minute the test's samples fall in: the current one, once at least 12 s of it have passed
/// (the emissions' sample times reach +9 s, and none should be in the future). Staying in the
/// current minute keeps the cells within the handoff's look-back at a restart.
async fn sample_minute() -> i64 {
    wait_until(Duration::from_secs(15), "12 s into a minute", || async { hotrule::base::clock::wall_clock_ms() % 60_000 >= 12_000 }).await;
    hotrule::base::clock::wall_clock_ms() / 60_000 * 60_000
}

/// The rule on the cluster (through its first member) and on the reference, running everywhere.
async fn run_the_rule(cluster: &Cluster, reference: &AdminClient) {
    post_rule(&cluster.members[0].client).await;
    post_rule(reference).await;
    for member in &cluster.members {
        wait_running(&member.client).await;
    }
    wait_running(reference).await;
}

/// A lone `hotrule serve` with a data listener and `config`.
async fn reference_node(dir: &Path, config: &str) -> HotruleNode {
    HotruleNode::start(&dir.join("reference"), &dir.join("reference-rules"), config, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_read_as_one_through_kill_9_of_a_non_owner_and_of_the_owner() {
    kill_9_scenario(91, Victim::KilledOnceStored, Reads::OnceSettled).await;
}

/// The same, every read that names no node left out also checked while each handoff settles.
/// This caught a record holding each of its cells twice: right after the owner's restart, a
/// round with keys just taken back (dirty) and a new live set named each key twice, and the
/// record moved then counted twice in reads (`x_sum` 252 instead of 239) until it was applied.
/// A key now moves once (`cells::handoff`); 25 local runs of 25 passed (about 1 in 4 failed
/// before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_exact_while_a_handoff_settles() {
    kill_9_scenario(97, Victim::KilledOnceStored, Reads::WhileSettling).await;
}

/// The same, the non-owner killed as soon as its push is answered. Fails today, about one run
/// in three (emission 5 never arrives): the push is answered once queued for evaluation, and the
/// queue dies with the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a push is answered once queued, not once stored (docs/ingest.md): kill -9 right after the 204 can lose it"]
async fn an_acknowledged_push_survives_kill_9_right_after_its_answer() {
    kill_9_scenario(95, Victim::KilledOnceAnswered, Reads::OnceSettled).await;
}

/// When the non-owner is killed after its push of emission 5.
#[derive(Clone, Copy, PartialEq)]
enum Victim {
    /// Once its store holds the emission (or its handoff already moved it).
    KilledOnceStored,
    /// As soon as the push is answered.
    KilledOnceAnswered,
}

async fn kill_9_scenario(net: u8, when_killed: Victim, reads: Reads) {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(dir.path(), net, None).await;
    let reference = reference_node(dir.path(), "").await;
    let reference_data = reference.data_addr().expect("the reference's data listener");
    let reference = &reference.client;
    run_the_rule(&cluster, reference).await;
    eprintln!("[exact-process] three members and the reference run the rule ({:?})", started.elapsed());

    let minute_ms = sample_minute().await;
    let mut expected = 0;
    let mut push = async |n: i64, k: usize, cluster: &Cluster| {
        let text = emission(n, minute_ms);
        push_samples(&cluster.members[k].data, &text).await;
        push_samples(&reference_data, &text).await;
        expected += sum_of(n);
        expected
    };
    // Emissions 0..5 go to n1, n2, n3, n1, n2 (uneven), all to the reference.
    let mut total = 0;
    for n in 0..5 {
        total = push(n, n as usize % 3, &cluster).await;
    }
    wait_all_hold(&cluster, &[0, 1, 2], reference, minute_ms, total, "the reference and the cluster hold emissions 0..5").await;
    let owner = settle(&cluster, reference, minute_ms, reads, "five emissions over three nodes").await;
    eprintln!("[exact-process] {} owns the entity ({:?})", cluster.members[owner].host, started.elapsed());

    let victim = (owner + 1) % 3;
    let other = (owner + 2) % 3;
    eprintln!("[exact-process] kill -9 the non-owner {} right after its push of emission 5", cluster.members[victim].host);
    total = push(5, victim, &cluster).await;
    let when = if when_killed == Victim::KilledOnceAnswered {
        "answered, maybe not yet evaluated"
    } else {
        // Its store held nothing of the entity (handed off); now it holds the new emission's
        // cells, unless its handoff round came first (then the cluster read holds the emission).
        let caught_before_handoff = Cell::new(false);
        wait_until(WAIT, "the victim stored emission 5", || async {
            caught_before_handoff.set(x_sum(&cluster.members[victim].client, minute_ms, false).await == Some(sum_of(5)));
            caught_before_handoff.get() || x_sum(&cluster.members[victim].client, minute_ms, true).await == Some(total)
        })
        .await;
        if caught_before_handoff.get() { "in its cells, not yet handed off" } else { "already handed off: its round came first" }
    };
    cluster.kill9(victim);
    eprintln!("[exact-process] killed {} (emission 5 was {when})", cluster.members[victim].host);
    cluster.restart(victim).await;
    push(6, other, &cluster).await;
    total = push(7, victim, &cluster).await;
    wait_all_hold(&cluster, &[0, 1, 2], reference, minute_ms, total, "every read holds emissions 0..8 after the restart").await;
    let settled = settle(&cluster, reference, minute_ms, reads, "after kill -9 of a non-owner").await;
    assert_eq!(settled, owner, "the owner did not change");
    eprintln!("[exact-process] the restarted non-owner handed off what it held ({:?})", started.elapsed());

    eprintln!("[exact-process] kill -9 the owner {} mid-minute, right after it stored emission 8", cluster.members[owner].host);
    total = push(8, owner, &cluster).await;
    wait_until(WAIT, "the owner stored emission 8", || async { x_sum(&cluster.members[owner].client, minute_ms, false).await == Some(total) }).await;
    let owner_id = cluster.members[owner].id();
    cluster.kill9(owner);
    let killed = Instant::now();
    total = push(9, victim, &cluster).await;
    for &k in &[victim, other] {
        let member = &cluster.members[k];
        wait_until(WAIT, &format!("{}'s cluster read names the dead owner in partial", member.host), || async {
            let answer = read(&member.client, "x_sum", minute_ms, true, "MINUTE").await;
            answer["partial"].as_array().is_some_and(|p| p.iter().any(|m| m["node"] == owner_id.as_str()))
        })
        .await;
        let answer = read(&member.client, "x_sum", minute_ms, true, "MINUTE").await;
        eprintln!("[exact-process] while the owner is down {} reads x_sum {} (partial: {})", member.host, answer["series"], answer["partial"]);
    }
    // Down long enough for gossip to say so: the survivors pick an interim owner for emission 9.
    cluster.wait_live(&[victim, other], 2).await;
    eprintln!("[exact-process] the survivors hold the owner dead {:?} after the kill", killed.elapsed());
    cluster.restart(owner).await;
    wait_all_hold(&cluster, &[0, 1, 2], reference, minute_ms, total, "every read holds emissions 0..10 after the owner's restart").await;
    for member in &cluster.members {
        let answer = read(&member.client, "x_sum", minute_ms, true, "MINUTE").await;
        assert_eq!(answer["partial"], Value::Array(Vec::new()), "{}: nobody left out", member.host);
    }
    let settled = settle(&cluster, reference, minute_ms, reads, "after kill -9 of the owner").await;
    assert_eq!(settled, owner, "the owner is the owner again");
    eprintln!("[exact-process] done in {:?}", started.elapsed());
}

/// The exported series: single values, a labeled one, a histogram and percentiles.
const EXPORTED: [&str; 6] = ["x_avg", "x_sum", "x_latest", "x_labeled", "x_hist", "x_pct"];

/// `family`'s total on a node's `/metrics`.
async fn own_counter(client: &AdminClient, family: &str) -> f64 {
    let text = client.get("/metrics").await.map(|r| r.text()).unwrap_or_default();
    exposition_sum(&text, family, &[])
}

/// A Prometheus answer as (labels, value), sorted by labels.
fn by_labels(samples: Vec<PromSample>) -> Vec<(Vec<(String, String)>, f64)> {
    let mut out: Vec<_> = samples.into_iter().map(|s| (s.labels.into_iter().collect::<Vec<_>>(), s.value)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_remote_writes_each_series_once_with_the_lone_nodes_values() {
    if !require("a_cluster_remote_writes_each_series_once", &["prometheus"]) {
        return;
    }
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = PrometheusSettings { receiver: true, ..Default::default() };
    let cluster_prom = Prometheus::start(&dir.path().join("cluster-prometheus"), &receiver).await;
    let reference_prom = Prometheus::start(&dir.path().join("reference-prometheus"), &receiver).await;
    let config = dir.path().join("export.yaml");
    std::fs::write(&config, node_config(&[], Some(&cluster_prom.write_url()))).expect("config");
    let cluster = Cluster::start(dir.path(), 93, Some(config)).await;
    let reference = reference_node(dir.path(), &node_config(&[], Some(&reference_prom.write_url()))).await;
    let reference_data = reference.data_addr().expect("the reference's data listener");
    let reference = &reference.client;
    run_the_rule(&cluster, reference).await;
    eprintln!("[exact-export] three exporting members and the reference run the rule ({:?})", started.elapsed());

    let minute_ms = sample_minute().await;
    let mut total = 0;
    for n in 0..5 {
        let text = emission(n, minute_ms);
        push_samples(&cluster.members[n as usize % 3].data, &text).await;
        push_samples(&reference_data, &text).await;
        total += sum_of(n);
    }
    wait_all_hold(&cluster, &[0, 1, 2], reference, minute_ms, total, "the reference and the cluster hold emissions 0..5").await;
    let owner = wait_for_the_owner(&cluster, reference, minute_ms).await;
    eprintln!("[exact-export] {} owns the entity ({:?})", cluster.members[owner].host, started.elapsed());

    for expr in EXPORTED {
        // A minute is exported once it closed (`close_after` 1 s): up to 48 s after the
        // samples, which fall in the current minute, plus a flush.
        wait_until(EXPORT_WAIT, &format!("both Prometheus servers hold {expr} with the same latest values"), || async {
            let (Some(got), Some(want)) = (cluster_prom.query(expr).await, reference_prom.query(expr).await) else { return false };
            !want.is_empty() && by_labels(got) == by_labels(want)
        })
        .await;
        let (got, want) = (cluster_prom.query(expr).await.expect("query"), reference_prom.query(expr).await.expect("query"));
        assert_eq!(got.len(), want.len(), "{expr}: one series per reference series, none split by node: {got:?}");
        eprintln!("[exact-export] {expr}: {} series, {:?}", got.len(), by_labels(got));
    }
    let exported_sum = cluster_prom.query("x_sum").await.expect("query");
    assert_eq!(exported_sum[0].value, total as f64, "the exported x_sum holds all five emissions");
    // Exactly the owner sent: the others' partial state went to it, not to Prometheus.
    for (k, member) in cluster.members.iter().enumerate() {
        let sent = own_counter(&member.client, "hotrule_export_samples_sent_total").await;
        if k == owner {
            assert!(sent > 0.0, "the owner {} exported", member.host);
        } else {
            assert_eq!(sent, 0.0, "the non-owner {} exported nothing", member.host);
        }
    }
    // No series of the cluster's Prometheus under any other labels (a node's, an instance).
    for expr in EXPORTED {
        let count = format!("count({expr})");
        let counted = cluster_prom.query(&count).await.expect("count");
        let reference_counted = reference_prom.query(&count).await.expect("count");
        assert_eq!(by_labels(counted), by_labels(reference_counted), "{count}");
    }
    eprintln!("[exact-export] done in {:?}", started.elapsed());
}
