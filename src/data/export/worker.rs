//! The remote-write side of the export worker: every `flush_interval` it turns the pending
//! minutes that closed (`now >= minute end + close_after`, `now` from its clock) into request
//! bodies (read, map, stamp, batch, compress) and queues them; between flushes the shared
//! [`SendWorker`] sends the queue, one attempt per unit of work, waiting out backoffs as its
//! reason to wait. A slow or dead receiver therefore never holds up a flush: the queue fills
//! and drops its oldest batches.
//!
//! At shutdown the worker flushes once more, every pending minute this time, open ones
//! included (the node is going away; what it holds is their value), and sends what it can within
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
use super::pending::{Due, ReadGroup, read_groups};
use super::post::Failure;
use super::queue::BatchQueue;
use super::send::Sender;
use crate::data::metrics::{Entity, Granularity, MetricReader};
use crate::data::series_store::NowMs;
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
    /// The wall clock minutes close by (epoch ms); the flush cadence itself is tokio's.
    now_ms: NowMs,
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
    pub(super) fn new(
        shared: Arc<Shared>,
        reader: Arc<dyn MetricReader>,
        sender: Sender,
        settings: RemoteWriteSettings,
        now_ms: NowMs,
    ) -> RemoteWriteBatches {
        RemoteWriteBatches {
            shared,
            reader,
            sender,
            queue: BatchQueue::new(settings.queue_batches),
            next_flush: Instant::now() + settings.flush_interval,
            settings,
            now_ms,
        }
    }

    /// Takes the minutes that are due (closed ones, or at shutdown all), reads them, builds
    /// their batches and queues them.
    async fn flush(&mut self, in_flight: bool, everything: bool) {
        let now_ms = (self.now_ms)();
        let close_after_ms = i64::try_from(self.settings.close_after.as_millis()).unwrap_or(i64::MAX);
        let due = if everything { Due::All { now_ms } } else { Due::Closed { now_ms, close_after_ms } };
        // Only the owner of an entity exports it, once, with the merged value; what another
        // node holds of it is on its way to the owner (`data::metrics::handoff`).
        let taken = self.shared.take_due(due);
        if taken.is_empty() {
            return;
        }
        let reader = self.reader.clone();
        let groups = read_groups(taken);
        // Storage reads block: they run off the async threads.
        let read = tokio::task::spawn_blocking(move || read_all(reader.as_ref(), groups)).await;
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
        for request in build_batches(samples, self.settings.batch_size) {
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

/// Reads every group's minute; returns the samples and the groups whose read failed (to be
/// marked pending again). When one read of a metric fails, none of that metric's minutes is
/// sent in this flush: a later minute sent before an earlier one of the same series would be
/// refused by the receiver as out of order.
fn read_all(reader: &dyn MetricReader, groups: Vec<ReadGroup>) -> (FlushSamples, Vec<ReadGroup>) {
    let mut samples = FlushSamples::new();
    let mut failed = Vec::new();
    // `read_groups` orders the groups by metric, then bucket.
    let mut by_metric: Vec<Vec<ReadGroup>> = Vec::new();
    for group in groups {
        match by_metric.last_mut() {
            Some(last) if last.first().is_some_and(|g| g.filter.metric == group.filter.metric) => last.push(group),
            _ => by_metric.push(vec![group]),
        }
    }
    for metric_groups in by_metric {
        let mut metric_samples = FlushSamples::new();
        let mut read_failed = false;
        for group in &metric_groups {
            let Some(start) = minute_bucket_start_ms(group.bucket) else {
                tracing::warn!(metric = %group.filter.metric, bucket = group.bucket, "export: a value with an invalid minute bucket; skipped");
                continue;
            };
            match reader.read(&group.filter, Granularity::Minute, start, start + Granularity::Minute.millis() - 1) {
                Ok(series) => {
                    let wanted: HashSet<&Entity> = group.entities.iter().collect();
                    collect_samples(&series, &wanted, group.bucket, &mut metric_samples);
                }
                Err(e) => {
                    tracing::warn!(metric = %group.filter.metric, bucket = group.bucket, error = %e, "export: reading values failed; the metric's minutes are retried at the next flush");
                    read_failed = true;
                    break;
                }
            }
        }
        if read_failed {
            failed.extend(metric_groups.into_iter().filter(|g| minute_bucket_start_ms(g.bucket).is_some()));
        } else {
            for (labels, points) in metric_samples {
                samples.entry(labels).or_default().extend(points);
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
            self.flush(in_flight, false).await;
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
        // Every pending minute, open ones too: the node is going away.
        if tokio::time::timeout_at(deadline, self.flush(in_flight, true)).await.is_err() {
            tracing::warn!("export: the final flush's storage reads did not finish in time");
        }
    }

    fn discard(&mut self) -> usize {
        let left = self.queue.len();
        while self.queue.pop().is_some() {}
        left
    }
}
