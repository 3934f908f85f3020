//! What waits to be exported: a bounded set of (metric, entity, minute bucket) written and not
//! yet exported, and a bounded memory of the last minute exported per series, so a value
//! written for a minute already exported is refused as late instead of sent a second time.
//! Pure: the caller passes the time in.
//!
//! Marking costs a hash lookup per value and allocates only for a bucket not yet pending, so
//! the write path stays cheap. A bucket over the bound is refused and counted by the caller
//! (`pending_full`): it is exported if it is written again before it closes.
//!
//! The memory forgets a series whose last exported minute ended more than [`REMEMBER_MS`] ago,
//! and marks for minutes that old are refused as late whether remembered or not, so forgetting
//! by age never lets a minute out twice. Past its own bound the memory also forgets its oldest
//! series; only such a series, written late for a minute it already exported, can be exported
//! again (and a receiver then likely refuses the batch with a 4xx).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::data::metrics::{Entity, Granularity, MetricValue, SeriesFilter};
use hotrule_mal_engine::ScopeType;

/// How long the last exported minute of a series is remembered, from that minute's end; marks
/// for a minute that ended before `now - REMEMBER_MS` (at the last flush) are late.
pub const REMEMBER_MS: i64 = 3_600_000;

/// Pending buckets, by metric then entity: the minute buckets (`yyyyMMddHHmm`) waiting.
pub type Taken = HashMap<String, HashMap<Entity, BTreeSet<i64>>>;

/// What became of a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// Pending (now or already).
    Pending,
    /// Refused: the set is full.
    Full,
    /// Refused: the minute was already exported (or is older than the memory).
    Late,
}

/// Marks refused by one call, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub full: u64,
    pub late: u64,
}

impl Refused {
    fn add(&mut self, marked: Marked) {
        match marked {
            Marked::Pending => {}
            Marked::Full => self.full += 1,
            Marked::Late => self.late += 1,
        }
    }
}

/// When [`Pending::take_due`] takes a bucket.
#[derive(Debug, Clone, Copy)]
pub enum Due {
    /// Once `now_ms >= its end + close_after_ms`.
    Closed { now_ms: i64, close_after_ms: i64 },
    /// Every bucket, open ones too (the node is going away); `now_ms` ages the memory.
    All { now_ms: i64 },
}

#[derive(Debug)]
pub struct Pending {
    series: Taken,
    len: usize,
    bound: usize,
    /// The last minute bucket exported, by metric then entity.
    exported: HashMap<String, HashMap<Entity, i64>>,
    exported_len: usize,
    exported_bound: usize,
    /// Marks for a bucket below this one are late: the memory no longer covers it.
    horizon: i64,
}

/// The end (exclusive, epoch ms) of minute bucket `bucket`; `None` for a bucket naming no minute.
fn bucket_end_ms(bucket: i64) -> Option<i64> {
    Granularity::Minute.bucket_start_ms(bucket).map(|start| start + Granularity::Minute.millis())
}

impl Pending {
    /// `bound` pending buckets; the memory holds twice as many series.
    pub fn new(bound: usize) -> Pending {
        Pending {
            series: HashMap::new(),
            len: 0,
            bound,
            exported: HashMap::new(),
            exported_len: 0,
            exported_bound: bound.saturating_mul(2),
            horizon: i64::MIN,
        }
    }

