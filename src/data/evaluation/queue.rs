//! The bounded batch queue between receivers and the evaluation threads.
//!
//! Capacity is counted in batches. A submission is accepted whole or refused whole; one larger
//! than the whole queue is accepted only into an empty queue (so it is never refused forever),
//! which bounds the queue at `capacity` plus one request. The queue also counts the batches
//! taken and not yet finished, so a waiter can tell when dispatch is idle. Metric batches and
//! log batches (`LogQueue`) each have a queue of their own, with their own bound.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::data::seam::{Batch, LogBatch};

/// Why a push was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushRefused {
    Full,
    Stopped,
}

struct State<T> {
    batches: VecDeque<T>,
    /// Batches taken by a thread and not yet finished.
    processing: usize,
    stopped: bool,
}

/// The queue of metric batches (`T = Batch`) or of log batches ([`LogQueue`]).
pub struct BatchQueue<T = Batch> {
    capacity: usize,
    state: Mutex<State<T>>,
    /// Signalled when a batch arrives or the queue stops (the evaluation threads wait on it).
    arrived: Condvar,
    /// Signalled when a batch is finished (idle waiters wait on it).
    finished: Condvar,
}

/// The queue of log batches between the log receivers and the LAL threads
/// (`dispatch.log_queue_batches`, apart from the metric queue so a log flood does not refuse
/// metric batches, and back).
pub type LogQueue = BatchQueue<LogBatch>;

