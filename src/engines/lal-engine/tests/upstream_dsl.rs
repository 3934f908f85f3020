//! SkyWalking's `DSLTest` cases (log-analyzer `dsl/DSLTest`): each script runs on an empty
//! `LogData`. Upstream only checks that evaluation does not throw; here the outcome is asserted
//! too. The case `e2e` with `as int` and `(... as Map)?.keySet()` is not ported: `int` is not one
//! of the casts LAL v2 (and hotrule's compiler) accepts.

mod common;

use common::{NOW_MS, load_lal_text};
use hotrule_lal_engine::{Decision, LalState, LogData, RuleOutcome, Warning};

fn run(dsl: &str) -> RuleOutcome {
    run_in("GENERAL", dsl)
}

fn run_in(layer: &str, dsl: &str) -> RuleOutcome {
    let indented: String = dsl.lines().map(|line| format!("      {line}\n")).collect();
    let file = load_lal_text(&format!(
        "rules:\n  - name: case\n    layer: {layer}\n    dsl: |\n{indented}"
    ));
    file.run_rule(
        0,
        &LogData::default(),
        NOW_MS,
        false,
        &mut LalState::default(),
    )
    .expect("one rule")
}

#[test]
fn dsl_test_parser() {
    let outcome = run(r#"filter {
  json {
    abortOnFailure false // for test purpose, we want to persist all logs
  }
  text {
    abortOnFailure false // for test purpose, we want to persist all logs
    regexp $/(?s)(?<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}.\d{3}) \[TID:(?<tid>.+?)] \[(?<thread>.+?)] (?<level>\w{4,}) (?<logger>.{1,36}) (?<msg>.+)/$
  }
  yaml {
    abortOnFailure false // for test purpose, we want to persist all logs
  }
}"#);
    assert_eq!(outcome.error, None);
    assert!(!outcome.aborted);
    // No sink: nothing is stored.
    assert_eq!(outcome.decision, Decision::NoSink);
}

#[test]
fn dsl_test_extractor() {
    let outcome = run(r#"filter {
  extractor {
    service "test"
    instance "test"
    endpoint "test"
    layer "mesh"
    traceId "123"
    segmentId "123"
    spanId "123"
    timestamp "123"
    metrics {
      name "metricsName"
      value 123
      timestamp "123"
      labels "k1": "v1"
    }
  }
}"#);
    assert_eq!(outcome.error, None);
    let record = outcome.record();
    assert_eq!(
        (
            record.service.as_str(),
            record.instance.as_str(),
            record.endpoint.as_str()
        ),
        ("test", "test", "test")
    );
    assert_eq!(record.layer, "mesh");
    assert_eq!(
        (record.trace_id.as_str(), record.segment_id.as_str()),
        ("123", "123")
    );
    assert_eq!(record.span_id, Some(123));
    assert_eq!(record.timestamp_ms, 123);
    assert_eq!(outcome.samples.len(), 1);
    let sample = &outcome.samples[0];
    assert_eq!(sample.name, "metricsName");
    assert_eq!(sample.value, 123.0);
    assert_eq!(sample.timestamp_ms, 123);
    assert_eq!(sample.label("k1"), "v1");
    assert_eq!(outcome.decision, Decision::NoSink);
}

#[test]
fn dsl_test_sink() {
    // `parsed?.commonProperties` needs a typed input at compile time (as in LAL v2): the case
    // runs as a MESH rule, whose layer has one, on a plain log (so `parsed` is the metadata).
    let outcome = run_in(
        "MESH",
        r#"filter {
  sink {
    enforcer {
    }
    dropper {
    }
    sampler {
      if (parsed?.commonProperties?.responseFlags) {
        rateLimit("${log.service}:${log.body.json.json}:${parsed?.commonProperties?.responseFlags}") {
          rpm 100
        }
      } else {
        rateLimit("${log.service}:${log.body?.type}:${log.traceContext?.traceId}:${parsed?.response?.responseCode}") {
          rpm 100
        }
      }
    }
  }
}"#,
    );
    assert_eq!(outcome.error, None);
    // The sampler ran last and let the first log through: the dropper's decision is overridden.
    assert!(outcome.save);
    assert_eq!(outcome.decision, Decision::Kept);
}

#[test]
fn dsl_test_e2e_text() {
    let outcome = run(r#"filter {
  text {
    abortOnFailure false // for test purpose, we want to persist all logs
    regexp $/(?s)(?<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}.\d{3}) \[TID:(?<tid>.+?)] \[(?<thread>.+?)] (?<level>\w{4,}) (?<logger>.{1,36}) (?<msg>.+)/$
  }
  extractor {
    metrics {
      timestamp "${log.timestamp}"
      labels level: parsed.level, service: log.service, instance: log.serviceInstance
      name "log_count"
      value 1
    }
  }
  sink {
  }
}"#);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.decision, Decision::Kept);
    // `log.timestamp` is 0 on an empty log: the sample would land in 1970 and vanish.
    assert!(outcome.samples.is_empty());
    assert_eq!(
        outcome.warnings,
        vec![Warning::MetricWithoutTimestamp {
            rule: "GENERAL:case".into(),
            metric: "log_count".into()
        }]
    );
}

#[test]
fn dsl_test_extractor_slow_sql() {
    let outcome = run(r#"filter {
        json{
        }
        extractor{
          layer parsed.layer as String
          service parsed.service as String
          timestamp parsed.time as String
          if (tag("LOG_KIND") == "SLOW_SQL") {
             slowSql {
                      id parsed.id as String
                      statement parsed.statement as String
                      latency parsed.query_time as Long
                     }
          }
        }
      }"#);
    // An empty log has no JSON body: the parser fails and aborts (abortOnFailure defaults to true).
    assert_eq!(outcome.error, None);
    assert!(outcome.aborted);
    assert_eq!(outcome.decision, Decision::Aborted);
}
