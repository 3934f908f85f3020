//! Scrape jobs divided among nodes: three scrape workers (three nodes' views of one live set,
//! each a `Fixed`) over one job of four loopback targets that count their hits. Each target is
//! scraped by its owner only, about once per interval; when a node dies, its targets are
//! scraped by their new owners within an interval of the live set changing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::base::ids::NodeId;
use crate::base::owner::{Fixed, LiveSet};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::WorkerRunner;
use crate::data::ingest::scrape::owner_key;
use crate::data::ingest::{BodyLimits, Ingest, RecordingSink, ScrapeBoard, ScrapeJob, ScrapeWorker};

const JOB: &str = "divided";
const INTERVAL: Duration = Duration::from_millis(500);
/// What a loaded machine may add to "within one interval".
const SLACK: Duration = Duration::from_secs(1);

/// Loopback targets, each counting the scrapes it answered.
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

    fn job(&self) -> ScrapeJob {
        ScrapeJob {
            name: JOB.into(),
            interval: INTERVAL,
            timeout: Duration::from_millis(400),
            metrics_path: "/metrics".into(),
            targets: self.addrs.iter().map(ToString::to_string).collect(),
            labels: Default::default(),
        }
    }

    /// The owner of target `i` among `nodes`.
    fn owner(&self, i: usize, nodes: &[NodeId]) -> NodeId {
        let key = owner_key(JOB, &format!("http://{}/metrics", self.addrs[i]));
        LiveSet::new(nodes[0].clone(), nodes.to_vec()).owner(&key).clone()
    }
}

/// One node's scrape worker, its view of the live set, and what it submitted.
struct Node {
    id: NodeId,
    live: Arc<Fixed>,
    sink: Arc<RecordingSink>,
    telemetry: Arc<SelfMetrics>,
    board: Arc<ScrapeBoard>,
    runner: WorkerRunner,
}

impl Node {
    fn start(id: &str, all: &[NodeId], job: &ScrapeJob) -> Node {
        let id = NodeId(id.into());
        let live = Arc::new(Fixed::new(LiveSet::new(id.clone(), all.to_vec())));
        let sink = Arc::new(RecordingSink::new());
        let telemetry = Arc::new(SelfMetrics::new());
        let board = Arc::new(ScrapeBoard::new());
        let ingest = Ingest::new(sink.clone(), telemetry.clone(), BodyLimits::default());
        let mut runner = WorkerRunner::new(CancellationToken::new());
        runner.spawn(ScrapeWorker::new(ingest, std::slice::from_ref(job), live.clone(), board.clone()));
        Node { id, live, sink, telemetry, board, runner }
    }

    /// This node now sees `nodes` live.
    fn see(&self, nodes: &[NodeId]) {
        self.live.set(LiveSet::new(self.id.clone(), nodes.to_vec()));
    }

    /// Batches submitted per target (`instance`), from the `from`th batch on.
    fn scraped_since(&self, from: usize) -> BTreeMap<String, usize> {
        let mut per_target = BTreeMap::new();
        for batch in self.sink.batches().iter().skip(from) {
            if let Some(sample) = batch.samples.first() {
                *per_target.entry(sample.label("service_instance_id").to_string()).or_insert(0) += 1;
            }
        }
        per_target
    }

    fn owned_gauge(&self, target: &SocketAddr) -> i64 {
        self.telemetry.scrape_target_owned.get_or_create(&labels([("job", JOB), ("target", &target.to_string())])).get()
    }
}

