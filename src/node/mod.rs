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

use crate::api::agents::{AgentRegistry, AgentService, StoreAgentState, StoreConfigSource};
use crate::control::bundled::Bundled;
use crate::cluster::gossip::{Fact, Membership};
use crate::cluster::replication::handler::NodeBusHandler;
use crate::cluster::replication::notices::NoticeReceiver;
use crate::cluster::replication::pulls::PullQueue;
use crate::cluster::replication::peers::ClusterPeers;
use crate::cluster::replication::sync::{SyncWorker, Syncer};
use crate::cluster::replication::Cluster;
use crate::api::agents::maintenance::MaintenanceWorker;
use crate::config::reload::{LiveError, LiveSettings, ReloadWorker, Reloader};
use crate::config::{ConfigSources, ConfigState, NodeConfig};
use crate::base::clock::RevisionClock;
use crate::api::admin::{self, AdminState};
use crate::base::ids::NodeId;
use crate::base::listen::{Limits, ListenLimits};
use crate::control::runtime::Runtime;
use crate::control::runtime::locks::FileLocks;
use crate::control::scan::{MainView, ScanReport, ScanSettings, ScanWorker, Scanner, boot};
use crate::data::metrics::cells::MetricStore;
use crate::data::metrics::cells::retention::RetentionWorker;
use crate::data::metrics::{MetricReader, MetricWriter};
use crate::store::Store;
use crate::store::kv::KvEngine;
use crate::base::self_metrics::Telemetry;
use crate::control::workflow::{NoPeers, Peers, Workflow};
use crate::base::worker::{JobWorker, Worker, WorkerRunner};

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
    pub agents: crate::api::agents::AgentServiceSettings,
    /// How often agent state is flushed to storage.
    pub agent_flush_interval: std::time::Duration,
    /// TLS on the data listener: certificate and key files (re-read when they change).
    pub agent_tls: Option<crate::base::tls::TlsFiles>,
    /// Timeouts and connection caps of the admin, bus and data listeners.
    pub limits: ListenLimits,
    /// Receiver body limits and scrape jobs.
    pub ingest: crate::data::ingest::IngestConfig,
    /// Where received samples go instead of the node's dispatcher (tests that record batches);
    /// none: the dispatcher.
    pub data_sink: Option<Arc<dyn crate::data::seam::BatchSink>>,
    /// Where received logs go instead of the node's default (tests that record log batches);
    /// none: the node's log dispatcher, when it has one (else the log routes answer 503).
    pub log_sink: Option<Arc<dyn crate::data::seam::LogSink>>,
    /// The node's own metrics (`GET /metrics`): one instance, handed to every component that
    /// counts (scan, bus, admin writes; dispatch, ingest, storage and export on the data plane).
    pub telemetry: Arc<Telemetry>,
    /// Remote-write export of computed metrics (`export.remote_write`); none: no export.
    pub export: Option<crate::data::export::RemoteWriteSettings>,
    /// OTLP/HTTP export of kept logs (`export.otlp_logs`); none: no log export.
    pub otlp_logs_export: Option<crate::data::export::otlp_logs::OtlpLogsSettings>,
    /// The data plane's dispatch queue, evaluation threads and drain bound.
    pub dispatch: crate::data::evaluation::DispatchSettings,
    /// The metric reader queries use instead of the node's metric store (tests); none: the
    /// node's store.
    pub metric_reader: Option<Arc<dyn crate::data::metrics::MetricReader>>,
    /// Metric retention per granularity.
    pub retention: crate::data::metrics::cells::Retention,
    /// Rolling rule changes: the roll tick.
    pub rolling: crate::control::rolling::roller::RollerSettings,
    /// Whether the main's roll worker advances rolls (always, from the configuration); tests of
    /// the control side that move a roll's index by hand turn it off.
    pub roll_worker: bool,
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
            agent_flush_interval: std::time::Duration::from_millis(500),
            agent_tls: None,
            limits: ListenLimits::default(),
            ingest: crate::data::ingest::IngestConfig::default(),
            data_sink: None,
            log_sink: None,
            telemetry: Arc::new(Telemetry::new()),
            export: None,
            otlp_logs_export: None,
            dispatch: crate::data::evaluation::DispatchSettings::for_test(),
            metric_reader: None,
            retention: crate::data::metrics::cells::Retention::default(),
            rolling: crate::control::rolling::roller::RollerSettings::for_test(),
            roll_worker: true,
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
            agent_flush_interval: crate::api::agents::maintenance::default_flush_interval(),
            agent_tls: config.agents.tls.clone(),
            limits: config.limits.clone(),
            ingest: config.ingest.clone(),
            data_sink: None,
            log_sink: None,
            telemetry: Arc::new(Telemetry::new()),
            export: config.export.clone(),
            otlp_logs_export: config.otlp_logs_export.clone(),
            dispatch: config.dispatch.clone(),
            metric_reader: None,
            retention: config.retention,
            rolling: config.rolling.clone(),
            roll_worker: true,
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
    fn apply(&self, config: &NodeConfig) -> Result<(), LiveError> {
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
    Bundled(#[from] crate::control::bundled::BundledError),
    #[error("listener: {0}")]
    Listener(std::io::Error),
    #[error("agent state: {0}")]
    AgentState(#[from] crate::api::agents::registry::RegistryError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error("cluster membership: {0}")]
    Cluster(crate::cluster::gossip::ClusterError),
    #[error("agent data listener TLS: {0}")]
    Tls(#[from] crate::base::tls::TlsError),
    #[error("remote-write export: {0}")]
    Export(#[from] crate::data::export::ExportError),
    #[error("dispatch: {0}")]
    Dispatch(#[from] crate::data::evaluation::DispatchError),
    #[error("opening metric storage: {0}")]
    MetricStore(#[from] crate::data::metrics::MetricStoreError),
    #[error("opening log storage: {0}")]
    LogStore(#[from] crate::data::logs::LogStoreError),
}

/// The agent data listener, plain or TLS.
enum DataListener {
    Plain(TcpListener),
    Tls(crate::base::tls::TlsListener),
}

/// Serves `app` on `listener` with `limits` until `stop` is cancelled.
fn spawn_server<L>(listener: L, app: axum::Router, limits: Limits, stop: CancellationToken, what: &'static str) -> JoinHandle<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    tokio::spawn(crate::base::listen::serve(listener, app, limits, stop, what))
}

/// How a clustered node reaches its peers.
pub struct ClusterWiring {
    pub membership: crate::cluster::gossip::MembershipSettings,
    pub gossip: crate::cluster::gossip::GossipTransport,
    pub bus: BusWiring,
    pub replication: crate::cluster::replication::ReplicationSettings,
    /// The admin address peers and operators reach this node at (a gossip fact).
    pub admin_advertise: String,
}

/// The cluster bus of a node: real HTTP on its own listener, or the in-memory twin.
pub enum BusWiring {
    Http { listener: TcpListener, advertise: String, auth: crate::cluster::bus::BusAuth },
    Memory { network: crate::cluster::bus::MemNetwork },
}

/// The listeners a node serves on, bound by the caller (port 0 in tests).
pub struct Listeners {
    pub admin: TcpListener,
    /// The agent config server (`agents.data_listen`); none: agents are not served.
    pub data: Option<TcpListener>,
}

/// How long [`RunningNode::shutdown`] waits for the workers before aborting them.
pub const WORKER_SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// The node's id: the configured one, else the address peers and operators reach it at (the
/// advertised admin address in a cluster, the bound admin address alone).
pub fn resolve_node_id(configured: Option<&str>, admin_advertise: &str) -> NodeId {
    NodeId(configured.map(str::to_string).unwrap_or_else(|| admin_advertise.to_string()))
}

/// A running node. Drop order does not matter; call [`RunningNode::shutdown`] to stop cleanly.
pub struct RunningNode {
    pub admin_addr: SocketAddr,
    /// Where agents are served, when a data listener was given.
    pub data_addr: Option<SocketAddr>,
    pub state: Arc<AdminState>,
    pub boot_report: ScanReport,
    /// The embedded metric store (the series key space of the node's database): dispatch writes
    /// it, queries and export read it ([`RunningNode::metric_writer`], [`RunningNode::metric_reader`]).
    pub metric_store: Arc<MetricStore>,
    /// The embedded log store (the `logs` key space): dispatch writes kept logs to it (a
    /// `LogWriter`), `/query/logs` reads it.
    pub log_store: Arc<crate::data::logs::records::LogStore>,
    /// The node's own metrics (`/metrics`).
    pub telemetry: Arc<Telemetry>,
    /// The OTLP log exporter (`export.otlp_logs`), a [`crate::data::logs::LogWriter`] for kept logs;
    /// none when log export is off.
    pub log_exporter: Option<Arc<crate::data::export::otlp_logs::OtlpLogExporter>>,
    shutdown: CancellationToken,
    /// Admin, agent data and bus servers, in start order.
    servers: Vec<(&'static str, JoinHandle<()>)>,
    workers: WorkerRunner,
}

/// The cluster side of a node: membership, the bus client, and what still has to be served.
struct ClusterParts {
    cluster: Arc<Cluster>,
    bus_server: Option<(TcpListener, crate::cluster::bus::BusGate)>,
    memory_network: Option<crate::cluster::bus::MemNetwork>,
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

    /// The script: listeners and identity, cluster, components, boot, workers, servers.
    async fn start_full(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        peers_override: Option<Arc<dyn Peers>>,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        // 1. Listeners and identity. The data listener is made TLS here, before anything is
        //    spawned that an error would leave running.
        let Listeners { admin: admin_listener, data: data_listener } = listeners;
        let admin_addr = admin_listener.local_addr().map_err(NodeError::Listener)?;
        let data_addr = data_listener.as_ref().map(|l| l.local_addr()).transpose().map_err(NodeError::Listener)?;
        let data_listener = data_listener_for(data_listener, &settings)?;
        let advertise = wiring.as_ref().map_or_else(|| admin_addr.to_string(), |w| w.admin_advertise.clone());
        let node_id = resolve_node_id(settings.node_id.as_deref(), &advertise);
        let shutdown = CancellationToken::new();
        let mut workers = WorkerRunner::new(shutdown.child_token());

        // 2. Membership and the bus: the workflow's peers need them.
        let cluster = match wiring {
            Some(wiring) => Some(connect_cluster(wiring, &node_id, &settings.telemetry).await?),
            None => None,
        };
        let (notice_worker, notices) = JobWorker::new("commit-notices");
        let peers: Arc<dyn Peers> = match (peers_override, &cluster) {
            (Some(peers), _) => peers,
            (None, Some(parts)) => Arc::new(ClusterPeers::new(parts.cluster.clone(), notices)),
            (None, None) => Arc::new(NoPeers),
        };

        // 3. Components, each from its own constructor. Metric series live in the same
        //    database as rule entries, in their own key space.
        let telemetry = settings.telemetry.clone();
        let metric_store = Arc::new(MetricStore::open(kv.series(), settings.retention, telemetry.clone())?);
        let log_store = Arc::new(crate::data::logs::records::LogStore::open(kv.logs(), settings.retention.logs, telemetry.clone())?);
        // Queries read the node's store unless a test hands them another reader.
        let metric_reader: Arc<dyn MetricReader> = settings.metric_reader.clone().unwrap_or_else(|| metric_store.clone());
        // Dispatch writes the store, then (when configured) the remote-write exporter.
        let metric_writer = crate::data::export::wire(
            settings.export.clone(),
            metric_store.clone(),
            metric_reader.clone(),
            telemetry.clone(),
            &mut workers,
        )?;
        // Kept logs also go to the OTLP log exporter when `export.otlp_logs` is set: one more
        // log writer for dispatch, its worker on the node's runner.
        let log_exporter =
            crate::data::export::otlp_logs::wire(settings.otlp_logs_export.clone(), telemetry.clone(), &mut workers)?;
        let store = Arc::new(Store::open(kv)?);
        let bundled = Arc::new(load_bundled(&settings)?);
        let runtime = Arc::new(Runtime::new());
        let locks = Arc::new(FileLocks::default());
        let clock = Arc::new(RevisionClock::new(node_id.clone()));
        let workflow = Arc::new(
            Workflow::new(store.clone(), runtime.clone(), bundled.clone(), clock.clone(), peers, locks.clone())
                .with_lock_timeout(settings.lock_timeout),
        );
        // The scan purges old tombstones through the one writer of entries.
        let scanner = Arc::new(Scanner::new(
            store.clone(),
            runtime.clone(),
            bundled.clone(),
            locks.clone(),
            settings.scan.clone(),
            workflow.clone(),
        )
        .with_telemetry(settings.telemetry.clone())
        .with_node(node_id.clone()));
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
            Some(parts) => {
                let (catch_up, caught_up) = crate::cluster::replication::sync::CatchUp::new(parts.cluster.settings.alone_after);
                (Some(catch_up), caught_up)
            }
            None => (None, tokio::sync::watch::channel(true).1),
        };
        let agents = Arc::new(
            AgentService::new(settings.agents.clone(), Arc::new(StoreConfigSource::new(store.clone())), agent_registry)
                .with_catch_up(caught_up),
        );
        // The data plane's dispatch: batches from receivers, evaluated against the loaded rules
        // under their gates, written to the metric writers (storage, exporter) it is given.
        let dispatcher = Arc::new(crate::data::evaluation::Dispatcher::new(
            settings.dispatch.clone(),
            runtime.clone(),
            Arc::new(crate::data::evaluation::NodeRegistry::new(store.clone(), runtime.clone())),
            settings.telemetry.clone(),
            vec![metric_writer],
        )?);
        let state = Arc::new(AdminState {
            node_id: node_id.clone(),
            workflow: workflow.clone(),
            store: store.clone(),
            runtime: runtime.clone(),
            bundled,
            scanner: scanner.clone(),
            admin_token: std::sync::RwLock::new(settings.admin_token.clone()),
            ready: AtomicBool::new(false),
            workers: workers.health(),
            config: config_state,
            cluster: cluster.as_ref().map(|parts| parts.cluster.clone()),
            list_cache: std::sync::Mutex::new(None),
            agents: agents.clone(),
            telemetry: settings.telemetry.clone(),
            dispatcher,
            query: Arc::new(crate::api::query::QueryService::new(
                node_id.clone(),
                Some(metric_reader.clone()),
                cluster.as_ref().map(|parts| parts.cluster.clone()),
                crate::api::query::QuerySettings::default(),
            )
            .with_logs(log_store.clone())),
        });

        let sink: Arc<dyn crate::data::seam::BatchSink> = match &settings.data_sink {
            Some(sink) => sink.clone(),
            None => state.dispatcher.clone(),
        };
        // Logs go to the dispatcher's LAL path unless a test hands the receivers another sink.
        let log_sink: Arc<dyn crate::data::seam::LogSink> = match &settings.log_sink {
            Some(sink) => sink.clone(),
            None => state.dispatcher.clone(),
        };
        // Kept logs are stored first, then go to the OTLP log exporter when one is configured.
        state.dispatcher.add_log_writer(log_store.clone());
        if let Some(exporter) = &log_exporter {
            state.dispatcher.add_log_writer(exporter.clone());
        }
        let ingest = crate::data::ingest::Ingest::with_logs(sink, Some(log_sink), settings.telemetry.clone(), settings.ingest.limits);

        // 4. Boot: one synchronous scan before the admin port serves anything.
        let boot_report = boot::boot(&scanner, &store, &clock).await;
        tracing::info!(node = %node_id, actions = boot_report.actions.len(), failed = boot_report.failed.len(), "boot finished");
        state.set_ready(true);

        // 5. Workers.
        let mut servers = Vec::new();
        workers.spawn(ScanWorker::new(
            scanner.clone(),
            cluster.as_ref().map(|parts| Box::new(ViewIsMain(parts.cluster.membership.view())) as Box<dyn MainView>),
        ));
        workers.spawn(MaintenanceWorker::new(agents.clone(), settings.agent_flush_interval));
        if !settings.ingest.scrape_jobs.is_empty() {
            workers.spawn(crate::data::ingest::ScrapeWorker::new(ingest.clone(), &settings.ingest.scrape_jobs));
        }
        workers.spawn(RetentionWorker::new(metric_store.clone(), crate::data::metrics::cells::retention::RETENTION_INTERVAL));
        workers.spawn(crate::data::logs::records::retention::LogRetentionWorker::new(
            log_store.clone(),
            crate::data::logs::records::retention::RETENTION_INTERVAL,
        ));
        if let Some(runtime) = &settings.config {
            let live = Arc::new(NodeLive { scanner: scanner.clone(), state: state.clone(), log_control: runtime.log_control.clone() });
            let reloader = Arc::new(Reloader::new(runtime.sources.clone(), runtime.env.clone(), runtime.state.clone(), live));
            workers.spawn(ReloadWorker::new(reloader));
        }
        // Rolling changes (issue 15): every node publishes its roll health (in gossip, or to
        // itself when alone); the main's roll worker advances the rolls through the workflow.
        let roll_actions: Option<Arc<dyn crate::control::rolling::roller::RollActions>> = match settings.roll_worker {
            true => Some(workflow.clone()),
            false => None,
        };
        let roll_board: Arc<dyn crate::control::rolling::roller::HealthBoard> = match &cluster {
            Some(parts) => Arc::new(crate::control::rolling::roller::GossipBoard::new(parts.cluster.membership.clone())),
            None => Arc::new(crate::control::rolling::roller::LocalBoard::new(node_id.clone())),
        };
        crate::control::rolling::roller::spawn(
            &mut workers,
            &settings.rolling,
            crate::control::rolling::roller::RollerParts {
                self_id: node_id.clone(),
                board: roll_board,
                records: Arc::new(crate::control::rolling::roller::StoreRecords::new(store.clone())),
                facts: Arc::new(crate::control::rolling::roller::RuntimeFacts::new(runtime.clone(), state.dispatcher.clone())),
                changes: vec![runtime.subscribe(), store.subscribe_rolls()],
            },
            roll_actions,
        );
        if let (Some(parts), Some(catch_up)) = (cluster, catch_up) {
            let ClusterParts { cluster, bus_server, memory_network } = parts;
            workers.spawn(notice_worker);
            let (pulls, pull_requests_rx) = PullQueue::new();
            let syncer = Arc::new(Syncer { cluster: cluster.clone(), store: store.clone(), workflow, scanner: scanner.clone(), catch_up });
            workers.spawn(SyncWorker::new(syncer, pull_requests_rx));

            // 6a. The bus, then readiness in gossip.
            let handler = bus_handler(&cluster, &state, &locks, pulls, Some(metric_reader.clone()));
            match (bus_server, &memory_network) {
                (Some((listener, gate)), _) => {
                    let router = crate::cluster::bus::router_with_gate(handler, gate);
                    // The bus gate checks the declared length itself (after the MAC headers, and
                    // counted with its other refusals); the listener leaves that answer to it.
                    let limits = settings.limits.listener(settings.limits.bus_connections, u64::MAX);
                    servers.push(("cluster bus", spawn_server(listener, router, limits, shutdown.clone(), "cluster bus")));
                }
                (None, Some(network)) => network.register_with_gate(node_id.clone(), handler, cluster.bus_gate.clone()),
                (None, None) => {}
            }
            workers.spawn(crate::cluster::replication::forward::ProbeWorker::new(cluster.clone()));
            if let Err(e) = cluster.membership.set_ready(true).await {
                tracing::warn!(error = %e, "cannot publish readiness");
            }
        }

        // 6b. The admin and agent data servers.
        let admin_limits = settings.limits.listener(settings.limits.admin_connections, admin::LARGEST_BODY_BYTES);
        servers.push(("admin", spawn_server(admin_listener, admin::router(state.clone()), admin_limits, shutdown.clone(), "admin")));
        if let Some(listener) = data_listener {
            // The receivers share the data listener with the agent config server.
            let app = crate::api::agents::router(agents.clone()).merge(crate::data::ingest::router(ingest.clone()));
            // The agent routes (and the receivers) refuse an oversized declared length themselves, before reading,
            // with the protocol's error body; the listener leaves that answer to them.
            let limits = settings.limits.listener(settings.limits.data_connections, u64::MAX);
            let server = match listener {
                DataListener::Plain(tcp) => spawn_server(tcp, app, limits, shutdown.clone(), "agent data"),
                DataListener::Tls(tls) => spawn_server(tls, app, limits, shutdown.clone(), "agent data"),
            };
            servers.push(("agent data", server));
        }
        tracing::info!(node = %node_id, admin = %admin_addr, data = ?data_addr, data_tls = settings.agent_tls.is_some(), "serving");
        Ok(RunningNode {
            admin_addr,
            data_addr,
            state,
            boot_report,
            metric_store,
            log_store,
            telemetry,
            log_exporter,
            shutdown,
            servers,
            workers,
        })
    }

    /// Where dispatch writes computed metric values.
    pub fn metric_writer(&self) -> Arc<dyn MetricWriter> {
        self.metric_store.clone()
    }

    /// What queries and export read.
    pub fn metric_reader(&self) -> Arc<dyn MetricReader> {
        self.metric_store.clone()
    }

    /// Starts one more worker on the node's runner: it stops with the node, and a panic in it
    /// makes `/readyz` fail like one in the node's own workers.
    pub fn spawn_worker(&mut self, worker: impl Worker) {
        self.workers.spawn(worker);
    }

    /// Cancelling this token stops the node (servers and workers); [`RunningNode::shutdown`]
    /// then waits for them.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Tears down in reverse: the servers, then the workers (bounded), then gossip.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for (name, server) in self.servers.into_iter().rev() {
            if let Err(e) = server.await {
                tracing::error!(server = name, error = %e, "server task failed");
            }
        }
        // The receivers are closed: the evaluation threads finish what is queued (bounded by
        // the queues) and stop, before the workers, so the exporters' final flush holds it.
        let dispatcher = self.state.dispatcher.clone();
        if tokio::task::spawn_blocking(move || dispatcher.stop()).await.is_err() {
            tracing::error!("stopping dispatch failed");
        }
        let report = self.workers.shutdown(WORKER_SHUTDOWN_BOUND).await;
        if !report.aborted.is_empty() {
            tracing::error!(workers = ?report.aborted, "workers aborted at shutdown");
        }
        // Gossip stops here whoever still holds the membership, so the node's gossip address
        // is free for a restart in the same process.
        if let Some(cluster) = &self.state.cluster
            && let Err(e) = cluster.membership.shutdown().await
        {
            tracing::warn!(error = %e, "stopping gossip");
        }
    }
}

/// The agent data listener as configured: plain, TLS, or none.
fn data_listener_for(listener: Option<TcpListener>, settings: &NodeSettings) -> Result<Option<DataListener>, NodeError> {
    Ok(match (listener, &settings.agent_tls) {
        (None, _) => None,
        (Some(tcp), None) => Some(DataListener::Plain(tcp)),
        (Some(tcp), Some(files)) => {
            let config = crate::base::tls::server_config(files, crate::base::tls::DEFAULT_RECHECK)?;
            Some(DataListener::Tls(crate::base::tls::TlsListener::new(tcp, config).map_err(NodeError::Listener)?))
        }
    })
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

/// Joins the cluster: the bus client (HTTP or the in-memory twin) and gossip membership.
async fn connect_cluster(wiring: ClusterWiring, node_id: &NodeId, telemetry: &Arc<Telemetry>) -> Result<ClusterParts, NodeError> {
    let mut bus_server = None;
    let mut memory_network = None;
    let (bus, drop_switch, bus_advertise, bus_gate): (Arc<dyn crate::cluster::bus::BusClient>, _, String, _) = match wiring.bus {
        BusWiring::Http { listener, advertise, auth } => {
            let switch = crate::cluster::bus::DropSwitch::new();
            let gate = crate::cluster::bus::BusGate::new(auth.clone());
            let client = crate::cluster::bus::HttpBusClient::with_drop_switch(auth, switch.clone()).with_counters(gate.counters().clone());
            bus_server = Some((listener, gate.clone()));
            (Arc::new(client), Some(switch), advertise, gate)
        }
        BusWiring::Memory { network } => {
            let client = network.client(node_id.clone());
            let switch = client.drop_switch().clone();
            let gate = crate::cluster::bus::BusGate::new(network.auth().clone());
            memory_network = Some(network);
            (Arc::new(client), Some(switch), node_id.0.clone(), gate)
        }
    };
    let mut membership_settings = wiring.membership;
    membership_settings.node_id = node_id.clone();
    membership_settings.initial_facts.push((Fact::AdminAddr, wiring.admin_advertise.clone()));
    membership_settings.initial_facts.push((Fact::BusAddr, bus_advertise));
    let membership = Membership::start(membership_settings, &wiring.gossip).await.map_err(NodeError::Cluster)?;
    let bus: Arc<dyn crate::cluster::bus::BusClient> = Arc::new(crate::cluster::bus::CountedBusClient::new(bus, telemetry.clone()));
    let cluster = Arc::new(Cluster { membership: Arc::new(membership), bus, drop_switch, bus_gate, settings: wiring.replication });
    Ok(ClusterParts { cluster, bus_server, memory_network })
}

/// The scan's view of main-ship: the cluster view's watch channel, read at every scan.
struct ViewIsMain(tokio::sync::watch::Receiver<crate::cluster::gossip::ClusterView>);

impl MainView for ViewIsMain {
    fn is_main(&self) -> bool {
        self.0.borrow().is_main()
    }
}

/// What this node answers on the bus.
fn bus_handler(
    cluster: &Arc<Cluster>,
    state: &Arc<AdminState>,
    locks: &Arc<FileLocks>,
    pulls: PullQueue,
    metrics: Option<Arc<dyn crate::data::metrics::MetricReader>>,
) -> Arc<dyn crate::cluster::bus::BusHandler> {
    Arc::new(NodeBusHandler {
        cluster: cluster.clone(),
        store: state.store.clone(),
        runtime: state.runtime.clone(),
        locks: locks.clone(),
        notices: NoticeReceiver {
            workflow: state.workflow.clone(),
            store: state.store.clone(),
            scanner: state.scanner.clone(),
            pulls,
            pull_wait: cluster.settings.sync_timeout,
        },
        forwarded: Arc::new(admin::ForwardedRequests::new(state)),
        // Weak: the bus (and the in-memory network) must not keep the node's state alive.
        views: {
            let state = Arc::downgrade(state);
            Arc::new(move |what| match state.upgrade() {
                Some(state) => admin::node_view(&state, what),
                None => b"null".to_vec(),
            })
        },
        metrics,
    })
}