impl<T> BatchQueue<T> {
    pub fn new(capacity: usize) -> BatchQueue<T> {
        BatchQueue {
            capacity: capacity.max(1),
            state: Mutex::new(State { batches: VecDeque::new(), processing: 0, stopped: false }),
            arrived: Condvar::new(),
            finished: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a request should be decoded now: at least an eighth of the queue (1 to 64
    /// batches) is free. Advisory: the headroom keeps the requests that saw room at the same
    /// moment (one per connection) from being decoded only to be refused by `push`.
    pub fn has_room(&self) -> bool {
        let state = self.lock();
        let headroom = (self.capacity / 8).clamp(1, 64);
        !state.stopped && state.batches.len() + headroom <= self.capacity
    }

    /// Batches waiting (not yet taken).
    pub fn len(&self) -> usize {
        self.lock().batches.len()
    }

    /// Batches waiting or taken and not yet finished: 0 exactly when [`BatchQueue::wait_idle`]
    /// would return at once.
    pub fn pending(&self) -> usize {
        let state = self.lock();
        state.batches.len() + state.processing
    }

    pub fn push(&self, batches: Vec<T>) -> Result<(), PushRefused> {
        let mut state = self.lock();
        if state.stopped {
            return Err(PushRefused::Stopped);
        }
        let fits = state.batches.len() + batches.len() <= self.capacity;
        if !fits && !state.batches.is_empty() {
            return Err(PushRefused::Full);
        }
        state.batches.extend(batches);
        drop(state);
        self.arrived.notify_all();
        Ok(())
    }

    /// The next batch, waiting for one; None once the queue is stopped and empty (batches
    /// accepted before the stop are still handed out).
    pub fn take(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(batch) = state.batches.pop_front() {
                state.processing += 1;
                return Some(batch);
            }
            if state.stopped {
                return None;
            }
            state = self.arrived.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The next batch and, behind it, as many more as fit in `limit` by `weight` (the first
    /// is taken whatever its weight), waiting for one; None once the queue is stopped and
    /// empty. A backlog is then worked in groups: one write and one sync for many batches.
    pub fn take_up_to(&self, limit: usize, weight: impl Fn(&T) -> usize) -> Option<Vec<T>> {
        let first = self.take()?;
        let mut total = weight(&first);
        let mut group = vec![first];
        let mut state = self.lock();
        while let Some(next) = state.batches.front() {
            total = total.saturating_add(weight(next));
            if total > limit {
                break;
            }
            if let Some(batch) = state.batches.pop_front() {
                state.processing += 1;
                group.push(batch);
            }
        }
        Some(group)
    }

    /// Marks one taken batch finished.
    pub fn done(&self) {
        self.done_many(1);
    }

    /// Marks `count` taken batches finished.
    pub fn done_many(&self, count: usize) {
        let mut state = self.lock();
        state.processing = state.processing.saturating_sub(count);
        drop(state);
        self.finished.notify_all();
    }

    /// Refuses new batches from now on and wakes the threads so they finish what is queued.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.arrived.notify_all();
        self.finished.notify_all();
    }

    /// Waits until nothing is queued or being evaluated, up to `timeout`; true when idle.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if state.batches.is_empty() && state.processing == 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.finished.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::seam::{Catalog, LogProtocol, Protocol};

    fn batch() -> Batch {
        Batch { protocol: Protocol::Push, catalog: Catalog::Otel, samples: Vec::new(), received_ms: 0 }
    }

    #[test]
    fn submissions_are_accepted_or_refused_whole() {
        let queue = BatchQueue::new(3);
        assert_eq!(queue.push(vec![batch(), batch()]), Ok(()));
        assert_eq!(queue.pending(), 2, "queued");
        assert_eq!(queue.push(vec![batch(), batch()]), Err(PushRefused::Full), "2 + 2 > 3");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.push(vec![batch()]), Ok(()));
        assert!(queue.take().is_some());
        queue.done();
        assert_eq!(queue.len(), 2);
    }

    #[test]
    fn an_oversized_request_enters_only_an_empty_queue() {
        let queue = BatchQueue::new(2);
        assert_eq!(queue.push(vec![batch()]), Ok(()));
        assert_eq!(queue.push(vec![batch(), batch(), batch()]), Err(PushRefused::Full));
        assert!(queue.take().is_some());
        queue.done();
        assert_eq!(queue.push(vec![batch(), batch(), batch()]), Ok(()), "empty: taken whole");
    }

    #[test]
    fn room_is_reported_while_an_eighth_of_the_queue_is_free() {
        let queue = BatchQueue::new(16);
        assert!(queue.has_room());
        assert_eq!(queue.push((0..14).map(|_| batch()).collect()), Ok(()));
        assert!(queue.has_room(), "14 + 2 <= 16");
        assert_eq!(queue.push(vec![batch()]), Ok(()));
        assert!(!queue.has_room(), "15 + 2 > 16, though one more batch would still fit");
        assert_eq!(queue.push(vec![batch()]), Ok(()));
        assert!(queue.take().is_some());
        queue.done();
        assert!(!queue.has_room());
        queue.stop();
        assert!(!queue.has_room(), "a stopped queue has no room");
        assert!(BatchQueue::<Batch>::new(1).has_room(), "a queue of one has room while empty");
    }

    #[test]
    fn a_stopped_queue_refuses_and_still_hands_out_what_it_holds() {
        let queue = BatchQueue::new(4);
        assert_eq!(queue.push(vec![batch()]), Ok(()));
        queue.stop();
        assert_eq!(queue.push(vec![batch()]), Err(PushRefused::Stopped));
        assert!(queue.take().is_some());
        assert!(!queue.wait_idle(Duration::ZERO), "one batch still being processed");
        assert_eq!(queue.pending(), 1, "taken, not finished");
        queue.done();
        assert!(queue.take().is_none());
        assert!(queue.wait_idle(Duration::ZERO));
        assert_eq!(queue.pending(), 0);
    }

    fn log_batch() -> LogBatch {
        LogBatch { protocol: LogProtocol::SkyWalking, logs: Vec::new(), received_ms: 0 }
    }

    #[test]
    fn log_submissions_are_taken_whole_or_refused_whole_and_stop_drains() {
        let queue = LogQueue::new(3);
        assert_eq!(queue.push(vec![log_batch(), log_batch()]), Ok(()));
        assert_eq!(queue.push(vec![log_batch(), log_batch()]), Err(PushRefused::Full), "2 + 2 > 3");
        assert_eq!(queue.len(), 2);
        assert!(queue.take().is_some());
        assert!(queue.take().is_some());
        assert!(!queue.wait_idle(Duration::ZERO), "two batches still being processed");
        queue.done();
        queue.done();
        assert_eq!(queue.push(vec![log_batch(), log_batch(), log_batch(), log_batch()]), Ok(()), "empty: an oversized request is taken");
        queue.stop();
        assert_eq!(queue.push(vec![log_batch()]), Err(PushRefused::Stopped));
        for _ in 0..4 {
            assert!(queue.take().is_some(), "what was accepted is still handed out");
            queue.done();
        }
        assert!(queue.take().is_none());
        assert!(queue.wait_idle(Duration::ZERO));
    }

    fn logs(n: usize) -> LogBatch {
        LogBatch { logs: vec![Default::default(); n], ..log_batch() }
    }

    #[test]
    fn a_backlog_is_taken_in_groups_bounded_by_weight() {
        let queue = LogQueue::new(8);
        assert_eq!(queue.push(vec![logs(3), logs(2), logs(4), logs(1)]), Ok(()));
        let by_logs = |b: &LogBatch| b.logs.len();
        let group = queue.take_up_to(6, by_logs).expect("a group");
        assert_eq!(group.iter().map(by_logs).collect::<Vec<_>>(), vec![3, 2], "3 + 2 fit in 6, + 4 does not");
        assert_eq!(queue.pending(), 4, "both taken batches count as processing");
        let group = queue.take_up_to(1, by_logs).expect("a group");
        assert_eq!(group.iter().map(by_logs).collect::<Vec<_>>(), vec![4], "the first is taken whatever its weight");
        queue.done_many(3);
        assert_eq!(queue.pending(), 1);
        queue.stop();
        assert_eq!(queue.take_up_to(100, by_logs).map(|g| g.len()), Some(1));
        queue.done_many(1);
        assert!(queue.take_up_to(100, by_logs).is_none(), "stopped and empty");
        assert!(queue.wait_idle(Duration::ZERO));
    }
}
