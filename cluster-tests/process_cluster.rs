//! A cluster of real `hotrule` processes on loopback addresses: real UDP gossip with default
//! settings and the HTTP bus with an HMAC secret. Forwarding, convergence, kill -9 of the main,
//! failover, the old main's return, and a node with the wrong secret kept out of gossip and the bus.

mod harness;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use harness::wait_until;
use hotrule::api::client::{AdminClient, with_query};

const WAIT: Duration = Duration::from_secs(40);

fn rule(prefix: &str, step: u32) -> String {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT{step}M')\n"
    )
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

/// Node `i` of the cluster in `net` (127.0.<net>.<i+1>), seeded with node 1.
fn spawn(dir: &Path, net: u8, i: u8, secret_file: &Path) -> Proc {
    spawn_with(dir, net, i, secret_file, &[])
}

fn spawn_with(dir: &Path, net: u8, i: u8, secret_file: &Path, env: &[(&str, &str)]) -> Proc {
    let bin = Path::new(env!("CARGO_BIN_EXE_hotrule"));
    let (mut command, host) = hotrule::bench::cluster::node_command(bin, dir, net, usize::from(i), secret_file).expect("log file");
    let child = command
        .args(["--scan-interval", "2", "--self-heal-threshold", "4"])
        .envs(env.iter().copied())
        .spawn()
        .expect("spawn hotrule");
    let client = AdminClient::new(&format!("{host}:17128"), None).expect("client");
    Proc { child, host, client }
}

async fn status(p: &Proc) -> Option<serde_json::Value> {
    p.client.get("/cluster/status").await.ok().and_then(|r| r.json())
}

async fn wait_main(nodes: &[&Proc], main: &Proc, live: usize) {
    let want = format!("{}:17128", main.host);
    for node in nodes {
        wait_until(WAIT, &format!("{} sees main {want} with {live} live", node.host), || async {
            status(node).await.is_some_and(|s| {
                s["main"] == want.as_str()
                    && s["members"].as_array().is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == live)
            })
        })
        .await;
    }
}

async fn push(p: &Proc, name: &str, content: &str) -> (u16, serde_json::Value) {
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", name)]);
    let reply = p.client.post(&path, content.as_bytes().to_vec()).await.expect("push");
    (reply.status.as_u16(), reply.json().unwrap_or_default())
}

