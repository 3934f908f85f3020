//! `LALClassGeneratorConditionTest`.

use super::*;

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
