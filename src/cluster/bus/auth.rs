//! Authentication of bus calls and answers: HMAC-SHA256 over a shared cluster secret.
//!
//! A call carries three headers: `x-hotrule-ts` (the caller's wall clock in ms),
//! `x-hotrule-nonce` (32 hex digits, random per call) and
//! `x-hotrule-mac` = hex(HMAC(secret, "req\n" ts "\n" nonce "\n" path "\n" body)).
//! The server checks the headers and the timestamp (within [`MAX_CLOCK_SKEW`] of its own clock)
//! before it reads a byte of the body, then feeds the body to the MAC as it streams in
//! ([`PendingMac`]), and remembers the nonce for the window (see `replay`) so a captured call
//! cannot be played again.
//!
//! A 200 answer carries `x-hotrule-ts` and `x-hotrule-mac` =
//! hex(HMAC(secret, "resp\n" ts "\n" nonce "\n" status "\n" body)), bound to the call's nonce:
//! the client believes an answer only if it proves the secret and answers *its* call.
//!
//! A cluster without a secret runs an insecure bus: [`BusAuth::Insecure`] makes both sides skip
//! every check, so the choice is explicit in the configuration and in the code.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::base::ids::hex;

pub const TIMESTAMP_HEADER: &str = "x-hotrule-ts";
pub const NONCE_HEADER: &str = "x-hotrule-nonce";
pub const MAC_HEADER: &str = "x-hotrule-mac";

/// How far a call's (or an answer's, or a gossip datagram's) timestamp may be from the
/// receiver's clock, either way. It bounds the replay window, and it is the clock skew the
/// cluster tolerates: nodes whose clocks differ by more cannot talk (keep them on NTP).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Bytes of randomness in a nonce (sent as twice as many hex digits).
pub const NONCE_BYTES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// A call's nonce.
pub type Nonce = [u8; NONCE_BYTES];

/// A fresh random nonce.
pub fn new_nonce() -> Nonce {
    rand::random()
}

/// How bus calls are authenticated.
#[derive(Clone)]
pub enum BusAuth {
    /// No MAC is sent or checked: any host that reaches the bus port is trusted.
    Insecure,
    /// Every call and every answer carries a MAC under this shared secret.
    Secret(Arc<[u8]>),
}

/// The authentication headers of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub timestamp: String,
    pub nonce_hex: String,
    pub mac_hex: String,
}

/// The authentication headers of one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerSignature {
    pub timestamp: String,
    pub mac_hex: String,
}

/// What the headers of a received call said, checked for form and freshness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedHeaders {
    pub sent_ms: u64,
    pub nonce: Nonce,
}

/// A call's MAC being computed while its body streams in.
pub struct PendingMac {
    mac: HmacSha256,
    expected: Vec<u8>,
}

impl PendingMac {
    pub fn update(&mut self, chunk: &[u8]) {
        self.mac.update(chunk);
    }

    /// Whether the body fed in matches the call's MAC (compared in constant time).
    pub fn finish(self) -> Result<(), AuthFailure> {
        self.mac
            .verify_slice(&self.expected)
            .map_err(|_| AuthFailure::BadMac)
    }
}

impl BusAuth {
    pub fn secret(secret: impl AsRef<[u8]>) -> BusAuth {
        BusAuth::Secret(Arc::from(secret.as_ref()))
    }

    pub fn is_secure(&self) -> bool {
        matches!(self, BusAuth::Secret(_))
    }

    /// The headers to send with a call, or `None` on an insecure bus.
    pub fn sign(&self, now_ms: u64, nonce: &Nonce, path: &str, body: &[u8]) -> Option<Signature> {
        let BusAuth::Secret(secret) = self else {
            return None;
        };
        let timestamp = now_ms.to_string();
        let nonce_hex = hex(nonce);
        let mut mac = request_mac(secret, &timestamp, &nonce_hex, path);
        mac.update(body);
        Some(Signature {
            timestamp,
            nonce_hex,
            mac_hex: hex(&mac.finalize().into_bytes()),
        })
    }

