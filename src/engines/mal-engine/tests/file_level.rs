//! Whole-file evaluation: scopes and entity naming (after upstream `ScopeTest`), emission by data
//! type (`Analyzer`), the file filter (`FilterTest`), `decorate` (`DecorateTest`),
//! `retagByK8sMeta` without metadata (`K8sTagTest`), and per-rule error isolation.

mod common;

use common::*;
use hotrule_mal_engine::{
    DataType, DetectPoint, EngineState, MetricValue, ScopeType, Value, Warning, minute_bucket,
};

fn file(exp: &str) -> String {
    format!("metricPrefix: meter\nmetricsRules:\n  - name: m\n    exp: \"{exp}\"\n")
}

fn only(values: &[MetricValue]) -> &MetricValue {
    assert_eq!(values.len(), 1, "{values:#?}");
    &values[0]
}

#[test]
fn scope_test_service_single_value_takes_first_sample() {
    let evaluation = evaluate(
        &file("m.service(['service'], Layer.GENERAL)"),
        &[
            s("m", &[("service", "a"), ("x", "1")], 2.4),
            s("m", &[("service", "a"), ("x", "2")], 9.0),
        ],
    );
    assert!(evaluation.errors.is_empty());
    let value = only(&evaluation.values);
    assert_eq!(value.metric, "meter_m");
    assert_eq!(value.entity.scope, ScopeType::Service);
    assert_eq!(value.entity.service_name, "a");
    assert_eq!(value.entity.layer, "GENERAL");
    assert_eq!(value.value, Value::Single(2), "single = ss[0], rounded");
    assert_eq!(value.time_bucket, minute_bucket(T0));
}

