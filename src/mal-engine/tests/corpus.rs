//! Every MAL file of the shipped corpus (`config/rules`, a copy of the SkyWalking rules: otel-rules,
//! log-mal-rules, telegraf-rules, meter-analyzer-config; the `lal` folder is LAL, not evaluated
//! here) evaluates: for each file, samples are synthesized for every metric name and label its
//! rules read, two batches 60 s apart are run (so rates have history), and every metric rule must
//! yield at least one value and no error. Rules that cannot are listed in `KNOWN_GAPS` with the
//! reason; the test fails if the list is stale in either direction.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hotrule_mal_engine::{EngineState, PreparedFile, Sample};
use hotrule_rule_compiler::ast::{
    BinaryOp, Block, Else, Expr, ExprKind, GStringPart, IfStmt, StmtKind, UnaryOp,
};
use hotrule_rule_compiler::{Compiled, DslKind, compile};

/// The repository's bundled copy of the SkyWalking rules (`config/rules`, identical to the corpus).
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/rules");

/// `(file relative to the corpus, rule name, reason)`.
const KNOWN_GAPS: &[(&str, &str, &str)] = &[];

fn mal_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "lal") {
                mal_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
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
fn synthesize(file: &PreparedFile, value: f64, timestamp_ms: i64) -> Vec<Sample> {
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

#[test]
fn every_corpus_rule_yields_a_value() {
    let root = Path::new(CORPUS);
    if !root.is_dir() {
        panic!("corpus not found at {CORPUS}");
    }
    let mut files = Vec::new();
    mal_files(root, &mut files);
    files.sort();
    assert!(
        files.len() >= 80,
        "expected the corpus' MAL files, found {}",
        files.len()
    );
    let t0 = 1_700_000_000_000_i64;
    let mut failures: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut rules_total = 0;
    for path in &files {
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let bytes = std::fs::read(path).unwrap_or_default();
        let file = match compile(DslKind::Mal, &bytes) {
            Ok(Compiled::Mal(file)) => PreparedFile::new(file),
            other => {
                failures.insert((relative, "*".to_owned(), format!("compile: {other:?}")));
                continue;
            }
        };
        let mut state = EngineState::default();
        let mut produced: BTreeSet<String> = BTreeSet::new();
        for (batch_index, value) in [(0_i64, 100.0), (1, 160.0)] {
            let ts = t0 + batch_index * 60_000;
            let batch = synthesize(&file, value, ts);
            let evaluation = file.evaluate(&batch, ts, &mut state);
            for warning in evaluation.warnings {
                if let hotrule_mal_engine::Warning::FilterFailed { rule, reason } = warning {
                    failures.insert((relative.clone(), rule, format!("filter failed: {reason}")));
                }
            }
            for error in evaluation.errors {
                failures.insert((
                    relative.clone(),
                    error.rule.clone(),
                    format!("error: {}", error.error),
                ));
            }
            for value in evaluation.values {
                produced.insert(value.rule);
            }
        }
        for rule in &file.file().rules {
            rules_total += 1;
            if !produced.contains(&rule.name)
                && !failures
                    .iter()
                    .any(|(f, r, _)| *f == relative && *r == rule.name)
            {
                failures.insert((relative.clone(), rule.name.clone(), "no value".to_owned()));
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_GAPS
        .iter()
        .map(|(f, r, _)| ((*f).to_owned(), (*r).to_owned()))
        .collect();
    let unexpected: Vec<_> = failures
        .iter()
        .filter(|(f, r, _)| !known.contains(&(f.clone(), r.clone())))
        .collect();
    let stale: Vec<_> = known
        .iter()
        .filter(|(f, r)| !failures.iter().any(|(ff, rr, _)| ff == f && rr == r))
        .collect();
    eprintln!(
        "{} files, {rules_total} rules, {} failing ({} known)",
        files.len(),
        failures.len(),
        known.len()
    );
    assert!(
        unexpected.is_empty(),
        "rules without a value or with an error:\n{unexpected:#?}"
    );
    assert!(
        stale.is_empty(),
        "KNOWN_GAPS entries that now pass: {stale:?}"
    );
}

/// Hostile input must never panic: every corpus file on samples whose label values are odd
/// (empty, `+Inf`, non-numeric bounds, unicode, very long) and whose values are NaN, ±∞, negative
/// or zero. Errors are allowed (they are per rule); a panic fails the test.
#[test]
fn hostile_samples_never_panic() {
    let root = Path::new(CORPUS);
    let mut files = Vec::new();
    mal_files(root, &mut files);
    files.sort();
    let odd_labels = [
        "",
        "+Inf",
        "abc",
        "∞ é 🚀",
        "-Infinity",
        "1e400",
        "server",
        "null",
    ];
    let odd_values = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1e308];
    let long = "x".repeat(10_000);
    let mut runs = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_default();
        let Ok(Compiled::Mal(file)) = compile(DslKind::Mal, &bytes) else {
            continue;
        };
        let file = PreparedFile::new(file);
        let mut state = EngineState::default();
        for (round, odd) in odd_labels
            .iter()
            .chain(std::iter::once(&long.as_str()))
            .enumerate()
        {
            let ts = 1_700_000_000_000 + round as i64 * 60_000;
            let mut batch = synthesize(&file, 1.0, ts);
            for (i, sample) in batch.iter_mut().enumerate() {
                sample.value = odd_values[(i + round) % odd_values.len()];
                for (j, value) in std::sync::Arc::make_mut(&mut sample.labels)
                    .values_mut()
                    .enumerate()
                {
                    if (i + j + round) % 2 == 0 {
                        *value = (*odd).to_owned();
                    }
                }
                if (i + round) % 3 == 0 {
                    let first = sample.labels.keys().next().cloned();
                    if let Some(first) = first {
                        std::sync::Arc::make_mut(&mut sample.labels).remove(&first);
                    }
                }
            }
            let _ = file.evaluate(&batch, ts, &mut state);
            runs += 1;
        }
    }
    assert!(runs > 0);
}
