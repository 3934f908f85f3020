//! SkyWalking's meter-analyzer DSL tests (`oap-server/analyzer/meter-analyzer/src/test/java/.../v2/dsl`),
//! ported as table tests: `ScopeTest`. Each row names the upstream class and case; rows whose upstream
//! input was not transcribed verbatim say "(after ...)" and follow the behaviour the case pins down.

mod common;

use common::*;
use hotrule_mal_engine::EngineState;

/// An entity, described by the fields its scope uses → its samples as sorted `(labels, value)`.
type Entities = Vec<(String, Vec<(hotrule_mal_engine::Labels, f64)>)>;

fn describe(entity: &hotrule_mal_engine::Entity) -> String {
    use hotrule_mal_engine::ScopeType::*;
    match entity.scope {
        Service => format!("service {}", entity.service_name),
        ServiceInstance => format!("instance {}/{}", entity.service_name, entity.instance_name),
        Endpoint => format!("endpoint {}/{}", entity.service_name, entity.endpoint_name),
        ServiceRelation => format!(
            "relation {}->{} {:?} {}",
            entity.source_service_name,
            entity.dest_service_name,
            entity.detect_point,
            entity.component_id
        ),
        ProcessRelation => format!(
            "process-relation {}/{} {}->{} {:?} {}",
            entity.service_name,
            entity.instance_name,
            entity.source_process_id,
            entity.dest_process_id,
            entity.detect_point,
            entity.component_id
        ),
        other => format!("{other:?}"),
    }
}

