//! SkyWalking's LAL compiler tests, case by case: every accept/reject case that concerns compiling
//! (not evaluating) a script, named after the upstream test class and method it comes from
//! (`oap-server/analyzer/log-analyzer/src/test/java/org/apache/skywalking/oap/log/analyzer/v2/compiler/`).
//!
//! Coverage:
//! - `LALClassGeneratorBasicTest`: fully.
//! - `LALClassGeneratorTest`: fully (the `generateSource*` cases are checked for compiling only;
//!   `parseInterpolatedIdParts` is a parser-internals test with no compile outcome).
//! - `LALClassGeneratorConditionTest`: fully for compile outcomes (what the generated Java looks
//!   like is upstream's codegen, not ours; `compileShippedEnvoyAiGatewayLlmRule` is the corpus test).
//! - `LALClassGeneratorDefTest`: fully.
//! - `LALClassGeneratorExtractorTest`: fully, except `compileOutputFieldWithInvalidSetter` (an
//!   output type given as a Java class is opaque to hotrule, which accepts any field for it).
//! - `LALClassGeneratorSinkTest`: fully.
//! - `LALScriptParserTest`: fully. It only parses; where the class generator would then reject
//!   the script (`parsed.x` with no parser, an output field without an output type), the case
//!   expects that error, since compiling here is parsing and checking together.
//! - `../dsl/DSLSecurityTest` (the v1 sandbox cases, which v2's grammar rejects as well): fully.
//! - `LALScriptExecutionTest`, `LALExpressionExecutionTest`: the rule files they compile that are
//!   not copies of bundled rules (`feature-cases/execution-basic.yaml`, `source-attribution.yaml`,
//!   `oap-cases/network-profiling-e2e.yaml`); running them against logs is evaluation.
//! - Not ported: `LALSourceAttribution*Test`, `LALSourceFileResolvesTest`,
//!   `LalPayloadDebugDumpTest` and the provider tests (evaluation, source maps, file loading);
//!   `LALConfigsLayerDefinitionsTest` belongs to the runtime layers; the v1 `dsl/DSLTest` and
//!   `DSLV2Test` run scripts against logs.
//!
//! `setInputType(X.class)` upstream is `inputType: X` in the rule here; `setOutputType(X.class)`
//! is `outputType: X`.

use hotrule_rule_compiler::{DslKind, compile};

/// What compiling one case must give: `Ok`, or an error at a line and column of the *dsl* (1-based,
/// relative to the script; the file position is checked from it) whose message contains the text.
enum Expect {
    Ok,
    Err(usize, usize, &'static str),
}

struct Case {
    upstream: &'static str,
    /// Rule keys written before `dsl:` (each `key: value` on its own line).
    header: &'static [&'static str],
    dsl: &'static str,
    expect: Expect,
}

const HTTP_ENTRY: &str = "inputType: io.envoyproxy.envoy.data.accesslog.v3.HTTPAccessLogEntry";

fn rule_file(case: &Case) -> (String, usize) {
    let mut text = String::from("rules:\n  - name: r\n");
    for line in case.header {
        text.push_str(&format!("    {line}\n"));
    }
    text.push_str("    dsl: |\n");
    let first_dsl_line = text.lines().count() + 1;
    for line in case.dsl.lines() {
        text.push_str(&format!("      {line}\n"));
    }
    (text, first_dsl_line)
}

fn run(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let (text, first_dsl_line) = rule_file(case);
        let outcome = compile(DslKind::Lal, text.as_bytes());
        let problem = match (&case.expect, outcome) {
            (Expect::Ok, Ok(_)) => None,
            (Expect::Ok, Err(error)) => Some(format!("expected to compile, got {error}")),
            (Expect::Err(..), Ok(_)) => Some("expected an error, compiled".to_owned()),
            (Expect::Err(line, column, message), Err(error)) => {
                let at = (first_dsl_line + line - 1, column + 6);
                ((error.line, error.column) != at || !error.message.contains(message)).then(|| {
                    format!(
                        "expected {}:{} (dsl {line}:{column}) '{message}', got {error}",
                        at.0, at.1
                    )
                })
            }
        };
        if let Some(problem) = problem {
            failures.push(format!("{}: {problem}", case.upstream));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with SkyWalking:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

const fn ok(upstream: &'static str, dsl: &'static str) -> Case {
    Case {
        upstream,
        header: &[],
        dsl,
        expect: Expect::Ok,
    }
}

const fn err(
    upstream: &'static str,
    dsl: &'static str,
    line: usize,
    column: usize,
    message: &'static str,
) -> Case {
    Case {
        upstream,
        header: &[],
        dsl,
        expect: Expect::Err(line, column, message),
    }
}

/// The envoy-als rule: it reads a typed input (`HTTPAccessLogEntry`) through `parsed` with no parser.
const ENVOY_ALS: &str = "filter {\n  if (parsed?.response?.responseCode?.value as Integer < 400 && !parsed?.commonProperties?.responseFlags?.toString()?.trim()) {\n    abort {}\n  }\n  extractor {\n    if (parsed?.response?.responseCode) {\n      tag 'status.code': parsed?.response?.responseCode?.value\n    }\n    tag 'response.flag': parsed?.commonProperties?.responseFlags\n  }\n  sink {}\n}";

#[path = "upstream_lal/class_generator.rs"]
mod class_generator;
#[path = "upstream_lal/condition.rs"]
mod condition;
#[path = "upstream_lal/features.rs"]
mod features;
#[path = "upstream_lal/parser_and_files.rs"]
mod parser_and_files;
