//! Scope functions (`service`, `instance`, `endpoint`, `process`, `serviceRelation`,
//! `serviceInstanceRelation`, `processRelation`): their argument overloads, and grouping a family
//! into meter entities the way `SampleFamily.createMeterSamples` does.

use std::sync::Arc;

use hotrule_rule_compiler::ScopeType;

use crate::output::{DetectPoint, Entity};
use crate::sample::{Family, LabelMap, Sample};

/// The parsed arguments of one scope call.
#[derive(Debug, Clone)]
pub(crate) struct ScopeSpec {
    pub scope: ScopeType,
    /// Label-list arguments in order.
    pub lists: Vec<Vec<String>>,
    /// String arguments in order (delimiters and label names, by overload).
    pub strings: Vec<String>,
    pub layer: Option<String>,
    pub detect_point: Option<DetectPoint>,
    /// The call has a properties closure (`instance(..., { tags -> [...] })`).
    pub has_properties: bool,
    /// [`ScopeSpec::label_keys`], read once; shared with the [`Groups`] it makes.
    keys: Arc<[String]>,
}

const MAX_SERVICE: usize = 70;
const MAX_INSTANCE: usize = 70;
const MAX_ENDPOINT: usize = 150;

impl ScopeSpec {
    pub(crate) fn new(
        scope: ScopeType,
        lists: Vec<Vec<String>>,
        strings: Vec<String>,
        layer: Option<String>,
        detect_point: Option<DetectPoint>,
        has_properties: bool,
    ) -> ScopeSpec {
        let mut spec = ScopeSpec {
            scope,
            lists,
            strings,
            layer,
            detect_point,
            has_properties,
            keys: Arc::from([]),
        };
        spec.keys = spec.label_keys().into();
        spec
    }

    fn list(&self, i: usize) -> &[String] {
        self.lists.get(i).map_or(&[], Vec::as_slice)
    }
    fn string(&self, i: usize) -> Option<&str> {
        self.strings.get(i).map(String::as_str)
    }

    /// Every label the scope consumes (removed from the samples it keeps per entity).
    fn label_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.lists.iter().flatten().cloned().collect();
        match self.scope {
            ScopeType::Process => keys.extend(self.strings.first().cloned()),
            ScopeType::ServiceRelation | ScopeType::ServiceInstanceRelation => {
                // Strings are (delimiter, componentIdKey) in the long overload.
                if let Some(component) = self.string(1).filter(|k| !k.is_empty()) {
                    keys.push(component.to_owned());
                }
            }
            ScopeType::ProcessRelation => {
                // (detectPointKey, svc, ins, srcPid, dstPid, component): all strings are labels.
                keys.extend(self.strings.iter().cloned());
            }
            _ => {}
        }
        keys
    }

    /// The delimiter for a name part; empty means `.`.
    fn delimiter(&self, i: usize) -> &str {
        match self.string(i) {
            Some(d) if !d.is_empty() => d,
            _ => ".",
        }
    }

    /// Builds the entity of one group from its first sample.
    pub(crate) fn entity(&self, first: &Sample) -> Entity {
        let layer = self.layer.clone().unwrap_or_else(|| "UNDEFINED".to_owned());
        let mut entity = Entity::new(self.scope);
        entity.layer = layer;
        match self.scope {
            ScopeType::Service => {
                entity.service_name = cut(dim(first, self.list(0), self.delimiter(0)), MAX_SERVICE);
            }
            ScopeType::ServiceInstance => {
                let (svc_delim, ins_delim) = match self.strings.len() {
                    0 => (".", "."),
                    _ => (self.delimiter(0), self.delimiter(1)),
                };
                entity.service_name = cut(dim(first, self.list(0), svc_delim), MAX_SERVICE);
                entity.instance_name = cut(dim(first, self.list(1), ins_delim), MAX_INSTANCE);
            }
            ScopeType::Endpoint => {
                let delim = self.delimiter(0);
                entity.service_name = cut(dim(first, self.list(0), delim), MAX_SERVICE);
                entity.endpoint_name = cut(dim(first, self.list(1), delim), MAX_ENDPOINT);
            }
            ScopeType::Process => {
                entity.service_name = cut(dim(first, self.list(0), "."), MAX_SERVICE);
                entity.instance_name = cut(dim(first, self.list(1), "."), MAX_INSTANCE);
                entity.process_name = dim(first, self.list(2), ".");
                let layer_key = self.string(0).unwrap_or_default();
                let layer = first.label(layer_key);
                entity.layer = if layer.is_empty() {
                    "UNDEFINED".to_owned()
                } else {
                    layer.to_owned()
                };
            }
            ScopeType::ServiceRelation => {
                let delim = self.delimiter(0);
                entity.source_service_name = cut(dim(first, self.list(0), delim), MAX_SERVICE);
                entity.dest_service_name = cut(dim(first, self.list(1), delim), MAX_SERVICE);
                entity.detect_point = self.detect_point;
                entity.component_id = component(first, self.string(1));
                entity.service_name = match self.detect_point {
                    Some(DetectPoint::Server) => entity.dest_service_name.clone(),
                    _ => entity.source_service_name.clone(),
                };
            }
            ScopeType::ServiceInstanceRelation => {
                let delim = self.delimiter(0);
                entity.source_service_name = cut(dim(first, self.list(0), delim), MAX_SERVICE);
                entity.source_instance_name = cut(dim(first, self.list(1), delim), MAX_INSTANCE);
                entity.dest_service_name = cut(dim(first, self.list(2), delim), MAX_SERVICE);
                entity.dest_instance_name = cut(dim(first, self.list(3), delim), MAX_INSTANCE);
                entity.detect_point = self.detect_point;
                entity.component_id = component(first, self.string(1));
                entity.service_name = match self.detect_point {
                    Some(DetectPoint::Server) => entity.dest_service_name.clone(),
                    _ => entity.source_service_name.clone(),
                };
            }
            ScopeType::ProcessRelation => {
                // strings: detectPointKey, sourceProcessIdKey, destProcessIdKey, componentKey.
                let detect = first.label(self.string(0).unwrap_or_default());
                entity.detect_point = Some(if detect.eq_ignore_ascii_case("server") {
                    DetectPoint::Server
                } else {
                    DetectPoint::Client
                });
                entity.service_name = cut(dim(first, self.list(0), "."), MAX_SERVICE);
                entity.instance_name = cut(dim(first, self.list(1), "."), MAX_INSTANCE);
                entity.source_process_id =
                    first.label(self.string(1).unwrap_or_default()).to_owned();
                entity.dest_process_id = first.label(self.string(2).unwrap_or_default()).to_owned();
                entity.component_id = component(first, self.string(3));
            }
        }
        entity
    }
}

