//! SkyWalking's LAL compiler tests, case by case: every accept/reject case that concerns compiling
//! (not evaluating) a script, named after the upstream test class and method it comes from
//! (`oap-server/analyzer/log-analyzer/src/test/java/org/apache/skywalking/oap/log/analyzer/v2/compiler/`).
//!
//! Coverage:
//! - `LALClassGeneratorBasicTest`: fully.
//! - `LALClassGeneratorTest`: fully (the `generateSource*` cases are checked for compiling only;
//!   `parseInterpolatedIdParts` is a parser-internals test with no compile outcome).
//! - `LALClassGeneratorConditionTest`: fully for compile outcomes (what the generated Java looks
//!   like is upstream's codegen, not ours; `compileShippedEnvoyAiGatewayLlmRule` is the corpus test).
//! - `LALClassGeneratorDefTest`: fully.
//! - `LALClassGeneratorExtractorTest`: fully, except `compileOutputFieldWithInvalidSetter` (an
//!   output type given as a Java class is opaque to hotrule, which accepts any field for it).
//! - `LALClassGeneratorSinkTest`: fully.
//! - `LALScriptParserTest`: fully. It only parses; where the class generator would then reject
//!   the script (`parsed.x` with no parser, an output field without an output type), the case
//!   expects that error, since compiling here is parsing and checking together.
//!
//! - `../dsl/DSLSecurityTest` (the v1 sandbox cases, which v2's grammar rejects as well): fully.
//! - Not ported: `LALExpressionExecutionTest`, `LALSourceAttribution*Test`,
//!   `LALSourceFileResolvesTest`, `LalPayloadDebugDumpTest` and the provider tests (evaluation,
//!   source maps, file loading); `LALConfigsLayerDefinitionsTest` belongs to the runtime layers.
//!
//! `setInputType(X.class)` upstream is `inputType: X` in the rule here; `setOutputType(X.class)`
//! is `outputType: X`.

use hotrule_rule_compiler::{DslKind, compile};

/// What compiling one case must give: `Ok`, or an error at a line and column of the *dsl* (1-based,
/// relative to the script; the file position is checked from it) whose message contains the text.
enum Expect {
    Ok,
    Err(usize, usize, &'static str),
}

struct Case {
    upstream: &'static str,
    /// Rule keys written before `dsl:` (each `key: value` on its own line).
    header: &'static [&'static str],
    dsl: &'static str,
    expect: Expect,
}

const HTTP_ENTRY: &str = "inputType: io.envoyproxy.envoy.data.accesslog.v3.HTTPAccessLogEntry";

fn rule_file(case: &Case) -> (String, usize) {
    let mut text = String::from("rules:\n  - name: r\n");
    for line in case.header {
        text.push_str(&format!("    {line}\n"));
    }
    text.push_str("    dsl: |\n");
    let first_dsl_line = text.lines().count() + 1;
    for line in case.dsl.lines() {
        text.push_str(&format!("      {line}\n"));
    }
    (text, first_dsl_line)
}

fn run(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let (text, first_dsl_line) = rule_file(case);
        let outcome = compile(DslKind::Lal, text.as_bytes());
        let problem = match (&case.expect, outcome) {
            (Expect::Ok, Ok(_)) => None,
            (Expect::Ok, Err(error)) => Some(format!("expected to compile, got {error}")),
            (Expect::Err(..), Ok(_)) => Some("expected an error, compiled".to_owned()),
            (Expect::Err(line, column, message), Err(error)) => {
                let at = (first_dsl_line + line - 1, column + 6);
                ((error.line, error.column) != at || !error.message.contains(message)).then(|| {
                    format!(
                        "expected {}:{} (dsl {line}:{column}) '{message}', got {error}",
                        at.0, at.1
                    )
                })
            }
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}", case.upstream));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with SkyWalking:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const fn ok(upstream: &'static str, dsl: &'static str) -> Case {
    Case {
        upstream,
        header: &[],
        dsl,
        expect: Expect::Ok,
    }
}

const fn err(
    upstream: &'static str,
    dsl: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        header: &[],
        dsl,
        expect: Expect::Err(line, column, message),
    }
}

