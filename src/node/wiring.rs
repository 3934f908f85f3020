//! The node in its cluster: how it reaches its peers ([`ClusterWiring`]), joining gossip and the
//! bus, the workflow's peers, and, once booted, replication's workers, the bus server and
//! readiness in gossip.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::admin::{self, AdminState};
use crate::base::ids::NodeId;
use crate::base::listen::ListenLimits;
use crate::base::self_metrics::SelfMetrics;
use crate::base::worker::{JobWorker, WorkerRunner};
use crate::cluster::gossip::{Fact, Membership};
use crate::cluster::replication::Cluster;
use crate::cluster::replication::handler::NodeBusHandler;
use crate::cluster::replication::notices::NoticeReceiver;
use crate::cluster::replication::peers::ClusterPeers;
use crate::cluster::replication::pulls::PullQueue;
use crate::cluster::replication::sync::{CatchUp, SyncWorker, Syncer};
use crate::control::scan::MainView;
use crate::control::workflow::{NoPeers, Peers};
use crate::data::alarm_records::AlarmRecordReader;
use crate::data::logs::LogReader;
use crate::data::metrics::MetricReader;

use super::NodeError;
use super::control_plane::ControlPlane;
use super::listeners::{Servers, spawn_server};

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

/// The node's id: the configured one, else the address peers and operators reach it at (the
/// advertised admin address in a cluster, the bound admin address alone).
pub fn resolve_node_id(configured: Option<&str>, admin_advertise: &str) -> NodeId {
    NodeId(configured.map(str::to_string).unwrap_or_else(|| admin_advertise.to_string()))
}

/// The admin address peers and operators reach this node at: the advertised one in a cluster,
/// the bound one alone.
pub(super) fn admin_advertise(wiring: Option<&ClusterWiring>, bound: std::net::SocketAddr) -> String {
    wiring.map_or_else(|| bound.to_string(), |w| w.admin_advertise.clone())
}

/// The cluster side of a node: membership, the bus client, and what still has to be served.
pub(super) struct ClusterParts {
    pub(super) cluster: Arc<Cluster>,
    bus_server: Option<(TcpListener, crate::cluster::bus::BusGate)>,
    memory_network: Option<crate::cluster::bus::MemNetwork>,
}

/// Joins the cluster when `wiring` is given: the bus client (HTTP or the in-memory twin) and
/// gossip membership.
pub(super) async fn join_cluster(
    wiring: Option<ClusterWiring>,
    node_id: &NodeId,
    telemetry: &Arc<SelfMetrics>,
) -> Result<Option<ClusterParts>, NodeError> {
    let Some(wiring) = wiring else { return Ok(None) };
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
    Ok(Some(ClusterParts { cluster, bus_server, memory_network }))
}

/// The workflow's view of the other nodes: the given one (tests), the cluster's (commit notices
/// queued on the returned worker), or none for a node alone.
pub(super) fn workflow_peers(given: Option<Arc<dyn Peers>>, cluster: Option<&ClusterParts>) -> (JobWorker, Arc<dyn Peers>) {
    let (notice_worker, notices) = JobWorker::new("commit-notices");
    let peers: Arc<dyn Peers> = match (given, cluster) {
        (Some(peers), _) => peers,
        (None, Some(parts)) => Arc::new(ClusterPeers::new(parts.cluster.clone(), notices)),
        (None, None) => Arc::new(NoPeers),
    };
    (notice_worker, peers)
}

/// The scan's view of main-ship in a cluster; none for a node alone.
pub(super) fn main_view(cluster: Option<&ClusterParts>) -> Option<Box<dyn MainView>> {
    cluster.map(|parts| Box::new(ViewIsMain(parts.cluster.membership.view())) as Box<dyn MainView>)
}

/// The scan's view of main-ship: the cluster view's watch channel, read at every scan.
struct ViewIsMain(tokio::sync::watch::Receiver<crate::cluster::gossip::ClusterView>);

impl MainView for ViewIsMain {
    fn is_main(&self) -> bool {
        self.0.borrow().is_main()
    }
}