/// A name part: the keys' values in order, empty ones skipped, joined by the delimiter.
fn dim(sample: &Sample, keys: &[String], delimiter: &str) -> String {
    let values = || {
        keys.iter()
            .map(|k| sample.label(k))
            .filter(|v| !v.is_empty())
    };
    let length = values().map(|v| v.len() + delimiter.len()).sum::<usize>();
    let mut out = String::with_capacity(length.saturating_sub(delimiter.len()));
    for value in values() {
        if !out.is_empty() {
            out.push_str(delimiter);
        }
        out.push_str(value);
    }
    out
}

/// Upstream `Integer.parseInt` of the component label; a non-integer fails the rule there. Here a
/// non-integer reads as 0 (documented).
fn component(sample: &Sample, key: Option<&str>) -> i32 {
    match key {
        Some(key) if !key.is_empty() => sample.label(key).trim().parse().unwrap_or(0),
        _ => 0,
    }
}

fn cut(mut name: String, max: usize) -> String {
    // No more bytes than `max` is no more characters.
    if name.len() > max && name.chars().count() > max {
        name = name.chars().take(max).collect();
    }
    name
}

/// The meter entities of a scope call, in first-seen order, each with its samples.
///
/// Upstream removes the scope's labels from the samples it keeps per entity. Here the samples stay
/// whole (their label maps shared, not rebuilt) and readers leave the scope labels out where it
/// shows: emission's label keys ([`Groups::keys`]) and `run_expression`'s result
/// ([`Groups::stripped`]). A group's first sample, whole, is what a properties closure reads.
/// When every sample is one entity's (always so for one sample), its family is the scoped family
/// itself, shared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Groups {
    /// The labels the scope consumes.
    pub keys: Arc<[String]>,
    /// Never an empty family.
    pub entities: Vec<(Entity, Family)>,
}

impl Groups {
    /// The groups as upstream keeps them: samples without the scope labels.
    pub(crate) fn stripped(self) -> Vec<(Entity, Vec<Sample>)> {
        let keys = self.keys;
        self.entities
            .into_iter()
            .map(|(entity, family)| {
                let samples = family
                    .samples()
                    .iter()
                    .map(|sample| without_keys(sample, &keys))
                    .collect();
                (entity, samples)
            })
            .collect()
    }
}