#[test]
fn lal_class_generator_basic_test() {
    run(&[
        ok(
            "LALClassGeneratorBasicTest.compileMinimalFilter",
            "filter { sink {} }",
        ),
        ok(
            "LALClassGeneratorBasicTest.compileJsonParserFilter",
            "filter { json {} sink {} }",
        ),
        ok(
            "LALClassGeneratorBasicTest.compileJsonWithExtractor",
            "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorBasicTest.compileTextWithRegexp",
            "filter {\n  text {\n    regexp '(?<timestamp>\\\\d+) (?<level>\\\\w+) (?<msg>.*)'\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorBasicTest.compileSinkWithEnforcer",
            "filter {\n  json {}\n  sink {\n    enforcer {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorBasicTest.compileAndVerifySourceReturnsJavaCode",
            "filter { json {} sink {} }",
        ),
        err(
            "LALClassGeneratorBasicTest.missingFilterKeywordThrows",
            "json {}",
            1,
            1,
            "unknown statement 'json' in the top level",
        ),
        err(
            "LALClassGeneratorBasicTest.unclosedBraceThrows",
            "filter { json {",
            1,
            15,
            "is never closed",
        ),
        err(
            "LALClassGeneratorBasicTest.invalidStatementInFilterThrows",
            "filter { invalid {} }",
            1,
            10,
            "unknown statement 'invalid' in filter",
        ),
    ]);
}

/// `LALClassGeneratorBasicTest.emptyScriptThrows` / `LALClassGeneratorTest.emptyScriptThrows`: an
/// empty `dsl` is an error at the `dsl` key (the YAML scalar is empty).
#[test]
fn empty_script_throws() {
    let text = "rules:\n  - name: r\n    dsl: ''\n";
    let error = compile(DslKind::Lal, text.as_bytes()).expect_err("empty dsl");
    assert_eq!((error.line, error.column), (3, 10), "{error}");
    assert!(error.message.contains("'dsl' must not be empty"), "{error}");
}

#[test]
fn lal_class_generator_test() {
    run(&[
        ok(
            "LALClassGeneratorTest.compileMinimalFilter",
            "filter { sink {} }",
        ),
        ok(
            "LALClassGeneratorTest.compileJsonParserFilter",
            "filter { json {} sink {} }",
        ),
        ok(
            "LALClassGeneratorTest.generateSourceReturnsJavaCode",
            "filter { json {} sink {} }",
        ),
        err(
            "LALClassGeneratorTest.missingFilterKeywordThrows",
            "json {}",
            1,
            1,
            "unknown statement 'json'",
        ),
        err(
            "LALClassGeneratorTest.unclosedBraceThrows",
            "filter { json {",
            1,
            15,
            "is never closed",
        ),
        err(
            "LALClassGeneratorTest.invalidStatementInFilterThrows",
            "filter { invalid {} }",
            1,
            10,
            "unknown statement 'invalid'",
        ),
        ok(
            "LALClassGeneratorTest.compileTagFunctionInCondition",
            "filter {\n  json {}\n  if (tag(\"LOG_KIND\") == \"SLOW_SQL\") {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorTest.generateSourceTagFunctionEmitsTagValue",
            "filter {\n  if (tag(\"LOG_KIND\") == \"SLOW_SQL\") {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileSafeNavigationMethodCalls",
            "filter {\n  json {}\n  extractor {\n    service parsed?.flags?.toString()?.trim() as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorTest.generateSourceSafeNavMethodEmitsSpecificHelper",
            "filter {\n  json {}\n  if (parsed?.flags?.toString()) {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileSlowSqlBlock",
            "filter {\n  json {}\n  extractor {\n    slowSql {\n      id parsed.id as String\n      statement parsed.statement as String\n      latency parsed.query_time as Long\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileSampledTraceBlock",
            "filter {\n  json {}\n  extractor {\n    sampledTrace {\n      latency parsed.latency as Long\n      uri parsed.uri as String\n      reason parsed.reason as String\n      detectPoint parsed.detect_point as String\n      componentId 49\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileSampledTraceWithIfBlocks",
            "filter {\n  json {}\n  extractor {\n    sampledTrace {\n      latency parsed.latency as Long\n      if (parsed.client_process.process_id as String != \"\") {\n        processId parsed.client_process.process_id as String\n      } else {\n        processId parsed.fallback as String\n      }\n      detectPoint parsed.detect_point as String\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileNginxAccessLogRule",
            "filter {\n  if (tag(\"LOG_KIND\") == \"NGINX_ACCESS_LOG\") {\n    text {\n      regexp '.+\"(?<request>.+)\"(?<status>\\\\d{3}).+'\n    }\n    extractor {\n      if (parsed.status) {\n        tag 'http.status_code': parsed.status\n      }\n    }\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileSlowSqlProductionRule",
            "filter {\n  json {}\n  extractor {\n    if (tag(\"LOG_KIND\") == \"SLOW_SQL\") {\n      layer parsed.layer as String\n      service parsed.service as String\n      timestamp parsed.time as String\n      slowSql {\n        id parsed.id as String\n        statement parsed.statement as String\n        latency parsed.query_time as Long\n      }\n    }\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorTest.compileEnvoyAlsAbortRuleFailsWithoutExtraLogType",
            ENVOY_ALS,
            2,
            15,
            "'parsed.response' needs a typed input",
        ),
        Case {
            upstream: "LALClassGeneratorTest.compileExtraLogTypeGeneratesDirectGetterCalls",
            header: &[HTTP_ENTRY],
            dsl: ENVOY_ALS,
            expect: Expect::Ok,
        },
        ok(
            "LALClassGeneratorTest.compileElseIfChain",
            "filter {\n  json {}\n  if (parsed.a) {\n    sink {}\n  } else if (parsed.b) {\n    sink {}\n  } else if (parsed.c) {\n    sink {}\n  } else {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorTest.compileElseIfInSampledTrace",
            "filter {\n  json {}\n  extractor {\n    sampledTrace {\n      latency parsed.latency as Long\n      if (parsed.client_process.process_id as String != \"\") {\n        processId parsed.client_process.process_id as String\n      } else if (parsed.client_process.local as Boolean) {\n        processId ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.serviceInstance as String) as String\n      } else {\n        processId ProcessRegistry.generateVirtualRemoteProcess(parsed.service as String, parsed.serviceInstance as String, parsed.client_process.address as String) as String\n      }\n      detectPoint parsed.detect_point as String\n    }\n  }\n  sink {}\n}",
        ),
    ]);
}

