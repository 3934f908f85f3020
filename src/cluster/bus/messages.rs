//! The bus vocabulary: every request a node can send a peer, every answer, and their wire
//! encoding.
//!
//! A message on the wire is one format-version byte, then the bincode (2.x, serde mode) encoding
//! of a [`BusRequest`] or [`BusResponse`], the same scheme as `store::codec`. Decoding reads bytes
//! from the network, so it is bounded ([`MAX_MESSAGE_BYTES`], also passed to bincode as its
//! allocation limit), rejects trailing bytes and never panics.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::BusError;
use super::alarm_query::AlarmRecordWire;
use super::log_query::{LogQuery, StoredLogWire};
use super::query::{InFlightWire, MetricInfoWire, MetricQuery, PartialSeriesWire, SeriesWire};
use crate::base::ids::{ContentHash, NodeId, Revision, RuleKey};
use crate::store::{EntryStatus, RuleEntry};

/// The version byte in front of every bus message. Bump it when a message changes shape.
/// Version 2: `View` added, and calls carry a nonce and signed answers (see `auth`), and
/// `NotifyCommitted` carries the committed entry and the revision it follows. Version 2 has not
/// been released with the shorter `NotifyCommitted`, so both changes share one version.
/// The metric-query messages (`QueryMetrics`, `ListMetrics` and their answers) and the
/// prepare/commit ones (`Prepare`, `Abort`, `ResolveStaged`, `Staged`, `StagedFate`) are appended
/// variants: bincode writes a variant's index, so every earlier message encodes as before, and a
/// node without them refuses only them (an undecodable call), which the asker counts as no answer.
/// Version 3: `NotifyCommitted` says whether the peer's answer is a counted confirmation
/// (`durable`), and `Replicate`/`Replicated` batch prepares and commit notices.
/// The log-query messages (`QueryLogs`, `Logs`) are appended variants too, and so are the
/// alarm-record ones (`QueryAlarms`, `Alarms`).
pub const BUS_FORMAT_VERSION: u8 = 3;

/// The largest encoded message accepted in either direction (64 MiB): a full `Entries` answer
/// for every rule file fits many times over, and a hostile length prefix cannot make a node
/// allocate more.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// bincode with its byte limit set to [`MAX_MESSAGE_BYTES`], so a forged collection length
/// fails instead of reserving memory.
const WIRE_CONFIG: bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_MESSAGE_BYTES>,
> = bincode::config::standard().with_limit::<MAX_MESSAGE_BYTES>();

/// A write operation forwarded from a node that is not the main to the main.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardOp {
    AddOrUpdate {
        key: RuleKey,
        content: Vec<u8>,
        allow_storage_change: bool,
        force: bool,
    },
    Inactivate {
        key: RuleKey,
    },
    Delete {
        key: RuleKey,
        revert_to_bundled: bool,
    },
    /// A management operation on the agents' desired state: `op` is an
    /// [`AgentOp`](crate::control::agents::manage::AgentOp) as JSON, `key` the object it writes.
    Agent {
        key: RuleKey,
        op: Vec<u8>,
    },
    /// A read of a structural apply's status (`GET /runtime/rule/status`), which only the main
    /// holds live: by `apply_id`, or by `key` and optionally the content hash.
    ApplyStatus {
        apply_id: Option<String>,
        key: Option<RuleKey>,
        content_hash: Option<ContentHash>,
    },
    /// `addOrUpdate?rollout=rolling` (issue 15): the write's fields and the roll's settings.
    /// Appended, like every roll message, so earlier variants encode as before.
    RollStart {
        key: RuleKey,
        content: Vec<u8>,
        allow_storage_change: bool,
        force: bool,
        step_timeout_ms: u64,
        health: crate::control::rolling::HealthSettings,
    },
    /// `rollback-rolling`.
    RollRollback { key: RuleKey },
    /// `force-commit-rolling`.
    RollForceCommit { key: RuleKey },
    /// A push (`content`) or delete (`None`) of the runtime alarm settings (the one entry
    /// `control::alarms::live::settings_key` names). Appended.
    AlarmSettings { content: Option<Vec<u8>> },
    /// A dashboard template mutation (`addTemplate` / `changeTemplate` / `disableTemplate`):
    /// `op` is a [`TemplateOp`](crate::control::ui_templates::TemplateOp) as JSON, `key` the
    /// entry it writes. Appended.
    UiTemplate { key: RuleKey, op: Vec<u8> },
}