    /// Buckets pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Series remembered as exported.
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.exported_len
    }

    /// Marks every value's bucket; returns the refusals.
    pub fn mark(&mut self, values: &[MetricValue]) -> Refused {
        let mut refused = Refused::default();
        for v in values {
            refused.add(self.mark_one(&v.metric, &v.entity, v.time_bucket));
        }
        refused
    }

    /// Marks one bucket of one series: late when that minute was already exported, full when
    /// it is not pending yet and the set is full.
    pub fn mark_one(&mut self, metric: &str, entity: &Entity, bucket: i64) -> Marked {
        let pending = self.series.get(metric).and_then(|entities| entities.get(entity));
        if pending.is_some_and(|buckets| buckets.contains(&bucket)) {
            return Marked::Pending;
        }
        let exported = self.exported.get(metric).and_then(|entities| entities.get(entity));
        if bucket < self.horizon || exported.is_some_and(|last| bucket <= *last) {
            return Marked::Late;
        }
        self.insert(metric, entity, bucket)
    }

    /// Marks a bucket pending again after its read failed: it counts as exported already, so
    /// it is not late.
    pub fn requeue_one(&mut self, metric: &str, entity: &Entity, bucket: i64) -> Marked {
        self.insert(metric, entity, bucket)
    }

    fn insert(&mut self, metric: &str, entity: &Entity, bucket: i64) -> Marked {
        if self.len >= self.bound {
            return Marked::Full;
        }
        let inserted = match self.series.get_mut(metric).and_then(|entities| entities.get_mut(entity)) {
            Some(buckets) => buckets.insert(bucket),
            None => self.series.entry(metric.to_string()).or_default().entry(entity.clone()).or_default().insert(bucket),
        };
        self.len += usize::from(inserted);
        Marked::Pending
    }

    /// Takes the buckets that are due: those of entities `owns` accepts are returned and
    /// remembered as exported (in the same step, so a mark arriving during the export is late,
    /// not pending again); the others are dropped (their owner exports them). Then ages the
    /// memory.
    pub fn take_due(&mut self, due: Due, owns: impl Fn(&Entity) -> bool) -> Taken {
        let (now_ms, is_due): (i64, Box<dyn Fn(i64) -> bool>) = match due {
            Due::All { now_ms } => (now_ms, Box::new(|_| true)),
            Due::Closed { now_ms, close_after_ms } => (
                now_ms,
                // A bucket that names no minute is taken too: the read reports and skips it.
                Box::new(move |bucket| bucket_end_ms(bucket).is_none_or(|end| now_ms >= end.saturating_add(close_after_ms))),
            ),
        };
        let mut taken = Taken::new();
        for (metric, entities) in self.series.iter_mut() {
            for (entity, buckets) in entities.iter_mut() {
                let due_buckets: BTreeSet<i64> = buckets.iter().copied().filter(|b| is_due(*b)).collect();
                if due_buckets.is_empty() {
                    continue;
                }
                buckets.retain(|b| !due_buckets.contains(b));
                self.len -= due_buckets.len();
                if !owns(entity) {
                    continue;
                }
                let last = due_buckets.last().copied().unwrap_or(i64::MIN);
                let remembered = self.exported.entry(metric.clone()).or_default();
                match remembered.get_mut(entity) {
                    Some(previous) => *previous = (*previous).max(last),
                    None => {
                        remembered.insert(entity.clone(), last);
                        self.exported_len += 1;
                    }
                }
                taken.entry(metric.clone()).or_default().insert(entity.clone(), due_buckets);
            }
            entities.retain(|_, buckets| !buckets.is_empty());
        }
        self.series.retain(|_, entities| !entities.is_empty());
        self.age_memory(now_ms);
        taken
    }

    /// Forgets series whose last exported minute is older than the horizon, then the oldest
    /// ones while over the bound.
    fn age_memory(&mut self, now_ms: i64) {
        self.horizon = self.horizon.max(hotrule_mal_engine::minute_bucket(now_ms.saturating_sub(REMEMBER_MS)));
        let horizon = self.horizon;
        self.forget(|last| last < horizon);
        if self.exported_len > self.exported_bound {
            let mut lasts: Vec<i64> = self.exported.values().flat_map(|entities| entities.values().copied()).collect();
            let excess = self.exported_len - self.exported_bound;
            let (_, cutoff, _) = lasts.select_nth_unstable(excess - 1);
            let cutoff = *cutoff;
            self.forget(|last| last <= cutoff);
        }
    }

    fn forget(&mut self, old: impl Fn(i64) -> bool) {
        let mut forgotten = 0;
        for entities in self.exported.values_mut() {
            let before = entities.len();
            entities.retain(|_, last| !old(*last));
            forgotten += before - entities.len();
        }
        self.exported.retain(|_, entities| !entities.is_empty());
        self.exported_len -= forgotten;
    }
}

/// One storage read of a flush: the series of one metric pending at one minute bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadGroup {
    pub filter: SeriesFilter,
    pub bucket: i64,
    pub entities: Vec<Entity>,
}

