//! Background workers and the one runner that owns them.
//!
//! Every background loop of a node (scan, sync, agent maintenance, configuration reload,
//! best-effort commit notices) is a [`Worker`]: [`Worker::work`] does one bounded unit of work,
//! [`Worker::wait_for_work`] waits for a reason to work again (a timer, a watch channel, a
//! notice). The loop between them lives here, once.
//!
//! The [`WorkerRunner`] owns the task set and the one cancellation token. Cancellation is
//! observed between units and while waiting: a unit that has started finishes (it is bounded),
//! then [`Worker::finish`] runs once. [`WorkerRunner::shutdown`] waits a bounded time for every
//! worker and aborts the ones still running.
//!
//! A worker that panics is logged and recorded in the shared [`WorkerHealth`] as dead, with its
//! panic message; `/readyz` reads it and names the dead worker. Nothing restarts it: a panic is
//! a bug, and a node that silently runs without its scan would hide it.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// What a worker wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// More work is ready: call [`Worker::work`] again.
    Busy,
    /// Nothing to do: call [`Worker::wait_for_work`].
    Idle,
    /// The worker has finished for good.
    Done,
}

/// One background loop, cut into a unit of work and a wait for a reason.
#[async_trait::async_trait]
pub trait Worker: Send + 'static {
    /// A stable name: it appears in logs and in `/readyz`.
    fn name(&self) -> &'static str;

    /// Where the worker starts: `Busy` works at once, `Idle` waits for a first reason.
    fn initial_state(&self) -> WorkerState {
        WorkerState::Busy
    }

    /// Does one bounded unit of work, logging its own failures, and says what comes next.
    /// It is not interrupted by cancellation (only by the runner's shutdown bound).
    async fn work(&mut self) -> WorkerState;

    /// Waits for a reason to work (timer, watch change, notice). It is dropped at any await
    /// point when the node shuts down.
    async fn wait_for_work(&mut self) -> WorkerState;

    /// Runs once after cancellation, before the worker stops (e.g. a last flush).
    async fn finish(&mut self) {}
}

/// Where a worker is in its life, as `/readyz` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerStatus {
    Running,
    Stopped,
    /// The worker panicked; the panic message.
    Dead(String),
}

/// The status of every worker of a node, shared with the HTTP layer.
#[derive(Debug, Default)]
pub struct WorkerHealth {
    workers: Mutex<BTreeMap<&'static str, WorkerStatus>>,
}

impl WorkerHealth {
    fn set(&self, name: &'static str, status: WorkerStatus) {
        self.workers.lock().unwrap_or_else(|p| p.into_inner()).insert(name, status);
    }

