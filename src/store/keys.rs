//! The key layout of management storage, in one place.
//!
//! - `rule/<catalog>/<name>`: a runtime rule entry (including tombstones);
//! - `measure/<metric name>`: a schema-registry measure.

use crate::ids::RuleKey;

pub const RULE_PREFIX: &[u8] = b"rule/";
pub const MEASURE_PREFIX: &[u8] = b"measure/";

pub fn rule_key(key: &RuleKey) -> Vec<u8> {
    let mut out = RULE_PREFIX.to_vec();
    out.extend_from_slice(key.catalog.as_str().as_bytes());
    out.push(b'/');
    out.extend_from_slice(key.name.as_str().as_bytes());
    out
}

pub fn measure_key(metric: &str) -> Vec<u8> {
    let mut out = MEASURE_PREFIX.to_vec();
    out.extend_from_slice(metric.as_bytes());
    out
}
