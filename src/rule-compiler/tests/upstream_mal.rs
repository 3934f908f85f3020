//! SkyWalking's MAL compiler tests, case by case: every accept/reject case that concerns compiling
//! (not evaluating) an expression, named after the upstream test class and method it comes from
//! (`oap-server/analyzer/meter-analyzer/src/test/java/org/apache/skywalking/oap/meter/analyzer/v2/`).
//!
//! Coverage:
//! - `compiler/MALClassGeneratorTest`: fully (`runMethodHasLocalVariableTable` checks bytecode).
//! - `compiler/MALClassGeneratorClosureTest`: fully.
//! - `compiler/MALClassGeneratorScopeTest`: fully (its `formatExp` is the file's
//!   `expPrefix`/`expSuffix` here).
//! - `compiler/MALScriptParserTest`: fully for accept/reject (the AST shape asserted upstream is
//!   upstream's model).
//! - `dsl/DSLV2Test`: `parseCompilesSimpleExpression`, `parseThrowsOnInvalidExpression`,
//!   `expressionRunWithCompiledExpression`, `metadataExtraction` (the rest evaluates samples).
//! - `dsl/ScopeTest`: every expression (all compile; the samples they produce are evaluation).
//! - `dsl/DecorateTest`, `dsl/MALElvisFalsyTest`: their expressions.
//! - `dsl/K8sTagTest`, `dsl/TagFilterTest`: their expressions.
//! - `dsl/ArithmeticTest`: partially (the expression forms of its first 15 cases; the rest repeat
//!   them with other samples).
//! - Not ported (evaluation only, their expressions are forms covered above): `dsl/AggregationTest`,
//!   `dsl/BasicTest`, `dsl/IncreaseTest`, `dsl/ValueFilterTest`, `dsl/CounterWindowTest`,
//!   `dsl/CrossRuleCounterWindowTest`, `dsl/BanyanDBErrorRateReproTest`, and the source-map and
//!   line-attribution tests of `compiler/` (`Mal*LineAttributionTest`, `MalSourceMapTest`...), which
//!   check the generated classes' debug info.
//! - `dsl/FunctionTest`: fully (`tag-override`, the bare-map closure, is its one reject).
//! - `dsl/FilterTest`: every filter closure (as the file's `filter:`, which is how v2 runs them).
//! - `compiler/MALExtensionFunctionTest`: the parse and chain cases; `testUnknownNamespace`,
//!   `testUnknownMethod` and `testWrongArgCount` are a deliberate difference (hotrule cannot see
//!   the extensions installed in an OAP, so it accepts any `ns::method(...)`).
//! - `dsl/rule/RuleLoaderYAMLFailTest` (the `illegal-yaml` file) and the `empty-yaml` resource of
//!   the rule-loader tests; `RuleLoaderFailTest` is about missing files (no compile outcome).
//! - `v2/prometheus/rule/RulesLayerDefinitionsTest`: not here (layer definitions are validated
//!   with the runtime layers, outside this crate's parsing).
//!
//! Upstream compiles a bare expression; a hotrule rule must also name a scope (as a SkyWalking rule
//! file must for its metric to be stored), so an expression without a scope call gets the file
//! suffix `service(['service'], Layer.GENERAL)` here.

use hotrule_rule_compiler::{DslKind, compile};

