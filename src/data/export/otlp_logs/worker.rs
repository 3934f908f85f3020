//! The OTLP log side of the export worker: the shared [`SendWorker`] makes one attempt at one
//! batch per unit of work; between attempts it waits for a cut batch, the filling batch's
//! `max_delay`, or the backoff of the batch in flight. A slow or dead receiver never holds up
//! the writers: the queue fills and drops.
//!
//! At shutdown the buffer is closed (later writes are counted as dropped), what is left is sent
//! within [`FINAL_FLUSH_BOUND`](crate::data::export::FINAL_FLUSH_BOUND) and the rest counted (`shutdown`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::Shared;
use super::buffer::Next;
use super::config::OtlpLogsSettings;
use super::send::{Accepted, Sender};
use crate::data::export::delivery::{Batches, Outgoing, SendEvent, SendWorker, Words, report_send_event};
use crate::data::export::post::Failure;
use crate::base::self_metrics::LabelSet;

/// Every value of `export_log_batches_dropped{reason}`. `partial` counts batches the receiver
/// accepted with some records refused (`partial_success`).
pub const DROP_REASONS: [&str; 5] = ["queue_full", "rejected", "retries_exhausted", "partial", "shutdown"];

/// The send loop's log lines, in the OTLP log exporter's words.
const WORDS: Words = Words {
    refused: "OTLP log receiver refused a batch; dropped",
    gave_up: "OTLP log export failed; retries exhausted, batch dropped",
    retrying: "OTLP log export failed; retrying",
    unsent: "OTLP log export: batches not sent before shutdown; dropped",
};

/// The OTLP log exporter's worker.
pub type OtlpLogWorker = SendWorker<LogBatches>;

/// The batches the writers cut into the shared buffer.
pub struct LogBatches {
    shared: Arc<Shared>,
    sender: Sender,
    settings: OtlpLogsSettings,
    /// When the filling batch is due, as the buffer last said.
    filling_due: Option<Instant>,
}

impl LogBatches {
    pub(super) fn new(shared: Arc<Shared>, sender: Sender, settings: OtlpLogsSettings) -> LogBatches {
        LogBatches { shared, sender, settings, filling_due: None }
    }
}

#[async_trait::async_trait]
impl Batches for LogBatches {
    type Receipt = Accepted;

    fn name(&self) -> &'static str {
        "otlp-log-export"
    }

    async fn prepare(&mut self, _in_flight: bool) {}

    fn next(&mut self, flush_all: bool) -> Option<Outgoing> {
        let next = {
            let mut buffer = self.shared.lock();
            let next = buffer.next(std::time::Instant::now(), self.settings.max_delay, flush_all);
            buffer.set_in_flight(matches!(next, Next::Batch(_)));
            next
        };
        match next {
            Next::Batch(batch) if batch.is_empty() => {
                self.shared.lock().set_in_flight(false);
                None
            }
            Next::Batch(batch) => {
                let request = super::encode::request(&batch);
                self.filling_due = None;
                Some(Outgoing { body: Bytes::from(prost::Message::encode_to_vec(&request)), items: batch.len() })
            }
            Next::WaitUntil(due) => {
                // The buffer's clock is std's; tokio's Instant converts from it.
                self.filling_due = due.map(Instant::from_std);
                None
            }
        }
    }

    async fn send(&self, body: Bytes, timeout: Duration) -> Result<Accepted, Failure> {
        self.sender.send(body, timeout).await
    }

    fn delivered(&self, receipt: Accepted, logs: usize) {
        let Accepted { rejected, message } = receipt;
        let accepted = (logs as u64).saturating_sub(rejected);
        self.shared.telemetry.export_logs_sent.get_or_create(&LabelSet::new()).inc_by(accepted);
        if rejected > 0 {
            let endpoint = &self.settings.endpoint;
            tracing::warn!(rejected, logs, %message, %endpoint, "OTLP log receiver refused some records of a batch");
            self.shared.drop_batches("partial", 1);
        }
    }

    fn drop_batches(&self, reason: &str, batches: u64) {
        self.shared.drop_batches(reason, batches);
    }

    fn report(&self, event: SendEvent<'_>) {
        report_send_event!(event, WORDS, logs, endpoint = self.settings.endpoint);
    }

    fn publish_depth(&self, in_flight: bool) {
        let depth = {
            let mut buffer = self.shared.lock();
            buffer.set_in_flight(in_flight);
            buffer.depth()
        };
        self.shared.publish_depth(depth);
    }

    async fn wait(&mut self, held: Option<Instant>) {
        match (held, self.filling_due) {
            // A batch is held: only its backoff matters; new batches wait in the queue.
            (Some(not_before), _) => tokio::time::sleep_until(not_before).await,
            (None, Some(due)) => {
                tokio::select! {
                    _ = self.shared.wake.notified() => {}
                    _ = tokio::time::sleep_until(due) => {}
                }
            }
            (None, None) => self.shared.wake.notified().await,
        }
    }

    async fn close(&mut self, _deadline: Instant, in_flight: bool) {
        let waiting = self.shared.lock().close();
        tracing::debug!(batches = waiting + usize::from(in_flight), "OTLP log export: final flush");
    }

    fn discard(&mut self) -> usize {
        let mut buffer = self.shared.lock();
        let mut left = 0;
        while let Next::Batch(batch) = buffer.next(std::time::Instant::now(), Duration::ZERO, true) {
            left += usize::from(!batch.is_empty());
        }
        left
    }
}
