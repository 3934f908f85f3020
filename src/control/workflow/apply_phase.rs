//! The apply status of structural changes: SkyWalking 11's `GET /runtime/rule/status`.
//!
//! In SkyWalking 11 a structural `/addOrUpdate` is answered once it reaches FENCING and goes on
//! in the background, so clients poll for its phase. hotrule keeps its synchronous contract (a
//! 200 means committed), but keeps the same surface so that scripts written for SkyWalking 11
//! work: every structural apply (and every `revertToBundled`) gets an `applyId` and a record on
//! the main that walks PENDING → FENCING (the cluster-wide suspend) → DDL (the synced batch of
//! entry and measures) → ROLLING_OUT (local install, commit notices and resumes) → APPLIED,
//! or ends DEGRADED (committed, the local finishing step deferred to the scan) or FAILED
//! (nothing committed). By the time the write is answered its record is terminal.
//!
//! Records live on the main, in memory, for [`LIVE_TTL`] after their last update and at most
//! [`MAX_LIVE`] of them. Past that, a query by catalog and name is answered from the stored
//! row (`derivedFrom: "durable-dao"`, with a `note`); an unknown `applyId` is `found: false`,
//! phase UNKNOWN. The answer is always a 200. `answer` is pure; [`ApplyLog`] is the only state.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::base::ids::{ContentHash, NodeId, RuleKey};
use crate::store::EntryStatus;

/// How long a record is kept after its last update.
pub const LIVE_TTL: Duration = Duration::from_secs(3600);
/// The most records kept at once (the oldest go first).
pub const MAX_LIVE: usize = 1024;

/// `derivedFrom` of an answer built from the stored row.
pub const DURABLE_DAO: &str = "durable-dao";

/// The phase of a structural apply, as SkyWalking 11 names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    Pending,
    Ddl,
    Fencing,
    RollingOut,
    Applied,
    Degraded,
    Failed,
    Unknown,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "PENDING",
            Phase::Ddl => "DDL",
            Phase::Fencing => "FENCING",
            Phase::RollingOut => "ROLLING_OUT",
            Phase::Applied => "APPLIED",
            Phase::Degraded => "DEGRADED",
            Phase::Failed => "FAILED",
            Phase::Unknown => "UNKNOWN",
        }
    }

    /// APPLIED, DEGRADED and FAILED: a poller stops here.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Applied | Phase::Degraded | Phase::Failed)
    }
}

/// One structural apply as the main saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyRecord {
    pub apply_id: String,
    pub key: RuleKey,
    pub content_hash: ContentHash,
    pub phase: Phase,
    pub failure_reason: Option<String>,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
}

/// What a status read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusQuery {
    ById(String),
    /// The latest apply of a file; with a hash, the latest apply of exactly that content.
    ByKey { key: RuleKey, content_hash: Option<ContentHash> },
}

impl StatusQuery {
    fn matches(&self, record: &ApplyRecord) -> bool {
        match self {
            StatusQuery::ById(id) => record.apply_id == *id,
            StatusQuery::ByKey { key, content_hash } => {
                record.key == *key && content_hash.as_ref().is_none_or(|h| *h == record.content_hash)
            }
        }
    }
}

/// The stored row of the queried file, for the durable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Durable {
    Row { status: EntryStatus, content_hash: ContentHash },
    NoRow,
    /// The row could not be read; the text says why.
    Unreadable(String),
}

