//! `hotrule serve`: the flags of a node (each one a config key override), and running it. Loads
//! the configuration (exit 2 when it is refused), installs the log subscriber with a filter the
//! node can change live, opens the management storage, binds the admin and agent listeners (and
//! the cluster bus, for a clustered node), starts the node and waits for SIGINT or SIGTERM to
//! shut it down. What a node is and how it starts is `crate::node`'s; this file only gathers its
//! inputs from the command line and the process.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use super::SourceArgs;
use crate::config::{self, ConfigSources};
use crate::node::{ConfigRuntime, Listeners, LogControl, NodeError, NodeSettings, RunningNode};

/// What keeps a node from starting once its configuration loaded (exit 1).
#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    AdminListen { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("cannot listen for agents on {addr}: {source}")]
    DataListen { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("cannot listen for SkyWalking's gRPC agents on {addr} (ingest.grpc_listen; set it to another address, or off): {source}")]
    GrpcListen { addr: std::net::SocketAddr, source: std::io::Error },
}

#[derive(Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    sources: SourceArgs,
    /// Directory of the node's management storage (node.data_dir; default ./hotrule-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Admin API listen address (admin.listen; default 127.0.0.1:17128).
    #[arg(long)]
    admin_listen: Option<String>,
    /// Agent config server (data) listen address (agents.data_listen; default: the admin host,
    /// port 12800).
    #[arg(long)]
    data_listen: Option<String>,
    /// SkyWalking's agents' gRPC port (ingest.grpc_listen; default 127.0.0.1:11800, the agents'
    /// default collector port; `off`: gRPC only on the data listener).
    #[arg(long)]
    grpc_listen: Option<String>,
    /// Bundled rules: <rules-dir>/<catalog>/<name>.yaml (rules.dir; default ./config/rules).
    #[arg(long)]
    rules_dir: Option<PathBuf>,
    /// A built SkyWalking UI (booster-ui's dist/) to serve on the admin port, beside /graphql
    /// (ui.dir).
    #[arg(long)]
    ui_dir: Option<PathBuf>,
    /// Seconds between periodic scans (rules.scan_interval; default 30).
    #[arg(long)]
    scan_interval: Option<u64>,
    /// Seconds a PEER suspension may last, with an unmoved entry, before the scan self-heals it
    /// (rules.self_heal_threshold; default 60).
    #[arg(long)]
    self_heal_threshold: Option<u64>,
    /// Bearer token required on every admin route except /healthz (admin.token). Prefer
    /// --admin-token-file or HOTRULE_ADMIN_TOKEN: a command line is readable in /proc.
    #[arg(long, env = "HOTRULE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// File holding the bearer token (admin.token_file); keeps the token out of the command
    /// line, which any local user can read in /proc.
    #[arg(long, env = "HOTRULE_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// Allow a non-loopback admin listener without a token (admin.insecure).
    #[arg(long)]
    insecure_admin: bool,
    /// This node's id (node.id; default: the admin address host:port).
    #[arg(long)]
    node_id: Option<String>,
    /// Log filter, e.g. info or hotrule=debug (log.level).
    #[arg(long, env = "HOTRULE_LOG")]
    log_level: Option<String>,
    /// UDP gossip address; makes this node part of a cluster (cluster.gossip_listen).
    #[arg(long)]
    gossip_listen: Option<String>,
    /// Cluster bus address (cluster.bus_listen; default: gossip port + 1).
    #[arg(long)]
    bus_listen: Option<String>,
    /// The host (IP) peers and operators reach this node at (cluster.advertise_host).
    #[arg(long)]
    advertise_host: Option<String>,
    /// A peer's gossip address host:port; repeatable (cluster.seeds).
    #[arg(long = "seed")]
    seeds: Vec<String>,
    /// Nodes only gossip within the same cluster id (cluster.id; default hotrule).
    #[arg(long)]
    cluster_id: Option<String>,
    /// File holding the shared bus secret (cluster.secret_file).
    #[arg(long)]
    cluster_secret_file: Option<PathBuf>,
    /// The shared bus secret (cluster.secret).
    #[arg(long = "cluster-secret", env = "HOTRULE_CLUSTER_SECRET", hide_env_values = true, hide = true)]
    cluster_secret: Option<String>,
    /// Run a multi-node cluster without bus authentication (cluster.insecure_bus).
    #[arg(long)]
    insecure_bus: bool,
    /// Peers that must confirm holding a commit before the main answers (cluster.commit_replicas).
    #[arg(long)]
    commit_replicas: Option<usize>,
}