    /// The checks that need no body: every header present and well formed, the timestamp
    /// fresh. On success, the MAC to feed the body into (`None` on an insecure bus). The server
    /// runs this before reading a body, so an unauthenticated caller cannot make it buffer one.
    pub fn precheck(
        &self,
        now_ms: u64,
        path: &str,
        timestamp: Option<&str>,
        nonce_hex: Option<&str>,
        mac_hex: Option<&str>,
    ) -> Result<Option<(CheckedHeaders, PendingMac)>, AuthFailure> {
        let BusAuth::Secret(secret) = self else {
            return Ok(None);
        };
        let timestamp = timestamp.ok_or(AuthFailure::MissingHeader(TIMESTAMP_HEADER))?;
        let nonce_hex = nonce_hex.ok_or(AuthFailure::MissingHeader(NONCE_HEADER))?;
        let mac_hex = mac_hex.ok_or(AuthFailure::MissingHeader(MAC_HEADER))?;
        let sent_ms = fresh(now_ms, timestamp)?;
        let nonce: Nonce = unhex(nonce_hex)
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(AuthFailure::BadNonce)?;
        let expected = unhex(mac_hex).ok_or(AuthFailure::BadMac)?;
        // The MAC is over the nonce as sent, so any spelling of it that decodes is bound too.
        let mac = request_mac(secret, timestamp, nonce_hex, path);
        Ok(Some((
            CheckedHeaders { sent_ms, nonce },
            PendingMac { mac, expected },
        )))
    }

    /// Checks a whole call at once (the precheck, then the body). Always `Ok` when insecure.
    pub fn verify(
        &self,
        now_ms: u64,
        path: &str,
        body: &[u8],
        signature: &Signature,
    ) -> Result<Option<CheckedHeaders>, AuthFailure> {
        let checked = self.precheck(
            now_ms,
            path,
            Some(&signature.timestamp),
            Some(&signature.nonce_hex),
            Some(&signature.mac_hex),
        )?;
        match checked {
            None => Ok(None),
            Some((headers, mut pending)) => {
                pending.update(body);
                pending.finish()?;
                Ok(Some(headers))
            }
        }
    }

    /// The headers of the answer to the call `nonce`, or `None` on an insecure bus.
    pub fn sign_answer(
        &self,
        now_ms: u64,
        nonce: &Nonce,
        status: u16,
        body: &[u8],
    ) -> Option<AnswerSignature> {
        let BusAuth::Secret(secret) = self else {
            return None;
        };
        let timestamp = now_ms.to_string();
        let mac = answer_mac(secret, &timestamp, nonce, status, body);
        Some(AnswerSignature {
            timestamp,
            mac_hex: hex(&mac.finalize().into_bytes()),
        })
    }

    /// The checks of an answer that need no body (headers present, timestamp fresh), so a
    /// client does not read the body of an answer that cannot be authentic.
    pub fn precheck_answer(
        &self,
        now_ms: u64,
        timestamp: Option<&str>,
        mac_hex: Option<&str>,
    ) -> Result<(), AuthFailure> {
        if !self.is_secure() {
            return Ok(());
        }
        let timestamp = timestamp.ok_or(AuthFailure::MissingHeader(TIMESTAMP_HEADER))?;
        mac_hex.ok_or(AuthFailure::MissingHeader(MAC_HEADER))?;
        fresh(now_ms, timestamp).map(|_| ())
    }

    /// Whether an answer with `status` and `body` proves the secret and answers the call
    /// `nonce`. Always `Ok` on an insecure bus.
    pub fn verify_answer(
        &self,
        now_ms: u64,
        nonce: &Nonce,
        status: u16,
        body: &[u8],
        timestamp: Option<&str>,
        mac_hex: Option<&str>,
    ) -> Result<(), AuthFailure> {
        let BusAuth::Secret(secret) = self else {
            return Ok(());
        };
        let timestamp = timestamp.ok_or(AuthFailure::MissingHeader(TIMESTAMP_HEADER))?;
        let mac_hex = mac_hex.ok_or(AuthFailure::MissingHeader(MAC_HEADER))?;
        fresh(now_ms, timestamp)?;
        let sent_mac = unhex(mac_hex).ok_or(AuthFailure::BadMac)?;
        answer_mac(secret, timestamp, nonce, status, body)
            .verify_slice(&sent_mac)
            .map_err(|_| AuthFailure::BadMac)
    }
}

impl fmt::Debug for BusAuth {
    // Never print the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusAuth::Insecure => f.write_str("Insecure"),
            BusAuth::Secret(_) => f.write_str("Secret(<redacted>)"),
        }
    }
}

/// Why a call or an answer was refused (a refused call is answered with 401; the detail goes
/// to the server log only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    MissingHeader(&'static str),
    BadTimestamp,
    BadNonce,
    Stale {
        skew_ms: u64,
    },
    BadMac,
    /// The nonce was already used within the window: a replayed call.
    Replayed,
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::MissingHeader(name) => write!(f, "missing header {name}"),
            AuthFailure::BadTimestamp => f.write_str("timestamp is not a number of milliseconds"),
            AuthFailure::BadNonce => write!(f, "nonce is not {} hex digits", NONCE_BYTES * 2),
            AuthFailure::Stale { skew_ms } => {
                write!(
                    f,
                    "timestamp is {skew_ms} ms from this node's clock (max {} ms)",
                    MAX_CLOCK_SKEW.as_millis()
                )
            }
            AuthFailure::BadMac => f.write_str("MAC does not match"),
            AuthFailure::Replayed => f.write_str("nonce already used: replayed call"),
        }
    }
}