/// The envoy-als rule: it reads a typed input (`HTTPAccessLogEntry`) through `parsed` with no parser.
const ENVOY_ALS: &str = "filter {\n  if (parsed?.response?.responseCode?.value as Integer < 400 && !parsed?.commonProperties?.responseFlags?.toString()?.trim()) {\n    abort {}\n  }\n  extractor {\n    if (parsed?.response?.responseCode) {\n      tag 'status.code': parsed?.response?.responseCode?.value\n    }\n    tag 'response.flag': parsed?.commonProperties?.responseFlags\n  }\n  sink {}\n}";

#[test]
fn lal_class_generator_condition_test() {
    run(&[
        ok(
            "LALClassGeneratorConditionTest.compileTagFunctionNestedInExtractor",
            "filter {\n  json {}\n  extractor {\n    if (tag(\"LOG_KIND\") == \"NET_PROFILING_SAMPLED_TRACE\") {\n      service parsed.service as String\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileSafeNavigationFieldAccess",
            "filter {\n  json {}\n  extractor {\n    service parsed?.response?.service as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileIfInsideExtractor",
            "filter {\n  json {}\n  extractor {\n    if (parsed?.status) {\n      tag 'http.status_code': parsed.status\n    }\n    tag 'response.flag': parsed.flags\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileIfInsideExtractorWithTagCondition",
            "filter {\n  json {}\n  extractor {\n    if (tag(\"LOG_KIND\") == \"NET_PROFILING\") {\n      service parsed.service as String\n      layer parsed.layer as String\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNeqNumericEmitsNumericOp",
            "filter {\n  json {}\n  if (parsed?.code as Integer != 403) {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileEqNumericEmitsNumericOp",
            "filter {\n  json {}\n  if (parsed?.code as Integer == 200) {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileEqStringUsesObjectsEquals",
            "filter {\n  json {}\n  if (parsed?.status == \"OK\") {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNeqStringUsesObjectsEquals",
            "filter {\n  json {}\n  if (parsed?.status != \"ERROR\") {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNeqNumericWithLogicalAnd",
            "filter {\n  json {}\n  if (parsed?.code as Integer != 401 && parsed?.code as Integer != 403) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileEqNullUsesObjectsEquals",
            "filter {\n  json {}\n  if (parsed?.status == null) {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNeqNullUsesObjectsEquals",
            "filter {\n  json {}\n  if (parsed?.status != null) {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileArithmeticSumOfIntegerTagsEmitsIntArithmetic",
            "filter {\n  if ((tag(\"a\") as Integer) + (tag(\"b\") as Integer) < 10000) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileArithmeticSumOfLongAndIntegerTagsWidensIntegerToLong",
            "filter {\n  if ((tag(\"a\") as Long) + (tag(\"b\") as Integer) < 10000) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileSubtractMultiplyDivideOnIntegerTagsStaysInInt",
            "filter {\n  if ((tag(\"a\") as Integer) - (tag(\"b\") as Integer) > 0) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileMultiplyOnIntegerTagsEmitsInteger",
            "filter {\n  extractor {\n    tag 'product': (tag(\"a\") as Integer) * (tag(\"b\") as Integer)\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDivideOnLongTagsEmitsLong",
            "filter {\n  extractor {\n    tag 'q': (tag(\"a\") as Long) / (tag(\"b\") as Long)\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDoubleArithmeticEmitsDouble",
            "filter {\n  extractor {\n    tag 'r': (tag(\"a\") as Double) - (tag(\"b\") as Double)\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileMixedDoubleAndIntPromotesToDouble",
            "filter {\n  extractor {\n    tag 'x': (tag(\"a\") as Integer) * 1.5\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileLongLiteralSuffixDrivesArithmeticType",
            "filter {\n  if ((tag(\"a\") as Integer) + 1000L > 0) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileFloatCastEmitsFloatArithmetic",
            "filter {\n  extractor {\n    tag 'r': (tag(\"a\") as Float) + (tag(\"b\") as Float)\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileStringConcatWithPlusRemainsStringConcat",
            "filter {\n  extractor {\n    tag 'key': tag(\"a\") + tag(\"b\")\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileMixedStringPlusIntegerStaysStringConcat",
            "filter {\n  extractor {\n    tag 'msg': \"count=\" + (tag(\"n\") as Integer)\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNumericPrefixThenStringConcatPreservesJavaSemantics",
            "filter {\n  extractor {\n    tag 'msg': 1 + 2 + \"x\"\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorConditionTest.compileMinusOnStringTagsIsCompileError",
            "filter {\n  extractor {\n    tag 'x': tag(\"a\") - tag(\"b\")\n  }\n  sink {}\n}",
            3,
            14,
            "operator '-' cannot be applied to a string",
        ),
        err(
            "LALClassGeneratorConditionTest.compileMultiplyOnStringTagsIsCompileError",
            "filter {\n  extractor {\n    tag 'x': \"hi\" * (tag(\"n\") as Integer)\n  }\n  sink {}\n}",
            3,
            14,
            "operator '*' cannot be applied to a string",
        ),
        ok(
            "LALClassGeneratorConditionTest.compilePrecedenceMultiplyBindsTighterThanPlus",
            "filter {\n  if ((tag(\"a\") as Integer) + (tag(\"b\") as Integer) * (tag(\"c\") as Integer) > 0) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileEnvoyAiGatewayTokenSumPattern",
            "filter {\n  if (tag(\"in\") != \"\" && tag(\"out\") != \"\") {\n    if ((tag(\"in\") as Integer) + (tag(\"out\") as Integer) < 10000) {\n      abort {}\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDoubleCastComparisonAgainstLiteralStaysInDouble",
            "filter {\n  if (tag(\"a\") as Double < 1.5) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDoubleCastComparisonAgainstDoubleCastValueAccess",
            "filter {\n  if ((tag(\"a\") as Double) < (tag(\"b\") as Double)) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileFloatCastComparisonStaysInFloat",
            "filter {\n  if (tag(\"a\") as Float < 1.5f) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileMixedDoubleAndIntegerComparisonPromotesToDouble",
            "filter {\n  if ((tag(\"a\") as Double) > (tag(\"b\") as Integer)) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileTopLevelIntegerCastVsDoubleLiteralWidensInteger",
            "filter {\n  if (tag(\"a\") as Integer < 1.5) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileTopLevelLongCastVsIntLiteralStaysInLong",
            "filter {\n  if (tag(\"a\") as Long > 100) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileTopLevelIntegerCastBothSidesStaysInInt",
            "filter {\n  if (tag(\"a\") as Integer > tag(\"b\") as Integer) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileTopLevelDoubleCastLhsIntegerCastRhsPromotesToDouble",
            "filter {\n  if (tag(\"a\") as Double > tag(\"b\") as Integer) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        Case {
            upstream: "LALClassGeneratorConditionTest.compileTypedProtoNullSafeNumericComparisonGuardsBothSides",
            header: &[HTTP_ENTRY],
            dsl: "filter {\n  if (parsed?.response?.responseCode?.value as Integer < parsed?.response?.responseCode?.value as Integer) {\n    abort {}\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALClassGeneratorConditionTest.compileTypedProtoUncastNumericFieldParticipatesInArithmetic",
            header: &[HTTP_ENTRY],
            dsl: "filter {\n  extractor {\n    tag 'x': parsed?.response?.responseCode?.value + 1\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
        ok(
            "LALClassGeneratorConditionTest.compileExponentLiteralDoesNotGetSpuriousDotZeroOnWidening",
            "filter {\n  if (tag(\"a\") as Float < 1e6) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileEqOnDualNumericCastsRoutesThroughIntComparison",
            "filter {\n  if (tag(\"a\") as Integer == tag(\"b\") as Integer) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileNeqOnStringDoesNotRouteThroughNumeric",
            "filter {\n  json {}\n  if (parsed.field as String != \"\") {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileStringConcatWithNumericInnerSetsStringResolvedType",
            "filter {\n  extractor {\n    def msg = \"count=\" + (tag(\"n\") as Integer)\n    tag 'm': msg\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorConditionTest.compileIndexLiteralRejectsOutOfIntRange",
            "filter {\n  json {}\n  extractor {\n    tag 'x': parsed.items[3000000000] as String\n  }\n  sink {}\n}",
            4,
            27,
            "outside the range of a Java int",
        ),
        err(
            "LALClassGeneratorConditionTest.compileRpmRejectsOutOfLongRange",
            "filter {\n  sink {\n    sampler {\n      rateLimit(\"id\") { rpm 99999999999999999999 }\n    }\n  }\n}",
            4,
            29,
            "out of range",
        ),
        err(
            "LALClassGeneratorConditionTest.compileNumericLiteralExceedingLongRangeIsRejected",
            "filter {\n  if (999999999999999999999 < 1) {\n    abort {}\n  }\n  sink {}\n}",
            2,
            7,
            "out of range",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDefWithLongCastRoutesThroughHelper",
            "filter {\n  extractor {\n    def n = tag(\"a\") as Long\n    tag 'x': n\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDefWithDoubleCastRoutesThroughHelper",
            "filter {\n  extractor {\n    def r = tag(\"a\") as Double\n    tag 'x': r\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorConditionTest.compileRpmRejectsSuffixedLiteral",
            "filter {\n  sink {\n    sampler {\n      rateLimit(\"id\") { rpm 100L }\n    }\n  }\n}",
            4,
            25,
            "plain integer",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileTopLevelIntegerCastNarrowsArithmeticResult",
            "filter {\n  if (((tag(\"a\") as Long) + 1) as Integer < 10) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileParenGroupingWithoutCastInArithmetic",
            "filter {\n  extractor {\n    tag 'x': (1 + 2) * 3\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileParenGroupingPropagatesNumericTypeForCondition",
            "filter {\n  if (((tag(\"a\") as Integer) + (tag(\"b\") as Integer)) * 2 < 10000) {\n    abort {}\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDefVariableWithDoubleCast",
            "filter {\n  extractor {\n    def ratio = tag(\"a\") as Double\n    tag 'x': ratio\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileDefVariableWithFloatCast",
            "filter {\n  extractor {\n    def ratio = tag(\"a\") as Float\n    tag 'x': ratio\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorConditionTest.compileFractionalLongSuffixIsLexerError",
            "filter {\n  if (tag(\"a\") as Double < 1.5L) {\n    abort {}\n  }\n  sink {}\n}",
            2,
            28,
            "an L or I suffix needs an integer",
        ),
        err(
            "LALClassGeneratorConditionTest.compileExponentLongSuffixIsLexerError",
            "filter {\n  extractor {\n    tag 'x': (tag(\"a\") as Long) + 1e3L\n  }\n  sink {}\n}",
            3,
            35,
            "an L or I suffix needs an integer",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileFloatLiteralSuffixedAcceptedInArithmetic",
            "filter {\n  extractor {\n    tag 'x': 1.5f + 2.5f\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorConditionTest.compileExponentLiteralEmitsDoubleArithmetic",
            "filter {\n  extractor {\n    tag 'x': (tag(\"a\") as Double) + 1e6\n  }\n  sink {}\n}",
        ),
    ]);
}

#[test]
fn lal_class_generator_def_test() {
    run(&[
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyDefWithToJson",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    tag 'env': config?.get(\"env\")?.getAsString()\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyDefWithToJsonArray",
            "filter {\n  json {}\n  extractor {\n    def items = toJsonArray(parsed.tags)\n    tag 'first': items?.get(0)?.getAsString()\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyDefWithCondition",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    if (config?.has(\"env\")) {\n      tag 'env': config?.get(\"env\")?.getAsString()\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileDefWithNestedJsonAccess",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    tag 'env': config?.get(\"env\")?.getAsString()\n    tag 'region': config?.getAsJsonObject(\"location\")?.get(\"region\")?.getAsString()\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileDefWithToJsonArrayAndIndex",
            "filter {\n  json {}\n  extractor {\n    def items = toJsonArray(parsed.tags)\n    if (items?.size() > 0) {\n      tag 'first': items?.get(0)?.getAsString()\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileMultipleDefs",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    def roles = toJsonArray(parsed.roles)\n    tag 'env': config?.get(\"env\")?.getAsString()\n    if (roles?.size() > 0) {\n      tag 'role': roles?.get(0)?.getAsString()\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileDefWithConditionGuard",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    if (config?.has(\"payload\")) {\n      tag 'name': config?.getAsJsonObject(\"payload\")?.get(\"name\")?.getAsString()\n      tag 'iss': config?.getAsJsonObject(\"payload\")?.get(\"iss\")?.getAsString()\n    }\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyDefWithStringCast",
            "filter {\n  json {}\n  extractor {\n    def svc = parsed.service as String\n    tag 'svc': svc\n  }\n  sink {}\n}",
        ),
        Case {
            upstream: "LALClassGeneratorDefTest.compileDefWithQualifiedNameCast",
            header: &[HTTP_ENTRY],
            dsl: "filter {\n  extractor {\n    def common = parsed?.commonProperties as io.envoyproxy.envoy.data.accesslog.v3.AccessLogCommon\n    tag 'cluster': common?.upstreamCluster\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyDefVarAsMethodArg",
            "filter {\n  json {}\n  extractor {\n    def key = parsed.fieldName as String\n    def config = toJson(parsed.metadata)\n    tag 'val': config?.get(key)?.getAsString()\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorDefTest.compileAndVerifyBoolLiteralAsMethodArg",
            "filter {\n  json {}\n  extractor {\n    def config = toJson(parsed.metadata)\n    tag 'val': config?.get(\"key\")?.getAsBoolean()\n  }\n  sink {}\n}",
        ),
    ]);
}

#[test]
fn lal_class_generator_extractor_test() {
    run(&[
        ok(
            "LALClassGeneratorExtractorTest.compileProcessRegistryCall",
            "filter {\n  json {}\n  extractor {\n    service ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.serviceInstance as String) as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorExtractorTest.compileProcessRegistryWithThreeArgs",
            "filter {\n  json {}\n  extractor {\n    service ProcessRegistry.generateVirtualRemoteProcess(parsed.service as String, parsed.serviceInstance as String, parsed.address as String) as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALClassGeneratorExtractorTest.compileMetricsBlock",
            "filter {\n  json {}\n  extractor {\n    metrics {\n      timestamp log.timestamp as Long\n      labels level: parsed.level, service: log.service\n      name \"nginx_error_log_count\"\n      value 1\n    }\n  }\n  sink {}\n}",
        ),
        err(
            "LALClassGeneratorExtractorTest.compileEnvoyAlsAbortRuleFailsWithoutInputType",
            ENVOY_ALS,
            2,
            15,
            "needs a typed input",
        ),
        ok(
            "LALClassGeneratorExtractorTest.compileNoParserFallsBackToLogMetadata",
            "filter {\n  extractor {\n    service parsed.service as String\n    instance parsed.serviceInstance as String\n  }\n  sink {}\n}",
        ),
        Case {
            upstream: "LALClassGeneratorExtractorTest.compileInputTypeGeneratesDirectGetterCalls",
            header: &[HTTP_ENTRY],
            dsl: ENVOY_ALS,
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALClassGeneratorExtractorTest.compileOutputFieldAssignment",
            header: &["outputType: org.example.TestOutputType"],
            dsl: "filter {\n  json {}\n  extractor {\n    statement parsed.statement as String\n    latency parsed.latency as Long\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALClassGeneratorExtractorTest.compileOutputFieldWithOutputTypeValidation",
            header: &["outputType: org.example.TestOutputType"],
            dsl: "filter {\n  json {}\n  extractor {\n    statement parsed.stmt as String\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
        // The same rule in a layer whose receiver registers a typed input (envoy's MESH), as the
        // bundled `lal/envoy-als.yaml` is.
        Case {
            upstream: "LALClassGeneratorExtractorTest.compileInputTypeGeneratesDirectGetterCalls (layer MESH)",
            header: &["layer: MESH"],
            dsl: ENVOY_ALS,
            expect: Expect::Ok,
        },
    ]);
}

#[test]
fn lal_class_generator_sink_test() {
    run(&[
        ok(
            "LALClassGeneratorSinkTest.compileSamplerWithRateLimit",
            "filter {\n  json {}\n  sink {\n    sampler {\n      rateLimit('service:error') {\n        rpm 6000\n      }\n    }\n  }\n}",
        ),
        ok(
            "LALClassGeneratorSinkTest.compileSamplerWithInterpolatedId",
            "filter {\n  json {}\n  sink {\n    sampler {\n      rateLimit(\"${log.service}:${parsed.code}\") {\n        rpm 6000\n      }\n    }\n  }\n}",
        ),
        ok(
            "LALClassGeneratorSinkTest.compileSamplerWithSafeNavInterpolatedId",
            "filter {\n  json {}\n  sink {\n    sampler {\n      rateLimit(\"${log.service}:${parsed?.commonProperties?.responseFlags?.toString()}\") {\n        rpm 6000\n      }\n    }\n  }\n}",
        ),
        ok(
            "LALClassGeneratorSinkTest.compileSamplerWithIfAndRateLimit",
            "filter {\n  json {}\n  sink {\n    sampler {\n      if (parsed?.error) {\n        rateLimit('svc:err') {\n          rpm 6000\n        }\n      } else {\n        rateLimit('svc:ok') {\n          rpm 3000\n        }\n      }\n    }\n  }\n}",
        ),
    ]);
}

/// The known disagreements of issue 9 that are not one upstream method each.
#[test]
fn issue_9_lal_cases() {
    run(&[
        // LALLexer: a STRING is not interpolated, so a regex may end in `$`.
        ok(
            "LALLexer STRING (regexp ending in $)",
            "filter {\n  text {\n    regexp \"^(?<level>\\\\S+) (?<msg>.*)$\"\n  }\n  sink {}\n}",
        ),
        ok(
            "LALParser filterContent (no separators)",
            "filter { json {} extractor { service parsed.service as String } sink {} }",
        ),
        err(
            "LALParser rateLimitContent (rpm is an int)",
            "filter {\n  sink {\n    sampler {\n      rateLimit(\"id\") { rpm 3000000000 }\n    }\n  }\n}",
            4,
            25,
            "plain integer literal from 0 to 2147483647",
        ),
        err(
            "LALParser rateLimitContent (rpm is a NUMBER, not an expression)",
            "filter {\n  json {}\n  sink {\n    sampler {\n      rateLimit(\"id\") { rpm parsed.rpm as Integer }\n    }\n  }\n}",
            5,
            25,
            "plain integer literal",
        ),
    ]);
}

#[test]
fn lal_script_parser_test() {
    run(&[
        ok(
            "LALScriptParserTest.parseMinimalFilter",
            "filter { sink {} }",
        ),
        ok(
            "LALScriptParserTest.parseJsonParserWithExtractorAndSink",
            "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n    layer parsed.layer as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALScriptParserTest.parseTextParserWithRegexp",
            "filter {\n  text {\n    regexp '.+\"(?<request>.+)\"(?<status>\\d{3}).+'\n  }\n  sink {}\n}",
        ),
        err(
            "LALScriptParserTest.parseMetricsBlock (no parser: parsed.level is not log metadata)",
            "filter {\n  extractor {\n    metrics {\n      timestamp log.timestamp as Long\n      labels level: parsed.level, service: log.service\n      name \"nginx_error_log_count\"\n      value 1\n    }\n  }\n  sink {}\n}",
            5,
            28,
            "'parsed.level' needs a typed input",
        ),
        ok(
            "LALScriptParserTest.parseSinkWithSampler",
            "filter {\n  sink {\n    sampler {\n      rateLimit('service:error') {\n        rpm 6000\n      }\n    }\n  }\n}",
        ),
        err(
            "LALScriptParserTest.parseInterpolatedRateLimitId (no parser: parsed.code is not log metadata)",
            "filter {\n  sink {\n    sampler {\n      rateLimit(\"${log.service}:${parsed.code}\") {\n        rpm 3000\n      }\n    }\n  }\n}",
            4,
            42,
            "'parsed.code' needs a typed input",
        ),
        ok(
            "LALScriptParserTest.parsePlainRateLimitIdNotInterpolated",
            "filter {\n  sink {\n    sampler {\n      rateLimit('service:error') {\n        rpm 6000\n      }\n    }\n  }\n}",
        ),
        err(
            "LALScriptParserTest.parseIfCondition (no parser: parsed.status is not log metadata)",
            "filter {\n  if (parsed.status) {\n    extractor {\n      layer parsed.layer as String\n    }\n    sink {}\n  }\n}",
            2,
            14,
            "'parsed.status' needs a typed input",
        ),
        err(
            "LALScriptParserTest.parseElseIfChain (no parser: parsed.a is not log metadata)",
            "filter {\n  if (parsed.a) {\n    sink {}\n  } else if (parsed.b) {\n    sink {}\n  } else if (parsed.c) {\n    sink {}\n  } else {\n    sink {}\n  }\n}",
            2,
            14,
            "'parsed.a' needs a typed input",
        ),
        Case {
            upstream: "LALScriptParserTest.parseElseIfWithoutFinalElse",
            header: &["inputType: org.example.Typed"],
            dsl: "filter {\n  if (parsed.a) {\n    sink {}\n  } else if (parsed.b) {\n    sink {}\n  }\n}",
            expect: Expect::Ok,
        },
        err(
            "LALScriptParserTest.parseSyntaxErrorThrows",
            "filter {",
            1,
            8,
            "is never closed",
        ),
        ok(
            "LALScriptParserTest.parseTagFunctionCallInCondition",
            "filter {\n  if (tag(\"LOG_KIND\") == \"SLOW_SQL\") {\n    sink {}\n  }\n}",
        ),
        ok(
            "LALScriptParserTest.parseTagFunctionCallAsSingleCondition",
            "filter {\n  if (tag(\"LOG_KIND\")) {\n    sink {}\n  }\n}",
        ),
        err(
            "LALScriptParserTest.parseSafeNavigationFields (no parser: parsed.response is not log metadata)",
            "filter {\n  extractor {\n    service parsed?.response?.service as String\n  }\n  sink {}\n}",
            3,
            21,
            "'parsed.response' needs a typed input",
        ),
        err(
            "LALScriptParserTest.parseSafeNavigationMethods (no parser: parsed.flags is not log metadata)",
            "filter {\n  extractor {\n    service parsed?.flags?.toString()?.trim() as String\n  }\n  sink {}\n}",
            3,
            21,
            "'parsed.flags' needs a typed input",
        ),
        ok(
            "LALScriptParserTest.parseMethodWithArguments",
            "filter {\n  json {}\n  extractor {\n    service ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.instance as String) as String\n  }\n  sink {}\n}",
        ),
        ok(
            "LALScriptParserTest.parseIfInsideExtractor",
            "filter {\n  json {}\n  extractor {\n    if (parsed.status) {\n      tag 'http.status_code': parsed.status\n    }\n    tag 'response.flag': parsed.flags\n  }\n  sink {}\n}",
        ),
        err(
            "LALScriptParserTest.parseIfInsideSink (no parser: parsed.error is not log metadata)",
            "filter {\n  sink {\n    sampler {\n      if (parsed.error) {\n        rateLimit('svc:err') {\n          rpm 6000\n        }\n      } else {\n        rateLimit('svc:ok') {\n          rpm 3000\n        }\n      }\n    }\n  }\n}",
            4,
            18,
            "'parsed.error' needs a typed input",
        ),
        err(
            "LALScriptParserTest.parseOutputFieldAssignment (no outputType: 'statement' is no field of Log)",
            "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n    statement parsed.statement as String\n    latency parsed.latency as Long\n  }\n  sink {}\n}",
            5,
            5,
            "unknown statement 'statement' in extractor",
        ),
        Case {
            upstream: "LALScriptParserTest.parseOutputFieldAssignment (outputType: SlowSQL)",
            header: &["outputType: SlowSQL"],
            dsl: "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n    statement parsed.statement as String\n    latency parsed.latency as Long\n  }\n  sink {}\n}",
            expect: Expect::Ok,
        },
    ]);
}

/// `LALScriptExecutionTest` compiles every rule of its rule files before running them; the
/// feature-case file compiles here too, rule for rule (`layer: auto` rules keep `auto`).
#[test]
fn lal_script_execution_test_rule_file_compiles() {
    let text = include_str!("upstream/execution-basic.yaml");
    let file = match compile(DslKind::Lal, text.as_bytes()) {
        Ok(hotrule_rule_compiler::Compiled::Lal(file)) => file,
        other => panic!("execution-basic.yaml: {other:?}"),
    };
    assert_eq!(file.rules.len(), 24);
    assert_eq!(
        file.keys()
            .keys()
            .filter(|key| key.0.starts_with("auto:"))
            .count(),
        3
    );
}

#[test]
fn dsl_security_test() {
    run(&[
        err(
            "DSLSecurityTest (System.exit)",
            "filter {\n  System.exit(0)\n  sink {}\n}",
            2,
            3,
            "expected a LAL statement in filter, found an expression",
        ),
        err(
            "DSLSecurityTest (for)",
            "filter {\n  for (;;) {}\n  sink {}\n}",
            2,
            8,
            "unexpected ';', expected an expression",
        ),
        err(
            "DSLSecurityTest (while)",
            "filter {\n  while (true) {}\n  sink {}\n}",
            2,
            3,
            "unknown statement 'while' in filter",
        ),
        err(
            "DSLSecurityTest (do while)",
            "filter {\n  do {} while (true)\n  sink {}\n}",
            2,
            3,
            "unknown statement 'do' in filter",
        ),
        err(
            "DSLSecurityTest (Files.delete)",
            "filter {\n  Files.delete(\"/etc/pwd\");\n  sink {}\n}",
            2,
            3,
            "expected a LAL statement in filter, found an expression",
        ),
        err(
            "DSLSecurityTest (GroovyShell)",
            "filter {\n  new GroovyShell().evaluate('malicious codes or URL')\n  sink {}\n}",
            2,
            3,
            "unknown statement 'new' in filter",
        ),
        err(
            "DSLSecurityTest (disallowed methods)",
            "filter {\njava.util.Collections.singleton(1)}",
            2,
            1,
            "expected a LAL statement in filter, found an expression",
        ),
    ]);
}
