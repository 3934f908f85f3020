//! Classification and guardrail cases, mirroring the reference's DeltaClassifierTest and
//! GuardrailIntegrationTest, plus the registry check (which guards a measure only while its holder exists).

use super::*;
use crate::compiler::{self, DataType, Downsampling, DslKind, ScopeType};

const BASE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: t
metricsRules:
  - name: a
    exp: m_a.sum(['svc'])
  - name: b
    exp: m_b.sum(['svc'])
";

fn mal(src: &str) -> Compiled {
    compiler::compile(DslKind::Mal, src.as_bytes()).unwrap_or_else(|e| panic!("compile {src}: {e}"))
}

fn lal(src: &str) -> Compiled {
    compiler::compile(DslKind::Lal, src.as_bytes()).unwrap_or_else(|e| panic!("compile {src}: {e}"))
}

fn classify_src(old: &str, new: &str, compile: fn(&str) -> Compiled) -> (Classification, BTreeSet<String>) {
    let old_c = compile(old);
    let new_c = compile(new);
    let prior = Prior::Compiled { bytes: old.as_bytes(), compiled: &old_c };
    (classify(prior, new.as_bytes(), &new_c), storage_impact(prior, &new_c, |_| None))
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn byte_identical_is_no_change() {
    let (c, impact) = classify_src(BASE, BASE, mal);
    assert_eq!(c.kind, ChangeKind::NoChange);
    assert!(impact.is_empty());
}

#[test]
fn no_prior_is_new_with_every_name_added_and_no_alarm_reset() {
    let new = mal(BASE);
    let c = classify(Prior::None, BASE.as_bytes(), &new);
    assert_eq!(c.kind, ChangeKind::New);
    assert_eq!(c.added, set(&["t_a", "t_b"]));
    assert!(c.alarm_reset().is_empty());
}

#[test]
fn an_added_metric_is_structural_without_shape_break_or_approval() {
    let new = format!("{BASE}  - name: c\n    exp: m_c.sum(['svc'])\n");
    let (c, impact) = classify_src(BASE, &new, mal);
    assert_eq!(c.kind, ChangeKind::Structural);
    assert_eq!(c.added, set(&["t_c"]));
    assert!(c.shape_break.is_empty() && c.removed.is_empty());
    assert!(impact.is_empty(), "adding a metric never needs approval");
    assert_eq!(c.alarm_reset(), set(&["t_c"]));
}

#[test]
fn a_removed_metric_is_structural() {
    let new = "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: t\nmetricsRules:\n  - name: a\n    exp: m_a.sum(['svc'])\n";
    let (c, impact) = classify_src(BASE, new, mal);
    assert_eq!(c.kind, ChangeKind::Structural);
    assert_eq!(c.removed, set(&["t_b"]));
    assert!(impact.is_empty());
}

#[test]
fn a_body_only_edit_is_filter_only() {
    let new = BASE.replace("m_a.sum(['svc'])", "m_a.sum(['svc']).rate('PT1M')");
    let (c, impact) = classify_src(BASE, &new, mal);
    assert_eq!(c.kind, ChangeKind::FilterOnly, "{}", c.summary());
    assert!(impact.is_empty());
    assert!(c.alarm_reset().is_empty());
}

#[test]
fn a_filter_edit_is_filter_only() {
    let old = format!("filter: \"{{ tags -> tags.job == 'a' }}\"\n{BASE}");
    let new = format!("filter: \"{{ tags -> tags.job == 'b' }}\"\n{BASE}");
    let (c, _) = classify_src(&old, &new, mal);
    assert_eq!(c.kind, ChangeKind::FilterOnly);
}

#[test]
fn a_scope_change_is_a_shape_break_that_needs_approval() {
    let new = BASE.replace("service(['svc'], Layer.GENERAL)", "instance(['svc'], ['inst'], Layer.GENERAL)");
    let (c, impact) = classify_src(BASE, &new, mal);
    assert_eq!(c.kind, ChangeKind::Structural);
    assert_eq!(c.shape_break, set(&["t_a", "t_b"]));
    assert_eq!(impact, set(&["t_a", "t_b"]));
}

#[test]
fn a_downsampling_change_is_structural() {
    let new = BASE.replace("m_a.sum(['svc'])", "m_a.sum(['svc']).downsampling(SUM)");
    let (c, impact) = classify_src(BASE, &new, mal);
    assert_eq!(c.kind, ChangeKind::Structural);
    assert_eq!(c.shape_break, set(&["t_a"]));
    assert_eq!(impact, set(&["t_a"]));
}

#[test]
fn a_label_change_that_moves_the_data_type_is_a_shape_break() {
    let new = BASE.replace("m_a.sum(['svc'])", "m_a.sum(['svc', 'step'])");
    let (c, _) = classify_src(BASE, &new, mal);
    assert_eq!(c.shape_break, set(&["t_a"]));
    let shapes = match mal(&new) {
        Compiled::Mal(f) => f.metrics(),
        Compiled::Lal(_) => unreachable!("mal"),
    };
    assert_eq!(shapes["t_a"].function_name(), "avgLabeled");
}

#[test]
fn layer_definition_changes_are_structural() {
    let old = format!("{BASE}layerDefinitions:\n  - name: MY_LAYER\n    ordinal: 100001\n    normal: true\n");
    let new = old.replace("100001", "100002");
    let (c, _) = classify_src(&old, &new, mal);
    assert_eq!(c.kind, ChangeKind::Structural);
}

#[test]
fn malformed_new_yaml_does_not_compile() {
    assert!(compiler::compile(DslKind::Mal, b"metricsRules: [\n  - name: a\n").is_err());
}

#[test]
fn a_malformed_prior_is_tolerated_as_structural() {
    let new = mal(BASE);
    let c = classify(Prior::Unparseable { bytes: b"metricsRules: [" }, BASE.as_bytes(), &new);
    assert_eq!(c.kind, ChangeKind::Structural);
    assert_eq!(c.added, set(&["t_a", "t_b"]));
}

/// The registry half of the guardrail, as a table: (prior file, registered measure of `t_a`,
/// new content) → the keys that need approval.
#[test]
fn registered_measures_guard_their_shape_only_while_their_holder_exists() {
    let service = MetricShape { scope: ScopeType::Service, downsampling: Downsampling::Avg, data_type: DataType::Single };
    let rescoped_src = BASE.replace("service(['svc'], Layer.GENERAL)", "endpoint(['svc'], ['ep'], Layer.GENERAL)");
    let rescoped = mal(&rescoped_src);
    let same = mal(BASE);
    let old = mal(BASE);
    let with_prior = Prior::Compiled { bytes: BASE.as_bytes(), compiled: &old };
    let unparseable = Prior::Unparseable { bytes: b"not: [yaml" };
    let registered = |holder| Some(Registered { shape: service, holder });
    type Row<'a> = (&'a str, Prior<'a>, Option<Registered>, &'a Compiled, &'a [&'a str]);
    let rows: &[Row] = &[
        // A deleted runtime-only file left the measure: the next claimer starts fresh.
        ("leftover, new shape", Prior::None, registered(Holder::Nobody), &rescoped, &[]),
        ("leftover, same shape", Prior::None, registered(Holder::Nobody), &same, &[]),
        // A file that still exists keeps guarding its measure.
        ("own measure, prior unparseable", unparseable, registered(Holder::ThisFile), &rescoped, &["t_a"]),
        ("own measure, same shape", unparseable, registered(Holder::ThisFile), &same, &[]),
        ("another existing file's measure", Prior::None, registered(Holder::OtherFile), &rescoped, &["t_a"]),
        ("another existing file's measure, same shape", Prior::None, registered(Holder::OtherFile), &same, &[]),
        ("nothing registered", Prior::None, None, &rescoped, &[]),
        // The prior file guards on its own, whatever the registry holds.
        ("prior file, leftover measure", with_prior, registered(Holder::Nobody), &rescoped, &["t_a", "t_b"]),
        ("prior file, nothing registered", with_prior, None, &rescoped, &["t_a", "t_b"]),
    ];
    for (what, prior, stored, new, expected) in rows {
        let impact = storage_impact(*prior, new, |name| if name == "t_a" { *stored } else { None });
        assert_eq!(impact, set(expected), "{what}");
    }
}

