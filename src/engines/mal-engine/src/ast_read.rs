//! Reading the syntax tree outside closures: literal arguments, class constants, the sample
//! names and percentile ranks an expression uses, ISO-8601 durations and time units.

use hotrule_rule_compiler::ast::{Arg, Closure, Expr, ExprKind, NumberValue, UnaryOp};
use hotrule_rule_compiler::mal_syntax;

pub(crate) use hotrule_rule_compiler::mal_syntax::{CLASS_NAMES, string_literal, unparen};

/// The strings of a list literal of string literals, owned.
pub(crate) fn string_list(expr: &Expr) -> Option<Vec<String>> {
    mal_syntax::string_list(expr).map(|items| items.into_iter().map(str::to_owned).collect())
}

pub(crate) fn number_literal(expr: &Expr) -> Option<f64> {
    match &unparen(expr).kind {
        ExprKind::Number(number) => Some(match number.value {
            NumberValue::Integer(i) => i as f64,
            NumberValue::Decimal(f) => f,
        }),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => number_literal(operand).map(|v| -v),
        ExprKind::Unary {
            op: UnaryOp::Plus,
            operand,
        } => number_literal(operand),
        _ => None,
    }
}

/// `Class.CONSTANT` as `(class, constant)`, parentheses stripped.
pub(crate) fn class_constant(expr: &Expr) -> Option<(&str, &str)> {
    mal_syntax::class_constant(unparen(expr))
}

pub(crate) fn closure_arg(arg: Option<&Arg>) -> Option<&Closure> {
    match arg.map(|a| &unparen(&a.value).kind) {
        Some(ExprKind::Closure(closure)) => Some(closure),
        _ => None,
    }
}

/// Every sample-family name an expression reads (bare names outside closures that are not class
/// names nor the constant argument of `downsampling`), in first-seen order.
pub(crate) fn input_names(expr: &Expr, out: &mut Vec<String>) {
    match &expr.kind {
        ExprKind::Name(name) if !CLASS_NAMES.contains(&name.as_str()) && !out.contains(name) => {
            out.push(name.clone());
        }
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                input_names(receiver, out);
            }
            if call.method.name != "downsampling" {
                for arg in &call.args {
                    input_names(&arg.value, out);
                }
            }
        }
        ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => input_names(inner, out),
        ExprKind::Binary { left, right, .. } => {
            input_names(left, out);
            input_names(right, out);
        }
        ExprKind::List(items) => items.iter().for_each(|item| input_names(item, out)),
        // Constants (`Layer.X`) and closures read no family.
        _ => {}
    }
}

/// The percentile ranks of the last `histogram_percentile([...])` outside closures.
pub(crate) fn percentiles(expr: &Expr, out: &mut Vec<u32>) {
    match &expr.kind {
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                percentiles(receiver, out);
            }
            for arg in &call.args {
                percentiles(&arg.value, out);
            }
            if call.method.name == "histogram_percentile"
                && let Some(ExprKind::List(items)) =
                    call.args.first().map(|a| &unparen(&a.value).kind)
            {
                *out = items
                    .iter()
                    .filter_map(number_literal)
                    .map(|v| v as u32)
                    .collect();
            }
        }
        ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => percentiles(inner, out),
        ExprKind::Binary { left, right, .. } => {
            percentiles(left, out);
            percentiles(right, out);
        }
        _ => {}
    }
}

pub(crate) fn kind_name(kind: &ExprKind) -> &'static str {
    match kind {
        ExprKind::Str(_) | ExprKind::GString(_) => "a string",
        ExprKind::Bool(_) | ExprKind::Null => "a boolean or null",
        ExprKind::List(_) | ExprKind::Map(_) => "a list or map",
        ExprKind::Closure(_) => "a closure",
        ExprKind::Property { .. } => "a property access",
        ExprKind::Index { .. } => "indexing",
        ExprKind::Ternary { .. } | ExprKind::Elvis { .. } => "a conditional",
        ExprKind::Cast { .. } => "a cast",
        ExprKind::Assign { .. } => "an assignment",
        _ => "this expression",
    }
}

pub(crate) fn time_unit_ms(unit: &str) -> Option<f64> {
    // `unit.toMillis(1)` must be > 0 upstream: sub-millisecond units fail the rule.
    match unit {
        "MILLISECONDS" => Some(1.0),
        "SECONDS" => Some(1000.0),
        "MINUTES" => Some(60_000.0),
        "HOURS" => Some(3_600_000.0),
        "DAYS" => Some(86_400_000.0),
        _ => None,
    }
}

/// `java.time.Duration.parse` for the forms MAL uses (`PnDTnHnMn.nS`), in milliseconds.
pub(crate) fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = 0.0;
    let mut parse = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut rest = part;
        while !rest.is_empty() {
            let at = rest.find(|c: char| c.is_ascii_alphabetic())?;
            let (number, tail) = rest.split_at(at);
            let unit = tail.chars().next()?;
            let (_, seconds) = units.iter().find(|(u, _)| *u == unit)?;
            total += number.replace(',', ".").parse::<f64>().ok()? * seconds;
            rest = &tail[1..];
        }
        Some(())
    };
    parse(days, &[('D', 86_400.0)])?;
    if let Some(time) = time {
        parse(time, &[('H', 3_600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    (total > 0.0).then(|| (total * 1000.0).round() as i64)
}

/// The label list of the last `sum/min/max/avg/count` outside closures: upstream's labeled keys
/// list labels in that order.
pub(crate) fn aggregation_labels(expr: &Expr, out: &mut Vec<String>) {
    match &expr.kind {
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                aggregation_labels(receiver, out);
            }
            for arg in &call.args {
                aggregation_labels(&arg.value, out);
            }
            if matches!(
                call.method.name.as_str(),
                "sum" | "min" | "max" | "avg" | "count"
            ) && let Some(list) = call.args.first().and_then(|a| string_list(&a.value))
            {
                *out = list;
            }
        }
        ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => {
            aggregation_labels(inner, out)
        }
        ExprKind::Binary { left, right, .. } => {
            aggregation_labels(left, out);
            aggregation_labels(right, out);
        }
        _ => {}
    }
}
