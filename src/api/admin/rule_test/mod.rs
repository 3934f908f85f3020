//! `POST /runtime/rule/test`: a dry run of a candidate MAL file on operator-chosen samples, or
//! (`catalog=lal`) of a LAL file on sample logs ([`lal`]).
//!
//! The body is JSON: the file's YAML and one or more batches of Prometheus text exposition, each
//! with its timestamp (and optional labels added to every sample, as a receiver would add them).
//! The file is compiled, then every batch is evaluated in order on one fresh engine state, so
//! counter functions (`rate`, `increase`, `irate`) see the earlier batches as history. The answer
//! lists, per rule, the values it produced and the errors it hit.
//!
//! Nothing is stored, paused or changed, and the run uses none of the node's state, so any node
//! answers it itself (no forwarding to the main). The work (JSON and exposition parsing,
//! compiling, evaluating) runs on the blocking pool, at most [`MAX_CONCURRENT_TESTS`] at a
//! time, and the input is bounded: [`MAX_TEST_BODY_BYTES`], [`MAX_TEST_BATCHES`],
//! [`MAX_SAMPLES_PER_BATCH`], and the rule-file limit of the write route.
// A refusal is built once per request and answered at once: its size does not matter.
#![allow(clippy::result_large_err)]

mod lal;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use hotrule_mal_engine::exposition::{self, ExpositionError};
use hotrule_mal_engine::{EngineState, Entity, MetricValue, PreparedFile, Value as EngineValue, minute_bucket};
use serde::Deserialize;
use serde_json::{Value, json};

use super::params::{Params, RawQuery};
use super::{AdminState, outcome_body, status_code};
use crate::control::bundled::MAX_CONTENT_BYTES;
use crate::compiler::{CompileError, Compiled};
use crate::base::ids::{Catalog, RuleKey};
use crate::control::outcome::{ApplyStatus, Outcome};

/// The largest request body.
pub const MAX_TEST_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The most batches in one request.
pub const MAX_TEST_BATCHES: usize = 32;
/// The most samples in one batch's exposition.
pub const MAX_SAMPLES_PER_BATCH: usize = 100_000;
/// Dry runs evaluated at the same time; more wait their turn.
pub const MAX_CONCURRENT_TESTS: usize = 2;

