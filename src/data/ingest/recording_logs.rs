//! The in-memory twin of the log dispatcher for receiver tests: a [`super::recording::Recording`]
//! of log batches, served as a [`LogSink`].

use crate::data::seam::{LogBatch, LogSink, SubmitError};

use super::recording::Recording;

/// Records accepted log submissions; refuses while told to.
pub type RecordingLogSink = Recording<LogBatch>;

impl LogSink for RecordingLogSink {
    fn submit_logs(&self, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        self.record(batches)
    }
}
