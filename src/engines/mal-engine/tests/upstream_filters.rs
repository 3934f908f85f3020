//! SkyWalking's meter-analyzer DSL tests (`oap-server/analyzer/meter-analyzer/src/test/java/.../v2/dsl`),
//! ported as table tests: `TagFilterTest`, `ValueFilterTest`. Each row names the upstream class and case; rows whose upstream
//! input was not transcribed verbatim say "(after ...)" and follow the behaviour the case pins down.

mod common;

use common::*;

fn tagged() -> Vec<hotrule_mal_engine::Sample> {
    vec![
        s("m", &[("idc", "t1"), ("region", "us")], 1.0),
        s("m", &[("idc", "t2")], 2.0),
        s("m", &[("idc", "t10"), ("region", "")], 3.0),
    ]
}

#[test]
fn tag_filter_test() {
    check(vec![
        (
            "TagFilterTest tagEqual",
            "m.tagEqual('idc', 't1')",
            tagged(),
            Some(expect(&[(&[("idc", "t1"), ("region", "us")], 1.0)])),
        ),
        (
            "TagFilterTest tagEqual pairs are AND-ed",
            "m.tagEqual('idc', 't1', 'region', 'cn')",
            tagged(),
            None,
        ),
        (
            "TagFilterTest tagEqual('region','') keeps missing and empty",
            "m.tagEqual('region', '')",
            tagged(),
            Some(expect(&[
                (&[("idc", "t2")], 2.0),
                (&[("idc", "t10"), ("region", "")], 3.0),
            ])),
        ),
        (
            "TagFilterTest tagNotEqual('region','') keeps non-empty",
            "m.tagNotEqual('region', '')",
            tagged(),
            Some(expect(&[(&[("idc", "t1"), ("region", "us")], 1.0)])),
        ),
        (
            "TagFilterTest tagNotEqual",
            "m.tagNotEqual('idc', 't1')",
            tagged(),
            Some(expect(&[
                (&[("idc", "t2")], 2.0),
                (&[("idc", "t10"), ("region", "")], 3.0),
            ])),
        ),
        (
            "TagFilterTest tagMatch is anchored",
            "m.tagMatch('idc', 't1')",
            tagged(),
            Some(expect(&[(&[("idc", "t1"), ("region", "us")], 1.0)])),
        ),
        (
            "TagFilterTest tagMatch alternation",
            "m.tagMatch('idc', 't1|t2')",
            tagged(),
            Some(expect(&[
                (&[("idc", "t1"), ("region", "us")], 1.0),
                (&[("idc", "t2")], 2.0),
            ])),
        ),
        (
            "TagFilterTest tagNotMatch",
            "m.tagNotMatch('idc', 't1.*')",
            tagged(),
            Some(expect(&[(&[("idc", "t2")], 2.0)])),
        ),
    ]);
}

