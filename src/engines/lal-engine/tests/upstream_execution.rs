//! SkyWalking's LAL execution cases, ported as table tests: `LALScriptExecutionTest` over
//! `feature-cases/execution-basic` and `execution-def`, and over the `oap-cases` data of the
//! shipped rule files (`config/rules/lal/*.yaml`). Each case is named as upstream names it
//! (`<file> | <rule> [<i>]`); the data files are in `tests/data/upstream/`.

mod common;

use common::{crate_path, load_lal, load_yaml, rules_path, run_data_file};

fn check(rules: std::path::PathBuf, data: &str, label: &str, expected_cases: usize) {
    let file = load_lal(&rules);
    let data = load_yaml(&crate_path(&format!("tests/data/upstream/{data}")));
    let (ran, failures) = run_data_file(&file, &data, label);
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(ran, expected_cases, "{label}: cases run");
}

#[test]
fn lal_script_execution_feature_cases_execution_basic() {
    check(
        crate_path("tests/data/upstream/execution-basic.yaml"),
        "execution-basic.data.yaml",
        "execution-basic.yaml",
        29,
    );
}

#[test]
fn lal_script_execution_feature_cases_execution_def() {
    check(
        crate_path("tests/data/upstream/execution-def.yaml"),
        "execution-def.data.yaml",
        "execution-def.yaml",
        6,
    );
}

#[test]
fn lal_script_execution_oap_cases_nginx() {
    check(
        rules_path("lal/nginx.yaml"),
        "oap-cases/nginx.data.yaml",
        "nginx.yaml",
        2,
    );
}

#[test]
fn lal_script_execution_oap_cases_mysql_slowsql() {
    check(
        rules_path("lal/mysql-slowsql.yaml"),
        "oap-cases/mysql-slowsql.data.yaml",
        "mysql-slowsql.yaml",
        1,
    );
}

#[test]
fn lal_script_execution_oap_cases_pgsql_slowsql() {
    check(
        rules_path("lal/pgsql-slowsql.yaml"),
        "oap-cases/pgsql-slowsql.data.yaml",
        "pgsql-slowsql.yaml",
        1,
    );
}

#[test]
fn lal_script_execution_oap_cases_envoy_als() {
    check(
        rules_path("lal/envoy-als.yaml"),
        "oap-cases/envoy-als.data.yaml",
        "envoy-als.yaml",
        6,
    );
}

#[test]
fn lal_script_execution_oap_cases_k8s_service() {
    check(
        rules_path("lal/k8s-service.yaml"),
        "oap-cases/k8s-service.data.yaml",
        "k8s-service.yaml",
        1,
    );
}

#[test]
fn lal_script_execution_oap_cases_mesh_dp() {
    check(
        rules_path("lal/mesh-dp.yaml"),
        "oap-cases/mesh-dp.data.yaml",
        "mesh-dp.yaml",
        1,
    );
}

#[test]
fn lal_script_execution_oap_cases_ios_metrickit() {
    check(
        rules_path("lal/ios-metrickit.yaml"),
        "oap-cases/ios-metrickit.data.yaml",
        "ios-metrickit.yaml",
        4,
    );
}

/// The harness itself: a wrong expectation, an unknown rule and a wrong case count are reported.
#[test]
fn harness_reports_wrong_expectations() {
    let file = load_lal(&rules_path("lal/nginx.yaml"));
    let data: serde_json::Value = serde_json::json!({
        "nginx-access-log": {
            "body-type": "text",
            "body": "10.0.0.1 - - [01/Jan/2021:00:00:00 +0000] \"GET /api HTTP/1.1\" 200 1234",
            "tags": {"LOG_KIND": "NGINX_ACCESS_LOG"},
            "expect": {"tag.http.status_code": "404", "abort": true}
        },
        "no-such-rule": {"expect": {}}
    });
    let (ran, failures) = run_data_file(&file, &data, "nginx.yaml");
    assert_eq!(ran, 1);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("tag.http.status_code: expected \"404\", got \"200\""),
        "{failures:?}"
    );
    assert!(
        failures[0].contains("abort: expected \"true\", got \"false\""),
        "{failures:?}"
    );
    assert!(failures[1].contains("no such rule"), "{failures:?}");
}