impl ServeArgs {
    /// The flags given explicitly, as config key overrides (flags override files).
    fn sources(&self) -> ConfigSources {
        let mut overrides: Vec<(String, String)> = Vec::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                overrides.push((key.to_string(), value));
            }
        };
        put("node.data_dir", self.data_dir.as_ref().map(|p| p.display().to_string()));
        put("admin.listen", self.admin_listen.clone());
        put("agents.data_listen", self.data_listen.clone());
        put("ingest.grpc_listen", self.grpc_listen.clone());
        put("rules.dir", self.rules_dir.as_ref().map(|p| p.display().to_string()));
        put("ui.dir", self.ui_dir.as_ref().map(|p| p.display().to_string()));
        put("rules.scan_interval", self.scan_interval.map(|s| format!("{s}s")));
        put("rules.self_heal_threshold", self.self_heal_threshold.map(|s| format!("{s}s")));
        put("admin.token", self.admin_token.clone().filter(|t| !t.is_empty()));
        put("admin.token_file", self.admin_token_file.as_ref().map(|p| p.display().to_string()));
        put("admin.insecure", self.insecure_admin.then(|| "true".to_string()));
        put("node.id", self.node_id.clone());
        put("log.level", self.log_level.clone());
        put("cluster.gossip_listen", self.gossip_listen.clone());
        put("cluster.bus_listen", self.bus_listen.clone());
        put("cluster.advertise_host", self.advertise_host.clone());
        if !self.seeds.is_empty() {
            put("cluster.seeds", Some(format!("[{}]", self.seeds.join(", "))));
        }
        put("cluster.id", self.cluster_id.clone());
        put("cluster.secret_file", self.cluster_secret_file.as_ref().map(|p| p.display().to_string()));
        put("cluster.secret", self.cluster_secret.clone().filter(|s| !s.is_empty()));
        put("cluster.insecure_bus", self.insecure_bus.then(|| "true".to_string()));
        put("cluster.commit_replicas", self.commit_replicas.map(|n| n.to_string()));
        ConfigSources { uris: self.sources.config.clone(), sets: self.sources.set.clone(), overrides }
    }
}

/// Runs a node until SIGINT or SIGTERM: exit 2 when the configuration is refused, 1 when the
/// node cannot start.
pub(super) async fn run(args: ServeArgs) -> ExitCode {
    let sources = args.sources();
    let env: Arc<dyn hotrule_confmap::Env> = Arc::new(hotrule_confmap::ProcessEnv);
    let loaded = match config::load(&sources, env.clone()) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("hotrule: refusing to start: {e}");
            return ExitCode::from(2);
        }
    };
    let log_control = init_tracing(&loaded.config.log_level);
    let _failpoints = failpoint_scenario();
    for warning in &loaded.warnings {
        tracing::warn!(%warning, "configuration");
    }
    let node_config = loaded.config.clone();
    let kv = match crate::node::open_storage(&node_config.data_dir) {
        Ok(kv) => kv,
        Err(e) => return failed(e),
    };
    let listener = match tokio::net::TcpListener::bind(node_config.admin_listen).await {
        Ok(l) => l,
        Err(source) => return failed(ServeError::AdminListen { addr: node_config.admin_listen, source }),
    };
    let data_listener = match tokio::net::TcpListener::bind(node_config.agents.data_listen).await {
        Ok(l) => l,
        Err(source) => return failed(ServeError::DataListen { addr: node_config.agents.data_listen, source }),
    };
    let grpc_listener = match node_config.ingest.grpc.listen {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => Some(l),
            Err(source) => return failed(ServeError::GrpcListen { addr, source }),
        },
    };
    let runtime = ConfigRuntime {
        sources,
        env,
        state: Arc::new(config::ConfigState::new(loaded)),
        log_control: Some(log_control),
    };
    let settings = NodeSettings::from_config(&node_config, runtime);
    let listeners = Listeners { admin: listener, data: Some(data_listener), grpc: grpc_listener };
    let node = match start_node(settings, kv, listeners, &node_config).await {
        Ok(node) => node,
        Err(e) => return failed(e),
    };
    println!("hotrule admin API on http://{}", node.admin_addr);
    if let Some(data) = node.data_addr {
        let scheme = if node_config.agents.tls.is_some() { "https" } else { "http" };
        println!("hotrule agent config server on {scheme}://{data}");
    }
    if let Some(grpc) = node.grpc_addr {
        let tls = if node_config.agents.tls.is_some() { " (TLS)" } else { "" };
        println!("hotrule SkyWalking agent gRPC on {grpc}{tls}");
    }
    wait_for_signal().await;
    tracing::info!("shutting down");
    node.shutdown().await;
    ExitCode::SUCCESS
}

/// The node could not start: the reason printed, exit 1.
fn failed(error: impl std::fmt::Display) -> ExitCode {
    eprintln!("hotrule: {error}");
    ExitCode::FAILURE
}

/// Installs the log subscriber with a reloadable filter; returns the control for live changes.
fn init_tracing(filter: &str) -> LogControl {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, reload};
    let initial = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(initial);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_target(false).with_ansi(ansi).with_writer(std::io::stderr);
    let _ = tracing_subscriber::registry().with(layer).with(fmt).try_init();
    Arc::new(move |level: &str| {
        let refused = |reason: String| config::reload::LiveError::LogLevel { level: level.to_string(), reason };
        let filter = EnvFilter::try_new(level).map_err(|e| refused(e.to_string()))?;
        handle.reload(filter).map_err(|e| refused(e.to_string()))
    })
}

/// Sets up failpoints from the `FAILPOINTS` environment variable (failpoints builds only).
fn failpoint_scenario() -> Option<fail::FailScenario<'static>> {
    #[cfg(feature = "failpoints")]
    {
        Some(fail::FailScenario::setup())
    }
    #[cfg(not(feature = "failpoints"))]
    {
        None
    }
}

/// Starts the node, alone or (with a `cluster` section) wired to its peers.
async fn start_node(
    settings: NodeSettings,
    kv: Arc<dyn crate::store::kv::KvEngine>,
    listeners: Listeners,
    config: &config::NodeConfig,
) -> Result<RunningNode, NodeError> {
    let wiring = match &config.cluster {
        Some(cluster) => Some(crate::node::cluster_wiring(cluster, config).await?),
        None => None,
    };
    RunningNode::start_with_listeners(settings, kv, listeners, wiring).await
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = ctrl_c.await;
}