enum Expect {
    Ok,
    /// An error at this line and column *of the file* whose message contains the text.
    Err(usize, usize, &'static str),
}

struct Case {
    upstream: &'static str,
    /// The whole file, or `None` to build it from `exp` alone.
    file: Option<&'static str>,
    exp: &'static str,
    expect: Expect,
}

const SCOPES: &[&str] = &[
    ".service(",
    ".instance(",
    ".endpoint(",
    ".process(",
    ".serviceRelation(",
    ".processRelation(",
    ".serviceInstanceRelation(",
];

/// A file with one rule `r` whose `exp` is a literal block scalar: the expression's first line is
/// line 6 (line 5 when `exp` names its own scope), indented by 6 (its first character is column 7).
fn file_of(exp: &str) -> String {
    let suffix = if SCOPES.iter().any(|scope| exp.contains(scope)) {
        "\n"
    } else {
        "\nexpSuffix: service(['service'], Layer.GENERAL)\n"
    };
    let mut text = format!("metricPrefix: m{suffix}metricsRules:\n  - name: r\n    exp: |\n");
    for line in exp.lines() {
        text.push_str(&format!("      {line}\n"));
    }
    text
}

fn run(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let text = case.file.map_or_else(|| file_of(case.exp), str::to_owned);
        let outcome = compile(DslKind::Mal, text.as_bytes());
        let problem = match (&case.expect, outcome) {
            (Expect::Ok, Ok(_)) => None,
            (Expect::Ok, Err(error)) => Some(format!("expected to compile, got {error}")),
            (Expect::Err(..), Ok(_)) => Some("expected an error, compiled".to_owned()),
            (Expect::Err(line, column, message), Err(error)) => {
                ((error.line, error.column) != (*line, *column) || !error.message.contains(message))
                    .then(|| format!("expected {line}:{column} '{message}', got {error}"))
            }
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}\n{text}", case.upstream));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with SkyWalking:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const fn ok(upstream: &'static str, exp: &'static str) -> Case {
    Case {
        upstream,
        file: None,
        exp,
        expect: Expect::Ok,
    }
}

/// An error in a file built from `exp` (see [`file_of`] for where the expression is).
const fn err(
    upstream: &'static str,
    exp: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        file: None,
        exp,
        expect: Expect::Err(line, column, message),
    }
}

const fn file_ok(upstream: &'static str, file: &'static str) -> Case {
    Case {
        upstream,
        file: Some(file),
        exp: "",
        expect: Expect::Ok,
    }
}

const fn file_err(
    upstream: &'static str,
    file: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        file: Some(file),
        exp: "",
        expect: Expect::Err(line, column, message),
    }
}

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

#[test]
fn mal_script_parser_test() {
    run(&[
        ok(
            "MALScriptParserTest.parseSimpleMetric",
            "instance_golang_heap_alloc",
        ),
        ok(
            "MALScriptParserTest.parseMethodChain",
            "jvm_memory_bytes_used.sum(['service', 'host_name', 'area'])",
        ),
        ok(
            "MALScriptParserTest.parseTagEqualWithRateAndService",
            "mysql_global_status_commands_total.tagEqual('command','insert').sum(['service_instance_id','host_name']).rate('PT1M')",
        ),
        ok(
            "MALScriptParserTest.parseHistogramPercentile",
            "metric.sum(['le']).histogram().histogram_percentile([50,75,90,95,99])",
        ),
        ok(
            "MALScriptParserTest.parseArithmeticAdd",
            "metric1 + metric2",
        ),
        ok(
            "MALScriptParserTest.parseArithmeticMultiply",
            "(process_cpu_seconds_total * 100).sum(['service', 'host_name']).rate('PT1M')",
        ),
        ok(
            "MALScriptParserTest.parseNumberTimesMetric",
            "100 * metrics_aggregation_queue_used_percentage.sum(['service', 'host_name', 'level', 'slot'])",
        ),
        ok(
            "MALScriptParserTest.parseEnumRefArgument",
            "metric.service(['svc'], Layer.GENERAL)",
        ),
        ok(
            "MALScriptParserTest.parseDownsampling",
            "metric.histogram().histogram_percentile([50,75,90,95,99]).downsampling(SUM)",
        ),
        ok(
            "MALScriptParserTest.parseValueEqual",
            "kube_node_status_condition.valueEqual(1).sum(['cluster','node','condition'])",
        ),
        ok(
            "MALScriptParserTest.parseDivTwoMetrics",
            "metric_sum.div(metric_count)",
        ),
        ok(
            "MALScriptParserTest.parseClosureTag",
            "metric.tag({tags -> tags.service_name = 'svc1'})",
        ),
        ok(
            "MALScriptParserTest.parseRetagByK8sMeta",
            "kube_pod_status_phase.retagByK8sMeta('service', K8sRetagType.Pod2Service, 'pod', 'namespace').tagNotEqual('service', '').valueEqual(1).sum(['cluster', 'service', 'phase'])",
        ),
        ok(
            "MALScriptParserTest.parseTagAssignmentExtractsCorrectKey",
            "metric.tag({tags -> tags.cluster = 'activemq::' + tags.cluster})",
        ),
        ok(
            "MALScriptParserTest.parseTagBracketAssignment",
            "metric.tag({prefix, tags -> tags[prefix + '_id'] = 'val'})",
        ),
        ok(
            "MALScriptParserTest.parseForEachClosure",
            "metric.forEach(['client', 'server'], {prefix, tags -> tags.key = prefix})",
        ),
        ok(
            "MALScriptParserTest.parseVariableDeclaration",
            "metric.forEach(['x'], {key, tags ->\n  String result = \"\"\n  tags[key] = result\n})",
        ),
        ok(
            "MALScriptParserTest.parseBareReturn",
            "metric.forEach(['x'], {prefix, tags ->\n  if (tags[prefix + '_id'] != null) {\n    return\n  }\n  tags[prefix + '_id'] = 'default'\n})",
        ),
        ok(
            "MALScriptParserTest.parseStaticMethodCall",
            "metric.tag({tags -> tags.pid = ProcessRegistry.generateVirtualLocalProcess(tags.service, tags.instance)})",
        ),
        err(
            "MALScriptParserTest.parseSyntaxErrorThrows",
            "metric.sum(",
            6,
            17,
            "'(' is never closed",
        ),
    ]);
}

