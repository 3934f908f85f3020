//! The scrape worker against loopback targets: a fixture exposition, a slow target timing out
//! (never scraped twice at once), and a full queue backing a target off.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::data::seam::{Protocol, SubmitError};
use crate::data::ingest::{BodyLimits, Ingest, RecordingSink, ScrapeJob, ScrapeWorker};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::WorkerRunner;

const FIXTURE: &str = "\
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 0.42
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 1234.5
node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 12.25
# TYPE http_seconds histogram
http_seconds_bucket{le=\"0.5\"} 2
http_seconds_bucket{le=\"+Inf\"} 5
http_seconds_sum 3.5
http_seconds_count 5
";

/// Arrival times of the requests of each path.
#[derive(Default)]
struct Arrivals {
    fast: Mutex<Vec<Instant>>,
    slow: Mutex<Vec<Instant>>,
}

async fn target() -> (std::net::SocketAddr, Arc<Arrivals>) {
    let arrivals = Arc::new(Arrivals::default());
    let app = Router::new()
        .route(
            "/metrics",
            get(|State(a): State<Arc<Arrivals>>| async move {
                a.fast.lock().expect("lock").push(Instant::now());
                FIXTURE
            }),
        )
        .route(
            "/slow",
            get(|State(a): State<Arc<Arrivals>>| async move {
                a.slow.lock().expect("lock").push(Instant::now());
                tokio::time::sleep(Duration::from_secs(3)).await;
                FIXTURE
            }),
        )
        .with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, arrivals)
}

fn job(name: &str, addr: std::net::SocketAddr, path: &str, interval_ms: u64, timeout_ms: u64) -> ScrapeJob {
    ScrapeJob {
        name: name.into(),
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(timeout_ms),
        metrics_path: path.into(),
        targets: vec![addr.to_string()],
        labels: [("env".to_string(), "test".to_string())].into_iter().collect(),
    }
}

/// A worker of a node alone: it owns every target.
fn alone(ingest: Arc<Ingest>, jobs: &[ScrapeJob]) -> ScrapeWorker {
    let live = Arc::new(crate::base::owner::Alone(crate::base::ids::NodeId("n1".into())));
    ScrapeWorker::new(ingest, jobs, live, Arc::new(crate::data::ingest::ScrapeBoard::new()))
}

fn scrapes(telemetry: &SelfMetrics, job: &str, result: &str) -> u64 {
    SelfMetrics::counter_value(&telemetry.scrapes, &labels([("job", job), ("result", result)]))
}

/// Waits (bounded) until `condition` holds, checking every 20 ms.
async fn wait_until(within: Duration, what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_scrape_submits_one_converted_batch_with_the_target_labels() {
    let (addr, _) = target().await;
    let sink = Arc::new(RecordingSink::new());
    let telemetry = Arc::new(SelfMetrics::new());
    let ingest = Ingest::new(sink.clone(), telemetry.clone(), BodyLimits::default());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(alone(ingest, &[job("vm-monitoring", addr, "/metrics", 60_000, 2_000)]));
    assert!(sink.wait_for_submissions(1, Duration::from_secs(10)).await >= 1);
    let batches = sink.batches();
    let batch = &batches[0];
    assert_eq!(batch.protocol, Protocol::Scrape);
    let load = super::find(&batch.samples, "node_load1", &[]);
    assert_eq!(load.value, 0.42);
    assert_eq!(load.label("job_name"), "vm-monitoring");
    assert_eq!(load.label("service_instance_id"), addr.to_string());
    assert_eq!(load.label("node_identifier_host_name"), "127.0.0.1");
    assert_eq!(load.label("env"), "test");
    assert_eq!(super::by_label(&batch.samples, "http_seconds", "le"), vec![("0.5".into(), 2.0), ("Infinity".into(), 3.0)]);
    assert!(batch.samples.iter().all(|s| s.timestamp_ms == batch.received_ms), "unstamped samples get the scrape time");
    assert_eq!(scrapes(&telemetry, "vm-monitoring", "ok"), 1);
    assert_eq!(SelfMetrics::counter_value(&telemetry.samples_received, &labels([("protocol", "scrape")])), batch.samples.len() as u64);
    runner.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_slow_target_times_out_and_is_never_scraped_twice_at_once() {
    let (addr, arrivals) = target().await;
    let sink = Arc::new(RecordingSink::new());
    let telemetry = Arc::new(SelfMetrics::new());
    let ingest = Ingest::new(sink.clone(), telemetry.clone(), BodyLimits::default());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let timeout = Duration::from_millis(150);
    runner.spawn(alone(ingest, &[job("slow", addr, "/slow", 200, 150)]));
    wait_until(Duration::from_secs(15), "three timeouts", || scrapes(&telemetry, "slow", "timeout") >= 3).await;
    runner.shutdown(Duration::from_secs(5)).await;
    assert!(sink.accepted().is_empty());
    let times = arrivals.slow.lock().expect("lock").clone();
    assert!(times.len() >= 3);
    for pair in times.windows(2) {
        // The next scrape starts only after the previous one gave up (its timeout).
        assert!(pair[1] - pair[0] >= timeout - Duration::from_millis(5), "overlapping scrapes: {:?}", pair[1] - pair[0]);
    }
    assert_eq!(scrapes(&telemetry, "slow", "ok"), 0);
}

#[tokio::test]
async fn a_full_queue_skips_the_intervals_its_retry_after_covers() {
    let (addr, arrivals) = target().await;
    let sink = Arc::new(RecordingSink::new());
    sink.refuse_next(SubmitError::QueueFull { retry_after: Duration::from_millis(700) });
    let telemetry = Arc::new(SelfMetrics::new());
    let ingest = Ingest::new(sink.clone(), telemetry.clone(), BodyLimits::default());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(alone(ingest, &[job("busy", addr, "/metrics", 100, 100)]));
    assert!(sink.wait_for_submissions(2, Duration::from_secs(10)).await >= 2);
    runner.shutdown(Duration::from_secs(5)).await;
    assert_eq!(scrapes(&telemetry, "busy", "queue_full"), 1);
    assert!(scrapes(&telemetry, "busy", "ok") >= 1);
    assert!(SelfMetrics::counter_value(&telemetry.samples_rejected, &labels([("protocol", "scrape"), ("reason", "queue_full")])) > 0);
    let times = arrivals.fast.lock().expect("lock").clone();
    // Without the backoff the second scrape would come 100 ms after the first; 700 ms of
    // retry-after skip seven intervals (the next is 800 ms after the first).
    assert!(times[1] - times[0] >= Duration::from_millis(750), "second scrape after {:?}", times[1] - times[0]);
    assert_eq!(sink.accepted().len(), sink.seen() - 1);
}

#[tokio::test]
async fn an_unreachable_target_counts_errors() {
    // A port that was bound then freed: nothing listens there.
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let sink = Arc::new(RecordingSink::new());
    let telemetry = Arc::new(SelfMetrics::new());
    let ingest = Ingest::new(sink.clone(), telemetry.clone(), BodyLimits::default());
    let mut runner = WorkerRunner::new(CancellationToken::new());
    runner.spawn(alone(ingest, &[job("down", addr, "/metrics", 100, 100)]));
    wait_until(Duration::from_secs(10), "two errors", || scrapes(&telemetry, "down", "error") + scrapes(&telemetry, "down", "timeout") >= 2).await;
    runner.shutdown(Duration::from_secs(5)).await;
    assert!(sink.accepted().is_empty());
}
