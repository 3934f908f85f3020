//! The control flow and value semantics of reference §4 and pitfall 14, one behaviour per test:
//! routing (every rule of the layer runs and may store its own copy), the sink's decisions
//! (last one wins, rate limits per id on the caller's clock), per-rule errors, intake, and the
//! comparison rules.

mod common;

use common::{NOW_MS, load_lal_text};
use hotrule_lal_engine::{
    Body, ContentType, Decision, EvalError, LalState, LogAnalysis, LogData, PreparedLalFile,
    RuleOutcome, WINDOW_MS, analyze,
};

/// A file of `(name, layer, dsl)` rules.
fn file(rules: &[(&str, &str, &str)]) -> PreparedLalFile {
    let mut yaml = String::from("rules:\n");
    for (name, layer, dsl) in rules {
        yaml.push_str(&format!(
            "  - name: {name}\n    layer: {layer}\n    dsl: |\n"
        ));
        for line in dsl.lines() {
            yaml.push_str(&format!("      {line}\n"));
        }
    }
    load_lal_text(&yaml)
}

fn log(layer: &str, body: Body) -> LogData {
    LogData {
        service: "svc".into(),
        layer: layer.into(),
        timestamp_ms: NOW_MS,
        body,
        ..LogData::default()
    }
}

fn outcomes(file: &PreparedLalFile, log: &LogData, state: &mut LalState) -> Vec<RuleOutcome> {
    match analyze(&[file], log, NOW_MS, state) {
        LogAnalysis::Ran(outcomes) => outcomes,
        LogAnalysis::Ignored => panic!("ignored"),
    }
}

fn run1(dsl: &str, log: &LogData) -> RuleOutcome {
    let f = file(&[("r", "GENERAL", dsl)]);
    f.run_rule(0, log, NOW_MS, false, &mut LalState::default())
        .expect("rule")
}

#[test]
fn every_rule_of_the_layer_runs_and_each_stores_its_own_copy() {
    let f = file(&[
        (
            "a",
            "GENERAL",
            "filter {\n  extractor { tag rule: 'a' }\n  sink {}\n}",
        ),
        (
            "b",
            "GENERAL",
            "filter {\n  extractor { tag rule: 'b' }\n  sink {}\n}",
        ),
        ("other", "NGINX", "filter {\n  sink {}\n}"),
    ]);
    let out = outcomes(
        &f,
        &log("GENERAL", Body::Text("x".into())),
        &mut LalState::default(),
    );
    let kept: Vec<(&str, Option<&str>)> = out
        .iter()
        .map(|o| {
            (
                o.rule.as_str(),
                o.persisted.first().and_then(|r| r.tag("rule")),
            )
        })
        .collect();
    assert_eq!(
        kept,
        vec![("GENERAL:a", Some("a")), ("GENERAL:b", Some("b"))]
    );
}

#[test]
fn a_runtime_error_fails_its_rule_only() {
    let f = file(&[
        (
            "bad",
            "GENERAL",
            "filter {\n  extractor { timestamp 'yesterday' }\n  sink {}\n}",
        ),
        ("good", "GENERAL", "filter {\n  sink {}\n}"),
    ]);
    let out = outcomes(&f, &log("GENERAL", Body::None), &mut LalState::default());
    assert_eq!(out[0].decision, Decision::Failed);
    let error = out[0]
        .error
        .as_ref()
        .map(|e| (e.rule.as_str(), e.error.clone()));
    assert_eq!(
        error,
        Some((
            "GENERAL:bad",
            EvalError::NotANumber {
                text: "yesterday".into()
            }
        ))
    );
    assert!(out[0].persisted.is_empty());
    assert_eq!(out[1].decision, Decision::Kept);
}

#[test]
fn intake_ignores_logs_without_service_and_stamps_missing_time() {
    let f = file(&[("r", "GENERAL", "filter {\n  sink {}\n}")]);
    let mut anonymous = log("GENERAL", Body::None);
    anonymous.service.clear();
    assert_eq!(
        analyze(&[&f], &anonymous, NOW_MS, &mut LalState::default()),
        LogAnalysis::Ignored
    );
    let mut untimed = log("GENERAL", Body::None);
    untimed.timestamp_ms = 0;
    let out = outcomes(&f, &untimed, &mut LalState::default());
    assert_eq!(out[0].persisted[0].timestamp_ms, NOW_MS);
}

