//! Identity newtypes shared by every layer: catalogs, rule names and keys, node ids, content
//! hashes and revisions. Validation of operator-supplied names lives here, next to the type.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::compiler::DslKind;

/// A catalog of management storage. The five rule catalogs mirror the on-disk directory of
/// bundled rules; the agent catalogs hold the desired state served to log and metric agents
/// (groups, pipeline and instance configs, onetime commands). Both kinds are entries written by
/// the one workflow and replicated alike; only rule catalogs are compiled and loaded.
///
/// New variants go at the end: the serialized form of an entry carries the variant index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Catalog {
    OtelRules,
    LogMalRules,
    TelegrafRules,
    MeterAnalyzerConfig,
    Lal,
    AgentGroups,
    AgentPipelineConfigs,
    AgentInstanceConfigs,
    AgentCommands,
}

impl Catalog {
    /// The rule catalogs (what the rule routes, bundled files, list and dump know).
    pub const ALL: [Catalog; 5] = [
        Catalog::OtelRules,
        Catalog::LogMalRules,
        Catalog::TelegrafRules,
        Catalog::MeterAnalyzerConfig,
        Catalog::Lal,
    ];

    /// The agent catalogs (desired state of the agent config server).
    pub const AGENT: [Catalog; 4] = [
        Catalog::AgentGroups,
        Catalog::AgentPipelineConfigs,
        Catalog::AgentInstanceConfigs,
        Catalog::AgentCommands,
    ];

    /// True for the five rule catalogs, false for agent catalogs.
    pub fn is_rule(self) -> bool {
        self.dsl().is_some()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Catalog::OtelRules => "otel-rules",
            Catalog::LogMalRules => "log-mal-rules",
            Catalog::TelegrafRules => "telegraf-rules",
            Catalog::MeterAnalyzerConfig => "meter-analyzer-config",
            Catalog::Lal => "lal",
            Catalog::AgentGroups => "agent-groups",
            Catalog::AgentPipelineConfigs => "agent-pipeline-configs",
            Catalog::AgentInstanceConfigs => "agent-instance-configs",
            Catalog::AgentCommands => "agent-commands",
        }
    }

    /// A rule catalog by name; agent catalogs are not accepted (rule routes refuse them).
    pub fn parse(text: &str) -> Option<Catalog> {
        Catalog::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The rule language of a rule catalog; `None` for agent catalogs, which are never compiled.
    pub fn dsl(self) -> Option<DslKind> {
        match self {
            Catalog::Lal => Some(DslKind::Lal),
            Catalog::OtelRules | Catalog::LogMalRules | Catalog::TelegrafRules | Catalog::MeterAnalyzerConfig => {
                Some(DslKind::Mal)
            }
            Catalog::AgentGroups
            | Catalog::AgentPipelineConfigs
            | Catalog::AgentInstanceConfigs
            | Catalog::AgentCommands => None,
        }
    }
}

impl fmt::Display for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a rule name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleNameError {
    #[error("name is empty")]
    Empty,
    #[error("name {0:?} must match ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$ and must not contain '..'")]
    Invalid(String),
}

/// A rule name: the path relative to the catalog root, without the extension.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuleName(String);

impl RuleName {
    /// Validates `^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$` and rejects any `..` segment or substring.
    pub fn parse(text: &str) -> Result<RuleName, RuleNameError> {
        if text.is_empty() {
            return Err(RuleNameError::Empty);
        }
        let segment_ok = |segment: &str| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        };
        if !text.split('/').all(segment_ok) || text.contains("..") {
            return Err(RuleNameError::Invalid(text.to_string()));
        }
        Ok(RuleName(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of one rule file: (catalog, name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuleKey {
    pub catalog: Catalog,
    pub name: RuleName,
}

impl RuleKey {
    pub fn new(catalog: Catalog, name: RuleName) -> RuleKey {
        RuleKey { catalog, name }
    }
}

impl fmt::Display for RuleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.catalog, self.name)
    }
}

/// A node's identity; by default its advertised admin address `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub String);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 of rule content, as 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ContentHash(pub String);

impl ContentHash {
    pub fn of(content: &[u8]) -> ContentHash {
        ContentHash(hex(&Sha256::digest(content)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

/// A revision totally orders writes to one key: hybrid-logical-clock milliseconds, then a
/// counter for writes within the same millisecond, then the writer's node id as tie-breaker.
/// Replicas merge by last-write-wins on this order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Revision {
    pub millis: u64,
    pub counter: u32,
    pub node: NodeId,
}

impl Revision {
    pub fn zero() -> Revision {
        Revision { millis: 0, counter: 0, node: NodeId(String::new()) }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}@{}", self.millis, self.counter, self.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_follow_the_reference_pattern() {
        for ok in ["vm", "aws-gateway/gateway-service", "k8s/node", "a.b_c-d", "x/y/z"] {
            assert!(RuleName::parse(ok).is_ok(), "{ok} should be valid");
        }
        for bad in ["", "/vm", "vm/", "a//b", "..", "a/../b", "a..b", "a\\b", "a b", "a\0b", "é"] {
            assert!(RuleName::parse(bad).is_err(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn content_hash_vectors_match_the_reference() {
        assert_eq!(
            ContentHash::of(b"").as_str(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            ContentHash::of(b"abc").as_str(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(ContentHash::of(b"a "), ContentHash::of(b"a"));
    }

    #[test]
    fn revisions_order_by_millis_then_counter_then_node() {
        let r = |m, c, n: &str| Revision { millis: m, counter: c, node: NodeId(n.into()) };
        assert!(r(1, 9, "z") < r(2, 0, "a"));
        assert!(r(2, 0, "z") < r(2, 1, "a"));
        assert!(r(2, 1, "a") < r(2, 1, "b"));
    }

    #[test]
    fn catalogs_round_trip_and_map_to_their_language() {
        for c in Catalog::ALL {
            assert_eq!(Catalog::parse(c.as_str()), Some(c));
        }
        assert_eq!(Catalog::parse("oal"), None);
        assert_eq!(Catalog::Lal.dsl(), Some(DslKind::Lal));
        assert_eq!(Catalog::TelegrafRules.dsl(), Some(DslKind::Mal));
        for c in Catalog::AGENT {
            assert!(!c.is_rule());
            assert_eq!(Catalog::parse(c.as_str()), None, "rule routes refuse {c}");
        }
        assert!(Catalog::ALL.iter().all(|c| c.is_rule()));
    }
}
