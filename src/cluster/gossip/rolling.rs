//! Roll health in gossip (issue 15, docs/rolling.md "Health in gossip"): one small typed key per
//! file a node is rolling, `roll/<catalog>/<name>`, holding that node's [`HealthReport`].
//!
//! The value is a format-version byte and the report in bincode (hashes as 32 raw bytes, the
//! "running since" as a span before `reported_ms`, the apply error cut to
//! [`MAX_APPLY_ERROR_BYTES`]), as unpadded base64 because chitchat values are strings. The worst
//! case stays under [`MAX_ROLL_REPORT_BYTES`], far below chitchat's 64 KB; a typical report is
//! about 70 characters.
//!
//! A node sets the whole set of its reports at once ([`Membership::publish_roll_health`]): keys
//! of files it no longer rolls are deleted (chitchat tombstones them). The main reads every
//! member's report for a file, with the member's liveness, through
//! [`Membership::roll_health`]. A value a peer sent that does not decode reads as no report.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::ClusterError;
use super::membership::Membership;
use crate::base::ids::{ContentHash, NodeId, RuleKey, hex};
use crate::control::rolling::HealthReport;

/// Every roll key starts with this.
pub const ROLL_KEY_PREFIX: &str = "roll/";

/// The largest roll report value, in characters (the worst case encodes to about 170).
pub const MAX_ROLL_REPORT_BYTES: usize = 200;

/// An apply error longer than this is cut (on a character boundary) before it is gossiped; the
/// node's own status API keeps the whole message.
pub const MAX_APPLY_ERROR_BYTES: usize = 40;

const FORMAT_VERSION: u8 = 1;

/// The gossip key of `key`'s roll report.
pub fn roll_health_key(key: &RuleKey) -> String {
    format!("{ROLL_KEY_PREFIX}{}/{}", key.catalog.as_str(), key.name.as_str())
}

/// What the main reads of one member for a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollHealth {
    pub node: NodeId,
    /// The member is live in this node's view (self always is).
    pub live: bool,
    /// Its latest report for the file, if it published one that decodes.
    pub report: Option<HealthReport>,
}

/// The report as gossiped: compact and fixed in shape.
#[derive(Debug, Serialize, Deserialize)]
struct WireReport {
    running_hash: Option<[u8; 32]>,
    reported_ms: u64,
    /// `reported_ms - running_since_ms`: small, so its varint is short.
    running_for_ms: u64,
    apply_error: Option<String>,
    dispatch_running: bool,
    eval_errors_rise: u64,
    samples_in: u64,
    values_out: u64,
}

/// Encodes `report` as the value of `key`'s roll key.
pub fn encode_report(key: &RuleKey, report: &HealthReport) -> Result<String, ClusterError> {
    let running_hash = match &report.running_hash {
        Some(hash) => Some(raw_hash(hash).ok_or_else(|| ClusterError::RollReportHash { key: key.to_string() })?),
        None => None,
    };
    let wire = WireReport {
        running_hash,
        reported_ms: report.reported_ms,
        running_for_ms: report.reported_ms.saturating_sub(report.running_since_ms),
        apply_error: report.apply_error.as_deref().map(cut_error),
        dispatch_running: report.dispatch_running,
        eval_errors_rise: report.eval_errors_rise,
        samples_in: report.samples_in,
        values_out: report.values_out,
    };
    let mut bytes = vec![FORMAT_VERSION];
    // Encoding a plain struct into a Vec cannot fail; a failure is reported, never unwrapped.
    let body = bincode::serde::encode_to_vec(&wire, bincode::config::standard())
        .map_err(|e| ClusterError::RollReportEncode { key: key.to_string(), reason: e.to_string() })?;
    bytes.extend_from_slice(&body);
    let value = base64::encode(&bytes);
    if value.len() > MAX_ROLL_REPORT_BYTES {
        return Err(ClusterError::RollReportTooLarge { key: key.to_string(), len: value.len(), max: MAX_ROLL_REPORT_BYTES });
    }
    Ok(value)
}

