//! The node's background workers, each on the node's one runner: the scan, agent maintenance,
//! scraping and retention on the data plane, configuration reload, and the roller.

use std::sync::Arc;
use std::time::Duration;

use crate::api::admin::AdminState;
use crate::api::agents::AgentService;
use crate::api::agents::maintenance::MaintenanceWorker;
use crate::base::ids::NodeId;
use crate::base::owner::LiveNodes;
use crate::base::worker::WorkerRunner;
use crate::config::reload::{ReloadWorker, Reloader};
use crate::control::rolling::roller::{self, HealthBoard, RollActions, RollerParts};
use crate::control::scan::ScanWorker;
use crate::base::self_metrics::SelfMetrics;
use crate::cluster::replication::handoff::BusHandoff;
use crate::data::ingest::{Ingest, ScrapeBoard, ScrapeWorker};
use crate::data::metrics::handoff::{HandoffSettings, HandoffWorker};

use super::NodeSettings;
use super::control_plane::ControlPlane;
use super::data_plane::DataStores;
use super::live::NodeLive;
use super::roll_boards::{GossipBoard, LocalBoard, RuntimeFacts, StoreRecords};
use super::wiring::{ClusterParts, main_view};

/// The periodic scan (in a cluster it asks gossip whether this node is the main), and history's
/// age retention.
pub(super) fn spawn_scan(workers: &mut WorkerRunner, control: &ControlPlane, cluster: Option<&ClusterParts>) {
    workers.spawn(ScanWorker::new(control.scanner.clone(), main_view(cluster)));
    // Rule history's age retention (count retention is applied by every write).
    workers.spawn(crate::control::workflow::history::HistoryRetentionWorker::new(
        control.workflow.clone(),
        crate::control::workflow::history::HISTORY_RETENTION_INTERVAL,
    ));
}

/// Flushes agent state to storage and expires agents every `flush_interval`.
pub(super) fn spawn_agent_maintenance(workers: &mut WorkerRunner, agents: &Arc<AgentService>, flush_interval: Duration) {
    workers.spawn(MaintenanceWorker::new(agents.clone(), flush_interval));
}

/// What the scrape worker divides its targets by, and where it shows them.
pub(super) struct ScrapeParts {
    pub(super) live: Arc<dyn LiveNodes>,
    pub(super) board: Arc<ScrapeBoard>,
}

/// The data plane's workers: the scrape jobs (when any; each target scraped by its owner among
/// the live nodes), metric, log and alarm-record retention.
pub(super) fn spawn_data_workers(
    workers: &mut WorkerRunner,
    settings: &NodeSettings,
    ingest: &Arc<Ingest>,
    stores: &DataStores,
    scrape: ScrapeParts,
) {
    if !settings.ingest.scrape_jobs.is_empty() {
        workers.spawn(ScrapeWorker::new(ingest.clone(), &settings.ingest.scrape_jobs, scrape.live, scrape.board));
    }
    workers.spawn(crate::data::metrics::cells::retention::RetentionWorker::new(
        stores.metric_store.clone(),
        crate::data::metrics::cells::retention::RETENTION_INTERVAL,
    ));
    workers.spawn(crate::data::logs::records::retention::LogRetentionWorker::new(
        stores.log_store.clone(),
        crate::data::logs::records::retention::RETENTION_INTERVAL,
    ));
    workers.spawn(crate::data::logs::records::flush::LogFlushWorker::new(stores.log_store.clone()));
    workers.spawn(crate::data::alarm_records::store::AlarmRetentionWorker::new(
        stores.alarm_store.clone(),
        crate::data::alarm_records::store::RETENTION_INTERVAL,
    ));
}

/// In a cluster, the handoff of partial state to each entity's owner (`data::metrics::handoff`)
/// over the bus. A lone node owns everything and runs none.
pub(super) fn spawn_handoff(
    workers: &mut WorkerRunner,
    stores: &DataStores,
    live: &Arc<dyn LiveNodes>,
    cluster: Option<&ClusterParts>,
    telemetry: &Arc<SelfMetrics>,
) {
    let Some(parts) = cluster else { return };
    let sender = Arc::new(BusHandoff { cluster: parts.cluster.clone() });
    workers.spawn(HandoffWorker::new(stores.metric_store.clone(), live.clone(), sender, telemetry.clone(), HandoffSettings::default()));
}

/// Reloads the configuration the node was started from (none without one).
pub(super) fn spawn_reload(workers: &mut WorkerRunner, settings: &NodeSettings, control: &ControlPlane, state: &Arc<AdminState>) {
    let Some(runtime) = &settings.config else { return };
    let live = Arc::new(NodeLive { scanner: control.scanner.clone(), state: state.clone(), log_control: runtime.log_control.clone() });
    let reloader = Arc::new(Reloader::new(runtime.sources.clone(), runtime.env.clone(), runtime.state.clone(), live));
    workers.spawn(ReloadWorker::new(reloader));
}

/// Rolling changes (issue 15): every node publishes its roll health (in gossip, or to itself
/// when alone); the main's roll worker advances the rolls through the workflow, unless
/// `advance_rolls` is off.
pub(super) fn spawn_roller(
    workers: &mut WorkerRunner,
    settings: &NodeSettings,
    node_id: &NodeId,
    control: &ControlPlane,
    state: &Arc<AdminState>,
    cluster: Option<&ClusterParts>,
    advance_rolls: bool,
) {
    let actions: Option<Arc<dyn RollActions>> = match advance_rolls {
        true => Some(control.workflow.clone()),
        false => None,
    };
    let board: Arc<dyn HealthBoard> = match cluster {
        Some(parts) => Arc::new(GossipBoard::new(parts.cluster.membership.clone())),
        None => Arc::new(LocalBoard::new(node_id.clone())),
    };
    let parts = RollerParts {
        self_id: node_id.clone(),
        board,
        records: Arc::new(StoreRecords::new(control.store.clone())),
        facts: Arc::new(RuntimeFacts::new(control.runtime.clone(), state.dispatcher.clone())),
        changes: vec![control.runtime.subscribe(), control.store.subscribe_rolls()],
    };
    roller::spawn(workers, &settings.rolling, parts, actions);
}
