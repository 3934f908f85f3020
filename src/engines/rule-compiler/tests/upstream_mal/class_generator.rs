//! `MALClassGeneratorTest`, `MALClassGeneratorClosureTest`, `MALClassGeneratorScopeTest`.

use super::*;

#[test]
fn mal_class_generator_test() {
    run(&[
        ok(
            "MALClassGeneratorTest.compileSimpleMetric",
            "instance_jvm_cpu",
        ),
        ok(
            "MALClassGeneratorTest.compileMethodChain",
            "instance_jvm_cpu.sum(['service', 'instance'])",
        ),
        ok(
            "MALClassGeneratorTest.compileArithmeticAdd",
            "metric_a + metric_b",
        ),
        ok(
            "MALClassGeneratorTest.compileNumberTimesMetric",
            "100 * process_cpu_seconds_total",
        ),
        ok(
            "MALClassGeneratorTest.compileParenChainExpr",
            "(process_cpu_seconds_total * 100).sum(['service', 'instance']).rate('PT1M')",
        ),
        ok(
            "MALClassGeneratorTest.compileWithEnumRef",
            "instance_jvm_cpu.sum(['service']).service(['service'], Layer.GENERAL)",
        ),
        ok(
            "MALClassGeneratorTest.compileWithDownsamplingType",
            "instance_jvm_cpu.sum(['service']).downsampling(SUM)",
        ),
        ok(
            "MALClassGeneratorTest.compileWithClosureTag",
            "instance_jvm_cpu.tag({tags -> tags.service_name = 'svc1'})",
        ),
        ok(
            "MALClassGeneratorTest.generateSourceReturnsJavaCode",
            "instance_jvm_cpu.sum(['service'])",
        ),
        ok(
            "MALClassGeneratorTest.compileValueEqual",
            "kube_node_status_condition.valueEqual(1).sum(['cluster','node','condition'])",
        ),
        ok(
            "MALClassGeneratorTest.compileMethodCallMultiply",
            "process_cpu_usage.multiply(100)",
        ),
        file_ok(
            "MALClassGeneratorTest.filterSafeNavCompiles",
            "filter: \"{ tags -> tags.job_name == 'aws-cloud-eks-monitoring' && tags.Service?.trim() }\"\nmetricsRules: []\n",
        ),
        file_err(
            "MALClassGeneratorTest.emptyExpressionThrows",
            "metricPrefix: m\nmetricsRules:\n  - name: r\n    exp: ''\n",
            4,
            10,
            "'exp' must not be empty",
        ),
        err(
            "MALClassGeneratorTest.malformedExpressionThrows",
            "metric.@invalid",
            6,
            14,
            "unexpected character '@'",
        ),
        err(
            "MALClassGeneratorTest.unclosedParenthesisThrows",
            "(metric1 ",
            6,
            7,
            "'(' is never closed",
        ),
        file_err(
            "MALClassGeneratorTest.invalidFilterClosureThrows",
            "filter: invalid filter\nmetricsRules: []\n",
            1,
            17,
            "unexpected 'filter', expected end of expression",
        ),
        file_err(
            "MALClassGeneratorTest.emptyFilterBodyThrows",
            "filter: \"{ }\"\nmetricsRules: []\n",
            1,
            10,
            "a MAL closure must name its parameters",
        ),
    ]);
}

