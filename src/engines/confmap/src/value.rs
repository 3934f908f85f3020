//! The configuration tree: [`Value`], its insertion-ordered [`Map`], dotted key paths, and the
//! conversion to `serde_json::Value`.
//!
//! A value that was typed by YAML inference (a plain scalar such as `8080`, or a whole-value
//! `${env:PORT}` expansion) is kept as [`Value::Inferred`]: the typed value plus the text it was
//! written as. A string-typed consumer receives the text (`0123` stays `"0123"`), every other
//! consumer the typed value. This mirrors the Collector's `expandedValue{Value, Original}`.

use std::fmt;

/// One node of a configuration tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<Value>),
    Map(Map),
    /// A value whose type was inferred from text, together with that text.
    Inferred {
        value: Box<Value>,
        text: String,
    },
}

impl Value {
    /// An empty map.
    pub fn empty_map() -> Value {
        Value::Map(Map::new())
    }

    /// The value with any [`Value::Inferred`] wrapper removed.
    pub fn typed(&self) -> &Value {
        match self {
            Value::Inferred { value, .. } => value.typed(),
            other => other,
        }
    }

    /// Like [`Value::typed`], mutably.
    pub fn typed_mut(&mut self) -> &mut Value {
        match self {
            Value::Inferred { value, .. } => value.typed_mut(),
            other => other,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.typed(), Value::Null)
    }

    pub fn as_map(&self) -> Option<&Map> {
        match self.typed() {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match self.typed_mut() {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }

    /// The string a string-typed consumer would receive: a string, or the text of an inferred value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) | Value::Inferred { text, .. } => Some(text),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.typed() {
            Value::Int(number) => Some(*number),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.typed() {
            Value::Bool(flag) => Some(*flag),
            _ => None,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self.typed() {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Inferred { .. } => "inferred",
        }
    }

    /// The value at a dotted key path (`server.port`, list elements by index: `peers.0`).
    pub fn get_path(&self, path: &str) -> Option<&Value> {
        let mut current = self;
        for segment in path.split('.') {
            current = match current.typed() {
                Value::Map(map) => map.get(segment)?,
                Value::List(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// The JSON form: inferred values become their typed value; non-finite floats become null.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(flag) => serde_json::Value::Bool(*flag),
            Value::Int(number) => serde_json::Value::from(*number),
            Value::Float(number) => serde_json::Number::from_f64(*number)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::String(text) => serde_json::Value::String(text.clone()),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Map(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(key, value)| (key.to_owned(), value.to_json()))
                    .collect(),
            ),
            Value::Inferred { value, .. } => value.to_json(),
        }
    }
}

impl From<&serde_json::Value> for Value {
    fn from(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(flag) => Value::Bool(*flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(integer) => Value::Int(integer),
                None => Value::Float(number.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(text) => Value::String(text.clone()),
            serde_json::Value::Array(items) => Value::List(items.iter().map(Value::from).collect()),
            serde_json::Value::Object(object) => Value::Map(
                object
                    .iter()
                    .map(|(key, value)| (key.clone(), Value::from(value)))
                    .collect(),
            ),
        }
    }
}

impl fmt::Display for Value {
    /// Compact JSON.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.to_json())
    }
}

/// A map with string keys that keeps insertion order (so printed configuration reads like its source).
/// Lookups are linear: configuration maps are small.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    entries: Vec<(String, Value)>,
}

impl Map {
    pub fn new() -> Map {
        Map::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(existing, _)| existing == key)
            .map(|(_, value)| value)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(existing, _)| existing == key)
            .map(|(_, value)| value)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`; an existing key keeps its position. Returns the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.get_mut(&key) {
            Some(slot) => Some(std::mem::replace(slot, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let index = self
            .entries
            .iter()
            .position(|(existing, _)| existing == key)?;
        Some(self.entries.remove(index).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries
            .iter()
            .map(|(key, value)| (key.as_str(), value))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Value)> {
        self.entries
            .iter_mut()
            .map(|(key, value)| (key.as_str(), value))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(key, _)| key.as_str())
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Map {
        let mut map = Map::new();
        for (key, value) in iter {
            map.insert(key, value);
        }
        map
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// Joins a parent key path and a child segment with `.` (the root path is empty).
pub(crate) fn join_path(parent: &str, segment: &str) -> String {
    if parent.is_empty() {
        segment.to_owned()
    } else {
        format!("{parent}.{segment}")
    }
}

/// Whether `path` is `prefix` itself or lies below it.
pub(crate) fn is_under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'.')
}

/// Calls `visit(path, leaf)` for every leaf below `value`: scalars, nulls, empty maps and empty lists.
/// List elements are addressed by index. Inferred values are leaves unless they wrap a map or list.
pub(crate) fn for_each_leaf(value: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    match value.typed() {
        Value::Map(map) if !map.is_empty() => {
            for (key, child) in map.iter() {
                for_each_leaf(child, &join_path(path, key), visit);
            }
        }
        Value::List(items) if !items.is_empty() => {
            for (index, child) in items.iter().enumerate() {
                for_each_leaf(child, &join_path(path, &index.to_string()), visit);
            }
        }
        _ => visit(path, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_insertion_order_and_position_on_overwrite() {
        let mut map = Map::new();
        map.insert("b", Value::Int(1));
        map.insert("a", Value::Int(2));
        map.insert("b", Value::Int(3));
        assert_eq!(map.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(map.get("b"), Some(&Value::Int(3)));
        assert_eq!(map.remove("b"), Some(Value::Int(3)));
        assert_eq!(map.keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn path_prefix_matching_respects_segment_boundaries() {
        assert!(is_under("a.b", "a"));
        assert!(is_under("a", "a"));
        assert!(!is_under("ab", "a"));
        assert!(is_under("anything", ""));
    }

    #[test]
    fn get_path_walks_maps_lists_and_inferred_values() {
        let inner: Map = [("port".to_owned(), Value::Int(1))].into_iter().collect();
        let list = Value::List(vec![Value::Inferred {
            value: Box::new(Value::Map(inner)),
            text: "port: 1".into(),
        }]);
        let root: Map = [("peers".to_owned(), list)].into_iter().collect();
        let root = Value::Map(root);
        assert_eq!(root.get_path("peers.0.port"), Some(&Value::Int(1)));
        assert_eq!(root.get_path("peers.1"), None);
        assert_eq!(root.get_path("peers.x"), None);
    }
}
