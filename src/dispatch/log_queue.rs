//! The bounded queue of log batches between the log receivers and the LAL evaluation threads.
//!
//! The same contract as the metric queue (`queue`): capacity in batches (one batch = the logs
//! of one OTLP `ResourceLogs` or one `/v3/logs` array), a submission accepted or refused whole,
//! one larger than the whole queue taken only into an empty queue, and a count of the batches
//! taken and not yet finished so a waiter can tell when LAL dispatch is idle. Its own bound
//! (`dispatch.log_queue_batches`) keeps a log flood from refusing metric batches and back.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::queue::PushRefused;
use crate::data::LogBatch;

#[derive(Default)]
struct State {
    batches: VecDeque<LogBatch>,
    processing: usize,
    stopped: bool,
}

pub struct LogQueue {
    capacity: usize,
    state: Mutex<State>,
    /// Signalled when a batch arrives or the queue stops.
    arrived: Condvar,
    /// Signalled when a batch is finished.
    finished: Condvar,
}

impl LogQueue {
    pub fn new(capacity: usize) -> LogQueue {
        LogQueue {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            finished: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Batches waiting (not yet taken).
    pub fn len(&self) -> usize {
        self.lock().batches.len()
    }

    pub fn push(&self, batches: Vec<LogBatch>) -> Result<(), PushRefused> {
        let mut state = self.lock();
        if state.stopped {
            return Err(PushRefused::Stopped);
        }
        if state.batches.len() + batches.len() > self.capacity && !state.batches.is_empty() {
            return Err(PushRefused::Full);
        }
        state.batches.extend(batches);
        drop(state);
        self.arrived.notify_all();
        Ok(())
    }

    /// The next batch, waiting for one; None once the queue is stopped and empty.
    pub fn take(&self) -> Option<LogBatch> {
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

    /// Marks one taken batch finished.
    pub fn done(&self) {
        let mut state = self.lock();
        state.processing = state.processing.saturating_sub(1);
        drop(state);
        self.finished.notify_all();
    }

    /// Refuses new batches from now on and wakes the threads so they finish what is queued.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.arrived.notify_all();
        self.finished.notify_all();
    }

    /// Waits until nothing is queued or being evaluated, up to `deadline`; true when idle.
    pub fn wait_idle(&self, deadline: Instant) -> bool {
        let mut state = self.lock();
        loop {
            if state.batches.is_empty() && state.processing == 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.finished.wait_timeout(state, left.min(Duration::from_secs(3600))).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::LogProtocol;

    fn batch() -> LogBatch {
        LogBatch { protocol: LogProtocol::SkyWalking, logs: Vec::new(), received_ms: 0 }
    }

    #[test]
    fn submissions_are_taken_whole_or_refused_whole_and_stop_drains() {
        let queue = LogQueue::new(3);
        assert_eq!(queue.push(vec![batch(), batch()]), Ok(()));
        assert_eq!(queue.push(vec![batch(), batch()]), Err(PushRefused::Full), "2 + 2 > 3");
        assert_eq!(queue.len(), 2);
        assert!(queue.take().is_some());
        assert!(queue.take().is_some());
        assert!(!queue.wait_idle(Instant::now()), "two batches still being processed");
        queue.done();
        queue.done();
        assert_eq!(queue.push(vec![batch(), batch(), batch(), batch()]), Ok(()), "empty: an oversized request is taken");
        queue.stop();
        assert_eq!(queue.push(vec![batch()]), Err(PushRefused::Stopped));
        for _ in 0..4 {
            assert!(queue.take().is_some(), "what was accepted is still handed out");
            queue.done();
        }
        assert!(queue.take().is_none());
        assert!(queue.wait_idle(Instant::now()));
    }
}