/// Waits (bounded) until `condition` holds, checking every 20 ms; returns the time it took.
async fn wait_until(within: Duration, what: &str, condition: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < within, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// Waits until every target in `which` answered `more` scrapes beyond `from`; returns the time.
async fn wait_for_hits(targets: &Targets, which: &[usize], from: &[u64], more: u64, what: &str) -> Duration {
    wait_until(INTERVAL * (more as u32 + 4) + SLACK, what, || {
        let now = targets.hits();
        which.iter().all(|&i| now[i] >= from[i] + more)
    })
    .await
}

/// Checks that, since the counts `from`, every target was submitted by `owners[i]` only.
fn assert_only_owners(nodes: &[&Node], from: &[usize], targets: &Targets, owners: &[NodeId]) {
    for (i, addr) in targets.addrs.iter().enumerate() {
        for (node, since) in nodes.iter().zip(from) {
            let count = node.scraped_since(*since).get(&addr.to_string()).copied().unwrap_or(0);
            match node.id == owners[i] {
                true => assert!(count >= 1, "{} owns {addr} and did not scrape it", node.id),
                false => assert_eq!(count, 0, "{} scraped {addr}, owned by {}", node.id, owners[i]),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_target_is_scraped_by_its_owner_alone_and_a_dead_nodes_targets_move_within_an_interval() {
    let targets = Targets::serve(4).await;
    let job = targets.job();
    let all: Vec<NodeId> = ["n1", "n2", "n3"].iter().map(|n| NodeId(n.to_string())).collect();
    let nodes: Vec<Node> = all.iter().map(|id| Node::start(&id.0, &all, &job)).collect();
    let every: Vec<usize> = (0..targets.addrs.len()).collect();
    let owners: Vec<NodeId> = every.iter().map(|&i| targets.owner(i, &all)).collect();

    // Phase 1: three nodes; every target is scraped by its owner, once per interval.
    let start = targets.hits();
    wait_for_hits(&targets, &every, &start, 1, "a first scrape of every target").await;
    let (hits, batches) = (targets.hits(), nodes.iter().map(|n| n.sink.batches().len()).collect::<Vec<_>>());
    let took = wait_for_hits(&targets, &every, &hits, 4, "four more scrapes of every target").await;
    let now = targets.hits();
    let most = (took.as_secs_f64() / INTERVAL.as_secs_f64()).floor() as u64 + 2;
    for (i, addr) in targets.addrs.iter().enumerate() {
        let scraped = now[i] - hits[i];
        // Three scrapers would answer about three times as often.
        assert!(scraped <= most, "{addr} scraped {scraped} times in {took:?} (interval {INTERVAL:?})");
    }
    let node_refs: Vec<&Node> = nodes.iter().collect();
    assert_only_owners(&node_refs, &batches, &targets, &owners);
    for node in &nodes {
        for (i, status) in node.board.snapshot().iter().enumerate() {
            let here = node.id == owners[i];
            assert_eq!(status.owner.as_ref(), Some(&owners[i]), "{} shows {status:?}", node.id);
            assert_eq!(status.scraped_here, here, "{} shows {status:?}", node.id);
            assert_eq!(status.last_scrape.as_ref().map(|l| l.result), here.then_some("ok"), "{} shows {status:?}", node.id);
            assert_eq!(node.owned_gauge(&targets.addrs[i]), i64::from(here));
        }
    }

    // Phase 2: the owner of target 0 dies; the others see it gone. Its targets are scraped
    // again, by their new owners, within one interval; the others keep their owners.
    let mut nodes = nodes;
    let dead_at = nodes.iter().position(|n| n.id == owners[0]).expect("an owner among the nodes");
    let dead = nodes.remove(dead_at);
    dead.runner.shutdown(Duration::from_secs(5)).await;
    let survivors: Vec<NodeId> = nodes.iter().map(|n| n.id.clone()).collect();
    let (hits, batches) = (targets.hits(), nodes.iter().map(|n| n.sink.batches().len()).collect::<Vec<_>>());
    for node in &nodes {
        node.see(&survivors);
    }
    let orphans: Vec<usize> = every.iter().copied().filter(|&i| owners[i] == dead.id).collect();
    let took = wait_until(INTERVAL + SLACK, "the dead node's targets scraped again", || {
        let now = targets.hits();
        orphans.iter().all(|&i| now[i] > hits[i])
    })
    .await;
    eprintln!("[scrape-divided] {} targets of {} scraped again {took:?} after it left", orphans.len(), dead.id);
    let new_owners: Vec<NodeId> = every.iter().map(|&i| targets.owner(i, &survivors)).collect();
    for i in &every {
        if owners[*i] != dead.id {
            assert_eq!(new_owners[*i], owners[*i], "a target of a live node moved");
        }
    }
    wait_for_hits(&targets, &every, &hits, 3, "three scrapes of every target by the survivors").await;
    let node_refs: Vec<&Node> = nodes.iter().collect();
    assert_only_owners(&node_refs, &batches, &targets, &new_owners);
    for node in nodes {
        node.runner.shutdown(Duration::from_secs(5)).await;
    }
}
