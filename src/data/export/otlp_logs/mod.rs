//! The OTLP log exporter (`export.otlp_logs`): logs the LAL sinks kept, forwarded as OTLP/HTTP
//! protobuf `ExportLogsServiceRequest`s to an OpenTelemetry Collector, Loki, Elasticsearch or
//! any OTLP logs backend, for users who outgrow one node's log storage.
//!
//! Two halves share one bounded [`buffer::Buffer`]:
//!
//! - [`OtlpLogExporter`] is a [`LogWriter`]: dispatch's writes append kept logs to the batch
//!   being filled; a full batch (`batch_size`) is cut into the queue of at most `queue_batches`
//!   batches at once. It never blocks on the network and never fails the caller: a full queue
//!   drops its oldest batch, counted (`export_log_batches_dropped{reason="queue_full"}`).
//! - [`OtlpLogWorker`] sends: it takes the next queued batch, or the filling one once its first
//!   log has waited `max_delay`, maps it ([`encode::request`]) and POSTs it, retrying transport
//!   failures, 429, 502, 503 and 504 with exponential backoff (or `Retry-After`) up to
//!   `max_attempts`. Another status drops the batch (`rejected`), as do exhausted retries
//!   (`retries_exhausted`) and a shutdown that cannot send everything within
//!   [`crate::data::export::FINAL_FLUSH_BOUND`] (`shutdown`); logs written after the worker stopped
//!   are counted the same way. Sent logs count in `export_logs_sent`; queued batches (and the
//!   one in flight) show in `export_log_queue_depth`.

mod buffer;
pub mod config;
pub mod encode;
pub mod send;
mod worker;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};

use crate::data::logs::{KeptLog, LogStoreError, LogWriter};
use crate::base::self_metrics::{LabelSet, SelfMetrics, labels};
pub use config::{OtlpLogsSettings, RawOtlpLogs};
pub use worker::{DROP_REASONS, OtlpLogWorker};

/// What the writer half and the worker share.
struct Shared {
    buffer: Mutex<buffer::Buffer>,
    /// Raised when a batch is cut or the first log of a batch arrives.
    wake: tokio::sync::Notify,
    telemetry: Arc<SelfMetrics>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, buffer::Buffer> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn drop_batches(&self, reason: &str, batches: u64) {
        if batches > 0 {
            self.telemetry.export_log_batches_dropped.get_or_create(&labels([("reason", reason)])).inc_by(batches);
        }
    }

    fn publish_depth(&self, depth: usize) {
        self.telemetry.export_log_queue_depth.get_or_create(&LabelSet::new()).set(depth as i64);
    }
}

/// The writer half: queues kept logs for the worker.
pub struct OtlpLogExporter {
    shared: Arc<Shared>,
}

impl OtlpLogExporter {
    /// Cut batches waiting to be sent (not the one filling, not the one in flight).
    pub fn queued_batches(&self) -> usize {
        self.shared.lock().queued()
    }
}

impl LogWriter for OtlpLogExporter {
    /// Never blocks on the network and never fails: what does not fit is counted.
    fn write(&self, logs: &[KeptLog]) -> Result<(), LogStoreError> {
        if logs.is_empty() {
            return Ok(());
        }
        let outcome = self.shared.lock().push(logs, std::time::Instant::now());
        if outcome.dropped_oldest > 0 {
            tracing::warn!(batches = outcome.dropped_oldest, "OTLP log export queue full; oldest batches dropped");
        }
        self.shared.drop_batches("queue_full", outcome.dropped_oldest);
        self.shared.drop_batches("shutdown", outcome.refused_closed);
        self.shared.publish_depth(outcome.depth);
        if outcome.wake {
            self.shared.wake.notify_one();
        }
        Ok(())
    }
}

/// Builds the exporter for `settings`: the writer to give dispatch and the worker to spawn on
/// the node's runner.
pub fn build(
    settings: OtlpLogsSettings,
    telemetry: Arc<SelfMetrics>,
) -> Result<(Arc<OtlpLogExporter>, OtlpLogWorker), crate::data::export::ExportError> {
    // The families show from the start, at 0.
    let _ = telemetry.export_logs_sent.get_or_create(&LabelSet::new());
    let _ = telemetry.export_log_queue_depth.get_or_create(&LabelSet::new());
    for reason in DROP_REASONS {
        let _ = telemetry.export_log_batches_dropped.get_or_create(&labels([("reason", reason)]));
    }
    let shared = Arc::new(Shared {
        buffer: Mutex::new(buffer::Buffer::new(settings.batch_size, settings.queue_batches)),
        wake: tokio::sync::Notify::new(),
        telemetry,
    });
    let sender = send::Sender::new(&settings)?;
    let (timeout, retry) = (settings.timeout, settings.retry.clone());
    let worker = OtlpLogWorker::new(worker::LogBatches::new(shared.clone(), sender, settings), timeout, retry);
    Ok((Arc::new(OtlpLogExporter { shared }), worker))
}

/// The extra log writer for dispatch when `export.otlp_logs` is configured (its worker spawned
/// on `runner`, stopping with the node after a last flush); none otherwise.
pub fn wire(
    settings: Option<OtlpLogsSettings>,
    telemetry: Arc<SelfMetrics>,
    runner: &mut crate::base::worker::WorkerRunner,
) -> Result<Option<Arc<OtlpLogExporter>>, crate::data::export::ExportError> {
    let Some(settings) = settings else { return Ok(None) };
    tracing::info!(endpoint = %settings.endpoint, batch_size = settings.batch_size, max_delay = ?settings.max_delay, "OTLP log export on");
    let (exporter, worker) = build(settings, telemetry)?;
    runner.spawn(worker);
    Ok(Some(exporter))
}
