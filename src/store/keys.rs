//! The key layout of management storage, in one place.
//!
//! - `rule/<catalog>/<name>`: a runtime rule entry (including tombstones);
//! - `measure/<metric name>`: a schema-registry measure;
//! - `roll/<catalog>/<name>`: the roll record of a rule file being rolled out node by node
//!   (issue 15); outside `rule/`, so not an entry: it replicates through its own messages and
//!   its own part of the digest (`replication::rolling`);
//! - `history/<catalog>/<name>#<revision>`: one committed revision of an entry (issue 26), the
//!   revision as `<millis, 20 digits>.<counter, 10 digits>@<node>` so one key's records sort by
//!   revision (names never hold `#`); outside `rule/`, so not an entry;
//! - `agent-state/<instance id>`: what this node remembers of an agent heartbeating it. Node-local:
//!   outside `rule/`, so neither the digest nor the fetch of replication ever sees it.
//!
//! Agent desired state (groups, configs, commands) lives under `rule/<agent catalog>/<name>`: it is
//! written and replicated exactly like rule entries.

use crate::base::ids::{Catalog, RuleKey};

pub const RULE_PREFIX: &[u8] = b"rule/";
pub const MEASURE_PREFIX: &[u8] = b"measure/";
pub const AGENT_STATE_PREFIX: &[u8] = b"agent-state/";
pub const ROLL_PREFIX: &[u8] = b"roll/";
pub const HISTORY_PREFIX: &[u8] = b"history/";

/// `history/<catalog>/<name>#`: every history record of one key.
pub fn history_prefix(key: &RuleKey) -> Vec<u8> {
    let mut out = HISTORY_PREFIX.to_vec();
    out.extend_from_slice(key.catalog.as_str().as_bytes());
    out.push(b'/');
    out.extend_from_slice(key.name.as_str().as_bytes());
    out.push(b'#');
    out
}

/// `history/<catalog>/<name>#<revision>`: one history record.
pub fn history_key(key: &RuleKey, revision: &crate::base::ids::Revision) -> Vec<u8> {
    let mut out = history_prefix(key);
    out.extend_from_slice(format!("{:020}.{:010}@{}", revision.millis, revision.counter, revision.node).as_bytes());
    out
}

/// `rule/<catalog>/`: every entry of one catalog.
pub fn catalog_prefix(catalog: Catalog) -> Vec<u8> {
    let mut out = RULE_PREFIX.to_vec();
    out.extend_from_slice(catalog.as_str().as_bytes());
    out.push(b'/');
    out
}

pub fn agent_state_key(instance_id: &str) -> Vec<u8> {
    let mut out = AGENT_STATE_PREFIX.to_vec();
    out.extend_from_slice(instance_id.as_bytes());
    out
}

pub fn rule_key(key: &RuleKey) -> Vec<u8> {
    let mut out = RULE_PREFIX.to_vec();
    out.extend_from_slice(key.catalog.as_str().as_bytes());
    out.push(b'/');
    out.extend_from_slice(key.name.as_str().as_bytes());
    out
}

/// True when a `rule/<catalog>/<name>` key's name is a valid [`crate::base::ids::RuleName`].
pub fn has_valid_rule_name(raw_key: &[u8]) -> bool {
    let Some(rest) = raw_key.strip_prefix(RULE_PREFIX) else { return false };
    let Ok(rest) = std::str::from_utf8(rest) else { return false };
    rest.split_once('/').is_some_and(|(_catalog, name)| crate::base::ids::RuleName::parse(name).is_ok())
}

pub fn measure_key(metric: &str) -> Vec<u8> {
    let mut out = MEASURE_PREFIX.to_vec();
    out.extend_from_slice(metric.as_bytes());
    out
}

/// `roll/<catalog>/<name>`: the roll record of one rule file.
pub fn roll_key(key: &RuleKey) -> Vec<u8> {
    let mut out = ROLL_PREFIX.to_vec();
    out.extend_from_slice(key.catalog.as_str().as_bytes());
    out.push(b'/');
    out.extend_from_slice(key.name.as_str().as_bytes());
    out
}

/// The rule file of a `roll/<catalog>/<name>` key; `None` when it names no valid rule file.
pub fn parse_roll_key(raw_key: &[u8]) -> Option<RuleKey> {
    let rest = std::str::from_utf8(raw_key.strip_prefix(ROLL_PREFIX)?).ok()?;
    let (catalog, name) = rest.split_once('/')?;
    Some(RuleKey::new(Catalog::parse(catalog)?, crate::base::ids::RuleName::parse(name).ok()?))
}
