//! The gossip keys, declared in one place, and their typed reading.
//!
//! Gossip carries small facts only. chitchat values are strings, and one value over about 64 KB
//! silently stops every later update from that node from propagating, so every value is capped at
//! [`MAX_FACT_VALUE_BYTES`] when it is set. Bulk data (entries, contents) goes over the bus.
//!
//! Values read from gossip come from peers, so reading never fails: a value that does not parse
//! is treated as absent (or, for `ready`, as not ready).

use sha2::{Digest, Sha256};

use super::ClusterError;
use crate::cluster::bus::EntrySummary;
use crate::base::ids::hex;

/// The largest value a node publishes under one key. Addresses, a digest, a flag and a number
/// fit in a tiny fraction of it.
pub const MAX_FACT_VALUE_BYTES: usize = 1024;

/// A fact a node publishes about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fact {
    /// `host:port` of the admin API (forwarding targets, `hotrule cluster` listings).
    AdminAddr,
    /// `host:port` of the cluster bus.
    BusAddr,
    /// [`digest_of`] the node's stored entries: peers compare it to decide on anti-entropy.
    Digest,
    /// "true" once the node booted and serves, "false" otherwise.
    Ready,
    /// Unix ms at which the node's last scan finished.
    LastScanMs,
}

impl Fact {
    pub const ALL: [Fact; 5] = [
        Fact::AdminAddr,
        Fact::BusAddr,
        Fact::Digest,
        Fact::Ready,
        Fact::LastScanMs,
    ];

    /// The gossip key.
    pub fn key(self) -> &'static str {
        match self {
            Fact::AdminAddr => "admin_addr",
            Fact::BusAddr => "bus_addr",
            Fact::Digest => "digest",
            Fact::Ready => "ready",
            Fact::LastScanMs => "last_scan_ms",
        }
    }

    pub fn from_key(key: &str) -> Option<Fact> {
        Fact::ALL.into_iter().find(|fact| fact.key() == key)
    }
}

/// Refuses a value too large to gossip.
pub fn check_fact_value(fact: Fact, value: &str) -> Result<(), ClusterError> {
    if value.len() > MAX_FACT_VALUE_BYTES {
        return Err(ClusterError::FactTooLarge {
            fact: fact.key(),
            len: value.len(),
            max: MAX_FACT_VALUE_BYTES,
        });
    }
    Ok(())
}

/// The encoding of a `ready` value.
pub fn ready_value(ready: bool) -> &'static str {
    if ready { "true" } else { "false" }
}

/// A node's facts as read from its gossip state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub admin_addr: Option<String>,
    pub bus_addr: Option<String>,
    pub digest: Option<String>,
    pub ready: bool,
    pub last_scan_ms: Option<u64>,
}

impl NodeFacts {
    /// Reads the facts out of a node's key-value pairs; unknown keys are ignored.
    pub fn from_key_values<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> NodeFacts {
        let mut facts = NodeFacts::default();
        for (key, value) in pairs {
            let text = || (!value.is_empty()).then(|| value.to_string());
            match Fact::from_key(key) {
                Some(Fact::AdminAddr) => facts.admin_addr = text(),
                Some(Fact::BusAddr) => facts.bus_addr = text(),
                Some(Fact::Digest) => facts.digest = text(),
                Some(Fact::Ready) => facts.ready = value == ready_value(true),
                Some(Fact::LastScanMs) => facts.last_scan_ms = value.parse().ok(),
                None => {}
            }
        }
        facts
    }
}

/// A short fingerprint of a node's entries: the first 16 bytes of SHA-256 over every
/// (key, revision) pair in key order, as 32 hex characters. Two nodes holding the same revision
/// of every key have the same digest whatever order they list them in; a revision identifies
/// content and status, so they are not hashed again. Every field is length-prefixed, so no two
/// different lists hash the same bytes.
pub fn digest_of(entries: &[EntrySummary]) -> String {
    let mut sorted: Vec<&EntrySummary> = entries.iter().collect();
    sorted.sort_by(|a, b| (&a.key, &a.revision).cmp(&(&b.key, &b.revision)));
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    for entry in sorted {
        field(entry.key.catalog.as_str().as_bytes());
        field(entry.key.name.as_str().as_bytes());
        field(&entry.revision.millis.to_le_bytes());
        field(&entry.revision.counter.to_le_bytes());
        field(entry.revision.node.0.as_bytes());
    }
    hex(&hasher.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, ContentHash, NodeId, Revision, RuleKey, RuleName};
    use crate::store::EntryStatus;

    fn summary(name: &str, millis: u64, node: &str) -> EntrySummary {
        EntrySummary {
            key: RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("valid")),
            revision: Revision {
                millis,
                counter: 0,
                node: NodeId(node.into()),
            },
            content_hash: ContentHash::of(name.as_bytes()),
            status: EntryStatus::Active,
        }
    }

    #[test]
    fn keys_are_unique_and_round_trip() {
        for fact in Fact::ALL {
            assert_eq!(Fact::from_key(fact.key()), Some(fact));
        }
        let mut keys: Vec<_> = Fact::ALL.iter().map(|f| f.key()).collect();
        keys.dedup();
        assert_eq!(keys.len(), Fact::ALL.len());
        assert_eq!(Fact::from_key("bus_addr2"), None);
    }

    #[test]
    fn values_over_the_cap_are_refused() {
        assert!(check_fact_value(Fact::Digest, &"x".repeat(MAX_FACT_VALUE_BYTES)).is_ok());
        let refused = check_fact_value(Fact::Digest, &"x".repeat(MAX_FACT_VALUE_BYTES + 1));
        assert!(matches!(
            refused,
            Err(ClusterError::FactTooLarge {
                fact: "digest",
                len: 1025,
                max: 1024
            })
        ));
    }

    #[test]
    fn facts_read_leniently_from_peer_values() {
        let facts = NodeFacts::from_key_values([
            ("admin_addr", "10.0.0.1:17128"),
            ("bus_addr", "10.0.0.1:17129"),
            ("digest", "abcd"),
            ("ready", "true"),
            ("last_scan_ms", "1700000000000"),
            ("someone_elses_key", "x"),
        ]);
        assert_eq!(
            facts,
            NodeFacts {
                admin_addr: Some("10.0.0.1:17128".into()),
                bus_addr: Some("10.0.0.1:17129".into()),
                digest: Some("abcd".into()),
                ready: true,
                last_scan_ms: Some(1_700_000_000_000),
            }
        );
        let odd = NodeFacts::from_key_values([
            ("ready", "TRUE"),
            ("last_scan_ms", "-1"),
            ("bus_addr", ""),
        ]);
        assert_eq!(odd, NodeFacts::default());
    }

    #[test]
    fn the_digest_is_short_order_independent_and_revision_sensitive() {
        let a = summary("a", 1, "n1");
        let b = summary("b", 2, "n1");
        let digest = digest_of(&[a.clone(), b.clone()]);
        assert_eq!(digest.len(), 32);
        assert_eq!(digest, digest_of(&[b.clone(), a.clone()]));
        assert_ne!(digest, digest_of(std::slice::from_ref(&a)));
        assert_ne!(digest, digest_of(&[a.clone(), summary("b", 3, "n1")]));
        assert_ne!(digest, digest_of(&[a.clone(), summary("b", 2, "n2")]));
        assert_ne!(digest_of(&[]), digest_of(&[a]));
        assert!(check_fact_value(Fact::Digest, &digest).is_ok());
    }
}
