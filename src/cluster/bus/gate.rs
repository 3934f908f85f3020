//! The gate in front of a bus handler: what a call must pass before its body is read, while it
//! is read, and before it is handled. Shared by the HTTP server and the in-memory twin, so both
//! refuse exactly the same calls.
//!
//! 1. **Headers** ([`BusGate::admit`]): the auth headers are present, well formed and fresh, the
//!    nonce was not seen in the window, and the declared length is known and at most
//!    [`MAX_MESSAGE_BYTES`]. Nothing of the body has been read yet.
//! 2. **Body**: streamed into the MAC ([`super::auth::PendingMac`]) and a buffer bounded by the
//!    declared length; a body over [`LARGE_BODY_BYTES`] also needs one of
//!    [`MAX_LARGE_BODIES`] permits, so concurrent large bodies cannot add up.
//! 3. **Accept** ([`BusGate::accept`]): the MAC matched; the nonce is remembered (first one
//!    wins), and only then is the call decoded and handled.
//!
//! Every refusal is counted ([`BusCounters`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::{AuthFailure, BusAuth, CheckedHeaders, MAX_CLOCK_SKEW, Nonce, PendingMac};
use super::messages::MAX_MESSAGE_BYTES;

/// A body over this size needs a large-body permit.
pub const LARGE_BODY_BYTES: usize = 1024 * 1024;
/// How many large bodies one node reads at once; more are answered 503 at once.
pub const MAX_LARGE_BODIES: usize = 4;
/// How many nonces the replay guard holds. At the window of [`MAX_CLOCK_SKEW`] either way,
/// this allows about 1,000 authenticated calls a second; beyond it calls are refused (503)
/// rather than remembered less (about 5 MB at most).
pub const REPLAY_CAPACITY: usize = 65_536;

/// Why a call was refused before its handler ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 401: the call did not prove the secret, is stale, or is a replay.
    Unauthorized(AuthFailure),
    /// 411: no declared length (a streamed body of unknown size is not read).
    LengthRequired,
    /// 413: the declared (or actual) length is over [`MAX_MESSAGE_BYTES`].
    TooLarge { len: u64 },
    /// 503: too many large bodies at once, or the replay guard is full.
    Busy(&'static str),
}

/// What a call passed at the headers, carried to the body and the accept step.
pub struct Admission {
    /// `None` on an insecure bus.
    pub checked: Option<(CheckedHeaders, PendingMac)>,
    pub declared_len: usize,
    /// Held while a large body is read.
    pub permit: Option<OwnedSemaphorePermit>,
}

/// Counts of what the gate let through and kept out.
#[derive(Debug, Default)]
pub struct BusCounters {
    accepted: AtomicU64,
    unauthenticated: AtomicU64,
    stale: AtomicU64,
    replayed: AtomicU64,
    too_large: AtomicU64,
    busy: AtomicU64,
    /// Answers this node's client refused because they did not prove the secret.
    unauthenticated_answers: AtomicU64,
}

/// A copy of [`BusCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BusCounterSnapshot {
    pub authenticated: bool,
    pub accepted: u64,
    pub unauthenticated: u64,
    pub stale: u64,
    pub replayed: u64,
    pub too_large: u64,
    pub busy: u64,
    pub unauthenticated_answers: u64,
}

