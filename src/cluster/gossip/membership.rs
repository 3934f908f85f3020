//! Membership: this node's chitchat instance and the [`ClusterView`] derived from it.
//!
//! [`Membership`] owns the `ChitchatHandle` for the node's life (dropping it stops gossip) and a
//! small view worker that rebuilds the view from chitchat's state and publishes it on a `watch`
//! channel when it changed. The worker wakes for a reason: the live set changed, a key changed
//! (forwarded from a chitchat listener), this node set a fact, or a periodic tick (every gossip
//! interval) that catches dead nodes being forgotten.
//!
//! The worker also judges liveness beyond chitchat's verdict (see `main_select::judge_liveness`):
//! it tracks when each member's heartbeat last moved and combines that with the bus failures the
//! node reported ([`Membership::report_bus_call`]). It looks 8 times per gossip interval, so
//! a member that is refused and silent is dropped from the view within a fraction of an interval.
//!
//! chitchat runs key listeners while it holds its own mutex, so the listener only pokes a
//! channel; the worker locks chitchat later, from its own task. No chitchat type leaves this
//! module tree: the node sees [`ClusterView`], [`Fact`] and [`GossipTransport`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chitchat::transport::{ChannelTransport, Transport, UdpTransport};

use super::sealed::{GossipCounterSnapshot, GossipCounters};
use super::secure_udp::SealedUdpTransport;
use crate::cluster::bus::BusAuth;
use chitchat::{
    Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig, ListenerHandle,
    ProtocolVersion, spawn_chitchat,
};
use tokio::sync::{Mutex, mpsc, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::ClusterError;
use super::keys::{Fact, NodeFacts, check_fact_value, ready_value};
use super::liveness::{BusReports, LivenessJudge};
use super::main_select::{BusFailure, Liveness};
use super::view::{ClusterView, Member};
use crate::base::ids::NodeId;

/// The largest UDP payload, which chitchat keeps every message under.
const MAX_GOSSIP_DATAGRAM_BYTES: usize = super::sealed::MAX_UDP_PAYLOAD_BYTES;

/// How this node gossips.
#[derive(Debug, Clone)]
pub struct MembershipSettings {
    pub node_id: NodeId,
    /// The incarnation; must grow across restarts of one node id.
    pub generation: u64,
    pub gossip_listen_addr: SocketAddr,
    /// The address peers gossip to; must not have port 0.
    pub gossip_advertise_addr: SocketAddr,
    /// `host:port` of other nodes' gossip (host names are re-resolved every minute).
    pub seeds: Vec<String>,
    /// Nodes only gossip with nodes of the same cluster id.
    pub cluster_id: String,
    pub gossip_interval: Duration,
    /// chitchat's phi above which gossip alone calls a node dead (`cluster.phi_threshold`).
    pub phi_threshold: f64,
    /// The lower phi above which a refused or reset bus connection calls a node dead
    /// (`cluster.suspect_phi_threshold`, see `main_select::judge_liveness`).
    pub suspect_phi_threshold: f64,
    /// How long a dead node stays listed before gossip forgets it.
    pub dead_node_grace_period: Duration,
    /// How long deleted keys are kept as tombstones.
    pub marked_for_deletion_grace_period: Duration,
    /// Facts published from the first gossip round (for example the bus and admin addresses).
    pub initial_facts: Vec<(Fact, String)>,
}

pub fn default_generation() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_nanos() as u64)
        .unwrap_or(0)
}

pub fn default_cluster_id() -> String {
    "hotrule".to_string()
}

/// 300 ms. With the evidence rule a killed main is replaced after about 3 mean heartbeat
/// intervals, so the interval sets the failover time (measured with `bench cluster`: median
/// 0.65 s at 300 ms against 1.6 s at 500 ms; etcd 1.05 s in the same run). Under 200 ms a loaded
/// 2-core node can flap between live and dead.
pub fn default_gossip_interval() -> Duration {
    Duration::from_millis(300)
}

