//! The send loop both exporters share: one batch in flight at a time, one attempt per unit of
//! work, a failed attempt retried with exponential backoff (or the receiver's `Retry-After`)
//! up to `max_attempts`, and at shutdown a last round of sends bounded by
//! [`FINAL_FLUSH_BOUND`], what is left counted as dropped (`shutdown`).
//!
//! Where batches come from, how one is sent and counted, and what the exporter logs are its
//! own: a [`Batches`] (remote-write's in `worker.rs`, OTLP logs' in `otlp_logs/worker.rs`).

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::config::RetrySettings;
use super::post::Failure;
use crate::base::worker::{Worker, WorkerState};

/// How long the last flush at shutdown may take, sends included. It stays under the node's
/// worker shutdown bound so the worker is never aborted mid-send.
pub const FINAL_FLUSH_BOUND: Duration = Duration::from_secs(5);

/// One encoded batch, ready to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub body: Bytes,
    /// Samples or log records in it.
    pub items: usize,
}

/// Something the send loop has to say, for the exporter to log in its own words.
#[derive(Debug)]
pub enum SendEvent<'a> {
    /// The receiver refused the batch for good; it is dropped.
    Refused { status: u16, body: &'a str, items: usize },
    /// The last allowed attempt failed; the batch is dropped.
    GaveUp { reason: &'a str, attempts: u32, items: usize },
    /// An attempt failed; the next one waits `delay`.
    Retrying { reason: &'a str, attempt: u32, delay: Duration },
    /// Batches still waiting when the shutdown bound ran out; they are dropped.
    Unsent { batches: usize },
}

/// What the send loop logs, in an exporter's words (one sentence per [`SendEvent`]).
#[derive(Debug)]
pub struct Words {
    pub refused: &'static str,
    pub gave_up: &'static str,
    pub retrying: &'static str,
    pub unsent: &'static str,
}

/// Logs `event` with `words`; `$items` and `$receiver` are the exporter's names for the batch's
/// item count and its receiver's URL. A macro because a log line's field names are fixed where
/// it is written.
macro_rules! report_send_event {
    ($event:expr, $words:expr, $items:ident, $receiver:ident = $url:expr) => {{
        use $crate::data::export::delivery::SendEvent;
        let (words, $receiver) = (&$words, &$url);
        match $event {
            SendEvent::Refused { status, body, items: $items } => tracing::warn!(status, %body, $items, %$receiver, "{}", words.refused),
            SendEvent::GaveUp { reason, attempts, items: $items } => tracing::warn!(%reason, attempts, $items, %$receiver, "{}", words.gave_up),
            SendEvent::Retrying { reason, attempt, delay } => tracing::debug!(%reason, attempt, ?delay, "{}", words.retrying),
            SendEvent::Unsent { batches } => {
                tracing::warn!(batches, bound = ?$crate::data::export::FINAL_FLUSH_BOUND, "{}", words.unsent)
            }
        }
    }};
}
pub(crate) use report_send_event;

/// An exporter's side of the send loop.
#[async_trait::async_trait]
pub trait Batches: Send + Sync + 'static {
    /// What a receiver said about a batch it accepted.
    type Receipt: Send;

    /// The worker's name, in logs and `/readyz`.
    fn name(&self) -> &'static str;

    /// Work due before the next batch is looked for (remote-write's flush).
    async fn prepare(&mut self, in_flight: bool);

    /// The next batch to send; none is in flight. `flush_all` (at shutdown) takes a batch that
    /// is still filling at once.
    fn next(&mut self, flush_all: bool) -> Option<Outgoing>;

    /// One attempt at `body`, bounded by `timeout`.
    async fn send(&self, body: Bytes, timeout: Duration) -> Result<Self::Receipt, Failure>;

    /// Counts a delivered batch of `items`.
    fn delivered(&self, receipt: Self::Receipt, items: usize);

    /// Counts dropped batches under `reason`.
    fn drop_batches(&self, reason: &str, batches: u64);

    /// Logs `event` ([`report_send_event`] with the exporter's [`Words`]).
    fn report(&self, event: SendEvent<'_>);

    /// Publishes the queue depth, the batch in flight included.
    fn publish_depth(&self, in_flight: bool);

    /// Waits for a reason to work; `held` is when the batch in flight may be tried again.
    async fn wait(&mut self, held: Option<Instant>);

    /// At shutdown, before the last sends (which end at `deadline`).
    async fn close(&mut self, deadline: Instant, in_flight: bool);

    /// At shutdown, after the last sends: forgets every batch still waiting; returns how many.
    fn discard(&mut self) -> usize;
}

/// The wait after failed attempt number `attempt` (1 for the first): `initial × 2^(attempt-1)`
/// up to `max_backoff`, or the receiver's `Retry-After` when it gave one.
pub fn retry_delay(retry: &RetrySettings, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(after) = retry_after {
        return after;
    }
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    retry.initial_backoff.saturating_mul(factor).min(retry.max_backoff)
}

/// The batch being sent, with its attempts so far.
struct InFlight {
    batch: Outgoing,
    attempts: u32,
    not_before: Instant,
}

/// The export worker: sends the batches of `B`.
pub struct SendWorker<B> {
    batches: B,
    timeout: Duration,
    retry: RetrySettings,
    in_flight: Option<InFlight>,
}

impl<B: Batches> SendWorker<B> {
    /// `timeout` bounds one attempt, connection included.
    pub fn new(batches: B, timeout: Duration, retry: RetrySettings) -> SendWorker<B> {
        SendWorker { batches, timeout, retry, in_flight: None }
    }

    /// Takes the next batch if none is in flight.
    fn take_next(&mut self, flush_all: bool) {
        if self.in_flight.is_none() {
            self.in_flight = self.batches.next(flush_all).map(|batch| InFlight { batch, attempts: 0, not_before: Instant::now() });
        }
    }

    /// One attempt at the batch in flight, bounded by `timeout`.
    async fn attempt(&mut self, timeout: Duration) {
        let Some(flight) = self.in_flight.as_mut() else { return };
        flight.attempts += 1;
        let outcome = self.batches.send(flight.batch.body.clone(), timeout).await;
        let items = flight.batch.items;
        match outcome {
            Ok(receipt) => {
                self.batches.delivered(receipt, items);
                self.in_flight = None;
            }
            Err(Failure::Rejected { status, body }) => {
                self.batches.report(SendEvent::Refused { status, body: &body, items });
                self.in_flight = None;
                self.batches.drop_batches("rejected", 1);
            }
            Err(Failure::Retry { after, reason }) => {
                if flight.attempts >= self.retry.max_attempts {
                    self.batches.report(SendEvent::GaveUp { reason: &reason, attempts: flight.attempts, items });
                    self.in_flight = None;
                    self.batches.drop_batches("retries_exhausted", 1);
                } else {
                    let delay = retry_delay(&self.retry, flight.attempts, after);
                    self.batches.report(SendEvent::Retrying { reason: &reason, attempt: flight.attempts, delay });
                    flight.not_before = Instant::now() + delay;
                }
            }
        }
        self.batches.publish_depth(self.in_flight.is_some());
    }

    fn ready_to_send(&self, now: Instant) -> bool {
        self.in_flight.as_ref().is_some_and(|flight| flight.not_before <= now)
    }
}

#[async_trait::async_trait]
impl<B: Batches> Worker for SendWorker<B> {
    fn name(&self) -> &'static str {
        self.batches.name()
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        self.batches.prepare(self.in_flight.is_some()).await;
        self.take_next(false);
        if self.ready_to_send(Instant::now()) {
            self.attempt(self.timeout).await;
            self.take_next(false);
        }
        if self.ready_to_send(Instant::now()) { WorkerState::Busy } else { WorkerState::Idle }
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        self.batches.wait(self.in_flight.as_ref().map(|flight| flight.not_before)).await;
        WorkerState::Busy
    }

    async fn finish(&mut self) {
        let deadline = Instant::now() + FINAL_FLUSH_BOUND;
        self.batches.close(deadline, self.in_flight.is_some()).await;
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
            self.attempt(self.timeout.min(left)).await;
        }
        let left = usize::from(self.in_flight.take().is_some()) + self.batches.discard();
        if left > 0 {
            self.batches.report(SendEvent::Unsent { batches: left });
            self.batches.drop_batches("shutdown", left as u64);
        }
        self.batches.publish_depth(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry() -> RetrySettings {
        RetrySettings { initial_backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(1), max_attempts: 5 }
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum_unless_the_receiver_says() {
        let r = retry();
        let delays: Vec<u128> = (1..=6).map(|a| retry_delay(&r, a, None).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(retry_delay(&r, 1, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(retry_delay(&r, 40, None), Duration::from_secs(1), "no overflow");
    }
}
