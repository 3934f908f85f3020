//! [`PreparedFile::evaluate`] against a straightforward reference: the evaluation as it was
//! before the one-sample work, where every call read its arguments from the syntax tree on each
//! run, the batch went through per-name maps, each rule got its own owned input map and the
//! scope labels were taken off the samples before emission. A wrong
//! prepared constant (a label list, a scope's lists, strings, layer or detect point, a tag pair)
//! or a wrong input selection shows as a difference in values, warnings or errors.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use hotrule_rule_compiler::{Compiled, DslKind, MalRule, compile, compile_bundled};

use crate::call_args::CallArgs;
use crate::eval::{Inputs, RuleRun, Val};
use crate::scope::Groups;
use crate::synth::synthesize;
use crate::{
    EngineState, EvalError, Evaluation, Family, PreparedFile, RuleError, Sample,
    Verdicts, Warning, emit, filter_family, labels,
};

/// The reference evaluation: per-name maps, owned inputs, no prepared call arguments.
fn reference(
    file: &PreparedFile,
    batch: &[Sample],
    now_ms: i64,
    state: &mut EngineState,
) -> Evaluation {
    let mut by_name: HashMap<&str, Vec<Sample>> = HashMap::new();
    for sample in batch {
        if file.slots.contains_key(&sample.name) {
            by_name
                .entry(sample.name.as_str())
                .or_default()
                .push(sample.clone());
        }
    }
    let families: HashMap<&str, Family> = by_name
        .into_iter()
        .map(|(name, samples)| (name, Family::build(samples)))
        .filter(|(_, family)| !family.is_empty())
        .collect();
    let filtered: Option<HashMap<&str, Result<Family, EvalError>>> =
        file.file.filter.as_ref().map(|filter| {
            let mut verdicts = Verdicts::new();
            families
                .iter()
                .map(|(name, family)| {
                    (
                        *name,
                        filter_family(filter, family, &mut state.regexes, &mut verdicts),
                    )
                })
                .collect()
        });
    let no_call_args = CallArgs::default();
    let mut evaluation = Evaluation::default();
    for (rule, prepared) in file.file.rules.iter().zip(&file.rules) {
        let present: Vec<(&String, &Family)> = prepared
            .inputs
            .iter()
            .filter_map(|name| families.get(name.as_str()).map(|family| (name, family)))
            .collect();
        if present.is_empty() {
            continue;
        }
        let owned = |present: Vec<(&String, &Family)>| -> HashMap<String, Family> {
            present
                .into_iter()
                .map(|(n, f)| (n.clone(), f.clone()))
                .collect()
        };
        let inputs = match &filtered {
            None => owned(present),
            Some(filtered) => {
                let failure = present
                    .iter()
                    .find_map(|(name, _)| match filtered.get(name.as_str()) {
                        Some(Err(error)) => Some(error.clone()),
                        _ => None,
                    });
                if let Some(error) = failure {
                    evaluation.warnings.push(Warning::FilterFailed {
                        rule: rule.name.clone(),
                        reason: error.to_string(),
                    });
                    owned(present)
                } else {
                    let kept: HashMap<String, Family> = present
                        .into_iter()
                        .filter_map(|(name, _)| match filtered.get(name.as_str()) {
                            Some(Ok(family)) if !family.is_empty() => {
                                Some((name.clone(), family.clone()))
                            }
                            _ => None,
                        })
                        .collect();
                    if kept.is_empty() {
                        continue;
                    }
                    kept
                }
            }
        };
        let mut run = RuleRun {
            rule_key: &prepared.key,
            rule_name: &rule.name,
            inputs: Inputs::Map(&inputs),
            call_args: &no_call_args,
            now_ms,
            counters: &mut state.counters,
            regexes: &mut state.regexes,
            warnings: &mut evaluation.warnings,
            k8s_warned: &mut state.k8s_warned,
            k8s: state.k8s.as_deref(),
            site: 0,
            entities: None,
            histogram_unit_ms: file.histogram_unit_ms,
        };
        let result = run.eval(&rule.expr).and_then(|result| {
            let mut values = Vec::new();
            if let (Val::Family(family), Some(groups)) = (result, run.entities.take())
                && !family.is_empty()
            {
                // As upstream keeps them: the scope labels taken off the samples, none left to
                // skip at emission.
                let stripped = Groups {
                    keys: Arc::from([]),
                    entities: groups
                        .stripped()
                        .into_iter()
                        .map(|(entity, samples)| (entity, Family::build(samples)))
                        .collect(),
                };
                emit::emit(
                    rule,
                    &prepared.percentiles,
                    &prepared.label_order,
                    stripped,
                    &mut values,
                )?;
            }
            Ok(values)
        });
        match result {
            Ok(values) => evaluation.values.extend(values),
            Err(error) => evaluation.errors.push(RuleError {
                rule: rule.name.clone(),
                metric: rule.metric_name.clone(),
                error,
            }),
        }
    }
    let data_now = batch.iter().map(|s| s.timestamp_ms).max().unwrap_or(now_ms);
    state.counters.prune(data_now.min(now_ms));
    evaluation
}