/// Ten minutes, instead of chitchat's 24 hours.
/// chitchat's default: with heartbeats every ~0.25 s, about 2 s of silence.
pub fn default_phi_threshold() -> f64 {
    8.0
}

/// Three mean heartbeat intervals of silence, and a refused or reset bus connection.
pub fn default_suspect_phi_threshold() -> f64 {
    3.0
}

pub fn default_dead_node_grace_period() -> Duration {
    Duration::from_secs(10 * 60)
}

pub fn default_marked_for_deletion_grace_period() -> Duration {
    Duration::from_secs(60 * 60)
}

impl MembershipSettings {
    /// Production defaults; gossip is advertised on the address it listens on.
    pub fn new(node_id: NodeId, gossip_addr: SocketAddr) -> MembershipSettings {
        MembershipSettings {
            node_id,
            generation: default_generation(),
            gossip_listen_addr: gossip_addr,
            gossip_advertise_addr: gossip_addr,
            seeds: Vec::new(),
            cluster_id: default_cluster_id(),
            gossip_interval: default_gossip_interval(),
            phi_threshold: default_phi_threshold(),
            suspect_phi_threshold: default_suspect_phi_threshold(),
            dead_node_grace_period: default_dead_node_grace_period(),
            marked_for_deletion_grace_period: default_marked_for_deletion_grace_period(),
            initial_facts: Vec::new(),
        }
    }

    /// Fast gossip for in-process tests: failures are detected in about a second.
    pub fn for_test(node_id: NodeId, gossip_addr: SocketAddr) -> MembershipSettings {
        MembershipSettings {
            gossip_interval: Duration::from_millis(100),
            ..MembershipSettings::new(node_id, gossip_addr)
        }
    }

    fn validate(&self) -> Result<(), ClusterError> {
        let invalid = |reason: &str| {
            Err(ClusterError::InvalidSettings {
                reason: reason.to_string(),
            })
        };
        if self.node_id.0.is_empty() {
            return invalid("node id is empty");
        }
        if self.cluster_id.is_empty() {
            return invalid("cluster id is empty");
        }
        if self.gossip_advertise_addr.port() == 0 {
            return invalid("gossip advertise address has port 0; peers could not reach it");
        }
        if self.gossip_interval < Duration::from_millis(10) {
            return invalid("gossip interval under 10 ms");
        }
        if !(self.phi_threshold.is_finite() && self.phi_threshold >= 1.0) {
            return invalid("phi threshold must be a number of at least 1");
        }
        if !(self.suspect_phi_threshold >= 1.0 && self.suspect_phi_threshold <= self.phi_threshold) {
            return invalid("suspect phi threshold must be between 1 and the phi threshold");
        }
        for (fact, value) in &self.initial_facts {
            check_fact_value(*fact, value)?;
        }
        Ok(())
    }

    fn chitchat_config(&self) -> ChitchatConfig {
        let failure_detector_config = FailureDetectorConfig {
            // Until samples accumulate, chitchat assumes this interval between heartbeats; its
            // 5 s default makes detection slow for minutes after a join.
            initial_interval: self.gossip_interval,
            phi_threshold: self.phi_threshold,
            dead_node_grace_period: self.dead_node_grace_period,
            ..FailureDetectorConfig::default()
        };
        ChitchatConfig {
            chitchat_id: ChitchatId::new(
                self.node_id.0.as_str(),
                self.generation,
                self.gossip_advertise_addr,
            ),
            cluster_id: self.cluster_id.clone(),
            gossip_interval: self.gossip_interval,
            listen_addr: self.gossip_listen_addr,
            seed_nodes: self.seeds.clone(),
            failure_detector_config,
            marked_for_deletion_grace_period: self.marked_for_deletion_grace_period,
            catchup_callback: None,
            extra_liveness_predicate: None,
            // V1 is not decodable by older nodes; stay on V0 until every node reads V1.
            protocol_version: ProtocolVersion::V0,
        }
    }
}

