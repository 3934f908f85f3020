//! `hotrule rule test`: runs a candidate MAL file on sample files through a node's
//! `POST /runtime/rule/test` and prints what it would produce; with `--against-current`, also
//! runs the file stored under that name on the same samples and prints the difference.
//!
//! With `--catalog lal` and `--logs`, a LAL file runs on sample logs instead ([`lal`]).
//!
//! Batch `i` of `n` (one per `--samples` file, in order) is stamped `now − (n−1−i) × interval`,
//! so the last batch is "now" and counter functions see the earlier ones as history.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

pub mod lal;

/// What `hotrule rule test` was asked.
#[derive(Debug, Clone)]
pub struct TestArgs {
    pub catalog: String,
    /// The stored file to compare with; defaults to the file's name without its extension.
    pub name: Option<String>,
    pub file: PathBuf,
    pub samples: Vec<PathBuf>,
    pub interval: Duration,
    /// Labels added to every sample of every batch (as a receiver adds job or host labels).
    pub labels: Vec<(String, String)>,
    pub json: bool,
    pub against_current: bool,
    /// The last batch's timestamp; the wall clock when absent.
    pub now_ms: Option<i64>,
}

/// How the run went, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestVerdict {
    /// Compiled, and no rule failed on any batch.
    Clean,
    /// Compiled, but this many rule evaluations failed (listed on stderr).
    RuleErrors(usize),
    /// A LAL run: lines that were not logs, and rule errors (LAL and log-mal-rules), all
    /// listed on stderr; the other lines ran.
    LogProblems { bad_lines: usize, rule_errors: usize },
}

/// The rule name `--name` defaults to: the file name without its extension.
pub fn default_name(file: &Path) -> Option<String> {
    file.file_stem().and_then(|s| s.to_str()).map(str::to_string).filter(|s| !s.is_empty())
}

/// Parses `name=value` for `--label`.
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_string(), value.to_string())),
        _ => Err(format!("--label {text:?} is not name=value")),
    }
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::ReadFile { path: path.display().to_string(), source })
}

/// The request body for `content` on the sample files' texts.
pub fn request_body(content: &str, expositions: &[String], args: &TestArgs, now_ms: i64) -> Value {
    let n = expositions.len() as i64;
    let step = args.interval.as_millis() as i64;
    let labels: serde_json::Map<String, Value> =
        args.labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    let batches: Vec<Value> = expositions
        .iter()
        .enumerate()
        .map(|(i, text)| {
            json!({
                "timestampMs": now_ms - (n - 1 - i as i64) * step,
                "exposition": text,
                "labels": labels,
            })
        })
        .collect();
    json!({"content": content, "batches": batches})
}

async fn run_test(client: &AdminClient, catalog: &str, name: &str, body: &Value) -> Result<Value, CliError> {
    let path = with_query("/runtime/rule/test", &[("catalog", catalog), ("name", name)]);
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let reply = check(client.post(&path, bytes).await?)?;
    Ok(reply.json().unwrap_or(Value::Null))
}

pub async fn test(client: &AdminClient, args: &TestArgs) -> Result<TestVerdict, CliError> {
    let name = args.name.clone().or_else(|| default_name(&args.file)).unwrap_or_else(|| "candidate".to_string());
    let content = read(&args.file)?;
    let expositions = args.samples.iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()?;
    let now_ms = args.now_ms.unwrap_or_else(|| crate::base::clock::now_ms() as i64);
    let candidate = run_test(client, &args.catalog, &name, &request_body(&content, &expositions, args, now_ms)).await?;
    let current = if args.against_current {
        let path = with_query("/runtime/rule", &[("catalog", &args.catalog), ("name", &name)]);
        let stored = check(client.get(&path).await?)?.text();
        Some(run_test(client, &args.catalog, &name, &request_body(&stored, &expositions, args, now_ms)).await?)
    } else {
        None
    };
    let failures = report_errors(&candidate, "");
    if let Some(current) = &current {
        report_errors(current, "current file: ");
    }
    match (&current, args.json) {
        (None, true) => println!("{candidate}"),
        (None, false) => print!("{}", render_values(&candidate)),
        (Some(current), true) => {
            let diff = diff(current, &candidate);
            println!("{}", json!({"candidate": candidate, "current": current, "diff": diff_json(&diff)}));
        }
        (Some(current), false) => print!("{}", render_diff(&diff(current, &candidate))),
    }
    for warning in candidate["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", warning.as_str().unwrap_or_default());
    }
    Ok(if failures == 0 { TestVerdict::Clean } else { TestVerdict::RuleErrors(failures) })
}

