//! Answers peers over the bus: Forward (handed to the admin API, see [`ForwardTarget`]),
//! Suspend/Resume through the origin lattice, commit notices (see `notices`), storage sync, and the
//! read-only views behind cluster-wide admin reads (so those never carry an operator's token),
//! and reads of this node's metric and log stores behind cluster-wide metric and log queries.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bus::messages::{BusRequest, BusResponse, ForwardOp, NodeView, ReplicaAnswer, ReplicaItem, ResumeState, SuspendState};
use crate::cluster::bus::log_query::{LogQuery, StoredLogWire};
use crate::cluster::bus::query::{InFlightWire, MetricInfoWire, MetricQuery, PartialSeriesWire, SeriesWire};
use crate::cluster::bus::server::BusHandler;
use crate::cluster::bus::alarm_query::AlarmRecordWire;
use crate::data::alarm_records::{AlarmFilter, AlarmRecordReader};
use crate::data::logs::LogReader;
use crate::data::metrics::MetricReader;
use crate::base::ids::RuleKey;
use crate::control::runtime::locks::FileLocks;
use crate::control::runtime::{Origin, ResumeResult, Runtime, SuspendResult};
use crate::store::Store;
use crate::BoxFuture;

use super::notices::{Notice, NoticeReceiver};
use super::{Cluster, summaries};

/// Runs a request forwarded to this node (a write, or an apply-status read) and answers it as
/// the admin API would: (HTTP status, body), relayed unchanged by the forwarding node.
/// Implemented by `http`, so replication neither runs operations nor renders bodies.
pub trait ForwardTarget: Send + Sync {
    fn run<'a>(&'a self, op: ForwardOp) -> BoxFuture<'a, (u16, Vec<u8>)>;
}

/// Renders a read-only view of this node as JSON (what a peer fanning out an admin read sees).
pub type ViewSource = Arc<dyn Fn(NodeView) -> Vec<u8> + Send + Sync>;

/// How long a Suspend waits for the file's lock before refusing.
const SUSPEND_LOCK_WAIT: Duration = Duration::from_millis(500);

pub struct NodeBusHandler {
    pub cluster: Arc<Cluster>,
    pub store: Arc<Store>,
    pub runtime: Arc<Runtime>,
    pub locks: Arc<FileLocks>,
    pub notices: NoticeReceiver,
    pub forwarded: Arc<dyn ForwardTarget>,
    pub views: ViewSource,
    /// This node's metric store, when it has one (peers' cluster-wide metric queries read it).
    pub metrics: Option<Arc<dyn MetricReader>>,
    /// Where peers' handoff records are applied (this node's metric store).
    pub handoff: Option<Arc<dyn crate::data::metrics::handoff::HandoffReceiver>>,
    /// This node's log store, when it has one (peers' cluster-wide log queries read it).
    pub logs: Option<Arc<dyn LogReader>>,
    /// This node's alarm-record store (peers' cluster-wide alarm queries read it).
    pub alarms: Option<Arc<dyn AlarmRecordReader>>,
}

impl NodeBusHandler {
    async fn suspend(&self, key: RuleKey) -> BusResponse {
        let node = self.cluster.self_id().clone();
        // The lock is only held to order the lattice change against a local apply in progress.
        let state = match self.locks.lock(&key, SUSPEND_LOCK_WAIT).await {
            None => SuspendState::Rejected,
            Some(_guard) => match self.runtime.suspend(&key, Origin::Peer, true) {
                SuspendResult::Suspended => SuspendState::Suspended,
                SuspendResult::AlreadySuspended => SuspendState::AlreadySuspended,
                SuspendResult::NotPresent => SuspendState::NotPresent,
                SuspendResult::Rejected => SuspendState::Rejected,
            },
        };
        if state == SuspendState::Rejected {
            tracing::warn!(rule = %key, "ORIGIN CONFLICT: suspend from a peer refused; another main may be applying it");
        }
        if matches!(state, SuspendState::Suspended | SuspendState::AlreadySuspended) {
            self.drain(&key).await;
        }
        BusResponse::SuspendAck { node, state }
    }
}

