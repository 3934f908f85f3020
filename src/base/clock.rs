//! The revision clock: a hybrid logical clock that stamps every write with a [`Revision`].
//!
//! A revision never goes backwards on one node, is always above every revision the node has
//! observed (its own store at boot, and later the peers' entries), and is strictly above the
//! prior revision of the key being written. Wall time is an input, so the clock is testable.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::base::ids::{NodeId, Revision};

/// Milliseconds since the Unix epoch (0 if the system clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The wall clock in unix ms as the data plane reads it (sample and log times are `i64`):
/// 0 before the epoch, saturating far after it.
/// The CPU seconds the calling thread has used (Linux `CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_seconds() -> Option<f64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    (status == 0).then(|| now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
}

pub fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub struct RevisionClock {
    node: NodeId,
    last: Mutex<(u64, u32)>,
}

impl RevisionClock {
    pub fn new(node: NodeId) -> RevisionClock {
        RevisionClock { node, last: Mutex::new((0, 0)) }
    }

    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// Remembers a revision seen elsewhere, so later stamps order after it.
    pub fn observe(&self, seen: &Revision) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if (seen.millis, seen.counter) > *last {
            *last = (seen.millis, seen.counter);
        }
    }

    /// A new revision at `wall_ms`, strictly after everything observed and after `prior`.
    pub fn next(&self, wall_ms: u64, prior: Option<&Revision>) -> Revision {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let floor = match prior {
            Some(p) if (p.millis, p.counter) > *last => (p.millis, p.counter),
            _ => *last,
        };
        let stamp = if wall_ms > floor.0 { (wall_ms, 0) } else { (floor.0, floor.1.saturating_add(1)) };
        *last = stamp;
        Revision { millis: stamp.0, counter: stamp.1, node: self.node.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> RevisionClock {
        RevisionClock::new(NodeId("n1".into()))
    }

    #[test]
    fn stamps_strictly_increase_even_when_wall_time_stalls_or_regresses() {
        let c = clock();
        let a = c.next(100, None);
        let b = c.next(100, None);
        let d = c.next(50, None);
        assert!(a < b && b < d, "{a} {b} {d}");
        assert_eq!(d.millis, 100);
    }

    #[test]
    fn stamps_order_after_a_prior_revision_from_the_future() {
        let c = clock();
        let prior = Revision { millis: 5_000, counter: 3, node: NodeId("other".into()) };
        let next = c.next(1_000, Some(&prior));
        assert!(next > prior);
        assert_eq!((next.millis, next.counter), (5_000, 4));
    }

    #[test]
    fn observed_revisions_raise_the_floor() {
        let c = clock();
        c.observe(&Revision { millis: 9_000, counter: 0, node: NodeId("x".into()) });
        let next = c.next(10, None);
        assert_eq!((next.millis, next.counter), (9_000, 1));
        assert_eq!(c.next(20_000, None).millis, 20_000);
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for epoch milliseconds (UTC, proleptic Gregorian).
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = hotrule_mal_engine::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod iso_tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::iso8601(1_714_102_400_123), "2024-04-26T03:33:20.123Z");
        assert_eq!(super::iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