#[test]
fn the_holder_of_a_measure() {
    assert_eq!(Holder::of(true, true), Holder::ThisFile);
    assert_eq!(Holder::of(false, true), Holder::OtherFile);
    assert_eq!(Holder::of(true, false), Holder::Nobody);
    assert_eq!(Holder::of(false, false), Holder::Nobody);
    assert!(Holder::ThisFile.guards_shape() && Holder::OtherFile.guards_shape() && !Holder::Nobody.guards_shape());
}

const LAL_BASE: &str = "\
rules:
  - name: r1
    layer: GENERAL
    dsl: |
      filter {
        sink {
        }
      }
  - name: r2
    dsl: |
      filter {
        sink {
        }
      }
";

#[test]
fn lal_identical_new_and_changed() {
    let (c, _) = classify_src(LAL_BASE, LAL_BASE, lal);
    assert_eq!(c.kind, ChangeKind::NoChange);
    let new = lal(LAL_BASE);
    let c = classify(Prior::None, LAL_BASE.as_bytes(), &new);
    assert_eq!(c.kind, ChangeKind::New);
    assert_eq!(c.added, set(&["GENERAL:r1", "auto:r2"]), "empty layer enumerates as auto");
    let body = LAL_BASE.replacen("sink {\n        }", "json {}\n        sink {\n        }", 1);
    let (c, impact) = classify_src(LAL_BASE, &body, lal);
    assert_eq!(c.kind, ChangeKind::Structural, "LAL has no filter-only path");
    assert!(impact.is_empty(), "a DSL body edit needs no approval");
}

#[test]
fn lal_storage_impact_detects_output_type_and_key_changes() {
    let output = LAL_BASE.replacen("    layer: GENERAL\n", "    layer: GENERAL\n    outputType: SlowSQL\n", 1);
    let (_, impact) = classify_src(LAL_BASE, &output, lal);
    assert_eq!(impact, set(&["GENERAL:r1"]));
    let renamed = LAL_BASE.replace("name: r2", "name: r3");
    let (c, impact) = classify_src(LAL_BASE, &renamed, lal);
    assert_eq!(impact, set(&["auto:r2", "auto:r3"]));
    assert_eq!(c.added, set(&["auto:r3"]));
    assert_eq!(c.removed, set(&["auto:r2"]));
}
