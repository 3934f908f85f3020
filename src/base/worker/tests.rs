use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::*;

/// Counts its units; waits on a notice that never comes, so only cancellation stops it.
struct Idler {
    name: &'static str,
    units: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Worker for Idler {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn work(&mut self) -> WorkerState {
        self.units.fetch_add(1, Ordering::SeqCst);
        WorkerState::Idle
    }
    async fn wait_for_work(&mut self) -> WorkerState {
        std::future::pending().await
    }
    async fn finish(&mut self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// Panics in its second unit of work.
struct Panicker {
    units: usize,
}

#[async_trait::async_trait]
impl Worker for Panicker {
    fn name(&self) -> &'static str {
        "panicker"
    }
    async fn work(&mut self) -> WorkerState {
        self.units += 1;
        if self.units == 2 {
            panic!("unit {} broke", self.units);
        }
        WorkerState::Idle
    }
    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::task::yield_now().await;
        WorkerState::Busy
    }
}

/// A unit of work that never ends (a bug the shutdown bound must contain).
struct Stuck;

#[async_trait::async_trait]
impl Worker for Stuck {
    fn name(&self) -> &'static str {
        "stuck"
    }
    async fn work(&mut self) -> WorkerState {
        std::future::pending().await
    }
    async fn wait_for_work(&mut self) -> WorkerState {
        WorkerState::Busy
    }
}

async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

#[tokio::test]
async fn a_panicking_worker_is_recorded_dead_with_its_message_and_the_others_run_on() {
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let health = runner.health();
    let units = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    runner.spawn(Idler { name: "idler", units: units.clone(), finished: finished.clone() });
    runner.spawn(Panicker { units: 0 });
    wait_until("the panic to be recorded", || !health.dead().is_empty()).await;
    let dead = health.dead();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, "panicker");
    assert!(dead[0].1.contains("unit 2 broke"), "panic message kept: {}", dead[0].1);
    assert_eq!(health.all().get("idler"), Some(&WorkerStatus::Running));
    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty());
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert!(matches!(health.all().get("panicker"), Some(WorkerStatus::Dead(_))), "a stop does not hide the panic");
}

#[tokio::test]
async fn shutdown_cancels_every_worker_within_the_bound() {
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let health = runner.health();
    let units = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let names = ["scan", "sync", "agent-maintenance", "config-reload"];
    for name in names {
        runner.spawn(Idler { name, units: units.clone(), finished: finished.clone() });
    }
    wait_until("every worker to do its first unit", || units.load(Ordering::SeqCst) == names.len()).await;
    let started = Instant::now();
    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(1), "idle workers stop at once: {:?}", started.elapsed());
    assert!(report.aborted.is_empty());
    assert_eq!(finished.load(Ordering::SeqCst), names.len(), "each worker's finish ran once");
    for name in names {
        assert_eq!(health.all().get(name), Some(&WorkerStatus::Stopped), "{name}");
    }
}

#[tokio::test]
async fn a_worker_stuck_in_its_unit_is_aborted_at_the_bound_and_named() {
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let units = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    runner.spawn(Stuck);
    runner.spawn(Idler { name: "idler", units: units.clone(), finished: finished.clone() });
    wait_until("the idler to start", || units.load(Ordering::SeqCst) == 1).await;
    let bound = Duration::from_millis(200);
    let started = Instant::now();
    let report = runner.shutdown(bound).await;
    let took = started.elapsed();
    assert!(took >= bound && took < bound + Duration::from_secs(2), "took {took:?}");
    assert_eq!(report.aborted, vec!["stuck"]);
}

#[tokio::test]
async fn the_job_worker_runs_each_job_and_survives_a_panicking_one() {
    let mut runner = WorkerRunner::new(CancellationToken::new());
    let health = runner.health();
    let (worker, queue) = JobWorker::new("commit-notices");
    runner.spawn(worker);
    let done = Arc::new(AtomicUsize::new(0));
    queue.push(Box::pin(async { panic!("a notice broke") }));
    for _ in 0..3 {
        let done = done.clone();
        queue.push(Box::pin(async move {
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    wait_until("every job to run", || done.load(Ordering::SeqCst) == 3).await;
    assert!(health.dead().is_empty(), "a job's panic does not kill the worker");
    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty());
}
