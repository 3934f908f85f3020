//! Layers: SkyWalking's built-in layer table, and the layers a compiled file refers to.
//!
//! The compiler accepts any `Layer.X` syntactically; whether `X` exists depends on which runtime
//! layers are registered at the moment a file is applied, which only the caller knows. So this
//! module answers two pure questions the caller combines with its registry:
//! - is a name (or an ordinal) one of SkyWalking's built-in layers ([`built_in`],
//!   [`built_in_by_ordinal`]), the constants of `org.apache.skywalking.oap.server.core.analysis.Layer`;
//! - which layers does a file use, and where ([`referenced_layers`]): `Layer.X` anywhere in a MAL
//!   expression (with `expPrefix`/`expSuffix` applied) or a LAL script, a LAL rule's `layer:`
//!   field (`auto` excepted), and a LAL `layer "X"` statement with a literal name.

use crate::ast::{Arg, Block, Else, Expr, ExprKind, GStringPart, IfStmt, StmtKind};
use crate::{Compiled, LalFile, MalFile};

/// One of SkyWalking's built-in layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltInLayer {
    pub name: &'static str,
    pub ordinal: i64,
    pub normal: bool,
}

const fn layer(name: &'static str, ordinal: i64, normal: bool) -> BuiltInLayer {
    BuiltInLayer {
        name,
        ordinal,
        normal,
    }
}

/// The built-in layers, in ordinal order (SkyWalking 11, `Layer.java`: ordinals 0 to 50).
pub const BUILT_IN_LAYERS: &[BuiltInLayer] = &[
    layer("UNDEFINED", 0, false),
    layer("MESH", 1, true),
    layer("GENERAL", 2, true),
    layer("OS_LINUX", 3, true),
    layer("K8S", 4, true),
    layer("FAAS", 5, true),
    layer("MESH_CP", 6, true),
    layer("MESH_DP", 7, true),
    layer("DATABASE", 8, true),
    layer("CACHE", 9, true),
    layer("BROWSER", 10, true),
    layer("SO11Y_OAP", 11, true),
    layer("SO11Y_SATELLITE", 12, true),
    layer("MQ", 13, true),
    layer("VIRTUAL_DATABASE", 14, false),
    layer("VIRTUAL_MQ", 15, false),
    layer("VIRTUAL_GATEWAY", 16, false),
    layer("K8S_SERVICE", 17, true),
    layer("MYSQL", 18, true),
    layer("VIRTUAL_CACHE", 19, false),
    layer("POSTGRESQL", 20, true),
    layer("APISIX", 21, true),
    layer("AWS_EKS", 22, true),
    layer("OS_WINDOWS", 23, true),
    layer("AWS_S3", 24, true),
    layer("AWS_DYNAMODB", 25, true),
    layer("AWS_GATEWAY", 26, true),
    layer("REDIS", 27, true),
    layer("ELASTICSEARCH", 28, true),
    layer("RABBITMQ", 29, true),
    layer("MONGODB", 30, true),
    layer("KAFKA", 31, true),
    layer("PULSAR", 32, true),
    layer("BOOKKEEPER", 33, true),
    layer("NGINX", 34, true),
    layer("ROCKETMQ", 35, true),
    layer("CLICKHOUSE", 36, true),
    layer("ACTIVEMQ", 37, true),
    layer("CILIUM_SERVICE", 38, true),
    layer("SO11Y_JAVA_AGENT", 39, true),
    layer("KONG", 40, true),
    layer("SO11Y_GO_AGENT", 41, true),
    layer("FLINK", 42, true),
    layer("BANYANDB", 43, true),
    layer("GENAI", 44, true),
    layer("VIRTUAL_GENAI", 45, false),
    layer("ENVOY_AI_GATEWAY", 46, true),
    layer("IOS", 47, true),
    layer("WECHAT_MINI_PROGRAM", 48, true),
    layer("ALIPAY_MINI_PROGRAM", 49, true),
    layer("AIRFLOW", 50, true),
];

/// The lowest ordinal a runtime (`layerDefinitions:`) layer may take. Below it: built-ins
/// (0–9 999) and boot-time extensions (10 000–99 999) upstream.
pub const RUNTIME_MIN_ORDINAL: i64 = 100_000;

