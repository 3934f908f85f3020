//! Loading the YAML text and reading typed fields out of one mapping, with errors that name the
//! place (rule or hook) and the key.

use yaml_rust2::parser::{Event, EventReceiver, Parser};
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

use super::{Place, SettingsError};

/// Largest settings text, in bytes.
pub const MAX_SETTINGS_BYTES: usize = 1024 * 1024;
/// Deepest nesting of sequences and mappings.
pub const MAX_YAML_DEPTH: usize = 32;
/// Most nodes the document may have once its aliases are expanded (the loader copies each
/// alias, so a few nested aliases could otherwise grow a small text without bound).
pub const MAX_YAML_NODES: u64 = 200_000;

/// Parses the text into one document; empty text (or only comments) is `Yaml::Null`.
pub fn load(text: &str) -> Result<Yaml, SettingsError> {
    if text.len() > MAX_SETTINGS_BYTES {
        return Err(SettingsError::TooLarge { len: text.len(), max: MAX_SETTINGS_BYTES });
    }
    let mut shape = ShapeCheck::default();
    Parser::new_from_str(text)
        .load(&mut shape, true)
        .map_err(|e| SettingsError::BadYaml { reason: e.to_string() })?;
    if shape.max_depth > MAX_YAML_DEPTH {
        return Err(SettingsError::TooDeep { max: MAX_YAML_DEPTH });
    }
    if shape.too_many_nodes {
        return Err(SettingsError::TooManyNodes { max: MAX_YAML_NODES });
    }
    let mut documents = YamlLoader::load_from_str(text).map_err(|e| SettingsError::BadYaml { reason: e.to_string() })?;
    match documents.len() {
        0 => Ok(Yaml::Null),
        1 => Ok(documents.remove(0)),
        count => Err(SettingsError::DocumentCount { count }),
    }
}

/// What one event pass learns before any tree is built: nesting depth and the node count with
/// every alias expanded.
#[derive(Default)]
struct ShapeCheck {
    depth: usize,
    max_depth: usize,
    /// Open collections: (anchor id, nodes so far).
    open: Vec<(usize, u64)>,
    /// Expanded node count of each anchored node.
    anchored: std::collections::HashMap<usize, u64>,
    total: u64,
    too_many_nodes: bool,
}

impl ShapeCheck {
    fn count(&mut self, nodes: u64) {
        if let Some((_, open)) = self.open.last_mut() {
            *open = open.saturating_add(nodes);
        }
        self.total = self.total.saturating_add(nodes);
        self.too_many_nodes |= self.total > MAX_YAML_NODES;
    }
}

impl EventReceiver for ShapeCheck {
    fn on_event(&mut self, event: Event) {
        match event {
            Event::Scalar(_, _, anchor, _) => {
                if anchor != 0 {
                    self.anchored.insert(anchor, 1);
                }
                self.count(1);
            }
            Event::Alias(anchor) => {
                let nodes = self.anchored.get(&anchor).copied().unwrap_or(1);
                self.count(nodes);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
                self.total = self.total.saturating_add(1);
                self.open.push((anchor, 1));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.depth = self.depth.saturating_sub(1);
                if let Some((anchor, nodes)) = self.open.pop() {
                    if anchor != 0 {
                        self.anchored.insert(anchor, nodes);
                    }
                    if let Some((_, parent)) = self.open.last_mut() {
                        *parent = parent.saturating_add(nodes);
                    }
                    // Nodes of an expanded alias were counted into `total` when the alias was
                    // seen; plain nodes were counted as they arrived.
                }
            }
            _ => {}
        }
    }
}

/// A short name for a YAML node's type, for error messages.
pub fn kind(node: &Yaml) -> &'static str {
    match node {
        Yaml::Null => "null",
        Yaml::Boolean(_) => "a boolean",
        Yaml::Integer(_) => "an integer",
        Yaml::Real(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::Alias(_) => "an alias",
        Yaml::BadValue => "an unreadable value",
    }
}

/// A scalar as text (tag values and header values may be written as numbers or booleans).
pub fn scalar_text(node: &Yaml) -> Option<String> {
    match node {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The fields of one mapping at one place (a rule, a hook, the top level).
pub struct Fields<'a> {
    pub place: &'a Place,
    pub map: &'a Hash,
}

impl<'a> Fields<'a> {
    /// The value of `key`; a null value counts as absent.
    pub fn get(&self, key: &str) -> Option<&'a Yaml> {
        self.map.get(&Yaml::String(key.to_string())).filter(|v| !matches!(v, Yaml::Null))
    }

    fn wrong(&self, key: &str, expected: &'static str, found: &Yaml) -> SettingsError {
        SettingsError::WrongType { place: self.place.clone(), key: key.to_string(), expected, found: kind(found) }
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, SettingsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Yaml::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.wrong(key, "a string", other)),
        }
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, SettingsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Yaml::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong(key, "true or false", other)),
        }
    }

    /// A whole number in `0..=max`.
    pub fn count(&self, key: &str, max: u32) -> Result<Option<u32>, SettingsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Yaml::Integer(i)) => u32::try_from(*i)
                .ok()
                .filter(|v| *v <= max)
                .map(Some)
                .ok_or_else(|| SettingsError::OutOfRange { place: self.place.clone(), key: key.to_string(), value: *i, max }),
            Some(other) => Err(self.wrong(key, "a whole number", other)),
        }
    }

    /// A list of strings; absent is empty.
    pub fn strings(&self, key: &str) -> Result<Vec<String>, SettingsError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Yaml::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Yaml::String(s) => Ok(s.clone()),
                    other => Err(self.wrong(key, "a list of strings", other)),
                })
                .collect(),
            Some(other) => Err(self.wrong(key, "a list of strings", other)),
        }
    }

    /// A mapping of string keys to scalar values, in file order; absent is empty.
    pub fn string_map(&self, key: &str) -> Result<Vec<(String, String)>, SettingsError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Yaml::Hash(entries)) => entries
                .iter()
                .map(|(k, v)| match (scalar_text(k), scalar_text(v)) {
                    (Some(k), Some(v)) => Ok((k, v)),
                    (None, _) => Err(self.wrong(key, "a mapping with text keys", k)),
                    (_, None) => Err(self.wrong(key, "a mapping with text values", v)),
                })
                .collect(),
            Some(other) => Err(self.wrong(key, "a mapping", other)),
        }
    }

    /// The keys of this mapping that are not in `known` (as text).
    pub fn unknown_keys(&self, known: &[&str]) -> Vec<String> {
        self.map
            .keys()
            .map(|k| scalar_text(k).unwrap_or_else(|| format!("<{}>", kind(k))))
            .filter(|k| !known.contains(&k.as_str()))
            .collect()
    }
}
