//! A bound on the heartbeats a member may claim, checked on authenticated gossip before chitchat
//! sees it.
//!
//! chitchat takes the largest heartbeat it hears for a node, from anyone, and a node whose real
//! heartbeats then lag the claimed one looks dead. One datagram claiming 2⁶³ for a peer split a
//! cluster for as long as anyone watched. Sealing keeps strangers from sending it; this keeps a
//! buggy member from relaying it. A heartbeat grows by one per gossip round and per message a
//! node handles, so it cannot outrun [`MAX_RATE_PER_SEC`] (tens a second in practice):
//! a claim is refused when it is over [`MAX_FIRST_SEEN`] for a node not heard of before, or more
//! than `rate × elapsed + SLACK` above the largest one accepted for that node. The whole datagram
//! is dropped (and counted), so the absurd value never spreads.
//!
//! Only the uncompressed (V0) digest is read; hotrule nodes gossip V0 and chitchat answers in the
//! version it was asked in, so a V1 datagram is refused as undecodable.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chitchat::{ChitchatId, Deserializable};

/// A heartbeat over this for a node never heard of (at 1,000 a second, 35 years of uptime).
pub const MAX_FIRST_SEEN: u64 = 1 << 40;
/// The fastest a heartbeat can legitimately grow.
pub const MAX_RATE_PER_SEC: u64 = 1_000;
/// Growth always allowed, whatever the elapsed time.
pub const SLACK: u64 = 10_000;
/// Nodes remembered at most; past it, nodes not heard from for an hour are forgotten.
const MAX_NODES: usize = 4_096;
const FORGET_AFTER: Duration = Duration::from_secs(3_600);

/// Why a datagram's digest was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestRefusal {
    /// Not a V0 chitchat message, or a digest that does not parse.
    Unreadable,
    /// A heartbeat beyond what the node could have reached.
    Jump {
        node: String,
        claimed: u64,
        allowed: u64,
    },
}

/// The (node, heartbeat) claims in a chitchat payload's digest: none for messages without one
/// (Ack, BadCluster).
pub fn digest_claims(payload: &[u8]) -> Result<Vec<(ChitchatId, u64)>, DigestRefusal> {
    let [_, _, version, kind, rest @ ..] = payload else {
        return Err(DigestRefusal::Unreadable);
    };
    if *version != 0 {
        return Err(DigestRefusal::Unreadable);
    }
    // Message types: 0 Syn and 1 SynAck start with a digest; 2 Ack and 3 BadCluster carry none.
    match kind {
        0 | 1 => {}
        2 | 3 => return Ok(Vec::new()),
        _ => return Err(DigestRefusal::Unreadable),
    }
    let mut buf = rest;
    let read = |buf: &mut &[u8]| -> anyhow::Result<Vec<(ChitchatId, u64)>> {
        let count = u16::deserialize(buf)?;
        let mut claims = Vec::with_capacity(usize::from(count).min(1024));
        for _ in 0..count {
            let id = ChitchatId::deserialize(buf)?;
            let heartbeat = u64::deserialize(buf)?;
            let _last_gc_version = u64::deserialize(buf)?;
            let _max_version = u64::deserialize(buf)?;
            claims.push((id, heartbeat));
        }
        Ok(claims)
    };
    read(&mut buf).map_err(|_| DigestRefusal::Unreadable)
}

/// The largest heartbeat accepted per node incarnation, and when it was accepted.
#[derive(Debug, Default)]
pub struct HeartbeatBook {
    accepted: HashMap<(String, u64), (u64, Instant)>,
}

