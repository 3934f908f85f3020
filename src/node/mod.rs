//! The composition root: builds every component, boots, spawns the workers and the servers,
//! and tears them down in reverse order. It wires; it decides nothing.
//!
//! `RunningNode::start_full` reads as the script, one named step each:
//!
//! 1. `listeners::prepare`: the caller's listeners (port 0 in tests), the data listener made
//!    TLS, and the node's id;
//! 2. `wiring::join_cluster`: gossip membership and the bus, then the workflow's peers;
//! 3. `data_plane::open_stores`: the metric, log and alarm-record stores and the exporters;
//! 4. `control_plane::build`: management storage, bundled rules, runtime, workflow, scan;
//! 5. `api::agent_service`, `data_plane::build` (dispatch and the receivers), and
//!    `api::admin_state`;
//! 6. boot: one synchronous scan before anything is served, so no write can race it;
//! 7. the workers (`workers`), then replication (`wiring::start_replication`: sync, the bus,
//!    readiness in gossip), then `listeners::serve_admin_and_data`.
//!
//! [`RunningNode::shutdown`] undoes it in reverse: servers, dispatch, workers, gossip.
//!
//! A node is started by [`RunningNode::start_with_listeners`] from the settings an operator
//! configures ([`NodeSettings`]); tests that replace some of its parts go through the test
//! seam, [`testing::NodeBuilder`].

mod alarms;
mod api;
mod control_plane;
mod data_plane;
mod error;
mod from_config;
mod listeners;
mod live;
pub mod roll_boards;
mod settings;
pub mod testing;
mod wiring;
mod workers;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::api::admin::AdminState;
use crate::base::self_metrics::SelfMetrics;
use crate::base::worker::{Worker, WorkerRunner};
use crate::control::scan::{ScanReport, boot};
use crate::data::ingest::ScrapeBoard;
use crate::data::metrics::cells::MetricStore;
use crate::data::metrics::{MetricReader, MetricWriter};
use crate::store::kv::KvEngine;

pub use error::NodeError;
pub use from_config::{StorageError, WiringError, cluster_wiring, open_storage};
pub use listeners::Listeners;
pub use settings::{ConfigRuntime, LogControl, NodeSettings};
pub use wiring::{BusWiring, ClusterWiring, resolve_node_id};

use listeners::Servers;
use testing::Seams;

/// How long [`RunningNode::shutdown`] waits for the workers before aborting them.
pub const WORKER_SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// A running node. Drop order does not matter; call [`RunningNode::shutdown`] to stop cleanly.
pub struct RunningNode {
    pub admin_addr: SocketAddr,
    /// Where agents are served, when a data listener was given.
    pub data_addr: Option<SocketAddr>,
    /// Where SkyWalking's agents are served over gRPC alone (`ingest.grpc_listen`), when given.
    pub grpc_addr: Option<SocketAddr>,
    pub state: Arc<AdminState>,
    pub boot_report: ScanReport,
    /// The embedded metric store (the series key space of the node's database): dispatch writes
    /// it, queries and export read it ([`RunningNode::metric_writer`], [`RunningNode::metric_reader`]).
    pub metric_store: Arc<MetricStore>,
    /// The embedded log store (the `logs` key space): dispatch writes kept logs to it (a
    /// `LogWriter`), `/query/logs` reads it.
    pub log_store: Arc<crate::data::logs::records::LogStore>,
    /// The alarm-record store (the `alarms` key space): the alarm worker writes each check's
    /// firing messages and recoveries, `/query/alarms` reads them.
    pub alarm_store: Arc<crate::data::alarm_records::store::AlarmRecordStore>,
    /// The node's own metrics (`/metrics`).
    pub telemetry: Arc<SelfMetrics>,
    /// Where dispatch writes metric values: the store, then the remote-write exporter when
    /// `export.remote_write` is set ([`RunningNode::metric_writer`]).
    dispatch_writer: Arc<dyn MetricWriter>,
    /// The OTLP log exporter (`export.otlp_logs`), a [`crate::data::logs::LogWriter`] for kept logs;
    /// none when log export is off.
    pub log_exporter: Option<Arc<crate::data::export::otlp_logs::OtlpLogExporter>>,
    shutdown: CancellationToken,
    /// Admin, agent data and bus servers, in start order.
    servers: Servers,
    workers: WorkerRunner,
}

