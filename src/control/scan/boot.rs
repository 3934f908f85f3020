//! The boot workflow.
//!
//! Bundled files and stored entries are brought into memory by one synchronous scan before the
//! admin port opens. Per key, the plan already encodes the boot rules: no entry → the disk file;
//! an ACTIVE entry → its content instead; an INACTIVE entry → the file is skipped; runtime-only
//! entries load as well. Measures are created if absent and never reshaped. The revision clock
//! first observes every stored revision, so new writes order after everything on disk.

use crate::base::clock::RevisionClock;
use crate::store::Store;

use super::{ScanReport, Scanner};

pub async fn boot(scanner: &Scanner, store: &Store, clock: &RevisionClock) -> ScanReport {
    for meta in store.entry_index() {
        clock.observe(&meta.revision);
    }
    let report = scanner.run_once(true).await;
    for (key, error) in &report.failed {
        tracing::error!(rule = %key, %error, "boot: rule not loaded");
    }
    report
}
