//! MAL semantics through the public API: full expressions, shapes, function validation.

use hotrule_rule_compiler::ast::{Expr, ExprKind};
use hotrule_rule_compiler::{
    Compiled, DataType, Downsampling, DslKind, LayerDefinition, MalFile, MetricShape, ScopeType,
    compile,
};

fn mal(text: &str) -> MalFile {
    match compile(DslKind::Mal, text.as_bytes()) {
        Ok(Compiled::Mal(file)) => file,
        Ok(other) => panic!("not MAL: {other:?}"),
        Err(error) => panic!("{error}\n{text}"),
    }
}

fn mal_error(text: &str) -> String {
    match compile(DslKind::Mal, text.as_bytes()) {
        Ok(compiled) => panic!("expected an error, got {compiled:?}"),
        Err(error) => format!("{}:{} {}", error.line, error.column, error.message),
    }
}

/// A file with one rule named `r` under prefix `p`.
fn one_rule(header: &str, exp: &str) -> String {
    format!("metricPrefix: p\n{header}metricsRules:\n  - name: r\n    exp: \"{exp}\"\n")
}

fn shape_of(header: &str, exp: &str) -> MetricShape {
    let file = mal(&one_rule(header, exp));
    *file
        .metrics()
        .get("p_r")
        .unwrap_or_else(|| panic!("no p_r in {:?}", file.metrics()))
}

const SERVICE: &str = "expSuffix: service(['s'], Layer.GENERAL)\n";

/// Call chains without argument details: `a.tag(_).sum(_)`.
fn outline(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Name(name) => name.clone(),
        ExprKind::Paren(inner) => format!("({})", outline(inner)),
        ExprKind::Binary { op, left, right } => {
            format!("{} {} {}", outline(left), op.symbol(), outline(right))
        }
        ExprKind::Call(call) => {
            let receiver = call
                .receiver
                .as_ref()
                .map(|r| format!("{}.", outline(r)))
                .unwrap_or_default();
            let args: Vec<String> = call.args.iter().map(|arg| outline(&arg.value)).collect();
            format!("{receiver}{}({})", call.method.name, args.join(", "))
        }
        _ => "_".to_owned(),
    }
}

#[test]
fn exp_prefix_is_injected_after_every_sample_family_and_suffix_wraps() {
    let header =
        "expPrefix: tag({tags -> tags.x = 'y'})\nexpSuffix: service(['s'], Layer.GENERAL)\n";
    let file = mal(&one_rule(
        header,
        "(a.sum(['s']) + b.downsampling(SUM)).div(c) * 2 - time()",
    ));
    let rule = file.rules.first().expect("one rule");
    assert_eq!(
        outline(&rule.expr),
        "((a.tag(_).sum(_) + b.tag(_).downsampling(SUM)).div(c.tag(_)) * _ - time()).service(_, _)"
    );
    assert_eq!(
        rule.shape,
        MetricShape {
            scope: ScopeType::Service,
            downsampling: Downsampling::Sum,
            data_type: DataType::Single
        }
    );
    assert_eq!(
        file.exp_prefix.as_deref(),
        Some("tag({tags -> tags.x = 'y'})")
    );
    assert!(file.filter.is_none());
}

#[test]
fn multi_line_prefix_chain_from_the_corpus_shape() {
    let text = "metricPrefix: p\nexpSuffix: |-\n  service(['s'], Layer.GENERAL)\n  .instance(['s'], ['i'], Layer.GENERAL)\nexpPrefix: |-\n  forEach(['a'], { k, tags ->\n    tags[k] = 'x'\n  })\n  .forEach(['b'], { k, tags -> return })\nmetricsRules:\n  - name: r\n    exp: m.sum(['s', 'i'])\n";
    let file = mal(text);
    let rule = file.rules.first().expect("one rule");
    assert_eq!(
        outline(&rule.expr),
        "(m.forEach(_, _).forEach(_, _).sum(_)).service(_, _).instance(_, _, _)"
    );
    assert_eq!(rule.shape.scope, ScopeType::ServiceInstance);
    assert_eq!(rule.shape.data_type, DataType::Single);
    assert_eq!(rule.line, 11);
}