/// Groups a family's samples by the scope's label values into [`Groups`].
pub(crate) fn group(spec: &ScopeSpec, family: &Family) -> Groups {
    let keys = &spec.keys;
    let samples = family.samples();
    let groups = |entities| Groups {
        keys: keys.clone(),
        entities,
    };
    let Some(first) = samples.first() else {
        return groups(Vec::new());
    };
    // One entity (one sample, the log-MAL case, or one target's scrape): no index, no copies.
    let same_entity = |sample: &Sample| keys.iter().all(|k| sample.label(k) == first.label(k));
    if samples[1..].iter().all(same_entity) {
        return groups(vec![(spec.entity(first), family.clone())]);
    }
    let mut entities: Vec<(Entity, Vec<Sample>)> = Vec::with_capacity(samples.len().min(16));
    // Keyed by the values of `keys` in order, borrowed from the samples: the same grouping as a
    // map of key to value (a key listed twice reads the same value twice), without copies.
    let mut index: std::collections::HashMap<Vec<&str>, usize> = std::collections::HashMap::new();
    for sample in samples {
        let key: Vec<&str> = keys.iter().map(|k| sample.label(k)).collect();
        match index.get(&key) {
            Some(&i) => entities[i].1.push(sample.clone()),
            None => {
                index.insert(key, entities.len());
                entities.push((spec.entity(sample), vec![sample.clone()]));
            }
        }
    }
    groups(
        entities
            .into_iter()
            .map(|(entity, samples)| (entity, Family::build(samples)))
            .collect(),
    )
}

/// The sample with the scope labels removed; its labels stay shared when it has none of them.
fn without_keys(sample: &Sample, keys: &[String]) -> Sample {
    let mut left = sample.clone();
    if keys.iter().any(|k| sample.labels.contains_key(k)) {
        // Inserted in the map's order, not collected: collecting sorts a buffer first.
        let mut labels = LabelMap::new();
        for (k, v) in sample.labels.iter().filter(|(k, _)| !keys.contains(k)) {
            labels.insert(k.clone(), v.clone());
        }
        left.labels = std::sync::Arc::new(labels);
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{Labels, labels};

    /// The grouping before the borrowed-key rewrite: keys as label maps, labels cloned then
    /// trimmed.
    fn group_reference(spec: &ScopeSpec, samples: &[Sample]) -> Vec<(Entity, Vec<Sample>, Labels)> {
        let keys = spec.label_keys();
        let mut groups: Vec<(Entity, Vec<Sample>, Labels)> = Vec::new();
        let mut index: std::collections::HashMap<Labels, usize> = std::collections::HashMap::new();
        for sample in samples {
            let key: Labels = std::sync::Arc::new(
                keys.iter()
                    .map(|k| (k.clone(), sample.label(k).to_owned()))
                    .collect(),
            );
            let mut left = sample.clone();
            std::sync::Arc::make_mut(&mut left.labels).retain(|k, _| !keys.contains(k));
            match index.get(&key) {
                Some(&i) => groups[i].1.push(left),
                None => {
                    index.insert(key, groups.len());
                    groups.push((spec.entity(sample), vec![left], sample.labels.clone()));
                }
            }
        }
        groups
    }

    /// [`group`] stripped, with each group's first labels whole.
    fn as_upstream(spec: &ScopeSpec, samples: &[Sample]) -> Vec<(Entity, Vec<Sample>, Labels)> {
        let groups = group(spec, &Family::build(samples.to_vec()));
        let firsts: Vec<Labels> = groups
            .entities
            .iter()
            .map(|(_, family)| family.samples()[0].labels.clone())
            .collect();
        groups
            .stripped()
            .into_iter()
            .zip(firsts)
            .map(|((entity, samples), first)| (entity, samples, first))
            .collect()
    }

    fn spec(scope: ScopeType, lists: &[&[&str]]) -> ScopeSpec {
        ScopeSpec::new(
            scope,
            lists
                .iter()
                .map(|l| l.iter().map(|s| s.to_string()).collect())
                .collect(),
            Vec::new(),
            Some("NGINX".to_owned()),
            None,
            false,
        )
    }

    #[test]
    fn group_matches_reference() {
        let specs = [
            spec(ScopeType::Service, &[&["service"]]),
            spec(ScopeType::ServiceInstance, &[&["service"], &["instance"]]),
            // A label listed twice, and one no sample has.
            spec(ScopeType::ServiceInstance, &[&["service"], &["service", "missing"]]),
        ];
        let mut all = Vec::new();
        for i in 0..24 {
            let mut pairs = vec![("level", format!("l{}", i % 2))];
            if i % 5 != 0 {
                pairs.push(("service", format!("s{}", i % 3)));
            }
            if i % 4 != 0 {
                pairs.push(("instance", format!("i{}", i % 4)));
            }
            all.push(Sample::new("m", labels(pairs), i as f64, 1000 + i));
        }
        for spec in &specs {
            for len in [0, 1, 2, 5, all.len()] {
                let samples = &all[..len];
                assert_eq!(as_upstream(spec, samples), group_reference(spec, samples));
            }
            for sample in &all {
                let one = std::slice::from_ref(sample);
                assert_eq!(as_upstream(spec, one), group_reference(spec, one));
            }
        }
    }
}
