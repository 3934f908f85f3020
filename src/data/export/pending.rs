//! The series written since the last flush: a bounded set of (metric, entity) with the latest
//! minute bucket written for each. Pure: no clock, no IO.
//!
//! Marking costs a hash lookup per value and allocates only for a series not yet pending, so
//! the write path stays cheap. A series over the bound is refused and counted by the caller:
//! it is exported at the next flush where it is written again.

use std::collections::{BTreeMap, HashMap};

use crate::data::metrics::{Entity, MetricValue, SeriesFilter};
use hotrule_mal_engine::ScopeType;

/// Pending series, by metric then entity, with the latest minute bucket (`yyyyMMddHHmm`) seen.
pub type Taken = HashMap<String, HashMap<Entity, i64>>;

#[derive(Debug)]
pub struct Pending {
    series: Taken,
    len: usize,
    bound: usize,
}

impl Pending {
    pub fn new(bound: usize) -> Pending {
        Pending { series: HashMap::new(), len: 0, bound }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Marks every value's series; returns how many were refused because the set is full.
    pub fn mark(&mut self, values: &[MetricValue]) -> u64 {
        values.iter().filter(|v| !self.mark_one(&v.metric, &v.entity, v.time_bucket)).count() as u64
    }

    /// Marks one series at `bucket`; false when it is new and the set is full.
    pub fn mark_one(&mut self, metric: &str, entity: &Entity, bucket: i64) -> bool {
        if let Some(entities) = self.series.get_mut(metric)
            && let Some(latest) = entities.get_mut(entity)
        {
            *latest = (*latest).max(bucket);
            return true;
        }
        if self.len >= self.bound {
            return false;
        }
        self.series.entry(metric.to_string()).or_default().insert(entity.clone(), bucket);
        self.len += 1;
        true
    }

    /// Empties the set and returns what it held.
    pub fn take(&mut self) -> Taken {
        self.len = 0;
        std::mem::take(&mut self.series)
    }
}

/// One storage read of a flush: the series of one metric pending at one minute bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadGroup {
    pub filter: SeriesFilter,
    pub bucket: i64,
    pub entities: Vec<Entity>,
}

/// Groups the pending series into reads, by metric and bucket. A read names a service, instance
/// or endpoint only when every entity of the group shares it (and the scope is not a relation,
/// whose names are two-sided), so one read serves a whole group; the flush still keeps only the
/// returned series that are pending.
pub fn read_groups(taken: Taken) -> Vec<ReadGroup> {
    let mut groups: BTreeMap<(String, i64), Vec<Entity>> = BTreeMap::new();
    for (metric, entities) in taken {
        for (entity, bucket) in entities {
            groups.entry((metric.clone(), bucket)).or_default().push(entity);
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

    #[test]
    fn a_series_is_pending_once_with_its_latest_bucket() {
        let mut pending = Pending::new(10);
        assert!(pending.mark_one("m", &service("a"), 202601010002));
        assert!(pending.mark_one("m", &service("a"), 202601010001));
        assert!(pending.mark_one("m", &service("b"), 202601010001));
        assert_eq!(pending.len(), 2);
        let taken = pending.take();
        assert_eq!(pending.len(), 0);
        assert_eq!(taken["m"][&service("a")], 202601010002);
    }

    #[test]
    fn the_set_is_bounded_and_refusals_are_reported() {
        let mut pending = Pending::new(2);
        assert!(pending.mark_one("m", &service("a"), 1));
        assert!(pending.mark_one("n", &service("a"), 1));
        assert!(!pending.mark_one("m", &service("c"), 1), "a third series is refused");
        assert!(pending.mark_one("m", &service("a"), 2), "a pending series is still updated");
        assert_eq!(pending.len(), 2);
        pending.take();
        assert!(pending.mark_one("m", &service("c"), 1), "room again after a flush");
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
        pending.mark_one("n", &service("a"), 5);
        let groups = read_groups(pending.take());
        assert_eq!(groups.len(), 3);
        let m5 = groups.iter().find(|g| g.filter.metric == "m" && g.bucket == 5).expect("m@5");
        assert_eq!(m5.entities.len(), 2);
        assert_eq!(m5.filter.service.as_deref(), Some("a"), "both entities are of service a");
        assert_eq!(m5.filter.instance, None, "the instance is not shared");
        let m6 = groups.iter().find(|g| g.filter.metric == "m" && g.bucket == 6).expect("m@6");
        assert_eq!(m6.filter.service.as_deref(), Some("b"));
    }

    #[test]
    fn relation_reads_are_never_narrowed() {
        let mut relation = Entity::new(ScopeType::ServiceRelation);
        relation.service_name = "a".into();
        let mut pending = Pending::new(10);
        pending.mark_one("r", &relation, 1);
        let groups = read_groups(pending.take());
        assert_eq!(groups[0].filter, SeriesFilter { metric: "r".into(), ..SeriesFilter::default() });
    }
}
