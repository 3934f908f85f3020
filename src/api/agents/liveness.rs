//! Whether an agent is online, offline or to be forgotten: pure functions of its last heartbeat
//! and the current time.
//!
//! Agents never say goodbye, so liveness is inferred from silence: online while heartbeats
//! arrive, offline after a number of missed intervals, forgotten (removed from memory and the
//! store) after a retention. Computing it at query time, rather than counting failures in a
//! background task, keeps it exact whatever the worker cadence.

use serde::{Deserialize, Serialize};

/// The 3.x agent's `heartbeat_interval` default.
pub fn default_heartbeat_interval_ms() -> u64 {
    10_000
}

pub fn default_missed_intervals() -> u32 {
    3
}

pub fn default_retention_ms() -> u64 {
    12 * 60 * 60 * 1000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LivenessPolicy {
    pub heartbeat_interval_ms: u64,
    /// Offline once this many intervals pass without a heartbeat.
    pub missed_intervals: u32,
    /// Forgotten once this long passes without a heartbeat.
    pub retention_ms: u64,
}

impl Default for LivenessPolicy {
    fn default() -> Self {
        LivenessPolicy {
            heartbeat_interval_ms: default_heartbeat_interval_ms(),
            missed_intervals: default_missed_intervals(),
            retention_ms: default_retention_ms(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    Online,
    Offline,
    Forgotten,
}

impl LivenessPolicy {
    /// Silence after which an agent is offline.
    pub fn offline_after_ms(&self) -> u64 {
        self.heartbeat_interval_ms
            .saturating_mul(u64::from(self.missed_intervals))
    }

    /// Liveness at `now_ms` of an agent last heard at `last_heartbeat_ms`. A heartbeat stamped in
    /// the future (clock skew between nodes) counts as just now.
    pub fn liveness(&self, last_heartbeat_ms: u64, now_ms: u64) -> Liveness {
        let silence = now_ms.saturating_sub(last_heartbeat_ms);
        if silence >= self.retention_ms.max(self.offline_after_ms()) {
            Liveness::Forgotten
        } else if silence >= self.offline_after_ms() {
            Liveness::Offline
        } else {
            Liveness::Online
        }
    }
}