impl NodeBusHandler {
    /// Before the pause is answered, the evaluations opened before it finish, so the main's
    /// commit follows the last value this node computed with the old content. Bounded by
    /// `dispatch.drain_timeout` and by half the main's Suspend deadline (a later answer would
    /// not be heard); past it the pause is answered anyway and the overrun logged.
    async fn drain(&self, key: &RuleKey) {
        let bound = self.runtime.drain_timeout().min(self.cluster.settings.suspend_timeout / 2);
        if !self.runtime.wait_drained(key, std::time::Instant::now() + bound).await {
            tracing::warn!(
                rule = %key,
                in_flight = self.runtime.in_flight(key),
                ?bound,
                "pause answered before the local drain finished; evaluations of the old content may still write"
            );
        }
    }
}

impl NodeBusHandler {
    /// A prepare: stage the entry durably unless this node already holds it (its commit came
    /// first) or its abort did.
    async fn stage(&self, entry: crate::store::RuleEntry, sender: crate::base::ids::NodeId) -> BusResponse {
        if self.store.entry_meta(&entry.key).is_some_and(|m| m.revision >= entry.revision) {
            return BusResponse::Staged;
        }
        let (key, revision) = (entry.key.clone(), entry.revision.clone());
        match self.store.stage(crate::store::staged::StagedRecord { entry, sender }).await {
            Ok(()) => BusResponse::Staged,
            Err(e) => BusResponse::Error { message: format!("staging {key} at {revision}: {e}") },
        }
    }
}

impl NodeBusHandler {
    /// A batch of prepares and commit notices: one key's items in order, different keys'
    /// items concurrently (so their stagings and applies share the store's group commit).
    async fn replicate(&self, items: Vec<ReplicaItem>, sender: crate::base::ids::NodeId) -> BusResponse {
        let count = items.len();
        let mut by_key: std::collections::BTreeMap<RuleKey, Vec<(usize, ReplicaItem)>> = std::collections::BTreeMap::new();
        for (at, item) in items.into_iter().enumerate() {
            by_key.entry(item_key(&item).clone()).or_default().push((at, item));
        }
        let runs = by_key.into_values().map(|group| {
            let sender = sender.clone();
            async move {
                let mut answers = Vec::with_capacity(group.len());
                for (at, item) in group {
                    answers.push((at, answer_of(self.replica_item(item, sender.clone()).await)));
                }
                answers
            }
        });
        let mut answers: Vec<Option<ReplicaAnswer>> = vec![None; count];
        for (at, answer) in futures_util::future::join_all(runs).await.into_iter().flatten() {
            answers[at] = Some(answer);
        }
        BusResponse::Replicated {
            answers: answers
                .into_iter()
                .map(|answer| answer.unwrap_or_else(|| ReplicaAnswer::Error { message: "item not handled".into() }))
                .collect(),
        }
    }

    async fn replica_item(&self, item: ReplicaItem, sender: crate::base::ids::NodeId) -> BusResponse {
        match item {
            ReplicaItem::Prepare { entry } => self.stage(entry, sender).await,
            ReplicaItem::Commit { key, revision, previous, entry, durable } => {
                self.notices.receive(Notice { key, revision, previous, entry, durable, sender }).await
            }
        }
    }
}

fn item_key(item: &ReplicaItem) -> &RuleKey {
    match item {
        ReplicaItem::Prepare { entry } => &entry.key,
        ReplicaItem::Commit { key, .. } => key,
    }
}

/// A batch item's answer: what its own request would have answered.
fn answer_of(response: BusResponse) -> ReplicaAnswer {
    match response {
        BusResponse::Staged => ReplicaAnswer::Staged,
        BusResponse::Ack => ReplicaAnswer::Ack,
        BusResponse::Error { message } => ReplicaAnswer::Error { message },
        other => ReplicaAnswer::Error { message: format!("unexpected answer {}", other.name()) },
    }
}

