//! The LAL half of `POST /runtime/rule/test` (`catalog=lal`): a candidate LAL file run on sample
//! logs, one native `LogData` JSON object per line, as `POST /v3/logs` takes them.
//!
//! Every log goes through the file as dispatch would send it ([`hotrule_lal_engine::analyze`]:
//! intake, routing by layer, `auto` then `GENERAL`), on one sampler state, so `rateLimit`
//! samplers count across the logs. The answer shows, per log and per rule that ran, the
//! extraction, the sink's decision, warnings, the error, and the samples `metrics {}` emitted;
//! those samples then go, one at a time as in SkyWalking, through the `log-mal-rules` files
//! (the posted ones, else the node's bundled ones), whose values are shown with the log.
//!
//! A line that is not a log is reported with its line number; the other lines still run.

use std::sync::Arc;

use hotrule_lal_engine::{Decision, LalState, LogAnalysis, LogData, LogRecord, PreparedLalFile, RuleOutcome, Warning};
use hotrule_mal_engine::{EngineState, PreparedFile, Sample};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Refusal, compile_refusal, value_json};
use crate::control::bundled::MAX_CONTENT_BYTES;
use crate::compiler::Compiled;
use crate::base::ids::{Catalog, RuleKey, RuleName};
use crate::control::outcome::ApplyStatus;

