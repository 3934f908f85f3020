//! The gossip frame: a chitchat datagram sealed with an HMAC over the cluster secret.
//!
//! ```text
//! "HRG1" (4) | sent_ms u64 LE (8) | HMAC-SHA256 (32) | chitchat payload
//! MAC = HMAC(secret, "hotrule-gossip-v1\n" || sent_ms LE || payload)
//! ```
//!
//! The magic differs from chitchat's own (0xB053, little endian), so a plain chitchat node
//! (`--insecure-bus`) rejects a sealed datagram as "invalid chitchat payload", and a sealed node
//! rejects a plain one as malformed: the two never talk. A frame whose timestamp is more than
//! [`MAX_CLOCK_SKEW`](crate::cluster::bus::auth::MAX_CLOCK_SKEW) from the receiver's clock is stale.
//!
//! Sealing and opening are pure; the counters of what was refused live in [`GossipCounters`].

use std::sync::atomic::{AtomicU64, Ordering};

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use crate::cluster::bus::auth::MAX_CLOCK_SKEW;

type HmacSha256 = Hmac<Sha256>;

pub const FRAME_MAGIC: [u8; 4] = *b"HRG1";
const MAC_LEN: usize = 32;
/// Bytes a sealed frame adds in front of the chitchat payload.
pub const FRAME_OVERHEAD: usize = FRAME_MAGIC.len() + 8 + MAC_LEN;
/// The largest UDP payload over IPv4, which chitchat fills its messages up to.
pub const MAX_UDP_PAYLOAD_BYTES: usize = 65_507;
/// The largest chitchat payload a sealed frame can carry. chitchat 0.13 sizes its deltas for
/// [`MAX_UDP_PAYLOAD_BYTES`] and does not take a smaller budget, so a message between this and
/// that size cannot be sent sealed: it is dropped and counted (`oversize_dropped`). With facts
/// capped at `MAX_FACT_VALUE_BYTES`, that takes a cluster of dozens of nodes at full caps.
pub const MAX_SEALED_PAYLOAD_BYTES: usize = MAX_UDP_PAYLOAD_BYTES - FRAME_OVERHEAD;

const MAC_CONTEXT: &[u8] = b"hotrule-gossip-v1\n";

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than a frame, or without the frame magic (for example a plain chitchat datagram).
    Malformed,
    /// Sent more than the allowed clock skew away from this node's clock.
    Stale { skew_ms: u64 },
    /// The MAC does not match: a different secret, or a forged or altered datagram.
    BadMac,
}

/// Seals `payload` sent at `sent_ms`.
pub fn seal(secret: &[u8], sent_ms: u64, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_OVERHEAD + payload.len());
    frame.extend_from_slice(&FRAME_MAGIC);
    frame.extend_from_slice(&sent_ms.to_le_bytes());
    frame.extend_from_slice(&mac_of(secret, sent_ms, payload).finalize().into_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The payload of a frame received at `now_ms`, if it proves the secret and is fresh.
pub fn open<'frame>(
    secret: &[u8],
    now_ms: u64,
    frame: &'frame [u8],
) -> Result<&'frame [u8], Refusal> {
    if frame.len() < FRAME_OVERHEAD || frame[..FRAME_MAGIC.len()] != FRAME_MAGIC {
        return Err(Refusal::Malformed);
    }
    let (ts_bytes, rest) = frame[FRAME_MAGIC.len()..].split_at(8);
    let (mac, payload) = rest.split_at(MAC_LEN);
    let mut ts = [0u8; 8];
    ts.copy_from_slice(ts_bytes);
    let sent_ms = u64::from_le_bytes(ts);
    // The MAC first: an unauthenticated sender learns nothing from the answer (there is none),
    // and a stale frame is only reported as stale when it is genuine.
    mac_of(secret, sent_ms, payload)
        .verify_slice(mac)
        .map_err(|_| Refusal::BadMac)?;
    let skew_ms = now_ms.abs_diff(sent_ms);
    if skew_ms > MAX_CLOCK_SKEW.as_millis() as u64 {
        return Err(Refusal::Stale { skew_ms });
    }
    Ok(payload)
}

fn mac_of(secret: &[u8], sent_ms: u64, payload: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail; the fallback keeps it panic-free.
    let mut mac =
        HmacSha256::new_from_slice(secret).unwrap_or_else(|_| HmacSha256::new(&Default::default()));
    mac.update(MAC_CONTEXT);
    mac.update(&sent_ms.to_le_bytes());
    mac.update(payload);
    mac
}

