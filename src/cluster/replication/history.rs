//! Replication of history records (issue 26): they replicate like entries, by union. Records
//! are immutable and named by (key, revision), so a node pulls the ones it lacks: from the main
//! (a peer) or from every live peer (the main), on the periodic and membership syncs. The
//! gossiped digest covers them ([`digest`]), so a difference is seen as soon as it is gossiped.
//! Pulled records go through the workflow (`Workflow::apply_replicated_history`), which applies
//! retention in the same batch, so a record compacted here is not brought back by a peer that
//! still holds it.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::base::ids::{Revision, RuleKey};
use crate::cluster::bus::messages::{BusRequest, BusResponse};
use crate::cluster::gossip::view::Member;
use crate::control::workflow::Workflow;
use crate::store::Store;

use super::Cluster;
use super::error::SyncError;

/// At most this many records are fetched in one call.
const FETCH_CHUNK: usize = 64;

/// The gossiped digest: `base` (entries and roll records) alone while no history is stored;
/// otherwise a hash of it and every history record's (key, revision).
pub fn digest(base: String, ids: &[(RuleKey, Revision)]) -> String {
    if ids.is_empty() {
        return base;
    }
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(base.as_bytes());
    for (key, revision) in ids {
        field(key.catalog.as_str().as_bytes());
        field(key.name.as_str().as_bytes());
        field(revision.to_string().as_bytes());
    }
    hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Every history record this node holds, by (key, revision), in order.
pub fn ids(store: &Store) -> Vec<(RuleKey, Revision)> {
    store.with_history_index(|index| {
        index.iter().flat_map(|(key, revisions)| revisions.keys().map(move |r| (key.clone(), r.clone()))).collect()
    })
}

/// The answer to `FetchHistory`.
pub async fn fetch(store: &Store, wanted: Vec<(RuleKey, Revision)>) -> BusResponse {
    let mut records = Vec::with_capacity(wanted.len());
    for (key, revision) in wanted {
        match store.history_record(&key, &revision).await {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(e) => return BusResponse::Error { message: format!("reading the history of {key} at {revision}: {e}") },
        }
    }
    BusResponse::History { records }
}

/// The ids `remote` holds that this node lacks.
pub fn missing(local: &BTreeSet<(RuleKey, Revision)>, remote: Vec<(RuleKey, Revision)>) -> Vec<(RuleKey, Revision)> {
    remote.into_iter().filter(|id| !local.contains(id)).collect()
}

/// Pulls from `from` every history record this node lacks. A peer of an older build refuses
/// the call: nothing is pulled.
pub async fn pull_missing(cluster: &Cluster, store: &Store, workflow: &Workflow, from: &Member) -> Result<usize, SyncError> {
    let remote = match cluster.call(from, BusRequest::HistoryDigest, cluster.settings.sync_timeout).await {
        Ok(BusResponse::HistoryDigestReply { ids }) => ids,
        Ok(other) => {
            return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "history_digest", answer: other.name() });
        }
        Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "history_digest", source }),
    };
    let local: BTreeSet<(RuleKey, Revision)> = ids(store).into_iter().collect();
    let wanted = missing(&local, remote);
    let mut stored = 0;
    for chunk in wanted.chunks(FETCH_CHUNK) {
        let request = BusRequest::FetchHistory { ids: chunk.to_vec() };
        let records = match cluster.call(from, request, cluster.settings.sync_timeout).await {
            Ok(BusResponse::History { records }) => records,
            Ok(other) => {
                return Err(SyncError::UnexpectedAnswer { peer: from.node_id.clone(), request: "fetch_history", answer: other.name() });
            }
            Err(source) => return Err(SyncError::Bus { peer: from.node_id.clone(), request: "fetch_history", source }),
        };
        // Only what was asked for: a record under another id is not this pull's to store.
        let asked: BTreeSet<&(RuleKey, Revision)> = chunk.iter().collect();
        let records = records.into_iter().filter(|r| asked.contains(&(r.key.clone(), r.revision.clone()))).collect();
        stored += workflow.apply_replicated_history(records).await?;
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, NodeId, RuleName};

    fn id(name: &str, millis: u64) -> (RuleKey, Revision) {
        (RuleKey::new(Catalog::Lal, RuleName::parse(name).expect("name")), Revision { millis, counter: 0, node: NodeId("m".into()) })
    }

    #[test]
    fn the_digest_is_the_base_until_history_is_stored_and_then_covers_each_record() {
        assert_eq!(digest("base".into(), &[]), "base");
        let one = digest("base".into(), &[id("a", 1)]);
        assert_ne!(one, "base");
        assert_ne!(one, digest("base".into(), &[id("a", 2)]));
        assert_ne!(one, digest("other".into(), &[id("a", 1)]));
        assert_eq!(one, digest("base".into(), &[id("a", 1)]));
    }

    #[test]
    fn only_records_this_node_lacks_are_pulled() {
        let local: BTreeSet<_> = [id("a", 1), id("a", 2)].into_iter().collect();
        assert_eq!(missing(&local, vec![id("a", 1), id("a", 3), id("b", 1)]), vec![id("a", 3), id("b", 1)]);
        assert!(missing(&local, vec![id("a", 2)]).is_empty());
    }
}