/// The most log lines in one request.
pub const MAX_TEST_LOG_LINES: usize = 10_000;
/// The most `log-mal-rules` files posted with one request.
pub const MAX_TEST_MAL_FILES: usize = 16;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LalTestRequest {
    /// The LAL file's YAML.
    content: String,
    /// The sample logs: one `LogData` JSON object per line; blank lines are skipped.
    logs: String,
    /// `log-mal-rules` files for the emitted samples; none: the node's bundled ones.
    #[serde(default)]
    mal: Vec<MalFileText>,
    /// The "now" of the run (a log with timestamp 0 gets it); the node's clock when absent.
    #[serde(default)]
    now_ms: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MalFileText {
    name: String,
    content: String,
}

/// A `log-mal-rules` file the samples go through.
struct MalTarget {
    name: String,
    source: &'static str,
    file: PreparedFile,
    state: EngineState,
}

/// The bundled `log-mal-rules` files, as (name, content), for a request that posts none.
pub(super) fn bundled_mal(bundled: &crate::control::bundled::Bundled) -> Vec<(String, Arc<Vec<u8>>)> {
    bundled
        .iter()
        .filter(|rule| rule.key.catalog == Catalog::LogMalRules)
        .map(|rule| (rule.key.name.to_string(), rule.content.clone()))
        .collect()
}

/// The whole LAL dry run, on the blocking pool.
pub(super) fn dry_run(key: &RuleKey, body: &[u8], bundled: &[(String, Arc<Vec<u8>>)]) -> Result<Value, Refusal> {
    let request: LalTestRequest = serde_json::from_slice(body).map_err(|e| {
        Refusal::new(
            ApplyStatus::InvalidParameter,
            format!("the body is not a LAL test request ({{\"content\": ..., \"logs\": \"<one LogData JSON per line>\"}}): {e}"),
        )
    })?;
    if request.content.trim().is_empty() {
        return Err(Refusal::new(ApplyStatus::EmptyBody, "content must hold the LAL file's YAML"));
    }
    if request.content.len() > MAX_CONTENT_BYTES {
        return Err(Refusal::new(ApplyStatus::PayloadTooLarge, format!("content is larger than {MAX_CONTENT_BYTES} bytes")));
    }
    let lines: Vec<(usize, &str)> =
        request.logs.lines().enumerate().map(|(i, line)| (i + 1, line.trim())).filter(|(_, line)| !line.is_empty()).collect();
    if lines.is_empty() {
        return Err(Refusal::new(ApplyStatus::InvalidParameter, "logs must hold at least one log line"));
    }
    if lines.len() > MAX_TEST_LOG_LINES {
        return Err(Refusal::new(
            ApplyStatus::PayloadTooLarge,
            format!("{} log lines, more than the limit of {MAX_TEST_LOG_LINES}", lines.len()),
        ));
    }
    if request.mal.len() > MAX_TEST_MAL_FILES {
        return Err(Refusal::new(
            ApplyStatus::PayloadTooLarge,
            format!("{} log-mal-rules files, more than the limit of {MAX_TEST_MAL_FILES}", request.mal.len()),
        ));
    }
    let lal = match crate::control::rules::compile::compile_new_for(key, request.content.as_bytes()) {
        Ok(Compiled::Lal(file)) => PreparedLalFile::new(file),
        Ok(Compiled::Mal(_)) => return Err(Refusal::new(ApplyStatus::InvalidCatalog, format!("{} is not the LAL catalog", key.catalog))),
        Err(e) => return Err(compile_refusal(&e)),
    };
    let mut warnings: Vec<String> = Vec::new();
    let (mut targets, mal_rows) = mal_targets(&request.mal, bundled, &mut warnings)?;
    let now_ms = request.now_ms.unwrap_or_else(|| crate::base::clock::now_ms() as i64);
    let mut state = LalState::default();
    let mut log_rows = Vec::with_capacity(lines.len());
    let mut summary: Vec<(String, [u64; 7])> = Vec::new();
    for (line, text) in lines {
        let log = match serde_json::from_str::<Value>(text) {
            Err(e) => Err(format!("not JSON: {e}")),
            Ok(json) => LogData::from_json(&json).map_err(|e| format!("not a LogData: {e}")),
        };
        let log = match log {
            Ok(log) => log,
            Err(error) => {
                log_rows.push(json!({"line": line, "error": error}));
                continue;
            }
        };
        let analysis = hotrule_lal_engine::analyze(&[&lal], &log, now_ms, &mut state);
        let outcomes: Vec<Value> = analysis
            .outcomes()
            .iter()
            .map(|outcome| {
                count(&mut summary, outcome);
                outcome_json(outcome, &mut targets, now_ms)
            })
            .collect();
        let mut row = json!({
            "line": line,
            "service": log.service,
            "layer": log.layer,
            "ignored": matches!(analysis, LogAnalysis::Ignored),
            "rules": outcomes,
        });
        if matches!(analysis, LogAnalysis::Ignored) {
            row["note"] = json!("no service: the log is ignored (as SkyWalking does)");
        } else if analysis.outcomes().is_empty() {
            let layer = if log.layer.is_empty() { "none (auto, then GENERAL)".to_string() } else { log.layer.clone() };
            row["note"] = json!(format!("no rule of this file runs on layer {layer}"));
        }
        log_rows.push(row);
    }
    let rule_rows: Vec<Value> = lal
        .file()
        .rules
        .iter()
        .map(|rule| {
            let key = rule.key().0;
            let counts = summary.iter().find(|(k, _)| *k == key).map(|(_, c)| *c).unwrap_or_default();
            let mut row = json!({"rule": key});
            for (name, n) in DECISIONS.iter().zip(counts) {
                row[*name] = json!(n);
            }
            row
        })
        .collect();
    Ok(json!({
        "compiled": true,
        "nowMs": now_ms,
        "logs": log_rows,
        "rules": rule_rows,
        "mal": mal_rows,
        "warnings": warnings,
    }))
}

/// The decision names, in the order of [`decision_index`] (the `logs_by_rule` outcomes).
const DECISIONS: [&str; 7] = ["kept", "dropped", "sampled", "aborted", "no_layer", "no_sink", "failed"];

fn decision_index(decision: Decision) -> usize {
    match decision {
        Decision::Kept => 0,
        Decision::Dropped => 1,
        Decision::SampledOut => 2,
        Decision::Aborted => 3,
        Decision::NoLayer => 4,
        Decision::NoSink => 5,
        Decision::Failed => 6,
    }
}

fn count(summary: &mut Vec<(String, [u64; 7])>, outcome: &RuleOutcome) {
    let at = match summary.iter().position(|(k, _)| *k == outcome.rule) {
        Some(at) => at,
        None => {
            summary.push((outcome.rule.clone(), [0; 7]));
            summary.len() - 1
        }
    };
    summary[at].1[decision_index(outcome.decision)] += 1;
}

/// The posted `log-mal-rules` files (each must compile), else the bundled ones (one that does
/// not compile is a warning). Returns the targets and their rows for the answer.
fn mal_targets(
    posted: &[MalFileText],
    bundled: &[(String, Arc<Vec<u8>>)],
    warnings: &mut Vec<String>,
) -> Result<(Vec<MalTarget>, Vec<Value>), Refusal> {
    let mut targets = Vec::new();
    let mut rows = Vec::new();
    let compile = |name: &str, content: &[u8]| -> Result<PreparedFile, crate::compiler::CompileError> {
        let rule_name = RuleName::parse(name).map_err(|e| crate::compiler::CompileError {
            line: 0,
            column: 0,
            message: format!("log-mal-rules name {name:?}: {e}"),
        })?;
        match crate::control::rules::compile::compile_new_for(&RuleKey::new(Catalog::LogMalRules, rule_name), content)? {
            Compiled::Mal(file) => Ok(PreparedFile::new(file)),
            Compiled::Lal(_) => Err(crate::compiler::CompileError { line: 0, column: 0, message: "not a MAL file".into() }),
        }
    };
    if posted.is_empty() {
        for (name, content) in bundled {
            match compile(name, content) {
                Ok(file) => {
                    rows.push(json!({"name": name, "source": "bundled"}));
                    targets.push(MalTarget { name: name.clone(), source: "bundled", file, state: EngineState::default() });
                }
                Err(e) => warnings.push(format!("bundled log-mal-rules/{name} does not compile, skipped: {e}")),
            }
        }
        return Ok((targets, rows));
    }
    for posted in posted {
        let file = compile(&posted.name, posted.content.as_bytes()).map_err(|e| {
            Refusal::new(ApplyStatus::CompileFailed, format!("log-mal-rules/{}: {e}", posted.name))
                .with("compiled", false)
                .with("malFile", posted.name.clone())
                .with("line", e.line)
                .with("column", e.column)
        })?;
        rows.push(json!({"name": posted.name, "source": "request"}));
        targets.push(MalTarget { name: posted.name.clone(), source: "request", file, state: EngineState::default() });
    }
    Ok((targets, rows))
}

fn outcome_json(outcome: &RuleOutcome, targets: &mut [MalTarget], now_ms: i64) -> Value {
    let mut row = json!({
        "rule": outcome.rule,
        "decision": DECISIONS[decision_index(outcome.decision)],
        "save": outcome.save,
        "aborted": outcome.aborted,
        "persisted": outcome.persisted.len(),
        "record": record_json(outcome.record()),
        "samples": outcome.samples.iter().map(sample_json).collect::<Vec<_>>(),
        "warnings": outcome.warnings.iter().map(warning_text).collect::<Vec<_>>(),
    });
    if let Some(error) = &outcome.error {
        row["error"] = json!(error.error.to_string());
    }
    let (metrics, metric_errors) = metrics_of(&outcome.samples, targets, now_ms);
    row["metrics"] = Value::Array(metrics);
    if !metric_errors.is_empty() {
        row["metricErrors"] = Value::Array(metric_errors);
    }
    row
}

/// Each sample alone through every target file (SkyWalking calls the log-mal-rules converters
/// with a family of that one sample); counting across logs is storage's (`downsampling(SUM)`).
fn metrics_of(samples: &[Sample], targets: &mut [MalTarget], now_ms: i64) -> (Vec<Value>, Vec<Value>) {
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for (index, sample) in samples.iter().enumerate() {
        for target in targets.iter_mut() {
            let evaluation = target.file.evaluate(std::slice::from_ref(sample), now_ms, &mut target.state);
            for value in &evaluation.values {
                let mut row = value_json(value, index);
                if let Some(row) = row.as_object_mut() {
                    row.remove("batch");
                    row.insert("sample".into(), json!(index));
                    row.insert("file".into(), json!(format!("log-mal-rules/{}", target.name)));
                    row.insert("source".into(), json!(target.source));
                    row.insert("metric".into(), json!(value.metric));
                }
                values.push(row);
            }
            for error in &evaluation.errors {
                errors.push(json!({
                    "sample": index,
                    "file": format!("log-mal-rules/{}", target.name),
                    "rule": error.rule,
                    "message": error.error.to_string(),
                }));
            }
        }
    }
    (values, errors)
}

fn record_json(record: &LogRecord) -> Value {
    json!({
        "service": record.service,
        "instance": record.instance,
        "endpoint": record.endpoint,
        "layer": record.layer,
        "timestampMs": record.timestamp_ms,
        "traceId": record.trace_id,
        "segmentId": record.segment_id,
        "spanId": record.span_id,
        "contentType": format!("{:?}", record.content_type).to_ascii_uppercase(),
        "tags": record.tags.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "outputType": record.output_type,
        "fields": record.fields,
    })
}

fn sample_json(sample: &Sample) -> Value {
    json!({
        "name": sample.name,
        "labels": sample.labels.as_ref(),
        "value": sample.value,
        "timestampMs": sample.timestamp_ms,
    })
}

fn warning_text(warning: &Warning) -> String {
    match warning {
        Warning::MetricWithoutTimestamp { rule, metric } => format!(
            "rule '{rule}': metrics {{ name \"{metric}\" }} has no timestamp; nothing is emitted (SkyWalking would emit it at 1970)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX_LAL: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rules/lal/nginx.yaml"));
    const NGINX_MAL: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rules/log-mal-rules/nginx.yaml"));

    fn key() -> RuleKey {
        RuleKey::new(Catalog::Lal, RuleName::parse("nginx").expect("name"))
    }

    fn body(logs: &str, mal: &[(&str, &str)]) -> Vec<u8> {
        let mal: Vec<Value> = mal.iter().map(|(name, content)| json!({"name": name, "content": content})).collect();
        serde_json::to_vec(&json!({"content": NGINX_LAL, "logs": logs, "mal": mal, "nowMs": 1_700_000_000_000_i64})).expect("json")
    }

    const ACCESS: &str = r#"{"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,"tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ACCESS_LOG"}]},"body":{"text":{"text":"10.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"GET /index.html HTTP/1.1\" 404 153 \"-\" \"curl/8\""}}}"#;
    const ERROR: &str = r#"{"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,"tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ERROR_LOG"}]},"body":{"text":{"text":"2023/11/14 22:13:20 [error] 7#7: *1 open() failed"}}}"#;

    #[test]
    fn nginx_access_and_error_logs_with_their_metrics() {
        let logs = format!("{ACCESS}\n\n{ERROR}\nnot json\n{{\"service\": 3}}\n");
        let report = dry_run(&key(), &body(&logs, &[("nginx", NGINX_MAL)]), &[]).expect("report");
        let rows = report["logs"].as_array().expect("logs");
        assert_eq!(rows.len(), 4, "{report}");
        let access = &rows[0]["rules"];
        assert_eq!(rows[0]["line"], 1);
        assert_eq!(access.as_array().map(Vec::len), Some(2), "both NGINX rules run: {access}");
        assert_eq!(access[0]["rule"], "NGINX:nginx-access-log");
        assert_eq!(access[0]["decision"], "kept");
        assert_eq!(access[0]["record"]["tags"], json!([["LOG_KIND", "NGINX_ACCESS_LOG"], ["http.status_code", "404"]]));
        assert_eq!(access[1]["decision"], "no_sink", "the error rule's filter does not match");

        let error = &rows[1];
        assert_eq!(error["line"], 3, "blank lines keep the numbering");
        let rule = &error["rules"][1];
        assert_eq!(rule["decision"], "kept");
        assert_eq!(rule["samples"][0]["name"], "nginx_error_log_count");
        assert_eq!(rule["samples"][0]["labels"]["level"], "error");
        let metrics = rule["metrics"].as_array().expect("metrics");
        let names: Vec<&str> = metrics.iter().filter_map(|m| m["metric"].as_str()).collect();
        assert_eq!(names, vec!["meter_nginx_service_error_log_count", "meter_nginx_instance_error_log_count"], "{rule}");
        assert_eq!(metrics[0]["entity"]["service"], "nginx-1");
        assert_eq!(metrics[0]["file"], "log-mal-rules/nginx");

        assert_eq!(rows[2]["line"], 4);
        assert!(rows[2]["error"].as_str().is_some_and(|e| e.starts_with("not JSON")), "{}", rows[2]);
        assert_eq!(rows[3]["line"], 5);
        assert!(rows[3]["error"].as_str().is_some_and(|e| e.contains("service")), "{}", rows[3]);
        assert_eq!(report["rules"][0], json!({"rule": "NGINX:nginx-access-log", "kept": 1, "dropped": 0, "sampled": 0, "aborted": 0, "no_layer": 0, "no_sink": 1, "failed": 0}));
    }

    #[test]
    fn bundled_mal_files_apply_when_none_is_posted() {
        let bundled = vec![("nginx".to_string(), Arc::new(NGINX_MAL.as_bytes().to_vec()))];
        let report = dry_run(&key(), &body(ERROR, &[]), &bundled).expect("report");
        assert_eq!(report["mal"], json!([{"name": "nginx", "source": "bundled"}]));
        assert_eq!(report["logs"][0]["rules"][1]["metrics"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_log_no_rule_takes_is_explained() {
        let other = r#"{"service":"svc","layer":"MYSQL","body":{"text":{"text":"x"}}}"#;
        let none = r#"{"layer":"NGINX","body":{"text":{"text":"x"}}}"#;
        let report = dry_run(&key(), &body(&format!("{other}\n{none}"), &[]), &[]).expect("report");
        assert!(report["logs"][0]["note"].as_str().is_some_and(|n| n.contains("layer MYSQL")), "{report}");
        assert_eq!(report["logs"][1]["ignored"], true);
    }

    #[test]
    fn refusals() {
        let status = |body: Vec<u8>| dry_run(&key(), &body, &[]).expect_err("refused").outcome.status;
        assert_eq!(status(b"{".to_vec()), ApplyStatus::InvalidParameter);
        assert_eq!(status(body("\n  \n", &[])), ApplyStatus::InvalidParameter);
        assert_eq!(status(body(ACCESS, &[("nginx", "metricsRules:\n  - name: x\n    exp: a.sum(\n")])), ApplyStatus::CompileFailed);
        let bad_lal = serde_json::to_vec(&json!({"content": "rules:\n  - name: x\n    dsl: 'filter {'\n", "logs": ACCESS})).expect("json");
        assert_eq!(status(bad_lal), ApplyStatus::CompileFailed);
    }
}
