//! The work of the throughput benchmark: logs driven round-robin through a file, as the runtime
//! would (`analyze` per log, the caller's clock advancing). No clock here: the
//! `nginx_throughput` example times [`drive`].

use crate::{LalState, LogData, PreparedLalFile, analyze};

/// What [`drive`] produced, so the work cannot be optimised away and can be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Driven {
    pub lines: u64,
    /// Records persisted by sinks.
    pub kept: u64,
    /// Samples emitted by `metrics {}`.
    pub samples: u64,
    /// Rule errors.
    pub errors: u64,
}

/// Runs `lines` logs, taken round-robin from `logs`, through `file` on the calling thread. The
/// clock passed to the rules advances by one millisecond every thousand lines.
pub fn drive(file: &PreparedLalFile, logs: &[LogData], lines: u64) -> Driven {
    let mut state = LalState::default();
    let mut driven = Driven {
        lines,
        ..Driven::default()
    };
    if logs.is_empty() {
        return Driven::default();
    }
    for i in 0..lines {
        let log = &logs[(i % logs.len() as u64) as usize];
        let now_ms = log.timestamp_ms.saturating_add((i / 1000) as i64);
        for outcome in analyze(&[file], log, now_ms, &mut state).outcomes() {
            driven.kept += outcome.persisted.len() as u64;
            driven.samples += outcome.samples.len() as u64;
            driven.errors += u64::from(outcome.error.is_some());
        }
    }
    driven
}