#[test]
fn labels_surviving_the_scope_make_a_labeled_metric() {
    assert_eq!(
        shape_of(SERVICE, "m.sum(['s', 'step'])").to_string(),
        "avgLabeled@SERVICE"
    );
    assert_eq!(shape_of(SERVICE, "m.sum(['s'])").to_string(), "avg@SERVICE");
    assert_eq!(shape_of(SERVICE, "m").to_string(), "avg@SERVICE");
    // The last aggregation decides.
    assert_eq!(
        shape_of(SERVICE, "m.sum(['s', 'x']).sum(['s'])").to_string(),
        "avg@SERVICE"
    );
    assert_eq!(
        shape_of(SERVICE, "m.sum(['s']).max(['s', 'x'])").to_string(),
        "avgLabeled@SERVICE"
    );
    assert_eq!(
        shape_of(SERVICE, "m.count((['s', 'x']))").to_string(),
        "avgLabeled@SERVICE"
    );
    // String arguments of process scopes name labels too.
    let process = "expSuffix: process(['s'], ['i'], ['p'], 'layer')\n";
    assert_eq!(
        shape_of(process, "m.avg(['s', 'i', 'p', 'layer'])").to_string(),
        "avg@PROCESS"
    );
    assert_eq!(
        shape_of(process, "m.avg(['s', 'i', 'p', 'layer', 'uri'])").to_string(),
        "avgLabeled@PROCESS"
    );
}

#[test]
fn histograms_and_downsampling() {
    assert_eq!(
        shape_of(SERVICE, "m.sum(['s', 'le']).histogram()").to_string(),
        "avgHistogram@SERVICE"
    );
    assert_eq!(
        shape_of(SERVICE, "m.histogram().histogram_percentile([])").to_string(),
        "avgHistogram@SERVICE"
    );
    assert_eq!(
        shape_of(SERVICE, "m.sum(['s', 'le']).histogram('le', TimeUnit.MILLISECONDS).histogram_percentile([50, 99]).downsampling(MAX)")
            .to_string(),
        "maxHistogramPercentile@SERVICE"
    );
    assert_eq!(
        shape_of(SERVICE, "m.downsampling(SUM_PER_MIN).downsampling(LATEST)").to_string(),
        "latest@SERVICE"
    );
}

#[test]
fn scopes_in_one_chain_are_one_scope_and_the_last_decides() {
    let suffix = "expSuffix: service(['s'], Layer.GENERAL).endpoint(['s'], ['e'], Layer.GENERAL)\n";
    assert_eq!(
        shape_of(suffix, "m.sum(['s', 'e'])").to_string(),
        "avg@ENDPOINT"
    );
    let relation = "expSuffix: serviceRelation(DetectPoint.CLIENT, ['a'], ['b'], Layer.MESH)\n";
    assert_eq!(
        shape_of(relation, "m.sum(['a', 'b'])").to_string(),
        "avg@SERVICE_RELATION"
    );
    let error = mal_error(&one_rule(
        "",
        "a.service(['s'], Layer.X) + b.service(['s'], Layer.X)",
    ));
    assert!(
        error.contains("metric 'p_r' has more than one scope"),
        "{error}"
    );
}

#[test]
fn metric_names_and_duplicates() {
    let file = mal(
        "expSuffix: service(['s'], Layer.GENERAL)\nmetricsRules:\n  - name: r\n    exp: m\n  - name: r\n    exp: n.sum(['s'])\n",
    );
    assert_eq!(
        file.metrics().keys().collect::<Vec<_>>(),
        vec!["r"],
        "no prefix: the name alone"
    );
    assert_eq!(file.rules.len(), 2);
}

