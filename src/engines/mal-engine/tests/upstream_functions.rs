//! SkyWalking's meter-analyzer DSL tests (`oap-server/analyzer/meter-analyzer/src/test/java/.../v2/dsl`),
//! ported as table tests: `FunctionTest`, histograms, `DecorateTest`. Each row names the upstream class and case; rows whose upstream
//! input was not transcribed verbatim say "(after ...)" and follow the behaviour the case pins down.

mod common;

use common::*;
use hotrule_mal_engine::{EngineState, EvalError};

#[test]
fn function_test() {
    let input = || {
        vec![
            s("m", &[("idc", "t1"), ("region", "us")], 4.0),
            s("m", &[("idc", "t2")], 6.0),
        ]
    };
    check(vec![
        (
            "FunctionTest tag add",
            "m.tag({tags -> tags.new_name = 'x'})",
            input(),
            Some(expect(&[
                (&[("idc", "t1"), ("region", "us"), ("new_name", "x")], 4.0),
                (&[("idc", "t2"), ("new_name", "x")], 6.0),
            ])),
        ),
        (
            "FunctionTest tag update",
            "m.tag({tags -> tags.idc = 'dc-' + tags.idc})",
            input(),
            Some(expect(&[
                (&[("idc", "dc-t1"), ("region", "us")], 4.0),
                (&[("idc", "dc-t2")], 6.0),
            ])),
        ),
        (
            "FunctionTest tag remove",
            "m.tag({tags -> tags.remove('region')})",
            input(),
            Some(expect(&[(&[("idc", "t1")], 4.0), (&[("idc", "t2")], 6.0)])),
        ),
        (
            "FunctionTest tag returning a map replaces labels",
            "m.tag({tags -> ['only': tags.idc]})",
            input(),
            Some(expect(&[
                (&[("only", "t1")], 4.0),
                (&[("only", "t2")], 6.0),
            ])),
        ),
        (
            "FunctionTest filter closure",
            "m.filter({tags -> tags.region == 'us'})",
            input(),
            Some(expect(&[(&[("idc", "t1"), ("region", "us")], 4.0)])),
        ),
        (
            "FunctionTest forEach",
            "m.forEach(['client', 'server'], {prefix, tags -> tags[prefix + '_idc'] = tags.idc})",
            input(),
            Some(expect(&[
                (
                    &[
                        ("idc", "t1"),
                        ("region", "us"),
                        ("client_idc", "t1"),
                        ("server_idc", "t1"),
                    ],
                    4.0,
                ),
                (
                    &[("idc", "t2"), ("client_idc", "t2"), ("server_idc", "t2")],
                    6.0,
                ),
            ])),
        ),
        (
            "FunctionTest negative",
            "m.negative()",
            input(),
            Some(expect(&[
                (&[("idc", "t1"), ("region", "us")], -4.0),
                (&[("idc", "t2")], -6.0),
            ])),
        ),
        (
            "FunctionTest plus/multiply methods",
            "m.plus(1).multiply(2)",
            input(),
            Some(expect(&[
                (&[("idc", "t1"), ("region", "us")], 10.0),
                (&[("idc", "t2")], 14.0),
            ])),
        ),
        (
            "(after MALElvisFalsyTest) ?: falls back on an empty string",
            "m.tag({tags -> tags.region = tags.region ?: 'none'})",
            vec![
                s("m", &[("region", "")], 1.0),
                s("m", &[("region", "eu")], 2.0),
            ],
            Some(expect(&[
                (&[("region", "none")], 1.0),
                (&[("region", "eu")], 2.0),
            ])),
        ),
        (
            "closures: safe navigation and replaceAll",
            "m.tag({tags -> tags.short = tags['host']?.replaceAll('[.:].*', '')})",
            vec![s("m", &[("host", "node1.example:9100")], 1.0)],
            Some(expect(&[(
                &[("host", "node1.example:9100"), ("short", "node1")],
                1.0,
            )])),
        ),
        (
            "closures: a missing tag is null, so == '' is false",
            "m.filter({tags -> tags.absent == ''})",
            input(),
            None,
        ),
        (
            "closures: in [...]",
            "m.filter({tags -> tags.idc in ['t2', 't3']})",
            input(),
            Some(expect(&[(&[("idc", "t2")], 6.0)])),
        ),
        (
            "closures: if/else-if branches",
            "m.tag({tags -> if (tags.idc == 't1') { tags.n = 'one' } else if (tags.idc == 't2') { tags.n = 'two' }})",
            input(),
            Some(expect(&[
                (&[("idc", "t1"), ("region", "us"), ("n", "one")], 4.0),
                (&[("idc", "t2"), ("n", "two")], 6.0),
            ])),
        ),
    ]);
}

