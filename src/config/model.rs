//! The node's configuration as read (`RawConfig`, every field with a named default) and as
//! validated (`NodeConfig`). Nothing downstream sees a `RawConfig`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::base::duration::DurationSetting;

fn default_data_dir() -> PathBuf {
    PathBuf::from("./hotrule-data")
}
fn default_admin_listen() -> String {
    "127.0.0.1:17128".into()
}
fn default_rules_dir() -> PathBuf {
    PathBuf::from("./config/rules")
}
fn default_scan_interval() -> DurationSetting {
    DurationSetting(Duration::from_secs(30))
}
fn default_self_heal_threshold() -> DurationSetting {
    DurationSetting(Duration::from_secs(60))
}
fn default_lock_timeout() -> DurationSetting {
    DurationSetting(Duration::from_secs(35))
}
fn default_tombstone_retention() -> DurationSetting {
    DurationSetting(Duration::from_secs(24 * 3600))
}
fn default_history_max_revisions() -> usize {
    crate::control::history::retention::DEFAULT_MAX_REVISIONS
}
fn default_history_max_age() -> DurationSetting {
    DurationSetting(crate::control::history::retention::DEFAULT_MAX_AGE)
}
fn default_log_level() -> String {
    "info".into()
}
fn default_watch() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
}

