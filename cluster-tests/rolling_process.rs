//! Rolling rule changes (issue 15) on a cluster of real `hotrule` processes on loopback
//! addresses (real UDP gossip, the HTTP bus with an HMAC secret, a 300 ms roll tick):
//!
//! 1. a healthy roll goes node by node (peers, then the main) and completes by itself;
//! 2. a node whose health check fails (its rule takes samples and produces no values) stops the
//!    roll at the step timeout; normal writes get 409; rollback returns every node to the master;
//! 3. force-commit makes a roll's content the entry everywhere at once;
//! 4. the main is killed with SIGKILL mid-roll: the new main goes on from the record's index,
//!    skips the dead node after its tries and completes; the old main returns to the committed
//!    content.
//!
//! The partition case (a node cut off by iptables mid-roll) is in `netns_partition.rs`.

mod harness;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use harness::wait_until;
use hotrule::api::client::{AdminClient, with_query};

const WAIT: Duration = Duration::from_secs(60);
const NET: u8 = 73;

fn rule(step: u32) -> String {
    rule_with_prefix("rp", step)
}

fn rule_with_prefix(prefix: &str, step: u32) -> String {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{step}M')\n"
    )
}

/// Reads `requests_total` like [`rule`] and never produces a value: a healthy-looking rule whose
/// `values` check fails once samples arrive.
fn silent_rule() -> String {
    "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: rp\nmetricsRules:\n  - name: requests\n    exp: requests_total.tagEqual('svc', 'nobody').sum(['svc']).rate('PT1M')\n".to_string()
}

fn hash(content: &str) -> String {
    hotrule::base::ids::ContentHash::of(content.as_bytes()).0
}