/// Decodes a roll key's value; `None` for anything that is not a version-1 report.
pub fn decode_report(value: &str) -> Option<HealthReport> {
    if value.len() > MAX_ROLL_REPORT_BYTES {
        return None;
    }
    let bytes = base64::decode(value)?;
    let (version, body) = bytes.split_first()?;
    if *version != FORMAT_VERSION {
        return None;
    }
    let (wire, read): (WireReport, usize) =
        bincode::serde::decode_from_slice(body, bincode::config::standard()).ok()?;
    if read != body.len() {
        return None;
    }
    Some(HealthReport {
        running_hash: wire.running_hash.map(|raw| ContentHash(hex(&raw))),
        running_since_ms: wire.reported_ms.saturating_sub(wire.running_for_ms),
        reported_ms: wire.reported_ms,
        apply_error: wire.apply_error,
        dispatch_running: wire.dispatch_running,
        eval_errors_rise: wire.eval_errors_rise,
        samples_in: wire.samples_in,
        values_out: wire.values_out,
    })
}

/// The 32 bytes of a SHA-256 hex hash.
fn raw_hash(hash: &ContentHash) -> Option<[u8; 32]> {
    let text = hash.as_str().as_bytes();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *slot = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

fn cut_error(message: &str) -> String {
    if message.len() <= MAX_APPLY_ERROR_BYTES {
        return message.to_string();
    }
    let mut end = MAX_APPLY_ERROR_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

impl Membership {
    /// Publishes this node's roll reports, one key per file, and deletes the roll keys of files
    /// not in `reports` (a roll that finished, or one this node no longer takes part in).
    /// Nothing is changed when one report cannot be encoded.
    pub async fn publish_roll_health(&self, reports: &BTreeMap<RuleKey, HealthReport>) -> Result<(), ClusterError> {
        let values = reports
            .iter()
            .map(|(key, report)| Ok((roll_health_key(key), encode_report(key, report)?)))
            .collect::<Result<BTreeMap<String, String>, ClusterError>>()?;
        self.with_self_state(|state| {
            let stale: BTreeSet<String> = state
                .key_values()
                .map(|(key, _)| key)
                .filter(|key| key.starts_with(ROLL_KEY_PREFIX) && !values.contains_key(*key))
                .map(str::to_string)
                .collect();
            for key in stale {
                state.delete(&key);
            }
            for (key, value) in &values {
                state.set(key, value);
            }
        })
        .await;
        Ok(())
    }

    /// Every member of the current view with its latest report for `key`, in node id order.
    pub async fn roll_health(&self, key: &RuleKey) -> Vec<RollHealth> {
        let view = self.view().borrow().clone();
        let gossip_key = roll_health_key(key);
        let values = self.member_values(&gossip_key).await;
        view.members
            .into_iter()
            .map(|member| {
                let report = values.get(&(member.node_id.clone(), member.generation)).and_then(|v| decode_report(v));
                RollHealth { node: member.node_id, live: member.live, report }
            })
            .collect()
    }
}

/// Unpadded standard base64 (RFC 4648 §4), enough for the roll values; no dependency for it.
mod base64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            }
        }
        out
    }

    pub fn decode(text: &str) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(text.len() * 3 / 4);
        for chunk in text.as_bytes().chunks(4) {
            if chunk.len() == 1 {
                return None;
            }
            let mut n = 0u32;
            for (i, c) in chunk.iter().enumerate() {
                let value = ALPHABET.iter().position(|a| a == c)?;
                n |= (value as u32) << (18 - 6 * i);
            }
            for i in 0..chunk.len() - 1 {
                out.push((n >> (16 - 8 * i)) as u8);
            }
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn matches_the_rfc_4648_vectors_without_padding() {
            for (input, expected) in
                [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")]
            {
                assert_eq!(super::encode(input.as_bytes()), expected, "{input}");
                assert_eq!(super::decode(expected).as_deref(), Some(input.as_bytes()), "{expected}");
            }
            let all: Vec<u8> = (0..=255).collect();
            assert_eq!(super::decode(&super::encode(&all)), Some(all));
            assert_eq!(super::decode("Zm9vY"), None, "a lone trailing character");
            assert_eq!(super::decode("Zm9*"), None, "outside the alphabet");
        }
    }
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
