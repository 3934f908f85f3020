//! `LALClassGeneratorDefTest`, `LALClassGeneratorExtractorTest`, `LALClassGeneratorSinkTest`, the issue 9 cases.

use super::*;

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
