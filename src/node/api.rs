//! The API plane of a node: the agent config service and the admin API's state (with the query
//! service), built over the control and data planes.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::api::admin::AdminState;
use crate::api::agents::{AgentRegistry, AgentService, StoreAgentState, StoreConfigSource};
use crate::base::ids::NodeId;
use crate::base::self_metrics::SelfMetrics;
use crate::base::worker::WorkerHealth;
use crate::cluster::replication::sync::CatchUp;
use crate::config::{ConfigSources, ConfigState};
use crate::data::evaluation::Dispatcher;
use crate::data::ingest::ScrapeBoard;
use crate::store::Store;

use super::control_plane::ControlPlane;
use super::data_plane::DataStores;
use super::wiring::ClusterParts;
use super::{NodeError, NodeSettings};

/// The configuration `GET /config` shows: the loaded one, or the defaults for a node started
/// without one.
pub(super) fn config_state(settings: &NodeSettings) -> Result<Arc<ConfigState>, NodeError> {
    Ok(match &settings.config {
        Some(runtime) => runtime.state.clone(),
        None => Arc::new(ConfigState::new(crate::config::load(
            &ConfigSources::default(),
            Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new())),
        )?)),
    })
}

/// The agent config service over the node's store. A clustered node serves agents configs only
/// once its state is confirmed against the cluster (the returned catch-up, for sync to
/// confirm); a lone node is its own source of truth.
pub(super) fn agent_service(
    settings: &NodeSettings,
    store: &Arc<Store>,
    cluster: Option<&ClusterParts>,
) -> Result<(Arc<AgentService>, Option<CatchUp>), NodeError> {
    let registry = Arc::new(AgentRegistry::load(Arc::new(StoreAgentState::new(store.clone())), settings.agents.max_agents)?);
    let (catch_up, caught_up) = match cluster {
        Some(parts) => {
            let (catch_up, caught_up) = CatchUp::new(parts.cluster.settings.alone_after);
            (Some(catch_up), caught_up)
        }
        None => (None, tokio::sync::watch::channel(true).1),
    };
    let agents = Arc::new(
        AgentService::new(settings.agents.clone(), Arc::new(StoreConfigSource::new(store.clone())), registry).with_catch_up(caught_up),
    );
    Ok((agents, catch_up))
}

/// What the admin API's state is made of.
pub(super) struct AdminParts<'a> {
    pub(super) node_id: &'a NodeId,
    pub(super) control: &'a ControlPlane,
    pub(super) stores: &'a DataStores,
    pub(super) dispatcher: &'a Arc<Dispatcher>,
    pub(super) agents: &'a Arc<AgentService>,
    pub(super) config: Arc<ConfigState>,
    pub(super) cluster: Option<&'a ClusterParts>,
    pub(super) workers: Arc<WorkerHealth>,
    pub(super) telemetry: &'a Arc<SelfMetrics>,
    pub(super) scrape: &'a Arc<ScrapeBoard>,
}

/// The admin API's state (not ready until boot has finished), with the query service over the
/// node's metric reader and log store.
pub(super) fn admin_state(settings: &NodeSettings, parts: AdminParts<'_>) -> Result<Arc<AdminState>, NodeError> {
    let AdminParts { node_id, control, stores, dispatcher, agents, config, cluster, workers, telemetry, scrape } = parts;
    let cluster = cluster.map(|parts| parts.cluster.clone());
    let query = Arc::new(
        crate::api::query::QueryService::new(
            node_id.clone(),
            Some(stores.metric_reader.clone()),
            cluster.clone(),
            settings.query.clone(),
        )
        .with_logs(stores.log_store.clone())
        .with_alarms(stores.alarm_store.clone()),
    );
    let templates = Arc::new(ui_templates(settings));
    let stored_templates = crate::api::admin::ui_templates::StoredTemplates::new(
        control.workflow.clone(),
        control.store.clone(),
        cluster.clone(),
        templates.clone(),
    );
    let graphql = crate::api::graphql::SkyWalkingQuery::new(query.clone(), templates, ttl(&settings.retention))?
        .with_template_store(Arc::new(stored_templates));
    Ok(Arc::new(AdminState {
        node_id: node_id.clone(),
        workflow: control.workflow.clone(),
        store: control.store.clone(),
        runtime: control.runtime.clone(),
        bundled: control.bundled.clone(),
        scanner: control.scanner.clone(),
        admin_token: std::sync::RwLock::new(settings.admin_token.clone()),
        ready: AtomicBool::new(false),
        workers,
        config,
        cluster: cluster.clone(),
        list_cache: std::sync::Mutex::new(None),
        agents: agents.clone(),
        telemetry: telemetry.clone(),
        dispatcher: dispatcher.clone(),
        scrape: scrape.clone(),
        query,
        graphql: Arc::new(graphql),
        ui_dir: settings.ui_dir.clone(),
    }))
}

/// The dashboards of `ui.templates_dir`; none (with a warning) when it is absent or unreadable,
/// since a node serves its data without them.
fn ui_templates(settings: &NodeSettings) -> crate::api::graphql::templates::TemplateSet {
    let Some(dir) = &settings.ui_templates_dir else { return Default::default() };
    match crate::api::graphql::templates::TemplateSet::load(dir) {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "ui templates not loaded; /graphql serves no dashboards");
            Default::default()
        }
    }
}

/// Retention in whole days (rounded up), as `getMetricsTTL` / `getRecordsTTL` report it.
fn ttl(retention: &crate::data::metrics::cells::Retention) -> crate::api::graphql::Ttl {
    let days = |d: std::time::Duration| d.as_secs().div_ceil(86_400) as i64;
    crate::api::graphql::Ttl {
        minute_days: days(retention.minute),
        hour_days: days(retention.hour),
        day_days: days(retention.day),
        log_days: days(retention.logs),
        alarm_days: days(retention.alarms),
    }
}
