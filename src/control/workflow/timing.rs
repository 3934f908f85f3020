//! Per-phase timing of one write, for profiling the write path: where an addOrUpdate spends its
//! time on the main (lock, prior read, compile, classify, persist, commit notice, install) and
//! where a replicated entry spends it on a peer.
//!
//! Off by default: a timer checks once whether the `hotrule::timing` target is enabled at debug
//! level and otherwise records nothing. Turn it on with `--set log.level=info,hotrule::timing=debug`
//! (or a live log-level change); each write then logs one line, for example
//! `write timing what="add_or_update" total_us=812 phases="lock=3 prior=21 compile=240 ..."`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The tracing target the timings are logged under.
pub const TARGET: &str = "hotrule::timing";

/// Times the phases of one operation; logs them when dropped (if enabled).
pub struct PhaseTimer {
    what: &'static str,
    started: Instant,
    last: Instant,
    phases: Vec<(&'static str, Duration)>,
    enabled: bool,
}

impl PhaseTimer {
    pub fn start(what: &'static str) -> PhaseTimer {
        let now = Instant::now();
        PhaseTimer {
            what,
            started: now,
            last: now,
            phases: Vec::new(),
            enabled: tracing::enabled!(target: TARGET, tracing::Level::DEBUG),
        }
    }

    /// Ends the phase `name`: the time since the previous mark (or the start).
    pub fn mark(&mut self, name: &'static str) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        self.phases.push((name, now - self.last));
        self.last = now;
    }

    /// The phases as `name=µs` pairs, in order.
    fn phases_line(&self) -> String {
        let mut line = String::new();
        for (name, took) in &self.phases {
            let _ = write!(line, "{}{name}={}", if line.is_empty() { "" } else { " " }, took.as_micros());
        }
        line
    }
}

impl Drop for PhaseTimer {
    fn drop(&mut self) {
        if self.enabled {
            tracing::debug!(
                target: TARGET,
                what = self.what,
                total_us = self.started.elapsed().as_micros() as u64,
                phases = %self.phases_line(),
                "write timing"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_timer_records_nothing_and_an_enabled_one_records_each_phase_in_order() {
        let mut off = PhaseTimer::start("x");
        off.enabled = false;
        off.mark("a");
        assert!(off.phases.is_empty());

        let mut on = PhaseTimer::start("x");
        on.enabled = true;
        on.mark("a");
        on.mark("b");
        let line = on.phases_line();
        assert!(line.starts_with("a=") && line.contains(" b="), "{line}");
        on.enabled = false; // no subscriber needed in the test
    }
}