static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CONCURRENT_TESTS);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TestRequest {
    content: String,
    batches: Vec<TestBatch>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TestBatch {
    timestamp_ms: i64,
    exposition: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Why a dry run has no report: an outcome for the answer, with fields that locate the problem.
#[derive(Debug)]
struct Refusal {
    outcome: Outcome,
    fields: Vec<(&'static str, Value)>,
}

impl Refusal {
    fn new(status: ApplyStatus, message: impl Into<String>) -> Refusal {
        Refusal { outcome: Outcome::new(status, message), fields: Vec::new() }
    }

    fn with(mut self, field: &'static str, value: impl Into<Value>) -> Refusal {
        self.fields.push((field, value.into()));
        self
    }
}

impl From<Outcome> for Refusal {
    fn from(outcome: Outcome) -> Refusal {
        Refusal { outcome, fields: Vec::new() }
    }
}

pub async fn test_rule(State(state): State<Arc<AdminState>>, raw: RawQuery, body: Body) -> Response {
    let params = match Params::from(raw) {
        Ok(p) => p,
        Err(outcome) => return refusal_response(Refusal::from(outcome), "", ""),
    };
    let (catalog_echo, name_echo) = params.echo();
    let answer = async {
        let key = params.key(None)?;
        let bytes = read_body(body).await?;
        let _permit = RUNNING
            .acquire()
            .await
            .map_err(|_| Refusal::new(ApplyStatus::NotReady, "the dry-run pool is closed"))?;
        // A LAL file runs on sample logs, its samples through the log-mal-rules files.
        let bundled_mal = (key.catalog == Catalog::Lal).then(|| lal::bundled_mal(&state.bundled));
        tokio::task::spawn_blocking(move || match bundled_mal {
            Some(bundled_mal) => lal::dry_run(&key, &bytes, &bundled_mal),
            None => dry_run(&key, &bytes),
        })
        .await
        .map_err(|e| Refusal::new(ApplyStatus::ApplyFailed, format!("the dry run did not finish: {e}")))?
    }
    .await;
    match answer {
        Ok(mut report) => {
            let outcome = Outcome::new(ApplyStatus::NoChange, "dry run: nothing was stored, paused or changed");
            let mut body = outcome_body(&outcome, &catalog_echo, &name_echo);
            if let (Some(body), Some(report)) = (body.as_object_mut(), report.as_object_mut()) {
                body.append(report);
            }
            (status_code(outcome.status), axum::Json(body)).into_response()
        }
        Err(refusal) => refusal_response(refusal, &catalog_echo, &name_echo),
    }
}

fn refusal_response(refusal: Refusal, catalog: &str, name: &str) -> Response {
    let mut body = outcome_body(&refusal.outcome, catalog, name);
    for (field, value) in refusal.fields {
        body[field] = value;
    }
    (status_code(refusal.outcome.status), axum::Json(body)).into_response()
}

async fn read_body(body: Body) -> Result<Vec<u8>, Refusal> {
    match axum::body::to_bytes(body, MAX_TEST_BODY_BYTES).await {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(e) => {
            let too_large = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit");
            Err(if too_large {
                Refusal::new(ApplyStatus::PayloadTooLarge, format!("the body is larger than {MAX_TEST_BODY_BYTES} bytes"))
            } else {
                Refusal::new(ApplyStatus::InvalidParameter, format!("reading the body: {e}"))
            })
        }
    }
}

/// The whole dry run, on the blocking pool: decode, compile, parse every batch, evaluate.
fn dry_run(key: &RuleKey, body: &[u8]) -> Result<Value, Refusal> {
    let request: TestRequest = serde_json::from_slice(body).map_err(|e| {
        Refusal::new(
            ApplyStatus::InvalidParameter,
            format!("the body is not a test request ({{\"content\": ..., \"batches\": [...]}}): {e}"),
        )
    })?;
    if request.content.trim().is_empty() {
        return Err(Refusal::new(ApplyStatus::EmptyBody, "content must hold the rule file's YAML"));
    }
    if request.content.len() > MAX_CONTENT_BYTES {
        return Err(Refusal::new(
            ApplyStatus::PayloadTooLarge,
            format!("content is larger than {MAX_CONTENT_BYTES} bytes"),
        ));
    }
    if request.batches.is_empty() {
        return Err(Refusal::new(ApplyStatus::InvalidParameter, "batches must hold at least one sample batch"));
    }
    if request.batches.len() > MAX_TEST_BATCHES {
        return Err(Refusal::new(
            ApplyStatus::PayloadTooLarge,
            format!("{} batches, more than the limit of {MAX_TEST_BATCHES}", request.batches.len()),
        ));
    }
    let file = match crate::control::rules::compile::compile_new_for(key, request.content.as_bytes()) {
        Ok(Compiled::Mal(file)) => crate::data::evaluation::prepare(key.catalog, file),
        Ok(Compiled::Lal(_)) => {
            return Err(Refusal::new(ApplyStatus::InvalidCatalog, format!("{} is not a MAL catalog", key.catalog)));
        }
        Err(e) => return Err(compile_refusal(&e)),
    };
    for (index, pair) in request.batches.windows(2).enumerate() {
        if pair[1].timestamp_ms < pair[0].timestamp_ms {
            return Err(Refusal::new(
                ApplyStatus::InvalidParameter,
                format!("batch {}: timestampMs {} is older than the previous batch's", index + 1, pair[1].timestamp_ms),
            )
            .with("batch", index + 1));
        }
    }
    evaluate(&file, &request.batches)
}

fn compile_refusal(error: &CompileError) -> Refusal {
    Refusal::new(ApplyStatus::CompileFailed, error.to_string())
        .with("compiled", false)
        .with("line", error.line)
        .with("column", error.column)
}

fn parse_batch(batch: &TestBatch, index: usize) -> Result<Vec<hotrule_mal_engine::Sample>, Refusal> {
    let parsed = exposition::parse(&batch.exposition, batch.timestamp_ms, MAX_SAMPLES_PER_BATCH).map_err(|e| {
        let status = match e {
            ExpositionError::TooManySamples { .. } => ApplyStatus::PayloadTooLarge,
            _ => ApplyStatus::InvalidParameter,
        };
        Refusal::new(status, format!("batch {index}: exposition {e}")).with("batch", index).with("line", e.line())
    })?;
    let mut samples = parsed.samples;
    if !batch.labels.is_empty() {
        for sample in &mut samples {
            let labels = Arc::make_mut(&mut sample.labels);
            for (name, value) in &batch.labels {
                labels.insert(name.clone(), value.clone());
            }
        }
    }
    Ok(samples)
}

/// Parses and evaluates the batches in order on one state (one batch's samples in memory at a
/// time); the report lists every rule in file order. `time()` reads the batch's timestamp: the
/// run replays the batches as if each had just arrived.
fn evaluate(file: &PreparedFile, requested: &[TestBatch]) -> Result<Value, Refusal> {
    let mut state = EngineState::default();
    let rules = &file.file().rules;
    let mut values: Vec<Vec<Value>> = vec![Vec::new(); rules.len()];
    let mut errors: Vec<Vec<Value>> = vec![Vec::new(); rules.len()];
    let mut warnings: Vec<String> = Vec::new();
    let mut batch_rows = Vec::new();
    for (index, batch) in requested.iter().enumerate() {
        let samples = parse_batch(batch, index)?;
        let evaluation = file.evaluate(&samples, batch.timestamp_ms, &mut state);
        batch_rows.push(json!({
            "timestampMs": batch.timestamp_ms,
            "bucket": minute_bucket(batch.timestamp_ms),
            "samples": samples.len(),
        }));
        for value in &evaluation.values {
            if let Some(slot) = rule_index(rules, &value.rule, &value.metric) {
                values[slot].push(value_json(value, index));
            }
        }
        for error in &evaluation.errors {
            if let Some(slot) = rule_index(rules, &error.rule, &error.metric) {
                errors[slot].push(json!({"batch": index, "message": error.error.to_string()}));
            }
        }
        for warning in evaluation.warnings {
            let text = warning.to_string();
            if !warnings.contains(&text) {
                warnings.push(text);
            }
        }
    }
    let rule_rows: Vec<Value> = rules
        .iter()
        .zip(values.into_iter().zip(errors))
        .map(|(rule, (values, errors))| {
            let mut row = json!({"rule": rule.name, "metric": rule.metric_name, "values": values});
            if !errors.is_empty() {
                row["errors"] = Value::Array(errors);
            }
            row
        })
        .collect();
    Ok(json!({"compiled": true, "batches": batch_rows, "rules": rule_rows, "warnings": warnings}))
}

/// The rule a value or error came from: by name and metric (a file may repeat a rule name).
fn rule_index(rules: &[crate::compiler::MalRule], rule: &str, metric: &str) -> Option<usize> {
    rules
        .iter()
        .position(|r| r.name == rule && r.metric_name == metric)
        .or_else(|| rules.iter().position(|r| r.name == rule))
}

fn value_json(value: &MetricValue, batch: usize) -> Value {
    let (kind, rendered) = match &value.value {
        EngineValue::Single(v) => ("single", json!(v)),
        EngineValue::Labeled(pairs) => {
            let map: serde_json::Map<String, Value> = pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            ("labeled", Value::Object(map))
        }
        EngineValue::Histogram { labels, buckets, percentiles } => (
            "histogram",
            json!({
                "labels": labels,
                "buckets": buckets.iter().map(|(le, count)| json!([le, count])).collect::<Vec<_>>(),
                "percentiles": percentiles,
            }),
        ),
    };
    json!({
        "batch": batch,
        "entity": entity_json(&value.entity),
        "bucket": value.time_bucket,
        "type": kind,
        "value": rendered,
        "downsampling": value.downsampling.camel(),
    })
}

/// The entity's scope and every field it uses; empty fields are left out.
fn entity_json(entity: &Entity) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("scope".into(), json!(entity.scope.as_str()));
    let fields = [
        ("service", &entity.service_name),
        ("instance", &entity.instance_name),
        ("endpoint", &entity.endpoint_name),
        ("process", &entity.process_name),
        ("sourceService", &entity.source_service_name),
        ("destService", &entity.dest_service_name),
        ("sourceInstance", &entity.source_instance_name),
        ("destInstance", &entity.dest_instance_name),
        ("sourceProcessId", &entity.source_process_id),
        ("destProcessId", &entity.dest_process_id),
        ("layer", &entity.layer),
    ];
    for (name, value) in fields {
        if !value.is_empty() {
            out.insert(name.into(), json!(value));
        }
    }
    if let Some(point) = entity.detect_point {
        out.insert("detectPoint".into(), json!(format!("{point:?}").to_ascii_uppercase()));
    }
    if entity.component_id != 0 {
        out.insert("componentId".into(), json!(entity.component_id));
    }
    if let Some(properties) = &entity.instance_properties {
        out.insert("instanceProperties".into(), json!(properties));
    }
    for (index, attr) in entity.attrs.iter().enumerate() {
        if let Some(attr) = attr {
            out.insert(format!("attr{index}"), json!(attr));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::RuleName;

    const FILE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: t
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc']).rate('PT1M')
";

    fn key() -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse("t").expect("name"))
    }

    fn body(content: &str, batches: &[(i64, &str)]) -> Vec<u8> {
        let batches: Vec<Value> =
            batches.iter().map(|(ts, text)| json!({"timestampMs": ts, "exposition": text})).collect();
        serde_json::to_vec(&json!({"content": content, "batches": batches})).expect("json")
    }

    #[test]
    fn rate_over_two_batches() {
        let t0 = 1_700_000_040_000;
        let report = dry_run(
            &key(),
            &body(FILE, &[(t0, "requests_total{svc=\"a\"} 100\n"), (t0 + 60_000, "requests_total{svc=\"a\"} 160\n")]),
        )
        .expect("report");
        let values = report["rules"][0]["values"].as_array().expect("values");
        assert_eq!(values.len(), 2, "{report}");
        assert_eq!(values[0]["value"], 0, "no history yet");
        assert_eq!(values[1]["value"], 1, "60 over 60 s");
        assert_eq!(values[1]["entity"]["service"], "a");
        assert_eq!(values[1]["bucket"], 202_311_142_215_i64);
    }

    #[test]
    fn refusals() {
        let status = |body: Vec<u8>| dry_run(&key(), &body).expect_err("refused").outcome.status;
        assert_eq!(status(b"{".to_vec()), ApplyStatus::InvalidParameter);
        assert_eq!(status(body("  ", &[(0, "a 1")])), ApplyStatus::EmptyBody);
        assert_eq!(status(body(FILE, &[])), ApplyStatus::InvalidParameter);
        assert_eq!(status(body(FILE, &[(60_000, "a 1"), (0, "a 1")])), ApplyStatus::InvalidParameter);
        let many: Vec<(i64, &str)> = (0..=MAX_TEST_BATCHES as i64).map(|i| (i, "a 1")).collect();
        assert_eq!(status(body(FILE, &many)), ApplyStatus::PayloadTooLarge);
        let refusal = dry_run(&key(), &body(FILE, &[(0, "a 1"), (1, "ok 1\nb{x=\"1} 2")])).expect_err("bad text");
        assert_eq!(refusal.outcome.status, ApplyStatus::InvalidParameter);
        let fields: BTreeMap<&str, Value> = refusal.fields.into_iter().collect();
        assert_eq!((fields["batch"].clone(), fields["line"].clone()), (json!(1), json!(2)));
        let refusal = dry_run(&key(), &body("metricsRules:\n  - name: x\n    exp: a.sum(\n", &[(0, "a 1")]))
            .expect_err("compile");
        assert_eq!(refusal.outcome.status, ApplyStatus::CompileFailed);
        let fields: BTreeMap<&str, Value> = refusal.fields.into_iter().collect();
        assert_eq!(fields["line"], 3, "{:?}", refusal.outcome.message);
    }
}