#[test]
fn function_test_rows() {
    let name = "http_success_request";
    let us = || vec![s(name, &[("region", "us")], 0.0)];
    let buckets = |values: [f64; 3]| {
        vec![
            s(name, &[("le", "0.025")], values[0]),
            s(name, &[("le", "0.75")], values[1]),
            s(name, &[("le", "1.25")], values[2]),
        ]
    };
    check(vec![
        // v2 rejects the bare-closure form at parse time; the engine runs it as v1 did.
        (
            "FunctionTest tag-override (v1)",
            "http_success_request.tag({ ['svc':'product', 'instance':'10.0.0.1'] })",
            us(),
            Some(expect(&[(
                &[("svc", "product"), ("instance", "10.0.0.1")],
                0.0,
            )])),
        ),
        (
            "FunctionTest tag-add",
            "http_success_request.tag({tags -> tags.az = 'az1' })",
            us(),
            Some(expect(&[(&[("region", "us"), ("az", "az1")], 0.0)])),
        ),
        (
            "FunctionTest tag-remove",
            "http_success_request.tag({tags -> tags.remove('region') })",
            us(),
            Some(expect(&[(&[], 0.0)])),
        ),
        (
            "FunctionTest tag-update",
            "http_success_request.tag({tags -> if (tags['region'] == 'us') {tags.region = 'zh'} })",
            us(),
            Some(expect(&[(&[("region", "zh")], 0.0)])),
        ),
        (
            "FunctionTest tag-append",
            "http_success_request.tag({tags -> tags.region = 'prefix::' + tags.region})",
            us(),
            Some(expect(&[(&[("region", "prefix::us")], 0.0)])),
        ),
        (
            "FunctionTest histogram",
            "http_success_request.histogram()",
            buckets([100.0, 12.0, 36.0]),
            Some(expect(&[
                (&[("le", "25")], 100.0),
                (&[("le", "750")], 12.0),
                (&[("le", "1250")], 36.0),
            ])),
        ),
        (
            "FunctionTest histogram_percentile",
            "http_success_request.histogram().histogram_percentile([75,99])",
            buckets([100.0, 22.0, 30.0]),
            Some(expect(&[
                (&[("le", "25")], 100.0),
                (&[("le", "750")], 22.0),
                (&[("le", "1250")], 30.0),
            ])),
        ),
        (
            "FunctionTest for-each",
            "http_success_request.forEach(['v1', 'v2'], {element, tags -> tags[element] = 'test'})",
            vec![
                s(name, &[("region", "us")], 0.0),
                s(name, &[("region", "cn")], 0.0),
            ],
            Some(expect(&[
                (&[("region", "us"), ("v1", "test"), ("v2", "test")], 0.0),
                (&[("region", "cn"), ("v1", "test"), ("v2", "test")], 0.0),
            ])),
        ),
    ]);
}

#[test]
fn histogram_test() {
    let input = vec![
        s("latency", &[("le", "0.025")], 1.0),
        s("latency", &[("le", "1.001")], 2.0),
        s("latency", &[("le", "Infinity")], 3.0),
        s("latency", &[("le", "0.0001")], 4.0),
    ];
    check(vec![
        (
            "FunctionTest histogram: seconds to ms, truncated, sorted",
            "latency.histogram()",
            input.clone(),
            Some(expect(&[
                (&[("le", "0")], 4.0),
                (&[("le", "25")], 1.0),
                (&[("le", "1000")], 2.0),
                (&[("le", "9223372036854775807")], 3.0),
            ])),
        ),
        (
            "FunctionTest histogram with a unit",
            "latency.tagEqual('le', '0.025').histogram('le', TimeUnit.MILLISECONDS)",
            input.clone(),
            Some(expect(&[(&[("le", "0")], 1.0)])),
        ),
        (
            "FunctionTest histogram_percentile is metadata only",
            "latency.histogram().histogram_percentile([50, 99])",
            input.clone(),
            Some(expect(&[
                (&[("le", "0")], 4.0),
                (&[("le", "25")], 1.0),
                (&[("le", "1000")], 2.0),
                (&[("le", "9223372036854775807")], 3.0),
            ])),
        ),
    ]);
    let plus_inf = vec![s("latency", &[("le", "+Inf")], 1.0)];
    assert!(
        matches!(
            run("latency.histogram()", &plus_inf),
            Err(EvalError::NotANumber { .. })
        ),
        "reference 1.9: +Inf fails the rule"
    );
}

#[test]
fn decorate_test() {
    let name = "http_success_request";
    let samples = vec![
        s(name, &[("idc", "t1")], 50.0),
        s(
            name,
            &[("idc", "t1"), ("region", "us"), ("instance", "10.0.0.1")],
            100.0,
        ),
    ];
    let parsed = hotrule_rule_compiler::parse_mal_expression(
        "http_success_request.sum(['idc']).service(['idc'], Layer.GENERAL).decorate({ me -> me.attr0 = me.layer.name()})",
    )
    .expect("parse");
    let result = hotrule_mal_engine::run_expression(
        &parsed,
        &families(&samples),
        T0,
        &mut EngineState::default(),
    )
    .expect("DecorateTest testDecorate");
    let entities = result.entities.unwrap_or_default();
    assert_eq!(entities.len(), 1);
    assert_eq!(
        entities[0].0.attrs[0].as_deref(),
        Some("GENERAL"),
        "DecorateTest testDecorate"
    );
}

#[test]
fn self_referencing_closures_fail_or_run_without_panicking() {
    let input = vec![s("m", &[("a", "1")], 1.0)];
    for expr in [
        "m.tag({tags -> tags.put(tags, 'x')})",
        "m.tag({tags -> tags.self = tags; tags.text = \"${tags}\"; tags.remove('self')})",
        "m.filter({tags -> tags.self = tags; tags == tags})",
        "m.tag({tags -> tags.self = tags})",
        "m.tag({tags -> tags.x = tags.a.substring(5)})",
        "m.tag({tags -> tags.x = tags.nothing.trim()})",
        "m.tag({tags -> tags.x = (tags.a as Integer) / 0})",
        "m.tag({tags -> tags.x = tags.a =~ /(a/})",
    ] {
        // Either outcome is fine; the point is that nothing panics or overflows the stack.
        let _ = run(expr, &input);
    }
    assert!(
        matches!(
            run("m.tag({tags -> tags.self = tags})", &input),
            Err(EvalError::TypeMismatch { .. })
        ),
        "a map is not a label value"
    );
}
