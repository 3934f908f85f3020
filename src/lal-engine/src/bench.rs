//! A throughput measurement of the interpreter on `lal/nginx.yaml`: access and error log lines
//! (parse, extract, sink, metrics). Used by the `nginx_throughput` example; pure like the rest.

use std::time::{Duration, Instant};

use crate::{LalState, LogData, PreparedLalFile, analyze};

/// The result of [`measure`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    pub lines: u64,
    pub elapsed: Duration,
    pub kept: u64,
    pub samples: u64,
}

impl Throughput {
    pub fn lines_per_second(&self) -> f64 {
        self.lines as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// Runs `logs` round-robin through `file` for `lines` lines on the calling thread.
pub fn measure(file: &PreparedLalFile, logs: &[LogData], lines: u64) -> Throughput {
    let mut state = LalState::default();
    let mut kept = 0;
    let mut samples = 0;
    let start = Instant::now();
    if !logs.is_empty() {
        for i in 0..lines {
            let log = &logs[(i % logs.len() as u64) as usize];
            let now_ms = log.timestamp_ms + (i as i64 / 1000);
            for outcome in analyze(&[file], log, now_ms, &mut state).outcomes() {
                kept += outcome.persisted.len() as u64;
                samples += outcome.samples.len() as u64;
            }
        }
    }
    Throughput {
        lines,
        elapsed: start.elapsed(),
        kept,
        samples,
    }
}