impl BusHandler for NodeBusHandler {
    fn handle<'a>(&'a self, request: BusRequest) -> BoxFuture<'a, BusResponse> {
        Box::pin(async move {
            let me = self.cluster.self_id().clone();
            match request {
                BusRequest::Forward { sender, .. }
                | BusRequest::ForwardFrom { sender, .. }
                | BusRequest::Suspend { sender, .. }
                | BusRequest::Resume { sender, .. }
                | BusRequest::Prepare { sender, .. }
                | BusRequest::Abort { sender, .. }
                    if sender == me =>
                {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::Forward { op, .. } => {
                    let (http_status, body) = self.forwarded.run(op).await;
                    BusResponse::Forwarded { http_status, body, node: me }
                }
                // The caller is recorded in the history of what the write commits.
                BusRequest::ForwardFrom { op, caller, .. } => {
                    let (http_status, body) = crate::control::history::with_caller(caller, self.forwarded.run(op)).await;
                    BusResponse::Forwarded { http_status, body, node: me }
                }
                BusRequest::HistoryDigest => BusResponse::HistoryDigestReply { ids: super::history::ids(&self.store) },
                BusRequest::FetchHistory { ids } => super::history::fetch(&self.store, ids).await,
                BusRequest::Suspend { key, .. } => self.suspend(key).await,
                BusRequest::Resume { key, .. } => {
                    let state = match self.runtime.resume(&key, Origin::Peer) {
                        ResumeResult::Resumed => ResumeState::Resumed,
                        ResumeResult::NotSuspendedBySender => ResumeState::NotSuspendedBySender,
                        ResumeResult::NotPresent => ResumeState::NotPresent,
                        ResumeResult::PartiallyResumed => ResumeState::PartiallyResumed,
                    };
                    BusResponse::ResumeAck { node: me, state }
                }
                BusRequest::NotifyCommitted { key, revision, previous, entry, durable, sender } => {
                    self.notices.receive(Notice { key, revision, previous, entry, durable, sender }).await
                }
                BusRequest::Digest { .. } => BusResponse::DigestReply { entries: summaries(&self.store) },
                BusRequest::FetchEntries { keys } => {
                    let mut entries = Vec::with_capacity(keys.len());
                    for key in keys {
                        match self.store.get_entry(&key).await {
                            Ok(Some(entry)) => entries.push(entry),
                            Ok(None) => {}
                            Err(e) => return BusResponse::Error { message: format!("reading {key}: {e}") },
                        }
                    }
                    BusResponse::Entries { entries }
                }
                BusRequest::ConfirmHeld { key, revision } => {
                    BusResponse::Held { held: self.store.entry_meta(&key).is_some_and(|m| m.revision >= revision) }
                }
                BusRequest::View { what } => BusResponse::View { json: (self.views)(what) },
                BusRequest::QueryMetrics { query } => read_metrics(self.metrics.clone(), MetricRead::Series(query)).await,
                BusRequest::QueryPartials { query } => read_metrics(self.metrics.clone(), MetricRead::Partials(query)).await,
                BusRequest::ListMetrics => read_metrics(self.metrics.clone(), MetricRead::List).await,
                BusRequest::HandOff { sender, .. } if sender == me => {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::HandOff { sender, records } => super::handoff::receive(self.handoff.clone(), sender, records).await,
                BusRequest::QueryLogs { query } => read_logs(self.logs.clone(), query).await,
                BusRequest::AlarmStates { sender, .. } if sender == me => {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::AlarmStates { reset, states, .. } => super::alarms::receive(&self.runtime, reset, states),
                BusRequest::QueryAlarms { filter } => read_alarms(self.alarms.clone(), filter).await,
                BusRequest::HandoffGeneration => match &self.metrics {
                    Some(reader) => BusResponse::Generation { generation: reader.handoff_generation() },
                    None => BusResponse::Error { message: "this node has no metric storage".into() },
                },
                BusRequest::RollNotice { sender, .. } if sender == me => {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::RollNotice { record, .. } => {
                    // A stored record wakes this node's scan through the store (`subscribe_rolls`).
                    match super::rolling::receive_notice(&self.notices.workflow, &record).await {
                        Ok(_) => BusResponse::Ack,
                        Err(message) => BusResponse::Error { message },
                    }
                }
                BusRequest::RollDigest => super::rolling::roll_digest(&self.store).await,
                BusRequest::FetchRolls { keys } => super::rolling::fetch_rolls(&self.store, keys).await,
                BusRequest::Prepare { entry, sender } => self.stage(entry, sender).await,
                BusRequest::Replicate { sender, .. } if sender == me => {
                    BusResponse::Error { message: format!("self-loop from {sender} dropped") }
                }
                BusRequest::Replicate { items, sender } => self.replicate(items, sender).await,
                BusRequest::Abort { key, revision, .. } => match self.store.abort_stage(&key, &revision).await {
                    Ok(()) => BusResponse::Ack,
                    Err(e) => BusResponse::Error { message: format!("abort of {key} at {revision}: {e}") },
                },
                BusRequest::ResolveStaged { key, revision } => {
                    // The lock first: a write that finishes between the two reads is then seen
                    // as held, never as "not written and not writing".
                    let guard = self.locks.try_lock(&key);
                    let holds = self.store.entry_meta(&key).is_some_and(|m| m.revision >= revision);
                    BusResponse::StagedFate { fate: crate::control::rules::staged::fate(holds, guard.is_none()) }
                }
            }
        })
    }
}

/// Reads this node's metric store off the async threads: the series of `query` with the
/// metrics they belong to, or (no query) the metric list.
/// What a peer asked of this node's metric store.
enum MetricRead {
    List,
    /// Finalized series (`QueryMetrics`, asked by builds before partial reads).
    Series(MetricQuery),
    /// Partial state (`QueryPartials`).
    Partials(MetricQuery),
}

async fn read_metrics(reader: Option<Arc<dyn MetricReader>>, read: MetricRead) -> BusResponse {
    let Some(reader) = reader else {
        return BusResponse::Error { message: "this node has no metric storage".into() };
    };
    let read = tokio::task::spawn_blocking(move || -> Result<BusResponse, crate::data::metrics::MetricStoreError> {
        let metrics = reader.metrics()?;
        let (query, partial) = match read {
            MetricRead::List => return Ok(BusResponse::MetricList { metrics: metrics.iter().map(MetricInfoWire::from).collect() }),
            MetricRead::Series(query) => (query, false),
            MetricRead::Partials(query) => (query, true),
        };
        let Some(granularity) = query.granularity() else {
            return Ok(BusResponse::Error { message: format!("unknown granularity {:?}", query.granularity) });
        };
        let filter = query.filter();
        let used = |names: std::collections::BTreeSet<&str>| -> Vec<MetricInfoWire> {
            metrics.iter().filter(|m| names.contains(m.name.as_str())).map(MetricInfoWire::from).collect()
        };
        if partial {
            let (series, in_flight) = reader.read_partial_state(&filter, granularity, query.start_ms, query.end_ms)?;
            let mut names: std::collections::BTreeSet<&str> = series.iter().map(|s| s.metric.as_str()).collect();
            names.extend(in_flight.records.iter().flat_map(|r| r.series.iter().map(|s| s.metric.as_str())));
            let metrics = used(names);
            return Ok(BusResponse::MetricPartials {
                metrics,
                series: series.iter().map(PartialSeriesWire::from).collect(),
                in_flight: InFlightWire::from(&in_flight),
            });
        }
        let series = reader.read(&filter, granularity, query.start_ms, query.end_ms)?;
        let metrics = used(series.iter().map(|s| s.metric.as_str()).collect());
        Ok(BusResponse::MetricSeries { metrics, series: series.iter().map(SeriesWire::from).collect() })
    })
    .await;
    match read {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => BusResponse::Error { message: format!("metric store: {e}") },
        Err(e) => BusResponse::Error { message: format!("metric read failed: {e}") },
    }
}

/// This node's page of a peer's log read, as its own `/query/logs` would read it.
async fn read_logs(reader: Option<Arc<dyn LogReader>>, query: LogQuery) -> BusResponse {
    let Some(reader) = reader else {
        return BusResponse::Error { message: "this node has no log storage".into() };
    };
    let read = tokio::task::spawn_blocking(move || reader.query(&query.filter())).await;
    match read {
        Ok(Ok(logs)) => BusResponse::Logs { logs: logs.iter().map(StoredLogWire::from).collect() },
        Ok(Err(e)) => BusResponse::Error { message: format!("log store: {e}") },
        Err(e) => BusResponse::Error { message: format!("log read failed: {e}") },
    }
}

/// This node's page of a peer's alarm-record read, as its own `/query/alarms` would read it.
async fn read_alarms(reader: Option<Arc<dyn AlarmRecordReader>>, filter: AlarmFilter) -> BusResponse {
    let Some(reader) = reader else {
        return BusResponse::Error { message: "this node has no alarm-record storage".into() };
    };
    match tokio::task::spawn_blocking(move || reader.query(&filter)).await {
        Ok(Ok(page)) => BusResponse::Alarms { records: page.records.iter().map(AlarmRecordWire::from).collect(), total: page.total },
        Ok(Err(e)) => BusResponse::Error { message: format!("alarm-record store: {e}") },
        Err(e) => BusResponse::Error { message: format!("alarm-record read failed: {e}") },
    }
}