impl ForwardOp {
    /// The rule file the operation is about (none for a status read by applyId).
    pub fn key(&self) -> Option<&RuleKey> {
        match self {
            ForwardOp::AddOrUpdate { key, .. }
            | ForwardOp::Inactivate { key }
            | ForwardOp::Delete { key, .. }
            | ForwardOp::Agent { key, .. }
            | ForwardOp::RollStart { key, .. }
            | ForwardOp::RollRollback { key }
            | ForwardOp::RollForceCommit { key }
            | ForwardOp::UiTemplate { key, .. } => Some(key),
            ForwardOp::AlarmSettings { .. } => Some(crate::control::alarms::live::settings_key()),
            ForwardOp::ApplyStatus { key, .. } => key.as_ref(),
        }
    }
}

/// What a peer did with a Suspend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SuspendState {
    Suspended,
    AlreadySuspended,
    /// The peer does not run the rule, so there is nothing to pause.
    NotPresent,
    /// The peer is suspended by another origin: a competing main.
    Rejected,
}

/// What a peer did with a Resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResumeState {
    Resumed,
    NotSuspendedBySender,
    NotPresent,
    /// The sender's suspension is cleared but another origin still holds the rule.
    PartiallyResumed,
}

/// One entry without its content, enough to compare replicas: what `Digest` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntrySummary {
    pub key: RuleKey,
    pub revision: Revision,
    pub content_hash: ContentHash,
    pub status: EntryStatus,
}

impl EntrySummary {
    pub fn of(entry: &RuleEntry) -> EntrySummary {
        EntrySummary {
            key: entry.key.clone(),
            revision: entry.revision.clone(),
            content_hash: entry.content_hash.clone(),
            status: entry.status,
        }
    }
}

/// A read-only view of one node, asked by a node fanning an admin read out to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeView {
    /// The node's `/runtime/rule/list` answer.
    Rules,
    /// The agents heartbeating this node: `{"node": .., "agents": [..]}`.
    Agents,
}

