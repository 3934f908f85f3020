//! SkyWalking's MAL compiler tests, case by case: every accept/reject case that concerns compiling
//! (not evaluating) an expression, named after the upstream test class and method it comes from
//! (`oap-server/analyzer/meter-analyzer/src/test/java/org/apache/skywalking/oap/meter/analyzer/v2/`).
//!
//! Coverage:
//! - `compiler/MALClassGeneratorTest`: fully (`runMethodHasLocalVariableTable` checks bytecode).
//! - `compiler/MALClassGeneratorClosureTest`: fully.
//! - `compiler/MALClassGeneratorScopeTest`: fully (its `formatExp` is the file's
//!   `expPrefix`/`expSuffix` here).
//! - `compiler/MALScriptParserTest`: fully for accept/reject (the AST shape asserted upstream is
//!   upstream's model).
//! - `dsl/DSLV2Test`: `parseCompilesSimpleExpression`, `parseThrowsOnInvalidExpression`,
//!   `expressionRunWithCompiledExpression`, `metadataExtraction` (the rest evaluates samples).
//! - `dsl/ScopeTest`: every expression (all compile; the samples they produce are evaluation).
//! - `dsl/DecorateTest`, `dsl/MALElvisFalsyTest`: their expressions.
//! - `dsl/K8sTagTest`, `dsl/TagFilterTest`: their expressions.
//! - `dsl/ArithmeticTest`: partially (the expression forms of its first 15 cases; the rest repeat
//!   them with other samples).
//! - Not ported (evaluation only, their expressions are forms covered above): `dsl/AggregationTest`,
//!   `dsl/BasicTest`, `dsl/IncreaseTest`, `dsl/ValueFilterTest`, `dsl/CounterWindowTest`,
//!   `dsl/CrossRuleCounterWindowTest`, `dsl/BanyanDBErrorRateReproTest`, and the source-map and
//!   line-attribution tests of `compiler/` (`Mal*LineAttributionTest`, `MalSourceMapTest`...), which
//!   check the generated classes' debug info.
//! - `dsl/FunctionTest`: fully (`tag-override`, the bare-map closure, is its one reject).
//! - `dsl/FilterTest`: every filter closure (as the file's `filter:`, which is how v2 runs them).
//! - `compiler/MALExtensionFunctionTest`: the parse and chain cases; `testUnknownNamespace`,
//!   `testUnknownMethod` and `testWrongArgCount` are a deliberate difference (hotrule cannot see
//!   the extensions installed in an OAP, so it accepts any `ns::method(...)`).
//! - `dsl/rule/RuleLoaderYAMLFailTest` (the `illegal-yaml` file) and the `empty-yaml` resource of
//!   the rule-loader tests; `RuleLoaderFailTest` is about missing files (no compile outcome).
//! - `v2/prometheus/rule/RulesLayerDefinitionsTest`: not here (layer definitions are validated
//!   with the runtime layers, outside this crate's parsing).
//!
//! Upstream compiles a bare expression; a hotrule rule must also name a scope (as a SkyWalking rule
//! file must for its metric to be stored), so an expression without a scope call gets the file
//! suffix `service(['service'], Layer.GENERAL)` here.

use hotrule_rule_compiler::{DslKind, compile};

enum Expect {
    Ok,
    /// An error at this line and column *of the file* whose message contains the text.
    Err(usize, usize, &'static str),
}

struct Case {
    upstream: &'static str,
    /// The whole file, or `None` to build it from `exp` alone.
    file: Option<&'static str>,
    exp: &'static str,
    expect: Expect,
}

const SCOPES: &[&str] = &[
    ".service(",
    ".instance(",
    ".endpoint(",
    ".process(",
    ".serviceRelation(",
    ".processRelation(",
    ".serviceInstanceRelation(",
];

/// A file with one rule `r` whose `exp` is a literal block scalar: the expression's first line is
/// line 6 (line 5 when `exp` names its own scope), indented by 6 (its first character is column 7).
fn file_of(exp: &str) -> String {
    let suffix = if SCOPES.iter().any(|scope| exp.contains(scope)) {
        "\n"
    } else {
        "\nexpSuffix: service(['service'], Layer.GENERAL)\n"
    };
    let mut text = format!("metricPrefix: m{suffix}metricsRules:\n  - name: r\n    exp: |\n");
    for line in exp.lines() {
        text.push_str(&format!("      {line}\n"));
    }
    text
}

fn run(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let text = case.file.map_or_else(|| file_of(case.exp), str::to_owned);
        let outcome = compile(DslKind::Mal, text.as_bytes());
        let problem = match (&case.expect, outcome) {
            (Expect::Ok, Ok(_)) => None,
            (Expect::Ok, Err(error)) => Some(format!("expected to compile, got {error}")),
            (Expect::Err(..), Ok(_)) => Some("expected an error, compiled".to_owned()),
            (Expect::Err(line, column, message), Err(error)) => {
                ((error.line, error.column) != (*line, *column) || !error.message.contains(message))
                    .then(|| format!("expected {line}:{column} '{message}', got {error}"))
            }
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}\n{text}", case.upstream));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with SkyWalking:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const fn ok(upstream: &'static str, exp: &'static str) -> Case {
    Case {
        upstream,
        file: None,
        exp,
        expect: Expect::Ok,
    }
}

/// An error in a file built from `exp` (see [`file_of`] for where the expression is).
const fn err(
    upstream: &'static str,
    exp: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        file: None,
        exp,
        expect: Expect::Err(line, column, message),
    }
}

const fn file_ok(upstream: &'static str, file: &'static str) -> Case {
    Case {
        upstream,
        file: Some(file),
        exp: "",
        expect: Expect::Ok,
    }
}

const fn file_err(
    upstream: &'static str,
    file: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        file: Some(file),
        exp: "",
        expect: Expect::Err(line, column, message),
    }
}

#[path = "upstream_mal/class_generator.rs"]
mod class_generator;
#[path = "upstream_mal/dsl.rs"]
mod dsl;
#[path = "upstream_mal/parser_and_issue.rs"]
mod parser_and_issue;