    /// Workers that panicked, with their panic messages.
    pub fn dead(&self) -> Vec<(&'static str, String)> {
        let workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        workers
            .iter()
            .filter_map(|(name, status)| match status {
                WorkerStatus::Dead(message) => Some((*name, message.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every worker and its status.
    pub fn all(&self) -> BTreeMap<&'static str, WorkerStatus> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// How a [`WorkerRunner::shutdown`] went.
#[derive(Debug, Default)]
pub struct ShutdownReport {
    /// Workers still running when the bound passed; they were aborted.
    pub aborted: Vec<&'static str>,
}

/// Owns every worker task of a node and the cancellation token that stops them.
pub struct WorkerRunner {
    tasks: JoinSet<()>,
    stop: CancellationToken,
    health: Arc<WorkerHealth>,
}

impl WorkerRunner {
    /// A runner whose workers stop when `stop` is cancelled.
    pub fn new(stop: CancellationToken) -> WorkerRunner {
        WorkerRunner { tasks: JoinSet::new(), stop, health: Arc::new(WorkerHealth::default()) }
    }

    /// The status board the HTTP layer reads.
    pub fn health(&self) -> Arc<WorkerHealth> {
        self.health.clone()
    }

    /// Starts `worker` on the task set.
    pub fn spawn(&mut self, worker: impl Worker) {
        let name = worker.name();
        self.health.set(name, WorkerStatus::Running);
        let stop = self.stop.clone();
        let health = self.health.clone();
        self.tasks.spawn(async move {
            match CatchUnwind(Box::pin(drive(worker, stop))).await {
                Ok(()) => health.set(name, WorkerStatus::Stopped),
                Err(message) => {
                    tracing::error!(worker = name, panic = %message, "worker panicked; the node reports not ready");
                    health.set(name, WorkerStatus::Dead(message));
                }
            }
        });
    }

    /// Cancels every worker and waits up to `bound` for them; the ones still running are
    /// aborted and named in the report.
    pub async fn shutdown(mut self, bound: Duration) -> ShutdownReport {
        self.stop.cancel();
        let drained = tokio::time::timeout(bound, async {
            while let Some(joined) = self.tasks.join_next().await {
                if let Err(e) = joined {
                    tracing::error!(error = %e, "worker task failed");
                }
            }
        })
        .await;
        let mut report = ShutdownReport::default();
        if drained.is_err() {
            report.aborted = self
                .health
                .all()
                .into_iter()
                .filter(|(_, status)| *status == WorkerStatus::Running)
                .map(|(name, _)| name)
                .collect();
            tracing::error!(workers = ?report.aborted, ?bound, "workers did not stop in time; aborted");
            self.tasks.shutdown().await;
        }
        report
    }
}

/// The loop every worker runs: work while busy, wait while idle, stop on cancellation.
async fn drive(mut worker: impl Worker, stop: CancellationToken) {
    let mut state = worker.initial_state();
    while !stop.is_cancelled() {
        state = match state {
            WorkerState::Busy => worker.work().await,
            WorkerState::Idle => tokio::select! {
                _ = stop.cancelled() => break,
                next = worker.wait_for_work() => next,
            },
            WorkerState::Done => return,
        };
    }
    worker.finish().await;
}

/// Turns a panic inside the wrapped future into an error carrying its message.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future<Output = ()>> Future for CatchUnwind<F> {
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => Poll::Ready(Ok(())),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_string()
    }
}

/// A queue of fire-and-forget jobs (best-effort commit notices), run by a worker instead of
/// a detached `tokio::spawn`, so shutdown waits for them and a panic is reported.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The sending end of a [`JobWorker`]'s queue.
#[derive(Clone)]
pub struct JobQueue {
    jobs_tx: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl JobQueue {
    /// Queues `job`; after shutdown it is dropped (the jobs are best effort).
    pub fn push(&self, job: Job) {
        if self.jobs_tx.send(job).is_err() {
            tracing::debug!("job queue closed; best-effort job dropped");
        }
    }
}

/// Runs queued jobs concurrently, each as soon as it is queued. A job that panics is logged;
/// the others go on. Jobs still running at shutdown are dropped: they are best effort.
pub struct JobWorker {
    name: &'static str,
    jobs_rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    running: JoinSet<()>,
}

impl JobWorker {
    pub fn new(name: &'static str) -> (JobWorker, JobQueue) {
        let (jobs_tx, jobs_rx) = tokio::sync::mpsc::unbounded_channel();
        (JobWorker { name, jobs_rx, running: JoinSet::new() }, JobQueue { jobs_tx })
    }
}

#[async_trait::async_trait]
impl Worker for JobWorker {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn work(&mut self) -> WorkerState {
        while let Ok(job) = self.jobs_rx.try_recv() {
            self.running.spawn(job);
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::select! {
            job = self.jobs_rx.recv() => match job {
                Some(job) => {
                    self.running.spawn(job);
                    WorkerState::Busy
                }
                None => WorkerState::Done,
            },
            Some(joined) = self.running.join_next() => {
                if let Err(e) = joined {
                    tracing::error!(worker = self.name, error = %e, "job failed");
                }
                WorkerState::Idle
            }
        }
    }
}

#[cfg(test)]
mod tests;
