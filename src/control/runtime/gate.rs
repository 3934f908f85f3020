//! A file's evaluation gate: how many evaluations of it are open, and a way to wait until there
//! are none. The control plane meets the data plane here: dispatch opens an evaluation through
//! [`super::Runtime::begin_eval`] (refused while the file is suspended), and the workflow and the
//! bus pause handler wait for the drain after a suspend.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::Notify;

use super::LoadedRule;

/// The in-flight count of one file and its "became idle" notice.
#[derive(Debug, Default)]
pub struct Gate {
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Gate {
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until nothing is in flight or `deadline` passes; true when idle.
    pub async fn wait_idle(&self, deadline: Instant) -> bool {
        loop {
            // Registered before the check, so a release between the check and the wait is seen.
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }
}

/// Why an evaluation was not opened.
#[derive(Debug, Clone)]
pub enum GateClosed {
    /// The file is suspended (its content, so the caller can tell which samples it would read).
    Suspended(LoadedRule),
    NotLoaded,
}

/// One open evaluation: the content it runs (one version for the whole evaluation) and the
/// metrics disabled in it. Dropping it closes the evaluation.
#[derive(Debug)]
pub struct EvalGuard {
    gate: Arc<Gate>,
    pub loaded: LoadedRule,
    pub disabled_metrics: BTreeSet<String>,
}

impl EvalGuard {
    /// Counts one evaluation in; only the runtime opens one, under its lock.
    pub(super) fn open(gate: Arc<Gate>, loaded: LoadedRule, disabled_metrics: BTreeSet<String>) -> EvalGuard {
        gate.in_flight.fetch_add(1, Ordering::SeqCst);
        EvalGuard { gate, loaded, disabled_metrics }
    }
}

impl Drop for EvalGuard {
    fn drop(&mut self) {
        if self.gate.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.gate.idle.notify_waiters();
        }
    }
}