#[test]
fn scope_test_names_skip_empty_parts_and_use_delimiters() {
    let evaluation = evaluate(
        &file(
            "m.sum(['cluster', 'service', 'pod']).instance(['cluster', 'service'], '::', ['pod'], '', Layer.K8S_SERVICE, { tags -> ['pod': tags.pod] })",
        ),
        &[
            s(
                "m",
                &[("cluster", "c1"), ("service", "s"), ("pod", "p1")],
                1.0,
            ),
            s("m", &[("service", "s"), ("pod", "p2")], 1.0),
        ],
    );
    let mut names: Vec<(String, String)> = evaluation
        .values
        .iter()
        .map(|v| {
            (
                v.entity.service_name.clone(),
                v.entity.instance_name.clone(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ("c1::s".to_owned(), "p1".to_owned()),
            ("s".to_owned(), "p2".to_owned())
        ]
    );
    let properties = evaluation
        .values
        .iter()
        .find_map(|v| v.entity.instance_properties.clone());
    assert!(
        properties.is_some_and(|p| p.contains_key("pod")),
        "instance properties closure"
    );
}

#[test]
fn scope_test_endpoint_with_empty_name_still_emits() {
    let evaluation = evaluate(
        &file("m.endpoint(['service'], ['endpoint'], Layer.GENERAL)"),
        &[s("m", &[("service", "a")], 1.0)],
    );
    let value = only(&evaluation.values);
    assert_eq!(value.entity.scope, ScopeType::Endpoint);
    assert_eq!(value.entity.endpoint_name, "");
}

#[test]
fn scope_test_relations() {
    let evaluation = evaluate(
        &file(
            "m.serviceRelation(DetectPoint.SERVER, ['src'], ['dst'], '.', Layer.MESH_DP, 'component')",
        ),
        &[s(
            "m",
            &[("src", "a"), ("dst", "b"), ("component", "49")],
            1.0,
        )],
    );
    let entity = &only(&evaluation.values).entity;
    assert_eq!(
        (
            entity.source_service_name.as_str(),
            entity.dest_service_name.as_str()
        ),
        ("a", "b")
    );
    assert_eq!(entity.detect_point, Some(DetectPoint::Server));
    assert_eq!(
        entity.service_name, "b",
        "SERVER side names the destination"
    );
    assert_eq!(entity.component_id, 49);

    let evaluation = evaluate(
        &file(
            "m.processRelation('side', ['service'], ['instance'], 'client_process_id', 'server_process_id', 'component')",
        ),
        &[s(
            "m",
            &[
                ("side", "Server"),
                ("service", "s"),
                ("instance", "i"),
                ("client_process_id", "p1"),
                ("server_process_id", "p2"),
                ("component", "110"),
            ],
            1.0,
        )],
    );
    let entity = &only(&evaluation.values).entity;
    assert_eq!(entity.scope, ScopeType::ProcessRelation);
    assert_eq!(
        entity.detect_point,
        Some(DetectPoint::Server),
        "'server' in any case"
    );
    assert_eq!(
        (
            entity.source_process_id.as_str(),
            entity.dest_process_id.as_str()
        ),
        ("p1", "p2")
    );
    assert_eq!(entity.component_id, 110);
}

#[test]
fn analyzer_labeled_values_and_work_after_scope_ignored() {
    let evaluation = evaluate(
        &file("m.sum(['service', 'status']).service(['service'], Layer.GENERAL) * 100"),
        &[
            s("m", &[("service", "a"), ("status", "200")], 3.0),
            s("m", &[("service", "a"), ("status", "500")], 0.4),
        ],
    );
    let value = only(&evaluation.values);
    assert_eq!(value.data_type, DataType::Labeled);
    // `* 100` after the scope call is silently lost upstream; 0.4 stores as 1.
    assert_eq!(
        value.value,
        Value::Labeled(vec![
            ("status=200".to_owned(), 3),
            ("status=500".to_owned(), 1)
        ])
    );
}

#[test]
fn analyzer_histogram_percentile_emission() {
    let evaluation = evaluate(
        &file(
            "m.sum(['le', 'service']).histogram().histogram_percentile([50, 99]).service(['service'], Layer.GENERAL)",
        ),
        &[
            s("m", &[("le", "0.1"), ("service", "a")], 5.0),
            s("m", &[("le", "1"), ("service", "a")], 7.0),
        ],
    );
    let value = only(&evaluation.values);
    assert_eq!(
        value.value,
        Value::Histogram {
            labels: String::new(),
            buckets: vec![(100, 5), (1000, 7)],
            percentiles: vec![50, 99]
        }
    );
}

#[test]
fn filter_test_file_filter_runs_before_the_expression() {
    let yaml = "metricPrefix: meter\nfilter: \"{ tags -> tags.job_name == 'vm' }\"\nmetricsRules:\n  - name: m\n    exp: m.sum(['service']).service(['service'], Layer.OS_LINUX)\n";
    let evaluation = evaluate(
        yaml,
        &[
            s("m", &[("job_name", "vm"), ("service", "a")], 1.0),
            s("m", &[("job_name", "other"), ("service", "b")], 1.0),
        ],
    );
    assert_eq!(only(&evaluation.values).entity.service_name, "a");
    let evaluation = evaluate(
        yaml,
        &[s("m", &[("job_name", "other"), ("service", "b")], 1.0)],
    );
    assert!(evaluation.values.is_empty() && evaluation.errors.is_empty());
}

#[test]
fn decorate_test_sets_attributes_on_service_entities() {
    let evaluation = evaluate(
        &file(
            "m.sum(['service']).service(['service'], Layer.GENERAL).decorate({ me -> me.attr0 = me.serviceName + '-x' })",
        ),
        &[s("m", &[("service", "a")], 1.0)],
    );
    assert_eq!(
        only(&evaluation.values).entity.attrs[0].as_deref(),
        Some("a-x")
    );
}

#[test]
fn k8s_tag_test_without_metadata_keeps_tags_and_warns_once() {
    let prepared = prepare(&file(
        "m.retagByK8sMeta('service', K8sRetagType.Pod2Service, 'pod', 'namespace').tagNotEqual('service', '').sum(['service']).service(['service'], Layer.K8S_SERVICE)",
    ));
    let mut state = EngineState::default();
    let batch = [s(
        "m",
        &[("pod", "p"), ("namespace", "n"), ("service", "already")],
        1.0,
    )];
    let first = prepared.evaluate(&batch, T0, &mut state);
    assert_eq!(only(&first.values).entity.service_name, "already");
    assert!(matches!(
        first.warnings.as_slice(),
        [Warning::NoK8sMetadata { .. }]
    ));
    let second = prepared.evaluate(&batch, T0, &mut state);
    assert!(second.warnings.is_empty(), "reported once per state");
}

#[test]
fn a_failing_rule_is_skipped_and_the_others_run() {
    let yaml = "metricPrefix: meter\nmetricsRules:\n  - name: bad\n    exp: \"m.tag({tags -> tags.x = tags.absent.trim()}).sum(['service']).service(['service'], Layer.GENERAL)\"\n  - name: good\n    exp: m.sum(['service']).service(['service'], Layer.GENERAL)\n";
    let evaluation = evaluate(yaml, &[s("m", &[("service", "a")], 1.0)]);
    assert_eq!(evaluation.errors.len(), 1);
    assert_eq!(evaluation.errors[0].rule, "bad");
    assert_eq!(only(&evaluation.values).metric, "meter_good");
}

#[test]
fn expression_suffix_and_prefix_apply() {
    let yaml = "metricPrefix: meter\nexpPrefix: \"tag({tags -> tags.service = 'p::' + tags.service})\"\nexpSuffix: service(['service'], Layer.GENERAL)\nmetricsRules:\n  - name: m\n    exp: m.sum(['service'])\n";
    let evaluation = evaluate(yaml, &[s("m", &[("service", "a")], 1.0)]);
    assert_eq!(only(&evaluation.values).entity.service_name, "p::a");
}

#[test]
fn state_carries_over_a_filter_only_swap_and_restarts_structural_changes() {
    let old = prepare(
        "metricPrefix: t\nfilter: \"{ tags -> tags.job == 'a' }\"\nmetricsRules:\n  - name: c\n    exp: c.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n  - name: d\n    exp: d.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n",
    );
    let new = prepare(
        "metricPrefix: t\nfilter: \"{ tags -> tags.job in ['a', 'b'] }\"\nmetricsRules:\n  - name: c\n    exp: c.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n  - name: d\n    exp: e.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n",
    );
    let mut state = EngineState::default();
    let batch = |value: f64, ts: i64| {
        vec![
            at(s("c", &[("job", "a"), ("svc", "x")], value), ts),
            at(s("d", &[("job", "a"), ("svc", "x")], value), ts),
            at(s("e", &[("job", "a"), ("svc", "x")], value), ts),
        ]
    };
    old.evaluate(&batch(10.0, T0), T0, &mut state);
    assert_eq!(state.counters.len(), 2);

    let mut carried = state.clone();
    carried.carry_over(&new, &Default::default());
    assert_eq!(
        carried.counters.len(),
        1,
        "rule d now reads e: its series on d is dropped"
    );
    let next = new.evaluate(&batch(25.0, T0 + 60_000), T0 + 60_000, &mut carried);
    let value_of = |metric: &str| {
        next.values
            .iter()
            .find(|v| v.metric == metric)
            .map(|v| v.value.clone())
    };
    assert_eq!(
        value_of("t_c"),
        Some(Value::Single(15)),
        "the window continued"
    );
    assert_eq!(
        value_of("t_d"),
        Some(Value::Single(0)),
        "fresh series start at 0"
    );

    let mut restarted = state.clone();
    restarted.carry_over(&new, &["t_c".to_owned()].into_iter().collect());
    assert!(
        restarted.counters.is_empty(),
        "structural change of t_c starts it fresh"
    );
}

#[test]
fn division_by_zero_is_stored_as_the_largest_long() {
    let evaluation = evaluate(
        &file("m.sum(['service']).div(0).service(['service'], Layer.GENERAL)"),
        &[s("m", &[("service", "a")], 3.0)],
    );
    assert_eq!(only(&evaluation.values).value, Value::Single(i64::MAX));
}

#[test]
fn filter_test_rows() {
    let input = [
        s(
            "instance_cpu_percentage",
            &[("str", "val1")],
            1_600_592_418_480.0,
        ),
        s(
            "instance_cpu_percentage",
            &[("str", "val2")],
            1_600_592_418_480.0,
        ),
    ];
    for (case, filter, expected) in [
        (
            "FilterTest filter-string",
            "{ tags -> tags.str == 'val1' }",
            vec!["val1"],
        ),
        (
            "FilterTest filter-equal-val2",
            "{ tags -> tags.str == 'val2' }",
            vec!["val2"],
        ),
        (
            "FilterTest filter-not-equal",
            "{ tags -> tags.str != 'val1' }",
            vec!["val2"],
        ),
        (
            "FilterTest filter-in-single",
            "{ tags -> tags.str in [ 'val2' ] }",
            vec!["val2"],
        ),
        (
            "FilterTest filter-in-multiple",
            "{ tags -> tags.str in [ 'val1', 'val2' ] }",
            vec!["val1", "val2"],
        ),
    ] {
        let yaml = format!(
            "metricPrefix: meter\nfilter: \"{filter}\"\nmetricsRules:\n  - name: cpu\n    exp: instance_cpu_percentage.sum(['str']).service(['str'], Layer.GENERAL)\n"
        );
        let evaluation = evaluate(&yaml, &input);
        let mut services: Vec<&str> = evaluation
            .values
            .iter()
            .map(|v| v.entity.service_name.as_str())
            .collect();
        services.sort();
        assert_eq!(services, expected, "{case}");
    }
}

#[test]
fn labeled_keys_follow_the_aggregation_order() {
    let evaluation = evaluate(
        &file("m.sum(['service', 'zone', 'az']).service(['service'], Layer.GENERAL)"),
        &[s(
            "m",
            &[("service", "a"), ("zone", "z1"), ("az", "x")],
            2.0,
        )],
    );
    assert_eq!(
        only(&evaluation.values).value,
        Value::Labeled(vec![("zone=z1,az=x".to_owned(), 2)])
    );
}

#[test]
fn replayed_batches_with_old_timestamps_keep_their_counter_history() {
    let prepared = prepare(&file(
        "m.sum(['service']).increase('PT1M').service(['service'], Layer.GENERAL)",
    ));
    let mut state = EngineState::default();
    let wall_clock = T0 + 30 * 24 * 3_600_000;
    prepared.evaluate(
        &[at(s("m", &[("service", "a")], 10.0), T0)],
        wall_clock,
        &mut state,
    );
    let second = prepared.evaluate(
        &[at(s("m", &[("service", "a")], 25.0), T0 + 60_000)],
        wall_clock,
        &mut state,
    );
    assert_eq!(
        only(&second.values).value,
        Value::Single(15),
        "history survived a month-old replay"
    );
}

/// The file filter runs once per label map of a batch: samples of several families sharing one
/// map (as a receiver shares a target's labels) evaluate exactly as with a map each, whether
/// the filter passes, refuses or fails on them.
#[test]
fn filter_verdicts_shared_by_label_map_equal_one_run_per_sample() {
    let rules = "metricsRules:\n  - name: a\n    exp: m_a.sum(['service']).service(['service'], Layer.GENERAL)\n  - name: b\n    exp: m_b.sum(['service']).service(['service'], Layer.GENERAL)\n";
    for filter in [
        "{ tags -> tags.job_name == 'vm' }",
        "{ tags -> tags.job_name != 'vm' }",
        "{ tags -> tags.job_name.substring(5) == 'x' }",
    ] {
        let yaml = format!("metricPrefix: meter\nfilter: \"{filter}\"\n{rules}");
        let separate = [
            s("m_a", &[("job_name", "vm"), ("service", "a")], 1.0),
            s("m_b", &[("job_name", "vm"), ("service", "a")], 2.0),
            s("m_a", &[("job_name", "other"), ("service", "b")], 3.0),
            s("m_b", &[("job_name", "other"), ("service", "b")], 4.0),
        ];
        let mut shared = separate.clone();
        shared[1].labels = shared[0].labels.clone();
        shared[3].labels = shared[2].labels.clone();
        let (one, other) = (evaluate(&yaml, &separate), evaluate(&yaml, &shared));
        assert_eq!(one, other, "{filter}");
        assert!(!one.values.is_empty() || !one.warnings.is_empty() || !one.errors.is_empty(), "{filter}: something happened");
    }
}

/// `{ tags -> tags.k == 'v' }` and `!=` (judged on the labels directly) keep exactly what the
/// interpreter keeps for the same test written another way, a missing tag included.
#[test]
fn label_test_filters_agree_with_the_interpreter() {
    let input = [
        s("m", &[("job_name", "vm"), ("service", "a")], 1.0),
        s("m", &[("job_name", "vmx"), ("service", "b")], 1.0),
        s("m", &[("service", "c")], 1.0),
        s("m", &[("job_name", ""), ("service", "d")], 1.0),
    ];
    let services = |filter: &str| {
        let yaml = format!("metricPrefix: meter\nfilter: \"{filter}\"\nmetricsRules:\n  - name: m\n    exp: m.sum(['service']).service(['service'], Layer.GENERAL)\n");
        let mut names: Vec<String> = evaluate(&yaml, &input).values.iter().map(|v| v.entity.service_name.clone()).collect();
        names.sort();
        names
    };
    for (fast, interpreted, expected) in [
        ("{ tags -> tags.job_name == 'vm' }", "{ tags -> (tags.job_name == 'vm') }", vec!["a"]),
        ("{ tags -> tags.job_name != 'vm' }", "{ tags -> (tags.job_name != 'vm') }", vec!["b", "c", "d"]),
        ("{ t -> t.job_name == '' }", "{ t -> (t.job_name == '') }", vec!["d"]),
    ] {
        assert_eq!(services(fast), expected, "{fast}");
        assert_eq!(services(interpreted), expected, "{interpreted}");
    }
}
