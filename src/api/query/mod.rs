//! Query: reading stored metric values back, through two HTTP APIs on the admin port.
//!
//! - `/query/metrics`, `/query/metrics/list`, `/query/metrics/entities` ([`json_api`]): hotrule's
//!   own JSON, SkyWalking-shaped (name, entity filters, start/end, MINUTE|HOUR|DAY step). The
//!   handlers are in `http::query`; this module computes their bodies.
//! - The Prometheus HTTP API subset ([`prom_api`]): `/api/v1/query`, `/query_range`, `/series`,
//!   `/labels`, `/label/{name}/values`, `/status/buildinfo`, `/metadata`, for Grafana and
//!   `promtool`. PromQL is parsed by `promql-parser` and evaluated by the pure `promql-engine`
//!   crate; labels from `metrics::prom`.
//!
//! - `/query/logs` ([`logs_api`]): the kept logs of the node's log store (with `cluster=true`,
//!   of every live node's, merged by time), filtered and paged.
//! - `/query/alarms` ([`alarms_api`]): the stored alarm records (by default on a clustered node,
//!   every live node's, merged newest first), filtered and paged as SkyWalking's `queryAlarms`.
//!
//! Reads go to the node's [`MetricReader`] (off the async threads) and, for a cluster-wide read,
//! to every live peer over the bus (`QueryPartials` / `ListMetrics` / `QueryLogs` / `QueryAlarms`) with a
//! per-node deadline. A peer that does not answer in time is named in the answer (`partial` /
//! `warnings`), never waited for. Several nodes' cells merge exactly, by each metric's
//! downsampling function, before they are finalized (`data::metrics::partial`); their logs
//! merge by time ([`logs_api::cluster`]).
//! The pure parts (parsing, matching, evaluation, merging) have no IO.

pub mod alarms_api;
pub mod json_api;
pub mod logs_api;
pub mod memory;
pub mod prom_api;
pub mod prom_eval;
pub mod time;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::cluster::bus::query::{MetricQuery, PartialSeriesWire};
use crate::base::ids::NodeId;
use crate::data::metrics::partial::{self, InFlight, NodeAnswer, merge_cluster};
use crate::data::metrics::{Granularity, MetricInfo, MetricReader, MetricStoreError, PartialSeries, Series, SeriesFilter};
use crate::cluster::replication::Cluster;

/// A query parameter refused: `invalid_parameter` (400) with what was wrong.
fn invalid(message: impl Into<String>) -> crate::control::outcome::Outcome {
    crate::control::outcome::Outcome::new(crate::control::outcome::ApplyStatus::InvalidParameter, message)
}

/// A true/false query parameter: `true`, `1` or `yes` / `false`, `0` or `no` in any case (the
/// value as given, trimmed, empty meaning absent); none when absent, `invalid_parameter`
/// naming `name` otherwise.
pub fn bool_param(name: &str, value: Option<&str>) -> Result<Option<bool>, crate::control::outcome::Outcome> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("false" | "0" | "no") => Ok(Some(false)),
        Some("true" | "1" | "yes") => Ok(Some(true)),
        Some(other) => Err(invalid(format!("query parameter {name}: {other:?} is not true or false"))),
    }
}

/// How many times a cluster metric read is done when partial state moved under it.
pub const READ_ATTEMPTS: usize = 3;

/// How queries behave; defaults from named functions (the `query` section of the node
/// configuration, [`RawQuery`]).
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySettings {
    /// How long a cluster-wide read waits for one peer.
    pub fan_out_timeout: Duration,
    /// The Prometheus lookback: an instant value is the latest point within this before `time`.
    pub lookback_ms: i64,
    /// How long one PromQL evaluation may take once its series are read (Prometheus'
    /// `--query.timeout`): `503 timeout` past it.
    pub timeout: Duration,
    /// Samples one PromQL query may hold at once (Prometheus' `--query.max-samples`):
    /// `422 execution` past it.
    pub max_samples: usize,
    /// The step of a subquery written without one (Prometheus' `evaluation_interval`).
    pub subquery_step_ms: i64,
    /// PromQL evaluations running at once (Prometheus' `--query.max-concurrency`); more wait,
    /// within `timeout`, then `503 timeout`.
    pub max_concurrency: usize,
}