/// What replication needs of the booted node.
pub(super) struct ReplicationParts<'a> {
    pub(super) control: &'a ControlPlane,
    pub(super) state: &'a Arc<AdminState>,
    pub(super) metric_reader: Arc<dyn MetricReader>,
    pub(super) handoff: Arc<dyn crate::data::metrics::handoff::HandoffReceiver>,
    pub(super) log_reader: Arc<dyn LogReader>,
    pub(super) alarm_reader: Arc<dyn AlarmRecordReader>,
    pub(super) catch_up: CatchUp,
    pub(super) notice_worker: JobWorker,
}

/// Starts replication on a booted node: commit notices and catch-up sync, the bus (served or
/// registered on the in-memory twin), forwarding probes, then readiness in gossip.
pub(super) async fn start_replication(
    parts: ClusterParts,
    node: ReplicationParts<'_>,
    workers: &mut WorkerRunner,
    servers: &mut Servers,
    limits: &ListenLimits,
    stop: &CancellationToken,
) {
    let ClusterParts { cluster, bus_server, memory_network } = parts;
    let ReplicationParts { control, state, metric_reader, handoff, log_reader, alarm_reader, catch_up, notice_worker } = node;
    workers.spawn(notice_worker);
    let (pulls, pull_requests_rx) = PullQueue::new();
    let syncer = Arc::new(Syncer {
        cluster: cluster.clone(),
        store: control.store.clone(),
        workflow: control.workflow.clone(),
        scanner: control.scanner.clone(),
        catch_up,
    });
    workers.spawn(SyncWorker::new(syncer, pull_requests_rx));

    // The bus, then readiness in gossip.
    let stores = BusStores { metrics: Some(metric_reader), handoff: Some(handoff), logs: Some(log_reader), alarms: Some(alarm_reader) };
    let handler = bus_handler(&cluster, state, &control.locks, pulls, stores);
    match (bus_server, &memory_network) {
        (Some((listener, gate)), _) => {
            let router = crate::cluster::bus::router_with_gate(handler, gate);
            // The bus gate checks the declared length itself (after the MAC headers, and
            // counted with its other refusals); the listener leaves that answer to it.
            let bus_limits = limits.listener(limits.bus_connections, u64::MAX);
            servers.push(("cluster bus", spawn_server(listener, router, bus_limits, stop.clone(), "cluster bus")));
        }
        (None, Some(network)) => {
            // The in-memory bus "serves" until the node stops, as a process's port would: a
            // stopped node is unreachable, not a handler still answering from its stores.
            network.register_with_gate(state.node_id.clone(), handler.clone(), cluster.bus_gate.clone());
            let (network, node, stop) = (network.clone(), state.node_id.clone(), stop.clone());
            let served = async move {
                stop.cancelled().await;
                network.unregister_handler(&node, &handler);
            };
            servers.push(("cluster bus (in memory)", tokio::spawn(served)));
        }
        (None, None) => {}
    }
    workers.spawn(crate::cluster::replication::forward::ProbeWorker::new(cluster.clone()));
    if let Err(e) = cluster.membership.set_ready(true).await {
        tracing::warn!(error = %e, "cannot publish readiness");
    }
}

/// What this node answers on the bus.
fn bus_handler(
    cluster: &Arc<Cluster>,
    state: &Arc<AdminState>,
    locks: &Arc<crate::control::runtime::locks::FileLocks>,
    pulls: PullQueue,
    stores: BusStores,
) -> Arc<dyn crate::cluster::bus::BusHandler> {
    let BusStores { metrics, handoff, logs, alarms } = stores;
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
        handoff,
        logs,
        alarms,
    })
}

/// The data stores peers read (cluster-wide queries) or write (handoff) over the bus.
struct BusStores {
    metrics: Option<Arc<dyn MetricReader>>,
    handoff: Option<Arc<dyn crate::data::metrics::handoff::HandoffReceiver>>,
    logs: Option<Arc<dyn LogReader>>,
    alarms: Option<Arc<dyn AlarmRecordReader>>,
}

/// The live set the data plane divides work by: gossip's in a cluster, this node alone
/// otherwise.
pub(super) fn live_nodes(cluster: Option<&ClusterParts>, node_id: &NodeId) -> Arc<dyn crate::base::owner::LiveNodes> {
    match cluster {
        Some(parts) => parts.cluster.clone(),
        None => Arc::new(crate::base::owner::Alone(node_id.clone())),
    }
}
