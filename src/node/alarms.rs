//! The alarm rules of a node: `alarm-settings.yml` read and validated at the start, the hooks'
//! delivery, and the worker that checks the rules (`data::alarms`) and stores what it sends
//! (`data::alarm_records`). The runtime gets the running rules (for the contract's resets) and
//! the settings in force (which each scan converges to the runtime entry, if operators pushed
//! one); the admin API reads both from there.

use std::sync::{Arc, Mutex};

use super::NodeError;
use crate::base::owner::LiveNodes;
use crate::base::self_metrics::SelfMetrics;
use crate::base::worker::WorkerRunner;
use crate::control::alarms::SharedAlarms;
use crate::control::alarms::config::AlarmsConfig;
use crate::control::alarms::engine::AlarmEngine;
use crate::control::alarms::hooks::delivery::{AlarmNotifier, HookWorker, hook_delivery};
use crate::control::alarms::hooks::sender::HttpHookSender;
use crate::control::alarms::hooks::target::DeliverySettings;
use crate::control::alarms::live::{Boot, LiveSettings, validate};
use crate::data::alarm_records::AlarmStateKeeper;
use crate::data::alarm_records::store::AlarmRecordStore;
use crate::data::alarms::{AlarmPeers, AlarmWorker, Schedule, StoreValues};
use crate::data::metrics::MetricReader;

/// Reads the boot file: the named file must exist; the default one may be absent (no alarm
/// rules until settings are pushed).
fn read_boot(config: &AlarmsConfig) -> Result<Boot, NodeError> {
    let path = &config.settings_file;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !config.settings_file_named => {
            tracing::info!(path = %path.display(), "no alarm settings file: no alarm rules");
            None
        }
        Err(e) => return Err(NodeError::AlarmSettings { path: path.clone(), reason: e.to_string() }),
    };
    Ok(Boot { path: path.clone(), text })
}

/// The running rules, their settings and the hooks' delivery.
pub(super) struct AlarmParts {
    pub alarms: SharedAlarms,
    pub live: Arc<LiveSettings>,
    notifier: AlarmNotifier,
    hook_worker: HookWorker,
    schedule: Schedule,
}

/// Reads and validates the boot file (refused: the node does not start) and builds the rules
/// and the hooks from it.
pub(super) fn build(config: &AlarmsConfig, telemetry: &Arc<SelfMetrics>) -> Result<AlarmParts, NodeError> {
    let boot = read_boot(config)?;
    let failed = |reason: String| NodeError::AlarmSettings { path: boot.path.clone(), reason };
    let (settings, targets) = validate(boot.text.as_deref().unwrap_or("").as_bytes()).map_err(|e| failed(e.to_string()))?;
    for warning in &settings.warnings {
        tracing::warn!(path = %boot.path.display(), %warning, "alarm settings");
    }
    tracing::info!(path = %boot.path.display(), rules = settings.rules.len(), hooks = settings.hooks.len(), "alarm settings loaded");
    let sender = Arc::new(HttpHookSender::new().map_err(|e| failed(e.to_string()))?);
    let (notifier, hook_worker) = hook_delivery(targets, DeliverySettings::default(), sender, telemetry.clone()).map_err(|e| failed(e.to_string()))?;
    let alarms: SharedAlarms = Arc::new(Mutex::new(AlarmEngine::new(settings.clone())));
    let live = Arc::new(LiveSettings::new(alarms.clone(), notifier.clone(), boot, &settings));
    let schedule = config.check_interval.map_or(Schedule::EveryMinute, Schedule::Every);
    Ok(AlarmParts { alarms, live, notifier, hook_worker, schedule })
}

/// Starts the hooks' delivery and the check worker, which stores its messages in `records` and
/// keeps there the states it holds across a restart; in a cluster, alarm states and resets go
/// to the peers over the bus.
pub(super) fn spawn(
    workers: &mut WorkerRunner,
    parts: AlarmParts,
    reader: Arc<dyn MetricReader>,
    records: Arc<AlarmRecordStore>,
    live: &Arc<dyn LiveNodes>,
    cluster: Option<&super::wiring::ClusterParts>,
    runtime: &crate::control::runtime::Runtime,
) {
    workers.spawn(parts.hook_worker);
    let values = Arc::new(StoreValues::new(reader, live.clone()));
    // The states this node held before a restart: taken at its first check of each entity it
    // still evaluates (a peer's hand-over, arriving later, is newer and replaces them).
    let kept = match records.kept_states() {
        Ok(kept) => kept,
        Err(e) => {
            tracing::warn!(error = %e, "kept alarm states unreadable; every alarm starts from NORMAL");
            Vec::new()
        }
    };
    if !kept.is_empty() {
        tracing::info!(states = kept.len(), "alarm states kept before the restart resumed");
        parts.alarms.lock().unwrap_or_else(|p| p.into_inner()).adopt(kept.clone());
    }
    let keeper: Arc<dyn AlarmStateKeeper> = records.clone();
    let mut worker = AlarmWorker::new(parts.alarms, values, parts.notifier, parts.schedule).with_records(records).with_state_keeper(keeper, kept);
    if let Some(cluster) = cluster {
        let peers: Arc<dyn AlarmPeers> = Arc::new(crate::cluster::replication::alarms::BusAlarmPeers { cluster: cluster.cluster.clone() });
        worker = worker.with_peers(peers.clone());
        runtime.set_alarm_reset_peers(Arc::new(move |metrics| {
            let peers = peers.clone();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move { peers.share(metrics.into_iter().collect(), Vec::new()).await });
            }
        }));
    }
    workers.spawn(worker);
}
