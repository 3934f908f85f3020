//! SkyWalking's `K8sTagTest` (v2 dsl), with a metadata source standing in for the mocked
//! Kubernetes pods and services; and `retagByK8sMeta` without a source.

mod common;

use std::sync::Arc;

use common::*;
use hotrule_mal_engine::{EngineState, K8sMetadata, Warning};

/// The upstream test's pods and services: `my-nginx-5dc4865748-mbczh` in `default` is selected by
/// `nginx-service`, `kube-state-metrics-6f979fd498-z7xwx` in `kube-system` by `kube-state-metrics`.
#[derive(Debug)]
struct MockedCluster;

impl K8sMetadata for MockedCluster {
    fn service_of_pod(&self, namespace: &str, pod: &str) -> Option<String> {
        match (namespace, pod) {
            ("default", "my-nginx-5dc4865748-mbczh") => Some("nginx-service.default".to_owned()),
            ("kube-system", "kube-state-metrics-6f979fd498-z7xwx") => {
                Some("kube-state-metrics.kube-system".to_owned())
            }
            _ => None,
        }
    }
}

const EXPR: &str = "container_cpu_usage_seconds_total.retagByK8sMeta('service' , K8sRetagType.Pod2Service , 'pod' , 'namespace')";

fn input(nginx_pod: &str) -> Vec<hotrule_mal_engine::Sample> {
    vec![
        s(
            "container_cpu_usage_seconds_total",
            &[
                ("namespace", "default"),
                ("container", "my-nginx"),
                ("cpu", "total"),
                ("pod", nginx_pod),
            ],
            2.0,
        ),
        s(
            "container_cpu_usage_seconds_total",
            &[
                ("namespace", "kube-system"),
                ("container", "kube-state-metrics"),
                ("cpu", "total"),
                ("pod", "kube-state-metrics-6f979fd498-z7xwx"),
            ],
            1.0,
        ),
    ]
}

fn expected(nginx_pod: &str, nginx_service: &str) -> Vec<(hotrule_mal_engine::Labels, f64)> {
    expect(&[
        (
            &[
                ("namespace", "default"),
                ("container", "my-nginx"),
                ("cpu", "total"),
                ("pod", nginx_pod),
                ("service", nginx_service),
            ],
            2.0,
        ),
        (
            &[
                ("namespace", "kube-system"),
                ("container", "kube-state-metrics"),
                ("cpu", "total"),
                ("pod", "kube-state-metrics-6f979fd498-z7xwx"),
                ("service", "kube-state-metrics.kube-system"),
            ],
            1.0,
        ),
    ])
}

#[test]
fn k8s_tag_test() {
    for (case, pod, service) in [
        (
            "K8sTagTest Pod2Service",
            "my-nginx-5dc4865748-mbczh",
            "nginx-service.default",
        ),
        // Retag.BLANK is "".
        (
            "K8sTagTest Pod2Service_no_pod",
            "my-nginx-5dc4865748-no-pod",
            "",
        ),
        (
            "K8sTagTest Pod2Service_no_service",
            "my-nginx-5dc4865748-no-service",
            "",
        ),
    ] {
        let mut state = EngineState::default().with_k8s_metadata(Arc::new(MockedCluster));
        let got = run_with(EXPR, &input(pod), &mut state).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(got, expected(pod, service), "{case}");
    }
}

#[test]
fn samples_without_pod_or_namespace_are_untouched() {
    let samples = vec![s("container_cpu_usage_seconds_total", &[("pod", "p")], 1.0)];
    let mut state = EngineState::default().with_k8s_metadata(Arc::new(MockedCluster));
    let got = run_with(EXPR, &samples, &mut state).expect("run");
    assert_eq!(got, expect(&[(&[("pod", "p")], 1.0)]));
}

#[test]
fn without_a_metadata_source_tags_are_unchanged_and_reported_once() {
    let parsed = hotrule_rule_compiler::parse_mal_expression(EXPR).expect("parse");
    let mut state = EngineState::default();
    let first = hotrule_mal_engine::run_expression(&parsed, &families(&input("p")), T0, &mut state)
        .expect("run");
    assert!(matches!(
        first.warnings.as_slice(),
        [Warning::NoK8sMetadata { .. }]
    ));
    assert!(
        first
            .family
            .samples()
            .iter()
            .all(|s| !s.labels.contains_key("service"))
    );
    let second =
        hotrule_mal_engine::run_expression(&parsed, &families(&input("p")), T0, &mut state)
            .expect("run");
    assert!(second.warnings.is_empty());
}