/// A request from one node to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BusRequest {
    /// Run a write on the main on behalf of the node the operator called. → `Forwarded`
    Forward {
        op: ForwardOp,
        sender: NodeId,
        issued_at_ms: u64,
    },
    /// Pause dispatch of `key` before a structural change. → `SuspendAck`
    Suspend {
        key: RuleKey,
        sender: NodeId,
        issued_at_ms: u64,
    },
    /// Undo the sender's Suspend. → `ResumeAck`
    Resume {
        key: RuleKey,
        sender: NodeId,
        issued_at_ms: u64,
    },
    /// A new revision of `key` is committed. `entry` is the committed entry itself unless it is
    /// too large for a notice (then the peer pulls it); `previous` is the revision the key had
    /// on the sender before this commit (None: it had none), so a peer that holds something
    /// else knows it missed a write and syncs. `durable`: the sender counts this peer's `Ack`
    /// as a confirmation of the write (`cluster.commit_replicas`), so the peer syncs its copy
    /// before answering; otherwise (a best-effort notice, or the commit of a write already
    /// confirmed by prepares) the copy is written without waiting for the disk. → `Ack` once
    /// the peer holds `revision`.
    NotifyCommitted {
        key: RuleKey,
        revision: Revision,
        previous: Option<Revision>,
        entry: Option<RuleEntry>,
        durable: bool,
        sender: NodeId,
    },
    /// The summaries of every entry the peer holds, tombstones included. → `DigestReply`
    Digest { sender: NodeId },
    /// Full entries (content included) for `keys`. → `Entries`
    FetchEntries { keys: Vec<RuleKey> },
    /// Does the peer durably hold `key` at `revision` or later? → `Held`
    ConfirmHeld { key: RuleKey, revision: Revision },
    /// A read-only view of the peer, as JSON (cluster-wide admin reads). → `View`
    View { what: NodeView },
    /// The series the peer stored for a metric read (cluster-wide queries). → `MetricSeries`
    QueryMetrics { query: MetricQuery },
    /// The metrics the peer stores. → `MetricList`
    ListMetrics,
    /// A roll record was written on the sender (`record`: its `rolling::codec` bytes). → `Ack`
    /// once the peer holds it or a newer one (last-write-wins on the revision).
    RollNotice { record: Vec<u8>, sender: NodeId },
    /// The revision of every roll record the peer holds. → `RollDigestReply`
    RollDigest,
    /// The roll records of `keys` (encoded). → `Rolls`
    FetchRolls { keys: Vec<RuleKey> },
    /// Stage `entry` durably without applying it: the main is writing it at the same time
    /// (prepare/commit, `cluster.commit_replicas` > 0). Its commit is the `NotifyCommitted` that
    /// follows; `Abort` withdraws it. → `Staged` once the staged record is synced.
    Prepare { entry: RuleEntry, sender: NodeId },
    /// The main's own write of a prepared entry failed: drop the staged record, and refuse a
    /// prepare of it that arrives later. → `Ack`
    Abort { key: RuleKey, revision: Revision, sender: NodeId },
    /// What became of a write this node prepared? → `StagedFate`
    ResolveStaged { key: RuleKey, revision: Revision },
    /// Several prepares and commit notices to one peer in one call (the sender's per-peer
    /// outbox batches what queued up while its previous call was in flight). The peer handles
    /// one key's items in order and different keys' items concurrently, so the stagings of one
    /// batch share a synced write. → `Replicated`, one answer per item, in order.
    Replicate { items: Vec<ReplicaItem>, sender: NodeId },
    /// The peer's stored partial state (cells, unfinalized) for a metric read, which the asker
    /// merges exactly (cluster-wide queries). → `MetricPartials`
    QueryPartials { query: MetricQuery },
    /// Partial state of entities the receiver owns, from `sender`'s outbox, in sequence order
    /// (`data::metrics::handoff`). → `HandedOff` with the receiver's applied mark for `sender`.
    HandOff { sender: NodeId, records: Vec<crate::data::metrics::cells::handoff::HandoffRecord> },
    /// The page of the peer's kept logs for a log read (cluster-wide `/query/logs`): the
    /// filter, limit, order and `after` position are the peer's own. → `Logs`
    QueryLogs { query: LogQuery },
    /// The peer's handoff generation, asked after a cluster metric read gathered every answer
    /// (`data::metrics::partial::unchanged`). → `Generation`
    HandoffGeneration,
    /// Alarm states an owner's check changed, sent to every peer before its notifications, and
    /// the metrics of a rule change whose alarm windows reset (`control::alarms::engine`). → `Ack`
    AlarmStates { sender: NodeId, reset: Vec<String>, states: Vec<crate::control::alarms::engine::StateRecord> },
    /// The page of the peer's alarm records for a cluster-wide `/query/alarms`: the peer's
    /// first `skip + limit` matches (the asker merges and pages). → `Alarms`
    QueryAlarms { filter: crate::data::alarm_records::AlarmFilter },
    /// `Forward` with the caller of the request the sender took (client address, token
    /// fingerprint, restore), recorded in the history of the revision the write commits. Appended:
    /// a node without it refuses only this call (`forward_failed`). → `Forwarded`
    ForwardFrom {
        op: ForwardOp,
        caller: crate::control::history::Caller,
        sender: NodeId,
        issued_at_ms: u64,
    },
    /// The (key, revision) of every history record the peer holds. → `HistoryDigestReply`
    HistoryDigest,
    /// The history records with these ids (absent ones left out). → `History`
    FetchHistory { ids: Vec<(RuleKey, Revision)> },
}