pub fn default_fan_out_timeout() -> Duration {
    Duration::from_secs(2)
}

/// Prometheus's default `--query.lookback-delta`.
pub fn default_lookback_ms() -> i64 {
    5 * 60_000
}

/// Prometheus's default `--query.timeout`.
pub fn default_query_timeout() -> Duration {
    Duration::from_secs(120)
}

/// Prometheus's default `--query.max-samples`.
pub const DEFAULT_MAX_SAMPLES: usize = 50_000_000;

impl Default for QuerySettings {
    fn default() -> QuerySettings {
        QuerySettings {
            fan_out_timeout: default_fan_out_timeout(),
            lookback_ms: default_lookback_ms(),
            timeout: default_query_timeout(),
            max_samples: DEFAULT_MAX_SAMPLES,
            subquery_step_ms: hotrule_promql_engine::DEFAULT_SUBQUERY_STEP_MS,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }
}

/// Prometheus's default `--query.max-concurrency`.
pub const DEFAULT_MAX_CONCURRENCY: usize = 20;

/// `query:` as read: each key defaults to Prometheus' own default.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuery {
    /// Prometheus' `--query.lookback-delta`.
    #[serde(default = "raw_lookback_delta")]
    pub lookback_delta: crate::base::duration::DurationSetting,
    /// Prometheus' `--query.timeout`.
    #[serde(default = "raw_timeout")]
    pub timeout: crate::base::duration::DurationSetting,
    /// Prometheus' `--query.max-samples`.
    #[serde(default = "raw_max_samples")]
    pub max_samples: usize,
    /// Prometheus' `evaluation_interval`: the step of a subquery written without one.
    #[serde(default = "raw_evaluation_interval")]
    pub evaluation_interval: crate::base::duration::DurationSetting,
    /// Prometheus' `--query.max-concurrency`.
    #[serde(default = "raw_max_concurrency")]
    pub max_concurrency: usize,
    /// How long a cluster-wide read waits for one peer.
    #[serde(default = "raw_fan_out_timeout")]
    pub fan_out_timeout: crate::base::duration::DurationSetting,
}

fn raw_lookback_delta() -> crate::base::duration::DurationSetting {
    crate::base::duration::DurationSetting(Duration::from_millis(default_lookback_ms() as u64))
}
fn raw_timeout() -> crate::base::duration::DurationSetting {
    crate::base::duration::DurationSetting(default_query_timeout())
}
fn raw_max_samples() -> usize {
    DEFAULT_MAX_SAMPLES
}
fn raw_max_concurrency() -> usize {
    DEFAULT_MAX_CONCURRENCY
}
fn raw_evaluation_interval() -> crate::base::duration::DurationSetting {
    crate::base::duration::DurationSetting(Duration::from_millis(hotrule_promql_engine::DEFAULT_SUBQUERY_STEP_MS as u64))
}
fn raw_fan_out_timeout() -> crate::base::duration::DurationSetting {
    crate::base::duration::DurationSetting(default_fan_out_timeout())
}

impl Default for RawQuery {
    fn default() -> RawQuery {
        RawQuery {
            lookback_delta: raw_lookback_delta(),
            timeout: raw_timeout(),
            max_samples: raw_max_samples(),
            evaluation_interval: raw_evaluation_interval(),
            max_concurrency: raw_max_concurrency(),
            fan_out_timeout: raw_fan_out_timeout(),
        }
    }
}

