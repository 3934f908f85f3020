//! Replication of roll records (issue 15, docs/rolling.md "Replication"): they replicate like
//! entries. The writer (the workflow on the main) stamps a revision on every put; a roll notice
//! carries the encoded record to every live peer right after the write; the periodic sync (and a
//! membership change whose digest differs) pulls every record newer than this node's from its
//! source; the gossiped digest covers `roll/` keys next to the entries ([`digest`]). Every
//! record, however it arrives, goes through the workflow's one write path
//! (`Workflow::apply_replicated_rolls`): last-write-wins on the revision.
//!
//! Kept apart from the entry path: the roll pull is its own pair of bus calls (`RollDigest`,
//! `FetchRolls`) made on the periodic and membership syncs only, not on the notice-gap pulls of
//! the entry hot path.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::cluster::bus::messages::{BusRequest, BusResponse, EntrySummary};
use crate::cluster::gossip::keys::digest_of;
use crate::cluster::gossip::view::Member;
use crate::base::ids::{ContentHash, Revision, RuleKey};
use crate::control::rolling::{RollRecord, codec};
use crate::store::Store;
use crate::control::workflow::Workflow;

use super::Cluster;
use super::error::SyncError;

/// The gossiped digest: the entries' digest (`digest_of`) alone while no roll record is
/// stored, so a cluster that never rolled gossips what it always did; with records, a hash of
/// that digest and every (file, record hash).
pub fn digest(entries: &[EntrySummary], rolls: &[(RuleKey, ContentHash)]) -> String {
    let entries_digest = digest_of(entries);
    if rolls.is_empty() {
        return entries_digest;
    }
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(entries_digest.as_bytes());
    for (key, hash) in rolls {
        field(key.catalog.as_str().as_bytes());
        field(key.name.as_str().as_bytes());
        field(hash.0.as_bytes());
    }
    hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The answer to `RollDigest`: every record's revision (an unreadable record is left out and
/// logged: it cannot be compared, and a newer one from a peer replaces it).
pub async fn roll_digest(store: &Store) -> BusResponse {
    match store.list_rolls().await {
        Ok(stored) => BusResponse::RollDigestReply {
            rolls: stored
                .into_iter()
                .filter_map(|s| match codec::decode(&s.bytes) {
                    Ok(record) => Some((s.key, record.revision)),
                    Err(e) => {
                        tracing::warn!(rule = %s.key, error = %e, "unreadable roll record left out of the roll digest");
                        None
                    }
                })
                .collect(),
        },
        Err(e) => BusResponse::Error { message: format!("listing roll records: {e}") },
    }
}

/// The answer to `FetchRolls`.
pub async fn fetch_rolls(store: &Store, keys: Vec<RuleKey>) -> BusResponse {
    let mut records = Vec::with_capacity(keys.len());
    for key in keys {
        match store.get_roll(&key).await {
            Ok(Some(bytes)) => records.push(bytes),
            Ok(None) => {}
            Err(e) => return BusResponse::Error { message: format!("reading the roll record of {key}: {e}") },
        }
    }
    BusResponse::Rolls { records }
}

/// Takes a roll notice: the record through the one write path. `Ack` once this node holds it
/// or a newer one.
pub async fn receive_notice(workflow: &Workflow, record: &[u8]) -> Result<bool, String> {
    let record = codec::decode(record).map_err(|e| format!("roll notice: {e}"))?;
    let revision = record.revision.clone();
    let key = record.key.clone();
    let applied = workflow.apply_replicated_rolls(vec![record]).await.map_err(|e| e.to_string())?;
    let held = workflow.stored_roll(&key).await.map_err(|e| e.to_string())?.is_some_and(|r| r.revision >= revision);
    if !held {
        return Err(format!("the roll record of {key} at {revision} is not held"));
    }
    Ok(applied > 0)
}

/// The keys whose record at the source is newer than this node's (or that this node lacks).
pub fn rolls_to_pull(local: &BTreeMap<RuleKey, Revision>, remote: &[(RuleKey, Revision)]) -> Vec<RuleKey> {
    remote
        .iter()
        .filter(|(key, revision)| local.get(key).is_none_or(|mine| revision > mine))
        .map(|(key, _)| key.clone())
        .collect()
}

/// Pulls from `from` every roll record newer than this node's. A peer that does not know the
/// roll messages (an older build) answers with an error: nothing is pulled.
pub async fn pull_newer_rolls(cluster: &Cluster, workflow: &Workflow, from: &Member) -> Result<usize, SyncError> {
    let remote = match cluster.call(from, BusRequest::RollDigest, cluster.settings.sync_timeout).await {
        Ok(BusResponse::RollDigestReply { rolls }) => rolls,
        Ok(other) => {
            return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "roll_digest", answer: other.name() });
        }
        Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "roll_digest", source }),
    };
    if remote.is_empty() {
        return Ok(0);
    }
    let local: BTreeMap<RuleKey, Revision> = match workflow.roll_records().await {
        Ok(records) => records.into_iter().map(|r| (r.key, r.revision)).collect(),
        // An unreadable local record: compare against nothing, so the source's replaces it.
        Err(e) => {
            tracing::warn!(error = %e, "local roll records unreadable; pulling every record");
            BTreeMap::new()
        }
    };
    let keys = rolls_to_pull(&local, &remote);
    if keys.is_empty() {
        return Ok(0);
    }
    let records = match cluster.call(from, BusRequest::FetchRolls { keys }, cluster.settings.sync_timeout).await {
        Ok(BusResponse::Rolls { records }) => records,
        Ok(other) => {
            return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "fetch_rolls", answer: other.name() });
        }
        Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "fetch_rolls", source }),
    };
    let decoded: Vec<RollRecord> = records
        .iter()
        .filter_map(|bytes| match codec::decode(bytes) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(from = %from.node_id, error = %e, "pulled roll record unreadable; skipped");
                None
            }
        })
        .collect();
    Ok(workflow.apply_replicated_rolls(decoded).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, NodeId, RuleName};

    fn key(name: &str) -> RuleKey {
        RuleKey::new(Catalog::Lal, RuleName::parse(name).expect("name"))
    }
    fn rev(millis: u64, node: &str) -> Revision {
        Revision { millis, counter: 0, node: NodeId(node.into()) }
    }

    #[test]
    fn records_are_pulled_when_newer_or_missing_only() {
        let local: BTreeMap<RuleKey, Revision> = [(key("a"), rev(5, "m")), (key("b"), rev(5, "m"))].into_iter().collect();
        let remote = [(key("a"), rev(6, "m")), (key("b"), rev(5, "m")), (key("c"), rev(1, "m")), (key("a2"), rev(1, "x"))];
        assert_eq!(rolls_to_pull(&local, &remote), vec![key("a"), key("c"), key("a2")]);
        // An older remote record never replaces a newer local one.
        assert!(rolls_to_pull(&local, &[(key("a"), rev(4, "z"))]).is_empty());
    }

    #[test]
    fn the_digest_is_the_entries_digest_until_a_roll_is_stored_and_then_covers_each_record() {
        let none = digest(&[], &[]);
        assert_eq!(none, digest_of(&[]), "unchanged for a cluster that never rolled");
        let one = digest(&[], &[(key("a"), ContentHash::of(b"1"))]);
        assert_ne!(one, none);
        assert_eq!(one.len(), none.len());
        assert_ne!(one, digest(&[], &[(key("a"), ContentHash::of(b"2"))]), "a new record revision moves it");
        assert_ne!(one, digest(&[], &[(key("b"), ContentHash::of(b"1"))]));
        assert_eq!(one, digest(&[], &[(key("a"), ContentHash::of(b"1"))]));
    }
}