async fn wait_rule(p: &Proc, name: &str, content: &str) {
    let hash = hotrule::base::ids::ContentHash::of(content.as_bytes()).0;
    wait_until(WAIT, &format!("{} runs {name}", p.host), || async {
        let path = with_query("/runtime/rule", &[("catalog", "otel-rules"), ("name", name)]);
        let stored = p.client.get(&path).await.ok().and_then(|r| {
            r.headers.get("x-sw-content-hash").and_then(|v| v.to_str().ok()).map(str::to_string)
        });
        stored.as_deref() == Some(hash.as_str())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_three_process_cluster_forwards_converges_and_fails_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "correct horse battery staple").expect("secret");
    let net = 61;
    let n1 = spawn(dir.path(), net, 1, &secret);
    let n2 = spawn(dir.path(), net, 2, &secret);
    let n3 = spawn(dir.path(), net, 3, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;

    eprintln!("[process-cluster] a write to n3 is forwarded to the main n1 and reaches everyone");
    let (code, json) = push(&n3, "pc", &rule("pc", 1)).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    for node in [&n1, &n2, &n3] {
        wait_rule(node, "pc", &rule("pc", 1)).await;
    }

    eprintln!("[process-cluster] a node with the wrong secret is kept out of gossip and the bus");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not the secret").expect("secret");
    let n4 = spawn(dir.path(), net, 4, &wrong);
    wait_until(WAIT, "n4 ready", || async { n4.client.get("/readyz").await.is_ok_and(|r| r.status.is_success()) }).await;
    // n4 seeds n1, whose sealed transport drops its datagrams (wrong MAC): n4 never becomes a
    // member, and it hears no one, so it is alone and its own main.
    wait_until(WAIT, "n1 drops n4's gossip as a bad MAC", || async {
        status(&n1).await.is_some_and(|s| s["security"]["gossip"]["badMac"].as_u64().is_some_and(|n| n > 0))
    })
    .await;
    let alone = status(&n4).await.expect("n4 status");
    assert_eq!(alone["members"].as_array().map(Vec::len), Some(1), "{alone}");
    assert_eq!(alone["main"], format!("{}:17128", n4.host), "{alone}");
    let (code, json) = push(&n4, "intruder", &rule("in", 1)).await;
    assert_eq!(code, 200, "n4, alone, applies its own write: {json}");
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    for node in [&n1, &n2, &n3] {
        let list = node.client.get("/runtime/rule/list").await.expect("list").json().expect("json");
        let rules = list["rules"].as_array().cloned().unwrap_or_default();
        assert!(!rules.iter().any(|r| r["name"] == "intruder"), "{} holds n4's write", node.host);
    }
    drop(n4);

    eprintln!("[process-cluster] kill -9 the main; n2 takes over and accepts writes");
    let mut n1 = n1;
    let killed = Instant::now();
    let _ = n1.child.kill();
    let _ = n1.child.wait();
    wait_until(WAIT, "a write through n3 is accepted by the new main", || async {
        push(&n3, "pc", &rule("pc", 2)).await.0 == 200
    })
    .await;
    eprintln!("[process-cluster] first write accepted {:?} after the kill", killed.elapsed());
    wait_rule(&n2, "pc", &rule("pc", 2)).await;

    eprintln!("[process-cluster] n1 returns, becomes the main again, and holds the write it missed");
    let n1 = spawn(dir.path(), net, 1, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    wait_rule(&n1, "pc", &rule("pc", 2)).await;
    let (code, _) = push(&n2, "pc", &rule("pc", 3)).await;
    assert_eq!(code, 200);
    for node in [&n1, &n2, &n3] {
        wait_rule(node, "pc", &rule("pc", 3)).await;
    }
}

async fn row(p: &Proc, name: &str) -> Option<serde_json::Value> {
    let list = p.client.get("/runtime/rule/list").await.ok()?.json()?;
    list["rules"].as_array()?.iter().find(|r| r["name"] == name).cloned()
}

/// The main crashes mid-structural: after its Suspend broadcast, before persist (a failpoint
/// aborts the process). Peers are left PEER-suspended with an unmoved entry; they self-heal,
/// the next node becomes the main, and nothing of the aborted change is stored anywhere.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_self_heal_when_the_main_crashes_mid_structural() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "crash-test-secret").expect("secret");
    let net = 62;
    // The first structural persist on n1 succeeds; the second aborts the process.
    let crash = [("FAILPOINTS", "workflow::before_persist=1*off->return(abort)")];
    let n1 = spawn_with(dir.path(), net, 1, &secret, &crash);
    let n2 = spawn(dir.path(), net, 2, &secret);
    let n3 = spawn(dir.path(), net, 3, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    let (code, _) = push(&n2, "crash", &rule("cr", 1)).await;
    assert_eq!(code, 200);
    for node in [&n1, &n2, &n3] {
        wait_rule(node, "crash", &rule("cr", 1)).await;
    }
    eprintln!("[crash] a structural change: n1 suspends the peers, then aborts before persisting");
    let added = format!("{}  - name: extra\n    exp: extra_total.sum(['svc'])\n", rule("cr", 1));
    let (code, json) = push(&n3, "crash", &added).await;
    assert_eq!((code, json["applyStatus"].as_str()), (502, Some("forward_failed")), "{json}");
    let suspended = row(&n2, "crash").await.expect("row");
    eprintln!("[crash] n2 right after the crash: suspendOrigin {}", suspended["suspendOrigin"]);
    eprintln!("[crash] the peers self-heal (threshold 4 s) with the old content");
    for node in [&n2, &n3] {
        wait_until(WAIT, "PEER suspension self-heals", || async {
            row(node, "crash").await.is_some_and(|r| r["suspendOrigin"] == "NONE" && r["localState"] == "RUNNING")
        })
        .await;
        wait_rule(node, "crash", &rule("cr", 1)).await;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_hotrule"))
        .args(["cluster", "status", "--server", &format!("http://{}:17128", n2.host)])
        .output()
        .expect("cli");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && text.contains("main:") && text.contains("NODE"), "{text}");
    assert!(text.contains("agent configs: served"), "n2 synced long ago: {text}");
    eprintln!("[crash] n2 takes over and accepts writes");
    wait_until(WAIT, "the new main accepts the change", || async { push(&n3, "crash", &added).await.0 == 200 }).await;
    for node in [&n2, &n3] {
        wait_rule(node, "crash", &added).await;
    }
}

/// The main's workflow aborts mid-structural: after its Suspend broadcast, persist fails (a
/// failpoint returns an error). The operator gets 500 persist_failed, the main resumes every
/// peer at once (no waiting for self-heal), and no node stores the aborted change.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_main_that_aborts_mid_structural_resumes_its_peers_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "abort-test-secret").expect("secret");
    let net = 63;
    // The self-heal threshold is 4 s; the check runs right after the answer, so only the
    // main's own Resume can have cleared the peers' suspension.
    let spawn_slow_heal = |i: u8, env: &[(&str, &str)]| spawn_with(dir.path(), net, i, &secret, env);
    let abort = [("FAILPOINTS", "workflow::persist=1*off->return(disk full)")];
    let n1 = spawn_slow_heal(1, &abort);
    let n2 = spawn_slow_heal(2, &[]);
    let n3 = spawn_slow_heal(3, &[]);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    let (code, _) = push(&n2, "abort", &rule("ab", 1)).await;
    assert_eq!(code, 200);
    for node in [&n1, &n2, &n3] {
        wait_rule(node, "abort", &rule("ab", 1)).await;
    }
    eprintln!("[abort] a structural change whose persist fails on the main");
    let added = format!("{}  - name: extra\n    exp: extra_total.sum(['svc'])\n", rule("ab", 1));
    let started = Instant::now();
    let (code, json) = push(&n3, "abort", &added).await;
    assert_eq!((code, json["applyStatus"].as_str()), (500, Some("persist_failed")), "{json}");
    for node in [&n1, &n2, &n3] {
        let r = row(node, "abort").await.expect("row");
        assert_eq!(r["suspendOrigin"], "NONE", "{} resumed by the main's Resume: {r}", node.host);
        assert_eq!(r["localState"], "RUNNING", "{r}");
        wait_rule(node, "abort", &rule("ab", 1)).await;
    }
    eprintln!("[abort] every node resumed and unchanged {:?} after the request", started.elapsed());
}

/// Rule history over real processes (issue 26): v1 and v2 are pushed, the main is killed with
/// kill -9, and v1 is restored through a surviving node with the CLI (`rule history --json`,
/// `rule diff`, `rule restore`); the restore is committed by the new main and the content
/// converges on the survivors, then on the old main when it returns, with the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_is_restored_through_a_survivor_after_the_main_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "correct horse battery staple").expect("secret");
    let net = 64;
    let n1 = spawn(dir.path(), net, 1, &secret);
    let n2 = spawn(dir.path(), net, 2, &secret);
    let n3 = spawn(dir.path(), net, 3, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    let (v1, v2) = (rule("hist", 1), rule("hist", 2));

    eprintln!("[process-history] push v1 and v2 through n3; both reach everyone");
    let (code, json) = push(&n3, "ph", &v1).await;
    assert_eq!(code, 200, "{json}");
    let r1 = json["revision"].as_str().expect("revision").to_string();
    let (code, json) = push(&n3, "ph", &v2).await;
    assert_eq!(code, 200, "{json}");
    for node in [&n1, &n2, &n3] {
        wait_rule(node, "ph", &v2).await;
    }
    let server3 = format!("http://{}:17128", n3.host);
    wait_until(WAIT, "n3's history holds both revisions", || async {
        let (code, out, _) = harness::hotrule_cli(&["rule", "history", "--server", &server3, "--catalog", "otel-rules", "--name", "ph", "--json"], &[]).await;
        code == 0 && serde_json::from_str::<serde_json::Value>(&out).is_ok_and(|h| h["revisions"].as_array().is_some_and(|r| r.len() == 2))
    })
    .await;

    eprintln!("[process-history] kill -9 the main n1");
    let mut n1 = n1;
    let _ = n1.child.kill();
    let _ = n1.child.wait();

    eprintln!("[process-history] the diff and the restore of v1 through n3, committed by the new main n2");
    let (code, out, err) = harness::hotrule_cli(&["rule", "history", "--server", &server3, "--catalog", "otel-rules", "--name", "ph", "--json"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let history: serde_json::Value = serde_json::from_str(&out).expect("history json");
    let r2 = history["revisions"][0]["revision"].as_str().expect("r2").to_string();
    assert_eq!(history["revisions"][1]["revision"], r1.as_str());
    let (code, out, err) =
        harness::hotrule_cli(&["rule", "diff", "--server", &server3, "--catalog", "otel-rules", "--name", "ph", "--from", &r1, "--to", &r2], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("-    exp: requests_total.sum(['svc']).rate('PT1M')\n+    exp: requests_total.sum(['svc']).rate('PT2M')\n"), "{out}");
    // Writes sent during the failover wait for the next main (`forward_wait`); one in flight
    // at the kill may answer 502, so the restore is retried until the new main took it.
    wait_until(WAIT, "the restore through n3 is accepted", || async {
        let (code, _, _) = harness::hotrule_cli(
            &["rule", "restore", "--server", &server3, "--catalog", "otel-rules", "--name", "ph", "--revision", &r1],
            &[],
        )
        .await;
        code == 0
    })
    .await;
    for node in [&n2, &n3] {
        wait_rule(node, "ph", &v1).await;
    }
    let n2_id = format!("{}:17128", n2.host);
    wait_until(WAIT, "the restore's revision is in every survivor's history", || async {
        let mut alike = Vec::new();
        for node in [&n2, &n3] {
            let path = with_query("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "ph")]);
            let Some(body) = node.client.get(&path).await.ok().and_then(|r| r.json()) else { return false };
            let latest = body["revisions"][0].clone();
            if latest["action"] != "restore" || latest["restoreOf"] != r1.as_str() || latest["committedBy"] != n2_id.as_str() {
                return false;
            }
            alike.push(body["revisions"].clone());
        }
        alike[0] == alike[1]
    })
    .await;

    eprintln!("[process-history] n1 returns and holds the restored content and its history");
    let n1 = spawn(dir.path(), net, 1, &secret);
    wait_main(&[&n1, &n2, &n3], &n1, 3).await;
    wait_rule(&n1, "ph", &v1).await;
    wait_until(WAIT, "n1's history holds the restore", || async {
        let path = with_query("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "ph")]);
        n1.client.get(&path).await.ok().and_then(|r| r.json()).is_some_and(|b| {
            b["revisions"].as_array().is_some_and(|r| r.len() == 3) && b["revisions"][0]["restoreOf"] == r1.as_str()
        })
    })
    .await;
}
