//! Every shipped LAL file (`config/rules/lal/*.yaml`) on representative logs
//! (`tests/data/shipped/logs.yaml`): each log is routed through all the files together, exactly
//! the expected rules run, each with its expected decision and extraction, and the samples
//! emitted by `metrics {}` reach the matching `log-mal-rules` file, whose values are asserted.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{NOW_MS, load_lal, load_yaml, log_from_case, mismatches, rules_path};
use hotrule_lal_engine::{LalState, LogAnalysis, PreparedLalFile, analyze};
use hotrule_mal_engine::{EngineState, PreparedFile, Sample, Value, labels};
use hotrule_rule_compiler::{Compiled, DslKind, compile_bundled};
use serde_json::Value as Json;

fn shipped() -> Vec<(String, PreparedLalFile)> {
    let dir = rules_path("lal");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            (name.unwrap_or_default(), load_lal(&path))
        })
        .collect()
}

fn sample_of(json: &Json) -> Sample {
    let pairs: Vec<(String, String)> = json["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Sample::new(
        json["name"].as_str().unwrap_or_default(),
        labels(pairs),
        json["value"].as_f64().unwrap_or(f64::NAN),
        json["timestamp"].as_i64().unwrap_or_default(),
    )
}

#[test]
fn every_shipped_lal_file_on_representative_logs() {
    let files = shipped();
    assert_eq!(files.len(), 11, "expected the 11 shipped LAL files");
    let refs: Vec<&PreparedLalFile> = files.iter().map(|(_, f)| f).collect();
    let cases = load_yaml(&common::crate_path("tests/data/shipped/logs.yaml"));
    let cases = cases.as_array().expect("a list of cases");
    let mut failures = Vec::new();
    let mut exercised: BTreeSet<String> = BTreeSet::new();
    let mut state = LalState::default();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let log = log_from_case(&case["log"]);
        let LogAnalysis::Ran(outcomes) = analyze(&refs, &log, NOW_MS, &mut state) else {
            failures.push(format!("{name}: ignored"));
            continue;
        };
        let expect = case["expect"].as_object().cloned().unwrap_or_default();
        let ran: BTreeSet<&str> = outcomes.iter().map(|o| o.rule.as_str()).collect();
        let wanted: BTreeSet<&str> = expect.keys().map(String::as_str).collect();
        if ran != wanted {
            failures.push(format!("{name}: rules run {ran:?}, expected {wanted:?}"));
        }
        for outcome in &outcomes {
            exercised.insert(outcome.rule.clone());
            if let Some(expected) = expect.get(&outcome.rule) {
                let problems = mismatches(outcome, expected);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{name} | {}: {}",
                        outcome.rule,
                        problems.join("; ")
                    ));
                }
            }
        }
        let emitted: Vec<Sample> = outcomes.iter().flat_map(|o| o.samples.clone()).collect();
        let expected: Vec<Sample> = case["samples"]
            .as_array()
            .map(|items| items.iter().map(sample_of).collect())
            .unwrap_or_default();
        if emitted != expected {
            failures.push(format!(
                "{name}: samples {emitted:?}, expected {expected:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every rule of every shipped file ran on at least one log.
    let all: BTreeSet<String> = files
        .iter()
        .flat_map(|(_, f)| f.file().rules.iter().map(|r| r.key().0))
        .collect();
    let missing: Vec<&String> = all.difference(&exercised).collect();
    assert!(missing.is_empty(), "rules no case exercises: {missing:?}");
}

fn mal_file(relative: &str) -> PreparedFile {
    let bytes = std::fs::read(rules_path(relative)).expect("read MAL file");
    match compile_bundled(DslKind::Mal, &bytes) {
        Ok(Compiled::Mal(file)) => PreparedFile::new(file),
        other => panic!("compile {relative}: {other:?}"),
    }
}

/// Runs logs through the shipped LAL files and returns the emitted samples.
fn samples_of(logs: &[Json]) -> Vec<Sample> {
    let files = shipped();
    let refs: Vec<&PreparedLalFile> = files.iter().map(|(_, f)| f).collect();
    let mut state = LalState::default();
    logs.iter()
        .flat_map(|case| {
            let log = log_from_case(case);
            analyze(&refs, &log, NOW_MS, &mut state)
                .outcomes()
                .iter()
                .flat_map(|o| o.samples.clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Feeds each sample as its own batch (SkyWalking hands each LAL sample to MAL on its own) and
/// totals the labeled values per (metric, service, instance, label key).
fn evaluate_each(
    file: &PreparedFile,
    samples: &[Sample],
) -> BTreeMap<(String, String, String, String), i64> {
    let mut state = EngineState::default();
    let mut totals = BTreeMap::new();
    for sample in samples {
        let evaluation = file.evaluate(std::slice::from_ref(sample), NOW_MS, &mut state);
        assert!(evaluation.errors.is_empty(), "{:?}", evaluation.errors);
        for value in evaluation.values {
            let Value::Labeled(entries) = &value.value else {
                panic!("expected labeled values, got {value:?}");
            };
            for (key, v) in entries {
                *totals
                    .entry((
                        value.metric.clone(),
                        value.entity.service_name.clone(),
                        value.entity.instance_name.clone(),
                        key.clone(),
                    ))
                    .or_insert(0) += v;
            }
        }
    }
    totals
}

fn nginx_error(instance: &str, level: &str, ts: i64) -> Json {
    serde_json::json!({
        "service": "nginx::frontend", "instance": instance, "layer": "NGINX", "timestamp": ts,
        "body-type": "text",
        "body": format!("2021/01/01 00:00:00 [{level}] 1#1: upstream timed out"),
        "tags": {"LOG_KIND": "NGINX_ERROR_LOG"}
    })
}

#[test]
fn nginx_error_logs_reach_the_nginx_log_mal_rules() {
    let samples = samples_of(&[
        nginx_error("nginx-0", "error", 1_609_459_260_000),
        nginx_error("nginx-0", "error", 1_609_459_261_000),
        nginx_error("nginx-1", "warn", 1_609_459_262_000),
        // An access log emits nothing.
        serde_json::json!({"service": "nginx::frontend", "layer": "NGINX", "timestamp": 1_609_459_262_000_i64,
            "body-type": "text", "body": "1.2.3.4 - - [x] \"GET / HTTP/1.1\" 200 5",
            "tags": {"LOG_KIND": "NGINX_ACCESS_LOG"}}),
    ]);
    assert_eq!(samples.len(), 3);
    let totals = evaluate_each(&mal_file("log-mal-rules/nginx.yaml"), &samples);
    let key = |metric: &str, instance: &str, label: &str| {
        (
            metric.to_owned(),
            "nginx::frontend".to_owned(),
            instance.to_owned(),
            label.to_owned(),
        )
    };
    let expected: BTreeMap<_, i64> = [
        (
            key(
                "meter_nginx_service_error_log_count",
                "",
                "level=error,service_instance_id=nginx-0",
            ),
            2,
        ),
        (
            key(
                "meter_nginx_service_error_log_count",
                "",
                "level=warn,service_instance_id=nginx-1",
            ),
            1,
        ),
        (
            key(
                "meter_nginx_instance_error_log_count",
                "nginx-0",
                "level=error",
            ),
            2,
        ),
        (
            key(
                "meter_nginx_instance_error_log_count",
                "nginx-1",
                "level=warn",
            ),
            1,
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(totals, expected);
}

fn mini_program_error(service: &str, platform: &str, exception: &str) -> Json {
    serde_json::json!({
        "service": service, "timestamp": 1_609_459_800_000_i64, "body-type": "text", "body": "boom",
        "source-attributes": {"miniprogram.platform": platform},
        "tags": {"exception.type": exception}
    })
}

#[test]
fn mini_program_errors_reach_their_platform_log_mal_rules() {
    let samples = samples_of(&[
        mini_program_error("shop-mp", "wechat", "TypeError"),
        mini_program_error("shop-mp", "wechat", "TypeError"),
        mini_program_error("shop-mp", "wechat", "RangeError"),
        mini_program_error("pay-mp", "alipay", "NetworkError"),
        // Not a mini program: no sample.
        mini_program_error("web", "browser", "TypeError"),
    ]);
    assert_eq!(samples.len(), 4);
    let wechat = evaluate_each(&mal_file("log-mal-rules/miniprogram-wechat.yaml"), &samples);
    let metric = |m: &str, service: &str, label: &str| {
        (
            m.to_owned(),
            service.to_owned(),
            String::new(),
            label.to_owned(),
        )
    };
    assert_eq!(
        wechat,
        [
            (
                metric(
                    "meter_wechat_mp_error_count",
                    "shop-mp",
                    "exception_type=RangeError"
                ),
                1
            ),
            (
                metric(
                    "meter_wechat_mp_error_count",
                    "shop-mp",
                    "exception_type=TypeError"
                ),
                2
            ),
        ]
        .into_iter()
        .collect()
    );
    let alipay = evaluate_each(&mal_file("log-mal-rules/miniprogram-alipay.yaml"), &samples);
    assert_eq!(
        alipay,
        [(
            metric(
                "meter_alipay_mp_error_count",
                "pay-mp",
                "exception_type=NetworkError"
            ),
            1
        )]
        .into_iter()
        .collect()
    );
}