/// The network gossip runs on.
#[derive(Clone)]
pub enum GossipTransport {
    /// Real UDP sockets. With a secret every datagram is sealed with its MAC and anything that
    /// does not prove the secret is dropped (see `secure_udp`); [`BusAuth::Insecure`] is plain
    /// chitchat UDP, which trusts any sender.
    Udp(BusAuth),
    /// An in-process network for tests.
    InMemory(GossipNetwork),
}

/// An in-process gossip network (chitchat's `ChannelTransport`, which really serializes every
/// message and enforces the UDP payload limit). Links can be cut to make partitions.
#[derive(Clone)]
pub struct GossipNetwork {
    channels: ChannelTransport,
}

impl Default for GossipNetwork {
    fn default() -> GossipNetwork {
        GossipNetwork {
            channels: ChannelTransport::with_mtu(MAX_GOSSIP_DATAGRAM_BYTES),
        }
    }
}

impl GossipNetwork {
    pub fn new() -> GossipNetwork {
        GossipNetwork::default()
    }

    /// Stops gossip between the two addresses, both directions.
    pub async fn cut(&self, a: SocketAddr, b: SocketAddr) {
        self.channels.remove_link(a, b).await;
    }

    /// Restores gossip between the two addresses.
    pub async fn heal(&self, a: SocketAddr, b: SocketAddr) {
        self.channels.add_link(a, b).await;
    }
}

/// This node's membership in the cluster. Keep it for the node's whole life.
pub struct Membership {
    self_id: NodeId,
    generation: u64,
    gossip_addr: SocketAddr,
    /// The chitchat handle, the key listener and the view worker's guard, taken on shutdown.
    /// Shutdown works through `&self`, so a node can stop gossip while other components
    /// still hold the membership.
    running: tokio::sync::Mutex<Option<Running>>,
    chitchat: Arc<Mutex<Chitchat>>,
    /// What the sealed transport let in and kept out (all zero on an unsealed transport).
    gossip_counters: Arc<GossipCounters>,
    sealed: bool,
    view_rx: watch::Receiver<ClusterView>,
    refresh_tx: mpsc::Sender<()>,
    /// What this node's bus calls met, per peer: evidence for the view worker.
    bus_reports: BusReports,
}

struct Running {
    handle: ChitchatHandle,
    _key_listener: ListenerHandle,
    _view_worker: DropGuard,
}

impl Membership {
    /// Starts gossip on `transport` and publishes the first view, in which this node is live
    /// (and the main, until gossip brings a smaller id).
    pub async fn start(
        settings: MembershipSettings,
        transport: &GossipTransport,
    ) -> Result<Membership, ClusterError> {
        match transport {
            GossipTransport::Udp(BusAuth::Insecure) => {
                Membership::start_on(settings, &UdpTransport).await
            }
            GossipTransport::Udp(BusAuth::Secret(secret)) => {
                let counters = Arc::new(GossipCounters::default());
                let sealed = SealedUdpTransport::new(secret.clone(), counters.clone());
                let mut membership = Membership::start_on(settings, &sealed).await?;
                membership.gossip_counters = counters;
                membership.sealed = true;
                Ok(membership)
            }
            GossipTransport::InMemory(network) => {
                Membership::start_on(settings, &network.channels).await
            }
        }
    }