impl RawQuery {
    /// The settings; every duration must be positive (at least a millisecond) and `max_samples`
    /// at least 1.
    pub fn validate(&self, issue: &mut impl FnMut(&str, String)) -> QuerySettings {
        let millis = |key: &str, value: Duration, issue: &mut dyn FnMut(&str, String)| -> i64 {
            let ms = i64::try_from(value.as_millis()).unwrap_or(i64::MAX);
            if ms < 1 {
                issue(key, "must be at least 1ms".into());
            }
            ms.max(1)
        };
        let lookback_ms = millis("query.lookback_delta", self.lookback_delta.0, issue);
        millis("query.timeout", self.timeout.0, issue);
        let subquery_step_ms = millis("query.evaluation_interval", self.evaluation_interval.0, issue);
        millis("query.fan_out_timeout", self.fan_out_timeout.0, issue);
        if self.max_samples == 0 {
            issue("query.max_samples", "must be at least 1".into());
        }
        if !(1..=MAX_CONCURRENCY_SETTING).contains(&self.max_concurrency) {
            issue("query.max_concurrency", format!("must be 1..={MAX_CONCURRENCY_SETTING}"));
        }
        QuerySettings {
            fan_out_timeout: self.fan_out_timeout.0,
            lookback_ms,
            timeout: self.timeout.0,
            max_samples: self.max_samples.max(1),
            subquery_step_ms,
            max_concurrency: self.max_concurrency.clamp(1, MAX_CONCURRENCY_SETTING),
        }
    }
}

/// The most PromQL evaluations at once a node may be configured for (each holds a blocking
/// thread while it runs).
const MAX_CONCURRENCY_SETTING: usize = 256;

