//! The in-memory twins of the dispatchers for receiver tests: a [`Recording`] records every
//! accepted submission, can be told to refuse the next ones (queue full, stopping), and lets a
//! test wait for a number of submissions. It is generic over what is submitted: samples
//! ([`RecordingSink`], here) and logs ([`super::RecordingLogSink`], in `recording_logs`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::data::seam::{Batch, BatchSink, SubmitError};

/// The twin of the sample dispatcher.
pub type RecordingSink = Recording<Batch>;

/// Records accepted submissions of `T`s; refuses while told to.
pub struct Recording<T> {
    state: Mutex<State<T>>,
    /// The number of submissions seen (accepted or refused), for waiting.
    seen_tx: watch::Sender<usize>,
}

struct State<T> {
    accepted: Vec<Vec<T>>,
    /// Answers for the next submissions, in order; empty means accept.
    refusals: VecDeque<SubmitError>,
    /// Refuse every submission with this, after `refusals` ran out.
    refuse_all: Option<SubmitError>,
    /// Answer `has_room` with false (a full queue seen before decoding).
    full: bool,
    seen: usize,
}

impl<T> Default for Recording<T> {
    fn default() -> Self {
        Recording::new()
    }
}

impl<T> Recording<T> {
    pub fn new() -> Recording<T> {
        let state = State { accepted: Vec::new(), refusals: VecDeque::new(), refuse_all: None, full: false, seen: 0 };
        Recording { state: Mutex::new(state), seen_tx: watch::channel(0).0 }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<T>> {
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

    /// One submission: accepted (recorded) unless a refusal is due.
    pub(super) fn record(&self, items: Vec<T>) -> Result<(), SubmitError> {
        let result = {
            let mut state = self.state();
            state.seen += 1;
            match state.refusals.pop_front().or_else(|| state.refuse_all.clone()) {
                Some(error) => Err(error),
                None => {
                    state.accepted.push(items);
                    Ok(())
                }
            }
        };
        self.seen_tx.send_modify(|seen| *seen += 1);
        result
    }
}

impl<T: Clone> Recording<T> {
    /// Every accepted submission, in order.
    pub fn accepted(&self) -> Vec<Vec<T>> {
        self.state().accepted.clone()
    }

    /// Every accepted batch, flattened.
    pub fn batches(&self) -> Vec<T> {
        self.state().accepted.iter().flatten().cloned().collect()
    }
}

impl RecordingSink {
    /// Makes `has_room` answer `!full`.
    pub fn set_full(&self, full: bool) {
        self.state().full = full;
    }
}

impl BatchSink for RecordingSink {
    fn has_room(&self) -> bool {
        !self.state().full
    }

    fn submit(&self, batches: Vec<Batch>) -> Result<(), SubmitError> {
        self.record(batches)
    }
}