/// The body of `GET /runtime/rule/status` (always a 200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusAnswer {
    pub found: bool,
    pub phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Nodes that had not confirmed in time (hotrule's phases never produce laggards: an
    /// unreachable peer is skipped and converges on its scan). Kept for the shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_laggards: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at_ms: Option<u64>,
    pub served_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl StatusAnswer {
    fn empty(phase: Phase, served_by: &NodeId) -> StatusAnswer {
        StatusAnswer {
            found: false,
            phase,
            apply_id: None,
            catalog: None,
            name: None,
            content_hash: None,
            failure_reason: None,
            fence_laggards: None,
            started_at_ms: None,
            updated_at_ms: None,
            served_by: served_by.0.clone(),
            derived_from: None,
            note: None,
        }
    }
}

/// The answer to `query`: the live record if there is one, otherwise (by catalog and name)
/// the stored row: an ACTIVE row with the asked-for hash is APPLIED, derived from storage.
/// `durable` is only consulted for a query by key without a live record.
pub fn answer(query: &StatusQuery, live: Option<&ApplyRecord>, durable: &Durable, served_by: &NodeId) -> StatusAnswer {
    if let Some(record) = live {
        return StatusAnswer {
            found: true,
            phase: record.phase,
            apply_id: Some(record.apply_id.clone()),
            catalog: Some(record.key.catalog.as_str().to_string()),
            name: Some(record.key.name.as_str().to_string()),
            content_hash: Some(record.content_hash.0.clone()),
            failure_reason: record.failure_reason.clone(),
            started_at_ms: Some(record.started_at_ms),
            updated_at_ms: Some(record.updated_at_ms),
            ..StatusAnswer::empty(record.phase, served_by)
        };
    }
    let mut out = StatusAnswer::empty(Phase::Unknown, served_by);
    let (key, wanted_hash) = match query {
        StatusQuery::ById(id) => {
            out.apply_id = Some(id.clone());
            out.note = Some(format!(
                "applyId {id} is not tracked (kept {} min on the main; evicted, or the main changed): \
                 query by catalog and name for the stored state",
                LIVE_TTL.as_secs() / 60
            ));
            return out;
        }
        StatusQuery::ByKey { key, content_hash } => (key, content_hash),
    };
    out.catalog = Some(key.catalog.as_str().to_string());
    out.name = Some(key.name.as_str().to_string());
    match durable {
        Durable::Row { status: EntryStatus::Active, content_hash }
            if wanted_hash.as_ref().is_none_or(|h| h == content_hash) =>
        {
            out.found = true;
            out.phase = Phase::Applied;
            out.content_hash = Some(content_hash.0.clone());
            out.derived_from = Some(DURABLE_DAO);
            out.note = Some("no live apply status for this file (expired, applied before the main changed, or not a \
                             structural change); derived from the stored ACTIVE row"
                .to_string());
        }
        Durable::Row { status, content_hash } => {
            out.content_hash = wanted_hash.as_ref().map(|h| h.0.clone());
            out.note = Some(match wanted_hash {
                Some(h) if h != content_hash => format!("the stored row holds another content ({content_hash})"),
                _ => format!("the stored row is {}", status.as_str()),
            });
        }
        Durable::NoRow => out.note = Some(format!("{key} has no stored row and no live apply status")),
        Durable::Unreadable(reason) => out.note = Some(format!("the stored row could not be read: {reason}")),
    }
    out
}

/// The main's live records, bounded in age and count.
pub struct ApplyLog {
    records: Mutex<VecDeque<ApplyRecord>>,
    ttl_ms: u64,
    max: usize,
}

impl Default for ApplyLog {
    fn default() -> Self {
        ApplyLog::new(LIVE_TTL, MAX_LIVE)
    }
}

impl ApplyLog {
    pub fn new(ttl: Duration, max: usize) -> ApplyLog {
        ApplyLog { records: Mutex::new(VecDeque::new()), ttl_ms: ttl.as_millis() as u64, max: max.max(1) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut VecDeque<ApplyRecord>) -> T) -> T {
        f(&mut self.records.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn expired(&self, record: &ApplyRecord, now_ms: u64) -> bool {
        record.updated_at_ms.saturating_add(self.ttl_ms) < now_ms
    }

    /// Opens a PENDING record and returns its applyId. Expired and surplus records go first.
    pub fn start(&self, key: &RuleKey, content_hash: &ContentHash, now_ms: u64) -> String {
        let apply_id = new_apply_id(now_ms);
        let record = ApplyRecord {
            apply_id: apply_id.clone(),
            key: key.clone(),
            content_hash: content_hash.clone(),
            phase: Phase::Pending,
            failure_reason: None,
            started_at_ms: now_ms,
            updated_at_ms: now_ms,
        };
        self.with(|records| {
            records.retain(|r| !self.expired(r, now_ms));
            while records.len() >= self.max {
                records.pop_front();
            }
            records.push_back(record);
        });
        apply_id
    }

    /// Moves a record to `phase` (a terminal phase with an optional reason).
    pub fn set(&self, apply_id: &str, phase: Phase, reason: Option<String>, now_ms: u64) {
        self.with(|records| {
            if let Some(record) = records.iter_mut().rev().find(|r| r.apply_id == apply_id) {
                record.phase = phase;
                record.failure_reason = reason;
                record.updated_at_ms = now_ms;
            }
        });
    }

    /// The latest live record that matches `query`.
    pub fn find(&self, query: &StatusQuery, now_ms: u64) -> Option<ApplyRecord> {
        self.with(|records| records.iter().rev().find(|r| query.matches(r) && !self.expired(r, now_ms)).cloned())
    }

    pub fn len(&self) -> usize {
        self.with(|records| records.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A fresh applyId: the start time and 64 random bits, in hex.
fn new_apply_id(now_ms: u64) -> String {
    format!("{now_ms:x}-{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, RuleName};

    fn key(name: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("name"))
    }
    fn hash(text: &str) -> ContentHash {
        ContentHash::of(text.as_bytes())
    }
    fn me() -> NodeId {
        NodeId("n1".into())
    }

    #[test]
    fn a_record_walks_its_phases_and_is_found_by_id_and_by_key() {
        let log = ApplyLog::default();
        let id = log.start(&key("a"), &hash("v1"), 1_000);
        assert_eq!(log.find(&StatusQuery::ById(id.clone()), 1_000).map(|r| r.phase), Some(Phase::Pending));
        for phase in [Phase::Fencing, Phase::Ddl, Phase::RollingOut, Phase::Applied] {
            log.set(&id, phase, None, 2_000);
        }
        let by_key = StatusQuery::ByKey { key: key("a"), content_hash: None };
        let record = log.find(&by_key, 2_000).expect("by key");
        assert_eq!((record.phase, record.started_at_ms, record.updated_at_ms), (Phase::Applied, 1_000, 2_000));
        let other_hash = StatusQuery::ByKey { key: key("a"), content_hash: Some(hash("v2")) };
        assert!(log.find(&other_hash, 2_000).is_none());
        assert!(log.find(&StatusQuery::ByKey { key: key("b"), content_hash: None }, 2_000).is_none());
    }

    #[test]
    fn the_latest_apply_of_a_file_wins_a_query_by_key() {
        let log = ApplyLog::default();
        let first = log.start(&key("a"), &hash("v1"), 1);
        log.set(&first, Phase::Applied, None, 2);
        let second = log.start(&key("a"), &hash("v2"), 3);
        log.set(&second, Phase::Failed, Some("persist failed".into()), 4);
        let latest = log.find(&StatusQuery::ByKey { key: key("a"), content_hash: None }, 5).expect("found");
        assert_eq!((latest.apply_id, latest.phase), (second, Phase::Failed));
        let exact = StatusQuery::ByKey { key: key("a"), content_hash: Some(hash("v1")) };
        assert_eq!(log.find(&exact, 5).map(|r| r.apply_id), Some(first));
    }

    #[test]
    fn records_expire_after_the_ttl_and_the_count_is_bounded() {
        let log = ApplyLog::new(Duration::from_millis(100), 3);
        let old = log.start(&key("a"), &hash("v1"), 0);
        assert!(log.find(&StatusQuery::ById(old.clone()), 100).is_some());
        assert!(log.find(&StatusQuery::ById(old.clone()), 101).is_none(), "expired on read");
        log.start(&key("b"), &hash("v1"), 200);
        assert_eq!(log.len(), 1, "expired records are swept by the next start");
        let ids: Vec<String> = (0..5).map(|i| log.start(&key("c"), &hash("v1"), 201 + i)).collect();
        assert_eq!(log.len(), 3);
        assert!(log.find(&StatusQuery::ById(ids[1].clone()), 210).is_none(), "the oldest go first");
        assert!(log.find(&StatusQuery::ById(ids[4].clone()), 210).is_some());
    }

    #[test]
    fn apply_ids_are_distinct() {
        let log = ApplyLog::default();
        let a = log.start(&key("a"), &hash("v1"), 7);
        let b = log.start(&key("a"), &hash("v1"), 7);
        assert_ne!(a, b);
    }

    /// (query, live phase, stored row) → (found, phase, derivedFrom).
    #[test]
    fn answers_as_a_table() {
        let live = ApplyRecord {
            apply_id: "x".into(),
            key: key("a"),
            content_hash: hash("v1"),
            phase: Phase::Degraded,
            failure_reason: Some("commit deferred".into()),
            started_at_ms: 1,
            updated_at_ms: 2,
        };
        let active = Durable::Row { status: EntryStatus::Active, content_hash: hash("v1") };
        let inactive = Durable::Row { status: EntryStatus::Inactive, content_hash: hash("v1") };
        let by_key = StatusQuery::ByKey { key: key("a"), content_hash: None };
        let by_hash = |h: &str| StatusQuery::ByKey { key: key("a"), content_hash: Some(hash(h)) };
        let by_id = StatusQuery::ById("gone".into());
        type Row<'a> = (&'a str, &'a StatusQuery, Option<&'a ApplyRecord>, &'a Durable, bool, Phase, Option<&'a str>);
        let v1 = by_hash("v1");
        let v2 = by_hash("v2");
        let unreadable = Durable::Unreadable("io".into());
        let rows: &[Row] = &[
            ("live record", &by_key, Some(&live), &Durable::NoRow, true, Phase::Degraded, None),
            ("live record by id", &by_id, Some(&live), &Durable::NoRow, true, Phase::Degraded, None),
            ("unknown id", &by_id, None, &active, false, Phase::Unknown, None),
            ("no live record, ACTIVE row", &by_key, None, &active, true, Phase::Applied, Some(DURABLE_DAO)),
            ("no live record, ACTIVE row, same hash", &v1, None, &active, true, Phase::Applied, Some(DURABLE_DAO)),
            ("no live record, ACTIVE row, other hash", &v2, None, &active, false, Phase::Unknown, None),
            ("no live record, INACTIVE row", &by_key, None, &inactive, false, Phase::Unknown, None),
            ("no live record, no row", &by_key, None, &Durable::NoRow, false, Phase::Unknown, None),
            ("no live record, unreadable row", &by_key, None, &unreadable, false, Phase::Unknown, None),
        ];
        for (what, query, record, durable, found, phase, derived) in rows {
            let got = answer(query, *record, durable, &me());
            assert_eq!((got.found, got.phase, got.derived_from), (*found, *phase, *derived), "{what}");
            assert_eq!(got.served_by, "n1", "{what}");
            assert!(got.found || got.note.is_some(), "{what}: a miss says why");
        }
        let json = serde_json::to_value(answer(&by_key, Some(&live), &Durable::NoRow, &me())).expect("json");
        for field in ["found", "phase", "applyId", "catalog", "name", "contentHash", "failureReason", "startedAtMs", "updatedAtMs", "servedBy"] {
            assert!(json.get(field).is_some(), "{field} missing in {json}");
        }
        assert_eq!(json["phase"], "DEGRADED");
        let miss = serde_json::to_value(answer(&by_id, None, &Durable::NoRow, &me())).expect("json");
        assert_eq!((miss["found"].as_bool(), miss["phase"].as_str(), miss["applyId"].as_str()), (Some(false), Some("UNKNOWN"), Some("gone")));
    }
}
