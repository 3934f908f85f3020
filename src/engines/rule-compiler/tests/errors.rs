//! Every error must point at the offending token with its exact file line and column.

use hotrule_rule_compiler::{DslKind, compile};

/// Compiles `text` and returns `(line, column, message)` of the expected error.
fn error(kind: DslKind, text: &[u8]) -> (usize, usize, String) {
    match compile(kind, text) {
        Ok(compiled) => panic!("expected an error, compiled to {compiled:?}"),
        Err(error) => (error.line, error.column, error.message),
    }
}

#[track_caller]
fn assert_error(kind: DslKind, text: &str, line: usize, column: usize, message: &str) {
    let (got_line, got_column, got_message) = error(kind, text.as_bytes());
    assert_eq!(
        (got_line, got_column),
        (line, column),
        "position of: {got_message}"
    );
    assert!(
        got_message.contains(message),
        "message {got_message:?} does not contain {message:?}"
    );
}

const MAL_HEAD: &str = "metricPrefix: m\nexpSuffix: service(['s'], Layer.GENERAL)\nmetricsRules:\n";

#[test]
fn yaml_syntax_error() {
    let text = "metricPrefix: m\nmetricsRules:\n  - name: a: b\n";
    assert_error(
        DslKind::Mal,
        text,
        3,
        12,
        "YAML syntax error: mapping values are not allowed",
    );
}

#[test]
fn bad_token_in_a_plain_exp() {
    let text = format!("{MAL_HEAD}  - name: a\n    exp: metric.sum(['s']) * * 2\n");
    assert_error(
        DslKind::Mal,
        &text,
        5,
        30,
        "unexpected '*', expected an expression",
    );
}

#[test]
fn bad_token_on_the_second_line_of_a_literal_exp() {
    let text = format!(
        "{MAL_HEAD}  - name: a\n    exp: |\n      metric.sum(['s'])\n        .rate('PT1M') 5\n"
    );
    assert_error(
        DslKind::Mal,
        &text,
        7,
        23,
        "unexpected number 5, expected end of expression",
    );
}

#[test]
fn bad_token_in_a_double_quoted_exp_suffix() {
    let text = "metricPrefix: m\nexpSuffix: \"service(['s'], Layer.GENERAL\"\nmetricsRules: []\n";
    assert_error(DslKind::Mal, text, 2, 20, "'(' is never closed");
}

#[test]
fn unknown_mal_function() {
    let text = format!("{MAL_HEAD}  - name: a\n    exp: metric.summ(['s'])\n");
    assert_error(DslKind::Mal, &text, 5, 17, "unknown MAL function 'summ'");
}

#[test]
fn missing_scope() {
    let text = "metricPrefix: m\nmetricsRules:\n  - name: a\n    exp: metric.sum(['s'])\n";
    assert_error(
        DslKind::Mal,
        text,
        4,
        10,
        "metric 'm_a' has no scope function",
    );
}

#[test]
fn two_scopes() {
    let text = format!(
        "{MAL_HEAD}  - name: a\n    exp: metric.sum(['s']).endpoint(['s'], ['e'], Layer.GENERAL)\n"
    );
    assert_error(
        DslKind::Mal,
        &text,
        2,
        12,
        "metric 'm_a' has more than one scope: 'endpoint' at line 5, column 28 and 'service' here",
    );
}

#[test]
fn bad_downsampling() {
    let text = format!("{MAL_HEAD}  - name: a\n    exp: metric.downsampling(MEAN)\n");
    assert_error(
        DslKind::Mal,
        &text,
        5,
        30,
        "'MEAN' is not a downsampling type",
    );
}

#[test]
fn bad_rate_duration() {
    let text = format!("{MAL_HEAD}  - name: a\n    exp: metric.rate('1m')\n");
    assert_error(
        DslKind::Mal,
        &text,
        5,
        22,
        "'1m' is not an ISO-8601 duration",
    );
}

#[test]
fn duplicate_metric_with_a_different_shape() {
    let text = format!(
        "{MAL_HEAD}  - name: a\n    exp: metric.sum(['s'])\n  - name: a\n    exp: metric.sum(['s', 'x'])\n"
    );
    assert_error(
        DslKind::Mal,
        &text,
        6,
        11,
        "metric 'm_a' declared twice with different shapes: avg@SERVICE (line 4) vs avgLabeled@SERVICE",
    );
}

#[test]
fn unknown_top_level_key_and_missing_exp() {
    assert_error(
        DslKind::Mal,
        "metricPrefx: m\n",
        1,
        1,
        "unknown key 'metricPrefx' in a MAL rule file",
    );
    let text = format!("{MAL_HEAD}  - name: a\n");
    assert_error(
        DslKind::Mal,
        &text,
        4,
        5,
        "a metricsRules entry is missing 'exp'",
    );
    assert_error(
        DslKind::Mal,
        "metricsRules: 3\n",
        1,
        15,
        "'metricsRules' must be a list, found a scalar",
    );
}

