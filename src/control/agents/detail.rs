//! Config content as agents receive it: JSON text of one object.
//!
//! The 3.x agent parses every `ConfigDetail.detail` as JSON (it rejects YAML) and injects a
//! `"version"` key into the object before writing `<name>.json`. Operators may store YAML or
//! JSON; this module checks either and produces the JSON bytes that are delivered. YAML anchors
//! and aliases are refused: the YAML loader expands every alias by copying, so a few nested
//! aliases can grow a small document without bound.

use bytes::Bytes;
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, EventReceiver, Parser};
use yaml_rust2::{Yaml, YamlLoader};

use super::model::ContentFormat;

/// Largest stored content, in bytes.
pub const MAX_CONTENT_BYTES: usize = 1024 * 1024;

/// Deepest nesting of YAML sequences and mappings. Checked before the document is built, because
/// building, converting and dropping a tree all recurse once per level.
pub const MAX_YAML_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DetailError {
    #[error("content is {len} bytes; the limit is {MAX_CONTENT_BYTES}")]
    TooLarge { len: usize },
    #[error("content is not valid JSON: {reason}")]
    BadJson { reason: String },
    #[error("content is not valid YAML: {reason}")]
    BadYaml { reason: String },
    #[error("content must hold exactly one YAML document, found {count}")]
    DocumentCount { count: usize },
    #[error("YAML anchors and aliases are not supported in agent configs")]
    YamlAlias,
    #[error("YAML nests deeper than {MAX_YAML_DEPTH} levels")]
    TooDeep,
    #[error("the top level must be a mapping (a JSON object), found {found}")]
    NotAnObject { found: &'static str },
    #[error("YAML key at {path} is a {found}; only scalar keys become JSON keys")]
    NonScalarKey { path: String, found: &'static str },
    #[error("YAML value at {path} ({value}) has no JSON equivalent")]
    NoJsonEquivalent { path: String, value: String },
}

/// Checks stored content and returns the JSON detail agents receive. JSON is delivered exactly as
/// stored (after the check); YAML is converted.
pub fn to_json_detail(content: &str, format: ContentFormat) -> Result<Bytes, DetailError> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(DetailError::TooLarge { len: content.len() });
    }
    match format {
        ContentFormat::Json => {
            let value: Value = serde_json::from_str(content).map_err(|e| DetailError::BadJson {
                reason: e.to_string(),
            })?;
            require_object(&value)?;
            Ok(Bytes::copy_from_slice(content.as_bytes()))
        }
        ContentFormat::Yaml => {
            let value = yaml_to_json(content)?;
            require_object(&value)?;
            let text = serde_json::to_vec(&value).map_err(|e| DetailError::BadJson {
                reason: e.to_string(),
            })?;
            Ok(Bytes::from(text))
        }
    }
}

fn require_object(value: &Value) -> Result<(), DetailError> {
    match value {
        Value::Object(_) => Ok(()),
        other => Err(DetailError::NotAnObject {
            found: json_kind(other),
        }),
    }
}

/// Parses one YAML document (aliases refused) into a JSON value.
pub fn yaml_to_json(content: &str) -> Result<Value, DetailError> {
    let mut shape = ShapeCheck::default();
    Parser::new_from_str(content)
        .load(&mut shape, true)
        .map_err(|e| DetailError::BadYaml {
            reason: e.to_string(),
        })?;
    if shape.alias_or_anchor {
        return Err(DetailError::YamlAlias);
    }
    if shape.max_depth > MAX_YAML_DEPTH {
        return Err(DetailError::TooDeep);
    }
    let documents = YamlLoader::load_from_str(content).map_err(|e| DetailError::BadYaml {
        reason: e.to_string(),
    })?;
    match documents.as_slice() {
        [document] => convert(document, "$"),
        other => Err(DetailError::DocumentCount { count: other.len() }),
    }
}

/// What the event pass learns before any tree is built.
#[derive(Default)]
struct ShapeCheck {
    alias_or_anchor: bool,
    depth: usize,
    max_depth: usize,
}

impl EventReceiver for ShapeCheck {
    fn on_event(&mut self, event: Event) {
        match &event {
            Event::Alias(_) => self.alias_or_anchor = true,
            Event::Scalar(_, _, anchor, _) => self.alias_or_anchor |= *anchor != 0,
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.alias_or_anchor |= *anchor != 0;
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
            }
            Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }
}

fn convert(node: &Yaml, path: &str) -> Result<Value, DetailError> {
    let no_equivalent = |value: String| DetailError::NoJsonEquivalent {
        path: path.to_string(),
        value,
    };
    Ok(match node {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::Number(Number::from(*i)),
        Yaml::Real(text) => {
            let parsed = node.as_f64().ok_or_else(|| no_equivalent(text.clone()))?;
            Value::Number(Number::from_f64(parsed).ok_or_else(|| no_equivalent(text.clone()))?)
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| convert(item, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                let key = scalar_key(key, path)?;
                let child = convert(value, &format!("{path}.{key}"))?;
                object.insert(key, child);
            }
            Value::Object(object)
        }
        Yaml::Alias(_) => return Err(DetailError::YamlAlias),
        Yaml::BadValue => return Err(no_equivalent("an unresolvable value".to_string())),
    })
}

fn scalar_key(key: &Yaml, path: &str) -> Result<String, DetailError> {
    match key {
        Yaml::String(s) => Ok(s.clone()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Real(text) => Ok(text.clone()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        Yaml::Null => Ok("null".to_string()),
        Yaml::Array(_) => Err(DetailError::NonScalarKey {
            path: path.to_string(),
            found: "sequence",
        }),
        Yaml::Hash(_) => Err(DetailError::NonScalarKey {
            path: path.to_string(),
            found: "mapping",
        }),
        Yaml::Alias(_) => Err(DetailError::YamlAlias),
        Yaml::BadValue => Err(DetailError::NonScalarKey {
            path: path.to_string(),
            found: "bad value",
        }),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
