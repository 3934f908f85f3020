//! The in-memory twin of the log dispatcher for receiver tests, like [`super::RecordingSink`]:
//! it records every accepted log submission, can be told to refuse the next ones (queue full,
//! stopping), and lets a test wait for a number of submissions.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use crate::data::seam::{LogBatch, LogSink, SubmitError};

/// Records accepted log submissions; refuses while told to.
pub struct RecordingLogSink {
    state: Mutex<State>,
    /// The number of submissions seen (accepted or refused), for waiting.
    seen_tx: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    accepted: Vec<Vec<LogBatch>>,
    /// Answers for the next submissions, in order; empty means accept.
    refusals: VecDeque<SubmitError>,
    seen: usize,
}

impl Default for RecordingLogSink {
    fn default() -> Self {
        RecordingLogSink::new()
    }
}

impl RecordingLogSink {
    pub fn new() -> RecordingLogSink {
        RecordingLogSink { state: Mutex::new(State::default()), seen_tx: watch::channel(0).0 }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses the next submission with `error` (queued after earlier ones).
    pub fn refuse_next(&self, error: SubmitError) {
        self.state().refusals.push_back(error);
    }

    /// Every accepted submission, in order.
    pub fn accepted(&self) -> Vec<Vec<LogBatch>> {
        self.state().accepted.clone()
    }

    /// Every accepted batch, flattened.
    pub fn batches(&self) -> Vec<LogBatch> {
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

impl LogSink for RecordingLogSink {
    fn submit_logs(&self, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        let result = {
            let mut state = self.state();
            state.seen += 1;
            match state.refusals.pop_front() {
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