/// Why a read failed as a whole (a peer's failure only makes it partial).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("this node has no metric storage configured")]
    NoStorage,
    #[error("reading the metric store: {0}")]
    Store(#[from] MetricStoreError),
    #[error("the metric read task failed: {0}")]
    Task(String),
    #[error("this node has no log storage configured")]
    NoLogStorage,
    #[error("reading the log store: {0}")]
    LogStore(#[from] crate::data::logs::LogStoreError),
    #[error("this node has no alarm-record storage configured")]
    NoAlarmStorage,
    #[error("reading the alarm-record store: {0}")]
    AlarmStore(#[from] crate::data::alarm_records::AlarmRecordError),
}

/// Where a read goes: this node only, or every live node with a per-peer deadline.
#[derive(Debug, Clone, Copy)]
pub struct Reach {
    pub cluster: bool,
    pub timeout: Duration,
}

/// A peer that did not contribute, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub node: NodeId,
    pub reason: String,
}

impl Missing {
    /// The line a Prometheus `warnings` entry carries.
    pub fn warning(&self) -> String {
        format!("node {} did not contribute (results are partial): {}", self.node, self.reason)
    }
}

/// What a read gathered: merged series, the metrics they belong to, who answered and who not.
#[derive(Debug, Default)]
pub struct Gathered {
    pub series: Vec<Series>,
    pub metrics: BTreeMap<String, MetricInfo>,
    pub nodes: Vec<NodeId>,
    pub missing: Vec<Missing>,
}

/// The node's query side: its metric store and, in a cluster, the bus to its peers.
pub struct QueryService {
    pub node_id: NodeId,
    reader: Option<Arc<dyn MetricReader>>,
    cluster: Option<Arc<Cluster>>,
    pub settings: QuerySettings,
    /// Slots for PromQL evaluations at once (`query.max_concurrency`); a query waits for one.
    pub evaluations: Arc<tokio::sync::Semaphore>,
    /// The node's log store (`/query/logs`); none: that route answers `storage_unavailable`.
    logs: Option<Arc<dyn crate::data::logs::LogReader>>,
    /// The node's alarm records (`/query/alarms`); none: that route answers `storage_unavailable`.
    alarms: Option<Arc<dyn crate::data::alarm_records::AlarmRecordReader>>,
}

impl QueryService {
    pub fn new(node_id: NodeId, reader: Option<Arc<dyn MetricReader>>, cluster: Option<Arc<Cluster>>, settings: QuerySettings) -> QueryService {
        let evaluations = Arc::new(tokio::sync::Semaphore::new(settings.max_concurrency));
        QueryService { node_id, reader, cluster, settings, evaluations, logs: None, alarms: None }
    }

    /// The same service, reading logs from `logs`.
    pub fn with_logs(mut self, logs: Arc<dyn crate::data::logs::LogReader>) -> QueryService {
        self.logs = Some(logs);
        self
    }

    /// The same service, reading alarm records from `alarms`.
    pub fn with_alarms(mut self, alarms: Arc<dyn crate::data::alarm_records::AlarmRecordReader>) -> QueryService {
        self.alarms = Some(alarms);
        self
    }

    /// Whether this node has peers to fan out to.
    pub fn clustered(&self) -> bool {
        self.cluster.is_some()
    }

    /// The reach of a read, with `timeout` capping the per-peer deadline.
    pub fn reach(&self, cluster: bool, timeout: Option<Duration>) -> Reach {
        let limit = self.settings.fan_out_timeout;
        Reach { cluster: cluster && self.cluster.is_some(), timeout: timeout.map_or(limit, |t| t.min(limit)) }
    }

    /// The metrics stored here (and on every live peer with `reach.cluster`).
    pub async fn list(&self, reach: Reach) -> Result<Gathered, QueryError> {
        let local = self.blocking(|reader| reader.metrics()).await?;
        let mut gathered = Gathered { nodes: vec![self.node_id.clone()], ..Gathered::default() };
        for info in local {
            gathered.metrics.insert(info.name.clone(), info);
        }
        if reach.cluster {
            for (node, answer) in self.ask_peers(|_| BusRequest::ListMetrics, reach.timeout).await {
                match answer {
                    Ok(BusResponse::MetricList { metrics }) => {
                        gathered.nodes.push(node);
                        for info in metrics {
                            gathered.metrics.entry(info.name.clone()).or_insert_with(|| info.into());
                        }
                    }
                    other => gathered.missing.push(missing(node, other)),
                }
            }
        }
        Ok(gathered)
    }

    /// The series of `filter` in `[start_ms, end_ms]` at `granularity`, merged across nodes:
    /// every node's stored partial state (cells, unfinalized) merged cell by cell with the
    /// metric's function, then finalized once, so the value is the one a single node would have
    /// computed from all the samples (`data::metrics::partial`). In a cluster, once every answer
    /// is in, each node is asked for its handoff generation again; when one moved partial state
    /// after it answered, the read is done again (at most [`READ_ATTEMPTS`] times), since that
    /// one order of answers can count a moving record twice (`partial::unchanged`).
    pub async fn read(&self, filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64, reach: Reach) -> Result<Gathered, QueryError> {
        let mut attempt = 1;
        let (mut gathered, answers) = loop {
            let (gathered, answers) = self.gather(filter, granularity, start_ms, end_ms, reach).await?;
            if !reach.cluster || attempt >= READ_ATTEMPTS || partial::unchanged(&answers, &self.generations(reach).await) {
                if reach.cluster && attempt >= READ_ATTEMPTS {
                    tracing::debug!(metric = %filter.metric, "cluster read: partial state kept moving; the last of {READ_ATTEMPTS} reads is served");
                }
                break (gathered, answers);
            }
            attempt += 1;
        };
        let merged = merge_cluster(answers);
        if merged.mismatched > 0 {
            tracing::warn!(metric = %filter.metric, cells = merged.mismatched, "cluster read: cells of another shape on some node left out (a reshape not yet everywhere)");
        }
        gathered.series = merged.series.iter().map(|series| series.finalize(granularity)).collect();
        Ok(gathered)
    }

    /// One look at every node's partial state (this node's, and with `reach.cluster` every live
    /// peer's): the metrics and nodes, and each node's answer.
    async fn gather(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
        reach: Reach,
    ) -> Result<(Gathered, Vec<NodeAnswer>), QueryError> {
        let local_filter = filter.clone();
        let (local_metrics, local) = self
            .blocking(move |reader| {
                let state = reader.read_partial_state(&local_filter, granularity, start_ms, end_ms)?;
                Ok((reader.metrics()?, state))
            })
            .await?;
        let mut gathered = Gathered { nodes: vec![self.node_id.clone()], ..Gathered::default() };
        for info in local_metrics {
            gathered.metrics.insert(info.name.clone(), info);
        }
        let mut answers = vec![NodeAnswer { node: self.node_id.clone(), series: local.0, in_flight: local.1 }];
        if reach.cluster {
            let query = MetricQuery::new(filter, granularity, start_ms, end_ms);
            let request = |_: &NodeId| BusRequest::QueryPartials { query: query.clone() };
            for (node, answer) in self.ask_peers(request, reach.timeout).await {
                match answer.map(decode_partials) {
                    Ok(Ok((metrics, series, in_flight))) => {
                        gathered.nodes.push(node.clone());
                        for info in metrics {
                            gathered.metrics.entry(info.name.clone()).or_insert(info);
                        }
                        answers.push(NodeAnswer { node, series, in_flight });
                    }
                    Ok(Err(reason)) => gathered.missing.push(missing(node, Err(reason))),
                    Err(reason) => gathered.missing.push(missing(node, Err(reason))),
                }
            }
        } else {
            // This node alone: what it sent away is not here, and is not read either.
            answers[0].in_flight = InFlight::default();
        }
        Ok((gathered, answers))
    }

    /// Every node's handoff generation now (the nodes that answer).
    async fn generations(&self, reach: Reach) -> BTreeMap<NodeId, u64> {
        let mut out = BTreeMap::new();
        if let Ok(local) = self.blocking(|reader| Ok(reader.handoff_generation())).await {
            out.insert(self.node_id.clone(), local);
        }
        for (node, answer) in self.ask_peers(|_| BusRequest::HandoffGeneration, reach.timeout).await {
            if let Ok(BusResponse::Generation { generation }) = answer {
                out.insert(node, generation);
            }
        }
        out
    }

    /// Runs `work` on the store off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn MetricReader) -> Result<T, MetricStoreError> + Send + 'static,
    ) -> Result<T, QueryError> {
        let reader = self.reader.clone().ok_or(QueryError::NoStorage)?;
        tokio::task::spawn_blocking(move || work(reader.as_ref()))
            .await
            .map_err(|e| QueryError::Task(e.to_string()))?
            .map_err(QueryError::Store)
    }

    /// Sends every live peer at once its `request` (a log read asks each peer for its own
    /// page); each answer or why there is none, by peer in id order. Each call is bounded by
    /// `timeout`, so the whole fan-out is too. A member the view holds dead is not asked but
    /// listed (its data is missing from the answer too).
    async fn ask_peers(
        &self,
        request: impl Fn(&NodeId) -> BusRequest,
        timeout: Duration,
    ) -> Vec<(NodeId, Result<BusResponse, String>)> {
        let Some(cluster) = &self.cluster else { return Vec::new() };
        let view = cluster.view();
        let mut peers: Vec<_> = view.live_peers().cloned().collect();
        peers.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        let dead = view
            .members
            .iter()
            .filter(|m| !m.live && m.node_id != view.self_id)
            .map(|m| (m.node_id.clone(), Err("not live in this node's cluster view".to_string())));
        let dead: Vec<_> = dead.collect();
        let calls = peers.into_iter().map(|peer| {
            let cluster = cluster.clone();
            let request = request(&peer.node_id);
            async move {
                // The bus call has its own deadline; the outer one guards against a transport
                // that would not honour it.
                let call = cluster.call(&peer, request, timeout);
                let answer = match tokio::time::timeout(timeout + Duration::from_millis(250), call).await {
                    Ok(Ok(response)) => Ok(response),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {timeout:?}")),
                };
                (peer.node_id, answer)
            }
        });
        let mut answers = crate::cluster::replication::peers::futures_join(calls).await;
        answers.extend(dead);
        answers.sort_by(|a, b| a.0.cmp(&b.0));
        answers
    }
}

/// A peer's `MetricPartials` answer, decoded; any other answer (an error, a build that does not
/// know the request) is why the peer is missing.
fn decode_partials(answer: BusResponse) -> Result<(Vec<MetricInfo>, Vec<PartialSeries>, InFlight), String> {
    match answer {
        BusResponse::MetricPartials { metrics, series, in_flight } => {
            let series = series.into_iter().map(PartialSeriesWire::decode).collect::<Result<Vec<_>, _>>()?;
            Ok((metrics.into_iter().map(MetricInfo::from).collect(), series, in_flight.decode()?))
        }
        BusResponse::Error { message } => Err(message),
        other => Err(format!("unexpected answer {}", other.name())),
    }
}

fn missing(node: NodeId, answer: Result<BusResponse, String>) -> Missing {
    let reason = match answer {
        Ok(BusResponse::Error { message }) => message,
        Ok(other) => format!("unexpected answer {}", other.name()),
        Err(reason) => reason,
    };
    tracing::debug!(peer = %node, %reason, "peer left out of a cluster-wide read");
    Missing { node, reason }
}
