//! Authentication of bus calls: an HMAC-SHA256 over a shared cluster secret.
//!
//! The caller sends `x-hotrule-ts` (its wall clock in ms) and
//! `x-hotrule-mac` = hex(HMAC(secret, ts || "\n" || path || "\n" || body)). The server recomputes
//! the MAC, compares in constant time, and refuses a timestamp more than [`MAX_CLOCK_SKEW`] away
//! from its own clock, which bounds how long a captured request can be replayed. Responses are
//! not signed.
//!
//! A cluster without a secret runs an insecure bus: [`BusAuth::Insecure`] makes both sides skip
//! the MAC entirely, so the choice is explicit in the configuration and in the code.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ids::hex;

pub const TIMESTAMP_HEADER: &str = "x-hotrule-ts";
pub const MAC_HEADER: &str = "x-hotrule-mac";

/// How far a request's timestamp may be from the server's clock, either way.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

type HmacSha256 = Hmac<Sha256>;

/// How bus calls are authenticated.
#[derive(Clone)]
pub enum BusAuth {
    /// No MAC is sent or checked: any host that reaches the bus port is trusted.
    Insecure,
    /// Every call carries a MAC under this shared secret.
    Secret(Arc<[u8]>),
}

impl BusAuth {
    pub fn secret(secret: impl AsRef<[u8]>) -> BusAuth {
        BusAuth::Secret(Arc::from(secret.as_ref()))
    }

    /// The two headers to send with a call, or `None` on an insecure bus.
    pub fn sign(&self, now_ms: u64, path: &str, body: &[u8]) -> Option<Signature> {
        let BusAuth::Secret(secret) = self else {
            return None;
        };
        let timestamp = now_ms.to_string();
        let mac = mac_of(secret, &timestamp, path, body)
            .finalize()
            .into_bytes();
        Some(Signature {
            timestamp,
            mac_hex: hex(&mac),
        })
    }

    /// The checks that need no body: both headers present and the timestamp fresh. The server
    /// runs them before reading a body, so an unauthenticated caller cannot make it buffer one.
    pub fn precheck(
        &self,
        now_ms: u64,
        timestamp: Option<&str>,
        mac_hex: Option<&str>,
    ) -> Result<(), AuthFailure> {
        if let BusAuth::Insecure = self {
            return Ok(());
        }
        let timestamp = timestamp.ok_or(AuthFailure::MissingHeader(TIMESTAMP_HEADER))?;
        mac_hex.ok_or(AuthFailure::MissingHeader(MAC_HEADER))?;
        let sent_ms: u64 = timestamp.parse().map_err(|_| AuthFailure::BadTimestamp)?;
        let skew_ms = now_ms.abs_diff(sent_ms);
        if skew_ms > MAX_CLOCK_SKEW.as_millis() as u64 {
            return Err(AuthFailure::Stale { skew_ms });
        }
        Ok(())
    }

    /// Checks the headers of a call received at `now_ms`. Always `Ok` on an insecure bus.
    pub fn verify(
        &self,
        now_ms: u64,
        path: &str,
        body: &[u8],
        timestamp: Option<&str>,
        mac_hex: Option<&str>,
    ) -> Result<(), AuthFailure> {
        self.precheck(now_ms, timestamp, mac_hex)?;
        let (BusAuth::Secret(secret), Some(timestamp), Some(mac_hex)) = (self, timestamp, mac_hex)
        else {
            // Insecure: nothing more to check (the precheck refused missing headers otherwise).
            return Ok(());
        };
        let sent_mac = unhex(mac_hex).ok_or(AuthFailure::BadMac)?;
        // `verify_slice` compares in constant time.
        mac_of(secret, timestamp, path, body)
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

/// The authentication headers of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub timestamp: String,
    pub mac_hex: String,
}

/// Why a call was refused (answered with 401; the detail goes to the server log only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    MissingHeader(&'static str),
    BadTimestamp,
    Stale { skew_ms: u64 },
    BadMac,
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::MissingHeader(name) => write!(f, "missing header {name}"),
            AuthFailure::BadTimestamp => f.write_str("timestamp is not a number of milliseconds"),
            AuthFailure::Stale { skew_ms } => {
                write!(
                    f,
                    "timestamp is {skew_ms} ms from this node's clock (max {} ms)",
                    MAX_CLOCK_SKEW.as_millis()
                )
            }
            AuthFailure::BadMac => f.write_str("MAC does not match"),
        }
    }
}

