//! The in-memory twin of the dispatcher for receiver tests: it records every accepted
//! submission, can be told to refuse the next ones (queue full, stopping), and lets a test wait
//! for a number of submissions.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::data::seam::{Batch, BatchSink, SubmitError};

/// Records accepted submissions; refuses while [`RecordingSink::refuse`] says so.
pub struct RecordingSink {
    state: Mutex<State>,
    /// The number of submissions seen (accepted or refused), for waiting.
    seen_tx: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    accepted: Vec<Vec<Batch>>,
    /// Answers for the next submissions, in order; empty means accept.
    refusals: VecDeque<SubmitError>,
    /// Refuse every submission with this, after `refusals` ran out.
    refuse_all: Option<SubmitError>,
    /// Answer `has_room` with false (a full queue seen before decoding).
    full: bool,
    seen: usize,
}

impl Default for RecordingSink {
    fn default() -> Self {
        RecordingSink::new()
    }
}

impl RecordingSink {
    pub fn new() -> RecordingSink {
        RecordingSink { state: Mutex::new(State::default()), seen_tx: watch::channel(0).0 }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses the next submission with `error` (queued after earlier ones).
    pub fn refuse_next(&self, error: SubmitError) {
        self.state().refusals.push_back(error);
    }

    /// Refuses every submission with `error` (`None`: accept again).
    pub fn refuse_all(&self, error: Option<SubmitError>) {
        self.state().refuse_all = error;
    }

    /// Makes `has_room` answer `!full`.
    pub fn set_full(&self, full: bool) {
        self.state().full = full;
    }

    /// Every accepted submission, in order.
    pub fn accepted(&self) -> Vec<Vec<Batch>> {
        self.state().accepted.clone()
    }

    /// Every accepted batch, flattened.
    pub fn batches(&self) -> Vec<Batch> {
        self.state().accepted.iter().flatten().cloned().collect()
    }

    /// Submissions seen so far, accepted or refused.
    pub fn seen(&self) -> usize {
        self.state().seen
    }

    /// Waits until at least `count` submissions were seen, or `within` passes; returns the count.
    pub async fn wait_for_submissions(&self, count: usize, within: Duration) -> usize {
        let mut seen_rx = self.seen_tx.subscribe();
        let _ = tokio::time::timeout(within, seen_rx.wait_for(|seen| *seen >= count)).await;
        self.seen()
    }
}

impl BatchSink for RecordingSink {
    fn has_room(&self) -> bool {
        !self.state().full
    }

    fn submit(&self, batches: Vec<Batch>) -> Result<(), SubmitError> {
        let result = {
            let mut state = self.state();
            state.seen += 1;
            match state.refusals.pop_front().or_else(|| state.refuse_all.clone()) {
                Some(error) => Err(error),
                None => {
                    state.accepted.push(batches);
                    Ok(())
                }
            }
        };
        self.seen_tx.send_modify(|seen| *seen += 1);
        result
    }
}
