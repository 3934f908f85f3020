//! The composition root: builds every component, boots, spawns the workers and the admin
//! server, and tears them down in reverse order. It wires; it decides nothing.
//!
//! The admin listener is bound by the caller (port 0 in tests) and is served only after boot
//! has finished its synchronous scan, so no write can race the boot workflow. The data listener
//! (the agent config server, see `agent`) is optional and bound by the caller the same way.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRegistry, AgentService, StoreAgentState, StoreConfigSource};
use crate::bundled::Bundled;
use crate::cluster::{Fact, Membership};
use crate::replication::handler::NodeBusHandler;
use crate::replication::peers::ClusterPeers;
use crate::replication::sync::Syncer;
use crate::replication::Cluster;
use crate::config::reload::{LiveSettings, Reloader};
use crate::config::{ConfigSources, ConfigState, NodeConfig};
use crate::clock::RevisionClock;
use crate::http::{self, AdminState};
use crate::ids::NodeId;
use crate::runtime::Runtime;
use crate::runtime::locks::FileLocks;
use crate::scan::{ScanReport, ScanSettings, Scanner, boot};
use crate::store::Store;
use crate::store::kv::KvEngine;
use crate::workflow::{NoPeers, Peers, Workflow};

/// Sets the log filter of the running process (live log-level changes).
pub type LogControl = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// A node's configuration machinery: where it was loaded from, and its state for `GET /config`.
#[derive(Clone)]
pub struct ConfigRuntime {
    pub sources: ConfigSources,
    pub env: Arc<dyn hotrule_confmap::Env>,
    pub state: Arc<ConfigState>,
    pub log_control: Option<LogControl>,
}

/// Validated settings for one node.
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
    pub agents: crate::agent::AgentServiceSettings,
    /// How often agent state is flushed to storage.
    pub agent_flush_interval: std::time::Duration,
    /// TLS on the data listener: certificate and key files (re-read when they change).
    pub agent_tls: Option<crate::tls::TlsFiles>,
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
            agents: crate::agent::AgentServiceSettings::default(),
            agent_flush_interval: std::time::Duration::from_millis(500),
            agent_tls: None,
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
            agent_flush_interval: crate::agent::maintenance::default_flush_interval(),
            agent_tls: config.agents.tls.clone(),
        }
    }
}

/// Applies the live settings of a reloaded configuration to a running node.
struct NodeLive {
    scanner: Arc<Scanner>,
    state: Arc<AdminState>,
    log_control: Option<LogControl>,
}