/// The highest ordinal: upstream stores ordinals as a Java `int`.
pub const MAX_ORDINAL: i64 = i32::MAX as i64;

/// The built-in layer called `name`, if any.
pub fn built_in(name: &str) -> Option<&'static BuiltInLayer> {
    BUILT_IN_LAYERS.iter().find(|l| l.name == name)
}

/// The built-in layer with `ordinal`, if any.
pub fn built_in_by_ordinal(ordinal: i64) -> Option<&'static BuiltInLayer> {
    BUILT_IN_LAYERS.iter().find(|l| l.ordinal == ordinal)
}

/// A use of a layer by name, with the 1-based position where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerRef {
    pub name: String,
    pub line: usize,
    pub column: usize,
}

/// Every layer `compiled` refers to, in file order (one entry per use).
pub fn referenced_layers(compiled: &Compiled) -> Vec<LayerRef> {
    let mut out = Vec::new();
    match compiled {
        Compiled::Mal(file) => mal_refs(file, &mut out),
        Compiled::Lal(file) => lal_refs(file, &mut out),
    }
    out.sort_by_key(|r| (r.line, r.column));
    out
}

fn mal_refs(file: &MalFile, out: &mut Vec<LayerRef>) {
    if let Some(filter) = &file.filter {
        expr_refs(filter, out);
    }
    for rule in &file.rules {
        expr_refs(&rule.expr, out);
    }
}

fn lal_refs(file: &LalFile, out: &mut Vec<LayerRef>) {
    for rule in &file.rules {
        if let (Some(name), Some((line, column))) = (&rule.layer, rule.layer_pos)
            && name != crate::AUTO_LAYER
        {
            out.push(LayerRef {
                name: name.clone(),
                line,
                column,
            });
        }
        block_refs(&rule.dsl, out);
    }
}

fn block_refs(block: &Block, out: &mut Vec<LayerRef>) {
    for stmt in &block.statements {
        match &stmt.kind {
            StmtKind::Expr(expr) => expr_refs(expr, out),
            StmtKind::Local { init, .. } => init.iter().for_each(|e| expr_refs(e, out)),
            StmtKind::If(if_stmt) => if_refs(if_stmt, out),
            StmtKind::Return(value) => value.iter().for_each(|e| expr_refs(e, out)),
        }
    }
}

fn if_refs(if_stmt: &IfStmt, out: &mut Vec<LayerRef>) {
    expr_refs(&if_stmt.condition, out);
    block_refs(&if_stmt.then, out);
    match &if_stmt.otherwise {
        None => {}
        Some(Else::Block(block)) => block_refs(block, out),
        Some(Else::If(nested)) => if_refs(nested, out),
    }
}

fn at(name: &str, expr: &Expr) -> LayerRef {
    LayerRef {
        name: name.to_owned(),
        line: expr.span.line.max(1),
        column: expr.span.column.max(1),
    }
}