impl HeartbeatBook {
    /// Refuses the claims if any is beyond reach; otherwise records them.
    pub fn admit(
        &mut self,
        claims: &[(ChitchatId, u64)],
        now: Instant,
    ) -> Result<(), DigestRefusal> {
        for (id, claimed) in claims {
            let allowed = self.allowed(id, now);
            if *claimed > allowed {
                return Err(DigestRefusal::Jump {
                    node: id.node_id.to_string(),
                    claimed: *claimed,
                    allowed,
                });
            }
        }
        if self.accepted.len() >= MAX_NODES {
            self.accepted
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < FORGET_AFTER);
        }
        for (id, claimed) in claims {
            let key = (id.node_id.to_string(), id.generation_id);
            if let Some((largest, at)) = self.accepted.get_mut(&key) {
                if *claimed > *largest {
                    *largest = *claimed;
                    *at = now;
                }
            } else if self.accepted.len() < MAX_NODES {
                self.accepted.insert(key, (*claimed, now));
            }
            // Full of recently heard nodes: an unremembered one stays capped by MAX_FIRST_SEEN.
        }
        Ok(())
    }

    fn allowed(&self, id: &ChitchatId, now: Instant) -> u64 {
        match self
            .accepted
            .get(&(id.node_id.to_string(), id.generation_id))
        {
            None => MAX_FIRST_SEEN,
            Some((largest, at)) => {
                let elapsed_ms = now.saturating_duration_since(*at).as_millis();
                let growth = (elapsed_ms.saturating_mul(u128::from(MAX_RATE_PER_SEC)) / 1_000)
                    .min(u128::from(u64::MAX)) as u64;
                largest.saturating_add(growth).saturating_add(SLACK)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chitchat::Serializable;
    use std::net::SocketAddr;

    fn id(name: &str, generation: u64) -> ChitchatId {
        ChitchatId::new(
            name.to_string(),
            generation,
            SocketAddr::from(([127, 0, 0, 1], 7000)),
        )
    }

    fn syn(claims: &[(ChitchatId, u64)]) -> Vec<u8> {
        let mut payload = 45_139u16.to_le_bytes().to_vec();
        payload.extend_from_slice(&[0, 0]);
        (claims.len() as u16).serialize(&mut payload);
        for (id, heartbeat) in claims {
            id.serialize(&mut payload);
            heartbeat.serialize(&mut payload);
            0u64.serialize(&mut payload);
            7u64.serialize(&mut payload);
        }
        "hotrule".to_string().serialize(&mut payload);
        payload
    }

    #[test]
    fn claims_are_read_from_v0_digests_only() {
        let claims = vec![(id("a", 1), 5), (id("b", 2), 1 << 63)];
        assert_eq!(digest_claims(&syn(&claims)), Ok(claims));
        let mut ack = syn(&[]);
        ack[3] = 2;
        assert_eq!(digest_claims(&ack), Ok(vec![]));
        let mut v1 = syn(&[]);
        v1[2] = 1;
        assert_eq!(digest_claims(&v1), Err(DigestRefusal::Unreadable));
        let whole = syn(&[(id("a", 1), 5)]);
        assert_eq!(digest_claims(&whole[..20]), Err(DigestRefusal::Unreadable));
        assert_eq!(digest_claims(b"ab"), Err(DigestRefusal::Unreadable));
    }

    #[test]
    fn absurd_jumps_are_refused_and_normal_growth_is_not() {
        let mut book = HeartbeatBook::default();
        let start = Instant::now();
        assert!(matches!(
            book.admit(&[(id("a", 1), 1 << 63)], start),
            Err(DigestRefusal::Jump { .. })
        ));
        assert_eq!(book.admit(&[(id("a", 1), 100)], start), Ok(()));
        // Ten seconds later: up to 100 + 10,000 + 10 × 1,000.
        let later = start + Duration::from_secs(10);
        assert_eq!(book.admit(&[(id("a", 1), 20_100)], later), Ok(()));
        let refused = book.admit(&[(id("a", 1), 20_100 + SLACK + 1), (id("b", 1), 1)], later);
        assert!(
            matches!(refused, Err(DigestRefusal::Jump { ref node, .. }) if node == "a"),
            "{refused:?}"
        );
        // A refused datagram records nothing, not even its valid claims.
        assert_eq!(book.allowed(&id("b", 1), later), MAX_FIRST_SEEN);
        // A restart is a new generation: its count starts over, and is checked on its own.
        assert_eq!(book.admit(&[(id("a", 2), 3)], later), Ok(()));
        // Lower claims (a peer that lags) are always fine.
        assert_eq!(book.admit(&[(id("a", 1), 50)], later), Ok(()));
    }
}