/// Runs `batches` in order through both evaluations, each with its own state, and asserts every
/// result equal. Returns how many values and errors they produced.
fn assert_same(file: &PreparedFile, batches: &[(Vec<Sample>, i64)], what: &str) -> usize {
    let mut fast_state = EngineState::default();
    let mut reference_state = EngineState::default();
    let mut produced = 0;
    for (index, (batch, now_ms)) in batches.iter().enumerate() {
        let fast = file.evaluate(batch, *now_ms, &mut fast_state);
        let slow = reference(file, batch, *now_ms, &mut reference_state);
        assert_eq!(fast, slow, "{what}: batch {index} ({} samples)", batch.len());
        produced += fast.values.len() + fast.errors.len();
    }
    produced
}

/// Every call the evaluator runs whose arguments read has a prepared entry, found by the call.
fn assert_all_prepared(file: &PreparedFile) {
    fn walk(expr: &hotrule_rule_compiler::ast::Expr, args: &CallArgs, rule: &MalRule) {
        use hotrule_rule_compiler::ast::ExprKind;
        match &expr.kind {
            ExprKind::Call(call) => {
                let method = call.method.name.as_str();
                let prepared = matches!(
                    method,
                    "sum"
                        | "min"
                        | "max"
                        | "avg"
                        | "count"
                        | "tagEqual"
                        | "tagNotEqual"
                        | "tagMatch"
                        | "tagNotMatch"
                ) || crate::call_args::scope_type(method).is_some();
                if prepared {
                    assert!(
                        args.get(call).is_some(),
                        "{}: '{method}' has no prepared arguments",
                        rule.name
                    );
                }
                if let Some(receiver) = &call.receiver {
                    walk(receiver, args, rule);
                }
                for arg in &call.args {
                    walk(&arg.value, args, rule);
                }
            }
            ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => {
                walk(inner, args, rule)
            }
            ExprKind::Binary { left, right, .. } => {
                walk(left, args, rule);
                walk(right, args, rule);
            }
            _ => {}
        }
    }
    for (rule, prepared) in file.file.rules.iter().zip(&file.rules) {
        walk(&rule.expr, &prepared.call_args, rule);
    }
}

fn prepare(yaml: &str) -> PreparedFile {
    match compile(DslKind::Mal, yaml.as_bytes()) {
        Ok(Compiled::Mal(file)) => PreparedFile::new(file),
        other => panic!("compile failed: {other:?}\n{yaml}"),
    }
}

const T0: i64 = 1_700_000_000_000;

/// Log-MAL shaped samples of two names: four services, four instances, two levels, some labels
/// missing, one extra label, values including zero, negatives and NaN; the second name has
/// histogram buckets (`le`) but one sample.
fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for i in 0..32_i64 {
        let service = format!("nginx::svc-{}", i % 4);
        let instance = format!("nginx-{}", (i / 4) % 4);
        let level = if i % 3 == 0 { "warn" } else { "error" };
        let mut pairs = vec![("level", level.to_owned())];
        if i % 7 != 3 {
            pairs.push(("service", service));
        }
        if i % 5 != 2 {
            pairs.push(("service_instance_id", instance));
        }
        if i % 11 == 4 {
            pairs.push(("extra", "x".to_owned()));
        }
        if i % 6 == 5 && i != 23 {
            pairs.push(("le", ["100", "250", "Infinity"][(i as usize / 6) % 3].to_owned()));
        }
        let value = match i % 9 {
            0 => 0.0,
            4 => -2.5,
            8 if i == 17 => f64::NAN,
            _ => 1.0 + (i % 3) as f64,
        };
        let name = if i % 6 == 5 {
            "nginx_access_count"
        } else {
            "nginx_error_log_count"
        };
        out.push(Sample::new(name, labels(pairs), value, T0 + i * 1_000));
    }
    out
}

