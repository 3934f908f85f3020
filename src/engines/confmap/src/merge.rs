//! Merging sources in order, with the Collector's semantics (`Conf.Merge`, koanf):
//! maps merge deeply; scalars and lists from a later source replace earlier ones (lists are never
//! concatenated); an explicit null replaces whatever was there.
//!
//! Merging also records, for every leaf, the source that set it, and warns about the "null map"
//! trap: a later `processors:` (null) silently discarding a map an earlier source filled.
//! [`split_delimited_keys`] turns `a::b: 1` into `a: {b: 1}`, which the Collector does for every
//! source through koanf's `::` key delimiter (and which makes `yaml:a::b: 1` work).

use std::collections::BTreeMap;

use crate::value::{Map, Value, for_each_leaf, is_under, join_path};

/// The key delimiter inside one key (`exporters::otlp::endpoint`).
pub(crate) const KEY_DELIMITER: &str = "::";

/// What merging one source records: leaf origins and warnings.
pub(crate) struct Tracker<'a> {
    pub source: &'a str,
    pub origins: &'a mut BTreeMap<String, String>,
    pub warnings: &'a mut Vec<String>,
}

impl Tracker<'_> {
    fn replace_origins(&mut self, path: &str, value: &Value) {
        self.origins.retain(|existing, _| !is_under(existing, path));
        record_origins(self.origins, path, value, self.source);
    }

    fn warn_null_map(&mut self, path: &str) {
        let mut earlier: Vec<&str> = Vec::new();
        for (leaf, source) in self.origins.iter() {
            if is_under(leaf, path) && !earlier.contains(&source.as_str()) {
                earlier.push(source);
            }
        }
        let warning = format!(
            "`{path}` is null in {later}, which discards the map set by {earlier}; \
             write `{path}: {{}}` or leave the key out to keep it",
            later = self.source,
            earlier = earlier.join(", "),
        );
        tracing::warn!(key = path, later = self.source, "{warning}");
        self.warnings.push(warning);
    }
}

/// Sets the origin of every leaf of `value` (at `path`) to `source`.
pub(crate) fn record_origins(
    origins: &mut BTreeMap<String, String>,
    path: &str,
    value: &Value,
    source: &str,
) {
    for_each_leaf(value, path, &mut |leaf, _| {
        origins.insert(leaf.to_owned(), source.to_owned());
    });
}

/// Merges `src` (a later source) into `dst`. `path` is the key path of both maps.
pub(crate) fn merge_maps(dst: &mut Map, src: Map, path: &str, tracker: &mut Option<Tracker<'_>>) {
    for (key, incoming) in src {
        let child_path = join_path(path, &key);
        match (dst.get_mut(&key), incoming) {
            (Some(existing), Value::Map(incoming_map)) if existing.as_map().is_some() => {
                if let Some(existing_map) = existing.as_map_mut() {
                    if incoming_map.is_empty() && existing_map.is_empty() {
                        // `{}` over `{}`: the later source now owns the empty-map leaf.
                        if let Some(tracker) = tracker.as_mut() {
                            tracker.replace_origins(&child_path, &Value::empty_map());
                        }
                    }
                    merge_maps(existing_map, incoming_map, &child_path, tracker);
                }
            }
            (Some(existing), incoming) => {
                if let Some(tracker) = tracker.as_mut() {
                    let fills_map = existing.as_map().is_some_and(|map| !map.is_empty());
                    if fills_map && incoming.is_null() {
                        tracker.warn_null_map(&child_path);
                    }
                    tracker.replace_origins(&child_path, &incoming);
                }
                *existing = incoming;
            }
            (None, incoming) => {
                if let Some(tracker) = tracker.as_mut() {
                    tracker.replace_origins(&child_path, &incoming);
                }
                dst.insert(key, incoming);
            }
        }
    }
}

/// Splits keys containing `::` into nested maps, at every map level (lists are left alone).
/// Sibling keys that share a prefix merge deeply (`a::b: 1` and `a: {c: 2}` give `a: {b: 1, c: 2}`).
pub(crate) fn split_delimited_keys(map: Map) -> Map {
    let mut result = Map::new();
    for (key, value) in map {
        let value = match value {
            Value::Map(inner) => Value::Map(split_delimited_keys(inner)),
            other => other,
        };
        let segments: Vec<&str> = key.split(KEY_DELIMITER).collect();
        let nested = segments.into_iter().rev().fold(value, |inner, segment| {
            let mut wrapper = Map::new();
            wrapper.insert(segment, inner);
            Value::Map(wrapper)
        });
        if let Value::Map(nested) = nested {
            merge_maps(&mut result, nested, "", &mut None);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    fn map(text: &str) -> Map {
        match yaml::parse(text).expect("valid yaml") {
            Value::Map(map) => map,
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn splits_delimited_keys_and_merges_siblings() {
        let split = split_delimited_keys(map("a::b: 1\na:\n  c: 2\nx::y::z: [1]\n"));
        assert_eq!(
            Value::Map(split).to_json(),
            serde_json::json!({"a": {"b": 1, "c": 2}, "x": {"y": {"z": [1]}}})
        );
    }

    #[test]
    fn tracks_origins_through_replacement() {
        let mut origins = BTreeMap::new();
        let mut warnings = Vec::new();
        let mut merged = Map::new();
        for (source, text) in [("a", "s: {x: 1, y: [1, 2]}\n"), ("b", "s: {y: [3]}\n")] {
            let mut tracker = Some(Tracker {
                source,
                origins: &mut origins,
                warnings: &mut warnings,
            });
            merge_maps(&mut merged, map(text), "", &mut tracker);
        }
        let expected: BTreeMap<String, String> = [("s.x", "a"), ("s.y.0", "b")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(origins, expected);
        assert!(warnings.is_empty());
    }
}
