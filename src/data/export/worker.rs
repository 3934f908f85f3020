//! The export worker: every `flush_interval` it turns the pending series into request bodies
//! (read, map, stamp, batch, compress) and queues them; between flushes it sends the queue, one
//! attempt per unit of work, waiting out backoffs as its reason to wait. A slow or dead
//! receiver therefore never holds up a flush: the queue fills and drops its oldest batches.
//!
//! At shutdown [`Worker::finish`] flushes once more and sends what it can within
//! [`FINAL_FLUSH_BOUND`]; what is still queued then is counted as dropped (`shutdown`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use super::batch::{EncodedBatch, FlushSamples, build_batches, collect_samples, encode, minute_bucket_start_ms};
use super::config::RemoteWriteSettings;
use super::pending::{ReadGroup, read_groups};
use super::queue::BatchQueue;
use super::send::{Attempt, Sender, retry_delay};
use crate::data::metrics::{Entity, Granularity, MetricReader};
use crate::base::self_metrics::{LabelSet, labels};
use crate::base::worker::{Worker, WorkerState};

/// How long the last flush at shutdown may take, sends included. It stays under the node's
/// worker shutdown bound so the worker is never aborted mid-send.
pub const FINAL_FLUSH_BOUND: Duration = Duration::from_secs(5);

/// Every value of `export_batches_dropped{reason}`.
pub const DROP_REASONS: [&str; 5] = ["queue_full", "rejected", "retries_exhausted", "encode", "shutdown"];

/// The batch being sent, with its attempts so far.
struct InFlight {
    batch: EncodedBatch,
    attempts: u32,
    not_before: Instant,
}

pub struct ExportWorker {
    shared: Arc<Shared>,
    reader: Arc<dyn MetricReader>,
    sender: Sender,
    settings: RemoteWriteSettings,
    queue: BatchQueue,
    in_flight: Option<InFlight>,
    next_flush: Instant,
}

fn no_labels() -> LabelSet {
    LabelSet::new()
}

impl ExportWorker {
    pub(super) fn new(shared: Arc<Shared>, reader: Arc<dyn MetricReader>, sender: Sender, settings: RemoteWriteSettings) -> ExportWorker {
        ExportWorker {
            shared,
            reader,
            sender,
            queue: BatchQueue::new(settings.queue_batches),
            in_flight: None,
            next_flush: Instant::now() + settings.flush_interval,
            settings,
        }
    }

    fn drop_batches(&self, reason: &str, batches: u64) {
        if batches > 0 {
            self.shared.telemetry.export_batches_dropped.get_or_create(&labels([("reason", reason)])).inc_by(batches);
        }
    }

    fn publish_depth(&self) {
        let depth = self.queue.len() + usize::from(self.in_flight.is_some());
        self.shared.telemetry.export_queue_depth.get_or_create(&no_labels()).set(depth as i64);
    }

    /// Reads the pending series, builds their batches and queues them.
    async fn flush(&mut self) {
        let taken = self.shared.take_pending();
        if taken.is_empty() {
            return;
        }
        let now_ms = crate::base::clock::now_ms() as i64;
        let reader = self.reader.clone();
        let groups = read_groups(taken);
        // Storage reads block: they run off the async threads.
        let read = tokio::task::spawn_blocking(move || read_all(reader.as_ref(), groups, now_ms)).await;
        let (samples, failed) = match read {
            Ok(result) => result,
            Err(e) => {
                tracing::error!(error = %e, "export: the storage read task failed; this flush is lost");
                return;
            }
        };
        for group in failed {
            self.shared.requeue(&group);
        }
        for request in build_batches(samples, now_ms, self.settings.batch_size) {
            match encode(&request) {
                Ok(batch) => {
                    if let Some(oldest) = self.queue.push(batch) {
                        tracing::warn!(samples = oldest.samples, bound = self.settings.queue_batches, "export queue full; oldest batch dropped");
                        self.drop_batches("queue_full", 1);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, samples = request.timeseries.len(), "export: batch not encodable; dropped");
                    self.drop_batches("encode", 1);
                }
            }
        }
        self.publish_depth();
    }

    /// Takes the next queued batch if none is in flight.
    fn next_in_flight(&mut self) {
        if self.in_flight.is_none() {
            self.in_flight = self.queue.pop().map(|batch| InFlight { batch, attempts: 0, not_before: Instant::now() });
        }
    }

