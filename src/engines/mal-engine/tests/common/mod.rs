//! Shared helpers of the engine's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;

use hotrule_mal_engine::{
    EngineState, EvalError, Evaluation, Family, Labels, PreparedFile, Sample, labels,
    run_expression,
};
use hotrule_rule_compiler::{Compiled, DslKind, compile, parse_mal_expression};

/// 2020-09-20T09:00:18.480Z: a fixed timestamp for samples that do not care.
pub const T0: i64 = 1_600_592_418_480;

pub fn s(name: &str, pairs: &[(&str, &str)], value: f64) -> Sample {
    Sample::new(name, labels(pairs.iter().copied()), value, T0)
}

pub fn at(mut sample: Sample, timestamp_ms: i64) -> Sample {
    sample.timestamp_ms = timestamp_ms;
    sample
}

pub fn families(samples: &[Sample]) -> HashMap<String, Family> {
    let mut by_name: HashMap<String, Vec<Sample>> = HashMap::new();
    for sample in samples {
        by_name
            .entry(sample.name.clone())
            .or_default()
            .push(sample.clone());
    }
    by_name
        .into_iter()
        .map(|(name, samples)| (name, Family::build(samples)))
        .collect()
}

/// Runs a bare expression; the result's samples as sorted `(labels, value)` pairs.
pub fn run_with(
    expr: &str,
    samples: &[Sample],
    state: &mut EngineState,
) -> Result<Vec<(Labels, f64)>, EvalError> {
    let parsed = parse_mal_expression(expr).unwrap_or_else(|e| panic!("parse {expr}: {e}"));
    let result = run_expression(&parsed, &families(samples), T0, state)?;
    let mut out: Vec<(Labels, f64)> = result
        .family
        .samples()
        .iter()
        .map(|sample| (sample.labels.clone(), sample.value))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

pub fn run(expr: &str, samples: &[Sample]) -> Result<Vec<(Labels, f64)>, EvalError> {
    run_with(expr, samples, &mut EngineState::default())
}

pub fn expect(pairs: &[(&[(&str, &str)], f64)]) -> Vec<(Labels, f64)> {
    let mut out: Vec<(Labels, f64)> = pairs
        .iter()
        .map(|(l, v)| (labels(l.iter().copied()), *v))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub fn prepare(yaml: &str) -> PreparedFile {
    match compile(DslKind::Mal, yaml.as_bytes()) {
        Ok(Compiled::Mal(file)) => PreparedFile::new(file),
        other => panic!("compile failed: {other:?}\n{yaml}"),
    }
}

pub fn evaluate(yaml: &str, samples: &[Sample]) -> Evaluation {
    prepare(yaml).evaluate(samples, T0, &mut EngineState::default())
}

/// One table row: upstream case name, expression, input samples, expected result (None = EMPTY).
pub type Row = (
    &'static str,
    &'static str,
    Vec<Sample>,
    Option<Vec<(Labels, f64)>>,
);

pub fn check(rows: Vec<Row>) {
    for (case, expr, input, expected) in rows {
        let got = run(expr, &input).unwrap_or_else(|e| panic!("{case}: {e}"));
        match expected {
            None => assert!(got.is_empty(), "{case}: expected EMPTY, got {got:?}"),
            Some(expected) => assert_eq!(got, expected, "{case}"),
        }
    }
}

pub fn by_input(values: [f64; 5]) -> Vec<hotrule_mal_engine::Sample> {
    let name = "http_success_request";
    vec![
        s(name, &[("idc", "t1")], values[0]),
        s(
            name,
            &[("idc", "t3"), ("region", "cn"), ("svc", "catalog")],
            values[1],
        ),
        s(
            name,
            &[("idc", "t1"), ("region", "us"), ("svc", "product")],
            values[2],
        ),
        s(
            name,
            &[("idc", "t1"), ("region", "us"), ("instance", "10.0.0.1")],
            values[3],
        ),
        s(
            name,
            &[("idc", "t3"), ("region", "cn"), ("instance", "10.0.0.1")],
            values[4],
        ),
    ]
}