#[test]
fn mal_class_generator_closure_test() {
    run(&[
        ok(
            "MALClassGeneratorClosureTest.tagClosurePutsCorrectKey",
            "metric.tag({tags -> tags.cluster = 'activemq::' + tags.cluster})",
        ),
        ok(
            "MALClassGeneratorClosureTest.tagClosureKeyExtractionViaGeneratedCode",
            "metric.tag({tags -> tags.service_name = 'svc1'})",
        ),
        ok(
            "MALClassGeneratorClosureTest.tagClosureBracketAssignment",
            "metric.tag({tags -> tags['my_key'] = 'my_value'})",
        ),
        ok(
            "MALClassGeneratorClosureTest.forEachClosureCompiles",
            "metric.forEach(['client', 'server'], {prefix, tags -> tags[prefix + '_name'] = 'value'})",
        ),
        ok(
            "MALClassGeneratorClosureTest.forEachClosureWithBareReturn",
            "metric.forEach(['x'], {prefix, tags ->\n  if (tags[prefix + '_id'] != null) {\n    return\n  }\n  tags[prefix + '_id'] = 'default'\n})",
        ),
        ok(
            "MALClassGeneratorClosureTest.forEachClosureWithVarDeclAndElseIf",
            FOREACH_COMPONENT,
        ),
        ok(
            "MALClassGeneratorClosureTest.processRegistryResolvedToFQCN",
            "metric.forEach(['client'], {prefix, tags ->\n  tags[prefix + '_process_id'] = ProcessRegistry.generateVirtualLocalProcess(tags.service, tags.instance)\n})",
        ),
        ok(
            "MALClassGeneratorClosureTest.networkProfilingFirstClosureCompiles",
            "metric.forEach(['client', 'server'], { prefix, tags ->\n    if (tags[prefix + '_process_id'] != null) {\n      return\n    }\n    if (tags[prefix + '_local'] == 'true') {\n      tags[prefix + '_process_id'] = ProcessRegistry.generateVirtualLocalProcess(tags.service, tags.instance)\n      return\n    }\n    tags[prefix + '_process_id'] = ProcessRegistry.generateVirtualRemoteProcess(tags.service, tags.instance, tags[prefix + '_address'])\n  })",
        ),
        ok(
            "MALClassGeneratorClosureTest.networkProfilingSecondClosureCompiles",
            "metric.forEach(['component'], { key, tags ->\n    String result = \"\"\n    // protocol are defined in the component-libraries.yml\n    String protocol = tags['protocol']\n    String ssl = tags['is_ssl']\n    if (protocol == 'http' && ssl == 'true') {\n      result = '129'\n    } else if (protocol == 'http') {\n      result = '49'\n    } else if (ssl == 'true') {\n      result = '130'\n    } else {\n      result = '110'\n    }\n    tags[key] = result\n  })",
        ),
        ok(
            "MALClassGeneratorClosureTest.apisixExpressionCompiles",
            "metric.tag({tags -> tags.service_name = 'APISIX::'+(tags['skywalking_service']?.trim()?:'APISIX')})",
        ),
        ok(
            "MALClassGeneratorClosureTest.closureStringConcatenation",
            "metric.tag({tags -> tags.service_name = 'APISIX::' + tags.service})",
        ),
        ok(
            "MALClassGeneratorClosureTest.regexMatchWithDefCompiles",
            "metric.tag({tags ->\n  def matcher = (tags.metrics_name =~ /\\.ssl\\.certificate\\.([^.]+)\\.expiration/)\n  tags.secret_name = matcher ? matcher[0][1] : \"unknown\"\n})",
        ),
        ok(
            "MALClassGeneratorClosureTest.envoyCAExpressionCompiles",
            "(metric.tagMatch('metrics_name', '.*ssl.*expiration_unix_time_seconds').tag({tags ->\n  def matcher = (tags.metrics_name =~ /\\.ssl\\.certificate\\.([^.]+)\\.expiration_unix_time_seconds/)\n  tags.secret_name = matcher ? matcher[0][1] : \"unknown\"\n}).min(['app', 'secret_name']) - time()).downsampling(MIN).service(['app'], Layer.MESH_DP)",
        ),
        ok(
            "MALClassGeneratorClosureTest.timeScalarFunctionHandledInMetadata",
            "(metric.sum(['app']) - time()).service(['app'], Layer.GENERAL)",
        ),
    ]);
}

const FOREACH_COMPONENT: &str = "metric.forEach(['component'], {key, tags ->\n  String result = \"\"\n  String protocol = tags['protocol']\n  String ssl = tags['is_ssl']\n  if (protocol == 'http' && ssl == 'true') {\n    result = '129'\n  } else if (protocol == 'http') {\n    result = '49'\n  } else if (ssl == 'true') {\n    result = '130'\n  } else {\n    result = '110'\n  }\n  tags[key] = result\n})";