/// Rule expressions with label lists, scope arguments and tag pairs of every kind.
const EXPRESSIONS: &[&str] = &[
    "nginx_error_log_count.sum(['level','service','service_instance_id']).downsampling(SUM).service(['service'], Layer.NGINX)",
    "nginx_error_log_count.sum(['level','service','service_instance_id']).downsampling(SUM).instance(['service'],['service_instance_id'], Layer.NGINX)",
    "nginx_error_log_count.sum(['service','service_instance_id']).instance(['service'], '::', ['service_instance_id'], '', Layer.GENERAL, { tags -> ['pid': tags.service_instance_id] })",
    "nginx_error_log_count.tagEqual('level', 'error').sum(['service']).service(['service'], Layer.NGINX)",
    "nginx_error_log_count.tagNotEqual('level', 'warn', 'service', '').max(['service', 'level']).service(['service'], Layer.GENERAL)",
    "nginx_error_log_count.tagMatch('service', 'nginx::svc-[12]').min(['service', 'level', 'service_instance_id', 'missing']).endpoint(['service'], ['service_instance_id'], Layer.GENERAL)",
    "nginx_error_log_count.avg(['level', 'service', 'service_instance_id']).service(['level', 'service'], '|', Layer.NGINX)",
    "nginx_error_log_count.count(['service', 'service_instance_id']).service(['service'], Layer.NGINX)",
    "nginx_error_log_count.count(['service']).service([], Layer.NGINX)",
    "nginx_error_log_count.sum(['service', 'service']).service(['service', 'service'], Layer.NGINX)",
    "(nginx_error_log_count.sum(['service']) + nginx_access_count.sum(['service'])).service(['service'], Layer.NGINX)",
    "(nginx_error_log_count.sum(['service', 'level']) - nginx_access_count.sum(['service'])).tagNotEqual('level', 'warn').service(['service'], Layer.NGINX)",
    "nginx_error_log_count.sum(['service', 'level']).div(nginx_access_count.sum(['service', 'level'])).service(['service'], Layer.NGINX)",
    "nginx_error_log_count.sum(['service', 'service_instance_id']).serviceRelation(DetectPoint.CLIENT, ['service'], ['service_instance_id'], Layer.GENERAL)",
    "nginx_error_log_count.sum(['service', 'service_instance_id', 'level']).serviceInstanceRelation(DetectPoint.SERVER, ['service'], ['level'], ['service'], ['service_instance_id'], '@', Layer.GENERAL, '')",
    "nginx_error_log_count.sum(['service', 'service_instance_id', 'level']).process(['service'], ['service_instance_id'], ['level'], 'level')",
    "nginx_error_log_count.sum(['level', 'service', 'service_instance_id']).increase('PT1M').service(['service'], Layer.NGINX)",
    "nginx_access_count.sum(['service', 'le']).histogram().service(['service'], Layer.GENERAL)",
    "nginx_access_count.sum(['service', 'level', 'le']).histogram().histogram_percentile([50, 99]).service(['service'], Layer.GENERAL)",
    "nginx_access_count.sum(['service', 'le']).histogram().service(['service', 'le'], Layer.GENERAL)",
];

fn file_of(expressions: &[&str], filter: Option<&str>) -> String {
    let mut yaml = String::new();
    if let Some(filter) = filter {
        yaml.push_str(&format!("filter: \"{filter}\"\n"));
    }
    yaml.push_str("metricPrefix: meter_test\nmetricsRules:\n");
    for (i, exp) in expressions.iter().enumerate() {
        yaml.push_str(&format!("  - name: rule_{i}\n    exp: \"{exp}\"\n"));
    }
    yaml
}

/// One-sample batches (each sample alone, timestamps advancing), then multi-sample batches.
fn batches(samples: &[Sample]) -> Vec<(Vec<Sample>, i64)> {
    let mut out: Vec<(Vec<Sample>, i64)> = samples
        .iter()
        .map(|sample| (vec![sample.clone()], sample.timestamp_ms))
        .collect();
    let now = T0 + 100_000;
    for len in [2, 3, 5, samples.len()] {
        for start in (0..samples.len()).step_by(len) {
            let end = (start + len).min(samples.len());
            out.push((samples[start..end].to_vec(), now));
        }
    }
    let mut reversed = samples.to_vec();
    reversed.reverse();
    out.push((reversed, now + 60_000));
    out.push((Vec::new(), now + 120_000));
    out
}

#[test]
fn evaluate_matches_the_reference_on_argument_heavy_rules() {
    let samples = samples();
    let batches = batches(&samples);
    for filter in [
        None,
        Some("{ tags -> tags.level == 'error' }"),
        Some("{ tags -> tags.service != 'nginx::svc-0' && tags.level }"),
    ] {
        // Each expression alone, and all in one file (rules sharing inputs and state).
        for exp in EXPRESSIONS {
            let file = prepare(&file_of(&[exp], filter));
            assert_all_prepared(&file);
            let produced = assert_same(&file, &batches, exp);
            assert!(produced > 0, "{exp} did nothing under {filter:?}");
        }
        let file = prepare(&file_of(EXPRESSIONS, filter));
        assert_all_prepared(&file);
        let produced = assert_same(&file, &batches, "all expressions");
        assert!(produced > 0, "the file produced nothing: the test checks nothing");
        // A clone shares the syntax tree, so its prepared arguments still apply.
        let clone = file.clone();
        assert_all_prepared(&clone);
        assert_same(&clone, &batches, "a clone");
    }
}