fn entities_of(expr: &str, samples: &[hotrule_mal_engine::Sample]) -> Entities {
    let parsed = hotrule_rule_compiler::parse_mal_expression(expr).expect("parse");
    let result = hotrule_mal_engine::run_expression(
        &parsed,
        &families(samples),
        T0,
        &mut EngineState::default(),
    )
    .unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_eq!(
        result.entities.as_ref().map(|e| e
            .iter()
            .map(|(e, _)| e.layer.clone())
            .all(|l| l == "GENERAL")),
        Some(true)
    );
    let mut out: Entities = result
        .entities
        .unwrap_or_default()
        .into_iter()
        .map(|(entity, samples)| {
            let mut values: Vec<_> = samples.into_iter().map(|s| (s.labels, s.value)).collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            (describe(&entity), values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn entity(
    description: &str,
    values: &[(&[(&str, &str)], f64)],
) -> (String, Vec<(hotrule_mal_engine::Labels, f64)>) {
    (description.to_owned(), expect(values))
}

#[test]
fn scope_test() {
    let input = by_input([50.0, 51.0, 50.0, 100.0, 3.0]);
    let mut multi = by_input([50.0, 51.0, 50.0, 100.0, 3.0]);
    // sum_service_endpoint_labels_m swaps the svc values and gives the instance rows an svc.
    let svc = |sample: &mut hotrule_mal_engine::Sample, value: &str| {
        std::sync::Arc::make_mut(&mut sample.labels).insert("svc".to_owned(), value.to_owned());
    };
    svc(&mut multi[1], "product");
    svc(&mut multi[2], "catalog");
    svc(&mut multi[3], "catalog");
    svc(&mut multi[4], "product");
    let relations = vec![
        s(
            "envoy_cluster_metrics_up_cx_active",
            &[("app", "productpage"), ("cluster_name", "details")],
            11.0,
        ),
        s(
            "envoy_cluster_metrics_up_cx_active",
            &[("app", "productpage"), ("cluster_name", "reviews")],
            16.0,
        ),
    ];
    let with_component = vec![
        s(
            "envoy_cluster_metrics_up_cx_active",
            &[
                ("app", "productpage"),
                ("cluster_name", "details"),
                ("env", "test"),
                ("component", "10"),
            ],
            11.0,
        ),
        s(
            "envoy_cluster_metrics_up_cx_active",
            &[
                ("app", "productpage"),
                ("cluster_name", "reviews"),
                ("env", "test"),
                ("component", "10"),
            ],
            16.0,
        ),
    ];
    let process = vec![
        s(
            "rover_network_profiling_process_write_bytes",
            &[
                ("service", "test"),
                ("instance", "test-instance"),
                ("side", "server"),
                ("client_process_id", "abc"),
                ("server_process_id", "def"),
                ("component", "1"),
            ],
            11.0,
        ),
        s(
            "rover_network_profiling_process_write_bytes",
            &[
                ("service", "test"),
                ("instance", "test-instance"),
                ("side", "client"),
                ("client_process_id", "abc"),
                ("server_process_id", "def"),
                ("component", "2"),
            ],
            12.0,
        ),
    ];
    let cases: Vec<(&str, &str, &[hotrule_mal_engine::Sample], Entities)> = vec![
        (
            "ScopeTest sum_service",
            "http_success_request.sum(['idc']).service(['idc'], Layer.GENERAL)",
            &input,
            vec![
                entity("service t1", &[(&[], 200.0)]),
                entity("service t3", &[(&[], 54.0)]),
            ],
        ),
        (
            "ScopeTest sum_service_labels",
            "http_success_request.sum(['region', 'idc']).service(['idc'], Layer.GENERAL)",
            &input,
            vec![
                entity(
                    "service t1",
                    &[(&[("region", "")], 50.0), (&[("region", "us")], 150.0)],
                ),
                entity("service t3", &[(&[("region", "cn")], 54.0)]),
            ],
        ),
        (
            "ScopeTest sum_service_m",
            "http_success_request.sum(['idc', 'region']).service(['idc' , 'region'], Layer.GENERAL)",
            &input,
            vec![
                entity("service t1", &[(&[], 50.0)]),
                entity("service t1.us", &[(&[], 150.0)]),
                entity("service t3.cn", &[(&[], 54.0)]),
            ],
        ),
        (
            "ScopeTest sum_service_endpoint",
            "http_success_request.sum(['region', 'idc']).endpoint(['idc'] , ['region'], Layer.GENERAL)",
            &input,
            vec![
                entity("endpoint t1/", &[(&[], 50.0)]),
                entity("endpoint t1/us", &[(&[], 150.0)]),
                entity("endpoint t3/cn", &[(&[], 54.0)]),
            ],
        ),
        (
            "ScopeTest sum_service_endpoint_labels",
            "http_success_request.sum(['region', 'idc' , 'instance']).endpoint(['idc'] , ['region'], Layer.GENERAL)",
            &input,
            vec![
                entity("endpoint t1/", &[(&[("instance", "")], 50.0)]),
                entity(
                    "endpoint t1/us",
                    &[
                        (&[("instance", "")], 50.0),
                        (&[("instance", "10.0.0.1")], 100.0),
                    ],
                ),
                entity(
                    "endpoint t3/cn",
                    &[
                        (&[("instance", "")], 51.0),
                        (&[("instance", "10.0.0.1")], 3.0),
                    ],
                ),
            ],
        ),
        (
            "ScopeTest sum_service_endpoint_labels_m",
            "http_success_request.sum(['region', 'idc' , 'svc' , 'instance']).endpoint(['idc'] , ['region','svc'], Layer.GENERAL)",
            &multi,
            vec![
                entity("endpoint t1/", &[(&[("instance", "")], 50.0)]),
                entity(
                    "endpoint t1/us.catalog",
                    &[
                        (&[("instance", "")], 50.0),
                        (&[("instance", "10.0.0.1")], 100.0),
                    ],
                ),
                entity(
                    "endpoint t3/cn.product",
                    &[
                        (&[("instance", "")], 51.0),
                        (&[("instance", "10.0.0.1")], 3.0),
                    ],
                ),
            ],
        ),
        (
            "ScopeTest sum_service_instance",
            "http_success_request.sum(['region', 'idc']).instance(['idc'] , ['region'], Layer.GENERAL)",
            &input,
            vec![
                entity("instance t1/", &[(&[], 50.0)]),
                entity("instance t1/us", &[(&[], 150.0)]),
                entity("instance t3/cn", &[(&[], 54.0)]),
            ],
        ),
        (
            "ScopeTest sum_service_instance_labels",
            "http_success_request.sum(['region', 'idc' , 'instance']).instance(['idc'] , ['region'], Layer.GENERAL)",
            &input,
            vec![
                entity("instance t1/", &[(&[("instance", "")], 50.0)]),
                entity(
                    "instance t1/us",
                    &[
                        (&[("instance", "")], 50.0),
                        (&[("instance", "10.0.0.1")], 100.0),
                    ],
                ),
                entity(
                    "instance t3/cn",
                    &[
                        (&[("instance", "")], 51.0),
                        (&[("instance", "10.0.0.1")], 3.0),
                    ],
                ),
            ],
        ),
        (
            "ScopeTest sum_service_relation",
            "envoy_cluster_metrics_up_cx_active.sum(['app' ,'cluster_name']).serviceRelation(DetectPoint.CLIENT, ['app'], ['cluster_name'], Layer.GENERAL)",
            &relations,
            vec![
                entity(
                    "relation productpage->details Some(Client) 0",
                    &[(&[], 11.0)],
                ),
                entity(
                    "relation productpage->reviews Some(Client) 0",
                    &[(&[], 16.0)],
                ),
            ],
        ),
        (
            "ScopeTest sum_service_relation_with_component",
            "envoy_cluster_metrics_up_cx_active.sum(['app' ,'cluster_name', 'env', 'component']).serviceRelation(DetectPoint.CLIENT, ['app', 'env'], ['cluster_name'], '-', Layer.GENERAL, 'component')",
            &with_component,
            vec![
                entity(
                    "relation productpage-test->details Some(Client) 10",
                    &[(&[], 11.0)],
                ),
                entity(
                    "relation productpage-test->reviews Some(Client) 10",
                    &[(&[], 16.0)],
                ),
            ],
        ),
    ];
    for (case, expr, samples, expected) in cases {
        assert_eq!(entities_of(expr, samples), expected, "{case}");
    }
    // sum_process_relation: the layer is not involved (PROCESS_RELATION has none).
    let parsed = hotrule_rule_compiler::parse_mal_expression("rover_network_profiling_process_write_bytes.sum(['service' ,'instance', 'side', 'client_process_id', 'server_process_id', 'component']).processRelation('side', ['service'], ['instance'], 'client_process_id', 'server_process_id', 'component')").expect("parse");
    let result = hotrule_mal_engine::run_expression(
        &parsed,
        &families(&process),
        T0,
        &mut EngineState::default(),
    )
    .expect("run");
    let mut got: Entities = result
        .entities
        .unwrap_or_default()
        .into_iter()
        .map(|(e, s)| {
            (
                describe(&e),
                s.into_iter().map(|s| (s.labels, s.value)).collect(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            entity(
                "process-relation test/test-instance abc->def Some(Client) 2",
                &[(&[], 12.0)]
            ),
            entity(
                "process-relation test/test-instance abc->def Some(Server) 1",
                &[(&[], 11.0)]
            ),
        ],
        "ScopeTest sum_process_relation"
    );
}