fn mac_of(secret: &[u8], timestamp: &str, path: &str, body: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail; the fallback keeps it panic-free.
    let mut mac =
        HmacSha256::new_from_slice(secret).unwrap_or_else(|_| HmacSha256::new(&Default::default()));
    mac.update(timestamp.as_bytes());
    mac.update(b"\n");
    mac.update(path.as_bytes());
    mac.update(b"\n");
    mac.update(body);
    mac
}

fn unhex(text: &str) -> Option<Vec<u8>> {
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

    fn verify(
        auth: &BusAuth,
        now: u64,
        body: &[u8],
        signature: &Signature,
    ) -> Result<(), AuthFailure> {
        auth.verify(
            now,
            "/bus/v1",
            body,
            Some(&signature.timestamp),
            Some(&signature.mac_hex),
        )
    }

    #[test]
    fn a_signed_call_verifies_and_any_change_breaks_it() {
        let auth = BusAuth::secret("s3cret");
        let signature = auth
            .sign(NOW, "/bus/v1", b"body")
            .expect("secret bus signs");
        assert_eq!(signature.mac_hex.len(), 64);
        assert_eq!(verify(&auth, NOW, b"body", &signature), Ok(()));
        assert_eq!(verify(&auth, NOW + 299_000, b"body", &signature), Ok(()));
        assert_eq!(
            verify(&auth, NOW, b"bodY", &signature),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            verify(&BusAuth::secret("other"), NOW, b"body", &signature),
            Err(AuthFailure::BadMac)
        );
        assert_eq!(
            auth.verify(
                NOW,
                "/bus/v2",
                b"body",
                Some(&signature.timestamp),
                Some(&signature.mac_hex)
            ),
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
    }

    #[test]
    fn timestamps_outside_the_skew_window_are_stale_both_ways() {
        let auth = BusAuth::secret("s");
        let signature = auth.sign(NOW, "/bus/v1", b"").expect("signs");
        assert!(matches!(
            verify(&auth, NOW + 300_001, b"", &signature),
            Err(AuthFailure::Stale { .. })
        ));
        assert!(matches!(
            verify(&auth, NOW - 300_001, b"", &signature),
            Err(AuthFailure::Stale { .. })
        ));
    }

    #[test]
    fn missing_or_malformed_headers_are_refused() {
        let auth = BusAuth::secret("s");
        let signature = auth.sign(NOW, "/bus/v1", b"x").expect("signs");
        assert_eq!(
            auth.verify(NOW, "/bus/v1", b"x", None, Some(&signature.mac_hex)),
            Err(AuthFailure::MissingHeader(TIMESTAMP_HEADER))
        );
        assert_eq!(
            auth.verify(NOW, "/bus/v1", b"x", Some(&signature.timestamp), None),
            Err(AuthFailure::MissingHeader(MAC_HEADER))
        );
        assert_eq!(
            auth.verify(NOW, "/bus/v1", b"x", Some("soon"), Some(&signature.mac_hex)),
            Err(AuthFailure::BadTimestamp)
        );
        for bad_mac in ["", "zz", "abc", &signature.mac_hex[..62], "é"] {
            assert_eq!(
                auth.verify(
                    NOW,
                    "/bus/v1",
                    b"x",
                    Some(&signature.timestamp),
                    Some(bad_mac)
                ),
                Err(AuthFailure::BadMac),
                "{bad_mac:?}"
            );
        }
        let upper = signature.mac_hex.to_uppercase();
        assert_eq!(
            auth.verify(
                NOW,
                "/bus/v1",
                b"x",
                Some(&signature.timestamp),
                Some(&upper)
            ),
            Ok(())
        );
    }

    #[test]
    fn the_insecure_bus_neither_signs_nor_checks_and_secrets_never_print() {
        assert_eq!(BusAuth::Insecure.sign(NOW, "/bus/v1", b"x"), None);
        assert_eq!(
            BusAuth::Insecure.verify(NOW, "/bus/v1", b"x", None, None),
            Ok(())
        );
        assert!(!format!("{:?}", BusAuth::secret("hunter2")).contains("hunter2"));
    }

    #[test]
    fn the_mac_covers_timestamp_path_and_body_separated_by_newlines() {
        let signature = BusAuth::secret("Jefe")
            .sign(NOW, "/bus/v1", b"body")
            .expect("signs");
        let mut direct = HmacSha256::new_from_slice(b"Jefe").expect("any key length");
        direct.update(format!("{NOW}\n/bus/v1\nbody").as_bytes());
        assert_eq!(signature.mac_hex, hex(&direct.finalize().into_bytes()));
    }
}
