//! The agent maintenance worker: one unit of work is [`AgentService::maintain`] (forget agents
//! past the retention, flush changed agent state to storage in one synced batch); it waits for
//! its interval or for shutdown, and flushes once more on the way out.

use std::sync::Arc;
use std::time::Duration;

use super::service::AgentService;
use crate::base::worker::{Worker, WorkerState};

/// How often agent state is flushed by default.
pub fn default_flush_interval() -> Duration {
    Duration::from_secs(5)
}

async fn maintain_once(service: &Arc<AgentService>) {
    let service = Arc::clone(service);
    // The flush is a synced storage write: keep it off the async workers.
    match tokio::task::spawn_blocking(move || service.maintain()).await {
        Ok(Ok(report))
            if report.forgotten > 0 || report.flushed.upserted + report.flushed.removed > 0 =>
        {
            tracing::debug!(forgotten = report.forgotten, flushed = ?report.flushed, "agent state maintained");
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "agent state flush failed; retried on the next pass")
        }
        Err(e) => tracing::warn!(error = %e, "agent maintenance task failed"),
    }
}

/// The agent maintenance worker: maintains every interval, and once more on shutdown.
pub struct MaintenanceWorker {
    service: Arc<AgentService>,
    interval: Duration,
}

impl MaintenanceWorker {
    pub fn new(service: Arc<AgentService>, interval: Duration) -> MaintenanceWorker {
        MaintenanceWorker { service, interval }
    }
}

#[async_trait::async_trait]
impl Worker for MaintenanceWorker {
    fn name(&self) -> &'static str {
        "agent-maintenance"
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        maintain_once(&self.service).await;
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::time::sleep(self.interval).await;
        WorkerState::Busy
    }

    async fn finish(&mut self) {
        maintain_once(&self.service).await;
    }
}
