//! The remote-write side of the export worker: every `flush_interval` it turns the pending
//! series into request bodies (read, map, stamp, batch, compress) and queues them; between
//! flushes the shared [`SendWorker`] sends the queue, one attempt per unit of work, waiting out
//! backoffs as its reason to wait. A slow or dead receiver therefore never holds up a flush:
//! the queue fills and drops its oldest batches.
//!
//! At shutdown the worker flushes once more and sends what it can within
//! [`FINAL_FLUSH_BOUND`](super::FINAL_FLUSH_BOUND); what is still queued then is counted as dropped (`shutdown`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::Shared;
use super::batch::{EncodedBatch, FlushSamples, build_batches, collect_samples, encode, minute_bucket_start_ms};
use super::config::RemoteWriteSettings;
use super::delivery::{Batches, Outgoing, SendEvent, SendWorker, Words, report_send_event};
use super::pending::{ReadGroup, read_groups};
use super::post::Failure;
use super::queue::BatchQueue;
use super::send::Sender;
use crate::data::metrics::cells::keys::owner_key;
use crate::data::metrics::{Entity, Granularity, MetricReader};
use crate::base::self_metrics::{LabelSet, labels};

/// Every value of `export_batches_dropped{reason}`.
pub const DROP_REASONS: [&str; 5] = ["queue_full", "rejected", "retries_exhausted", "encode", "shutdown"];

/// The remote-write exporter's worker.
pub type ExportWorker = SendWorker<RemoteWriteBatches>;

/// The flushes and the queue of built batches.
pub struct RemoteWriteBatches {
    shared: Arc<Shared>,
    reader: Arc<dyn MetricReader>,
    sender: Sender,
    settings: RemoteWriteSettings,
    queue: BatchQueue<EncodedBatch>,
    next_flush: Instant,
}

fn no_labels() -> LabelSet {
    LabelSet::new()
}

/// The send loop's log lines, in remote-write's words.
const WORDS: Words = Words {
    refused: "remote write refused a batch; dropped",
    gave_up: "remote write failed; retries exhausted, batch dropped",
    retrying: "remote write failed; retrying",
    unsent: "export: batches not sent before shutdown; dropped",
};

impl RemoteWriteBatches {
    pub(super) fn new(shared: Arc<Shared>, reader: Arc<dyn MetricReader>, sender: Sender, settings: RemoteWriteSettings) -> RemoteWriteBatches {
        RemoteWriteBatches {
            shared,
            reader,
            sender,
            queue: BatchQueue::new(settings.queue_batches),
            next_flush: Instant::now() + settings.flush_interval,
            settings,
        }
    }

    /// Reads the pending series, builds their batches and queues them.
    async fn flush(&mut self, in_flight: bool) {
        let mut taken = self.shared.take_pending();
        // Only the owner of an entity exports it, once, with the merged value; what another
        // node holds of it is on its way to the owner (`data::metrics::handoff`).
        let live = self.shared.live.live();
        if !live.is_alone() {
            for entities in taken.values_mut() {
                entities.retain(|entity, _| live.owns(&owner_key(entity)));
            }
            taken.retain(|_, entities| !entities.is_empty());
        }
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
        self.publish_depth(in_flight);
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
impl Batches for RemoteWriteBatches {
    type Receipt = ();

    fn name(&self) -> &'static str {
        "remote-write-export"
    }

    async fn prepare(&mut self, in_flight: bool) {
        if Instant::now() >= self.next_flush {
            self.flush(in_flight).await;
            self.next_flush = Instant::now() + self.settings.flush_interval;
        }
    }

    fn next(&mut self, _flush_all: bool) -> Option<Outgoing> {
        self.queue.pop().map(|batch| Outgoing { body: batch.body, items: batch.samples })
    }

    async fn send(&self, body: Bytes, timeout: Duration) -> Result<(), Failure> {
        let started = Instant::now();
        let outcome = self.sender.send(body, timeout).await;
        self.shared.telemetry.export_send_seconds.get_or_create(&no_labels()).observe(started.elapsed().as_secs_f64());
        outcome
    }

    fn delivered(&self, _receipt: (), samples: usize) {
        self.shared.telemetry.export_samples_sent.get_or_create(&no_labels()).inc_by(samples as u64);
    }

    fn drop_batches(&self, reason: &str, batches: u64) {
        if batches > 0 {
            self.shared.telemetry.export_batches_dropped.get_or_create(&labels([("reason", reason)])).inc_by(batches);
        }
    }

    fn report(&self, event: SendEvent<'_>) {
        report_send_event!(event, WORDS, samples, url = self.settings.url);
    }

    fn publish_depth(&self, in_flight: bool) {
        let depth = self.queue.len() + usize::from(in_flight);
        self.shared.telemetry.export_queue_depth.get_or_create(&no_labels()).set(depth as i64);
    }

    async fn wait(&mut self, held: Option<Instant>) {
        let wake = held.map_or(self.next_flush, |not_before| not_before.min(self.next_flush));
        tokio::time::sleep_until(wake).await;
    }

    async fn close(&mut self, deadline: Instant, in_flight: bool) {
        if tokio::time::timeout_at(deadline, self.flush(in_flight)).await.is_err() {
            tracing::warn!("export: the final flush's storage reads did not finish in time");
        }
    }

    fn discard(&mut self) -> usize {
        let left = self.queue.len();
        while self.queue.pop().is_some() {}
        left
    }
}