/// Prints each rule error of a report on stderr; returns how many there were.
fn report_errors(report: &Value, prefix: &str) -> usize {
    let mut count = 0;
    for rule in report["rules"].as_array().into_iter().flatten() {
        for error in rule["errors"].as_array().into_iter().flatten() {
            count += 1;
            eprintln!(
                "{prefix}rule {} (metric {}), batch {}: {}",
                rule["rule"].as_str().unwrap_or("?"),
                rule["metric"].as_str().unwrap_or("?"),
                error["batch"],
                error["message"].as_str().unwrap_or("?")
            );
        }
    }
    count
}

/// One printed value: (metric, entity, bucket, key) → value; `key` is the label key of a labeled
/// value or the bound of a histogram bucket, empty for a single value.
pub type RowKey = (String, String, i64, String);

/// Every value of a report as rows, in report order.
pub fn rows(report: &Value) -> Vec<(RowKey, String)> {
    let mut out = Vec::new();
    for rule in report["rules"].as_array().into_iter().flatten() {
        let metric = rule["metric"].as_str().unwrap_or("").to_string();
        for value in rule["values"].as_array().into_iter().flatten() {
            let entity = entity_text(&value["entity"]);
            let bucket = value["bucket"].as_i64().unwrap_or(0);
            let key = |k: String| (metric.clone(), entity.clone(), bucket, k);
            match value["type"].as_str() {
                Some("labeled") => {
                    for (label, v) in value["value"].as_object().into_iter().flatten() {
                        out.push((key(label.clone()), v.to_string()));
                    }
                }
                Some("histogram") => {
                    let labels = value["value"]["labels"].as_str().unwrap_or("");
                    for bucket in value["value"]["buckets"].as_array().into_iter().flatten() {
                        let bound = format!("{labels}{}le={}", if labels.is_empty() { "" } else { "," }, bucket[0]);
                        out.push((key(bound), bucket[1].to_string()));
                    }
                }
                _ => out.push((key(String::new()), value["value"].to_string())),
            }
        }
    }
    out
}

/// `SERVICE layer=OS_LINUX service=host-1`: the scope, then every other field.
pub fn entity_text(entity: &Value) -> String {
    let mut text = entity["scope"].as_str().unwrap_or("?").to_string();
    for (field, value) in entity.as_object().into_iter().flatten() {
        if field != "scope" {
            let value = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
            text.push_str(&format!(" {field}={value}"));
        }
    }
    text
}

pub fn render_values(report: &Value) -> String {
    let rows: Vec<Vec<String>> = rows(report)
        .into_iter()
        .map(|((metric, entity, bucket, key), value)| vec![metric, entity, bucket.to_string(), key, value])
        .collect();
    let mut out = table(&["METRIC", "ENTITY", "BUCKET", "KEY", "VALUE"], &rows);
    let silent: Vec<&str> = report["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["values"].as_array().is_none_or(Vec::is_empty) && r["errors"].is_null())
        .filter_map(|r| r["rule"].as_str())
        .collect();
    if !silent.is_empty() {
        out.push_str(&format!("no value from: {}\n", silent.join(", ")));
    }
    out
}

/// The difference between the current file's values and the candidate's.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<(RowKey, String)>,
    pub removed: Vec<(RowKey, String)>,
    /// (key, current value, candidate value).
    pub changed: Vec<(RowKey, String, String)>,
    pub unchanged: usize,
}

/// Rows are compared by (metric, entity, bucket, key); a key repeated within one report keeps
/// its last value.
pub fn diff(current: &Value, candidate: &Value) -> Diff {
    let before: BTreeMap<RowKey, String> = rows(current).into_iter().collect();
    let after: BTreeMap<RowKey, String> = rows(candidate).into_iter().collect();
    let mut out = Diff::default();
    for (key, value) in &after {
        match before.get(key) {
            None => out.added.push((key.clone(), value.clone())),
            Some(old) if old != value => out.changed.push((key.clone(), old.clone(), value.clone())),
            Some(_) => out.unchanged += 1,
        }
    }
    for (key, value) in &before {
        if !after.contains_key(key) {
            out.removed.push((key.clone(), value.clone()));
        }
    }
    out
}

fn row_json(key: &RowKey) -> Value {
    json!({"metric": key.0, "entity": key.1, "bucket": key.2, "key": key.3})
}