impl Default for RawNode {
    fn default() -> Self {
        RawNode { id: None, data_dir: default_data_dir() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    #[serde(default = "default_admin_listen")]
    pub listen: String,
    #[serde(default)]
    pub token: Option<String>,
    /// A file holding the bearer token (kept out of the command line and `/proc`).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    #[serde(default)]
    pub insecure: bool,
}

impl Default for RawAdmin {
    fn default() -> Self {
        RawAdmin { listen: default_admin_listen(), token: None, token_file: None, insecure: false }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRules {
    #[serde(default = "default_rules_dir")]
    pub dir: PathBuf,
    #[serde(default = "default_scan_interval")]
    pub scan_interval: DurationSetting,
    #[serde(default = "default_self_heal_threshold")]
    pub self_heal_threshold: DurationSetting,
    #[serde(default = "default_lock_timeout")]
    pub lock_timeout: DurationSetting,
    #[serde(default = "default_tombstone_retention")]
    pub tombstone_retention: DurationSetting,
    /// Revisions of each entry history keeps (issue 26).
    #[serde(default = "default_history_max_revisions")]
    pub history_max_revisions: usize,
    /// Age after which a history revision is compacted (the current one is kept).
    #[serde(default = "default_history_max_age")]
    pub history_max_age: DurationSetting,
}

impl Default for RawRules {
    fn default() -> Self {
        RawRules {
            dir: default_rules_dir(),
            scan_interval: default_scan_interval(),
            self_heal_threshold: default_self_heal_threshold(),
            lock_timeout: default_lock_timeout(),
            tombstone_retention: default_tombstone_retention(),
            history_max_revisions: default_history_max_revisions(),
            history_max_age: default_history_max_age(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    #[serde(default = "default_log_level")]
    pub level: String,
}

impl Default for RawLog {
    fn default() -> Self {
        RawLog { level: default_log_level() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfigSection {
    /// Watch file sources and reload on change (SIGHUP always reloads).
    #[serde(default = "default_watch")]
    pub watch: bool,
}

impl Default for RawConfigSection {
    fn default() -> Self {
        RawConfigSection { watch: default_watch() }
    }
}

fn default_cluster_id() -> String {
    "hotrule".into()
}
fn default_gossip_interval() -> DurationSetting {
    DurationSetting(crate::cluster::gossip::membership::default_gossip_interval())
}
fn default_phi_threshold() -> f64 {
    8.0
}
fn default_suspect_phi_threshold() -> f64 {
    3.0
}
fn default_forward_wait() -> DurationSetting {
    DurationSetting(Duration::from_secs(5))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    /// UDP gossip address; setting it (or seeds) makes this node part of a cluster.
    #[serde(default)]
    pub gossip_listen: Option<String>,
    /// Cluster bus (node-to-node HTTP) address; default: gossip port + 1 on the same host.
    #[serde(default)]
    pub bus_listen: Option<String>,
    /// Host peers and operators reach this node at; default: the listen hosts.
    #[serde(default)]
    pub advertise_host: Option<String>,
    /// Other nodes' gossip addresses (host:port).
    #[serde(default)]
    pub seeds: Vec<String>,
    #[serde(default = "default_cluster_id")]
    pub id: String,
    /// A file holding the shared bus secret (or HOTRULE_CLUSTER_SECRET).
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// The shared bus secret itself (prefer secret_file or the environment).
    #[serde(default)]
    pub secret: Option<String>,
    /// Run a multi-node cluster without bus authentication.
    #[serde(default)]
    pub insecure_bus: bool,
    /// Peers that must confirm holding a commit before the main answers.
    #[serde(default)]
    pub commit_replicas: usize,
    #[serde(default = "default_gossip_interval")]
    pub gossip_interval: DurationSetting,
    /// Gossip's phi above which a silent node is dead (chitchat's failure detector).
    #[serde(default = "default_phi_threshold")]
    pub phi_threshold: f64,
    /// The lower phi above which a node whose bus connection is refused or reset is dead.
    #[serde(default = "default_suspect_phi_threshold")]
    pub suspect_phi_threshold: f64,
    /// How long a write waits for the next main during a failover before it fails.
    #[serde(default = "default_forward_wait")]
    pub forward_wait: DurationSetting,
}

impl Default for RawCluster {
    fn default() -> Self {
        RawCluster {
            gossip_listen: None,
            bus_listen: None,
            advertise_host: None,
            seeds: Vec::new(),
            id: default_cluster_id(),
            secret_file: None,
            secret: None,
            insecure_bus: false,
            commit_replicas: 0,
            gossip_interval: default_gossip_interval(),
            phi_threshold: default_phi_threshold(),
            suspect_phi_threshold: default_suspect_phi_threshold(),
            forward_wait: default_forward_wait(),
        }
    }
}

/// The agent data port; the host defaults to the admin listener's.
pub const DEFAULT_DATA_PORT: u16 = 12800;
fn default_detail_delivery() -> String {
    "inline".into()
}
fn default_agent_heartbeat_interval() -> DurationSetting {
    DurationSetting(Duration::from_secs(10))
}
fn default_agent_offline_after() -> DurationSetting {
    DurationSetting(Duration::from_secs(30))
}
fn default_agent_retention() -> DurationSetting {
    DurationSetting(Duration::from_secs(12 * 3600))
}

/// The agent config server (ConfigServer protocol v2 for iLogtail / LoongCollector).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgents {
    /// The data listener agents heartbeat (`config_server_list` points here). Default: the
    /// admin listener's host, port 12800 (127.0.0.1:12800 with the default admin.listen), so
    /// nodes sharing a machine on different hosts do not collide.
    #[serde(default)]
    pub data_listen: Option<String>,
    /// `inline` (details in the heartbeat answer) or `fetch` (agents fetch them).
    #[serde(default = "default_detail_delivery")]
    pub detail_delivery: String,
    /// Optional token agents (behind a proxy adding the header) must present.
    #[serde(default)]
    pub token: Option<String>,
    /// The agents' heartbeat interval (the agent's own default is 10s).
    #[serde(default = "default_agent_heartbeat_interval")]
    pub heartbeat_interval: DurationSetting,
    /// Silence after which an agent is shown offline.
    #[serde(default = "default_agent_offline_after")]
    pub offline_after: DurationSetting,
    /// Silence after which an agent is forgotten (removed from memory and storage).
    #[serde(default = "default_agent_retention")]
    pub retention: DurationSetting,
    /// Optional TLS on the data listener (the real 3.x agent speaks plain HTTP only).
    #[serde(default)]
    pub tls: RawTls,
}

/// A certificate and key, PEM files; both or neither.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

impl Default for RawAgents {
    fn default() -> Self {
        RawAgents {
            data_listen: None,
            detail_delivery: default_detail_delivery(),
            token: None,
            heartbeat_interval: default_agent_heartbeat_interval(),
            offline_after: default_agent_offline_after(),
            retention: default_agent_retention(),
            tls: RawTls::default(),
        }
    }
}

/// Validated agent config server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentsConfig {
    pub data_listen: std::net::SocketAddr,
    /// Present when the data listener speaks TLS.
    pub tls: Option<crate::base::tls::TlsFiles>,
    pub service: crate::api::agents::AgentServiceSettings,
}

fn default_header_read_timeout() -> DurationSetting {
    DurationSetting(crate::base::listen::default_header_read_timeout())
}
fn default_body_read_timeout() -> DurationSetting {
    DurationSetting(crate::base::listen::default_body_read_timeout())
}
fn default_idle_timeout() -> DurationSetting {
    DurationSetting(crate::base::listen::default_idle_timeout())
}

/// Timeouts and connection caps of the admin, bus and data listeners (see `docs/security.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// A request head must arrive within this time (also the longest wait between keep-alive
    /// requests).
    #[serde(default = "default_header_read_timeout")]
    pub header_read_timeout: DurationSetting,
    /// A request body must arrive within this time of its head.
    #[serde(default = "default_body_read_timeout")]
    pub body_read_timeout: DurationSetting,
    /// A keep-alive connection with no request in flight is closed after this time (at least
    /// `listen::MIN_IDLE_TIMEOUT`, at most `header_read_timeout`).
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout: DurationSetting,
    #[serde(default = "crate::base::listen::default_admin_connections")]
    pub admin_connections: usize,
    #[serde(default = "crate::base::listen::default_bus_connections")]
    pub bus_connections: usize,
    #[serde(default = "crate::base::listen::default_data_connections")]
    pub data_connections: usize,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            header_read_timeout: default_header_read_timeout(),
            body_read_timeout: default_body_read_timeout(),
            idle_timeout: default_idle_timeout(),
            admin_connections: crate::base::listen::default_admin_connections(),
            bus_connections: crate::base::listen::default_bus_connections(),
            data_connections: crate::base::listen::default_data_connections(),
        }
    }
}

/// The configuration tree as read, before validation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub node: RawNode,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub rules: RawRules,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub config: RawConfigSection,
    #[serde(default)]
    pub cluster: RawCluster,
    #[serde(default)]
    pub agents: RawAgents,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub ingest: crate::data::ingest::RawIngest,
    pub export: crate::data::export::RawExport,
    pub dispatch: crate::data::evaluation::RawDispatch,
    /// Metric storage (retention per granularity).
    #[serde(default)]
    pub storage: crate::data::metrics::cells::config::RawStorage,
    /// Rolling rule changes (the main's roll tick).
    #[serde(default)]
    pub rolling: crate::control::rolling::roller::RawRolling,
    /// Alarm rules (`alarm-settings.yml`) and their check schedule.
    #[serde(default)]
    pub alarms: crate::control::alarms::config::RawAlarms,
    /// SkyWalking's UI: the dashboards `/graphql` serves, and an optional UI to serve.
    #[serde(default)]
    pub ui: RawUi,
    /// PromQL and query reads: lookback, timeout, sample cap, subquery step, peer deadline.
    #[serde(default)]
    pub query: crate::api::query::RawQuery,
}

fn default_ui_templates_dir() -> PathBuf {
    PathBuf::from("./config/ui-templates")
}

/// `ui`: where the dashboards (`ui-initialized-templates` and `menu.yaml`) are, and a built
/// SkyWalking UI (booster-ui's `dist/`) to serve on the admin port beside `/graphql`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUi {
    #[serde(default = "default_ui_templates_dir")]
    pub templates_dir: PathBuf,
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

impl Default for RawUi {
    fn default() -> Self {
        RawUi { templates_dir: default_ui_templates_dir(), dir: None }
    }
}

/// The validated configuration of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    pub node_id: Option<String>,
    pub data_dir: PathBuf,
    pub admin_listen: std::net::SocketAddr,
    pub admin_token: Option<String>,
    pub insecure_admin: bool,
    pub rules_dir: PathBuf,
    pub scan_interval: Duration,
    pub self_heal_threshold: Duration,
    pub lock_timeout: Duration,
    pub tombstone_retention: Duration,
    /// Rule history retention (`rules.history_max_revisions`, `rules.history_max_age`).
    pub history: crate::control::history::retention::Retention,
    pub log_level: String,
    pub watch: bool,
    /// Present when this node is part of a cluster.
    pub cluster: Option<ClusterConfig>,
    pub agents: AgentsConfig,
    /// Timeouts and connection caps of the listeners.
    pub limits: crate::base::listen::ListenLimits,
    /// Receiver body limits and scrape jobs.
    pub ingest: crate::data::ingest::IngestConfig,
    /// Remote-write export of computed metrics; none: no export.
    pub export: Option<crate::data::export::RemoteWriteSettings>,
    /// OTLP/HTTP export of kept logs (`export.otlp_logs`); none: no log export.
    pub otlp_logs_export: Option<crate::data::export::otlp_logs::OtlpLogsSettings>,
    /// The data plane's dispatch queue, evaluation threads and drain bound.
    pub dispatch: crate::data::evaluation::DispatchSettings,
    /// Metric retention per granularity.
    pub retention: crate::data::metrics::cells::Retention,
    /// Rolling rule changes (the main's roll tick).
    pub rolling: crate::control::rolling::roller::RollerSettings,
    /// Where the alarm rules come from and how often they are checked.
    pub alarms: crate::control::alarms::config::AlarmsConfig,
    /// The dashboards dir (`ui.templates_dir`).
    pub ui_templates_dir: PathBuf,
    /// A built SkyWalking UI to serve (`ui.dir`); none: no UI.
    pub ui_dir: Option<PathBuf>,
    /// How queries are evaluated and bounded (`query`).
    pub query: crate::api::query::QuerySettings,
    /// The tree it came from (for printing, origins and diffs).
    pub raw: RawConfig,
}

/// Validated cluster settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    pub gossip_listen: std::net::SocketAddr,
    pub gossip_advertise: std::net::SocketAddr,
    pub bus_listen: std::net::SocketAddr,
    pub bus_advertise: String,
    pub admin_advertise: String,
    pub seeds: Vec<String>,
    pub id: String,
    /// None: an insecure bus (explicitly allowed).
    pub secret: Option<Vec<u8>>,
    pub commit_replicas: usize,
    pub gossip_interval: Duration,
    pub phi_threshold: f64,
    pub suspect_phi_threshold: f64,
    pub forward_wait: Duration,
}
