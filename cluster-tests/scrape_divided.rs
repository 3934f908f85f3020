//! Scrape jobs divided among real `hotrule` processes (issue 22): three nodes on loopback
//! addresses with real UDP gossip, one scrape job of three targets served by this test process,
//! each target counting its hits. Every target is scraped by one node, its owner, and all nodes
//! agree on the owners (`GET /status/scrape`); kill -9 the owner of a target and it is scraped
//! again by its new owner within one interval of gossip seeing the owner gone.
//!
//! Real processes store in RocksDB: without the `rocksdb` feature there is nothing to run.
#![cfg(feature = "rocksdb")]

mod harness;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use harness::wait_until;
use hotrule::api::client::AdminClient;
use serde_json::Value;

const NET: u8 = 77;
const JOB: &str = "divided";
const INTERVAL: Duration = Duration::from_secs(1);
const WAIT: Duration = Duration::from_secs(40);
/// What a loaded machine may add to "within one interval".
const SLACK: Duration = Duration::from_secs(2);

/// Exposition targets in this process, each counting the scrapes it answered.
struct Targets {
    addrs: Vec<SocketAddr>,
    hits: Vec<Arc<AtomicU64>>,
}

impl Targets {
    async fn serve(count: usize) -> Targets {
        let (mut addrs, mut hits) = (Vec::new(), Vec::new());
        for _ in 0..count {
            let counter = Arc::new(AtomicU64::new(0));
            let counted = counter.clone();
            let app = Router::new().route(
                "/metrics",
                get(move || {
                    counted.fetch_add(1, Ordering::SeqCst);
                    async { "# TYPE up_here gauge\nup_here 1\n" }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            addrs.push(listener.local_addr().expect("addr"));
            tokio::spawn(async move { axum::serve(listener, app).await });
            hits.push(counter);
        }
        Targets { addrs, hits }
    }

    fn hits(&self) -> Vec<u64> {
        self.hits.iter().map(|h| h.load(Ordering::SeqCst)).collect()
    }

    /// The node configuration: one scrape job over every target.
    fn config(&self, dir: &Path) -> PathBuf {
        let targets: Vec<String> = self.addrs.iter().map(|a| format!("'{a}'")).collect();
        let text = format!(
            "ingest:\n  scrape_jobs:\n    - job_name: {JOB}\n      interval: 1s\n      timeout: 800ms\n      static_config:\n        targets: [{}]\n",
            targets.join(", ")
        );
        let path = dir.join("scrape.yaml");
        std::fs::write(&path, text).expect("config");
        path
    }

    /// Waits until every target answered `more` scrapes beyond `from`; then checks that none
    /// answered more than one scraper at one interval would have. Returns the time taken.
    async fn once_per_interval(&self, more: u64, what: &str) -> Duration {
        let from = self.hits();
        let started = Instant::now();
        wait_until(INTERVAL * (more as u32 + 3) + SLACK, what, || async {
            let now = self.hits();
            now.iter().zip(&from).all(|(n, f)| *n >= f + more)
        })
        .await;
        let took = started.elapsed();
        let most = took.as_secs_f64().floor() as u64 + 2;
        for ((addr, now), from) in self.addrs.iter().zip(self.hits()).zip(from) {
            // Three scrapers would answer about three times as often.
            assert!(now - from <= most, "{addr} scraped {} times in {took:?} (interval {INTERVAL:?})", now - from);
        }
        took
    }
}

struct Proc {
    child: Child,
    id: String,
    client: AdminClient,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Node `i` of the cluster (127.0.<NET>.<i+1>), seeded with node 1, with the scrape job.
fn spawn(dir: &Path, i: u8, secret: &Path, config: &Path) -> Proc {
    let bin = Path::new(env!("CARGO_BIN_EXE_hotrule"));
    let (mut command, host) = hotrule::bench::cluster::node_command(bin, dir, NET, usize::from(i), secret).expect("log file");
    let child = command.args(["--config", &format!("file:{}", config.display())]).spawn().expect("spawn hotrule");
    let client = AdminClient::new(&format!("{host}:17128"), None).expect("client");
    Proc { child, id: format!("{host}:17128"), client }
}

async fn get_json(p: &Proc, path: &str) -> Option<Value> {
    p.client.get(path).await.ok().and_then(|r| r.json())
}

async fn live_members(p: &Proc) -> Option<usize> {
    let status = get_json(p, "/cluster/status").await?;
    Some(status["members"].as_array()?.iter().filter(|m| m["live"] == true).count())
}

/// The owner of each target, when every node of `nodes` shows the same owners, the owner is one
/// of them, exactly the owner scrapes each target, and its last scrape of it answered.
async fn agreed_owners(nodes: &[&Proc]) -> Option<Vec<String>> {
    let mut agreed: Option<Vec<String>> = None;
    for node in nodes {
        let status = get_json(node, "/status/scrape").await?;
        let rows = status["targets"].as_array()?;
        let mut owners = Vec::new();
        for row in rows {
            let owner = row["owner"].as_str()?;
            let here = owner == node.id;
            let answered = row["lastScrape"]["result"] == "ok";
            if row["job"] != JOB || row["scrapedHere"] != here || (here && !answered) {
                return None;
            }
            owners.push(owner.to_string());
        }
        if agreed.as_ref().is_some_and(|a| *a != owners) {
            return None;
        }
        agreed = Some(owners);
    }
    agreed.filter(|owners| owners.iter().all(|o| nodes.iter().any(|n| n.id == *o)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_target_is_scraped_by_one_node_and_moves_when_its_owner_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "scrape-divided-secret").expect("secret");
    let targets = Targets::serve(3).await;
    let config = targets.config(dir.path());
    let mut nodes: Vec<Proc> = (1..=3).map(|i| spawn(dir.path(), i, &secret, &config)).collect();

    eprintln!("[scrape-divided] three nodes see each other and agree on the owner of every target");
    for node in &nodes {
        wait_until(WAIT, &format!("{} sees 3 live", node.id), || async { live_members(node).await == Some(3) }).await;
    }
    let refs: Vec<&Proc> = nodes.iter().collect();
    wait_until(WAIT, "the nodes agree on the owners", || async { agreed_owners(&refs).await.is_some() }).await;
    let owners = agreed_owners(&refs).await.expect("owners");
    eprintln!("[scrape-divided] owners: {owners:?}");
    let took = targets.once_per_interval(4, "four scrapes of every target").await;
    eprintln!("[scrape-divided] four scrapes of each target took {took:?}: one scraper each");
    let metrics = nodes[0].client.get("/metrics").await.expect("metrics").text();
    assert!(metrics.contains("hotrule_scrape_target_owned{job=\"divided\""), "{metrics}");

    eprintln!("[scrape-divided] kill -9 the owner of the first target");
    let victim = nodes.iter().position(|n| n.id == owners[0]).expect("the owner is a node");
    let mut dead = nodes.remove(victim);
    let killed = Instant::now();
    let _ = dead.child.kill();
    let _ = dead.child.wait();
    let at_kill = targets.hits();
    for node in &nodes {
        wait_until(WAIT, &format!("{} sees {} gone", node.id, dead.id), || async { live_members(node).await == Some(2) }).await;
    }
    let detected = killed.elapsed();
    wait_until(INTERVAL + SLACK, "the first target scraped again, by its new owner", || async { targets.hits()[0] > at_kill[0] }).await;
    eprintln!("[scrape-divided] gossip saw the owner gone after {detected:?}; scraped again {:?} after the kill", killed.elapsed());

    eprintln!("[scrape-divided] the survivors agree on the new owners; the other targets kept theirs");
    let refs: Vec<&Proc> = nodes.iter().collect();
    wait_until(WAIT, "the survivors agree on the owners", || async { agreed_owners(&refs).await.is_some() }).await;
    let moved = agreed_owners(&refs).await.expect("owners");
    for (before, after) in owners.iter().zip(&moved) {
        if *before != dead.id {
            assert_eq!(before, after, "a target of a live node moved");
        }
    }
    targets.once_per_interval(3, "three scrapes of every target by the survivors").await;
}