/// One item of a [`BusRequest::Replicate`]: what a `Prepare` or a `NotifyCommitted` carries
/// (the sender is the batch's). Its own type, not a nested [`BusRequest`], so a batch cannot
/// nest and its decoding stays flat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplicaItem {
    Prepare {
        entry: RuleEntry,
    },
    Commit {
        key: RuleKey,
        revision: Revision,
        previous: Option<Revision>,
        entry: Option<RuleEntry>,
        durable: bool,
    },
}

/// The answer to one [`ReplicaItem`]: `Staged` or `Ack` as the item's own request would get,
/// or the error the handler gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplicaAnswer {
    Staged,
    Ack,
    Error { message: String },
}

impl BusRequest {
    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            BusRequest::Forward { .. } => "forward",
            BusRequest::Suspend { .. } => "suspend",
            BusRequest::Resume { .. } => "resume",
            BusRequest::NotifyCommitted { .. } => "notify_committed",
            BusRequest::Digest { .. } => "digest",
            BusRequest::FetchEntries { .. } => "fetch_entries",
            BusRequest::ConfirmHeld { .. } => "confirm_held",
            BusRequest::View { .. } => "view",
            BusRequest::QueryMetrics { .. } => "query_metrics",
            BusRequest::ListMetrics => "list_metrics",
            BusRequest::RollNotice { .. } => "roll_notice",
            BusRequest::RollDigest => "roll_digest",
            BusRequest::FetchRolls { .. } => "fetch_rolls",
            BusRequest::Prepare { .. } => "prepare",
            BusRequest::Abort { .. } => "abort",
            BusRequest::ResolveStaged { .. } => "resolve_staged",
            BusRequest::Replicate { .. } => "replicate",
            BusRequest::QueryPartials { .. } => "query_partials",
            BusRequest::HandOff { .. } => "hand_off",
            BusRequest::QueryLogs { .. } => "query_logs",
            BusRequest::HandoffGeneration => "handoff_generation",
            BusRequest::AlarmStates { .. } => "alarm_states",
            BusRequest::QueryAlarms { .. } => "query_alarms",
            // The same call as `Forward`, with its caller: counted and logged as one.
            BusRequest::ForwardFrom { .. } => "forward",
            BusRequest::HistoryDigest => "history_digest",
            BusRequest::FetchHistory { .. } => "fetch_history",
        }
    }
}

/// An answer to a [`BusRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BusResponse {
    /// The main's HTTP answer to a forwarded write, relayed as is.
    Forwarded {
        http_status: u16,
        body: Vec<u8>,
        node: NodeId,
    },
    SuspendAck {
        node: NodeId,
        state: SuspendState,
    },
    ResumeAck {
        node: NodeId,
        state: ResumeState,
    },
    Ack,
    DigestReply {
        entries: Vec<EntrySummary>,
    },
    Entries {
        entries: Vec<RuleEntry>,
    },
    Held {
        held: bool,
    },
    /// The handler could not serve the request (storage down, not the main...).
    Error {
        message: String,
    },
    /// A [`NodeView`] as JSON.
    View {
        json: Vec<u8>,
    },
    /// The answer to `QueryMetrics`: the series read, and the metrics they belong to.
    MetricSeries {
        metrics: Vec<MetricInfoWire>,
        series: Vec<SeriesWire>,
    },
    /// The answer to `ListMetrics`.
    MetricList {
        metrics: Vec<MetricInfoWire>,
    },
    /// The answer to `RollDigest`: (file, record revision), in key order.
    RollDigestReply {
        rolls: Vec<(RuleKey, Revision)>,
    },
    /// The answer to `FetchRolls`: the encoded records held (absent keys left out).
    Rolls {
        records: Vec<Vec<u8>>,
    },
    /// The answer to `Prepare`: the entry is staged durably (or already held).
    Staged,
    /// The answer to `ResolveStaged`.
    StagedFate { fate: crate::control::rules::staged::Fate },
    /// The answer to `Replicate`: one per item, in the items' order.
    Replicated { answers: Vec<ReplicaAnswer> },
    /// The answer to `QueryPartials`: the partial series read, the metrics they belong to, and
    /// what is on its way from the peer to owners with the applied marks it holds.
    MetricPartials {
        metrics: Vec<MetricInfoWire>,
        series: Vec<PartialSeriesWire>,
        in_flight: InFlightWire,
    },
    /// The answer to `HandOff`: the highest sequence number applied from the sender.
    HandedOff { through: u64 },
    /// The answer to `QueryLogs`: the peer's page, in the read's order.
    Logs { logs: Vec<StoredLogWire> },
    /// The answer to `HandoffGeneration`.
    Generation { generation: u64 },
    /// The answer to `QueryAlarms`: the peer's page, newest first, and its count of matches.
    Alarms { records: Vec<AlarmRecordWire>, total: u64 },
    /// The answer to `HistoryDigest`, in key and revision order. Appended.
    HistoryDigestReply { ids: Vec<(RuleKey, Revision)> },
    /// The answer to `FetchHistory`. Appended.
    History { records: Vec<crate::store::history::HistoryRecord> },
}

