//! `hotrule rule test --catalog lal FILE --logs LOGS.jsonl [--mal MAL.yaml]...`: runs a LAL file
//! on sample logs through a node's `POST /runtime/rule/test` and prints, per log and per rule
//! that ran, the extraction, the sink's decision, warnings, errors and the samples `metrics {}`
//! emitted with the `log-mal-rules` values they make (the `--mal` files, else the node's
//! bundled ones); then a per-rule summary. A line of the logs file that is not a log is
//! reported with its line number; the others still run.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{TestVerdict, default_name, read, run_test};
use crate::api::client::AdminClient;
use crate::cli::admin::rule::{CliError, table};

/// What `hotrule rule test` was asked for a LAL file.
#[derive(Debug, Clone)]
pub struct LalTestArgs {
    pub name: Option<String>,
    pub file: PathBuf,
    /// One native `LogData` JSON object per line.
    pub logs: PathBuf,
    /// `log-mal-rules` files for the emitted samples; none: the node's bundled ones.
    pub mal: Vec<PathBuf>,
    pub json: bool,
    /// The run's "now" (a log with timestamp 0 gets it); the node's clock when absent.
    pub now_ms: Option<i64>,
}

/// The request body.
pub fn request_body(content: &str, logs: &str, mal: &[(String, String)], now_ms: Option<i64>) -> Value {
    let mal: Vec<Value> = mal.iter().map(|(name, content)| json!({"name": name, "content": content})).collect();
    let mut body = json!({"content": content, "logs": logs, "mal": mal});
    if let Some(now_ms) = now_ms {
        body["nowMs"] = json!(now_ms);
    }
    body
}

pub async fn test(client: &AdminClient, args: &LalTestArgs) -> Result<TestVerdict, CliError> {
    let name = args.name.clone().or_else(|| default_name(&args.file)).unwrap_or_else(|| "candidate".to_string());
    let content = read(&args.file)?;
    let logs = read(&args.logs)?;
    let mut mal = Vec::new();
    for path in &args.mal {
        let mal_name = default_name(path).unwrap_or_else(|| "candidate".to_string());
        mal.push((mal_name, read(path)?));
    }
    let report = run_test(client, "lal", &name, &request_body(&content, &logs, &mal, args.now_ms)).await?;
    if args.json {
        println!("{report}");
    } else {
        print!("{}", render(&report));
    }
    let bad_lines = report_problems(&report, &args.logs);
    for warning in report["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", warning.as_str().unwrap_or_default());
    }
    let rule_errors = rule_errors(&report);
    Ok(if bad_lines == 0 && rule_errors == 0 {
        TestVerdict::Clean
    } else {
        TestVerdict::LogProblems { bad_lines, rule_errors }
    })
}

/// Prints each bad line and each rule error on stderr; returns how many lines were bad.
fn report_problems(report: &Value, logs: &Path) -> usize {
    let mut bad = 0;
    for log in report["logs"].as_array().into_iter().flatten() {
        if let Some(error) = log["error"].as_str() {
            bad += 1;
            eprintln!("{}:{}: {error}", logs.display(), log["line"]);
        }
        for rule in log["rules"].as_array().into_iter().flatten() {
            if let Some(error) = rule["error"].as_str() {
                eprintln!("line {}: rule {}: {error}", log["line"], rule["rule"].as_str().unwrap_or("?"));
            }
        }
    }
    bad
}