/// What the authenticated gossip transport let in and kept out. Shared by the socket and
/// whoever reports it (`/cluster/status`).
#[derive(Debug, Default)]
pub struct GossipCounters {
    accepted: AtomicU64,
    malformed: AtomicU64,
    stale: AtomicU64,
    bad_mac: AtomicU64,
    /// Authenticated payloads chitchat could not decode (a buggy or different peer).
    undecodable: AtomicU64,
    /// Authenticated datagrams whose digest claimed a heartbeat beyond reach (`heartbeats`).
    heartbeat_jumps: AtomicU64,
    /// Outgoing messages too large to seal (see [`MAX_SEALED_PAYLOAD_BYTES`]).
    oversize_dropped: AtomicU64,
}

/// A copy of [`GossipCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GossipCounterSnapshot {
    pub authenticated: bool,
    pub accepted: u64,
    pub malformed: u64,
    pub stale: u64,
    pub bad_mac: u64,
    pub undecodable: u64,
    pub heartbeat_jumps: u64,
    pub oversize_dropped: u64,
}

impl GossipCounterSnapshot {
    /// Every datagram dropped on receipt, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.malformed + self.stale + self.bad_mac + self.undecodable + self.heartbeat_jumps
    }
}

impl GossipCounters {
    pub fn record(&self, outcome: Result<(), Refusal>) {
        let counter = match outcome {
            Ok(()) => &self.accepted,
            Err(Refusal::Malformed) => &self.malformed,
            Err(Refusal::Stale { .. }) => &self.stale,
            Err(Refusal::BadMac) => &self.bad_mac,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_undecodable(&self) {
        self.undecodable.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_heartbeat_jump(&self) {
        self.heartbeat_jumps.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_oversize(&self) {
        self.oversize_dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self, authenticated: bool) -> GossipCounterSnapshot {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        GossipCounterSnapshot {
            authenticated,
            accepted: read(&self.accepted),
            malformed: read(&self.malformed),
            stale: read(&self.stale),
            bad_mac: read(&self.bad_mac),
            undecodable: read(&self.undecodable),
            heartbeat_jumps: read(&self.heartbeat_jumps),
            oversize_dropped: read(&self.oversize_dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn a_sealed_frame_opens_and_any_change_breaks_it() {
        let frame = seal(b"s", NOW, b"payload");
        assert_eq!(frame.len(), FRAME_OVERHEAD + 7);
        assert_eq!(open(b"s", NOW, &frame), Ok(&b"payload"[..]));
        assert_eq!(open(b"other", NOW, &frame), Err(Refusal::BadMac));
        for at in 0..frame.len() {
            let mut altered = frame.clone();
            altered[at] ^= 0x01;
            assert!(open(b"s", NOW, &altered).is_err(), "byte {at} altered");
        }
        assert_eq!(
            open(b"s", NOW, &frame[..frame.len() - 1]),
            Err(Refusal::BadMac)
        );
    }

    #[test]
    fn plain_chitchat_short_and_stale_frames_are_refused() {
        // A plain chitchat datagram starts with its magic number 45139 (LE) and a version byte.
        let mut plain = 45_139u16.to_le_bytes().to_vec();
        plain.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        plain.resize(67, 0xff);
        assert_eq!(open(b"s", NOW, &plain), Err(Refusal::Malformed));
        assert_eq!(open(b"s", NOW, b""), Err(Refusal::Malformed));
        assert_eq!(open(b"s", NOW, &FRAME_MAGIC), Err(Refusal::Malformed));
        let skew = MAX_CLOCK_SKEW.as_millis() as u64;
        let old = seal(b"s", NOW - skew - 1, b"x");
        assert!(matches!(open(b"s", NOW, &old), Err(Refusal::Stale { .. })));
        let future = seal(b"s", NOW + skew + 1, b"x");
        assert!(matches!(
            open(b"s", NOW, &future),
            Err(Refusal::Stale { .. })
        ));
        let edge = seal(b"s", NOW - skew, b"x");
        assert_eq!(open(b"s", NOW, &edge), Ok(&b"x"[..]));
    }

    #[test]
    fn counters_sort_every_outcome() {
        let counters = GossipCounters::default();
        counters.record(Ok(()));
        counters.record(Err(Refusal::Malformed));
        counters.record(Err(Refusal::BadMac));
        counters.record(Err(Refusal::BadMac));
        counters.record(Err(Refusal::Stale { skew_ms: 1 }));
        counters.record_undecodable();
        counters.record_heartbeat_jump();
        counters.record_oversize();
        let snapshot = counters.snapshot(true);
        assert_eq!(
            (
                snapshot.accepted,
                snapshot.malformed,
                snapshot.bad_mac,
                snapshot.stale
            ),
            (1, 1, 2, 1)
        );
        assert_eq!(
            (
                snapshot.undecodable,
                snapshot.heartbeat_jumps,
                snapshot.oversize_dropped
            ),
            (1, 1, 1)
        );
        assert_eq!(snapshot.dropped(), 6);
    }
}
