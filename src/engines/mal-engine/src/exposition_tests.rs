//! Unit tests of the exposition parser: valid input, escapes, and each error with its line.

use super::*;

const TS: i64 = 1_700_000_000_000;

fn ok(text: &str) -> Exposition {
    parse(text, TS, usize::MAX).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn err(text: &str) -> ExpositionError {
    match parse(text, TS, usize::MAX) {
        Ok(parsed) => panic!("{text:?} parsed: {:?}", parsed.samples),
        Err(e) => e,
    }
}

fn labels_of(sample: &Sample) -> Vec<(&str, &str)> {
    sample
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn a_typical_scrape() {
    let text = "\
# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 1234.5
node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 10
# a plain comment
\n\
# TYPE node_load1 gauge
node_load1 0.25
";
    let parsed = ok(text);
    assert_eq!(parsed.samples.len(), 3);
    let first = &parsed.samples[0];
    assert_eq!(first.name, "node_cpu_seconds_total");
    assert_eq!(labels_of(first), vec![("cpu", "0"), ("mode", "idle")]);
    assert_eq!(first.value, 1234.5);
    assert_eq!(first.timestamp_ms, TS);
    assert_eq!(parsed.samples[2].name, "node_load1");
    assert!(parsed.samples[2].labels.is_empty());
    assert_eq!(
        parsed.types.get("node_cpu_seconds_total"),
        Some(&MetricType::Counter)
    );
    assert_eq!(parsed.types.get("node_load1"), Some(&MetricType::Gauge));
    assert_eq!(
        parsed.help.get("node_cpu_seconds_total").map(String::as_str),
        Some("Seconds the CPUs spent in each mode.")
    );
}

#[test]
fn timestamps_blanks_and_trailing_commas() {
    let parsed = ok("  a{x=\"1\",} 2 1700000060000 \r\n\tb{ y = \"z\" , }\t3\r\nc {} 4\n");
    let got: Vec<(&str, f64, i64)> = parsed
        .samples
        .iter()
        .map(|s| (s.name.as_str(), s.value, s.timestamp_ms))
        .collect();
    assert_eq!(
        got,
        vec![("a", 2.0, 1_700_000_060_000), ("b", 3.0, TS), ("c", 4.0, TS)]
    );
    assert_eq!(labels_of(&parsed.samples[1]), vec![("y", "z")]);
    // Negative timestamps are integers too.
    assert_eq!(ok("a 1 -5").samples[0].timestamp_ms, -5);
}

#[test]
fn special_and_exotic_values() {
    let values: Vec<f64> = ok("a 1\nb +Inf\nc -Inf\nd Inf\ne -1.5e3\nf .5\ng 1.764776e+06\nh +3")
        .samples
        .iter()
        .map(|s| s.value)
        .collect();
    assert_eq!(
        values,
        vec![
            1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            -1500.0,
            0.5,
            1_764_776.0,
            3.0
        ]
    );
    let nan = ok("a NaN\nb nan");
    assert!(nan.samples.iter().all(|s| s.value.is_nan()));
}

#[test]
fn label_value_escapes() {
    let parsed = ok(r#"a{path="C:\\dir",quote="say \"hi\"",nl="one\ntwo",utf="é ∞ 🚀",empty=""} 1"#);
    assert_eq!(
        labels_of(&parsed.samples[0]),
        vec![
            ("empty", ""),
            ("nl", "one\ntwo"),
            ("path", "C:\\dir"),
            ("quote", "say \"hi\""),
            ("utf", "é ∞ 🚀"),
        ]
    );
    // Braces, commas and '#' inside a value are text.
    let parsed = ok(r#"a{v="{x,y} # not a comment"} 1"#);
    assert_eq!(labels_of(&parsed.samples[0]), vec![("v", "{x,y} # not a comment")]);
}

#[test]
fn help_escapes_and_names_with_colons() {
    let parsed = ok("# HELP a:b_c line\\none \\\\ back\na:b_c 1\n");
    assert_eq!(
        parsed.help.get("a:b_c").map(String::as_str),
        Some("line\none \\ back")
    );
    assert_eq!(parsed.samples[0].name, "a:b_c");
}

#[test]
fn histogram_family() {
    let text = "\
# TYPE rpc histogram
rpc_bucket{le=\"0.1\"} 1
rpc_bucket{le=\"+Inf\"} 3
rpc_sum 0.7
rpc_count 3
";
    let parsed = ok(text);
    assert_eq!(parsed.samples.len(), 4);
    assert_eq!(parsed.types.get("rpc"), Some(&MetricType::Histogram));
    assert_eq!(labels_of(&parsed.samples[1]), vec![("le", "+Inf")]);
}

#[test]
fn the_recorded_node_exporter_scrape() {
    let text = include_str!("../tests/data/node-exporter/scrape1.prom");
    let parsed = ok(text);
    assert_eq!(parsed.samples.len(), 507);
    assert!(parsed.types.len() > 100);
}

/// Text, the line the error must name, and a check of the error.
type ErrorCase = (&'static str, usize, fn(&ExpositionError) -> bool);

#[test]
fn each_error_names_its_line() {
    let cases: Vec<ErrorCase> = vec![
        ("ok 1\n9bad 1", 2, |e| {
            matches!(e, ExpositionError::InvalidMetricName { name, .. } if name == "9bad")
        }),
        ("a{9x=\"1\"} 1", 1, |e| {
            matches!(e, ExpositionError::InvalidLabelName { name, .. } if name == "9x")
        }),
        ("\n\na{x=1} 1", 3, |e| {
            matches!(e, ExpositionError::Unexpected { expected, .. } if expected.contains("open"))
        }),
        ("a{x} 1", 1, |e| {
            matches!(e, ExpositionError::Unexpected { expected, .. } if expected.contains("'='"))
        }),
        ("a{x=\"1\" y=\"2\"} 1", 1, |e| {
            matches!(e, ExpositionError::Unexpected { expected, .. } if expected.contains("','"))
        }),
        ("a{x=\"1", 1, |e| {
            matches!(e, ExpositionError::UnterminatedLabelValue { label, .. } if label == "x")
        }),
        ("a{x=\"1\",", 1, |e| {
            matches!(e, ExpositionError::Unexpected { found, .. } if found.contains("end"))
        }),
        ("a{x=\"\\t\"} 1", 1, |e| {
            matches!(e, ExpositionError::InvalidEscape { escape: 't', .. })
        }),
        ("a{x=\"1\",x=\"2\"} 1", 1, |e| {
            matches!(e, ExpositionError::DuplicateLabel { label, .. } if label == "x")
        }),
        ("a", 1, |e| matches!(e, ExpositionError::Unexpected { .. })),
        ("a{}", 1, |e| matches!(e, ExpositionError::Unexpected { .. })),
        ("a one", 1, |e| {
            matches!(e, ExpositionError::InvalidValue { text, .. } if text == "one")
        }),
        ("a --1", 1, |e| matches!(e, ExpositionError::InvalidValue { .. })),
        ("a 1 1.5", 1, |e| {
            matches!(e, ExpositionError::InvalidTimestamp { text, .. } if text == "1.5")
        }),
        ("a 1 2 3", 1, |e| {
            matches!(e, ExpositionError::TrailingText { text, .. } if text == "3")
        }),
        ("# TYPE a countr", 1, |e| {
            matches!(e, ExpositionError::UnknownType { text, .. } if text == "countr")
        }),
        ("# TYPE a counter extra", 1, |e| matches!(e, ExpositionError::TrailingText { .. })),
        ("# TYPE 1a counter", 1, |e| matches!(e, ExpositionError::InvalidMetricName { .. })),
        ("# TYPE a gauge\n# TYPE a gauge", 2, |e| {
            matches!(e, ExpositionError::DuplicateMetadata { keyword: "TYPE", .. })
        }),
        ("# HELP a x\n# HELP a y", 2, |e| {
            matches!(e, ExpositionError::DuplicateMetadata { keyword: "HELP", .. })
        }),
        ("a 1\n# TYPE a gauge", 2, |e| {
            matches!(e, ExpositionError::TypeAfterSamples { name, .. } if name == "a")
        }),
        ("h_bucket{le=\"1\"} 1\n\n# TYPE h histogram", 3, |e| {
            matches!(e, ExpositionError::TypeAfterSamples { name, .. } if name == "h")
        }),
    ];
    for (text, line, check) in cases {
        let error = err(text);
        assert_eq!(error.line(), line, "{text:?}: {error}");
        assert!(check(&error), "{text:?}: {error:?}");
        assert!(error.to_string().starts_with(&format!("line {line}:")), "{error}");
    }
}

#[test]
fn the_sample_bound_stops_early() {
    let error = parse("a 1\nb 2\nc 3\n", TS, 2).expect_err("bounded");
    assert_eq!(
        error,
        ExpositionError::TooManySamples { line: 3, limit: 2 }
    );
    assert_eq!(parse("a 1\nb 2\n# c\n", TS, 2).map(|e| e.samples.len()), Ok(2));
}

#[test]
fn comments_that_are_not_metadata_are_ignored() {
    let parsed = ok("#\n# HELPER text\n#TYPE a gauge\n# EOF\na 1");
    assert_eq!(parsed.samples.len(), 1);
    // `#TYPE` without a blank is still TYPE for Prometheus' lexer; here it is too.
    assert_eq!(parsed.types.get("a"), Some(&MetricType::Gauge));
}
