//! What an operator configures for one node ([`NodeSettings`], validated from a
//! [`NodeConfig`]), and the configuration machinery a node keeps for reloads ([`ConfigRuntime`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::base::listen::ListenLimits;
use crate::config::reload::LiveError;
use crate::config::{ConfigSources, ConfigState, NodeConfig};
use crate::control::scan::ScanSettings;

/// Sets the log filter of the running process (live log-level changes).
pub type LogControl = Arc<dyn Fn(&str) -> Result<(), LiveError> + Send + Sync>;

/// A node's configuration machinery: where it was loaded from, and its state for `GET /config`.
#[derive(Clone)]
pub struct ConfigRuntime {
    pub sources: ConfigSources,
    pub env: Arc<dyn hotrule_confmap::Env>,
    pub state: Arc<ConfigState>,
    pub log_control: Option<LogControl>,
}

/// Validated settings for one node: only what an operator configures (what a test replaces in
/// a node is in [`super::testing`]).
#[derive(Clone)]
pub struct NodeSettings {
    pub node_id: Option<String>,
    pub rules_dir: Option<PathBuf>,
    pub scan: ScanSettings,
    pub admin_token: Option<String>,
    /// How long a write waits for its file's lock before `update_in_progress`.
    pub lock_timeout: std::time::Duration,
    /// Present when the node runs from a loaded configuration (enables reload).
    pub config: Option<ConfigRuntime>,
    /// The agent config server's protocol settings.
    pub agents: crate::api::agents::AgentServiceSettings,
    /// TLS on the data listener: certificate and key files (re-read when they change).
    pub agent_tls: Option<crate::base::tls::TlsFiles>,
    /// Timeouts and connection caps of the admin, bus and data listeners.
    pub limits: ListenLimits,
    /// Receiver body limits and scrape jobs.
    pub ingest: crate::data::ingest::IngestConfig,
    /// Remote-write export of computed metrics (`export.remote_write`); none: no export.
    pub export: Option<crate::data::export::RemoteWriteSettings>,
    /// OTLP/HTTP export of kept logs (`export.otlp_logs`); none: no log export.
    pub otlp_logs_export: Option<crate::data::export::otlp_logs::OtlpLogsSettings>,
    /// The data plane's dispatch queue, evaluation threads and drain bound.
    pub dispatch: crate::data::evaluation::DispatchSettings,
    /// Metric retention per granularity.
    pub retention: crate::data::metrics::cells::Retention,
    /// Rule history retention (`rules.history_max_revisions`, `rules.history_max_age`).
    pub history: crate::control::history::retention::Retention,
    /// Rolling rule changes: the roll tick.
    pub rolling: crate::control::rolling::roller::RollerSettings,
    /// Alarm rules and their check schedule.
    pub alarms: crate::control::alarms::config::AlarmsConfig,
    /// The dashboards `/graphql` serves (`ui.templates_dir`); none: no dashboards.
    pub ui_templates_dir: Option<PathBuf>,
    /// A built SkyWalking UI served on the admin port (`ui.dir`).
    pub ui_dir: Option<PathBuf>,
    /// How queries are evaluated and bounded (`query`).
    pub query: crate::api::query::QuerySettings,
}

impl NodeSettings {
    /// Settings for tests: no bundled rules, a 1 s scan and a 2 s self-heal.
    pub fn for_test() -> NodeSettings {
        NodeSettings {
            node_id: None,
            rules_dir: None,
            scan: ScanSettings {
                interval: std::time::Duration::from_secs(1),
                self_heal_after: std::time::Duration::from_secs(2),
                ..ScanSettings::default()
            },
            admin_token: None,
            lock_timeout: std::time::Duration::from_millis(500),
            config: None,
            agents: crate::api::agents::AgentServiceSettings::default(),
            agent_tls: None,
            limits: ListenLimits::default(),
            ingest: crate::data::ingest::IngestConfig::default(),
            export: None,
            otlp_logs_export: None,
            dispatch: crate::data::evaluation::DispatchSettings::for_test(),
            retention: crate::data::metrics::cells::Retention::default(),
            history: crate::control::history::retention::Retention::default(),
            rolling: crate::control::rolling::roller::RollerSettings::for_test(),
            alarms: crate::control::alarms::config::AlarmsConfig::default(),
            ui_templates_dir: None,
            ui_dir: None,
            query: crate::api::query::QuerySettings::default(),
        }
    }

    /// The settings a validated configuration describes.
    pub fn from_config(config: &NodeConfig, runtime: ConfigRuntime) -> NodeSettings {
        let rules_dir = if config.rules_dir.is_dir() {
            Some(config.rules_dir.clone())
        } else {
            tracing::warn!(dir = %config.rules_dir.display(), "rules dir not found; starting without bundled rules");
            None
        };
        NodeSettings {
            node_id: config.node_id.clone(),
            rules_dir,
            scan: ScanSettings {
                interval: config.scan_interval,
                self_heal_after: config.self_heal_threshold,
                tombstone_retention: config.tombstone_retention,
            },
            admin_token: config.admin_token.clone(),
            lock_timeout: config.lock_timeout,
            config: Some(runtime),
            agents: config.agents.service.clone(),
            agent_tls: config.agents.tls.clone(),
            limits: config.limits.clone(),
            ingest: config.ingest.clone(),
            export: config.export.clone(),
            otlp_logs_export: config.otlp_logs_export.clone(),
            dispatch: config.dispatch.clone(),
            retention: config.retention,
            history: config.history,
            rolling: config.rolling.clone(),
            alarms: config.alarms.clone(),
            ui_templates_dir: if config.ui_templates_dir.is_dir() {
                Some(config.ui_templates_dir.clone())
            } else {
                tracing::warn!(dir = %config.ui_templates_dir.display(), "ui templates dir not found; /graphql serves no dashboards");
                None
            },
            ui_dir: config.ui_dir.clone(),
            query: config.query.clone(),
        }
    }
}
