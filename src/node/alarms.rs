//! The alarm rules of a node: `alarm-settings.yml` read and validated at the start, the hooks'
//! delivery, and the worker that checks the rules (`data::alarms`) and stores what it sends
//! (`data::alarm_records`). The runtime gets the running
//! rules for the contract's resets, and the admin API reads them from there.

use std::sync::{Arc, Mutex};

use super::NodeError;
use crate::base::owner::LiveNodes;
use crate::base::self_metrics::SelfMetrics;
use crate::base::worker::WorkerRunner;
use crate::control::alarms::SharedAlarms;
use crate::control::alarms::config::AlarmsConfig;
use crate::control::alarms::engine::AlarmEngine;
use crate::control::alarms::hooks::delivery::hook_delivery;
use crate::control::alarms::hooks::sender::HttpHookSender;
use crate::control::alarms::hooks::target::{DeliverySettings, HookTarget};
use crate::control::alarms::settings::{AlarmSettings, HookConfig};
use crate::data::alarm_records::AlarmRecordWriter;
use crate::data::alarms::{AlarmPeers, AlarmWorker, Schedule, StoreValues};
use crate::data::metrics::MetricReader;

/// Reads and validates the settings file: the named file must exist; the default one may be
/// absent (no alarm rules).
pub(super) fn load(config: &AlarmsConfig) -> Result<AlarmSettings, NodeError> {
    let path = &config.settings_file;
    let failed = |reason: String| NodeError::AlarmSettings { path: path.clone(), reason };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !config.settings_file_named => {
            tracing::info!(path = %path.display(), "no alarm settings file: no alarm rules");
            return Ok(AlarmSettings::empty());
        }
        Err(e) => return Err(failed(e.to_string())),
    };
    let settings = AlarmSettings::parse(&text, &crate::control::alarms::verify::verify).map_err(|e| failed(e.to_string()))?;
    for warning in &settings.warnings {
        tracing::warn!(path = %path.display(), %warning, "alarm settings");
    }
    tracing::info!(path = %path.display(), rules = settings.rules.len(), hooks = settings.hooks.len(), "alarm settings loaded");
    Ok(settings)
}

/// The hooks a settings file names, as delivery targets (hook kinds hotrule does not send are
/// left out; the settings' warnings said so).
pub(super) fn targets(settings: &AlarmSettings) -> Result<Vec<HookTarget>, NodeError> {
    let failed = |reason: String| NodeError::AlarmSettings { path: "hooks".into(), reason };
    let mut out = Vec::new();
    for hook in &settings.hooks {
        let id = hook.id.to_string();
        let target = match &hook.config {
            HookConfig::Webhook(config) => {
                let urls: Vec<&str> = config.urls.iter().map(String::as_str).collect();
                let recovery: Vec<&str> = config.recovery_urls.iter().map(String::as_str).collect();
                HookTarget::webhook(&id, &urls, &recovery, &pairs(&config.headers))
            }
            HookConfig::Alertmanager(config) => {
                let urls: Vec<&str> = config.urls.iter().map(String::as_str).collect();
                HookTarget::alertmanager(&id, &urls, &pairs(&config.headers))
            }
            HookConfig::Unsupported => continue,
        };
        out.push(target.map_err(|e| failed(e.to_string()))?);
    }
    Ok(out)
}

fn pairs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The running rules and the parts the worker needs.
pub(super) struct AlarmParts {
    pub alarms: SharedAlarms,
    targets: Vec<HookTarget>,
}

pub(super) fn build(config: &AlarmsConfig) -> Result<AlarmParts, NodeError> {
    let settings = load(config)?;
    let targets = targets(&settings)?;
    Ok(AlarmParts { alarms: Arc::new(Mutex::new(AlarmEngine::new(settings))), targets })
}

/// Starts the hooks' delivery and the check worker, which stores its messages in `records`; in a
/// cluster, alarm states and resets go to the peers over the bus.
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn(
    workers: &mut WorkerRunner,
    parts: AlarmParts,
    config: &AlarmsConfig,
    reader: Arc<dyn MetricReader>,
    records: Arc<dyn AlarmRecordWriter>,
    live: &Arc<dyn LiveNodes>,
    cluster: Option<&super::wiring::ClusterParts>,
    runtime: &crate::control::runtime::Runtime,
    telemetry: &Arc<SelfMetrics>,
) -> Result<(), NodeError> {
    let sender = Arc::new(HttpHookSender::new().map_err(|e| NodeError::AlarmSettings { path: "hooks".into(), reason: e.to_string() })?);
    let (notifier, hook_worker) = hook_delivery(parts.targets, DeliverySettings::default(), sender, telemetry.clone())
        .map_err(|e| NodeError::AlarmSettings { path: "hooks".into(), reason: e.to_string() })?;
    workers.spawn(hook_worker);
    let values = Arc::new(StoreValues { reader, live: live.clone() });
    let schedule = config.check_interval.map_or(Schedule::EveryMinute, Schedule::Every);
    let mut worker = AlarmWorker::new(parts.alarms, values, notifier, schedule).with_records(records);
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
    Ok(())
}