#[test]
fn function_arguments_are_checked() {
    let cases = [
        (
            "m.tagEqual('a')",
            "'tagEqual' takes at least 2 argument(s), found 1",
        ),
        (
            "m.tagEqual('a', 'b', 'c')",
            "'tagEqual' takes (tag, value) pairs, found 3",
        ),
        ("m.tagMatch('a', '(x')", "invalid regular expression"),
        (
            "m.sum(foo: ['a'])",
            "'sum' does not take a named argument 'foo'",
        ),
        (
            "m.sum('a')",
            "argument of 'sum' must be a list of label names",
        ),
        (
            "m.histogram_percentile([150])",
            "an integer percentile from 0 to 100",
        ),
        (
            "m.valueEqual('x')",
            "argument of 'valueEqual' must be a number",
        ),
        ("m.increase('PT0S')", "'PT0S' is not an ISO-8601 duration"),
        (
            "m.retagByK8sMeta('s', K8sRetagType.Pod2Node, 'p', 'n')",
            "'K8sRetagType.Pod2Node' is not a known constant",
        ),
        ("m > 1", "operator '>' is not allowed"),
        ("m.tag('x')", "argument of 'tag' must be a closure"),
        ("'m'", "a string is not allowed"),
        ("foo()", "unknown MAL function 'foo'"),
        ("m.irate(1)", "'irate' takes 0 argument(s), found 1"),
    ];
    for (exp, expected) in cases {
        let error = mal_error(&one_rule(SERVICE, exp));
        assert!(error.contains(expected), "{exp}: {error}");
    }
    // Extension functions cannot be checked without the extension; they are accepted.
    assert_eq!(
        shape_of(
            SERVICE,
            "ns::smooth(m.sum(['s']), 3).rate('PT1M').other::f('x')"
        )
        .to_string(),
        "avg@SERVICE"
    );
    // Any Groovy is fine inside closures.
    assert_eq!(
        shape_of(
            SERVICE,
            "m.tag({ t -> t.a = t.b?.replaceAll('x', '').trim() ?: 'n' })"
        )
        .to_string(),
        "avg@SERVICE"
    );
}

#[test]
fn filter_prefix_and_layer_definitions() {
    let file = mal(
        "filter: '{ tags -> tags.job == \"x\" }'\nlayerDefinitions:\n  - name: MY_LAYER\n    ordinal: 1000\n    normal: true\n  - name: OTHER\n    ordinal: 1001\n",
    );
    assert!(file.filter.is_some());
    assert_eq!(
        file.layer_definitions,
        vec![
            LayerDefinition {
                name: "MY_LAYER".to_owned(),
                ordinal: 1000,
                normal: true
            },
            LayerDefinition {
                name: "OTHER".to_owned(),
                ordinal: 1001,
                normal: true
            },
        ]
    );
    assert!(mal_error("filter: '{ a, b -> a }'\n").contains("filter must be a closure"));
    assert_eq!(
        mal_error("expPrefix: m.tag({t -> t})\n"),
        "1:12 expPrefix must be a chain of MAL function calls such as tag({tags -> ...})"
    );
    assert!(
        mal_error("layerDefinitions:\n  - name: A\n    ordinal: x\n")
            .contains("'ordinal' must be an integer")
    );
}

#[test]
fn error_inside_a_double_quoted_filter_points_at_the_token() {
    assert_eq!(
        mal_error("filter: \"{ tags -> tags.a == 'x' && }\"\n"),
        "1:37 unexpected '}', expected an expression"
    );
}

#[test]
fn layer_definitions_keep_repeats_and_default_to_ordinal_0_and_normal_true() {
    // Judging declarations (ranges, repeats, clashes) is the caller's job, against the layers
    // registered at apply time; the compiler reports what is written.
    let file = mal(
        "layerDefinitions:\n  - name: A\n  - name: A\n    ordinal: 100000\n    normal: false\n  - name: bad-name\n    ordinal: 5\n",
    );
    let triples: Vec<(&str, i64, bool)> = file
        .layer_definitions
        .iter()
        .map(|d| (d.name.as_str(), d.ordinal, d.normal))
        .collect();
    assert_eq!(
        triples,
        vec![("A", 0, true), ("A", 100_000, false), ("bad-name", 5, true)]
    );
    assert!(mal_error("layerDefinitions:\n  - ordinal: 100000\n").contains("is missing 'name'"));
    assert!(
        mal_error("layerDefinitions:\n  - name: A\n    ordinal: 1\n    colour: red\n")
            .contains("unknown key 'colour'")
    );
}
