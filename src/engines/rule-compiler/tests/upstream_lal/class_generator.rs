//! `LALClassGeneratorBasicTest` and `LALClassGeneratorTest`.

use super::*;

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
