//! Prepare/commit under `cluster.commit_replicas` (docs/consistency.md, "Prepare and commit"):
//! the happy path, the main's own write failing after its peers staged, a staged entry whose
//! main never wrote it, one whose main is gone, and a peer restarting with a staged entry.

use super::*;
use hotrule::cluster::bus::BusClient;
use hotrule::base::ids::{ContentHash, Revision};
use hotrule::store::kv::KvOp;
use hotrule::store::staged::{STAGED_PREFIX, StagedRecord, encode, staged_key};
use hotrule::store::{EntryStatus, RuleEntry};

/// Confirmations required, and a one-second wait for them (so staged records turn overdue fast).
fn prepared(commit_replicas: usize) -> ReplicationSettings {
    ReplicationSettings { commit_replicas, replica_deadline: Duration::from_secs(1), ..TestCluster::replication() }
}

/// How many staged records node `i`'s storage holds.
fn staged_count(cluster: &TestCluster, i: usize) -> usize {
    cluster.stores[i - 1].scan_prefix(STAGED_PREFIX).expect("readable").len()
}

/// An entry of `otel-rules/name` as node `writer` would have written it now.
fn entry(name: &str, content: &str, writer: usize) -> RuleEntry {
    let now = hotrule::base::clock::now_ms();
    RuleEntry {
        key: RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name")),
        content: content.as_bytes().to_vec(),
        status: EntryStatus::Active,
        update_time_ms: now,
        content_hash: ContentHash::of(content.as_bytes()),
        revision: Revision { millis: now, counter: 0, node: node_id(writer) },
    }
}

/// Sends `to` a prepare of `entry` as if node `from` (the main) sent it.
async fn prepare_as(cluster: &TestCluster, from: usize, to: usize, entry: &RuleEntry) {
    let client = cluster.bus.client(node_id(from));
    let request = BusRequest::Prepare { entry: entry.clone(), sender: node_id(from) };
    let answer = client.call(&node_id(to), "", request, Duration::from_secs(5)).await;
    assert!(matches!(answer, Ok(BusResponse::Staged)), "n{to} staged it: {answer:?}");
}

