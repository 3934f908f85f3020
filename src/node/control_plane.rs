//! The control plane of a node: management storage, the bundled rules, the runtime and its
//! locks, the revision clock, the workflow (the one writer of entries) and the scan.

use std::sync::Arc;

use crate::base::clock::RevisionClock;
use crate::base::ids::NodeId;
use crate::base::self_metrics::SelfMetrics;
use crate::control::bundled::Bundled;
use crate::control::runtime::Runtime;
use crate::control::runtime::locks::FileLocks;
use crate::control::scan::Scanner;
use crate::control::workflow::{Peers, Workflow};
use crate::store::Store;
use crate::store::kv::KvEngine;

use super::{NodeError, NodeSettings};

/// The control plane's parts, each from its own constructor.
pub(super) struct ControlPlane {
    pub(super) store: Arc<Store>,
    pub(super) bundled: Arc<Bundled>,
    pub(super) runtime: Arc<Runtime>,
    pub(super) locks: Arc<FileLocks>,
    pub(super) clock: Arc<RevisionClock>,
    pub(super) workflow: Arc<Workflow>,
    pub(super) scanner: Arc<Scanner>,
}

/// Opens management storage on `kv` and builds the control plane over it.
pub(super) fn build(
    kv: Arc<dyn KvEngine>,
    settings: &NodeSettings,
    node_id: &NodeId,
    peers: Arc<dyn Peers>,
    telemetry: &Arc<SelfMetrics>,
) -> Result<ControlPlane, NodeError> {
    let store = Arc::new(Store::open(kv)?);
    let bundled = Arc::new(load_bundled(settings)?);
    let runtime = Arc::new(Runtime::new());
    let locks = Arc::new(FileLocks::default());
    let clock = Arc::new(RevisionClock::new(node_id.clone()));
    let workflow = Arc::new(
        Workflow::new(store.clone(), runtime.clone(), bundled.clone(), clock.clone(), peers, locks.clone())
            .with_lock_timeout(settings.lock_timeout)
            .with_history_retention(settings.history),
    );
    // The scan purges old tombstones through the one writer of entries.
    let scanner = Arc::new(
        Scanner::new(store.clone(), runtime.clone(), bundled.clone(), locks.clone(), settings.scan.clone(), workflow.clone())
            .with_telemetry(telemetry.clone())
            .with_node(node_id.clone()),
    );
    Ok(ControlPlane { store, bundled, runtime, locks, clock, workflow, scanner })
}

/// The bundled rules of the rules dir, or none.
fn load_bundled(settings: &NodeSettings) -> Result<Bundled, NodeError> {
    let Some(dir) = &settings.rules_dir else { return Ok(Bundled::empty()) };
    let (bundled, warnings) = Bundled::load(dir)?;
    for warning in warnings {
        tracing::warn!(%warning, "bundled rule skipped");
    }
    tracing::info!(dir = %dir.display(), files = bundled.len(), "bundled rules read");
    Ok(bundled)
}