impl BusResponse {
    pub fn name(&self) -> &'static str {
        match self {
            BusResponse::Forwarded { .. } => "forwarded",
            BusResponse::SuspendAck { .. } => "suspend_ack",
            BusResponse::ResumeAck { .. } => "resume_ack",
            BusResponse::Ack => "ack",
            BusResponse::DigestReply { .. } => "digest_reply",
            BusResponse::Entries { .. } => "entries",
            BusResponse::Held { .. } => "held",
            BusResponse::Error { .. } => "error",
            BusResponse::View { .. } => "view",
            BusResponse::MetricSeries { .. } => "metric_series",
            BusResponse::MetricList { .. } => "metric_list",
            BusResponse::RollDigestReply { .. } => "roll_digest_reply",
            BusResponse::Rolls { .. } => "rolls",
            BusResponse::Staged => "staged",
            BusResponse::StagedFate { .. } => "staged_fate",
            BusResponse::Replicated { .. } => "replicated",
            BusResponse::MetricPartials { .. } => "metric_partials",
            BusResponse::HandedOff { .. } => "handed_off",
            BusResponse::Logs { .. } => "logs",
            BusResponse::Generation { .. } => "generation",
            BusResponse::Alarms { .. } => "alarms",
            BusResponse::HistoryDigestReply { .. } => "history_digest_reply",
            BusResponse::History { .. } => "history",
        }
    }
}

pub fn encode_request(request: &BusRequest) -> Result<Vec<u8>, BusError> {
    encode(request)
}

pub fn decode_request(bytes: &[u8]) -> Result<BusRequest, BusError> {
    decode(bytes)
}

pub fn encode_response(response: &BusResponse) -> Result<Vec<u8>, BusError> {
    encode(response)
}

