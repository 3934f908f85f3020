//! Synthesized input for a MAL file: for each rule, samples of every metric name it reads, with
//! every label its expression, closures and the file filter read, valued so that value filters
//! pass, with one variant per hinted label value (tagEqual, tagMatch, closure `==` / `in`) and
//! histogram buckets where a bound label is read. The corpus test (every shipped rule yields a
//! value) and `hotrule bench mal` (the corpus-wide throughput) run files on it.

use std::collections::{BTreeMap, BTreeSet};

use hotrule_rule_compiler::ast::{
    BinaryOp, Block, Else, Expr, ExprKind, GStringPart, IfStmt, StmtKind, UnaryOp,
};

use crate::{PreparedFile, Sample};

/// The MAL rule files under a rules directory (every catalog's `.yaml`/`.yml` but `lal`'s),
/// sorted: the files the corpus tests run on their synthesized input.
pub fn rule_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "lal") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    files.sort();
    files
}

/// What a rule's expression tells about the samples it needs.
#[derive(Default, Debug)]
struct Needs {
    labels: BTreeSet<String>,
    /// Values a label is compared with (tagEqual, tagMatch, closure `==` / `in`).
    hints: BTreeMap<String, Vec<String>>,
    /// Labels that must hold a number (histogram bounds).
    numeric: BTreeSet<String>,
    /// Labels a closure requires to be absent or empty (`!tags.x`).
    absent: BTreeSet<String>,
    value: Option<f64>,
}

impl Needs {
    fn hint(&mut self, label: &str, value: &str) {
        self.labels.insert(label.to_owned());
        let values = self.hints.entry(label.to_owned()).or_default();
        if !values.iter().any(|v| v == value) {
            values.push(value.to_owned());
        }
    }
}

fn str_of(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Str(s) => Some(&s.value),
        ExprKind::Paren(inner) => str_of(inner),
        _ => None,
    }
}

fn num_of(expr: &Expr) -> Option<f64> {
    match &expr.kind {
        ExprKind::Number(n) => Some(match n.value {
            hotrule_rule_compiler::ast::NumberValue::Integer(i) => i as f64,
            hotrule_rule_compiler::ast::NumberValue::Decimal(f) => f,
        }),
        _ => None,
    }
}

/// A string the Java regex `pattern` matches in full, tried from simple candidates.
fn sample_for_regex(pattern: &str) -> Option<String> {
    let regex = regex::Regex::new(&format!("^(?:{pattern})$")).ok()?;
    let first_branch = pattern.split('|').next().unwrap_or(pattern);
    let candidates = [
        pattern.to_owned(),
        first_branch.to_owned(),
        first_branch
            .replace(".*", "x")
            .replace(".+", "x")
            .replace(['^', '$', '(', ')', '\\'], ""),
        pattern
            .replace(".*", "x")
            .replace(".+", "x")
            .replace(['^', '$', '(', ')', '\\'], ""),
        "x".to_owned(),
        String::new(),
    ];
    candidates.into_iter().find(|c| regex.is_match(c))
}

/// Walks an expression outside closures.
fn walk(expr: &Expr, needs: &mut Needs) {
    match &expr.kind {
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                walk(receiver, needs);
            }
            let method = call.method.name.as_str();
            let strings: Vec<&str> = call.args.iter().filter_map(|a| str_of(&a.value)).collect();
            match method {
                "tagEqual" | "tagMatch" => {
                    for pair in strings.chunks(2) {
                        if let [label, value] = pair {
                            let value = if method == "tagMatch" {
                                sample_for_regex(value).unwrap_or_default()
                            } else {
                                (*value).to_owned()
                            };
                            needs.hint(label, &value);
                        }
                    }
                }
                "tagNotEqual" | "tagNotMatch" => {
                    for pair in strings.chunks(2) {
                        needs.labels.insert(pair[0].to_owned());
                    }
                }
                "histogram" => {
                    let le = strings.first().copied().unwrap_or("le");
                    needs.labels.insert(le.to_owned());
                    needs.numeric.insert(le.to_owned());
                }
                "valueEqual" | "valueGreaterEqual" | "valueLessEqual" => {
                    needs.value = call.args.first().and_then(|a| num_of(&a.value));
                }
                "valueGreater" => {
                    needs.value = call
                        .args
                        .first()
                        .and_then(|a| num_of(&a.value))
                        .map(|v| v + 1.0);
                }
                "valueLess" => {
                    needs.value = call
                        .args
                        .first()
                        .and_then(|a| num_of(&a.value))
                        .map(|v| v - 1.0);
                }
                "retagByK8sMeta" => {
                    // Without a metadata source the new label must already be there.
                    for label in strings.iter().filter(|s| !s.is_empty()) {
                        needs.labels.insert((*label).to_owned());
                    }
                }
                "processRelation" => {
                    if let Some(side) = strings.first() {
                        needs.hint(side, "server");
                    }
                    for label in &strings {
                        needs.labels.insert((*label).to_owned());
                    }
                }
                "process" => {
                    for label in &strings {
                        needs.hint(label, "GENERAL");
                    }
                }
                _ => {}
            }
            for arg in &call.args {
                match &arg.value.kind {
                    ExprKind::List(items) => {
                        for item in items {
                            if let Some(label) = str_of(item) {
                                needs.labels.insert(label.to_owned());
                            }
                        }
                    }
                    ExprKind::Closure(closure) => closure_block(&closure.body, needs),
                    _ => walk(&arg.value, needs),
                }
            }
        }
        ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => walk(inner, needs),
        ExprKind::Binary { left, right, .. } => {
            walk(left, needs);
            walk(right, needs);
        }
        _ => {}
    }
}

