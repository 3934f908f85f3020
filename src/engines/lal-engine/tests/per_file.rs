//! `analyze_files`: the same routing as `analyze` over files that each own their sampler state,
//! the `GENERAL` fallback a caller can withhold, and `may_run` / `may_claim`.

mod common;

use common::{NOW_MS, load_lal_text};
use hotrule_lal_engine::{
    Decision, FileAnalysis, FileRun, LalState, LogAnalysis, LogData, PreparedLalFile, analyze,
    analyze_files,
};

fn file(rules: &[(&str, &str, &str)]) -> PreparedLalFile {
    let mut yaml = String::from("rules:\n");
    for (name, layer, dsl) in rules {
        yaml.push_str(&format!("  - name: {name}\n    layer: {layer}\n    dsl: |\n"));
        for line in dsl.lines() {
            yaml.push_str(&format!("      {line}\n"));
        }
    }
    load_lal_text(&yaml)
}

fn log(layer: &str, kind: &str) -> LogData {
    LogData {
        service: "svc".into(),
        layer: layer.into(),
        timestamp_ms: NOW_MS,
        tags: vec![("kind".into(), kind.into())],
        ..LogData::default()
    }
}

/// An `auto` file claiming `kind=mine` logs, and a `GENERAL` file with a rate-limited rule.
fn files() -> (PreparedLalFile, PreparedLalFile) {
    let auto = file(&[(
        "claim",
        "auto",
        "filter {\n  if (tag('kind') != 'mine') { abort {} }\n  extractor { layer 'MINE' }\n  sink {}\n}",
    )]);
    let general = file(&[(
        "default",
        "GENERAL",
        "filter {\n  sink { sampler { rateLimit('all') { rpm 1 } } }\n}",
    )]);
    (auto, general)
}

fn ran(analysis: FileAnalysis) -> Vec<(usize, String, Decision)> {
    match analysis {
        FileAnalysis::Ran(outcomes) => outcomes.into_iter().map(|(i, o)| (i, o.rule, o.decision)).collect(),
        FileAnalysis::Ignored => panic!("ignored"),
    }
}

#[test]
fn routing_matches_analyze_and_names_each_outcome_s_file() {
    let (auto, general) = files();
    let logs = [log("", "mine"), log("", "other"), log("GENERAL", "x"), log("NGINX", "x")];
    for l in &logs {
        let shared = analyze(&[&auto, &general], l, NOW_MS, &mut LalState::default());
        let (mut a, mut g) = (LalState::default(), LalState::default());
        let mut runs = [FileRun { file: &auto, state: &mut a }, FileRun { file: &general, state: &mut g }];
        let FileAnalysis::Ran(per_file) = analyze_files(&mut runs, l, NOW_MS, true) else { panic!("ignored") };
        let LogAnalysis::Ran(expected) = shared else { panic!("ignored") };
        let outcomes: Vec<_> = per_file.iter().map(|(_, o)| o.clone()).collect();
        assert_eq!(outcomes, expected, "{l:?}");
    }
    let (mut a, mut g) = (LalState::default(), LalState::default());
    let mut runs = [FileRun { file: &auto, state: &mut a }, FileRun { file: &general, state: &mut g }];
    assert_eq!(ran(analyze_files(&mut runs, &log("", "mine"), NOW_MS, true)), [(0, "auto:claim".into(), Decision::Kept)]);
    assert_eq!(
        ran(analyze_files(&mut runs, &log("", "other"), NOW_MS, true)),
        [(0, "auto:claim".into(), Decision::Aborted), (1, "GENERAL:default".into(), Decision::Kept)]
    );
    let anonymous = LogData { service: String::new(), ..log("", "mine") };
    assert_eq!(analyze_files(&mut runs, &anonymous, NOW_MS, true), FileAnalysis::Ignored);
}

#[test]
fn each_file_keeps_its_own_sampler_state() {
    let (_, general) = files();
    let (mut first, mut second) = (LalState::default(), LalState::default());
    let l = log("GENERAL", "x");
    let mut runs = [FileRun { file: &general, state: &mut first }];
    assert_eq!(ran(analyze_files(&mut runs, &l, NOW_MS, true))[0].2, Decision::Kept);
    assert_eq!(ran(analyze_files(&mut runs, &l, NOW_MS, true))[0].2, Decision::SampledOut, "rpm 1 spent");
    let mut fresh = [FileRun { file: &general, state: &mut second }];
    assert_eq!(ran(analyze_files(&mut fresh, &l, NOW_MS, true))[0].2, Decision::Kept, "another state's budget");
}

#[test]
fn a_withheld_fallback_leaves_an_unclaimed_log_alone() {
    let (auto, general) = files();
    let (mut a, mut g) = (LalState::default(), LalState::default());
    let mut runs = [FileRun { file: &auto, state: &mut a }, FileRun { file: &general, state: &mut g }];
    assert_eq!(ran(analyze_files(&mut runs, &log("", "other"), NOW_MS, false)), [(0, "auto:claim".into(), Decision::Aborted)]);
    let mut general_only = [FileRun { file: &general, state: &mut g }];
    assert!(ran(analyze_files(&mut general_only, &log("", "other"), NOW_MS, false)).is_empty());
}

#[test]
fn may_run_and_may_claim_follow_the_routing() {
    let (auto, general) = files();
    assert!(auto.may_run(&log("", "any")) && auto.may_claim(&log("", "any")));
    assert!(!auto.may_run(&log("GENERAL", "any")) && !auto.may_claim(&log("GENERAL", "any")));
    assert!(general.may_run(&log("", "any")), "a log without a layer may fall back to GENERAL");
    assert!(!general.may_claim(&log("", "any")));
    assert!(general.may_run(&log("GENERAL", "any")) && !general.may_run(&log("NGINX", "any")));
    let anonymous = LogData { service: String::new(), ..log("GENERAL", "x") };
    assert!(!general.may_run(&anonymous));
}