    /// One attempt at the batch in flight, bounded by `timeout`.
    async fn attempt(&mut self, timeout: Duration) {
        let Some(flight) = self.in_flight.as_mut() else { return };
        flight.attempts += 1;
        let started = Instant::now();
        let outcome = self.sender.send(flight.batch.body.clone(), timeout).await;
        let telemetry = &self.shared.telemetry;
        telemetry.export_send_seconds.get_or_create(&no_labels()).observe(started.elapsed().as_secs_f64());
        let samples = flight.batch.samples;
        match outcome {
            Attempt::Delivered => {
                telemetry.export_samples_sent.get_or_create(&no_labels()).inc_by(samples as u64);
                self.in_flight = None;
            }
            Attempt::Rejected { status, body } => {
                tracing::warn!(status, %body, samples, url = %self.settings.url, "remote write refused a batch; dropped");
                self.in_flight = None;
                self.drop_batches("rejected", 1);
            }
            Attempt::Retry { after, reason } => {
                if flight.attempts >= self.settings.retry.max_attempts {
                    tracing::warn!(%reason, attempts = flight.attempts, samples, url = %self.settings.url, "remote write failed; retries exhausted, batch dropped");
                    self.in_flight = None;
                    self.drop_batches("retries_exhausted", 1);
                } else {
                    let delay = retry_delay(&self.settings.retry, flight.attempts, after);
                    tracing::debug!(%reason, attempt = flight.attempts, ?delay, "remote write failed; retrying");
                    flight.not_before = Instant::now() + delay;
                }
            }
        }
        self.publish_depth();
    }

    fn ready_to_send(&self, now: Instant) -> bool {
        match &self.in_flight {
            Some(flight) => flight.not_before <= now,
            None => !self.queue.is_empty(),
        }
    }
}

/// Reads every group at minute granularity from its bucket's start to now; returns the samples
/// and the groups whose read failed (to be marked pending again).
fn read_all(reader: &dyn MetricReader, groups: Vec<ReadGroup>, now_ms: i64) -> (FlushSamples, Vec<ReadGroup>) {
    let mut samples = FlushSamples::new();
    let mut failed = Vec::new();
    for group in groups {
        let Some(start) = minute_bucket_start_ms(group.bucket) else {
            tracing::warn!(metric = %group.filter.metric, bucket = group.bucket, "export: a value with an invalid minute bucket; skipped");
            continue;
        };
        // A bucket ahead of this clock (skew) is still read whole.
        let end = now_ms.max(start + Granularity::Minute.millis() - 1);
        match reader.read(&group.filter, Granularity::Minute, start, end) {
            Ok(series) => {
                let wanted: HashSet<&Entity> = group.entities.iter().collect();
                collect_samples(&series, &wanted, &mut samples);
            }
            Err(e) => {
                tracing::warn!(metric = %group.filter.metric, error = %e, "export: reading values failed; retried at the next flush");
                failed.push(group);
            }
        }
    }
    (samples, failed)
}

#[async_trait::async_trait]
impl Worker for ExportWorker {
    fn name(&self) -> &'static str {
        "remote-write-export"
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        if Instant::now() >= self.next_flush {
            self.flush().await;
            self.next_flush = Instant::now() + self.settings.flush_interval;
        }
        self.next_in_flight();
        if self.ready_to_send(Instant::now()) {
            self.attempt(self.settings.timeout).await;
            self.next_in_flight();
        }
        if self.ready_to_send(Instant::now()) { WorkerState::Busy } else { WorkerState::Idle }
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let wake = match &self.in_flight {
            Some(flight) => flight.not_before.min(self.next_flush),
            None => self.next_flush,
        };
        tokio::time::sleep_until(wake).await;
        WorkerState::Busy
    }

    async fn finish(&mut self) {
        let deadline = Instant::now() + FINAL_FLUSH_BOUND;
        if tokio::time::timeout_at(deadline, self.flush()).await.is_err() {
            tracing::warn!("export: the final flush's storage reads did not finish in time");
        }
        loop {
            self.next_in_flight();
            let Some(flight) = &self.in_flight else { break };
            if flight.not_before >= deadline {
                break;
            }
            tokio::time::sleep_until(flight.not_before).await;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.attempt(self.settings.timeout.min(left)).await;
        }
        let left = self.queue.len() + usize::from(self.in_flight.is_some());
        if left > 0 {
            tracing::warn!(batches = left, bound = ?FINAL_FLUSH_BOUND, "export: batches not sent before shutdown; dropped");
            self.drop_batches("shutdown", left as u64);
        }
        self.in_flight = None;
        while self.queue.pop().is_some() {}
        self.publish_depth();
    }
}