impl BusCounters {
    fn record(&self, refusal: &Refusal) {
        let counter = match refusal {
            Refusal::Unauthorized(AuthFailure::Stale { .. }) => &self.stale,
            Refusal::Unauthorized(AuthFailure::Replayed) => &self.replayed,
            Refusal::Unauthorized(_) => &self.unauthenticated,
            Refusal::LengthRequired | Refusal::TooLarge { .. } => &self.too_large,
            Refusal::Busy(_) => &self.busy,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_unauthenticated_answer(&self) {
        self.unauthenticated_answers.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self, authenticated: bool) -> BusCounterSnapshot {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        BusCounterSnapshot {
            authenticated,
            accepted: read(&self.accepted),
            unauthenticated: read(&self.unauthenticated),
            stale: read(&self.stale),
            replayed: read(&self.replayed),
            too_large: read(&self.too_large),
            busy: read(&self.busy),
            unauthenticated_answers: read(&self.unauthenticated_answers),
        }
    }
}

/// Nonces seen in the window, each kept until its call's timestamp leaves the window.
struct ReplayGuard {
    seen: Mutex<HashMap<Nonce, u64>>,
    capacity: usize,
}

impl ReplayGuard {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Nonce, u64>> {
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn was_seen(&self, nonce: &Nonce) -> bool {
        self.lock().contains_key(nonce)
    }

    /// Remembers `nonce` (a call sent at `sent_ms`); refuses one already remembered.
    fn remember(&self, now_ms: u64, checked: &CheckedHeaders) -> Result<(), Refusal> {
        let window = MAX_CLOCK_SKEW.as_millis() as u64;
        let mut seen = self.lock();
        if seen.contains_key(&checked.nonce) {
            return Err(Refusal::Unauthorized(AuthFailure::Replayed));
        }
        if seen.len() >= self.capacity {
            // A nonce can be forgotten once its timestamp is out of the window for good.
            seen.retain(|_, sent_ms| sent_ms.saturating_add(window) >= now_ms);
            if seen.len() >= self.capacity {
                return Err(Refusal::Busy("replay guard full"));
            }
        }
        seen.insert(checked.nonce, checked.sent_ms);
        Ok(())
    }
}

/// The gate of one node's bus server. Clones share counters, nonces and permits.
#[derive(Clone)]
pub struct BusGate {
    auth: BusAuth,
    replay: Arc<ReplayGuard>,
    large_bodies: Arc<Semaphore>,
    counters: Arc<BusCounters>,
}

impl BusGate {
    pub fn new(auth: BusAuth) -> BusGate {
        BusGate::with_capacity(auth, REPLAY_CAPACITY)
    }

    pub fn with_capacity(auth: BusAuth, replay_capacity: usize) -> BusGate {
        BusGate {
            auth,
            replay: Arc::new(ReplayGuard {
                seen: Mutex::default(),
                capacity: replay_capacity,
            }),
            large_bodies: Arc::new(Semaphore::new(MAX_LARGE_BODIES)),
            counters: Arc::new(BusCounters::default()),
        }
    }

    pub fn auth(&self) -> &BusAuth {
        &self.auth
    }

    pub fn counters(&self) -> &Arc<BusCounters> {
        &self.counters
    }

    pub fn snapshot(&self) -> BusCounterSnapshot {
        self.counters.snapshot(self.auth.is_secure())
    }

    /// Step 1: everything that can be checked before reading the body.
    pub fn admit(
        &self,
        now_ms: u64,
        path: &str,
        timestamp: Option<&str>,
        nonce_hex: Option<&str>,
        mac_hex: Option<&str>,
        declared_len: Option<u64>,
    ) -> Result<Admission, Refusal> {
        let admitted = self.admit_inner(now_ms, path, timestamp, nonce_hex, mac_hex, declared_len);
        if let Err(refusal) = &admitted {
            self.counters.record(refusal);
        }
        admitted
    }

    fn admit_inner(
        &self,
        now_ms: u64,
        path: &str,
        timestamp: Option<&str>,
        nonce_hex: Option<&str>,
        mac_hex: Option<&str>,
        declared_len: Option<u64>,
    ) -> Result<Admission, Refusal> {
        let checked = self
            .auth
            .precheck(now_ms, path, timestamp, nonce_hex, mac_hex)
            .map_err(Refusal::Unauthorized)?;
        if let Some((headers, _)) = &checked
            && self.replay.was_seen(&headers.nonce)
        {
            return Err(Refusal::Unauthorized(AuthFailure::Replayed));
        }
        let declared_len = declared_len.ok_or(Refusal::LengthRequired)?;
        if declared_len > MAX_MESSAGE_BYTES as u64 {
            return Err(Refusal::TooLarge { len: declared_len });
        }
        let declared_len = declared_len as usize;
        let permit = if declared_len > LARGE_BODY_BYTES {
            let permit = self.large_bodies.clone().try_acquire_owned();
            Some(permit.map_err(|_| Refusal::Busy("too many large bus bodies at once"))?)
        } else {
            None
        };
        Ok(Admission {
            checked,
            declared_len,
            permit,
        })
    }

    /// Step 3: the body matched the MAC (or the bus is insecure); remember the nonce.
    pub fn accept(
        &self,
        now_ms: u64,
        checked: Option<(CheckedHeaders, PendingMac)>,
    ) -> Result<Option<Nonce>, Refusal> {
        let accepted = match checked {
            None => Ok(None),
            Some((headers, pending)) => pending
                .finish()
                .map_err(Refusal::Unauthorized)
                .and_then(|()| self.replay.remember(now_ms, &headers))
                .map(|()| Some(headers.nonce)),
        };
        match &accepted {
            Ok(_) => {
                self.counters.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(refusal) => self.counters.record(refusal),
        }
        accepted
    }

    /// Counts a body that turned out longer than declared or than the limit.
    pub fn refuse_body(&self, len: u64) -> Refusal {
        let refusal = Refusal::TooLarge { len };
        self.counters.record(&refusal);
        refusal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::bus::auth::NONCE_BYTES;

    const NOW: u64 = 1_700_000_000_000;

    fn call(
        gate: &BusGate,
        signer: &BusAuth,
        nonce: Nonce,
        sent: u64,
        body: &[u8],
    ) -> Result<Option<Nonce>, Refusal> {
        let s = signer.sign(sent, &nonce, "/bus/v1", body).expect("signs");
        let mut admission = gate.admit(
            NOW,
            "/bus/v1",
            Some(&s.timestamp),
            Some(&s.nonce_hex),
            Some(&s.mac_hex),
            Some(body.len() as u64),
        )?;
        if let Some((_, pending)) = admission.checked.as_mut() {
            pending.update(body);
        }
        gate.accept(NOW, admission.checked)
    }

    #[test]
    fn a_call_passes_once_and_its_replay_is_refused_and_counted() {
        let auth = BusAuth::secret("s");
        let gate = BusGate::new(auth.clone());
        assert_eq!(
            call(&gate, &auth, [1; NONCE_BYTES], NOW, b"x"),
            Ok(Some([1; NONCE_BYTES]))
        );
        assert_eq!(
            call(&gate, &auth, [1; NONCE_BYTES], NOW, b"x"),
            Err(Refusal::Unauthorized(AuthFailure::Replayed))
        );
        assert_eq!(
            call(&gate, &BusAuth::secret("t"), [2; NONCE_BYTES], NOW, b"x").map(|_| ()),
            Err(Refusal::Unauthorized(AuthFailure::BadMac))
        );
        // A failed MAC does not burn the nonce: the genuine call with it still passes.
        assert!(call(&gate, &auth, [2; NONCE_BYTES], NOW, b"x").is_ok());
        let counters = gate.snapshot();
        assert_eq!(
            (
                counters.accepted,
                counters.replayed,
                counters.unauthenticated
            ),
            (2, 1, 1)
        );
    }

    #[test]
    fn lengths_are_checked_before_the_body_and_large_bodies_are_rationed() {
        let gate = BusGate::new(BusAuth::Insecure);
        let admit = |len: Option<u64>| {
            gate.admit(NOW, "/bus/v1", None, None, None, len)
                .map(|a| a.permit.is_some())
        };
        assert_eq!(admit(None), Err(Refusal::LengthRequired));
        assert_eq!(
            admit(Some(u64::MAX)),
            Err(Refusal::TooLarge { len: u64::MAX })
        );
        assert_eq!(admit(Some(10)), Ok(false));
        let held: Vec<_> = (0..MAX_LARGE_BODIES)
            .map(|_| {
                gate.admit(
                    NOW,
                    "/bus/v1",
                    None,
                    None,
                    None,
                    Some(LARGE_BODY_BYTES as u64 + 1),
                )
                .expect("permit")
            })
            .collect();
        assert!(matches!(
            admit(Some(LARGE_BODY_BYTES as u64 + 1)),
            Err(Refusal::Busy(_))
        ));
        drop(held);
        assert_eq!(admit(Some(LARGE_BODY_BYTES as u64 + 1)), Ok(true));
        assert_eq!(gate.snapshot().too_large, 2);
    }

    #[test]
    fn the_replay_guard_is_bounded_and_forgets_only_what_left_the_window() {
        let auth = BusAuth::secret("s");
        let gate = BusGate::with_capacity(auth.clone(), 2);
        let window = MAX_CLOCK_SKEW.as_millis() as u64;
        // Two calls sent long ago (still fresh at NOW only within the window: send at the edge).
        assert!(call(&gate, &auth, [1; NONCE_BYTES], NOW - window, b"").is_ok());
        assert!(call(&gate, &auth, [2; NONCE_BYTES], NOW, b"").is_ok());
        // Full: [1] is still in the window at NOW, so nothing can be forgotten.
        assert!(matches!(
            call(&gate, &auth, [3; NONCE_BYTES], NOW, b""),
            Err(Refusal::Busy(_))
        ));
        // One ms later [1]'s timestamp has left the window for good: it makes room.
        let s = auth
            .sign(NOW, &[4; NONCE_BYTES], "/bus/v1", b"")
            .expect("signs");
        let admission = gate
            .admit(
                NOW + 1,
                "/bus/v1",
                Some(&s.timestamp),
                Some(&s.nonce_hex),
                Some(&s.mac_hex),
                Some(0),
            )
            .expect("admitted");
        assert!(gate.accept(NOW + 1, admission.checked).is_ok());
    }
}