#[test]
fn tag_filter_test_rows() {
    let name = "http_success_request";
    let sf = vec![
        s(name, &[("idc", "t2")], 50.0),
        s(
            name,
            &[("idc", "t3"), ("region", "cn"), ("svc", "catalog")],
            50.0,
        ),
        s(
            name,
            &[("idc", "t1"), ("region", "us"), ("svc", "product")],
            50.0,
        ),
        s(
            name,
            &[("idc", "t1"), ("region", "us"), ("instance", "10.0.0.1")],
            50.0,
        ),
        s(
            name,
            &[("idc", "t3"), ("region", "cn"), ("instance", "10.0.0.1")],
            3.0,
        ),
    ];
    let all: Vec<(hotrule_mal_engine::Labels, f64)> = {
        let mut all: Vec<_> = sf.iter().map(|s| (s.labels.clone(), s.value)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    };
    check(vec![
        (
            "TagFilterTest tagEqual",
            "http_success_request.tagEqual('idc', 't3')",
            sf.clone(),
            Some(expect(&[
                (&[("idc", "t3"), ("region", "cn"), ("svc", "catalog")], 50.0),
                (
                    &[("idc", "t3"), ("region", "cn"), ("instance", "10.0.0.1")],
                    3.0,
                ),
            ])),
        ),
        (
            "TagFilterTest tagNotEqual",
            "http_success_request.tagNotEqual('idc', 't1')",
            sf.clone(),
            Some(expect(&[
                (&[("idc", "t2")], 50.0),
                (&[("idc", "t3"), ("region", "cn"), ("svc", "catalog")], 50.0),
                (
                    &[("idc", "t3"), ("region", "cn"), ("instance", "10.0.0.1")],
                    3.0,
                ),
            ])),
        ),
        (
            "TagFilterTest tagMatch",
            "http_success_request.tagMatch('idc', 't1|t2|t3')",
            sf.clone(),
            Some(all),
        ),
        (
            "TagFilterTest tagNotMatch",
            "http_success_request.tagNotMatch('idc', 't1|t3')",
            sf.clone(),
            Some(expect(&[(&[("idc", "t2")], 50.0)])),
        ),
    ]);
}

#[test]
fn value_filter_test() {
    let input = || {
        vec![
            s("m", &[("k", "a")], 1.0),
            s("m", &[("k", "b")], 0.0),
            s("m", &[("k", "c")], -0.0),
            s("m", &[("k", "d")], 2.5),
        ]
    };
    check(vec![
        (
            "value filters (after ValueFilterTest): valueEqual",
            "m.valueEqual(1)",
            input(),
            Some(expect(&[(&[("k", "a")], 1.0)])),
        ),
        (
            "value filters (after ValueFilterTest): valueEqual uses Double.compare (-0.0 != 0.0)",
            "m.valueEqual(0)",
            input(),
            Some(expect(&[(&[("k", "b")], 0.0)])),
        ),
        (
            "value filters (after ValueFilterTest): valueNotEqual",
            "m.valueNotEqual(1)",
            input(),
            Some(expect(&[
                (&[("k", "b")], 0.0),
                (&[("k", "c")], -0.0),
                (&[("k", "d")], 2.5),
            ])),
        ),
        (
            "value filters (after ValueFilterTest): valueGreater",
            "m.valueGreater(1)",
            input(),
            Some(expect(&[(&[("k", "d")], 2.5)])),
        ),
        (
            "value filters (after ValueFilterTest): valueGreaterEqual",
            "m.valueGreaterEqual(1)",
            input(),
            Some(expect(&[(&[("k", "a")], 1.0), (&[("k", "d")], 2.5)])),
        ),
        (
            "value filters (after ValueFilterTest): valueLess",
            "m.valueLess(0)",
            input(),
            Some(expect(&[(&[("k", "c")], -0.0)])),
        ),
        (
            "value filters (after ValueFilterTest): valueLessEqual",
            "m.valueLessEqual(0)",
            input(),
            Some(expect(&[(&[("k", "b")], 0.0), (&[("k", "c")], -0.0)])),
        ),
        (
            "value filters (after ValueFilterTest): no survivor is EMPTY",
            "m.valueGreater(100)",
            input(),
            None,
        ),
    ]);
}

#[test]
fn value_filter_test_rows() {
    let name = "http_success_request";
    let input = || {
        vec![
            s(name, &[("idc", "t1")], 2.0),
            s(name, &[("idc", "t2")], 2.0),
            s(name, &[("idc", "t3")], 1.0),
        ]
    };
    let t3 = || Some(expect(&[(&[("idc", "t3")], 1.0)]));
    let t1t2 = || Some(expect(&[(&[("idc", "t1")], 2.0), (&[("idc", "t2")], 2.0)]));
    let all = || {
        Some(expect(&[
            (&[("idc", "t1")], 2.0),
            (&[("idc", "t2")], 2.0),
            (&[("idc", "t3")], 1.0),
        ]))
    };
    check(vec![
        (
            "ValueFilterTest valueEqual",
            "http_success_request.valueEqual(1)",
            input(),
            t3(),
        ),
        (
            "ValueFilterTest valueNotEqual",
            "http_success_request.valueNotEqual(1)",
            input(),
            t1t2(),
        ),
        (
            "ValueFilterTest valueGreater",
            "http_success_request.valueGreater(1)",
            input(),
            t1t2(),
        ),
        (
            "ValueFilterTest valueGreaterEqual",
            "http_success_request.valueGreaterEqual(1)",
            input(),
            all(),
        ),
        (
            "ValueFilterTest valueLess",
            "http_success_request.valueLess(2)",
            input(),
            t3(),
        ),
        (
            "ValueFilterTest valueLessEqual",
            "http_success_request.valueLessEqual(2)",
            input(),
            all(),
        ),
    ]);
}
