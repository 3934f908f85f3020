//! `LALScriptParserTest`, `LALScriptExecutionTest`'s rule file, `DSLSecurityTest`.

use super::*;

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
    let text = include_str!("../upstream/execution-basic.yaml");
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

/// `LALExpressionExecutionTest` compiles the rules of `test-lal/oap-cases/*.yaml` and
/// `test-lal/feature-cases/*.yaml`; these are the ones that are not copies of bundled rules.
#[test]
fn lal_expression_execution_test_rule_files() {
    run(&[
        Case {
            upstream: "LALExpressionExecutionTest (oap-cases/network-profiling-e2e.yaml)",
            header: &["layer: K8S_SERVICE", "outputType: SampledTrace"],
            dsl: "filter {\n  json{\n  }\n  extractor{\n    if (tag(\"LOG_KIND\") == \"NET_PROFILING_SAMPLED_TRACE\") {\n      latency parsed.latency as Long\n      uri ((parsed.trace_provider as String) + \"-\" + (parsed.uri as String))\n      reason parsed.reason as String\n\n      if (parsed.client_process.process_id as String != \"\") {\n       processId parsed.client_process.process_id as String\n      } else if (parsed.client_process.local as Boolean\n          || (parsed.client_process.address as String).split(\":\")[0].endsWith('.1')\n          || (parsed.client_process.address as String).split(\":\")[1] == \"53\") {\n        processId ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.serviceInstance as String) as String\n      } else {\n        processId ProcessRegistry.generateVirtualProcess(parsed.service as String, parsed.serviceInstance as String, 'UNKNOWN_REMOTE') as String\n      }\n\n      if (parsed.server_process.process_id as String != \"\") {\n        destProcessId parsed.server_process.process_id as String\n      } else if (parsed.server_process.local as Boolean\n          || (parsed.server_process.address as String).split(\":\")[0].endsWith('.1')\n          || (parsed.server_process.address as String).split(\":\")[1] == \"53\") {\n        destProcessId ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.serviceInstance as String) as String\n      } else {\n        destProcessId ProcessRegistry.generateVirtualProcess(parsed.service as String, parsed.serviceInstance as String, 'UNKNOWN_REMOTE') as String\n      }\n\n      detectPoint parsed.detect_point as String\n\n      if (parsed.component as String == \"http\" && parsed.ssl as Boolean) {\n        componentId 129\n      } else if (parsed.component as String == \"http\") {\n        componentId 49\n      } else if (parsed.ssl as Boolean) {\n        componentId 130\n      } else {\n        componentId 110\n      }\n    }\n  }\n  sink {\n  }\n}",
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALExpressionExecutionTest (feature-cases/source-attribution.yaml attribution-minimal)",
            header: &["layer: GENERAL"],
            dsl: "filter {\n  text {\n    abortOnFailure false\n  }\n  sink {\n  }\n}",
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALExpressionExecutionTest (feature-cases/source-attribution.yaml attribution-one-extractor)",
            header: &["layer: GENERAL"],
            dsl: "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n    endpoint parsed.endpoint as String\n  }\n  sink {\n  }\n}",
            expect: Expect::Ok,
        },
        Case {
            upstream: "LALExpressionExecutionTest (feature-cases/source-attribution.yaml attribution-multi-block)",
            header: &["layer: GENERAL"],
            dsl: "filter {\n  json {}\n  extractor {\n    service parsed.service as String\n  }\n  if (tag(\"LOG_KIND\") == \"SLOW_SQL\") {\n    extractor {\n      endpoint parsed.endpoint as String\n    }\n  }\n  sink {\n  }\n}",
            expect: Expect::Ok,
        },
    ]);
}