fn expr_refs(expr: &Expr, out: &mut Vec<LayerRef>) {
    match &expr.kind {
        ExprKind::Property { receiver, name, .. } => match &receiver.kind {
            ExprKind::Name(class) if class == "Layer" => out.push(at(&name.name, expr)),
            _ => expr_refs(receiver, out),
        },
        ExprKind::Call(call) => {
            if call.receiver.is_none()
                && call.namespace.is_none()
                && call.method.name == "layer"
                && let [Arg { name: None, value }] = call.args.as_slice()
                && let ExprKind::Str(literal) = &value.kind
            {
                out.push(at(&literal.value, value));
            }
            if let Some(receiver) = &call.receiver {
                expr_refs(receiver, out);
            }
            call.args.iter().for_each(|arg| expr_refs(&arg.value, out));
        }
        ExprKind::Name(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => {}
        ExprKind::GString(parts) => {
            for part in parts {
                if let GStringPart::Expr(inner) = part {
                    expr_refs(inner, out);
                }
            }
        }
        ExprKind::List(items) => items.iter().for_each(|e| expr_refs(e, out)),
        ExprKind::Map(entries) => {
            for entry in entries {
                expr_refs(&entry.key, out);
                expr_refs(&entry.value, out);
            }
        }
        ExprKind::Closure(closure) => block_refs(&closure.body, out),
        ExprKind::Index { receiver, index } => {
            expr_refs(receiver, out);
            expr_refs(index, out);
        }
        ExprKind::Unary { operand, .. } => expr_refs(operand, out),
        ExprKind::Binary { left, right, .. } => {
            expr_refs(left, out);
            expr_refs(right, out);
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => {
            expr_refs(condition, out);
            expr_refs(then, out);
            expr_refs(otherwise, out);
        }
        ExprKind::Elvis { value, fallback } => {
            expr_refs(value, out);
            expr_refs(fallback, out);
        }
        ExprKind::Cast { value, .. } => expr_refs(value, out),
        ExprKind::Assign { target, value, .. } => {
            expr_refs(target, out);
            expr_refs(value, out);
        }
        ExprKind::Paren(inner) => expr_refs(inner, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DslKind, compile};

    fn refs(kind: DslKind, text: &str) -> Vec<(String, usize, usize)> {
        let compiled = compile(kind, text.as_bytes()).expect("compiles");
        referenced_layers(&compiled)
            .into_iter()
            .map(|r| (r.name, r.line, r.column))
            .collect()
    }

    #[test]
    fn the_built_in_table_has_unique_names_and_ordinals_0_to_50_in_order() {
        for (index, layer) in BUILT_IN_LAYERS.iter().enumerate() {
            assert_eq!(layer.ordinal, index as i64, "{layer:?}");
            assert_eq!(built_in(layer.name), Some(layer));
            assert_eq!(built_in_by_ordinal(layer.ordinal), Some(layer));
        }
        assert_eq!(BUILT_IN_LAYERS.len(), 51);
        assert_eq!(
            built_in("MESH").map(|l| (l.ordinal, l.normal)),
            Some((1, true))
        );
        assert_eq!(built_in("VIRTUAL_GENAI").map(|l| l.normal), Some(false));
        assert!(built_in("mesh").is_none() && built_in("MY_LAYER").is_none());
        assert!(
            built_in_by_ordinal(51).is_none() && built_in_by_ordinal(RUNTIME_MIN_ORDINAL).is_none()
        );
    }

    #[test]
    fn mal_layer_constants_in_suffix_and_expressions_with_positions() {
        let suffixed = "expSuffix: service(['svc'], Layer.MY_LAYER)\nmetricPrefix: p\nmetricsRules:\n  - name: a\n    exp: m.sum(['svc'])\n  - name: b\n    exp: n.sum(['svc'])\n";
        // The suffix is grafted onto both rules: one use per rule, at the suffix's position.
        let expected = ("MY_LAYER".to_owned(), 1, 29);
        assert_eq!(
            refs(DslKind::Mal, suffixed),
            vec![expected.clone(), expected]
        );
        let inline = "metricPrefix: p\nmetricsRules:\n  - name: b\n    exp: m.sum(['svc']).instance(['svc'], ['i'], Layer.GENERAL)\n";
        assert_eq!(
            refs(DslKind::Mal, inline),
            vec![("GENERAL".to_owned(), 4, 50)]
        );
    }

    #[test]
    fn lal_rule_layer_fields_and_literal_layer_statements_but_not_auto() {
        let text = "rules:\n  - name: a\n    layer: MY_LAYER\n    dsl: |\n      filter {\n        extractor {\n          layer \"OTHER\"\n          layer parsed.layer as String\n        }\n        sink {}\n      }\n  - name: b\n    layer: auto\n    dsl: \"filter { sink {} }\"\n";
        let found = refs(DslKind::Lal, text);
        assert_eq!(
            found,
            vec![("MY_LAYER".to_owned(), 3, 12), ("OTHER".to_owned(), 7, 17)]
        );
    }

    #[test]
    fn files_without_layer_uses_refer_to_nothing() {
        assert!(refs(DslKind::Mal, "metricsRules: []\n").is_empty());
        assert!(refs(DslKind::Mal, "metricPrefix: p\nmetricsRules:\n  - name: a\n    exp: m.sum(['s']).service(['s'], 'x')\n").is_empty());
    }
}