impl RunningNode {
    /// Builds and boots a node on `kv`, alone (`wiring` none) or in a cluster, then serves on
    /// the given listeners. (Tests start nodes through [`testing::NodeBuilder`].)
    pub async fn start_with_listeners(
        settings: NodeSettings,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        RunningNode::start_full(settings, Seams::none(), kv, listeners, wiring).await
    }

    /// The script: listeners and identity, cluster, the planes, boot, workers, servers.
    async fn start_full(
        settings: NodeSettings,
        seams: Seams,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        // The node's own metrics: one instance, handed to every component that counts.
        let telemetry = Arc::new(SelfMetrics::new());
        // 1. Listeners and identity.
        let bound = listeners::prepare(listeners, settings.agent_tls.as_ref())?;
        let node_id = resolve_node_id(settings.node_id.as_deref(), &wiring::admin_advertise(wiring.as_ref(), bound.admin_addr));
        let shutdown = CancellationToken::new();
        let mut workers = WorkerRunner::new(shutdown.child_token());

        // 2. Membership and the bus: the workflow's peers need them.
        let cluster = wiring::join_cluster(wiring, &node_id, &telemetry).await?;
        let (notice_worker, peers) = wiring::workflow_peers(seams.peers, cluster.as_ref());
        // Who owns which entity and scrape target (gossip's live set, or this node alone), and
        // where scrapes are shown.
        let live = wiring::live_nodes(cluster.as_ref(), &node_id);
        let scrape_board = Arc::new(ScrapeBoard::new());

        // 3. The data stores (their own key spaces of the same database) and the exporters.
        let stores = data_plane::open_stores(&kv, &settings, seams.metric_reader, &live, &telemetry, &mut workers)?;

        // 4. The control plane on management storage, and the alarm rules its resets reach.
        let control = control_plane::build(kv, &settings, &node_id, peers, &telemetry)?;
        let alarm_parts = alarms::build(&settings.alarms, &telemetry)?;
        control.runtime.set_alarms(alarm_parts.alarms.clone());
        control.runtime.set_alarm_settings(alarm_parts.live.clone());

        // 5. The agent service, dispatch and the receivers, and the admin API's state.
        let config = api::config_state(&settings)?;
        let (agents, catch_up) = api::agent_service(&settings, &control.store, cluster.as_ref())?;
        let sinks = data_plane::Sinks { samples: seams.data_sink, logs: seams.log_sink };
        let data = data_plane::build(&settings, &control, &stores, sinks, &telemetry)?;
        let state = api::admin_state(
            &settings,
            api::AdminParts {
                node_id: &node_id,
                control: &control,
                stores: &stores,
                dispatcher: &data.dispatcher,
                agents: &agents,
                config,
                cluster: cluster.as_ref(),
                workers: workers.health(),
                telemetry: &telemetry,
                scrape: &scrape_board,
            },
        )?;

        // 6. Boot: one synchronous scan before the admin port serves anything.
        let boot_report = boot::boot(&control.scanner, &control.store, &control.clock).await;
        tracing::info!(node = %node_id, actions = boot_report.actions.len(), failed = boot_report.failed.len(), "boot finished");
        state.set_ready(true);

        // 7. Workers, replication, then the servers.
        workers::spawn_scan(&mut workers, &control, cluster.as_ref());
        workers::spawn_agent_maintenance(&mut workers, &agents, seams.agent_flush_interval);
        let scrape = workers::ScrapeParts { live: live.clone(), board: scrape_board };
        workers::spawn_data_workers(&mut workers, &settings, &data.ingest, &stores, scrape);
        workers::spawn_handoff(&mut workers, &stores, &live, cluster.as_ref(), &telemetry);
        alarms::spawn(&mut workers, alarm_parts, stores.metric_reader.clone(), stores.alarm_store.clone(), &live, cluster.as_ref(), &control.runtime);
        workers::spawn_reload(&mut workers, &settings, &control, &state);
        workers::spawn_roller(&mut workers, &settings, &node_id, &control, &state, cluster.as_ref(), seams.roll_worker);
        let mut servers = Servers::new();
        if let (Some(parts), Some(catch_up)) = (cluster, catch_up) {
            let replication = wiring::ReplicationParts {
                control: &control,
                state: &state,
                metric_reader: stores.metric_reader.clone(),
                handoff: data_plane::handoff_receiver(&stores, &telemetry),
                log_reader: stores.log_store.clone(),
                alarm_reader: stores.alarm_store.clone(),
                catch_up,
                notice_worker,
            };
            wiring::start_replication(parts, replication, &mut workers, &mut servers, &settings.limits, &shutdown).await;
        }
        let served = listeners::Served { state: state.clone(), agents, ingest: data.ingest, skywalking: data.skywalking };
        listeners::serve_admin_and_data(bound.admin, bound.data, bound.grpc, served, &settings.limits, &shutdown, &mut servers);
        tracing::info!(
            node = %node_id, admin = %bound.admin_addr, data = ?bound.data_addr, grpc = ?bound.grpc_addr,
            data_tls = settings.agent_tls.is_some(), "serving"
        );
        Ok(RunningNode {
            admin_addr: bound.admin_addr,
            data_addr: bound.data_addr,
            grpc_addr: bound.grpc_addr,
            state,
            boot_report,
            metric_store: stores.metric_store,
            log_store: stores.log_store,
            alarm_store: stores.alarm_store,
            telemetry,
            dispatch_writer: stores.metric_writer,
            log_exporter: stores.log_exporter,
            shutdown,
            servers,
            workers,
        })
    }