    /// Starts gossip on any chitchat transport (for example one wrapped to drop or delay).
    pub async fn start_on(
        settings: MembershipSettings,
        transport: &dyn Transport,
    ) -> Result<Membership, ClusterError> {
        settings.validate()?;
        let initial_key_values = settings
            .initial_facts
            .iter()
            .map(|(fact, value)| (fact.key().to_string(), value.clone()))
            .collect();
        let handle = spawn_chitchat(settings.chitchat_config(), initial_key_values, transport)
            .await
            .map_err(|e| ClusterError::Start {
                listen_addr: settings.gossip_listen_addr,
                reason: format!("{e:#}"),
            })?;
        let chitchat = handle.chitchat();

        // Capacity 1: pokes coalesce, and a full channel already means "refresh pending".
        let (refresh_tx, refresh_rx) = mpsc::channel(1);
        let bus_reports = BusReports::default();
        let mut judge = LivenessJudge::new(
            settings.phi_threshold,
            settings.suspect_phi_threshold,
            bus_reports.clone(),
        );
        let (key_listener, live_rx, first_view) = {
            let guard = chitchat.lock().await;
            let poke = refresh_tx.clone();
            let key_listener = guard.subscribe_event("", move |_event| {
                let _ = poke.try_send(());
            });
            (
                key_listener,
                guard.live_nodes_watcher(),
                view_of(&settings.node_id, &guard, &mut judge),
            )
        };
        let (view_tx, view_rx) = watch::channel(first_view);

        let stop = CancellationToken::new();
        let worker = ViewWorker {
            self_id: settings.node_id.clone(),
            chitchat,
            view_tx,
            live_rx,
            refresh_rx,
            // Several looks per interval: heartbeat silence is measured at this resolution.
            tick: tokio::time::interval((settings.gossip_interval / 8).max(Duration::from_millis(10))),
            judge,
        };
        tokio::spawn(worker.run(stop.clone()));

        Ok(Membership {
            self_id: settings.node_id,
            generation: settings.generation,
            gossip_addr: settings.gossip_advertise_addr,
            chitchat: handle.chitchat(),
            gossip_counters: Arc::new(GossipCounters::default()),
            sealed: false,
            view_rx,
            refresh_tx,
            bus_reports,
            running: tokio::sync::Mutex::new(Some(Running {
                handle,
                _key_listener: key_listener,
                _view_worker: stop.drop_guard(),
            })),
        })
    }

    pub fn self_id(&self) -> &NodeId {
        &self.self_id
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The address peers gossip to.
    pub fn gossip_addr(&self) -> SocketAddr {
        self.gossip_addr
    }

    /// What gossip authentication let in and kept out so far.
    pub fn gossip_counters(&self) -> GossipCounterSnapshot {
        self.gossip_counters.snapshot(self.sealed)
    }

    /// The current view, and every later one.
    pub fn view(&self) -> watch::Receiver<ClusterView> {
        self.view_rx.clone()
    }

    pub fn main(&self) -> Option<NodeId> {
        self.view_rx.borrow().main.clone()
    }

    pub fn is_main(&self) -> bool {
        self.view_rx.borrow().is_main()
    }

    /// Publishes `value` under `fact` (refused over `MAX_FACT_VALUE_BYTES`). Setting the value
    /// already published gossips nothing new.
    pub async fn set_fact(&self, fact: Fact, value: impl Into<String>) -> Result<(), ClusterError> {
        let value = value.into();
        check_fact_value(fact, &value)?;
        self.chitchat.lock().await.self_node_state().set(fact.key(), &value);
        let _ = self.refresh_tx.try_send(());
        Ok(())
    }

    /// Runs `f` on this node's own gossip state under chitchat's lock (the roll keys of
    /// `roll_health`).
    pub(super) async fn with_self_state<T>(&self, f: impl FnOnce(&mut chitchat::NodeState) -> T) -> T {
        f(self.chitchat.lock().await.self_node_state())
    }

    /// The value every known node incarnation holds under `key`, by (node id, generation).
    pub(super) async fn member_values(&self, key: &str) -> std::collections::BTreeMap<(NodeId, u64), String> {
        let chitchat = self.chitchat.lock().await;
        chitchat
            .node_states()
            .iter()
            .filter_map(|(id, state)| {
                let value = state.get(key)?;
                Some(((NodeId(id.node_id.to_string()), id.generation_id), value.to_string()))
            })
            .collect()
    }

    /// Records what a bus call to `node` met: `Ok` for any answer, `Err` for a failure that says
    /// something about the node's liveness. A failure wakes the view worker at once.
    pub fn report_bus_call(&self, node: &NodeId, outcome: Result<(), BusFailure>) {
        match outcome {
            Ok(()) => {
                if self.bus_reports.record_success(node) {
                    let _ = self.refresh_tx.try_send(());
                }
            }
            Err(failure) => {
                self.bus_reports
                    .record_failure(node, failure, std::time::Instant::now());
                let _ = self.refresh_tx.try_send(());
            }
        }
    }

    pub async fn set_ready(&self, ready: bool) -> Result<(), ClusterError> {
        self.set_fact(Fact::Ready, ready_value(ready)).await
    }

    pub async fn set_last_scan_ms(&self, last_scan_ms: u64) -> Result<(), ClusterError> {
        self.set_fact(Fact::LastScanMs, last_scan_ms.to_string())
            .await
    }

    /// Stops gossip and waits for chitchat's loop to end. Peers see this node die after their
    /// failure detection delay (chitchat has no leave message).
    pub async fn shutdown(&self) -> Result<(), ClusterError> {
        let Some(Running {
            handle,
            _view_worker,
            _key_listener,
        }) = self.running.lock().await.take()
        else {
            return Ok(());
        };
        drop(_view_worker);
        drop(_key_listener);
        handle.shutdown().await.map_err(|e| ClusterError::Shutdown {
            reason: format!("{e:#}"),
        })
    }
}

/// Rebuilds the view when there is a reason to; one rebuild is one short chitchat lock.
struct ViewWorker {
    self_id: NodeId,
    chitchat: Arc<Mutex<Chitchat>>,
    view_tx: watch::Sender<ClusterView>,
    live_rx: watch::Receiver<std::collections::BTreeMap<ChitchatId, chitchat::NodeState>>,
    refresh_rx: mpsc::Receiver<()>,
    tick: tokio::time::Interval,
    judge: LivenessJudge,
}

impl ViewWorker {
    async fn run(mut self, stop: CancellationToken) {
        self.tick
            .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.refresh().await;
            if !self.wait_for_reason(&stop).await {
                return;
            }
        }
    }