impl LiveSettings for NodeLive {
    fn apply(&self, config: &NodeConfig) -> Result<(), String> {
        if let Some(control) = &self.log_control {
            control(&config.log_level)?;
        }
        self.scanner.update_settings(ScanSettings {
            interval: config.scan_interval,
            self_heal_after: config.self_heal_threshold,
            tombstone_retention: config.tombstone_retention,
        });
        self.state.set_admin_token(config.admin_token.clone());
        self.state.agents.set_agent_token(config.agents.service.agent_token.clone());
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("opening management storage: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("reading bundled rules: {0}")]
    Bundled(#[from] crate::bundled::BundledError),
    #[error("listener: {0}")]
    Listener(std::io::Error),
    #[error("agent state: {0}")]
    AgentState(#[from] crate::agent::registry::RegistryError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error("cluster membership: {0}")]
    Cluster(crate::cluster::ClusterError),
    #[error("agent data listener TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// The agent data listener, plain or TLS.
enum DataListener {
    Plain(TcpListener),
    Tls(crate::tls::TlsListener),
}

/// Serves `app` on `listener` until `stop` is cancelled.
fn spawn_server<L>(listener: L, app: axum::Router, stop: CancellationToken, what: &'static str) -> JoinHandle<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    tokio::spawn(async move {
        let serving = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned());
        if let Err(e) = serving.await {
            tracing::error!(error = %e, server = what, "server stopped");
        }
    })
}

/// How a clustered node reaches its peers.
pub struct ClusterWiring {
    pub membership: crate::cluster::MembershipSettings,
    pub gossip: crate::cluster::GossipTransport,
    pub bus: BusWiring,
    pub replication: crate::replication::ReplicationSettings,
    /// The admin address peers and operators reach this node at (a gossip fact).
    pub admin_advertise: String,
}

/// The cluster bus of a node: real HTTP on its own listener, or the in-memory twin.
pub enum BusWiring {
    Http { listener: TcpListener, advertise: String, auth: crate::bus::BusAuth },
    Memory { network: crate::bus::MemNetwork },
}

/// The listeners a node serves on, bound by the caller (port 0 in tests).
pub struct Listeners {
    pub admin: TcpListener,
    /// The agent config server (`agents.data_listen`); none: agents are not served.
    pub data: Option<TcpListener>,
}

/// A running node. Drop order does not matter; call [`RunningNode::shutdown`] to stop cleanly.
pub struct RunningNode {
    pub admin_addr: SocketAddr,
    /// Where agents are served, when a data listener was given.
    pub data_addr: Option<SocketAddr>,
    pub state: Arc<AdminState>,
    pub boot_report: ScanReport,
    shutdown: CancellationToken,
    server: JoinHandle<()>,
    data_server: Option<JoinHandle<()>>,
    agent_task: JoinHandle<()>,
    scanner_task: JoinHandle<()>,
    reloader_task: Option<JoinHandle<()>>,
    cluster_tasks: Vec<JoinHandle<()>>,
}

impl RunningNode {
    /// Builds and boots a node on `kv`, then serves the admin API on `listener`.
    pub async fn start(settings: NodeSettings, kv: Arc<dyn KvEngine>, listener: TcpListener) -> Result<RunningNode, NodeError> {
        RunningNode::start_with_peers(settings, kv, listener, Arc::new(NoPeers)).await
    }

    /// Like [`RunningNode::start`], with the given view of the other nodes.
    pub async fn start_with_peers(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listener: TcpListener,
        peers: Arc<dyn Peers>,
    ) -> Result<RunningNode, NodeError> {
        let listeners = Listeners { admin: listener, data: None };
        RunningNode::start_full(settings, kv, listeners, Some(peers), None).await
    }

    /// A node on the given listeners, alone (`wiring` none) or in a cluster.
    pub async fn start_with_listeners(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        RunningNode::start_full(settings, kv, listeners, None, wiring).await
    }

    /// A node in a cluster: gossip membership, the bus, replication and forwarding.
    pub async fn start_clustered(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listener: TcpListener,
        wiring: ClusterWiring,
    ) -> Result<RunningNode, NodeError> {
        let listeners = Listeners { admin: listener, data: None };
        RunningNode::start_full(settings, kv, listeners, None, Some(wiring)).await
    }

    async fn start_full(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        peers_override: Option<Arc<dyn Peers>>,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        let Listeners { admin: listener, data: data_listener } = listeners;
        let admin_addr = listener.local_addr().map_err(NodeError::Listener)?;
        let data_addr = data_listener.as_ref().map(|l| l.local_addr()).transpose().map_err(NodeError::Listener)?;
        // The data listener, made TLS here, before anything is spawned that an error would leave
        // running.
        let data_listener = match (data_listener, &settings.agent_tls) {
            (None, _) => None,
            (Some(tcp), None) => Some(DataListener::Plain(tcp)),
            (Some(tcp), Some(files)) => {
                let config = crate::tls::server_config(files, crate::tls::DEFAULT_RECHECK)?;
                Some(DataListener::Tls(crate::tls::TlsListener::new(tcp, config).map_err(NodeError::Listener)?))
            }
        };
        let node_id = NodeId(settings.node_id.clone().unwrap_or_else(|| match &wiring {
            Some(w) => w.admin_advertise.clone(),
            None => admin_addr.to_string(),
        }));

        // Membership and the bus first: the workflow's peers need them.
        let mut bus_server = None;
        let mut memory_network: Option<crate::bus::MemNetwork> = None;
        let cluster = match wiring {
            None => None,
            Some(wiring) => {
                let (bus, drop_switch, bus_advertise, bus_gate): (Arc<dyn crate::bus::BusClient>, _, String, _) = match wiring.bus {
                    BusWiring::Http { listener, advertise, auth } => {
                        let switch = crate::bus::DropSwitch::new();
                        let gate = crate::bus::BusGate::new(auth.clone());
                        let client = crate::bus::HttpBusClient::with_drop_switch(auth, switch.clone())
                            .with_counters(gate.counters().clone());
                        bus_server = Some((listener, gate.clone()));
                        (Arc::new(client), Some(switch), advertise, gate)
                    }
                    BusWiring::Memory { network } => {
                        let client = network.client(node_id.clone());
                        let switch = client.drop_switch().clone();
                        let gate = crate::bus::BusGate::new(network.auth().clone());
                        bus_server = None;
                        memory_network = Some(network);
                        (Arc::new(client), Some(switch), node_id.0.clone(), gate)
                    }
                };
                let mut membership_settings = wiring.membership;
                membership_settings.node_id = node_id.clone();
                membership_settings.initial_facts.push((Fact::AdminAddr, wiring.admin_advertise.clone()));
                membership_settings.initial_facts.push((Fact::BusAddr, bus_advertise));
                let membership = Membership::start(membership_settings, &wiring.gossip).await.map_err(NodeError::Cluster)?;
                Some(Arc::new(Cluster { membership: Arc::new(membership), bus, drop_switch, bus_gate, settings: wiring.replication }))
            }
        };
        let peers: Arc<dyn Peers> = match (peers_override, &cluster) {
            (Some(peers), _) => peers,
            (None, Some(cluster)) => Arc::new(ClusterPeers::new(cluster.clone())),
            (None, None) => Arc::new(NoPeers),
        };

        // Build.
        let store = Arc::new(Store::open(kv)?);
        let bundled = Arc::new(match &settings.rules_dir {
            Some(dir) => {
                let (bundled, warnings) = Bundled::load(dir)?;
                for warning in warnings {
                    tracing::warn!(%warning, "bundled rule skipped");
                }
                tracing::info!(dir = %dir.display(), files = bundled.len(), "bundled rules read");
                bundled
            }
            None => Bundled::empty(),
        });
        let runtime = Arc::new(Runtime::new());
        let locks = Arc::new(FileLocks::default());
        let clock = Arc::new(RevisionClock::new(node_id.clone()));
        let scanner = Arc::new(Scanner::new(store.clone(), runtime.clone(), bundled.clone(), locks.clone(), settings.scan.clone()));
        let workflow = Arc::new(Workflow::new(
            store.clone(),
            runtime.clone(),
            bundled.clone(),
            clock.clone(),
            peers,
            locks.clone(),
        )
        .with_lock_timeout(settings.lock_timeout));
        if let Some(cluster) = &cluster {
            let membership = cluster.membership.clone();
            scanner.set_main_check(Arc::new(move || membership.is_main()));
        }
        let config_state = match &settings.config {
            Some(runtime) => runtime.state.clone(),
            None => Arc::new(ConfigState::new(crate::config::load(
                &ConfigSources::default(),
                Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new())),
            )?)),
        };
        let agent_registry = Arc::new(AgentRegistry::load(
            Arc::new(StoreAgentState::new(store.clone())),
            settings.agents.max_agents,
        )?);
        // A clustered node serves agents configs only once its state is confirmed against the
        // cluster; a lone node is its own source of truth.
        let (catch_up, caught_up) = match &cluster {
            Some(cluster) => {
                let (catch_up, caught_up) = crate::replication::sync::CatchUp::new(cluster.settings.alone_after);
                (Some(catch_up), caught_up)
            }
            None => (None, tokio::sync::watch::channel(true).1),
        };
        let agents = Arc::new(
            AgentService::new(settings.agents.clone(), Arc::new(StoreConfigSource::new(store.clone())), agent_registry)
                .with_catch_up(caught_up),
        );
        let state = Arc::new(AdminState {
            node_id: node_id.clone(),
            workflow,
            store: store.clone(),
            runtime,
            bundled,
            scanner: scanner.clone(),
            admin_token: std::sync::RwLock::new(settings.admin_token.clone()),
            ready: AtomicBool::new(false),
            config: config_state,
            cluster: cluster.clone(),
            list_cache: std::sync::Mutex::new(None),
            agents: agents.clone(),
        });

        // Boot: one synchronous scan before the admin port serves anything.
        let boot_report = boot::boot(&scanner, &store, &clock).await;
        tracing::info!(
            node = %node_id,
            actions = boot_report.actions.len(),
            failed = boot_report.failed.len(),
            "boot finished"
        );
        state.set_ready(true);

        // Spawn workers, then the servers.
        let shutdown = CancellationToken::new();
        let mut cluster_tasks = Vec::new();
        if let (Some(cluster), Some(catch_up)) = (&cluster, catch_up) {
            let handler: Arc<dyn crate::bus::BusHandler> = Arc::new(NodeBusHandler {
                cluster: cluster.clone(),
                workflow: state.workflow.clone(),
                store: store.clone(),
                runtime: state.runtime.clone(),
                locks: locks.clone(),
                scanner: scanner.clone(),
                render: Arc::new(|outcome, catalog, name| {
                    (http::status_code(outcome.status).as_u16(), http::outcome_body(outcome, catalog.as_str(), name))
                }),
                // Weak: the bus (and the in-memory network) must not keep the node's state alive.
                views: {
                    let state = Arc::downgrade(&state);
                    Arc::new(move |what| match state.upgrade() {
                        Some(state) => http::node_view(&state, what),
                        None => b"null".to_vec(),
                    })
                },
            });
            match (bus_server.take(), &memory_network) {
                (Some((listener, gate)), _) => {
                    let router = crate::bus::router_with_gate(handler, gate);
                    let stop = shutdown.clone();
                    cluster_tasks.push(tokio::spawn(async move {
                        if let Err(e) = crate::bus::serve(listener, router, stop.cancelled_owned()).await {
                            tracing::error!(error = %e, "cluster bus stopped");
                        }
                    }));
                }
                (None, Some(network)) => network.register_with_gate(node_id.clone(), handler, cluster.bus_gate.clone()),
                (None, None) => {}
            }
            let syncer = Arc::new(Syncer {
                cluster: cluster.clone(),
                store: store.clone(),
                workflow: state.workflow.clone(),
                scanner: scanner.clone(),
                catch_up,
            });
            cluster_tasks.push(tokio::spawn(syncer.run(shutdown.clone())));
            cluster_tasks.push(tokio::spawn(crate::replication::forward::run_probe(cluster.clone(), shutdown.clone())));
            if let Err(e) = cluster.membership.set_ready(true).await {
                tracing::warn!(error = %e, "cannot publish readiness");
            }
        }
        let scanner_task = tokio::spawn(scanner.clone().run(shutdown.clone()));
        let agent_task = tokio::spawn(crate::agent::maintenance::run(
            agents.clone(),
            settings.agent_flush_interval,
            shutdown.clone(),
        ));
        let reloader_task = settings.config.as_ref().map(|runtime| {
            let live = Arc::new(NodeLive { scanner: scanner.clone(), state: state.clone(), log_control: runtime.log_control.clone() });
            let reloader = Arc::new(Reloader::new(runtime.sources.clone(), runtime.env.clone(), runtime.state.clone(), live));
            tokio::spawn(reloader.run(shutdown.clone()))
        });
        let server = spawn_server(listener, http::router(state.clone()), shutdown.clone(), "admin");
        let data_server = data_listener.map(|listener| {
            let app = crate::agent::router(agents.clone());
            match listener {
                DataListener::Plain(tcp) => spawn_server(tcp, app, shutdown.clone(), "agent data"),
                DataListener::Tls(tls) => spawn_server(tls, app, shutdown.clone(), "agent data"),
            }
        });
        tracing::info!(node = %node_id, admin = %admin_addr, data = ?data_addr, data_tls = settings.agent_tls.is_some(), "serving");
        Ok(RunningNode {
            admin_addr,
            data_addr,
            state,
            boot_report,
            shutdown,
            server,
            data_server,
            agent_task,
            scanner_task,
            reloader_task,
            cluster_tasks,
        })
    }

    /// Waits until the node stops (it only stops through `shutdown`).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops the server, then the workers (reverse of start).
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.server.await;
        if let Some(data_server) = self.data_server {
            let _ = data_server.await;
        }
        for task in self.cluster_tasks {
            let _ = task.await;
        }
        if let Some(task) = self.reloader_task {
            let _ = task.await;
        }
        let _ = self.scanner_task.await;
        let _ = self.agent_task.await;
        // Gossip stops here whoever still holds the membership, so the node's gossip address
        // is free for a restart in the same process.
        if let Some(cluster) = &self.state.cluster
            && let Err(e) = cluster.membership.shutdown().await
        {
            tracing::warn!(error = %e, "stopping gossip");
        }
    }
}
