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
    /// The alarm rules and hooks (`alarm-settings.yml`) pushed at runtime: one entry, replacing
    /// the boot file while it lives.
    AlarmSettings,
    /// Dashboard templates changed at runtime over SkyWalking's GraphQL protocol
    /// (`addTemplate` / `changeTemplate` / `disableTemplate`): one entry per template id, laid
    /// over the bundled `ui-templates` by id.
    UiTemplate,
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

    /// True for the five rule catalogs, false for the agent catalogs, alarm settings and UI
    /// templates.
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
            Catalog::AlarmSettings => "alarm-settings",
            Catalog::UiTemplate => "ui-template",
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
            | Catalog::AgentCommands
            | Catalog::AlarmSettings
            | Catalog::UiTemplate => None,
        }
    }
}

impl fmt::Display for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest rule name, in bytes. The longest SkyWalking bundled name is under 60 bytes; the
/// bound keeps every dump path (`runtime-rule-dump/inactive/<catalog>/<name>.yaml`) well under
/// the 255-byte name limit of tar's ustar prefix and of common filesystems.
pub const MAX_RULE_NAME_BYTES: usize = 200;

/// Why a rule name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleNameError {
    #[error("name is empty")]
    Empty,
    #[error("name is {len} bytes long; at most {MAX_RULE_NAME_BYTES} are allowed")]
    TooLong { len: usize },
    #[error(
        "name {0:?} must match ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$: no empty segment ('//', or a leading or \
         trailing '/'), no '.' or '..' segment and no '..' anywhere"
    )]
    Invalid(String),
}

/// A rule name: the path relative to the catalog root, without the extension.
///
/// Every way in validates: [`RuleName::parse`], and `Deserialize` (bus messages, stored entries)
/// goes through it too, so a name that arrives over the bus is held to the same rules as one an
/// operator types.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RuleName(String);