    async fn refresh(&mut self) {
        let view = view_of(&self.self_id, &*self.chitchat.lock().await, &mut self.judge);
        self.view_tx.send_if_modified(|current| {
            let changed = *current != view;
            if changed {
                *current = view;
            }
            changed
        });
    }

    /// Waits for something that may have changed the view; false when it is time to stop.
    async fn wait_for_reason(&mut self, stop: &CancellationToken) -> bool {
        tokio::select! {
            _ = stop.cancelled() => false,
            changed = self.live_rx.changed() => {
                if changed.is_err() {
                    // chitchat is gone (it cannot be while we hold it, but never spin on it).
                    stop.cancelled().await;
                    return false;
                }
                true
            }
            // `None` (every sender gone) disables this branch instead of spinning on it.
            Some(()) = self.refresh_rx.recv() => true,
            _ = self.tick.tick() => true,
        }
    }
}

/// The view of `chitchat`'s current state. Older incarnations of this node are skipped: this
/// process is the node. Each other member's liveness is `judge_liveness` over gossip's verdict,
/// its phi and this node's bus failures.
fn view_of(self_id: &NodeId, chitchat: &Chitchat, judge: &mut LivenessJudge) -> ClusterView {
    let live: std::collections::HashSet<&ChitchatId> = chitchat.live_nodes().collect();
    let self_chitchat_id = chitchat.self_chitchat_id();
    let self_generation = self_chitchat_id.generation_id;
    let now = std::time::Instant::now();
    let members = chitchat
        .node_states()
        .iter()
        .filter(|(id, _)| &*id.node_id != self_id.0.as_str() || id.generation_id == self_generation)
        .map(|(id, state)| {
            let liveness = if id == self_chitchat_id {
                Liveness::Live
            } else {
                let timeout = chitchat.failure_detection_timeout(id);
                judge.liveness(id, state.heartbeat(), live.contains(id), timeout, now)
            };
            let mut member = Member::new(
                NodeId(id.node_id.to_string()),
                id.generation_id,
                liveness != Liveness::Dead,
                NodeFacts::from_key_values(state.key_values()),
            );
            member.suspect = liveness == Liveness::Suspect;
            member
        })
        .collect();
    judge.retain(|id| chitchat.node_states().contains_key(id));
    ClusterView::new(self_id.clone(), members)
}
