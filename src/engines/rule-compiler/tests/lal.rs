//! LAL semantics through the public API: rule keys, output types, statement structure.

use hotrule_rule_compiler::{Compiled, DslKind, LalFile, LalKey, compile};

/// A file with one rule whose dsl is `dsl` (indented into a literal block).
fn rule_file(header: &str, dsl: &str) -> String {
    let body: String = dsl.lines().map(|line| format!("      {line}\n")).collect();
    format!("rules:\n  - name: r\n{header}    dsl: |\n{body}")
}

fn lal(text: &str) -> LalFile {
    match compile(DslKind::Lal, text.as_bytes()) {
        Ok(Compiled::Lal(file)) => file,
        Ok(other) => panic!("not LAL: {other:?}"),
        Err(error) => panic!("{error}\n{text}"),
    }
}

fn lal_error(text: &str) -> String {
    match compile(DslKind::Lal, text.as_bytes()) {
        Ok(compiled) => panic!("expected an error, got {compiled:?}"),
        Err(error) => format!("{}:{} {}", error.line, error.column, error.message),
    }
}

const EVERYTHING: &str = r#"filter {
  json { abortOnFailure false }
  text {
    abortOnFailure true
    regexp "(?<ts>\\d+) (?<msg>.*)"
  }
  if (tag("LOG_KIND") != "X") {
    abort {}
  } else if (parsed.a as Integer > 3) {
    def local = parsed.b as String
  }
  extractor {
    service parsed.service as String
    instance parsed.instance
    endpoint "${parsed.method} ${parsed.uri}"
    layer "GENERAL"
    traceId parsed.traceId
    segmentId parsed.segmentId
    spanId parsed.spanId as Integer
    timestamp parsed.time as String, "yyyy-MM-dd"
    tag level: parsed.level, 'http.status': parsed.status
    metrics {
      timestamp log.timestamp as Long
      labels a: parsed.a, b: sourceAttribute("b")
      name "m"
      value parsed.v as Double
    }
    slowSql {
      id parsed.id
      statement parsed.statement
      latency parsed.latency as Long
    }
    sampledTrace {
      latency 1
      uri parsed.uri
      reason "slow"
      processId "p"
      destProcessId "d"
      detectPoint "client"
      componentId 49
    }
  }
  sink {
    sampler {
      if (parsed.important) {
        rateLimit("${log.service}:important") { rpm 6000 }
      } else {
        possibility(10) {}
      }
    }
    dropper {}
    enforcer {}
  }
}"#;

#[test]
fn every_documented_statement_is_accepted() {
    let file = lal(&rule_file("    layer: GENERAL\n", EVERYTHING));
    assert_eq!(
        file.keys().into_iter().collect::<Vec<_>>(),
        vec![(LalKey("GENERAL:r".to_owned()), None)]
    );
    let rule = file.rules.first().expect("one rule");
    assert_eq!(rule.dsl.statements.len(), 1);
    assert_eq!(rule.line, 2);
}

#[test]
fn layer_defaults_to_auto_in_keys() {
    let dsl = "filter { sink {} }";
    assert_eq!(
        lal(&rule_file("", dsl)).rules.first().map(|r| r.key()),
        Some(LalKey("auto:r".to_owned()))
    );
    assert_eq!(
        lal(&rule_file("    layer: ''\n", dsl))
            .rules
            .first()
            .map(|r| r.key()),
        Some(LalKey("auto:r".to_owned()))
    );
    assert_eq!(
        lal(&rule_file("    layer: auto\n", dsl))
            .rules
            .first()
            .map(|r| r.key()),
        Some(LalKey("auto:r".to_owned()))
    );
}

#[test]
fn output_type_fields_depend_on_the_output_type() {
    // `json {}`: without a parser, `parsed.latency` would need a typed input.
    let dsl = "filter { json {}\n  extractor {\n    latency parsed.latency as Long\n  }\n}";
    assert_eq!(
        lal_error(&rule_file("", dsl)),
        "6:11 unknown statement 'latency' in extractor; expected one of: service, instance, endpoint, layer, timestamp, traceId, segmentId, spanId, tag, metrics, slowSql, sampledTrace, abort"
    );
    let slow_sql = lal(&rule_file("    outputType: SlowSQL\n", dsl));
    assert_eq!(
        slow_sql
            .rules
            .first()
            .and_then(|r| r.output_type.clone())
            .as_deref(),
        Some("SlowSQL")
    );
    lal(&rule_file("    outputType: SampledTrace\n", dsl));
    // An output type this crate cannot inspect accepts any field.
    lal(&rule_file(
        "    outputType: com.example.MyOutput\n",
        "filter {\n  extractor {\n    anything 1\n  }\n}",
    ));
    assert!(
        lal_error(&rule_file(
            "    outputType: SlowSQL\n",
            "filter {\n  extractor {\n    uri 'x'\n  }\n}"
        ))
        .contains("unknown statement 'uri'")
    );
}

#[test]
fn statement_forms_are_checked() {
    let cases = [
        (
            "filter {\n  extractor\n}",
            "5:9 'extractor' must be followed by a block { ... }",
        ),
        (
            "filter {\n  extractor {\n    service { x }\n  }\n}",
            "6:11 'service' takes a value, not a block",
        ),
        (
            "filter {\n  sink {\n    sampler {\n      rateLimit { rpm 1 }\n    }\n  }\n}",
            "7:13 'rateLimit' takes 1 argument(s) before its block, found 0",
        ),
        (
            "filter {\n  extractor {\n    parsed.x\n  }\n}",
            "6:11 expected a LAL statement in extractor, found an expression",
        ),
        (
            "filter {\n  return\n}",
            "5:9 'return' is not allowed in a LAL dsl",
        ),
        (
            "filter {\n  abort { sink {} }\n}",
            "5:17 unknown statement 'sink' in this block; expected one of: nothing",
        ),
        (
            "filter {}\nsink {}",
            "5:7 unknown statement 'sink' in the top level of a LAL dsl; expected one of: filter",
        ),
        ("x = 1", "4:7 a LAL dsl must be a 'filter { ... }' block"),
    ];
    for (dsl, expected) in cases {
        assert_eq!(lal_error(&rule_file("", dsl)), expected, "{dsl}");
    }
}

#[test]
fn unknown_keys_and_types_are_rejected() {
    assert_eq!(
        lal_error("rules:\n  - name: r\n    dls: x\n"),
        "3:5 unknown key 'dls' in a LAL rule; allowed keys: name, layer, dsl, outputType, inputType"
    );
    assert_eq!(
        lal_error("rules: {}\n"),
        "1:8 'rules' must be a list, found a mapping"
    );
    assert_eq!(
        lal_error("- a\n"),
        "1:3 the top level of a rule file must be a mapping, found a list"
    );
}