impl RuleName {
    /// Validates `^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$` (so no empty segment and no leading or
    /// trailing `/`), rejects `.` and `..` segments and any `..` substring, and bounds the length.
    pub fn parse(text: &str) -> Result<RuleName, RuleNameError> {
        if text.is_empty() {
            return Err(RuleNameError::Empty);
        }
        if text.len() > MAX_RULE_NAME_BYTES {
            return Err(RuleNameError::TooLong { len: text.len() });
        }
        let segment_ok = |segment: &str| {
            !segment.is_empty()
                && segment != "."
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

    /// The name as a case-insensitive filesystem sees it. Two names of one catalog with the same
    /// folded form would extract from a dump onto one file, so only one of them may exist (names
    /// are ASCII, so ASCII lowercase is the whole folding).
    pub fn folded(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

impl TryFrom<String> for RuleName {
    type Error = RuleNameError;

    fn try_from(text: String) -> Result<RuleName, RuleNameError> {
        RuleName::parse(&text)
    }
}

impl From<RuleName> for String {
    fn from(name: RuleName) -> String {
        name.0
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

/// The longest node id, in bytes.
pub const MAX_NODE_ID_BYTES: usize = 255;

/// A node's identity; by default its advertised admin address `host:port`.
///
/// Decoding (bus messages, stored revisions) checks the length and refuses control characters;
/// the empty id is the zero revision's and stays decodable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(pub String);

/// Why a decoded node id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIdError {
    #[error("node id is {len} bytes long; at most {MAX_NODE_ID_BYTES} are allowed")]
    TooLong { len: usize },
    #[error("node id {0:?} holds a control character")]
    Control(String),
}

impl NodeId {
    /// Checks a node id from the wire or from storage.
    pub fn parse(text: &str) -> Result<NodeId, NodeIdError> {
        if text.len() > MAX_NODE_ID_BYTES {
            return Err(NodeIdError::TooLong { len: text.len() });
        }
        if text.chars().any(char::is_control) {
            return Err(NodeIdError::Control(text.to_string()));
        }
        Ok(NodeId(text.to_string()))
    }
}

impl TryFrom<String> for NodeId {
    type Error = NodeIdError;

    fn try_from(text: String) -> Result<NodeId, NodeIdError> {
        NodeId::parse(&text)
    }
}

impl From<NodeId> for String {
    fn from(id: NodeId) -> String {
        id.0
    }
}

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

/// Why a revision's text form (`<millis>.<counter>@<node>`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevisionParseError {
    #[error("revision {0:?} is not <millis>.<counter>@<node>")]
    Shape(String),
    #[error("revision {text:?}: {source}")]
    Node { text: String, source: NodeIdError },
}

impl Revision {
    /// Parses the text form [`Revision`]'s `Display` writes (what answers and the CLI show).
    pub fn parse(text: &str) -> Result<Revision, RevisionParseError> {
        let shape = || RevisionParseError::Shape(text.to_string());
        let (clock, node) = text.trim().split_once('@').ok_or_else(shape)?;
        let (millis, counter) = clock.split_once('.').ok_or_else(shape)?;
        let millis = millis.parse::<u64>().map_err(|_| shape())?;
        let counter = counter.parse::<u32>().map_err(|_| shape())?;
        let node = NodeId::parse(node).map_err(|source| RevisionParseError::Node { text: text.to_string(), source })?;
        Ok(Revision { millis, counter, node })
    }
}

/// A random UUID (version 4) in its usual text form: what OAP draws for a new dashboard, and
/// what a LoongCollector agent uses in its instance id.
pub fn random_uuid() -> String {
    use rand::Rng;
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_follow_the_reference_pattern() {
        for ok in ["vm", "aws-gateway/gateway-service", "k8s/node", "a.b_c-d", "x/y/z"] {
            assert!(RuleName::parse(ok).is_ok(), "{ok} should be valid");
        }
        for bad in ["", "/vm", "vm/", "a//b", "..", "a/../b", "a..b", "a\\b", "a b", "a\0b", "é", ".", "a/./b", "a/.", "./a"] {
            assert!(RuleName::parse(bad).is_err(), "{bad:?} should be invalid");
        }
        assert!(RuleName::parse(&"a".repeat(MAX_RULE_NAME_BYTES)).is_ok());
        assert_eq!(
            RuleName::parse(&"a".repeat(MAX_RULE_NAME_BYTES + 1)),
            Err(RuleNameError::TooLong { len: MAX_RULE_NAME_BYTES + 1 })
        );
    }

    #[test]
    fn every_skywalking_corpus_name_is_valid() {
        let root = std::path::Path::new("/work/shared/corpus/skywalking-rules");
        if !root.is_dir() {
            return;
        }
        let mut seen = 0;
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("read corpus dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    let relative = path.strip_prefix(root).expect("under root").with_extension("");
                    let mut segments = relative.iter().map(|s| s.to_string_lossy().into_owned());
                    let _catalog = segments.next();
                    let name = segments.collect::<Vec<_>>().join("/");
                    assert!(RuleName::parse(&name).is_ok(), "{name} should be valid");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 90, "read {seen} corpus files");
    }

    #[test]
    fn decoding_validates_like_parse() {
        let good: RuleName = serde_json::from_str("\"k8s/k8s-cluster\"").expect("valid");
        assert_eq!(good.as_str(), "k8s/k8s-cluster");
        for bad in ["\"\"", "\"../../etc/evil\"", "\"a//b\"", "\"/a\""] {
            assert!(serde_json::from_str::<RuleName>(bad).is_err(), "{bad} should not decode");
        }
        let bytes = bincode::serde::encode_to_vec("../../etc/evil", bincode::config::standard()).expect("encode");
        let decoded: Result<(RuleName, usize), _> = bincode::serde::decode_from_slice(&bytes, bincode::config::standard());
        assert!(decoded.is_err(), "bincode goes through the same check");
        let key = RuleKey::new(Catalog::Lal, RuleName::parse("a/b").expect("valid"));
        let bytes = bincode::serde::encode_to_vec(&key, bincode::config::standard()).expect("encode");
        let (back, _): (RuleKey, usize) = bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).expect("decode");
        assert_eq!(back, key);
    }

    #[test]
    fn node_ids_are_checked_on_decode() {
        let ok: NodeId = serde_json::from_str("\"127.0.0.1:17128\"").expect("valid");
        assert_eq!(ok.0, "127.0.0.1:17128");
        let shown = Revision { millis: 17, counter: 2, node: NodeId("10.0.0.1:9000".into()) };
        assert_eq!(Revision::parse(&shown.to_string()), Ok(shown));
        for bad in ["", "17", "17.2", "x.2@n", "17.y@n", "17@n", "-1.0@n"] {
            assert!(Revision::parse(bad).is_err(), "{bad:?} should be refused");
        }
        let zero: Revision = serde_json::from_str("{\"millis\":0,\"counter\":0,\"node\":\"\"}").expect("zero");
        assert_eq!(zero, Revision::zero());
        assert!(serde_json::from_str::<NodeId>("\"a\\nb\"").is_err());
        let long = format!("\"{}\"", "n".repeat(MAX_NODE_ID_BYTES + 1));
        assert!(serde_json::from_str::<NodeId>(&long).is_err());
    }

    #[test]
    fn names_fold_to_lowercase() {
        let name = RuleName::parse("flink/flink-jobManager").expect("valid");
        assert_eq!(name.folded(), "flink/flink-jobmanager");
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
        for c in Catalog::AGENT.into_iter().chain([Catalog::AlarmSettings, Catalog::UiTemplate]) {
            assert!(!c.is_rule());
            assert_eq!(Catalog::parse(c.as_str()), None, "rule routes refuse {c}");
        }
        assert!(Catalog::ALL.iter().all(|c| c.is_rule()));
    }
}