fn closure_block(block: &Block, needs: &mut Needs) {
    for stmt in &block.statements {
        match &stmt.kind {
            StmtKind::Expr(e) => closure_expr(e, needs),
            StmtKind::Local { init: Some(e), .. } | StmtKind::Return(Some(e)) => {
                closure_expr(e, needs)
            }
            StmtKind::If(if_stmt) => closure_if(if_stmt, needs),
            _ => {}
        }
    }
}

fn closure_if(if_stmt: &IfStmt, needs: &mut Needs) {
    closure_expr(&if_stmt.condition, needs);
    closure_block(&if_stmt.then, needs);
    match &if_stmt.otherwise {
        Some(Else::Block(block)) => closure_block(block, needs),
        Some(Else::If(nested)) => closure_if(nested, needs),
        None => {}
    }
}

/// The label a closure reads with `tags.x`, `tags['x']` or `tags?.x`.
fn tag_read(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::Property { receiver, name, .. } if matches!(&receiver.kind, ExprKind::Name(n) if n == "tags") => {
            Some(&name.name)
        }
        ExprKind::Index { receiver, index } if matches!(&receiver.kind, ExprKind::Name(n) if n == "tags") => {
            str_of(index)
        }
        ExprKind::Paren(inner) => tag_read(inner),
        _ => None,
    }
}

fn closure_expr(expr: &Expr, needs: &mut Needs) {
    if let Some(label) = tag_read(expr) {
        needs.labels.insert(label.to_owned());
    }
    match &expr.kind {
        ExprKind::Unary {
            op: UnaryOp::Not,
            operand,
        } => {
            if let Some(label) = tag_read(operand) {
                needs.absent.insert(label.to_owned());
            }
        }
        ExprKind::Binary {
            op: BinaryOp::Eq,
            left,
            right,
        } => {
            if let (Some(label), Some(value)) = (tag_read(left), str_of(right)) {
                needs.hint(label, value);
            }
        }
        ExprKind::Binary {
            op: BinaryOp::In,
            left,
            right,
        } => {
            if let (Some(label), ExprKind::List(items)) = (tag_read(left), &right.kind) {
                for item in items.iter().filter_map(str_of) {
                    needs.hint(label, item);
                }
            }
        }
        _ => {}
    }
    match &expr.kind {
        ExprKind::Property { receiver, .. }
        | ExprKind::Cast {
            value: receiver, ..
        } => closure_expr(receiver, needs),
        ExprKind::Index { receiver, index } => {
            closure_expr(receiver, needs);
            closure_expr(index, needs);
        }
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                closure_expr(receiver, needs);
            }
            for arg in &call.args {
                closure_expr(&arg.value, needs);
            }
        }
        ExprKind::Unary { operand, .. } | ExprKind::Paren(operand) => closure_expr(operand, needs),
        ExprKind::Binary { left, right, .. }
        | ExprKind::Elvis {
            value: left,
            fallback: right,
        }
        | ExprKind::Assign {
            target: left,
            value: right,
            ..
        } => {
            closure_expr(left, needs);
            closure_expr(right, needs);
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => {
            closure_expr(condition, needs);
            closure_expr(then, needs);
            closure_expr(otherwise, needs);
        }
        ExprKind::List(items) => items.iter().for_each(|i| closure_expr(i, needs)),
        ExprKind::Map(entries) => entries.iter().for_each(|e| closure_expr(&e.value, needs)),
        ExprKind::GString(parts) => parts.iter().for_each(|p| {
            if let GStringPart::Expr(e) = p {
                closure_expr(e, needs);
            }
        }),
        ExprKind::Closure(closure) => closure_block(&closure.body, needs),
        _ => {}
    }
}

/// Samples of every input of every rule: a base sample with all labels the rule reads, plus one
/// variant per extra hinted value, and histogram buckets where `le` is read.
pub fn synthesize(file: &PreparedFile, value: f64, timestamp_ms: i64) -> Vec<Sample> {
    let mut batch = Vec::new();
    for (index, rule) in file.file().rules.iter().enumerate() {
        let mut needs = Needs::default();
        walk(&rule.expr, &mut needs);
        if let Some(filter) = &file.file().filter {
            closure_expr(filter, &mut needs);
        }
        let base: BTreeMap<String, String> = needs
            .labels
            .iter()
            .filter(|label| !needs.absent.contains(*label))
            .map(|label| {
                let value = match needs.hints.get(label) {
                    Some(values) => values[0].clone(),
                    None if needs.numeric.contains(label) => "1".to_owned(),
                    None => format!("{label}-1"),
                };
                (label.clone(), value)
            })
            .collect();
        let mut variants = vec![base.clone()];
        for (label, values) in &needs.hints {
            for extra in values.iter().skip(1) {
                let mut variant = base.clone();
                variant.insert(label.clone(), extra.clone());
                variants.push(variant);
            }
        }
        let mut with_buckets = Vec::new();
        for variant in variants {
            match needs.numeric.iter().next() {
                Some(le) => {
                    for bound in ["0.1", "1", "10"] {
                        let mut bucket = variant.clone();
                        bucket.insert(le.clone(), bound.to_owned());
                        with_buckets.push(bucket);
                    }
                }
                None => with_buckets.push(variant),
            }
        }
        let v = needs.value.unwrap_or(value);
        for name in file.inputs_of(index) {
            for labels in &with_buckets {
                batch.push(Sample::new(
                    name.clone(),
                    std::sync::Arc::new(labels.clone()),
                    v,
                    timestamp_ms,
                ));
            }
        }
    }
    batch
}
