//! Compiles every bundled SkyWalking rule file and checks the shapes and keys that classification
//! depends on.

mod common;

use std::collections::BTreeMap;

use common::corpus;
use hotrule_rule_compiler::{
    Compiled, DataType, Downsampling, LalKey, MetricShape, ScopeType, compile, compile_bundled,
};

fn compiled(relative: &str) -> Compiled {
    let (kind, _, bytes) = corpus()
        .into_iter()
        .find(|(_, path, _)| path == relative)
        .unwrap_or_else(|| panic!("{relative} not in corpus"));
    compile_bundled(kind, &bytes).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn mal_metrics(relative: &str) -> BTreeMap<String, MetricShape> {
    match compiled(relative) {
        Compiled::Mal(file) => file.metrics(),
        Compiled::Lal(_) => panic!("{relative} is not MAL"),
    }
}

/// Every bundled file compiles as a bundled file; every one that declares something (all but the
/// comment-only `placeholder.yaml`) also compiles as an operator's upload would.
#[test]
fn every_corpus_file_compiles() {
    let failures: Vec<String> = corpus()
        .iter()
        .filter_map(|(kind, path, bytes)| {
            let strict = if path == "log-mal-rules/placeholder.yaml" {
                match compile(*kind, bytes) {
                    Err(error) if (error.line, error.column) == (1, 1) => Ok(()),
                    other => Err(format!("expected 'declares nothing', got {other:?}")),
                }
            } else {
                compile(*kind, bytes).map(drop).map_err(|e| e.to_string())
            };
            compile_bundled(*kind, bytes)
                .map(drop)
                .map_err(|e| e.to_string())
                .and(strict)
                .err()
                .map(|e| format!("{path}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} file(s) failed to compile:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn shape(scope: ScopeType, downsampling: Downsampling, data_type: DataType) -> MetricShape {
    MetricShape {
        scope,
        downsampling,
        data_type,
    }
}

#[test]
fn vm_cpu_total_percentage_is_single_service_avg() {
    // Sums by the scope label only, so nothing survives as a label.
    let metrics = mal_metrics("otel-rules/vm.yaml");
    assert_eq!(
        metrics.get("meter_vm_cpu_total_percentage"),
        Some(&shape(
            ScopeType::Service,
            Downsampling::Avg,
            DataType::Single
        ))
    );
}

#[test]
fn nginx_endpoint_latency_is_an_endpoint_histogram_percentile() {
    let metrics = mal_metrics("otel-rules/nginx/nginx-endpoint.yaml");
    let latency = metrics.get("meter_nginx_endpoint_http_latency");
    assert_eq!(
        latency,
        Some(&shape(
            ScopeType::Endpoint,
            Downsampling::Avg,
            DataType::HistogramPercentile
        ))
    );
    assert_eq!(
        latency.map(|s| s.to_string()).as_deref(),
        Some("avgHistogramPercentile@ENDPOINT")
    );
}

#[test]
fn nginx_error_log_count_keeps_level_as_a_label() {
    let metrics = mal_metrics("log-mal-rules/nginx.yaml");
    let count = metrics.get("meter_nginx_service_error_log_count");
    assert_eq!(
        count,
        Some(&shape(
            ScopeType::Service,
            Downsampling::Sum,
            DataType::Labeled
        ))
    );
    assert_eq!(
        count.map(MetricShape::function_name).as_deref(),
        Some("sumLabeled")
    );
}

#[test]
fn placeholder_declares_no_metrics() {
    assert!(mal_metrics("log-mal-rules/placeholder.yaml").is_empty());
}

#[test]
fn mysql_slowsql_key_and_output_type() {
    let Compiled::Lal(file) = compiled("lal/mysql-slowsql.yaml") else {
        panic!("not LAL")
    };
    let keys = file.keys();
    assert_eq!(
        keys.get(&LalKey("MYSQL:mysql-slowsql".to_owned())),
        Some(&Some("SlowSQL".to_owned()))
    );
    assert_eq!(keys.len(), 1);
}

#[test]
fn every_layer_the_corpus_uses_is_built_in() {
    let mut uses = 0;
    for (kind, path, bytes) in corpus() {
        let compiled = compile_bundled(kind, &bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        for used in hotrule_rule_compiler::layers::referenced_layers(&compiled) {
            assert!(
                hotrule_rule_compiler::layers::built_in(&used.name).is_some(),
                "{path}:{}:{} uses layer {} that is not built in",
                used.line,
                used.column,
                used.name
            );
            uses += 1;
        }
    }
    assert!(
        uses > 100,
        "the corpus uses layers in many places; found {uses}"
    );
}