/// `MALClassGeneratorScopeTest`'s `formatExp(expPrefix, expSuffix, exp)` is a file's
/// `expPrefix`/`expSuffix`; each upstream method compiles several metrics with one prefix/suffix.
#[test]
fn mal_class_generator_scope_test() {
    run(&[
        file_ok(
            "MALClassGeneratorScopeTest.endpointScopeWithHistogramPercentile",
            "metricPrefix: m\nexpSuffix: endpoint([\"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\"], [\"api\"], \"|\", Layer.GENERAL)\nmetricsRules:\n  - name: ep_cpm\n    exp: api_agent_api_total_count.downsampling(SUM_PER_MIN)\n  - name: ep_duration\n    exp: api_agent_api_total_duration.downsampling(SUM_PER_MIN)\n  - name: ep_success\n    exp: api_agent_api_http_success_count.downsampling(SUM_PER_MIN)\n  - name: ep_percentile\n    exp: api_agent_api_response_time_histogram.sum([\"le\", \"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\", \"api\"]).downsampling(SUM).histogram().histogram_percentile([50, 75, 90, 95, 99])\n",
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceScopeWithDelimiter",
            "metricPrefix: m\nexpSuffix: service([\"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\"], \"|\", Layer.GENERAL)\nmetricsRules:\n  - name: svc_api_cpm\n    exp: api_agent_api_total_count.downsampling(SUM_PER_MIN)\n  - name: svc_api_percentile\n    exp: api_agent_api_response_time_histogram.sum([\"le\", \"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\"]).downsampling(SUM).histogram().histogram_percentile([50, 75, 90, 95, 99])\n",
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceScopeWithTcpMetrics",
            "metricPrefix: m\nexpSuffix: service([\"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\"], \"|\", Layer.GENERAL)\nmetricsRules:\n  - name: svc_tcp_write_bytes\n    exp: metric_tcp_write_bytes.downsampling(SUM_PER_MIN)\n  - name: svc_tcp_close_connection_time\n    exp: metric_tcp_close_connection_time.downsampling(SUM_PER_MIN)\n",
        ),
        file_ok(
            "MALClassGeneratorScopeTest.tagClosureChainedWithServiceSuffix",
            "metricPrefix: m\nexpSuffix: tag({tags -> tags.service = 'satellite::' + tags.service}).service(['service'], Layer.SO11Y_SATELLITE)\nmetricsRules:\n  - name: sat_receive\n    exp: sw_stl_gatherer_receive_count.sum([\"pipe\", \"status\", \"service\"]).increase(\"PT1M\")\n  - name: sat_queue_cap\n    exp: sw_stl_pipeline_queue_total_capacity.sum([\"pipeline\", \"service\"])\n  - name: sat_cpu\n    exp: sw_stl_grpc_server_cpu_gauge.downsampling(LATEST)\n",
        ),
        file_ok(
            "MALClassGeneratorScopeTest.instanceScopeWithNullLayerKey",
            "metricPrefix: m\nexpSuffix: instance([\"service_subset\", \"service_name\", \"k8s_namespace\", \"service_cluster\", \"service_env\"], \"|\", [\"instance_name\"], \"|\", Layer.GENERAL, null)\nmetricsRules:\n  - name: inst_tcp_write_bytes\n    exp: api_agent_tcp_write_bytes.downsampling(SUM_PER_MIN)\n  - name: inst_tcp_read_count\n    exp: api_agent_tcp_read_count.downsampling(SUM_PER_MIN)\n",
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceRelation6ArgWithForEachServer",
            RELATION_SERVER,
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceRelation6ArgWithForEachClient",
            RELATION_CLIENT,
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceRelationTcpWithForEachServer",
            RELATION_SERVER,
        ),
        file_ok(
            "MALClassGeneratorScopeTest.serviceRelationTcpWithForEachClient",
            RELATION_CLIENT,
        ),
    ]);
}

const RELATION_SERVER: &str = "metricPrefix: m\nexpPrefix: |\n  forEach(['component'], { key, tags ->\n    String result = \"\"\n    String protocol = tags['protocol']\n    String ssl = tags['is_ssl']\n    if (protocol == 'http' && ssl == 'true') {\n      result = '129'\n    } else if (protocol == 'http') {\n      result = '49'\n    } else if (ssl == 'true') {\n      result = '130'\n    } else {\n      result = '110'\n    }\n    tags[key] = result\n  })\nexpSuffix: serviceRelation(DetectPoint.SERVER, [\"client_service_subset\", \"client_service_name\", \"client_namespace\", \"client_service_cluster\", \"client_service_env\"], [\"server_service_subset\", \"server_service_name\", \"server_namespace\", \"server_service_cluster\", \"server_service_env\"], '|', Layer.GENERAL, 'component')\nmetricsRules:\n  - name: rel_api_srv_cpm\n    exp: metric_server_api_total_count.downsampling(SUM_PER_MIN)\n  - name: rel_tcp_srv_write_bytes\n    exp: metric_server_tcp_write_bytes.downsampling(SUM_PER_MIN)\n  - name: rel_api_srv_pct\n    exp: metric_server_api_response_time_histogram.sum([\"le\", \"client_service_subset\", \"client_service_name\", \"client_namespace\", \"client_service_cluster\", \"client_service_env\", \"server_service_subset\", \"server_service_name\", \"server_namespace\", \"server_service_cluster\", \"server_service_env\", 'component']).downsampling(SUM).histogram().histogram_percentile([50, 75, 90, 95, 99])\n";

const RELATION_CLIENT: &str = "metricPrefix: m\nexpPrefix: |\n  forEach(['component'], { key, tags ->\n    String result = \"\"\n    if (tags['protocol'] == 'http') {\n      result = '49'\n    } else {\n      result = '110'\n    }\n    tags[key] = result\n  })\nexpSuffix: serviceRelation(DetectPoint.CLIENT, [\"client_service_subset\", \"client_service_name\", \"client_namespace\", \"client_service_cluster\", \"client_service_env\"], [\"server_service_subset\", \"server_service_name\", \"server_namespace\", \"server_service_cluster\", \"server_service_env\"], '|', Layer.GENERAL, 'component')\nmetricsRules:\n  - name: rel_api_cli_cpm\n    exp: metric_client_api_total_count.downsampling(SUM_PER_MIN)\n  - name: rel_tcp_cli_read_count\n    exp: metric_client_tcp_read_count.downsampling(SUM_PER_MIN)\n";