/// Rule errors: the LAL rules' and those of the log-mal-rules files on the emitted samples.
pub fn rule_errors(report: &Value) -> usize {
    report["logs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|log| log["rules"].as_array().into_iter().flatten())
        .map(|rule| usize::from(rule["error"].is_string()) + rule["metricErrors"].as_array().map_or(0, Vec::len))
        .sum()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `k=v, k=v` of a `[[k, v], ...]` or `{k: v}` value.
fn pairs(value: &Value) -> String {
    match value {
        Value::Array(items) => items.iter().map(|p| format!("{}={}", text(&p[0]), text(&p[1]))).collect::<Vec<_>>().join(", "),
        Value::Object(map) => map.iter().map(|(k, v)| format!("{k}={}", text(v))).collect::<Vec<_>>().join(", "),
        _ => String::new(),
    }
}

/// The report as text: a block per log, then a table of decisions per rule.
pub fn render(report: &Value) -> String {
    let mut out = String::new();
    for log in report["logs"].as_array().into_iter().flatten() {
        let line = &log["line"];
        if let Some(error) = log["error"].as_str() {
            out.push_str(&format!("line {line}: not run: {error}\n\n"));
            continue;
        }
        out.push_str(&format!("line {line}: service={} layer={}\n", text(&log["service"]), text(&log["layer"])));
        if let Some(note) = log["note"].as_str() {
            out.push_str(&format!("  {note}\n"));
        }
        for rule in log["rules"].as_array().into_iter().flatten() {
            out.push_str(&render_rule(rule));
        }
        out.push('\n');
    }
    let rows: Vec<Vec<String>> = report["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut row = vec![text(&r["rule"])];
            row.extend(["kept", "sampled", "dropped", "aborted", "no_sink", "no_layer", "failed"].iter().map(|k| text(&r[*k])));
            row
        })
        .collect();
    out.push_str(&table(&["RULE", "KEPT", "SAMPLED", "DROPPED", "ABORTED", "NO_SINK", "NO_LAYER", "FAILED"], &rows));
    let mal: Vec<String> =
        report["mal"].as_array().into_iter().flatten().map(|m| format!("log-mal-rules/{} ({})", text(&m["name"]), text(&m["source"]))).collect();
    out.push_str(&format!("log-mal-rules: {}\n", if mal.is_empty() { "none".to_string() } else { mal.join(", ") }));
    out
}

fn render_rule(rule: &Value) -> String {
    let mut out = format!("  rule {}: {}\n", text(&rule["rule"]), text(&rule["decision"]));
    let record = &rule["record"];
    let mut field = |label: &str, value: String| {
        if !value.is_empty() {
            out.push_str(&format!("    {label:<10} {value}\n"));
        }
    };
    field("service", text(&record["service"]));
    field("instance", text(&record["instance"]));
    field("endpoint", text(&record["endpoint"]));
    field("layer", text(&record["layer"]));
    field("timestamp", timestamp(&record["timestampMs"]));
    let trace = [("trace", &record["traceId"]), ("segment", &record["segmentId"]), ("span", &record["spanId"])]
        .iter()
        .filter(|(_, v)| !text(v).is_empty())
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect::<Vec<_>>()
        .join(" ");
    field("trace", trace);
    field("tags", pairs(&record["tags"]));
    if !record["outputType"].is_null() {
        field("output", format!("{} {}", text(&record["outputType"]), pairs(&record["fields"])).trim_end().to_string());
    }
    for sample in rule["samples"].as_array().into_iter().flatten() {
        field(
            "sample",
            format!("{}{{{}}} {} @{}", text(&sample["name"]), pairs(&sample["labels"]), text(&sample["value"]), text(&sample["timestampMs"])),
        );
    }
    for metric in rule["metrics"].as_array().into_iter().flatten() {
        field(
            "metric",
            format!(
                "{} {} bucket={} = {} ({})",
                text(&metric["metric"]),
                super::entity_text(&metric["entity"]),
                text(&metric["bucket"]),
                metric_value(&metric["value"]),
                text(&metric["file"])
            ),
        );
    }
    for error in rule["metricErrors"].as_array().into_iter().flatten() {
        field("mal error", format!("{} rule {}: {}", text(&error["file"]), text(&error["rule"]), text(&error["message"])));
    }
    for warning in rule["warnings"].as_array().into_iter().flatten() {
        field("warning", text(warning));
    }
    field("error", text(&rule["error"]));
    out
}

/// A single value as is; a labeled value as `key: value` per label set.
fn metric_value(value: &Value) -> String {
    match value {
        Value::Object(map) if map.values().all(Value::is_number) => {
            map.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
        }
        other => text(other),
    }
}

/// Epoch milliseconds, with the UTC time when it is one.
fn timestamp(value: &Value) -> String {
    let Some(ms) = value.as_i64() else { return String::new() };
    match u64::try_from(ms) {
        Ok(unsigned) => format!("{ms} ({})", crate::base::clock::iso8601(unsigned)),
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_renders_per_log_and_per_rule() {
        let report = json!({
            "logs": [
                {"line": 1, "service": "nginx-1", "layer": "NGINX", "rules": [{
                    "rule": "NGINX:nginx-error-log", "decision": "kept",
                    "record": {"service": "nginx-1", "instance": "i1", "layer": "NGINX", "timestampMs": 1_700_000_000_000_i64,
                               "tags": [["level", "error"]], "outputType": null, "traceId": "", "spanId": null},
                    "samples": [{"name": "nginx_error_log_count", "labels": {"level": "error"}, "value": 1.0, "timestampMs": 1}],
                    "metrics": [{"metric": "meter_nginx_service_error_log_count", "entity": {"scope": "SERVICE", "service": "nginx-1"},
                                 "bucket": 202311142213_i64, "value": {"level=error": 1}, "file": "log-mal-rules/nginx"}],
                    "warnings": [], "error": "boom"}]},
                {"line": 2, "error": "not JSON: x"},
            ],
            "rules": [{"rule": "NGINX:nginx-error-log", "kept": 1, "sampled": 0, "dropped": 0, "aborted": 0, "no_sink": 0, "no_layer": 0, "failed": 0}],
            "mal": [{"name": "nginx", "source": "request"}],
        });
        let text = render(&report);
        for expected in [
            "line 1: service=nginx-1 layer=NGINX",
            "  rule NGINX:nginx-error-log: kept",
            "    instance   i1",
            "    timestamp  1700000000000 (2023-11-14T22:13:20.000Z)",
            "    tags       level=error",
            "    sample     nginx_error_log_count{level=error} 1.0 @1",
            "    metric     meter_nginx_service_error_log_count SERVICE service=nginx-1 bucket=202311142213 = level=error: 1 (log-mal-rules/nginx)",
            "    error      boom",
            "line 2: not run: not JSON: x",
            "log-mal-rules: log-mal-rules/nginx (request)",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        assert!(!text.contains("    trace"), "empty fields are left out:\n{text}");
        assert!(text.lines().any(|l| l.starts_with("NGINX:nginx-error-log") && l.contains("  1  ")), "{text}");
        assert_eq!(rule_errors(&report), 1);
        let body = request_body("c", "l", &[("nginx".into(), "m".into())], Some(5));
        assert_eq!(body["mal"][0]["name"], "nginx");
        assert_eq!(body["nowMs"], 5);
    }
}