#[test]
fn filter_must_be_a_closure() {
    assert_error(
        DslKind::Mal,
        "filter: \"tags.job == 'x'\"\n",
        1,
        10,
        "filter must be a closure",
    );
}

#[test]
fn lal_unknown_statement() {
    let text = "rules:\n  - name: r\n    layer: GENERAL\n    dsl: |\n      filter {\n        extractor {\n          servce parsed.service as String\n        }\n      }\n";
    assert_error(
        DslKind::Lal,
        text,
        7,
        11,
        "unknown statement 'servce' in extractor",
    );
}

#[test]
fn lal_unbalanced_brace() {
    let text = "rules:\n  - name: r\n    dsl: |\n      filter {\n        sink {\n      }\n";
    assert_error(DslKind::Lal, text, 4, 14, "'{' is never closed");
}

#[test]
fn lal_bad_regexp() {
    let text = "rules:\n  - name: r\n    dsl: |\n      filter {\n        text {\n          regexp $/(?<level>.+/$\n        }\n      }\n";
    assert_error(DslKind::Lal, text, 6, 18, "invalid regular expression");
}

#[test]
fn lal_duplicate_key_and_missing_dsl() {
    let rule = "  - name: r\n    layer: MESH\n    dsl: \"filter { sink {} }\"\n";
    assert_error(
        DslKind::Lal,
        &format!("rules:\n{rule}{rule}"),
        5,
        11,
        "rule key 'MESH:r' is declared twice (first at line 2)",
    );
    assert_error(
        DslKind::Lal,
        "rules:\n  - name: r\n    layer: MESH\n",
        2,
        5,
        "a LAL rule is missing 'dsl'",
    );
}

#[test]
fn lal_bad_cast_and_non_filter_top_level() {
    let text = "rules:\n  - name: r\n    dsl: |\n      filter {\n        extractor {\n          service parsed.s as Strin\n        }\n      }\n";
    assert_error(DslKind::Lal, text, 6, 31, "unsupported cast to 'Strin'");
    assert_error(
        DslKind::Lal,
        "rules:\n  - name: r\n    dsl: sink {}\n",
        3,
        10,
        "unknown statement 'sink' in the top level",
    );
}

#[test]
fn non_utf8_byte() {
    let (line, column, message) = error(
        DslKind::Mal,
        b"metricPrefix: m\nmetricsRules:\n  - name: \xff\n",
    );
    assert_eq!((line, column), (3, 11));
    assert!(message.contains("not valid UTF-8"), "{message}");
}

/// Issue 10: a body that is only comments, or a null document, declares nothing; compiling it as
/// "no rules" would remove every metric of the file, so it is an error at line 1, column 1. A
/// bundled file may be empty (SkyWalking ships a comment-only `placeholder.yaml`).
#[test]
fn empty_files_are_errors_unless_bundled() {
    for text in [
        "",
        "# just a comment\n",
        "\n\n",
        "~\n",
        "null\n",
        "---\n",
        "--- ~\n",
        "  \n# a\n# b\n",
    ] {
        for kind in [DslKind::Mal, DslKind::Lal] {
            let (line, column, message) = error(kind, text.as_bytes());
            assert_eq!((line, column), (1, 1), "{text:?}");
            assert!(message.contains("declares nothing"), "{text:?}: {message}");
            assert!(
                hotrule_rule_compiler::compile_bundled(kind, text.as_bytes()).is_ok(),
                "{text:?}"
            );
        }
    }
    // Saying so explicitly is fine.
    assert!(compile(DslKind::Mal, b"metricsRules: []\n").is_ok());
    assert!(compile(DslKind::Lal, b"rules: []\n").is_ok());
}

/// Issue 10: the duplicate-key check was quadratic (a 1 MB mapping of 118k keys took 15–20 s). It
/// is a hash set per mapping now; the duplicate at the very end is still found, with its position.
#[test]
fn a_mapping_of_118k_keys_compiles_quickly() {
    let keys = 118_000;
    let mut text: String = (0..keys).map(|i| format!("k{i:06}: v\n")).collect();
    text.push_str("k000000: again\n");
    let started = std::time::Instant::now();
    let (line, column, message) = error(DslKind::Mal, text.as_bytes());
    let elapsed = started.elapsed();
    assert_eq!((line, column), (keys + 1, 1), "{message}");
    assert!(message.contains("duplicate key 'k000000'"), "{message}");
    // Generous so that it cannot be flaky on a loaded machine: about 0.15–0.3 s optimised and
    // 1.7 s in a debug build (6 s with the machine at load 20); the quadratic check took 15–20 s
    // optimised, and far longer in a debug build.
    let bound = if cfg!(debug_assertions) { 30 } else { 3 };
    assert!(
        elapsed < std::time::Duration::from_secs(bound),
        "took {elapsed:?}"
    );
    eprintln!("118k-key mapping: {} bytes in {elapsed:?}", text.len());
}