#[test]
fn dsl_v2_test() {
    run(&[
        ok(
            "DSLV2Test.parseCompilesSimpleExpression",
            "test_metric.sum(['service'])",
        ),
        err(
            "DSLV2Test.parseThrowsOnInvalidExpression",
            "??? invalid !!!",
            6,
            7,
            "unexpected",
        ),
        ok(
            "DSLV2Test.expressionRunWithCompiledExpression",
            "test_metric.service(['service'], Layer.GENERAL)",
        ),
        ok(
            "DSLV2Test.metadataExtraction",
            "test_metric.sum(['service', 'instance']).service(['service'], Layer.GENERAL)",
        ),
    ]);
}

/// The known disagreements of issue 9 (from SkyWalking's MAL grammar and `SampleFamily`).
#[test]
fn issue_9_mal_cases() {
    run(&[
        // `SampleFamily.sum(List<String> by)` and friends take the label list.
        err(
            "SampleFamily.sum (no label list)",
            "metric.sum()",
            6,
            14,
            "'sum' takes 1 argument(s), found 0",
        ),
        err(
            "SampleFamily.avg (no label list)",
            "metric.avg()",
            6,
            14,
            "'avg' takes 1 argument(s), found 0",
        ),
        err(
            "SampleFamily.min (no label list)",
            "metric.min()",
            6,
            14,
            "'min' takes 1 argument(s)",
        ),
        err(
            "SampleFamily.max (no label list)",
            "metric.max()",
            6,
            14,
            "'max' takes 1 argument(s)",
        ),
        err(
            "SampleFamily.count (no label list)",
            "metric.count()",
            6,
            14,
            "'count' takes 1 argument(s)",
        ),
        // MALParser stringList has at least one string, and arguments have no names.
        err(
            "MALParser stringList (empty)",
            "metric.sum([])",
            6,
            18,
            "must be a list of label names such as ['a', 'b'] (at least one)",
        ),
        err(
            "MALParser argument (named by:)",
            "metric.sum(by: ['service'])",
            6,
            18,
            "does not take a named argument 'by'",
        ),
        err(
            "MALParser argument (named by=)",
            "metric.sum(by=['service'])",
            6,
            18,
            "does not take a named argument 'by'",
        ),
        err(
            "MALParser argument (named le:)",
            "metric.histogram(le: 'le')",
            6,
            24,
            "does not take a named argument 'le'",
        ),
        // MALParser closureExpression: `{ params -> body }`.
        err(
            "MALParser closureExpression (bare map)",
            "metric.tag({ ['service': 'x'] })",
            6,
            18,
            "must name its parameters",
        ),
        err(
            "MALParser closureExpression (no arrow)",
            "metric.tag({ tags.x = 'y' })",
            6,
            18,
            "must name its parameters",
        ),
        err(
            "MALParser closureBody (empty)",
            "metric.tag({ tags -> })",
            6,
            18,
            "must not be empty",
        ),
        file_err(
            "MALParser filterExpression (it)",
            "filter: '{ it.job == \"x\" }'\nmetricsRules: []\n",
            1,
            10,
            "must name its parameters",
        ),
        file_err(
            "MALParser filterExpression (empty body)",
            "filter: '{ tags -> }'\nmetricsRules: []\n",
            1,
            10,
            "must not be empty",
        ),
        // Java literals: `L` only on integers; an integer must fit a long.
        err(
            "Java literal (fractional L)",
            "metric.multiply(1.5L)",
            6,
            23,
            "an L or I suffix needs an integer",
        ),
        err(
            "Java literal (exponent L)",
            "metric.multiply(1e3L)",
            6,
            23,
            "an L or I suffix needs an integer",
        ),
        err(
            "Java literal (out of long range)",
            "metric * 99999999999999999999",
            6,
            16,
            "out of range",
        ),
        err(
            "Java literal (I out of int range)",
            "metric * 3000000000I",
            6,
            16,
            "out of range",
        ),
        ok("Java literal (long)", "metric * 3000000000"),
        ok("Java literal (L)", "metric * 100L"),
        ok(
            "Java literal (BigInteger G)",
            "metric * 99999999999999999999G",
        ),
        // Java string operators inside closures: only `+`.
        err(
            "MAL closure (string minus)",
            "metric.tag({tags -> tags.x = 'ab' - 'b'})",
            6,
            36,
            "operator '-' cannot be applied to a string",
        ),
        err(
            "MAL closure (string times)",
            "metric.tag({tags -> tags.x = 'ab' * 2})",
            6,
            36,
            "operator '*' cannot be applied to a string",
        ),
        err(
            "MAL expression (string operand)",
            "metric + 'abc'",
            6,
            16,
            "a string is not allowed",
        ),
    ]);
}