/// Whether node `i` serves any entry of `otel-rules/name`.
async fn serves(cluster: &TestCluster, i: usize, name: &str) -> bool {
    cluster.node(i).row("otel-rules", name).await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_write_is_staged_then_committed_on_every_peer() {
    let s = "prepare/commit";
    let cluster = TestCluster::start_tuned(3, prepared(1)).await;
    phase(s, "the answer comes with one peer holding a staged copy");
    let before: Vec<_> = (2..=3).map(|p| (delivered(&cluster, 1, p, "prepare"), delivered(&cluster, 1, p, "notify_committed"))).collect();
    let (code, json) = cluster.node(1).push("otel-rules", "pc", &rule("pc", 1), &[]).await;
    assert_eq!(code, 200, "{json}");
    assert!(json["message"].as_str().is_some_and(|m| m.ends_with("held by 1 peer(s), 1 required")), "{json}");
    phase(s, "one peer was prepared (both only if the first was slow), each got the commit, serves the entry, keeps no staged record");
    let prepared: u64 = (2..=3).zip(&before).map(|(p, (prepares, _))| delivered(&cluster, 1, p, "prepare") - prepares).sum();
    assert!((1..=2).contains(&prepared), "{prepared} prepares");
    for (p, (_, notices)) in (2..=3).zip(before) {
        wait_until(WAIT, &format!("n{p} got the commit"), || async { delivered(&cluster, 1, p, "notify_committed") == notices + 1 })
            .await;
        cluster.wait_rule(p, "pc", &rule("pc", 1)).await;
        wait_until(WAIT, &format!("n{p} released its staged record"), || async { staged_count(&cluster, p) == 0 }).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_failing_its_own_write_after_its_peers_staged_aborts_it_everywhere() {
    let s = "persist fails";
    let cluster = TestCluster::start_tuned(3, prepared(2)).await;
    let (code, json) = cluster.node(1).push("otel-rules", "pf", &rule("pf", 1), &[]).await;
    assert_eq!(code, 200, "{json}");
    for i in 1..=3 {
        cluster.wait_rule(i, "pf", &rule("pf", 1)).await;
    }
    phase(s, "the main's storage refuses writes: its persist fails while both peers stage the entry");
    let before: Vec<_> = (2..=3).map(|p| (delivered(&cluster, 1, p, "prepare"), delivered(&cluster, 1, p, "abort"))).collect();
    cluster.stores[0].set_fail_writes(true);
    let (code, json) = cluster.node(1).push("otel-rules", "pf", &rule("pf", 2), &[]).await;
    cluster.stores[0].set_fail_writes(false);
    assert_eq!((code, json["applyStatus"].as_str()), (500, Some("persist_failed")), "{json}");
    phase(s, "before that answer every peer was prepared, then aborted, and holds no staged copy");
    for (p, (prepares, aborts)) in (2..=3).zip(before) {
        assert_eq!(delivered(&cluster, 1, p, "prepare"), prepares + 1, "n{p} prepared");
        assert_eq!(delivered(&cluster, 1, p, "abort"), aborts + 1, "n{p} aborted");
        assert_eq!(staged_count(&cluster, p), 0, "n{p} keeps no staged copy of a write answered persist_failed");
    }
    phase(s, "a prepare that arrives after its abort is refused");
    let late = entry("late", &rule("late", 1), 1);
    let client = cluster.bus.client(node_id(1));
    let abort = BusRequest::Abort { key: late.key.clone(), revision: late.revision.clone(), sender: node_id(1) };
    assert!(matches!(client.call(&node_id(2), "", abort, Duration::from_secs(5)).await, Ok(BusResponse::Ack)));
    let prepare = BusRequest::Prepare { entry: late.clone(), sender: node_id(1) };
    let answer = client.call(&node_id(2), "", prepare, Duration::from_secs(5)).await;
    assert!(matches!(answer, Ok(BusResponse::Error { .. })), "late prepare refused: {answer:?}");
    assert_eq!(staged_count(&cluster, 2), 0);
    phase(s, "every node still serves the last acknowledged content");
    for i in 1..=3 {
        cluster.wait_rule(i, "pf", &rule("pf", 1)).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_entry_is_dropped_when_its_main_never_wrote_it_and_applied_once_its_main_is_gone() {
    let s = "resolution";
    let mut cluster = TestCluster::start_tuned(3, prepared(1)).await;
    phase(s, "n3 holds a staged entry the main n1 never wrote: once overdue, n1 says so and n3 drops it");
    let ghost = entry("ghost", &rule("ghost", 1), 1);
    prepare_as(&cluster, 1, 3, &ghost).await;
    assert_eq!(staged_count(&cluster, 3), 1);
    let asked = delivered(&cluster, 3, 1, "resolve_staged");
    wait_until(WAIT, "n3 dropped the ghost", || async { staged_count(&cluster, 3) == 0 }).await;
    assert!(delivered(&cluster, 3, 1, "resolve_staged") > asked, "n3 asked the main");
    for i in 1..=3 {
        assert!(!serves(&cluster, i, "ghost").await, "n{i} never serves a write its main did not make");
    }
    phase(s, "n3 holds a staged entry and the main n1 dies before its commit: n3 applies it, the new main takes it");
    let orphan_content = rule("orphan", 1);
    let orphan = entry("orphan", &orphan_content, 1);
    prepare_as(&cluster, 1, 3, &orphan).await;
    cluster.stop_node(1).await;
    cluster.wait_agreement(&[2, 3], 2).await;
    cluster.wait_rule(3, "orphan", &orphan_content).await;
    cluster.wait_rule(2, "orphan", &orphan_content).await;
    assert_eq!(staged_count(&cluster, 3), 0, "applied, its record gone");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_restarted_with_a_staged_entry_asks_the_main_and_drops_a_write_it_never_made() {
    let s = "restart";
    let mut cluster = TestCluster::start_tuned(3, prepared(1)).await;
    phase(s, "n3 stops holding a staged entry whose abort it never got");
    cluster.stop_node(3).await;
    cluster.wait_agreement(&[1, 2], 1).await;
    let lost = entry("lost", &rule("lost", 1), 1);
    let record = StagedRecord { entry: lost.clone(), sender: node_id(1) };
    let put = KvOp::Put { key: staged_key(&lost.key, &lost.revision), value: encode(&record).expect("encodes") };
    cluster.stores[2].write(&[put], true).expect("written");
    phase(s, "n3 restarts: the record is read back, turns overdue, the main says it never wrote it, n3 drops it");
    cluster.start_node(3).await;
    cluster.wait_agreement(&[1, 2, 3], 1).await;
    wait_until(WAIT, "n3 dropped the staged entry", || async { staged_count(&cluster, 3) == 0 }).await;
    for i in 1..=3 {
        assert!(!serves(&cluster, i, "lost").await, "n{i} never serves it");
    }
    cluster.shutdown().await;
}