#[test]
fn evaluate_matches_the_reference_on_log_mal_nginx() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../config/rules/log-mal-rules/nginx.yaml"
    );
    let bytes = std::fs::read(path).expect("log-mal-rules/nginx.yaml");
    let Ok(Compiled::Mal(file)) = compile_bundled(DslKind::Mal, &bytes) else {
        panic!("log-mal-rules/nginx.yaml does not compile");
    };
    let file = PreparedFile::new(file);
    assert_all_prepared(&file);
    let samples = samples();
    let produced = assert_same(&file, &batches(&samples), "nginx.yaml");
    assert!(produced > 0);
}

/// Every corpus file on its synthesized batches (two, 60 s apart, as the corpus test runs them)
/// and on one-sample batches cut from them.
#[test]
fn evaluate_matches_the_reference_on_the_corpus() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../config/rules");
    let files = crate::synth::rule_files(Path::new(root));
    assert!(files.len() >= 80, "corpus not found at {root}");
    let mut produced = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_default();
        let Ok(Compiled::Mal(file)) = compile_bundled(DslKind::Mal, &bytes) else {
            continue;
        };
        let file = PreparedFile::new(file);
        assert_all_prepared(&file);
        let what = path.display().to_string();
        let mut batches = Vec::new();
        for (index, value) in [(0_i64, 100.0), (1, 160.0)] {
            let ts = T0 + index * 60_000;
            batches.push((synthesize(&file, value, ts), ts));
        }
        let singles: Vec<(Vec<Sample>, i64)> = batches[1]
            .0
            .iter()
            .take(64)
            .map(|sample| (vec![sample.clone()], sample.timestamp_ms + 60_000))
            .collect();
        batches.extend(singles);
        produced += assert_same(&file, &batches, &what);
    }
    assert!(produced > 1000, "the corpus produced only {produced} values");
}

/// The one-sample aggregation (shared labels, the family returned as it was) against the
/// general grouping, for each aggregation and `by` lists that do and do not name exactly the
/// sample's labels.
#[test]
fn one_sample_aggregation_matches_the_grouped_path() {
    use crate::ops::{Agg, aggregate};
    let bys: Vec<Vec<String>> = [
        &["level", "service", "service_instance_id"][..],
        &["service_instance_id", "level", "service"][..],
        &["level", "service", "service_instance_id", "service"][..],
        &["level", "service"][..],
        &["level", "service", "service_instance_id", "missing"][..],
        &[][..],
    ]
    .iter()
    .map(|by| by.iter().map(|s| s.to_string()).collect())
    .collect();
    for sample in samples().iter().filter(|s| !s.value.is_nan()) {
        let zero = Sample::new(&sample.name, sample.labels.clone(), -0.0, sample.timestamp_ms);
        for sample in [sample.clone(), zero] {
            let one = Family::build(vec![sample.clone()]);
            for by in &bys {
                for agg in [Agg::Sum, Agg::Min, Agg::Max, Agg::Avg] {
                    let fast = aggregate(&one, agg, Some(by));
                    let grouped = crate::ops::aggregate_grouped(&one, agg, by);
                    assert_eq!(fast, grouped, "{agg:?} by {by:?} of {sample:?}");
                    let bits: Vec<u64> =
                        fast.samples().iter().map(|s| s.value.to_bits()).collect();
                    let grouped_bits: Vec<u64> =
                        grouped.samples().iter().map(|s| s.value.to_bits()).collect();
                    assert_eq!(bits, grouped_bits, "{agg:?} by {by:?}: -0.0 kept apart");
                }
            }
        }
    }
}

/// A rule that fails in emission after emitting for an earlier entity stores nothing; the rule
/// before it keeps its values.
#[test]
fn a_rule_failing_in_emission_stores_nothing() {
    let file = prepare(&file_of(
        &[
            "m.sum(['service']).service(['service'], Layer.GENERAL)",
            "m.histogram().service(['service'], Layer.GENERAL)",
        ],
        None,
    ));
    let batch = vec![
        Sample::new("m", labels([("service", "a"), ("le", "100")]), 1.0, T0),
        Sample::new("m", labels([("service", "b")]), 2.0, T0),
    ];
    let fast = file.evaluate(&batch, T0, &mut EngineState::default());
    let slow = reference(&file, &batch, T0, &mut EngineState::default());
    assert_eq!(fast, slow);
    assert_eq!(fast.errors.len(), 1, "{fast:#?}");
    assert_eq!(fast.errors[0].rule, "rule_1");
    assert!(fast.values.iter().all(|value| value.rule == "rule_0"));
    assert_eq!(fast.values.len(), 2);
}
