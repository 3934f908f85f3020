//! The expressions of the `dsl/` evaluation tests (`ScopeTest`, `FilterTest`, `DecorateTest`, `MALElvisFalsyTest`, `FunctionTest`, `K8sTagTest`, `TagFilterTest`, `ArithmeticTest`).

use super::*;

#[test]
fn dsl_scope_test() {
    run(&[
        ok(
            "ScopeTest.sum_service",
            "http_success_request.sum(['idc']).service(['idc'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_labels",
            "http_success_request.sum(['region', 'idc']).service(['idc'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_m",
            "http_success_request.sum(['idc', 'region']).service(['idc' , 'region'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_endpoint",
            "http_success_request.sum(['region', 'idc']).endpoint(['idc'] , ['region'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_endpoint_labels",
            "http_success_request.sum(['region', 'idc' , 'instance']).endpoint(['idc'] , ['region'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_endpoint_labels_m",
            "http_success_request.sum(['region', 'idc' , 'svc' , 'instance']).endpoint(['idc'] , ['region','svc'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_instance",
            "http_success_request.sum(['region', 'idc']).instance(['idc'] , ['region'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_instance_labels",
            "http_success_request.sum(['region', 'idc' , 'instance']).instance(['idc'] , ['region'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_relation",
            "envoy_cluster_metrics_up_cx_active.sum(['app' ,'cluster_name']).serviceRelation(DetectPoint.CLIENT, ['app'], ['cluster_name'], Layer.GENERAL)",
        ),
        ok(
            "ScopeTest.sum_service_relation_with_component",
            "envoy_cluster_metrics_up_cx_active.sum(['app' ,'cluster_name', 'env', 'component']).serviceRelation(DetectPoint.CLIENT, ['app', 'env'], ['cluster_name'], '-', Layer.GENERAL, 'component')",
        ),
        ok(
            "ScopeTest.sum_process_relation",
            "rover_network_profiling_process_write_bytes.sum(['service' ,'instance', 'side', 'client_process_id', 'server_process_id', 'component']).processRelation('side', ['service'], ['instance'], 'client_process_id', 'server_process_id', 'component')",
        ),
    ]);
}

#[test]
fn dsl_filter_test() {
    run(&[
        file_ok(
            "FilterTest.filter-string",
            "filter: \"{ tags -> tags.str == 'val1' }\"\nmetricsRules: []\n",
        ),
        file_ok(
            "FilterTest.filter-equal-val2",
            "filter: \"{ tags -> tags.str == 'val2' }\"\nmetricsRules: []\n",
        ),
        file_ok(
            "FilterTest.filter-not-equal",
            "filter: \"{ tags -> tags.str != 'val1' }\"\nmetricsRules: []\n",
        ),
        file_ok(
            "FilterTest.filter-in-single",
            "filter: \"{ tags -> tags.str in [ 'val2' ] }\"\nmetricsRules: []\n",
        ),
        file_ok(
            "FilterTest.filter-in-multiple",
            "filter: \"{ tags -> tags.str in [ 'val1', 'val2' ] }\"\nmetricsRules: []\n",
        ),
    ]);
}

#[test]
fn dsl_decorate_and_elvis_tests() {
    run(&[
        ok(
            "DecorateTest.testDecorate",
            "http_success_request.sum(['idc']).service(['idc'], Layer.GENERAL).decorate({ me -> me.attr0 = me.layer.name()})",
        ),
        ok(
            "MALElvisFalsyTest (tagAfterElvis)",
            "metric.tag({tags -> tags['nt'] = tags.node_type ?: 'n/a'})",
        ),
        ok(
            "MALElvisFalsyTest (tagAfterSideEffectingElvis)",
            "metric.tag({tags -> tags['nt'] = tags.remove('node_type') ?: 'n/a'})",
        ),
    ]);
}

#[test]
fn dsl_function_test() {
    run(&[
        err(
            "FunctionTest.tag-override",
            "http_success_request.tag({ ['svc':'product', 'instance':'10.0.0.1'] })",
            6,
            32,
            "a MAL closure must name its parameters",
        ),
        ok(
            "FunctionTest.tag-add",
            "http_success_request.tag({tags -> tags.az = 'az1' })",
        ),
        ok(
            "FunctionTest.tag-remove",
            "http_success_request.tag({tags -> tags.remove('region') })",
        ),
        ok(
            "FunctionTest.tag-update",
            "http_success_request.tag({tags -> if (tags['region'] == 'us') {tags.region = 'zh'} })",
        ),
        ok(
            "FunctionTest.tag-append",
            "http_success_request.tag({tags -> tags.region = 'prefix::' + tags.region})",
        ),
        ok("FunctionTest.histogram", "http_success_request.histogram()"),
        ok(
            "FunctionTest.histogram_percentile",
            "http_success_request.histogram().histogram_percentile([75,99])",
        ),
        ok(
            "FunctionTest.for-each",
            "http_success_request.forEach(['v1', 'v2'], {element, tags -> tags[element] = 'test'})",
        ),
    ]);
}

#[test]
fn dsl_k8s_tag_test() {
    run(&[
        ok(
            "K8sTagTest.Pod2Service",
            "container_cpu_usage_seconds_total.retagByK8sMeta('service' , K8sRetagType.Pod2Service , 'pod' , 'namespace')",
        ),
        ok(
            "K8sTagTest.IPAddress_to_name",
            "rover_network_profiling_process_write_bytes.forEach(['client', 'server'] , {prefix, tags -> tags[prefix + '_process_id'] = ProcessRegistry.generateVirtualRemoteProcess(tags.service, tags.instance, tags[prefix + '_address'])})",
        ),
    ]);
}

#[test]
fn dsl_tag_filter_test() {
    run(&[
        ok(
            "TagFilterTest.tagEqual",
            "http_success_request.tagEqual('idc', 't3')",
        ),
        ok(
            "TagFilterTest.tagNotEqual",
            "http_success_request.tagNotEqual('idc', 't1')",
        ),
        ok(
            "TagFilterTest.tagMatch",
            "http_success_request.tagMatch('idc', 't1|t2|t3')",
        ),
        ok(
            "TagFilterTest.tagNotMatch",
            "http_success_request.tagNotMatch('idc', 't1|t3')",
        ),
    ]);
}

#[test]
fn dsl_arithmetic_test() {
    run(&[
        ok(
            "ArithmeticTest.plus-scalar-1",
            "1000 + http_success_request.tagEqual('idc','t1')",
        ),
        ok(
            "ArithmeticTest.plus-scalar",
            "http_success_request.tagEqual('idc','t1') + 1000",
        ),
        ok(
            "ArithmeticTest.minus-scalar",
            "http_success_request.tagEqual('idc','t1') - 1000",
        ),
        ok(
            "ArithmeticTest.multiply-scalar",
            "http_success_request.tagEqual('idc','t1') * 1000",
        ),
        ok(
            "ArithmeticTest.divide-scalar",
            "http_success_request.tagEqual('idc','t1') / 10",
        ),
        ok(
            "ArithmeticTest.divide-zero",
            "http_success_request.tagEqual('idc','t1') / 0",
        ),
        ok(
            "ArithmeticTest.empty-plus-empty",
            "http_success_request + http_error_request",
        ),
        ok(
            "ArithmeticTest.sampleFamily-plus-empty",
            "http_error_request + http_success_request ",
        ),
        ok(
            "ArithmeticTest.empty-minus-empty",
            "http_success_request - http_error_request",
        ),
        ok(
            "ArithmeticTest.sampleFamily-minus-empty",
            "http_error_request - http_success_request ",
        ),
    ]);
}