#[test]
fn mal_extension_function_test() {
    run(&[
        ok(
            "MALExtensionFunctionTest.testParseExtensionCall",
            "metric.test::scale(2.0)",
        ),
        ok(
            "MALExtensionFunctionTest.testParseNoArgExtensionCall",
            "metric.test::noop()",
        ),
        ok(
            "MALExtensionFunctionTest.testCompileAndRunScale",
            "metric.test::scale(3.0)",
        ),
        ok(
            "MALExtensionFunctionTest.testExtensionInChain",
            "metric.sum(['k']).test::scale(2.0)",
        ),
        // Deliberate difference: extensions are not known here, so these compile.
        ok(
            "MALExtensionFunctionTest.testUnknownNamespace (accepted)",
            "metric.unknown::foo()",
        ),
        ok(
            "MALExtensionFunctionTest.testUnknownMethod (accepted)",
            "metric.test::nonexistent()",
        ),
        ok(
            "MALExtensionFunctionTest.testWrongArgCount (accepted)",
            "metric.test::scale()",
        ),
    ]);
}

const LICENSE_AND_DURATION_COMMENT: &str = "# Licensed to the Apache Software Foundation (ASF)\n#\n# This will parse a textual representation of a duration. The formats\n# accepted are based on the ISO-8601 duration format {@code PnDTnHnMn.nS}\n#    \"PT20.345S\" -- parses as \"20.345 seconds\"\n";

/// `RuleLoaderYAMLFailTest.test` (`otel-rules/illegal-yaml/test.yml`: comments, then a sentence).
#[test]
fn rule_loader_yaml_fail_test() {
    let text = format!("{LICENSE_AND_DURATION_COMMENT}This is a not well-formed yml file.");
    let error = compile(DslKind::Mal, text.as_bytes()).expect_err("illegal yaml");
    assert_eq!((error.line, error.column), (6, 1), "{error}");
    assert!(
        error
            .message
            .contains("the top level of a rule file must be a mapping, found a scalar"),
        "{error}"
    );
}

/// `otel-rules/empty-yaml/test.yml` (comments only): SkyWalking loads such a bundled file as no
/// rules, and so does `compile_bundled`; posted by an operator it declares nothing, an error.
#[test]
fn empty_yaml_resource() {
    let error = compile(DslKind::Mal, LICENSE_AND_DURATION_COMMENT.as_bytes()).expect_err("empty");
    assert_eq!((error.line, error.column), (1, 1), "{error}");
    assert!(error.message.contains("declares nothing"), "{error}");
    match hotrule_rule_compiler::compile_bundled(
        DslKind::Mal,
        LICENSE_AND_DURATION_COMMENT.as_bytes(),
    ) {
        Ok(hotrule_rule_compiler::Compiled::Mal(file)) => assert!(file.rules.is_empty()),
        other => panic!("{other:?}"),
    }
}

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