/// The timestamp as ms, if within the skew allowance of `now_ms`.
fn fresh(now_ms: u64, timestamp: &str) -> Result<u64, AuthFailure> {
    let sent_ms: u64 = timestamp.parse().map_err(|_| AuthFailure::BadTimestamp)?;
    let skew_ms = now_ms.abs_diff(sent_ms);
    if skew_ms > MAX_CLOCK_SKEW.as_millis() as u64 {
        return Err(AuthFailure::Stale { skew_ms });
    }
    Ok(sent_ms)
}

fn keyed(secret: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail; the fallback keeps it panic-free.
    HmacSha256::new_from_slice(secret).unwrap_or_else(|_| HmacSha256::new(&Default::default()))
}

fn request_mac(secret: &[u8], timestamp: &str, nonce_hex: &str, path: &str) -> HmacSha256 {
    let mut mac = keyed(secret);
    for part in [
        b"req".as_slice(),
        timestamp.as_bytes(),
        nonce_hex.as_bytes(),
        path.as_bytes(),
    ] {
        mac.update(part);
        mac.update(b"\n");
    }
    mac
}

fn answer_mac(
    secret: &[u8],
    timestamp: &str,
    nonce: &Nonce,
    status: u16,
    body: &[u8],
) -> HmacSha256 {
    let mut mac = keyed(secret);
    let nonce_hex = hex(nonce);
    let status = status.to_string();
    for part in [
        b"resp".as_slice(),
        timestamp.as_bytes(),
        nonce_hex.as_bytes(),
        status.as_bytes(),
    ] {
        mac.update(part);
        mac.update(b"\n");
    }
    mac.update(body);
    mac
}

pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;
    const NONCE: Nonce = [7; NONCE_BYTES];

    fn sign(auth: &BusAuth, now: u64, body: &[u8]) -> Signature {
        auth.sign(now, &NONCE, "/bus/v1", body)
            .expect("secret bus signs")
    }

    fn verify(
        auth: &BusAuth,
        now: u64,
        body: &[u8],
        signature: &Signature,
    ) -> Result<(), AuthFailure> {
        auth.verify(now, "/bus/v1", body, signature).map(|_| ())
    }

    #[test]
    fn a_signed_call_verifies_and_any_change_breaks_it() {
        let auth = BusAuth::secret("s3cret");
        let signature = sign(&auth, NOW, b"body");
        assert_eq!(
            (signature.mac_hex.len(), signature.nonce_hex.len()),
            (64, 32)
        );
        assert_eq!(
            auth.verify(NOW, "/bus/v1", b"body", &signature),
            Ok(Some(CheckedHeaders {
                sent_ms: NOW,
                nonce: NONCE
            }))
        );
        assert_eq!(verify(&auth, NOW + 29_000, b"body", &signature), Ok(()));
        assert_eq!(
            verify(&auth, NOW, b"bodY", &signature),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            verify(&BusAuth::secret("other"), NOW, b"body", &signature),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            auth.verify(NOW, "/bus/v2", b"body", &signature).map(|_| ()),
            Err(AuthFailure::BadMac)
        );
        let moved_ts = Signature {
            timestamp: (NOW + 1).to_string(),
            ..signature.clone()
        };
        assert_eq!(
            verify(&auth, NOW, b"body", &moved_ts),
            Err(AuthFailure::BadMac)
        );
        let other_nonce = Signature {
            nonce_hex: hex(&[8; NONCE_BYTES]),
            ..signature.clone()
        };
        assert_eq!(
            verify(&auth, NOW, b"body", &other_nonce),
            Err(AuthFailure::BadMac)
        );
    }

    #[test]
    fn the_body_can_be_fed_in_pieces() {
        let auth = BusAuth::secret("s");
        let signature = sign(&auth, NOW, b"one two three");
        let (_, mut pending) = auth
            .precheck(
                NOW,
                "/bus/v1",
                Some(&signature.timestamp),
                Some(&signature.nonce_hex),
                Some(&signature.mac_hex),
            )
            .expect("headers pass")
            .expect("secure");
        for piece in [&b"one "[..], b"two", b" three"] {
            pending.update(piece);
        }
        assert_eq!(pending.finish(), Ok(()));
    }

    #[test]
    fn timestamps_outside_the_skew_window_are_stale_both_ways() {
        let auth = BusAuth::secret("s");
        let signature = sign(&auth, NOW, b"");
        let skew = MAX_CLOCK_SKEW.as_millis() as u64;
        assert!(matches!(
            verify(&auth, NOW + skew + 1, b"", &signature),
            Err(AuthFailure::Stale { .. })
        ));
        assert!(matches!(
            verify(&auth, NOW - skew - 1, b"", &signature),
            Err(AuthFailure::Stale { .. })
        ));
        assert_eq!(verify(&auth, NOW + skew, b"", &signature), Ok(()));
    }

    #[test]
    fn missing_or_malformed_headers_are_refused() {
        let auth = BusAuth::secret("s");
        let s = sign(&auth, NOW, b"x");
        let check = |ts: Option<&str>, nonce: Option<&str>, mac: Option<&str>| {
            auth.precheck(NOW, "/bus/v1", ts, nonce, mac).map(|_| ())
        };
        let (ts, nonce, mac) = (
            Some(s.timestamp.as_str()),
            Some(s.nonce_hex.as_str()),
            Some(s.mac_hex.as_str()),
        );
        assert_eq!(
            check(None, nonce, mac),
            Err(AuthFailure::MissingHeader(TIMESTAMP_HEADER))
        );
        assert_eq!(
            check(ts, None, mac),
            Err(AuthFailure::MissingHeader(NONCE_HEADER))
        );
        assert_eq!(
            check(ts, nonce, None),
            Err(AuthFailure::MissingHeader(MAC_HEADER))
        );
        assert_eq!(
            check(Some("soon"), nonce, mac),
            Err(AuthFailure::BadTimestamp)
        );
        for bad_nonce in ["", "zz", "abcd", &"a".repeat(34)] {
            assert_eq!(
                check(ts, Some(bad_nonce), mac),
                Err(AuthFailure::BadNonce),
                "{bad_nonce:?}"
            );
        }
        for bad_mac in ["", "zz", "abc", &s.mac_hex[..62], "é"] {
            let refused = auth.verify(
                NOW,
                "/bus/v1",
                b"x",
                &Signature {
                    mac_hex: bad_mac.into(),
                    ..s.clone()
                },
            );
            assert_eq!(refused.map(|_| ()), Err(AuthFailure::BadMac), "{bad_mac:?}");
        }
        let upper = Signature {
            mac_hex: s.mac_hex.to_uppercase(),
            ..s.clone()
        };
        assert_eq!(verify(&auth, NOW, b"x", &upper), Ok(()));
    }

    #[test]
    fn answers_are_bound_to_the_call_status_and_body() {
        let auth = BusAuth::secret("s");
        let answer = auth.sign_answer(NOW, &NONCE, 200, b"reply").expect("signs");
        let check = |auth: &BusAuth, nonce: &Nonce, status: u16, body: &[u8]| {
            auth.verify_answer(
                NOW,
                nonce,
                status,
                body,
                Some(&answer.timestamp),
                Some(&answer.mac_hex),
            )
        };
        assert_eq!(check(&auth, &NONCE, 200, b"reply"), Ok(()));
        assert_eq!(
            check(&auth, &[9; NONCE_BYTES], 200, b"reply"),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            check(&auth, &NONCE, 500, b"reply"),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            check(&auth, &NONCE, 200, b"replY"),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            check(&BusAuth::secret("t"), &NONCE, 200, b"reply"),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            auth.verify_answer(NOW, &NONCE, 200, b"reply", None, None),
            Err(AuthFailure::MissingHeader(TIMESTAMP_HEADER))
        );
        assert_eq!(
            BusAuth::Insecure.verify_answer(NOW, &NONCE, 200, b"", None, None),
            Ok(())
        );
    }

    #[test]
    fn the_insecure_bus_neither_signs_nor_checks_and_secrets_never_print() {
        assert_eq!(BusAuth::Insecure.sign(NOW, &NONCE, "/bus/v1", b"x"), None);
        assert_eq!(BusAuth::Insecure.sign_answer(NOW, &NONCE, 200, b"x"), None);
        assert!(matches!(
            BusAuth::Insecure.precheck(NOW, "/bus/v1", None, None, None),
            Ok(None)
        ));
        assert!(!format!("{:?}", BusAuth::secret("hunter2")).contains("hunter2"));
        assert_ne!(new_nonce(), new_nonce());
    }

    #[test]
    fn the_mac_covers_tag_timestamp_nonce_path_and_body_separated_by_newlines() {
        let signature = sign(&BusAuth::secret("Jefe"), NOW, b"body");
        let mut direct = HmacSha256::new_from_slice(b"Jefe").expect("any key length");
        direct.update(format!("req\n{NOW}\n{}\n/bus/v1\nbody", hex(&NONCE)).as_bytes());
        assert_eq!(signature.mac_hex, hex(&direct.finalize().into_bytes()));
    }
}