    /// Where dispatch writes computed metric values: the store, then the remote-write exporter
    /// (when configured), which marks each value's minute for export.
    pub fn metric_writer(&self) -> Arc<dyn MetricWriter> {
        self.dispatch_writer.clone()
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

    /// Tears down in reverse: the servers, then dispatch, then the workers (bounded), then gossip.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        stop_servers(self.servers).await;
        stop_dispatch(&self.state).await;
        stop_workers(self.workers).await;
        leave_gossip(&self.state).await;
    }
}

/// Waits for the servers (already told to stop), last started first.
async fn stop_servers(servers: Servers) {
    for (name, server) in servers.into_iter().rev() {
        if let Err(e) = server.await {
            tracing::error!(server = name, error = %e, "server task failed");
        }
    }
}

/// The receivers are closed: the evaluation threads finish what is queued (bounded by the
/// queues) and stop, before the workers, so the exporters' final flush holds it.
async fn stop_dispatch(state: &AdminState) {
    let dispatcher = state.dispatcher.clone();
    if tokio::task::spawn_blocking(move || dispatcher.stop()).await.is_err() {
        tracing::error!("stopping dispatch failed");
    }
}

/// Waits for the workers, aborting those still running after [`WORKER_SHUTDOWN_BOUND`].
async fn stop_workers(workers: WorkerRunner) {
    let report = workers.shutdown(WORKER_SHUTDOWN_BOUND).await;
    if !report.aborted.is_empty() {
        tracing::error!(workers = ?report.aborted, "workers aborted at shutdown");
    }
}

/// Gossip stops here whoever still holds the membership, so the node's gossip address is free
/// for a restart in the same process.
async fn leave_gossip(state: &AdminState) {
    if let Some(cluster) = &state.cluster
        && let Err(e) = cluster.membership.shutdown().await
    {
        tracing::warn!(error = %e, "stopping gossip");
    }
}