pub fn diff_json(diff: &Diff) -> Value {
    let with = |key: &RowKey, field: &str, value: &str| {
        let mut row = row_json(key);
        row[field] = Value::String(value.to_string());
        row
    };
    json!({
        "added": diff.added.iter().map(|(k, v)| with(k, "candidate", v)).collect::<Vec<_>>(),
        "removed": diff.removed.iter().map(|(k, v)| with(k, "current", v)).collect::<Vec<_>>(),
        "changed": diff.changed.iter().map(|(k, old, new)| {
            let mut row = with(k, "current", old);
            row["candidate"] = Value::String(new.clone());
            row
        }).collect::<Vec<_>>(),
        "unchanged": diff.unchanged,
    })
}

pub fn render_diff(diff: &Diff) -> String {
    let cells = |change: &str, key: &RowKey, old: &str, new: &str| {
        vec![change.to_string(), key.0.clone(), key.1.clone(), key.2.to_string(), key.3.clone(), old.into(), new.into()]
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    rows.extend(diff.added.iter().map(|(k, v)| cells("added", k, "", v)));
    rows.extend(diff.removed.iter().map(|(k, v)| cells("removed", k, v, "")));
    rows.extend(diff.changed.iter().map(|(k, old, new)| cells("changed", k, old, new)));
    let mut out = table(&["CHANGE", "METRIC", "ENTITY", "BUCKET", "KEY", "CURRENT", "CANDIDATE"], &rows);
    out.push_str(&format!(
        "{} added, {} removed, {} changed, {} unchanged\n",
        diff.added.len(),
        diff.removed.len(),
        diff.changed.len(),
        diff.unchanged
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(values: Value) -> Value {
        json!({"rules": [{"rule": "r", "metric": "m", "values": values}]})
    }

    #[test]
    fn timestamps_step_back_from_now() {
        let args = TestArgs {
            catalog: "otel-rules".into(),
            name: None,
            file: "vm.yaml".into(),
            samples: Vec::new(),
            interval: Duration::from_secs(60),
            labels: vec![("job_name".into(), "vm".into())],
            json: false,
            against_current: false,
            now_ms: None,
        };
        let body = request_body("x", &["a 1".into(), "a 2".into(), "a 3".into()], &args, 1_000_000);
        let stamps: Vec<i64> =
            body["batches"].as_array().expect("batches").iter().map(|b| b["timestampMs"].as_i64().expect("ts")).collect();
        assert_eq!(stamps, vec![880_000, 940_000, 1_000_000]);
        assert_eq!(body["batches"][0]["labels"]["job_name"], "vm");
        assert_eq!(default_name(Path::new("/x/vm.yaml")).as_deref(), Some("vm"));
        assert_eq!(parse_label("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_label("=b").is_err());
    }

    #[test]
    fn diff_by_metric_entity_bucket_and_key() {
        let entity = json!({"scope": "SERVICE", "service": "a"});
        let current = report(json!([
            {"entity": entity, "bucket": 1, "type": "single", "value": 5},
            {"entity": entity, "bucket": 1, "type": "labeled", "value": {"mode=idle": 1, "mode=user": 2}},
        ]));
        let candidate = report(json!([
            {"entity": entity, "bucket": 1, "type": "single", "value": 6},
            {"entity": entity, "bucket": 1, "type": "labeled", "value": {"mode=user": 2, "mode=nice": 3}},
        ]));
        let diff = diff(&current, &candidate);
        let key = |k: &str| ("m".to_string(), "SERVICE service=a".to_string(), 1, k.to_string());
        assert_eq!(diff.added, vec![(key("mode=nice"), "3".to_string())]);
        assert_eq!(diff.removed, vec![(key("mode=idle"), "1".to_string())]);
        assert_eq!(diff.changed, vec![(key(""), "5".to_string(), "6".to_string())]);
        assert_eq!(diff.unchanged, 1);
        assert!(render_diff(&diff).contains("1 added, 1 removed, 1 changed, 1 unchanged"));
    }

    #[test]
    fn histogram_rows_carry_their_bound() {
        let candidate = report(json!([{
            "entity": {"scope": "SERVICE", "service": "a"}, "bucket": 7, "type": "histogram",
            "value": {"labels": "p=x", "buckets": [[100, 1], [500, 4]], "percentiles": []},
        }]));
        let keys: Vec<String> = rows(&candidate).into_iter().map(|(k, v)| format!("{}:{v}", k.3)).collect();
        assert_eq!(keys, vec!["p=x,le=100:1", "p=x,le=500:4"]);
    }
}