/// Groups the taken buckets into reads, by metric and bucket, in that order. A read names a service, instance
/// or endpoint only when every entity of the group shares it (and the scope is not a relation,
/// whose names are two-sided), so one read serves a whole group; the flush still keeps only the
/// returned series that are pending.
pub fn read_groups(taken: Taken) -> Vec<ReadGroup> {
    let mut groups: BTreeMap<(String, i64), Vec<Entity>> = BTreeMap::new();
    for (metric, entities) in taken {
        for (entity, buckets) in entities {
            for bucket in buckets {
                groups.entry((metric.clone(), bucket)).or_default().push(entity.clone());
            }
        }
    }
    groups
        .into_iter()
        .map(|((metric, bucket), entities)| {
            let plain = entities
                .iter()
                .all(|e| matches!(e.scope, ScopeType::Service | ScopeType::ServiceInstance | ScopeType::Endpoint));
            let shared = |name: fn(&Entity) -> &String| -> Option<String> {
                let first = name(entities.first()?);
                (plain && !first.is_empty() && entities.iter().all(|e| name(e) == first)).then(|| first.clone())
            };
            let filter = SeriesFilter {
                metric,
                service: shared(|e| &e.service_name),
                instance: shared(|e| &e.instance_name),
                endpoint: shared(|e| &e.endpoint_name),
            };
            ReadGroup { filter, bucket, entities }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str) -> Entity {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = name.to_string();
        entity
    }

    const M0: i64 = 202601010000;
    const M0_START: i64 = 1_767_225_600_000;

    fn closed(now_ms: i64) -> Due {
        Due::Closed { now_ms, close_after_ms: 10_000 }
    }

    fn all(_: &Entity) -> bool {
        true
    }

    #[test]
    fn buckets_wait_until_their_minute_closes_and_each_is_pending_once() {
        let mut pending = Pending::new(10);
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending);
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending, "again: still one entry");
        assert_eq!(pending.mark_one("m", &service("a"), M0 + 1), Marked::Pending);
        assert_eq!(pending.mark_one("m", &service("b"), M0), Marked::Pending);
        assert_eq!(pending.len(), 3);
        assert!(pending.take_due(closed(M0_START + 69_999), all).is_empty(), "one ms before end + close_after");
        let taken = pending.take_due(closed(M0_START + 70_000), all);
        assert_eq!(taken["m"][&service("a")], BTreeSet::from([M0]));
        assert_eq!(taken["m"][&service("b")], BTreeSet::from([M0]));
        assert_eq!(pending.len(), 1, "the next minute still waits");
        let taken = pending.take_due(Due::All { now_ms: M0_START + 70_000 }, all);
        assert_eq!(taken["m"][&service("a")], BTreeSet::from([M0 + 1]), "a shutdown takes open minutes too");
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn an_exported_minute_is_late_and_later_ones_are_not() {
        let mut pending = Pending::new(10);
        pending.mark_one("m", &service("a"), M0);
        pending.take_due(closed(M0_START + 70_000), all);
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Late);
        assert_eq!(pending.mark_one("m", &service("a"), M0 - 1), Marked::Late, "an earlier minute would be out of order");
        assert_eq!(pending.mark_one("m", &service("b"), M0), Marked::Pending, "another series");
        assert_eq!(pending.mark_one("m", &service("a"), M0 + 1), Marked::Pending);
        assert_eq!(pending.requeue_one("m", &service("a"), M0), Marked::Pending, "a failed read is requeued, not late");
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending, "pending again: a write joins it");
    }

    #[test]
    fn entities_owned_elsewhere_are_dropped_and_not_remembered() {
        let mut pending = Pending::new(10);
        pending.mark_one("m", &service("a"), M0);
        pending.mark_one("m", &service("b"), M0);
        let taken = pending.take_due(closed(M0_START + 70_000), |e| e.service_name == "a");
        assert_eq!(taken["m"].len(), 1);
        assert_eq!((pending.len(), pending.remembered()), (0, 1));
        assert_eq!(pending.mark_one("m", &service("b"), M0), Marked::Pending, "never exported here");
    }

    #[test]
    fn the_set_is_bounded_and_refusals_are_reported() {
        let mut pending = Pending::new(2);
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending);
        assert_eq!(pending.mark_one("n", &service("a"), M0), Marked::Pending);
        assert_eq!(pending.mark_one("m", &service("c"), M0), Marked::Full, "a third entry is refused");
        assert_eq!(pending.mark_one("m", &service("a"), M0 + 1), Marked::Full, "so is a second bucket of a series");
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending, "a pending bucket is still accepted");
        assert_eq!(pending.len(), 2);
        pending.take_due(closed(M0_START + 70_000), all);
        assert_eq!(pending.mark_one("m", &service("c"), M0 + 1), Marked::Pending, "room again after a flush");
    }

    #[test]
    fn the_memory_forgets_by_age_and_by_bound_and_old_minutes_stay_late() {
        let mut pending = Pending::new(2); // remembers 4 series
        for (minute, names) in [(M0, ["a", "b"].as_slice()), (M0 + 1, &["c", "d"]), (M0 + 2, &["e"])] {
            for name in names {
                assert_eq!(pending.mark_one("m", &service(name), minute), Marked::Pending);
            }
            pending.take_due(Due::All { now_ms: M0_START + 200_000 }, all);
        }
        assert_eq!(pending.remembered(), 3, "over the bound of 4, the oldest (a and b, at M0) go");
        assert_eq!(pending.mark_one("m", &service("a"), M0), Marked::Pending, "forgotten by the bound: exported again");
        assert_eq!(pending.mark_one("m", &service("c"), M0 + 1), Marked::Late);

        let hour_later = M0_START + REMEMBER_MS + 200_000;
        let taken = pending.take_due(closed(hour_later), all);
        assert_eq!(taken["m"].len(), 1, "a is exported again");
        assert_eq!(pending.remembered(), 0, "every series' last minute ended over an hour ago");
        assert_eq!(pending.mark_one("m", &service("d"), M0 + 1), Marked::Late, "older than the memory: late though forgotten");
        assert_eq!(pending.mark_one("m", &service("z"), M0 + 1), Marked::Late, "never seen, but that old");
    }

    #[test]
    fn reads_are_grouped_by_metric_and_bucket_and_narrowed_when_shared() {
        let mut pending = Pending::new(10);
        let mut instance = Entity::new(ScopeType::ServiceInstance);
        instance.service_name = "a".into();
        instance.instance_name = "i1".into();
        pending.mark_one("m", &service("a"), 5);
        pending.mark_one("m", &instance, 5);
        pending.mark_one("m", &service("b"), 6);
        pending.mark_one("m", &service("b"), 5);
        pending.mark_one("n", &service("a"), 5);
        let groups = read_groups(pending.take_due(Due::All { now_ms: 0 }, all));
        assert_eq!(groups.len(), 3);
        let m5 = groups.iter().find(|g| g.filter.metric == "m" && g.bucket == 5).expect("m@5");
        assert_eq!(m5.entities.len(), 3);
        assert_eq!(m5.filter.service, None, "two services");
        let m6 = groups.iter().find(|g| g.filter.metric == "m" && g.bucket == 6).expect("m@6");
        assert_eq!(m6.filter.service.as_deref(), Some("b"));
        let keys: Vec<(&str, i64)> = groups.iter().map(|g| (g.filter.metric.as_str(), g.bucket)).collect();
        assert_eq!(keys, vec![("m", 5), ("m", 6), ("n", 5)], "by metric, then bucket");

        let mut pending = Pending::new(10);
        pending.mark_one("m", &service("a"), 5);
        pending.mark_one("m", &instance, 5);
        let groups = read_groups(pending.take_due(Due::All { now_ms: 0 }, all));
        assert_eq!(groups[0].filter.service.as_deref(), Some("a"), "both entities are of service a");
        assert_eq!(groups[0].filter.instance, None, "the instance is not shared");
    }

    #[test]
    fn relation_reads_are_never_narrowed() {
        let mut relation = Entity::new(ScopeType::ServiceRelation);
        relation.service_name = "a".into();
        let mut pending = Pending::new(10);
        pending.mark_one("r", &relation, 1);
        let groups = read_groups(pending.take_due(Due::All { now_ms: 0 }, all));
        assert_eq!(groups[0].filter, SeriesFilter { metric: "r".into(), ..SeriesFilter::default() });
    }
}