#[test]
fn auto_rules_claim_first_and_general_takes_the_rest() {
    let f = file(&[
        (
            "claims-ios",
            "auto",
            "filter {\n  if (sourceAttribute('os.name') != 'iOS') { abort {} }\n  extractor { layer 'IOS' }\n  sink {}\n}",
        ),
        (
            "no-layer",
            "auto",
            "filter {\n  if (tag('claim') != 'yes') { abort {} }\n  sink {}\n}",
        ),
        ("default", "GENERAL", "filter {\n  sink {}\n}"),
    ]);
    let mut state = LalState::default();
    let mut ios = log("", Body::None);
    ios.source_attributes.insert("os.name".into(), "iOS".into());
    let out = outcomes(&f, &ios, &mut state);
    let decisions: Vec<(&str, Decision)> =
        out.iter().map(|o| (o.rule.as_str(), o.decision)).collect();
    assert_eq!(
        decisions,
        vec![
            ("auto:claims-ios", Decision::Kept),
            ("auto:no-layer", Decision::Aborted)
        ]
    );
    assert_eq!(out[0].persisted[0].layer, "IOS");
    // Claimed by a rule that sets no layer: dropped at the sink, GENERAL does not run.
    let mut claimed = log("", Body::None);
    claimed.tags.push(("claim".into(), "yes".into()));
    let out = outcomes(&f, &claimed, &mut state);
    let decisions: Vec<(&str, Decision)> =
        out.iter().map(|o| (o.rule.as_str(), o.decision)).collect();
    assert_eq!(
        decisions,
        vec![
            ("auto:claims-ios", Decision::Aborted),
            ("auto:no-layer", Decision::NoLayer)
        ]
    );
    // Unclaimed: GENERAL.
    let out = outcomes(&f, &log("", Body::None), &mut state);
    assert_eq!(
        out.last().map(|o| (o.rule.as_str(), o.decision)),
        Some(("GENERAL:default", Decision::Kept))
    );
    assert_eq!(
        out.last().map(|o| o.persisted[0].layer.as_str()),
        Some("GENERAL")
    );
}

#[test]
fn the_last_sink_decision_wins() {
    let sampler_then_enforcer = "filter {\n  sink {\n    sampler { rateLimit('x') { rpm 0 } }\n    if (tag('important') == 'yes') { enforcer {} }\n  }\n}";
    let mut important = log("GENERAL", Body::None);
    important.tags.push(("important".into(), "yes".into()));
    assert_eq!(
        run1(sampler_then_enforcer, &important).decision,
        Decision::Kept
    );
    assert_eq!(
        run1(sampler_then_enforcer, &log("GENERAL", Body::None)).decision,
        Decision::SampledOut
    );
    let enforcer_then_dropper = "filter {\n  sink {\n    enforcer {}\n    dropper {}\n  }\n}";
    let dropped = run1(enforcer_then_dropper, &log("GENERAL", Body::None));
    assert_eq!((dropped.decision, dropped.save), (Decision::Dropped, false));
}

#[test]
fn rate_limit_is_per_id_per_window_of_the_callers_clock() {
    let f = file(&[(
        "r",
        "GENERAL",
        "filter {\n  sink {\n    sampler {\n      rateLimit(\"${log.service}:${tag('code')}\") { rpm 2 }\n    }\n  }\n}",
    )]);
    let mut state = LalState::default();
    let coded = |code: &str| {
        let mut l = log("GENERAL", Body::None);
        l.tags.push(("code".into(), code.into()));
        l
    };
    let mut decide = |code: &str, now: i64| {
        f.run_rule(0, &coded(code), now, false, &mut state)
            .map(|o| o.decision)
    };
    assert_eq!(decide("500", NOW_MS), Some(Decision::Kept));
    assert_eq!(decide("500", NOW_MS + 1), Some(Decision::Kept));
    assert_eq!(decide("500", NOW_MS + 2), Some(Decision::SampledOut));
    assert_eq!(decide("404", NOW_MS + 3), Some(Decision::Kept));
    assert_eq!(decide("500", NOW_MS + WINDOW_MS), Some(Decision::Kept));
}

#[test]
fn the_sink_persists_where_it_stands_and_abort_stops_everything_after() {
    let out = run1(
        "filter {\n  extractor { service 'before' }\n  sink {}\n  extractor { service 'after' }\n  abort {}\n  sink {}\n}",
        &log("GENERAL", Body::None),
    );
    assert_eq!(out.persisted.len(), 1);
    assert_eq!(out.persisted[0].service, "before");
    assert!(out.aborted);
    // Something was stored before the abort.
    assert_eq!(out.decision, Decision::Kept);
    let none = run1(
        "filter {\n  extractor { service 'x' }\n}",
        &log("GENERAL", Body::None),
    );
    assert_eq!(none.decision, Decision::NoSink);
}

