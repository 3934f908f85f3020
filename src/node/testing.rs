//! The test seam: starting a node with some of its own parts replaced. [`NodeSettings`] holds
//! only what an operator configures; what a test (or `hotrule bench`, driving an in-process
//! node) puts in place of the node's own parts lives here, in a [`NodeBuilder`]:
//!
//! - the workflow's peers (instead of none alone, or the cluster's);
//! - the sink the receivers hand samples to, and the one they hand logs to (instead of dispatch);
//! - the metric reader queries and export read (instead of the node's metric store);
//! - whether the main's roll worker advances rolls (tests that move a roll's index by hand turn
//!   it off);
//! - how often agent state is flushed to storage (500 ms here, so tests see it soon).
//!
//! ```ignore
//! let node = NodeBuilder::new(NodeSettings::for_test()).data_sink(sink.clone()).start(kv, listener).await?;
//! ```
//!
//! A production node starts through [`RunningNode::start_with_listeners`], with none of these.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::control::workflow::Peers;
use crate::data::metrics::MetricReader;
use crate::data::seam::{BatchSink, LogSink};
use crate::store::kv::KvEngine;

use super::{ClusterWiring, Listeners, NodeError, NodeSettings, RunningNode};

/// How often a test node flushes agent state to storage.
pub const TEST_AGENT_FLUSH_INTERVAL: Duration = Duration::from_millis(500);

/// What may replace a node's own parts. A production node has none of them (`Seams::none`).
pub(super) struct Seams {
    pub(super) peers: Option<Arc<dyn Peers>>,
    pub(super) data_sink: Option<Arc<dyn BatchSink>>,
    pub(super) log_sink: Option<Arc<dyn LogSink>>,
    pub(super) metric_reader: Option<Arc<dyn MetricReader>>,
    pub(super) roll_worker: bool,
    pub(super) agent_flush_interval: Duration,
}

impl Seams {
    /// The node's own parts throughout.
    pub(super) fn none() -> Seams {
        Seams {
            peers: None,
            data_sink: None,
            log_sink: None,
            metric_reader: None,
            roll_worker: true,
            agent_flush_interval: crate::api::agents::maintenance::default_flush_interval(),
        }
    }
}

/// A node to start in a test: its settings, and the parts replaced in it.
pub struct NodeBuilder {
    settings: NodeSettings,
    seams: Seams,
}

impl From<NodeSettings> for NodeBuilder {
    fn from(settings: NodeSettings) -> NodeBuilder {
        NodeBuilder::new(settings)
    }
}

impl NodeBuilder {
    /// A node with `settings` (usually from [`NodeSettings::for_test`]), agent state flushed
    /// every [`TEST_AGENT_FLUSH_INTERVAL`], and its own parts otherwise.
    pub fn new(settings: NodeSettings) -> NodeBuilder {
        NodeBuilder { settings, seams: Seams { agent_flush_interval: TEST_AGENT_FLUSH_INTERVAL, ..Seams::none() } }
    }

    /// The settings the node starts with.
    pub fn settings(&self) -> &NodeSettings {
        &self.settings
    }

    /// The workflow's view of the other nodes, instead of none (alone) or the cluster's.
    pub fn peers(mut self, peers: Arc<dyn Peers>) -> NodeBuilder {
        self.seams.peers = Some(peers);
        self
    }

    /// Where the receivers hand samples, instead of the node's dispatcher (tests that record
    /// batches).
    pub fn data_sink(mut self, sink: Arc<dyn BatchSink>) -> NodeBuilder {
        self.seams.data_sink = Some(sink);
        self
    }

    /// Where the receivers hand logs, instead of the node's dispatcher (tests that record log
    /// batches).
    pub fn log_sink(mut self, sink: Arc<dyn LogSink>) -> NodeBuilder {
        self.seams.log_sink = Some(sink);
        self
    }

    /// What queries (and export) read, instead of the node's metric store.
    pub fn metric_reader(mut self, reader: Arc<dyn MetricReader>) -> NodeBuilder {
        self.seams.metric_reader = Some(reader);
        self
    }

    /// Whether the main's roll worker advances rolls (on by default); tests of the control side
    /// that move a roll's index by hand turn it off.
    pub fn roll_worker(mut self, on: bool) -> NodeBuilder {
        self.seams.roll_worker = on;
        self
    }

    /// Builds and boots the node on `kv`, alone, serving the admin API on `listener`.
    pub async fn start(self, kv: Arc<dyn KvEngine>, listener: TcpListener) -> Result<RunningNode, NodeError> {
        self.start_with_listeners(kv, Listeners { admin: listener, data: None, grpc: None }, None).await
    }

    /// The node in a cluster, serving the admin API on `listener`.
    pub async fn start_clustered(self, kv: Arc<dyn KvEngine>, listener: TcpListener, wiring: ClusterWiring) -> Result<RunningNode, NodeError> {
        self.start_with_listeners(kv, Listeners { admin: listener, data: None, grpc: None }, Some(wiring)).await
    }

    /// The node on the given listeners, alone (`wiring` none) or in a cluster.
    pub async fn start_with_listeners(
        self,
        kv: Arc<dyn KvEngine>,
        listeners: Listeners,
        wiring: Option<ClusterWiring>,
    ) -> Result<RunningNode, NodeError> {
        RunningNode::start_full(self.settings, self.seams, kv, listeners, wiring).await
    }
}
