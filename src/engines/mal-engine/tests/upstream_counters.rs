//! SkyWalking's meter-analyzer DSL tests (`oap-server/analyzer/meter-analyzer/src/test/java/.../v2/dsl`),
//! ported as table tests: `IncreaseTest`, `CounterWindowTest`, and the engine's per-rule counter keys. Each row names the upstream class and case; rows whose upstream
//! input was not transcribed verbatim say "(after ...)" and follow the behaviour the case pins down.

mod common;

use common::*;
use hotrule_mal_engine::EngineState;

#[test]
fn increase_test() {
    // 2020-09-11T11:11:01Z, 11:13:41, 11:16:31, 11:19:31.020 for svc=product and svc=catalog.
    let t = [
        1_599_822_661_000_i64,
        1_599_822_821_000,
        1_599_822_991_000,
        1_599_823_171_020,
    ];
    let counters = [
        (50.0, 150.0),
        (330.0, 500.0),
        (380.0, 810.0),
        (1380.0, 1900.0),
    ];
    let irate_counters = [
        (50.0, 150.0),
        (330.0, 500.0),
        (500.0, 840.0),
        (1040.0, 1560.0),
    ];
    // (case, expression, (product, catalog) inputs per step, expected outputs per step)
    type Steps = [(f64, f64); 4];
    let cases: [(&str, &str, Steps, Steps); 3] = [
        (
            "IncreaseTest increase",
            "http_success_request.increase('PT5M')",
            counters,
            [(0.0, 0.0), (280.0, 350.0), (330.0, 660.0), (1050.0, 1400.0)],
        ),
        (
            "IncreaseTest rate",
            "http_success_request.rate('PT5M')",
            counters,
            [(0.0, 0.0), (1.75, 2.1875), (1.0, 2.0), (3.0, 4.0)],
        ),
        (
            "IncreaseTest irate",
            "http_success_request.irate()",
            irate_counters,
            [(0.0, 0.0), (1.75, 2.1875), (1.0, 2.0), (3.0, 4.0)],
        ),
    ];
    for (case, expr, inputs, expected) in cases {
        let mut state = EngineState::default();
        for (i, ((product, catalog), (want_product, want_catalog))) in
            inputs.into_iter().zip(expected).enumerate()
        {
            let batch = [
                at(
                    s("http_success_request", &[("svc", "product")], product),
                    t[i],
                ),
                at(
                    s("http_success_request", &[("svc", "catalog")], catalog),
                    t[i],
                ),
            ];
            let got = run_with(expr, &batch, &mut state).expect(case);
            assert_eq!(
                got,
                expect(&[
                    (&[("svc", "product")], want_product),
                    (&[("svc", "catalog")], want_catalog)
                ]),
                "{case} step {i}"
            );
        }
    }
}

#[test]
fn irate_and_counter_reset() {
    let mut state = EngineState::default();
    let mut values = Vec::new();
    for (offset, value) in [
        (0, 10.0),
        (10_000, 30.0),
        (20_500, 50.0),
        (30_000, 5.0),
        (40_000, 25.0),
    ] {
        let sample = at(s("c", &[], value), T0 + offset);
        values.push(run_with("c.irate()", &[sample], &mut state).unwrap()[0].1);
    }
    // irate: previous point, whole seconds elapsed; a decrease is negative (stored as 0) upstream.
    assert_eq!(values, vec![0.0, 2.0, 2.0, -5.0, 2.0], "irate");

    // increase with reset handling: the reset point yields 0, later points increase from it.
    let mut state = EngineState::default();
    let mut values = Vec::new();
    for (offset, value) in [
        (0, 100.0),
        (60_000, 160.0),
        (120_000, 10.0),
        (180_000, 70.0),
    ] {
        let sample = at(s("c", &[], value), T0 + offset);
        values.push(run_with("c.increase('PT5M')", &[sample], &mut state).unwrap()[0].1);
    }
    assert_eq!(
        values,
        vec![0.0, 60.0, 0.0, 60.0],
        "increase across a counter reset"
    );
}

#[test]
fn counter_windows_are_per_rule_site_and_pruned() {
    let file = prepare(
        "metricPrefix: t\nmetricsRules:\n  - name: a\n    exp: c.sum(['svc']).increase('PT1M').service(['svc'], Layer.GENERAL)\n  - name: b\n    exp: c.sum(['svc']).increase('PT5M').service(['svc'], Layer.GENERAL)\n",
    );
    let mut state = EngineState::default();
    for (i, value) in [10.0, 20.0, 40.0].into_iter().enumerate() {
        let sample = at(s("c", &[("svc", "x")], value), T0 + i as i64 * 60_000);
        let evaluation = file.evaluate(&[sample], T0 + i as i64 * 60_000, &mut state);
        assert!(evaluation.errors.is_empty(), "{:?}", evaluation.errors);
    }
    // Two rules on one counter keep separate windows (upstream would share one queue).
    assert_eq!(state.counters.len(), 2);
    state
        .counters
        .prune(T0 + 2 * 60_000 + 60_000 + 5 * 60_000 + 1);
    assert_eq!(
        state.counters.len(),
        1,
        "the 1-minute window series is idle past its window + grace"
    );
    state.counters.forget_metric("t_b");
    assert!(state.counters.is_empty());
}

#[test]
fn counter_window_test() {
    // 2020-09-11T11:11:00Z and the CounterWindowTest points (the sixth arrives out of order).
    let base = 1_599_822_660_000_i64;
    let points = [
        (1_030, 10.0),
        (15_990, 11.0),
        (31_000, 12.0),
        (46_090, 13.0),
        (60_970, 14.0),
        (970, 15.0),
        (76_600, 16.0),
        (91_660, 17.0),
    ];
    for (window, expected) in [
        ("PT15S", [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 2.0, 1.0]),
        ("PT35S", [0.0, 1.0, 2.0, 2.0, 2.0, 0.0, 3.0, 3.0]),
        ("PT1M", [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 5.0, 5.0]),
        ("PT2M", [0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 2.0]),
    ] {
        let mut state = EngineState::default();
        let expr = format!("test.increase('{window}')");
        let got: Vec<f64> = points
            .iter()
            .map(|&(offset, value)| {
                let sample = at(s("test", &[], value), base + offset);
                run_with(&expr, &[sample], &mut state).expect("run")[0].1
            })
            .collect();
        assert_eq!(got, expected, "CounterWindowTest test{window}");
    }
}