struct Proc {
    child: Child,
    host: String,
    client: AdminClient,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(dir: &Path, i: u8, secret: &Path) -> Proc {
    let bin = Path::new(env!("CARGO_BIN_EXE_hotrule"));
    let (mut command, host) = hotrule::bench::cluster::node_command(bin, dir, NET, usize::from(i), secret).expect("log file");
    let child = command
        .args(["--scan-interval", "2", "--self-heal-threshold", "4"])
        .args(["--data-listen", &format!("{host}:12800")])
        .args(["--set", "rolling.tick=300ms"])
        .spawn()
        .expect("spawn hotrule");
    let client = AdminClient::new(&format!("{host}:17128"), None).expect("client");
    Proc { child, host, client }
}

fn id(p: &Proc) -> String {
    format!("{}:17128", p.host)
}

async fn wait_main(nodes: &[&Proc], main: &Proc, live: usize) {
    let want = id(main);
    for node in nodes {
        wait_until(WAIT, &format!("{} sees main {want} with {live} live", node.host), || async {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
            status["main"] == want.as_str()
                && status["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == live)
        })
        .await;
    }
}

async fn post(p: &Proc, route: &str, pairs: &[(&str, &str)], body: &str) -> (u16, serde_json::Value) {
    let reply = p.client.post(&with_query(route, pairs), body.as_bytes().to_vec()).await.expect("post");
    (reply.status.as_u16(), reply.json().unwrap_or_default())
}

async fn push(p: &Proc, name: &str, content: &str, extra: &[(&str, &str)]) -> (u16, serde_json::Value) {
    let mut pairs = vec![("catalog", "otel-rules"), ("name", name)];
    pairs.extend_from_slice(extra);
    post(p, "/runtime/rule/addOrUpdate", &pairs, content).await
}

fn expect(answer: (u16, serde_json::Value), code: u16, status: &str) -> serde_json::Value {
    let (got, json) = answer;
    assert_eq!((got, json["applyStatus"].as_str()), (code, Some(status)), "{json}");
    json
}

async fn view(p: &Proc, name: &str) -> Option<serde_json::Value> {
    let path = with_query("/runtime/rule/rolling", &[("catalog", "otel-rules"), ("name", name)]);
    p.client.get(&path).await.ok().filter(|r| r.status.is_success()).and_then(|r| r.json())
}

async fn wait_view(p: &Proc, name: &str, what: &str, check: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    wait_until(WAIT, &format!("{}: roll of {name} {what}", p.host), || async { view(p, name).await.is_some_and(|v| check(&v)) }).await;
    view(p, name).await.expect("the view")
}

/// The content hash node `p` runs for otel-rules/`name` (its list row's `appliedContentHash`;
/// `contentHash` is the stored entry's, which a roll does not change).
async fn running(p: &Proc, name: &str) -> Option<String> {
    let list = p.client.get("/runtime/rule/list").await.ok()?.json()?;
    let row = list["rules"].as_array()?.iter().find(|r| r["catalog"] == "otel-rules" && r["name"] == name)?.clone();
    (row["localState"] == "RUNNING").then(|| row["appliedContentHash"].as_str().map(str::to_string)).flatten()
}

async fn wait_running(p: &Proc, name: &str, content: &str) {
    let want = hash(content);
    let deadline = Instant::now() + WAIT;
    while running(p, name).await.as_deref() != Some(want.as_str()) {
        if Instant::now() > deadline {
            let list = p.client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
            let row = list["rules"].as_array().and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned());
            panic!("{} does not run {name} {} after {WAIT:?}: row {row:?}, roll {:?}", p.host, &want[..12], view(p, name).await);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stored(p: &Proc, name: &str) -> Option<String> {
    let reply = p.client.get(&with_query("/runtime/rule", &[("catalog", "otel-rules"), ("name", name)])).await.ok()?;
    reply.headers.get("x-sw-content-hash").and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn wait_stored(p: &Proc, name: &str, content: &str) {
    let want = hash(content);
    wait_until(WAIT, &format!("{} stores {name} {}", p.host, &want[..12]), || async {
        stored(p, name).await.as_deref() == Some(want.as_str())
    })
    .await;
}

fn node_states(view: &serde_json::Value) -> Vec<String> {
    view["nodes"].as_array().map_or_else(Vec::new, |nodes| nodes.iter().map(|n| n["state"].as_str().unwrap_or("?").to_string()).collect())
}

fn order(view: &serde_json::Value) -> Vec<String> {
    view["nodes"].as_array().map_or_else(Vec::new, |nodes| nodes.iter().map(|n| n["node"].as_str().unwrap_or("?").to_string()).collect())
}

fn phase(what: &str) {
    eprintln!("[rolling-process] {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolls_advance_stop_roll_back_force_commit_and_survive_the_main_s_death() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "rolling process secret").expect("secret");
    let mut n1 = spawn(dir.path(), 1, &secret);
    let n2 = spawn(dir.path(), 2, &secret);
    let n3 = spawn(dir.path(), 3, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    let peers_then_main = vec![id(&n2), id(&n3), id(&n1)];

    phase("1. a healthy roll goes node by node and completes by itself");
    let (v1, v2) = (rule(1), rule(2));
    expect(push(&n2, "healthy", &v1, &[]).await, 200, "structural_applied");
    for p in [&n1, &n2, &n3] {
        wait_running(p, "healthy", &v1).await;
    }
    let rolling = [("rollout", "rolling"), ("healthWindow", "1s"), ("stepTimeout", "1m")];
    let started = Instant::now();
    let json = expect(push(&n3, "healthy", &v2, &rolling).await, 200, "roll_started");
    assert_eq!(order(&json["roll"]), peers_then_main, "peers in byte order, the main last: {json}");
    let mut indexes = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let v = view(&n1, "healthy").await.expect("the main holds the roll");
        let index = v["index"].as_u64().unwrap_or(0);
        if indexes.last() != Some(&index) {
            indexes.push(index);
        }
        // No node past the index runs the rolling content while the roll is in progress.
        if v["state"] == "in_progress" {
            for (position, node) in [&n2, &n3, &n1].into_iter().enumerate() {
                if position as u64 > index {
                    assert_ne!(running(node, "healthy").await, Some(hash(&v2)), "{} runs v2 past the index {index}", node.host);
                }
            }
        }
        if v["state"] == "completed" {
            assert_eq!(node_states(&v), ["healthy", "healthy", "healthy"], "{v}");
            assert_eq!(v["percentDone"].as_u64(), Some(100));
            break;
        }
        assert!(Instant::now() < deadline, "the roll did not complete: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(indexes.len() >= 3, "the index was seen moving node by node: {indexes:?}");
    for p in [&n1, &n2, &n3] {
        wait_stored(p, "healthy", &v2).await;
        wait_running(p, "healthy", &v2).await;
    }
    phase(&format!("   completed in {:?}, index seen at {indexes:?}", started.elapsed()));

    phase("2. a node whose rule takes samples and produces no values stops the roll; rollback");
    // Samples flow to n2, the first node of the roll, from before the start (bounded by count
    // and time), so its report covers traffic from the moment it runs the rolling content.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pusher = {
        let (host, stop) = (n2.host.clone(), stop.clone());
        tokio::spawn(async move {
            let ingest = AdminClient::new(&format!("{host}:12800"), None).expect("data client");
            let path = with_query("/ingest/prometheus", &[("job", "rolling-process")]);
            let deadline = Instant::now() + Duration::from_secs(90);
            let mut accepted = 0u32;
            for round in 0..900u32 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) || Instant::now() > deadline {
                    break;
                }
                let body = format!("requests_total{{svc=\"a\"}} {}\n", 10 + round);
                if ingest.post(&path, body.into_bytes()).await.is_ok_and(|r| r.status.is_success()) {
                    accepted += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            accepted
        })
    };
    wait_until(WAIT, "n2 evaluates the pushed samples", || async {
        let list = n2.client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
        list["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|r| r["name"] == "healthy" && r["evaluation"]["samplesIn"].as_u64().is_some_and(|n| n > 0))
        })
    })
    .await;
    let json = expect(
        push(&n1, "healthy", &silent_rule(), &[("rollout", "rolling"), ("healthWindow", "1s"), ("stepTimeout", "4s")]).await,
        200,
        "roll_started",
    );
    assert_eq!(order(&json["roll"])[0], id(&n2), "n2 acts first");
    let v = wait_view(&n1, "healthy", "stopped", |v| v["state"] != "in_progress").await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let accepted = pusher.await.expect("pusher");
    assert!(accepted > 0, "samples were pushed");
    assert_eq!(v["state"], "stopped", "the roll stopped instead of going on: {v}");
    assert_eq!(node_states(&v)[0], "unhealthy", "n2 is reported unhealthy: {v}");
    assert!(v["nodes"][0]["reason"].as_str().is_some_and(|r| !r.is_empty()), "with its reason: {v}");
    assert!(v["stopReason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    expect(push(&n3, "healthy", &rule(3), &[]).await, 409, "roll_in_progress");
    wait_running(&n3, "healthy", &v2).await;
    let pairs = [("catalog", "otel-rules"), ("name", "healthy")];
    expect(post(&n3, "/runtime/rule/rollback-rolling", &pairs, "").await, 200, "roll_rolled_back");
    for p in [&n1, &n2, &n3] {
        wait_running(p, "healthy", &v2).await;
        wait_view(p, "healthy", "rolled back", |v| v["state"] == "rolled_back").await;
    }
    phase(&format!("   stopped: {}", v["stopReason"]));

    phase("3. force-commit: a roll that would wait 10 minutes on its first node lands everywhere");
    let v4 = rule(4);
    expect(push(&n2, "healthy", &v4, &[("rollout", "rolling"), ("healthWindow", "10m"), ("stepTimeout", "20m")]).await, 200, "roll_started");
    wait_running(&n2, "healthy", &v4).await;
    assert_eq!(running(&n3, "healthy").await, Some(hash(&v2)), "n3 is past the index: master");
    expect(post(&n2, "/runtime/rule/force-commit-rolling", &pairs, "").await, 200, "roll_force_committed");
    for p in [&n1, &n2, &n3] {
        wait_stored(p, "healthy", &v4).await;
        wait_running(p, "healthy", &v4).await;
    }
    expect(post(&n2, "/runtime/rule/force-commit-rolling", &pairs, "").await, 409, "roll_finished");

    phase("4. the main killed mid-roll: the new main finishes the roll");
    let (m1, m2) = (rule_with_prefix("rf", 5), rule_with_prefix("rf", 6));
    expect(push(&n1, "failover", &m1, &[]).await, 200, "structural_applied");
    for p in [&n1, &n2, &n3] {
        wait_running(p, "failover", &m1).await;
    }
    expect(push(&n1, "failover", &m2, &[("rollout", "rolling"), ("healthWindow", "2s"), ("stepTimeout", "1m")]).await, 200, "roll_started");
    wait_view(&n1, "failover", "at its second node", |v| v["index"] == 1).await;
    let _ = n1.child.kill();
    let _ = n1.child.wait();
    let killed = Instant::now();
    wait_main(&[&n2, &n3], &n2, 2).await;
    let done = wait_view(&n2, "failover", "completed on the new main", |v| v["state"] == "completed").await;
    assert_eq!(node_states(&done), ["healthy", "healthy", "skipped"], "the dead old main is skipped: {done}");
    for p in [&n2, &n3] {
        wait_stored(p, "failover", &m2).await;
        wait_running(p, "failover", &m2).await;
    }
    phase(&format!("   completed by n2 {:?} after the kill", killed.elapsed()));

    n1 = spawn(dir.path(), 1, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    wait_running(&n1, "failover", &m2).await;
    wait_view(&n1, "failover", "completed on the returned node", |v| v["state"] == "completed").await;
    phase("   the old main returned and runs the committed content");
}