pub fn decode_response(bytes: &[u8]) -> Result<BusResponse, BusError> {
    decode(bytes)
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, BusError> {
    let body = bincode::serde::encode_to_vec(value, WIRE_CONFIG)
        .map_err(|e| BusError::Encode(e.to_string()))?;
    let len = body.len() + 1;
    if len > MAX_MESSAGE_BYTES {
        return Err(BusError::TooLarge {
            len,
            max: MAX_MESSAGE_BYTES,
        });
    }
    let mut out = Vec::with_capacity(len);
    out.push(BUS_FORMAT_VERSION);
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BusError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(BusError::TooLarge {
            len: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    let (&version, body) = bytes
        .split_first()
        .ok_or(BusError::Decode("empty message".into()))?;
    if version != BUS_FORMAT_VERSION {
        return Err(BusError::Decode(format!(
            "format version {version}, this build reads version {BUS_FORMAT_VERSION}"
        )));
    }
    let (value, read) = bincode::serde::decode_from_slice(body, WIRE_CONFIG)
        .map_err(|e| BusError::Decode(e.to_string()))?;
    if read != body.len() {
        return Err(BusError::Decode(format!(
            "{} trailing bytes after the message",
            body.len() - read
        )));
    }
    Ok(value)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::base::ids::{Catalog, RuleName};

    fn key(name: &str) -> RuleKey {
        RuleKey::new(
            Catalog::OtelRules,
            RuleName::parse(name).expect("valid name"),
        )
    }

    fn node(id: &str) -> NodeId {
        NodeId(id.into())
    }

    fn revision() -> Revision {
        Revision {
            millis: 1_700_000_000_123,
            counter: 7,
            node: node("10.0.0.1:17128"),
        }
    }

    fn entry() -> RuleEntry {
        RuleEntry {
            key: key("vm"),
            content: b"metricPrefix: vm\n".to_vec(),
            status: EntryStatus::Active,
            update_time_ms: 42,
            content_hash: ContentHash::of(b"metricPrefix: vm\n"),
            revision: revision(),
        }
    }

    fn metric_info() -> MetricInfoWire {
        MetricInfoWire {
            name: "m".into(),
            scope: hotrule_mal_engine::ScopeType::Service,
            data_type: hotrule_mal_engine::DataType::Single,
            downsampling: hotrule_mal_engine::Downsampling::Sum,
        }
    }

    #[test]
    fn the_existing_messages_keep_their_encoding() {
        // View is variant 7 of BusRequest and 8 of BusResponse: appending variants moved nothing.
        let view = encode_request(&BusRequest::View { what: NodeView::Agents }).expect("encode");
        assert_eq!(view, vec![BUS_FORMAT_VERSION, 7, 1]);
        let ack = encode_response(&BusResponse::Ack).expect("encode");
        assert_eq!(ack, vec![BUS_FORMAT_VERSION, 3]);
    }

    pub(crate) fn every_request() -> Vec<BusRequest> {
        let sender = node("10.0.0.1:17128");
        vec![
            BusRequest::Forward {
                op: ForwardOp::AddOrUpdate {
                    key: key("vm"),
                    content: vec![0, 1, 2, 255],
                    allow_storage_change: true,
                    force: false,
                },
                sender: sender.clone(),
                issued_at_ms: 1,
            },
            BusRequest::Forward {
                op: ForwardOp::Inactivate { key: key("a/b") },
                sender: sender.clone(),
                issued_at_ms: 2,
            },
            BusRequest::Forward {
                op: ForwardOp::Delete {
                    key: key("k8s/node"),
                    revert_to_bundled: true,
                },
                sender: sender.clone(),
                issued_at_ms: 3,
            },
            BusRequest::Forward {
                op: ForwardOp::ApplyStatus {
                    apply_id: Some("18c-00ff".into()),
                    key: Some(key("vm")),
                    content_hash: Some(ContentHash::of(b"x")),
                },
                sender: sender.clone(),
                issued_at_ms: 3,
            },
            BusRequest::Suspend {
                key: key("vm"),
                sender: sender.clone(),
                issued_at_ms: 4,
            },
            BusRequest::Resume {
                key: key("vm"),
                sender: sender.clone(),
                issued_at_ms: 5,
            },
            BusRequest::NotifyCommitted {
                key: key("vm"),
                revision: revision(),
                previous: None,
                entry: Some(entry()),
                durable: true,
                sender: sender.clone(),
            },
            BusRequest::NotifyCommitted {
                key: key("vm"),
                revision: revision(),
                previous: Some(Revision::zero()),
                entry: None,
                durable: false,
                sender: sender.clone(),
            },
            BusRequest::Digest { sender: sender.clone() },
            BusRequest::FetchEntries {
                keys: vec![key("vm"), key("x.y_z-w")],
            },
            BusRequest::FetchEntries { keys: vec![] },
            BusRequest::ConfirmHeld {
                key: key("vm"),
                revision: revision(),
            },
            BusRequest::View { what: NodeView::Rules },
            BusRequest::View { what: NodeView::Agents },
            BusRequest::QueryMetrics {
                query: MetricQuery {
                    metric: "meter_vm_cpu".into(),
                    service: Some("vm-1".into()),
                    instance: None,
                    endpoint: None,
                    granularity: "MINUTE".into(),
                    start_ms: 1,
                    end_ms: 2,
                },
            },
            BusRequest::ListMetrics,
            BusRequest::Forward {
                op: ForwardOp::RollStart {
                    key: key("vm"),
                    content: b"metricPrefix: a".to_vec(),
                    allow_storage_change: false,
                    force: true,
                    step_timeout_ms: 60_000,
                    health: crate::control::rolling::HealthSettings::default(),
                },
                sender: sender.clone(),
                issued_at_ms: 6,
            },
            BusRequest::Forward { op: ForwardOp::RollRollback { key: key("vm") }, sender: sender.clone(), issued_at_ms: 7 },
            BusRequest::Forward { op: ForwardOp::RollForceCommit { key: key("vm") }, sender: sender.clone(), issued_at_ms: 8 },
            BusRequest::RollNotice { record: vec![1, 2, 3], sender: sender.clone() },
            BusRequest::RollDigest,
            BusRequest::FetchRolls { keys: vec![key("vm")] },
            BusRequest::QueryLogs {
                query: LogQuery {
                    service: Some("checkout".into()),
                    instance: None,
                    endpoint: None,
                    start_ms: -1,
                    end_ms: 2,
                    tags: vec![("level".into(), "ERROR".into())],
                    keyword: Some("é".into()),
                    limit: 10_000,
                    after: Some((1, u64::MAX)),
                    oldest_first: true,
                },
            },
            BusRequest::QueryAlarms {
                filter: crate::data::alarm_records::AlarmFilter {
                    start_ms: -1,
                    end_ms: 2,
                    scope: Some("SERVICE".into()),
                    entity_name: Some("checkout".into()),
                    entity_id: None,
                    rules: vec!["a_rule".into(), "b_rule".into()],
                    tags: vec![("level".into(), "WARNING".into())],
                    keyword: Some("é".into()),
                    skip: 20,
                    limit: 20,
                },
            },
        ]
    }

    pub(crate) fn every_response() -> Vec<BusResponse> {
        let me = node("10.0.0.2:17128");
        let mut tombstone = entry();
        tombstone.status = EntryStatus::Deleted;
        tombstone.content.clear();
        vec![
            BusResponse::Forwarded {
                http_status: 409,
                body: b"{\"applyStatus\":\"x\"}".to_vec(),
                node: me.clone(),
            },
            BusResponse::SuspendAck {
                node: me.clone(),
                state: SuspendState::Suspended,
            },
            BusResponse::SuspendAck {
                node: me.clone(),
                state: SuspendState::AlreadySuspended,
            },
            BusResponse::SuspendAck {
                node: me.clone(),
                state: SuspendState::NotPresent,
            },
            BusResponse::SuspendAck {
                node: me.clone(),
                state: SuspendState::Rejected,
            },
            BusResponse::ResumeAck {
                node: me.clone(),
                state: ResumeState::Resumed,
            },
            BusResponse::ResumeAck {
                node: me.clone(),
                state: ResumeState::NotSuspendedBySender,
            },
            BusResponse::ResumeAck {
                node: me.clone(),
                state: ResumeState::NotPresent,
            },
            BusResponse::ResumeAck {
                node: me,
                state: ResumeState::PartiallyResumed,
            },
            BusResponse::Ack,
            BusResponse::DigestReply {
                entries: vec![EntrySummary::of(&entry()), EntrySummary::of(&tombstone)],
            },
            BusResponse::Entries {
                entries: vec![entry(), tombstone],
            },
            BusResponse::Held { held: true },
            BusResponse::Held { held: false },
            BusResponse::Error {
                message: "storage unavailable: é".into(),
            },
            BusResponse::View {
                json: b"{\"rules\":[]}".to_vec(),
            },
            BusResponse::MetricSeries {
                metrics: vec![metric_info()],
                series: vec![SeriesWire {
                    metric: "m".into(),
                    entity: crate::cluster::bus::query::EntityWire::from(&crate::data::metrics::Entity::new(
                        hotrule_mal_engine::ScopeType::Service,
                    )),
                    points: vec![(202_501_011_200, 1, crate::cluster::bus::query::ValueWire::Single(4))],
                }],
            },
            BusResponse::MetricList {
                metrics: vec![metric_info()],
            },
            BusResponse::RollDigestReply { rolls: vec![(key("vm"), revision())] },
            BusResponse::Rolls { records: vec![vec![1], vec![]] },
            BusResponse::Logs { logs: vec![StoredLogWire { timestamp_ms: 5, sequence: 6, value: vec![1, 0, 255] }] },
            BusResponse::Alarms {
                records: vec![AlarmRecordWire { start_time: -5, uuid: "u".into(), value: vec![1, 9], recovery_time: Some(7) }],
                total: 3,
            },
        ]
    }

    #[test]
    fn every_request_round_trips_with_a_version_prefix() {
        for request in every_request() {
            let bytes = encode_request(&request).expect("encode");
            assert_eq!(bytes[0], BUS_FORMAT_VERSION);
            assert_eq!(
                decode_request(&bytes).expect("decode"),
                request,
                "{}",
                request.name()
            );
        }
    }

    #[test]
    fn every_response_round_trips_with_a_version_prefix() {
        for response in every_response() {
            let bytes = encode_response(&response).expect("encode");
            assert_eq!(bytes[0], BUS_FORMAT_VERSION);
            assert_eq!(
                decode_response(&bytes).expect("decode"),
                response,
                "{}",
                response.name()
            );
        }
    }

    #[test]
    fn empty_unknown_version_trailing_and_truncated_bytes_are_errors() {
        assert!(matches!(decode_request(&[]), Err(BusError::Decode(_))));
        assert!(matches!(decode_request(&[9, 0]), Err(BusError::Decode(_))));
        let mut bytes = encode_request(&BusRequest::Digest { sender: node("n") }).expect("encode");
        bytes.push(0);
        assert!(matches!(decode_request(&bytes), Err(BusError::Decode(_))));
        let whole = encode_response(&BusResponse::Entries {
            entries: vec![entry()],
        })
        .expect("encode");
        for cut in 0..whole.len() {
            assert!(
                decode_response(&whole[..cut]).is_err(),
                "prefix of {cut} bytes decoded"
            );
        }
    }

    #[test]
    fn garbage_never_panics_and_forged_lengths_do_not_allocate() {
        // A deterministic pseudo-random generator: no flaky inputs, no extra crates.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in 0..2_000usize {
            let mut bytes: Vec<u8> = (0..len % 97).map(|_| next() as u8).collect();
            if len % 2 == 0 && !bytes.is_empty() {
                bytes[0] = BUS_FORMAT_VERSION;
            }
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }
        // `Entries` with a claimed length of u64::MAX: varint 0xff then eight 0xff bytes.
        let mut forged = vec![BUS_FORMAT_VERSION, 5];
        forged.extend_from_slice(&[0xff; 9]);
        assert!(decode_response(&forged).is_err());
        // A `Forwarded` body claiming 4 GiB of bytes in a 20-byte message.
        let forged_body = [
            BUS_FORMAT_VERSION,
            0,
            0xcd,
            0x00,
            0x00,
            0xfc,
            0x00,
            0x00,
            0x00,
            0x00,
            0x01,
        ];
        assert!(decode_response(&forged_body).is_err());
    }

    #[test]
    fn oversized_input_is_refused_before_decoding() {
        let huge = vec![BUS_FORMAT_VERSION; MAX_MESSAGE_BYTES + 1];
        assert!(matches!(
            decode_request(&huge),
            Err(BusError::TooLarge { .. })
        ));
    }
}