#[test]
fn equality_is_numeric_against_number_literals_and_typed_otherwise() {
    let dsl = "filter {\n  json {}\n  extractor {\n    if (parsed.code == 200) { tag numeric: 'yes' }\n    if (parsed.code == '200') { tag typed: 'yes' }\n    if (parsed.text == '200') { tag text: 'yes' }\n    if (parsed.code >= 199.5) { tag ordered: 'yes' }\n  }\n  sink {}\n}";
    let out = run1(
        dsl,
        &log("GENERAL", Body::Json(r#"{"code":200,"text":"200"}"#.into())),
    );
    let record = &out.persisted[0];
    assert_eq!(record.tag("numeric"), Some("yes"));
    // JSON 200 is not the string "200".
    assert_eq!(record.tag("typed"), None);
    assert_eq!(record.tag("text"), Some("yes"));
    assert_eq!(record.tag("ordered"), Some("yes"));
}

#[test]
fn tag_is_never_null_and_bare_conditions_need_a_non_empty_value() {
    let dsl = "filter {\n  extractor {\n    if (tag('missing') != null) { tag notNull: 'yes' }\n    if (tag('missing')) { tag truthy: 'yes' }\n    if (!tag('missing')) { tag negated: 'yes' }\n    if (tag('flag') as Boolean) { tag flagged: 'yes' }\n  }\n  sink {}\n}";
    let mut l = log("GENERAL", Body::None);
    l.tags.push(("flag".into(), "TRUE".into()));
    let record = &run1(dsl, &l).persisted[0];
    assert_eq!(record.tag("notNull"), Some("yes"));
    assert_eq!(record.tag("truthy"), None);
    assert_eq!(record.tag("negated"), Some("yes"));
    assert_eq!(record.tag("flagged"), Some("yes"));
}

#[test]
fn text_parser_regexp_find_semantics_and_groups() {
    let dsl = "filter {\n  text { regexp $/level=(?<level>\\w+)( user=(?<user>\\w+))?/$ }\n  extractor {\n    tag level: parsed.level\n    if (parsed.user == null) { tag anonymous: 'yes' }\n  }\n  sink {}\n}";
    // Unanchored: the match is found in the middle of the line; `user` does not participate.
    let out = run1(
        dsl,
        &log("GENERAL", Body::Text("ts=1 level=WARN msg=x".into())),
    );
    let record = &out.persisted[0];
    assert_eq!(record.tag("level"), Some("WARN"));
    assert_eq!(record.tag("anonymous"), Some("yes"));
    // A group the pattern does not have fails the rule.
    let missing = run1(
        "filter {\n  text { regexp $/(?<a>x)/$ }\n  extractor { tag b: parsed.b }\n  sink {}\n}",
        &log("GENERAL", Body::Text("x".into())),
    );
    assert_eq!(
        missing.error.map(|e| e.error),
        Some(EvalError::NoSuchGroup { name: "b".into() })
    );
    // Java-only syntax cannot run here: the rule fails with the reason, per log.
    let lookahead = run1(
        "filter {\n  text { regexp $/a(?=b)/$ }\n  sink {}\n}",
        &log("GENERAL", Body::Text("ab".into())),
    );
    assert!(matches!(
        lookahead.error.map(|e| e.error),
        Some(EvalError::Regex { .. })
    ));
}

#[test]
fn yaml_parser_and_json_metadata_fallback() {
    let dsl = "filter {\n  yaml {}\n  extractor {\n    service parsed.app.name as String\n    tag level: parsed.level, svc: parsed.serviceInstance\n  }\n  sink {}\n}";
    let mut l = log(
        "GENERAL",
        Body::Yaml("app:\n  name: billing\nlevel: ERROR\n".into()),
    );
    l.service_instance = "i-1".into();
    let out = run1(dsl, &l);
    let record = &out.persisted[0];
    assert_eq!(record.service, "billing");
    assert_eq!(record.tag("level"), Some("ERROR"));
    // Metadata keys are added to the parsed map when absent.
    assert_eq!(record.tag("svc"), Some("i-1"));
    assert_eq!(record.content_type, ContentType::Yaml);
}

#[test]
fn timestamps_with_a_pattern_fall_back_to_the_log_time_when_they_do_not_parse() {
    let dsl = "filter {\n  extractor { timestamp tag('t'), 'yyyy-MM-dd HH:mm:ss' }\n  sink {}\n}";
    let mut good = log("GENERAL", Body::None);
    good.tags.push(("t".into(), "2021-01-02 00:00:00".into()));
    assert_eq!(
        run1(dsl, &good).persisted[0].timestamp_ms,
        NOW_MS + 86_400_000
    );
    let mut bad = log("GENERAL", Body::None);
    bad.tags.push(("t".into(), "soon".into()));
    assert_eq!(run1(dsl, &bad).persisted[0].timestamp_ms, NOW_MS);
}

#[test]
fn metrics_labels_drop_nulls_and_stringify_values() {
    let dsl = "filter {\n  json {}\n  extractor {\n    metrics {\n      name 'latency'\n      timestamp log.timestamp as Long\n      labels code: parsed.code, missing: parsed.nothing, ok: parsed.ok\n      value parsed.ms as Double\n    }\n  }\n}";
    let out = run1(
        dsl,
        &log(
            "GENERAL",
            Body::Json(r#"{"code":503,"ok":false,"ms":"12.5"}"#.into()),
        ),
    );
    let sample = &out.samples[0];
    assert_eq!(sample.value, 12.5);
    assert_eq!(sample.timestamp_ms, NOW_MS);
    let labels: Vec<(&str, &str)> = sample
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(labels, vec![("code", "503"), ("ok", "false")]);
}

#[test]
fn possibility_samples_with_the_states_generator() {
    let f = file(&[(
        "r",
        "GENERAL",
        "filter {\n  sink { sampler { possibility(50) {} } }\n}",
    )]);
    let mut state = LalState::with_seed(42);
    let kept = (0..1000)
        .filter(|_| {
            f.run_rule(0, &log("GENERAL", Body::None), NOW_MS, false, &mut state)
                .is_some_and(|o| o.decision == Decision::Kept)
        })
        .count();
    assert!((400..600).contains(&kept), "{kept}");
}

#[test]
fn native_log_json_is_read() {
    let json = serde_json::json!({
        "timestamp": "1609459200000", "service": "svc", "serviceInstance": "i", "endpoint": "/e",
        "layer": "GENERAL", "body": {"json": {"json": "{\"a\":1}"}},
        "traceContext": {"traceId": "t", "traceSegmentId": "s", "spanId": 3},
        "tags": {"data": [{"key": "level", "value": "INFO"}]}
    });
    let l = LogData::from_json(&json).expect("valid");
    assert_eq!(l.timestamp_ms, NOW_MS);
    assert_eq!(l.body, Body::Json("{\"a\":1}".into()));
    assert_eq!(l.trace_context.span_id, 3);
    assert_eq!(l.tag("level"), "INFO");
    assert!(LogData::from_json(&serde_json::json!({"timestamp": "x"})).is_err());
    assert!(LogData::from_json(&serde_json::json!([1])).is_err());
    // Stored with the span id only when there is a segment id.
    let record = &run1("filter {\n  sink {}\n}", &l).persisted[0];
    assert_eq!((record.segment_id.as_str(), record.span_id), ("s", Some(3)));
}

#[test]
fn process_registry_names_virtual_processes_for_every_upstream_method() {
    let dsl = "filter {\n  json {}\n  extractor {\n    tag local: ProcessRegistry.generateVirtualLocalProcess(parsed.service as String, parsed.instance as String) as String\n    tag remote: ProcessRegistry.generateVirtualRemoteProcess(parsed.service as String, parsed.instance as String, parsed.address as String) as String\n    tag named: ProcessRegistry.generateVirtualProcess(parsed.service as String, parsed.instance as String, 'UNKNOWN_REMOTE') as String\n  }\n  sink {}\n}";
    let out = run1(
        dsl,
        &log("GENERAL", Body::Json(r#"{"service":"s","instance":"i","address":"10.0.0.9:80"}"#.into())),
    );
    let record = &out.persisted[0];
    assert_eq!(record.tag("local"), Some("virtual:s:i:UNKNOWN_LOCAL"));
    assert_eq!(record.tag("remote"), Some("virtual:s:i:10.0.0.9:80"));
    assert_eq!(record.tag("named"), Some("virtual:s:i:UNKNOWN_REMOTE"), "the upstream k8s-service rule's call evaluates");
}

#[test]
fn tag_compared_with_a_string_matches_as_the_evaluated_comparison() {
    let mut l = log("GENERAL", Body::Text("x".into()));
    l.tags = vec![("kind".into(), "A".into())];
    let dsl = "filter {\n  extractor {\n    tag eq: tag('kind') == 'A'\n    tag ne: tag('kind') != 'A'\n    tag flipped: ('B' == tag(\"kind\"))\n    tag missing: tag('none') == ''\n    tag via_var: tag('kind') == tag('kind').toString()\n  }\n  sink {}\n}";
    let record = &run1(dsl, &l).persisted[0];
    assert_eq!(record.tag("eq"), Some("true"));
    assert_eq!(record.tag("ne"), Some("false"));
    assert_eq!(record.tag("flipped"), Some("false"));
    assert_eq!(record.tag("missing"), Some("true"), "a missing tag reads as empty");
    assert_eq!(record.tag("via_var"), Some("true"));
}
