//! One sliding window per (rule, entity), as SkyWalking's `RunningRule.Window` keeps it.
//!
//! The window holds `size = period + max_trend_range` minute slots, oldest first; the last slot
//! is the window's end minute. Each slot maps a metric name to that minute's value. Values
//! arrive by minute bucket, many times a minute (every flush of the minute's merged value):
//! - the first value of a fresh window sets its end to that minute;
//! - a newer minute moves the window forward to it (older slots fall off);
//! - a minute older than the window is dropped;
//! - a minute already in the window is overwritten for that metric (the latest flush wins).
//!
//! The alarm worker calls [`Window::move_to`] with the current minute before each check, so the
//! newest slot is the current, partial minute; a window whose slots are all empty
//! ([`Window::is_expired`]) is dropped without a recovery, as SkyWalking does. The MQE
//! evaluation reads [`Window::series`]: one value (or none) per minute, oldest first.
//!
//! Minutes are [`EpochMinute`]s; turning a SkyWalking `yyyyMMddHHmm` time bucket into one is the
//! caller's business. The window is plain data and serializable, so it can be handed to a new
//! owner with the alarm state beside it.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// Minutes since the Unix epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EpochMinute(pub i64);

impl EpochMinute {
    /// The minute holding this epoch millisecond.
    pub fn from_epoch_ms(ms: i64) -> Self {
        EpochMinute(ms.div_euclid(60_000))
    }
}

/// A metric's value for one minute: a common value or a labeled one (`{p=50: .., p=99: ..}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MetricValue {
    Single(f64),
    /// (label, value) pairs, in the metric's order.
    Labeled(Vec<(String, f64)>),
}

/// What [`Window::add`] did with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddOutcome {
    /// Stored in an empty place (for this metric) of its minute's slot.
    Stored,
    /// Replaced the value this metric already had for that minute.
    Overwrote,
    /// Older than the window's first minute; dropped.
    TooOld,
}

/// The slots of one minute: metric name → value.
pub type Slot = BTreeMap<String, MetricValue>;

/// One (rule, entity) window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The newest minute, once the window has seen a value or a move.
    end: Option<EpochMinute>,
    /// `size` slots, oldest first; `None` is a minute without any value.
    slots: VecDeque<Option<Slot>>,
}

/// The number of minute slots a rule's windows hold: SkyWalking's `period + additionalPeriod`,
/// where the additional period is the largest N in the expression's `increase/rate(m, N)`.
pub fn window_size(period: u32, max_trend_range: u32) -> usize {
    (period as usize).saturating_add(max_trend_range as usize).max(1)
}

impl Window {
    /// An empty window of `size` minutes (at least one).
    pub fn new(size: usize) -> Self {
        Window { end: None, slots: std::iter::repeat_n(None, size.max(1)).collect() }
    }

    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// The newest minute, if the window has one yet.
    pub fn end(&self) -> Option<EpochMinute> {
        self.end
    }

    /// Records `metric`'s value for `minute`.
    pub fn add(&mut self, metric: &str, minute: EpochMinute, value: MetricValue) -> AddOutcome {
        let end = match self.end {
            None => {
                self.end = Some(minute);
                minute
            }
            Some(end) if minute > end => {
                self.move_to(minute);
                minute
            }
            Some(end) => end,
        };
        let age = end.0.saturating_sub(minute.0);
        let size = self.slots.len();
        let Some(index) = usize::try_from(age).ok().filter(|age| *age < size).map(|age| size - age - 1) else {
            return AddOutcome::TooOld;
        };
        let slot = self.slots[index].get_or_insert_with(BTreeMap::new);
        match slot.insert(metric.to_string(), value) {
            Some(_) => AddOutcome::Overwrote,
            None => AddOutcome::Stored,
        }
    }

    /// Moves the window's end forward to `minute`; the slots that fall off are dropped. A minute
    /// at or before the end does nothing; a fresh window just takes `minute` as its end.
    pub fn move_to(&mut self, minute: EpochMinute) {
        let Some(end) = self.end else {
            self.end = Some(minute);
            return;
        };
        let forward = minute.0.saturating_sub(end.0);
        if forward <= 0 {
            return;
        }
        let size = self.slots.len();
        let shift = usize::try_from(forward).map_or(size, |f| f.min(size));
        for _ in 0..shift {
            self.slots.pop_front();
            self.slots.push_back(None);
        }
        self.end = Some(minute);
    }

    /// True when no slot holds a value: SkyWalking drops such a window (no recovery is sent).
    pub fn is_expired(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// Empties the window and forgets its end (SkyWalking's `Window.reset`).
    pub fn reset(&mut self) {
        self.end = None;
        self.slots.iter_mut().for_each(|slot| *slot = None);
    }

    /// `metric`'s values over the window, oldest minute first: one entry per slot, `None` where
    /// that minute has no value for it. Empty if the window has no end yet.
    pub fn series(&self, metric: &str) -> Vec<(EpochMinute, Option<&MetricValue>)> {
        let Some(end) = self.end else {
            return Vec::new();
        };
        let size = self.slots.len() as i64;
        self.slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                let minute = EpochMinute(end.0.saturating_sub(size - 1 - i as i64));
                (minute, slot.as_ref().and_then(|values| values.get(metric)))
            })
            .collect()
    }

    /// The slots oldest first, with their minutes (for the status API and snapshots).
    pub fn slots(&self) -> impl Iterator<Item = (EpochMinute, Option<&Slot>)> {
        let end = self.end.map_or(0, |e| e.0);
        let size = self.slots.len() as i64;
        self.slots.iter().enumerate().map(move |(i, slot)| (EpochMinute(end.saturating_sub(size - 1 - i as i64)), slot.as_ref()))
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
