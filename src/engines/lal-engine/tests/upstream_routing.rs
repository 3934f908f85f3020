//! SkyWalking's `LogFilterListenerRoutingTest`: a rule with a typed input only applies to logs of
//! that type; envoy HTTP and TCP access logs share `MESH`; rules with a parser (no input type)
//! run on any input. Here on the shipped `lal/envoy-als.yaml`, whose MESH bucket is exactly the
//! upstream test's: `envoy-als` (HTTP, the layer's registered input), `envoy-als-tcp` (TCP) and
//! `network-profiling-slow-trace` (json parser).

mod common;

use common::{NOW_MS, load_lal, load_lal_text, rules_path};
use hotrule_lal_engine::{LalState, LogData, TypedInput, analyze};

const HTTP: &str = "io.envoyproxy.envoy.data.accesslog.v3.HTTPAccessLogEntry";
const TCP: &str = "io.envoyproxy.envoy.data.accesslog.v3.TCPAccessLogEntry";

fn mesh_log(typed: Option<&str>) -> LogData {
    LogData {
        service: "svc".into(),
        layer: "MESH".into(),
        timestamp_ms: NOW_MS,
        typed: typed.map(|type_name| TypedInput {
            type_name: type_name.into(),
            message: serde_json::json!({}),
        }),
        ..LogData::default()
    }
}

fn rules_run(log: &LogData) -> Vec<String> {
    let file = load_lal(&rules_path("lal/envoy-als.yaml"));
    analyze(&[&file], log, NOW_MS, &mut LalState::default())
        .outcomes()
        .iter()
        .map(|o| o.rule.clone())
        .collect()
}

#[test]
fn tcp_entry_reaches_only_tcp_and_parser_rules() {
    assert_eq!(
        rules_run(&mesh_log(Some(TCP))),
        vec!["MESH:envoy-als-tcp", "MESH:network-profiling-slow-trace"]
    );
}

#[test]
fn http_entry_reaches_only_http_and_parser_rules() {
    assert_eq!(
        rules_run(&mesh_log(Some(HTTP))),
        vec!["MESH:envoy-als", "MESH:network-profiling-slow-trace"]
    );
}

#[test]
fn untyped_rule_runs_for_any_input() {
    let file = load_lal_text(
        "rules:\n  - name: untyped\n    layer: MESH\n    dsl: |\n      filter {\n        json { abortOnFailure false }\n        sink {}\n      }\n",
    );
    for typed in [Some(TCP), Some(HTTP), None] {
        let outcomes = analyze(&[&file], &mesh_log(typed), NOW_MS, &mut LalState::default());
        assert_eq!(outcomes.outcomes().len(), 1, "{typed:?}");
    }
    // A plain log (no typed input) reaches only the parser rule of the shipped file.
    assert_eq!(
        rules_run(&mesh_log(None)),
        vec!["MESH:network-profiling-slow-trace"]
    );
}
