//! `MALScriptParserTest`, `DSLV2Test`, the issue 9 cases, `MALExtensionFunctionTest` and the rule-loader YAML cases.

use super::*;

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
