//! The OTLP log export worker: one attempt at one batch per unit of work; between attempts it
//! waits for a cut batch, the filling batch's `max_delay`, or the backoff of the batch in
//! flight. A slow or dead receiver never holds up the writers: the queue fills and drops.
//!
//! At shutdown [`Worker::finish`] closes the buffer (later writes are counted as dropped),
//! sends what is left within [`FINAL_FLUSH_BOUND`] and counts the rest (`shutdown`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::Shared;
use super::buffer::Next;
use super::config::OtlpLogsSettings;
use super::send::{Attempt, Sender};
use crate::data::export::FINAL_FLUSH_BOUND;
use crate::data::export::send::retry_delay;
use crate::base::self_metrics::LabelSet;
use crate::base::worker::{Worker, WorkerState};

/// Every value of `export_log_batches_dropped{reason}`. `partial` counts batches the receiver
/// accepted with some records refused (`partial_success`).
pub const DROP_REASONS: [&str; 5] = ["queue_full", "rejected", "retries_exhausted", "partial", "shutdown"];

/// The batch being sent, encoded once, with its attempts so far.
struct InFlight {
    body: Bytes,
    logs: usize,
    attempts: u32,
    not_before: Instant,
}

pub struct OtlpLogWorker {
    shared: Arc<Shared>,
    sender: Sender,
    settings: OtlpLogsSettings,
    in_flight: Option<InFlight>,
    /// When the filling batch is due, as the buffer last said.
    filling_due: Option<Instant>,
}

impl OtlpLogWorker {
    pub(super) fn new(shared: Arc<Shared>, sender: Sender, settings: OtlpLogsSettings) -> OtlpLogWorker {
        OtlpLogWorker { shared, sender, settings, in_flight: None, filling_due: None }
    }

    /// Takes the next batch from the buffer when none is in flight.
    fn take_next(&mut self, flush_all: bool) {
        if self.in_flight.is_some() {
            return;
        }
        let next = {
            let mut buffer = self.shared.lock();
            let next = buffer.next(std::time::Instant::now(), self.settings.max_delay, flush_all);
            buffer.set_in_flight(matches!(next, Next::Batch(_)));
            next
        };
        match next {
            Next::Batch(batch) if batch.is_empty() => self.shared.lock().set_in_flight(false),
            Next::Batch(batch) => {
                let request = super::encode::request(&batch);
                let body = Bytes::from(prost::Message::encode_to_vec(&request));
                self.in_flight = Some(InFlight { body, logs: batch.len(), attempts: 0, not_before: Instant::now() });
                self.filling_due = None;
            }
            Next::WaitUntil(due) => {
                // The buffer's clock is std's; tokio's Instant converts from it.
                self.filling_due = due.map(Instant::from_std);
            }
        }
    }

    fn publish_depth(&self) {
        let depth = {
            let mut buffer = self.shared.lock();
            buffer.set_in_flight(self.in_flight.is_some());
            buffer.depth()
        };
        self.shared.publish_depth(depth);
    }

    /// One attempt at the batch in flight, bounded by `timeout`.
    async fn attempt(&mut self, timeout: Duration) {
        let Some(flight) = self.in_flight.as_mut() else { return };
        flight.attempts += 1;
        let outcome = self.sender.send(flight.body.clone(), timeout).await;
        let logs = flight.logs;
        let endpoint = &self.settings.endpoint;
        match outcome {
            Attempt::Delivered { rejected, message } => {
                let accepted = (logs as u64).saturating_sub(rejected);
                self.shared.telemetry.export_logs_sent.get_or_create(&LabelSet::new()).inc_by(accepted);
                if rejected > 0 {
                    tracing::warn!(rejected, logs, %message, %endpoint, "OTLP log receiver refused some records of a batch");
                    self.shared.drop_batches("partial", 1);
                }
                self.in_flight = None;
            }
            Attempt::Rejected { status, body } => {
                tracing::warn!(status, %body, logs, %endpoint, "OTLP log receiver refused a batch; dropped");
                self.in_flight = None;
                self.shared.drop_batches("rejected", 1);
            }
            Attempt::Retry { after, reason } => {
                if flight.attempts >= self.settings.retry.max_attempts {
                    tracing::warn!(%reason, attempts = flight.attempts, logs, %endpoint, "OTLP log export failed; retries exhausted, batch dropped");
                    self.in_flight = None;
                    self.shared.drop_batches("retries_exhausted", 1);
                } else {
                    let delay = retry_delay(&self.settings.retry, flight.attempts, after);
                    tracing::debug!(%reason, attempt = flight.attempts, ?delay, "OTLP log export failed; retrying");
                    flight.not_before = Instant::now() + delay;
                }
            }
        }
        self.publish_depth();
    }

    fn ready_to_send(&self, now: Instant) -> bool {
        self.in_flight.as_ref().is_some_and(|flight| flight.not_before <= now)
    }
}

#[async_trait::async_trait]
impl Worker for OtlpLogWorker {
    fn name(&self) -> &'static str {
        "otlp-log-export"
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        self.take_next(false);
        if self.ready_to_send(Instant::now()) {
            self.attempt(self.settings.timeout).await;
            self.take_next(false);
        }
        if self.ready_to_send(Instant::now()) { WorkerState::Busy } else { WorkerState::Idle }
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        match (&self.in_flight, self.filling_due) {
            // A batch is held: only its backoff matters; new batches wait in the queue.
            (Some(flight), _) => tokio::time::sleep_until(flight.not_before).await,
            (None, Some(due)) => {
                tokio::select! {
                    _ = self.shared.wake.notified() => {}
                    _ = tokio::time::sleep_until(due) => {}
                }
            }
            (None, None) => self.shared.wake.notified().await,
        }
        WorkerState::Busy
    }

    async fn finish(&mut self) {
        let deadline = Instant::now() + FINAL_FLUSH_BOUND;
        let waiting = self.shared.lock().close();
        tracing::debug!(batches = waiting + usize::from(self.in_flight.is_some()), "OTLP log export: final flush");
        loop {
            self.take_next(true);
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
        let left = {
            let mut buffer = self.shared.lock();
            let mut left = usize::from(self.in_flight.is_some());
            while let Next::Batch(batch) = buffer.next(std::time::Instant::now(), Duration::ZERO, true) {
                left += usize::from(!batch.is_empty());
            }
            left
        };
        if left > 0 {
            tracing::warn!(batches = left, bound = ?FINAL_FLUSH_BOUND, "OTLP log export: batches not sent before shutdown; dropped");
            self.shared.drop_batches("shutdown", left as u64);
        }
        self.in_flight = None;
        self.publish_depth();
    }
}
