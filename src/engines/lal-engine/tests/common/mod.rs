//! Shared helpers of the interpreter's integration tests: loading rule files and the upstream
//! test-data format (a rule name mapped to one input or a list of inputs, each with an `expect`
//! block), building logs from it, and checking a rule's outcome against `expect`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hotrule_lal_engine::{
    Body, ContentType, LalState, LogData, PreparedLalFile, RuleOutcome, TypedInput, yaml_to_json,
};
use hotrule_rule_compiler::{Compiled, DslKind, compile_bundled};
use serde_json::Value as Json;
use yaml_rust2::YamlLoader;

/// 2021-01-01T00:00:00Z.
pub const NOW_MS: i64 = 1_609_459_200_000;

pub fn crate_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The repository's bundled copy of the SkyWalking rules.
pub fn rules_path(relative: &str) -> PathBuf {
    crate_path("../../../config/rules").join(relative)
}

pub fn load_lal(path: &Path) -> PreparedLalFile {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    match compile_bundled(DslKind::Lal, &bytes) {
        Ok(Compiled::Lal(file)) => PreparedLalFile::new(file),
        other => panic!("compile {}: {other:?}", path.display()),
    }
}

pub fn load_lal_text(text: &str) -> PreparedLalFile {
    match compile_bundled(DslKind::Lal, text.as_bytes()) {
        Ok(Compiled::Lal(file)) => PreparedLalFile::new(file),
        other => panic!("compile: {other:?}\n{text}"),
    }
}

pub fn load_yaml(path: &Path) -> Json {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let docs =
        YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.first().map(yaml_to_json).unwrap_or(Json::Null)
}

fn text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}

/// A log in upstream's test-data format (`service`, `instance`, `layer`, `trace-id`,
/// `timestamp`, `body-type`, `body`, `tags`, `source-attributes`, `extra-log`).
pub fn log_from_case(case: &Json) -> LogData {
    let field = |key: &str| case.get(key).map(text).unwrap_or_default();
    let body = field("body");
    let mut log = LogData {
        service: field("service"),
        service_instance: field("instance"),
        endpoint: field("endpoint"),
        layer: field("layer"),
        timestamp_ms: field("timestamp").parse().unwrap_or(0),
        body: match field("body-type").as_str() {
            "json" => Body::Json(body),
            "text" => Body::Text(body),
            "yaml" => Body::Yaml(body),
            _ => Body::None,
        },
        ..LogData::default()
    };
    log.trace_context.trace_id = field("trace-id");
    if let Some(Json::Object(tags)) = case.get("tags") {
        log.tags = tags.iter().map(|(k, v)| (k.clone(), text(v))).collect();
    }
    if let Some(Json::Object(attributes)) = case.get("source-attributes") {
        log.source_attributes = attributes
            .iter()
            .map(|(k, v)| (k.clone(), text(v)))
            .collect();
    }
    if let Some(extra) = case.get("extra-log") {
        let message = serde_json::from_str(&text(&extra["proto-json"])).expect("proto-json");
        log.typed = Some(TypedInput {
            type_name: text(&extra["proto-class"]),
            message,
        });
    }
    log
}

/// The mismatches between an outcome and an upstream `expect` block.
pub fn mismatches(outcome: &RuleOutcome, expect: &Json) -> Vec<String> {
    let mut out = Vec::new();
    let Some(expect) = expect.as_object() else {
        return out;
    };
    let record = outcome.record();
    for (key, wanted) in expect {
        let wanted = text(wanted);
        let actual = match key.as_str() {
            "decision" => format!("{:?}", outcome.decision),
            "save" => outcome.save.to_string(),
            "abort" => outcome.aborted.to_string(),
            "service" => record.service.clone(),
            "instance" => record.instance.clone(),
            "endpoint" => record.endpoint.clone(),
            "layer" => record.layer.clone(),
            "timestamp" => record.timestamp_ms.to_string(),
            "contentType" => match record.content_type {
                ContentType::None => "NONE",
                ContentType::Text => "TEXT",
                ContentType::Json => "JSON",
                ContentType::Yaml => "YAML",
            }
            .to_owned(),
            other => {
                if let Some(tag) = other.strip_prefix("tag.") {
                    record.tag(tag).unwrap_or("").to_owned()
                } else if let Some(field) = other.strip_prefix("outputField.") {
                    record
                        .fields
                        .get(field)
                        .map(text)
                        .unwrap_or_else(|| "null".to_owned())
                } else {
                    format!("<unknown expectation {other}>")
                }
            }
        };
        if actual != wanted {
            out.push(format!("{key}: expected {wanted:?}, got {actual:?}"));
        }
    }
    if let Some(error) = &outcome.error {
        out.push(format!("error: {error}"));
    }
    out
}

/// Runs every case of an upstream data file against the rules of `file` (by rule name), each
/// rule on its own fresh state. Returns `(cases run, failures)`; a data entry naming a rule the
/// file does not have is a failure.
pub fn run_data_file(file: &PreparedLalFile, data: &Json, label: &str) -> (usize, Vec<String>) {
    let names: BTreeMap<&str, usize> = file
        .file()
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| (rule.name.as_str(), i))
        .collect();
    let mut failures = Vec::new();
    let mut ran = 0;
    let Some(entries) = data.as_object() else {
        return (0, vec![format!("{label}: data is not a mapping")]);
    };
    for (rule_name, cases) in entries {
        let Some(&index) = names.get(rule_name.as_str()) else {
            failures.push(format!("{label} | {rule_name}: no such rule"));
            continue;
        };
        let cases: Vec<&Json> = match cases {
            Json::Array(items) => items.iter().collect(),
            single => vec![single],
        };
        let many = cases.len() > 1;
        for (i, case) in cases.into_iter().enumerate() {
            let name = if many {
                format!("{label} | {rule_name} [{i}]")
            } else {
                format!("{label} | {rule_name}")
            };
            let log = log_from_case(case);
            // Upstream's test runs the rule's expression directly, outside the auto-layer
            // listener, so an auto rule is not in auto mode here.
            let outcome = file
                .run_rule(index, &log, NOW_MS, false, &mut LalState::default())
                .expect("rule exists");
            ran += 1;
            let problems = mismatches(&outcome, case.get("expect").unwrap_or(&Json::Null));
            if !problems.is_empty() {
                failures.push(format!("{name}: {}", problems.join("; ")));
            }
        }
    }
    (ran, failures)
}
