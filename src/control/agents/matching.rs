//! Which groups an agent belongs to: tag value patterns, IP ranges, and the selector rule that
//! combines them. Pure functions over what the agent reported.
//!
//! An agent is identified for matching by its tags (`AgentGroupTag{name, value}`) and the IP it
//! reports in its attributes, the two inputs the protocol names for group matching.

use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};


#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MatchingError {
    #[error("{text:?} is not an IP address or CIDR range (a.b.c.d/n or an IPv6 equivalent)")]
    BadCidr { text: String },
    #[error("prefix length {prefix} is too long for {text:?}")]
    PrefixTooLong { text: String, prefix: u8 },
}

/// A tag value pattern: literal characters, with `*` matching any run of characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ValuePattern(pub String);

impl ValuePattern {
    pub fn new(pattern: impl Into<String>) -> ValuePattern {
        ValuePattern(pattern.into())
    }

    /// Glob match with `*` only. Iterative with one backtrack point, so linear-ish on any input.
    pub fn matches(&self, value: &str) -> bool {
        let pattern = self.0.as_bytes();
        let text = value.as_bytes();
        let (mut p, mut t) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            if p < pattern.len() && pattern[p] == b'*' {
                star = Some((p, t));
                p += 1;
            } else if p < pattern.len() && pattern[p] == text[t] {
                p += 1;
                t += 1;
            } else if let Some((star_p, star_t)) = star {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            } else {
                return false;
            }
        }
        pattern[p..].iter().all(|&c| c == b'*')
    }
}

/// An IP range: a network address and a prefix length. A bare address is a range of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpCidr {
    network: IpAddr,
    prefix: u8,
}

impl IpCidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                prefix_equal(&net.octets(), &addr.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                prefix_equal(&net.octets(), &addr.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V4(addr)) => {
                // An IPv4 agent inside an IPv4-mapped IPv6 range (::ffff:a.b.c.d/n).
                prefix_equal(&net.octets(), &addr.to_ipv6_mapped().octets(), self.prefix)
            }
            (IpAddr::V4(_), IpAddr::V6(addr)) => match addr.to_ipv4_mapped() {
                Some(v4) => self.contains(IpAddr::V4(v4)),
                None => false,
            },
        }
    }
}

fn prefix_equal(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = usize::from(prefix / 8);
    let rest = prefix % 8;
    if a[..full] != b[..full] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    (a[full] & mask) == (b[full] & mask)
}

impl FromStr for IpCidr {
    type Err = MatchingError;

    fn from_str(text: &str) -> Result<IpCidr, MatchingError> {
        let bad = || MatchingError::BadCidr {
            text: text.to_string(),
        };
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix.parse::<u8>().map_err(|_| bad())?)),
            None => (text.trim(), None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(MatchingError::PrefixTooLong {
                text: text.to_string(),
                prefix,
            });
        }
        Ok(IpCidr { network, prefix })
    }
}

impl std::fmt::Display for IpCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Serialize for IpCidr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpCidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<IpCidr, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses the `ip` attribute an agent reports (text bytes); anything else counts as no IP.
pub fn parse_agent_ip(reported: &str) -> Option<IpAddr> {
    reported.trim().parse().ok()
}
