//! The three parsers (`json {}`, `yaml {}`, `text { regexp ... }`) and what they leave in
//! `parsed`.
//!
//! - `json`: the JSON body, or, when that is empty, the text body (OTLP logs always arrive as
//!   text); must be an object. The metadata keys `service`, `serviceInstance`, `endpoint`,
//!   `layer`, `timestamp` are added when absent.
//! - `yaml`: the YAML body, a mapping; metadata keys as for json.
//! - `text`: the pattern runs with Java's `find()` semantics (first match anywhere in the text
//!   body); named groups become `parsed.<name>`. Java's `(?<name>...)` is rewritten to the
//!   `regex` crate's spelling; look-around and back-references cannot run and fail the rule.
//!
//! A parse failure (no match, invalid document, a typed input instead of a body) aborts the
//! rule unless `abortOnFailure false`, which leaves a metadata-only `parsed`.

use std::sync::Arc;

use crate::java_regex::JavaRegex;
use serde_json::{Map, Value as Json};
use yaml_rust2::{Yaml, YamlLoader};

use crate::log::{Body, LogData};

/// What `parsed` reads.
#[derive(Debug, Clone)]
pub(crate) enum Parsed {
    /// No parser ran (or it failed softly): `parsed.x` reads the log's metadata.
    Metadata,
    Map(Map<String, Json>),
    /// A regexp match: the text of each capture group by group index.
    Groups {
        /// Shared, not cloned: a cloned `Regex` gets a fresh matching cache, which made every
        /// match allocate one.
        regex: Arc<JavaRegex>,
        groups: Vec<Option<String>>,
    },
    /// A typed input's message.
    Typed(Json),
}

/// The compiled form of a Java pattern, or why it cannot run (see `java_regex`).
pub(crate) fn compile_java_regex(pattern: &str) -> Result<Arc<JavaRegex>, String> {
    crate::java_regex::compile(pattern)
}

/// `json {}`: the parsed map, or `None` on failure. `used_text` says the text body was parsed.
pub(crate) fn json(log: &LogData) -> Option<(Map<String, Json>, bool)> {
    if log.typed.is_some() {
        return None;
    }
    let (source, used_text) = match &log.body {
        Body::Json(json) if !json.is_empty() => (json.as_str(), false),
        Body::Text(text) => (text.as_str(), true),
        _ => return None,
    };
    match serde_json::from_str::<Json>(source) {
        Ok(Json::Object(mut map)) => {
            add_metadata(&mut map, log);
            Some((map, used_text))
        }
        _ => None,
    }
}

/// `yaml {}`: the parsed mapping, or `None` on failure.
pub(crate) fn yaml(log: &LogData) -> Option<Map<String, Json>> {
    if log.typed.is_some() {
        return None;
    }
    let Body::Yaml(source) = &log.body else {
        return None;
    };
    let docs = YamlLoader::load_from_str(source).ok()?;
    match docs.first().map(yaml_to_json) {
        Some(Json::Object(mut map)) => {
            add_metadata(&mut map, log);
            Some(map)
        }
        _ => None,
    }
}

/// `text { regexp }`: the groups of the first match, or `None` when nothing matches.
pub(crate) fn text(log: &LogData, regex: &JavaRegex) -> Option<Vec<Option<String>>> {
    if log.typed.is_some() {
        return None;
    }
    let text = match &log.body {
        Body::Text(text) => text.as_str(),
        _ => "",
    };
    regex.groups(text)
}

fn add_metadata(map: &mut Map<String, Json>, log: &LogData) {
    let entries = [
        ("service", Json::from(log.service.as_str())),
        ("serviceInstance", Json::from(log.service_instance.as_str())),
        ("endpoint", Json::from(log.endpoint.as_str())),
        ("layer", Json::from(log.layer.as_str())),
        ("timestamp", Json::from(log.timestamp_ms)),
    ];
    for (key, value) in entries {
        map.entry(key).or_insert(value);
    }
}

/// A YAML document as JSON (keys stringified; floats that do not parse become strings).
pub fn yaml_to_json(yaml: &Yaml) -> Json {
    match yaml {
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Json::String(text.clone()), Json::Number),
        Yaml::Integer(i) => Json::from(*i),
        Yaml::String(s) => Json::String(s.clone()),
        Yaml::Boolean(b) => Json::Bool(*b),
        Yaml::Array(items) => Json::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(hash) => Json::Object(
            hash.iter()
                .map(|(k, v)| {
                    let key = match yaml_to_json(k) {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_named_groups_run_with_find_semantics() {
        let regex =
            compile_java_regex(r#".+ \"(?<request>.+)\" (?<status>\d{3}) .+"#).expect("compiles");
        let log = LogData {
            body: Body::Text(
                r#"10.0.0.1 - - [01/Jan/2021:00:00:00 +0000] "GET /api HTTP/1.1" 200 1234"#.into(),
            ),
            ..LogData::default()
        };
        let groups = text(&log, &regex).expect("matches");
        assert_eq!(groups[2].as_deref(), Some("200"));
        assert_eq!(groups[1].as_deref(), Some("GET /api HTTP/1.1"));
        assert!(compile_java_regex(r"(?<=a)b").is_err());
    }

    #[test]
    fn json_falls_back_to_the_text_body_and_adds_metadata() {
        let log = LogData {
            service: "svc".into(),
            body: Body::Text(r#"{"service":"own","x":1}"#.into()),
            ..LogData::default()
        };
        let (map, used_text) = json(&log).expect("parses");
        assert!(used_text);
        assert_eq!(map["service"], "own");
        assert_eq!(map["serviceInstance"], "");
        let not_json = LogData {
            body: Body::Text("plain".into()),
            ..LogData::default()
        };
        assert!(json(&not_json).is_none());
    }
}
