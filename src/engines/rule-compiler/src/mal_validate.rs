//! Validation of a full MAL expression against the function catalogue (`mal_catalog.rs`).
//!
//! Outside closures a MAL expression is arithmetic (`+ - * /`, unary minus) over sample families,
//! numbers, `time()` and chains of catalogue (`FUNCTIONS`) calls. Every call must name a known function with
//! a plausible argument list; closures (`tag({...})`, `forEach`, `decorate`, `instance`
//! properties) are Groovy code run on tag maps, so inside them any syntactically valid Groovy is
//! accepted. Extension calls `ns::method(...)` cannot be checked without the extension, so they are
//! accepted with their arguments validated as values.

use crate::CompileError;
use crate::ast::{Arg, Call, Closure, Expr, ExprKind, NumberValue, UnaryOp};
use crate::ast_walk;
use crate::java_regex;
use crate::mal_catalog::{
    ArgKind, CLASS_NAMES, DETECT_POINTS, DOWNSAMPLING, Function, GLOBAL_FUNCTIONS, RETAG_TYPES,
    TIME_UNITS, class_constant, lookup, string_list, string_literal, unparen,
};
use crate::model::pos_of;

#[derive(Debug, thiserror::Error)]
enum MalError {
    #[error("unknown MAL function '{0}'")]
    UnknownFunction(String),
    #[error("'{name}' takes {expected} argument(s), found {found}")]
    ArgCount {
        name: &'static str,
        expected: String,
        found: usize,
    },
    #[error("'{name}' takes (tag, value) pairs, found {found} argument(s)")]
    OddPairs { name: &'static str, found: usize },
    #[error("'{function}' does not take a named argument '{name}'")]
    UnexpectedNamed {
        function: &'static str,
        name: String,
    },
    #[error("argument of '{function}' must be {expected}")]
    BadArg {
        function: &'static str,
        expected: &'static str,
    },
    #[error("'{value}' is not a downsampling type; expected one of {}", DOWNSAMPLING.join(", "))]
    BadDownsampling { value: String },
    #[error("'{value}' is not an ISO-8601 duration such as 'PT1M'")]
    BadDuration { value: String },
    #[error("'{class}.{value}' is not a known constant")]
    BadConstant { class: String, value: String },
    #[error("invalid regular expression: {0}")]
    BadRegex(String),
    #[error("{0} is not allowed in a MAL expression outside a closure")]
    NotAllowed(&'static str),
    #[error(
        "operator '{0}' is not allowed in a MAL expression (only + - * / between sample families and numbers)"
    )]
    Operator(&'static str),
    #[error("a MAL closure must name its parameters, such as {{ tags -> ... }}")]
    ClosureWithoutParams,
    #[error("a MAL closure must not be empty")]
    EmptyClosure,
}

/// Validates a full expression (after `expPrefix`/`expSuffix` are applied).
pub(crate) fn validate(expr: &Expr) -> Result<(), CompileError> {
    let at = |error: MalError| pos_of(expr.span).error(error);
    match &expr.kind {
        ExprKind::Name(_) | ExprKind::Number(_) => Ok(()),
        ExprKind::Paren(inner) => validate(inner),
        ExprKind::Unary {
            op: UnaryOp::Neg | UnaryOp::Plus,
            operand,
        } => validate(operand),
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => Err(at(MalError::Operator("!"))),
        ExprKind::Binary { op, left, right } => {
            use crate::ast::BinaryOp::{Add, Div, Mul, Sub};
            if !matches!(op, Add | Sub | Mul | Div) {
                return Err(at(MalError::Operator(op.symbol())));
            }
            validate(left)?;
            validate(right)
        }
        ExprKind::Call(call) => validate_call(call),
        ExprKind::Property { .. } => Err(at(MalError::NotAllowed("a property access"))),
        ExprKind::Str(_) | ExprKind::GString(_) => Err(at(MalError::NotAllowed("a string"))),
        ExprKind::Bool(_) | ExprKind::Null => Err(at(MalError::NotAllowed("a boolean or null"))),
        ExprKind::List(_) | ExprKind::Map(_) => Err(at(MalError::NotAllowed("a list or map"))),
        ExprKind::Closure(_) => Err(at(MalError::NotAllowed("a closure"))),
        ExprKind::Index { .. } => Err(at(MalError::NotAllowed("indexing"))),
        ExprKind::Ternary { .. } | ExprKind::Elvis { .. } => {
            Err(at(MalError::NotAllowed("a conditional")))
        }
        ExprKind::Cast { .. } => Err(at(MalError::NotAllowed("a cast"))),
        ExprKind::Assign { .. } => Err(at(MalError::NotAllowed("an assignment"))),
    }
}

fn validate_call(call: &Call) -> Result<(), CompileError> {
    let at = |error: MalError| pos_of(call.method.span).error(error);
    if call.namespace.is_some() {
        if let Some(receiver) = &call.receiver {
            validate(receiver)?;
        }
        return call.args.iter().try_for_each(|arg| value_arg(&arg.value));
    }
    let Some(receiver) = &call.receiver else {
        if GLOBAL_FUNCTIONS.contains(&call.method.name.as_str()) && call.args.is_empty() {
            return Ok(());
        }
        return Err(at(MalError::UnknownFunction(call.method.name.clone())));
    };
    let Some(function) = lookup(&call.method.name) else {
        return Err(at(MalError::UnknownFunction(call.method.name.clone())));
    };
    if matches!(&receiver.kind, ExprKind::Name(name) if CLASS_NAMES.contains(&name.as_str())) {
        return Err(at(MalError::UnknownFunction(call.method.name.clone())));
    }
    validate(receiver)?;
    check_args(function, call)
}

/// An argument that is itself a sample family or number (extension arguments may also be strings
/// and label lists).
fn value_arg(expr: &Expr) -> Result<(), CompileError> {
    match &unparen(expr).kind {
        ExprKind::Str(_) | ExprKind::List(_) | ExprKind::Closure(_) => Ok(()),
        _ if class_constant(expr).is_some() => Ok(()),
        _ => validate(expr),
    }
}

fn check_args(function: &'static Function, call: &Call) -> Result<(), CompileError> {
    let count = call.args.len();
    if count < function.min || count > function.max {
        let expected = match (function.min, function.max) {
            (min, max) if min == max => min.to_string(),
            (min, usize::MAX) => format!("at least {min}"),
            (min, max) => format!("{min} to {max}"),
        };
        return Err(pos_of(call.method.span).error(MalError::ArgCount {
            name: function.name,
            expected,
            found: count,
        }));
    }
    if function.pairs && !count.is_multiple_of(2) {
        return Err(pos_of(call.method.span).error(MalError::OddPairs {
            name: function.name,
            found: count,
        }));
    }
    for (index, arg) in call.args.iter().enumerate() {
        check_named(function, arg)?;
        let kind = if function.pairs {
            function.kinds.get(index % function.kinds.len().max(1))
        } else {
            function.kinds.get(index).or(function.kinds.last())
        };
        let kind = kind.copied().unwrap_or(ArgKind::Value);
        check_arg(function, kind, &arg.value)?;
    }
    Ok(())
}

fn check_named(function: &'static Function, arg: &Arg) -> Result<(), CompileError> {
    match &arg.name {
        Some(name) if !function.named.contains(&name.name.as_str()) => Err(pos_of(name.span)
            .error(MalError::UnexpectedNamed {
                function: function.name,
                name: name.name.clone(),
            })),
        _ => Ok(()),
    }
}

fn check_arg(function: &'static Function, kind: ArgKind, expr: &Expr) -> Result<(), CompileError> {
    let bad = |expected: &'static str| {
        pos_of(expr.span).error(MalError::BadArg {
            function: function.name,
            expected,
        })
    };
    let constant =
        |class: &str, allowed: &[&str], expected: &'static str| match class_constant(expr) {
            Some((found, value)) if found == class && allowed.contains(&value) => Ok(()),
            Some((found, value)) if found == class => {
                Err(pos_of(expr.span).error(MalError::BadConstant {
                    class: found.to_owned(),
                    value: value.to_owned(),
                }))
            }
            _ => Err(bad(expected)),
        };
    match kind {
        ArgKind::Labels => string_list(expr)
            .filter(|labels| !labels.is_empty())
            .map(drop)
            .ok_or_else(|| bad("a list of label names such as ['a', 'b'] (at least one)")),
        ArgKind::Str => string_literal(expr)
            .map(drop)
            .ok_or_else(|| bad("a string")),
        ArgKind::Regex => {
            let pattern = string_literal(expr).ok_or_else(|| bad("a regular expression string"))?;
            java_regex::check(pattern)
                .map_err(|message| pos_of(expr.span).error(MalError::BadRegex(message)))
        }
        ArgKind::Duration => {
            let value =
                string_literal(expr).ok_or_else(|| bad("a duration string such as 'PT1M'"))?;
            if is_positive_iso_duration(value) {
                Ok(())
            } else {
                Err(pos_of(expr.span).error(MalError::BadDuration {
                    value: value.to_owned(),
                }))
            }
        }
        ArgKind::Closure => match &unparen(expr).kind {
            ExprKind::Closure(closure) => check_closure(closure, expr),
            _ => Err(bad("a closure such as { tags -> ... }")),
        },
        ArgKind::Number => numeric_literal(expr)
            .map(drop)
            .ok_or_else(|| bad("a number")),
        ArgKind::Value => validate(expr),
        ArgKind::RetagType => constant(
            "K8sRetagType",
            RETAG_TYPES,
            "a K8sRetagType constant such as K8sRetagType.Pod2Service",
        ),
        ArgKind::TimeUnit => constant(
            "TimeUnit",
            TIME_UNITS,
            "a TimeUnit constant such as TimeUnit.MILLISECONDS",
        ),
        ArgKind::Downsampling => {
            let value = match (&unparen(expr).kind, class_constant(expr)) {
                (ExprKind::Name(name), _) => name.as_str(),
                (_, Some(("DownsamplingType", value))) => value,
                _ => return Err(bad("a downsampling type such as SUM")),
            };
            if DOWNSAMPLING.contains(&value) {
                Ok(())
            } else {
                Err(pos_of(expr.span).error(MalError::BadDownsampling {
                    value: value.to_owned(),
                }))
            }
        }
        ArgKind::Percentiles => {
            let ExprKind::List(items) = &unparen(expr).kind else {
                return Err(bad("a list of percentiles such as [50, 90, 99]"));
            };
            for item in items {
                match numeric_literal(item) {
                    Some(NumberValue::Integer(0..=100)) => {}
                    _ => {
                        return Err(pos_of(item.span).error(MalError::BadArg {
                            function: function.name,
                            expected: "an integer percentile from 0 to 100",
                        }));
                    }
                }
            }
            Ok(())
        }
        ArgKind::ScopeArg => scope_arg(function, expr),
    }
}

fn scope_arg(function: &'static Function, expr: &Expr) -> Result<(), CompileError> {
    if string_literal(expr).is_some() || string_list(expr).is_some() {
        return Ok(());
    }
    match &unparen(expr).kind {
        ExprKind::Closure(closure) => return check_closure(closure, expr),
        // `instance(..., Layer.GENERAL, null)`: no properties extractor, as upstream allows.
        ExprKind::Null => return Ok(()),
        _ => {}
    }
    match class_constant(expr) {
        Some(("Layer", _)) => Ok(()),
        Some(("DetectPoint", value)) if DETECT_POINTS.contains(&value) => Ok(()),
        Some((class, value)) => Err(pos_of(expr.span).error(MalError::BadConstant {
            class: class.to_owned(),
            value: value.to_owned(),
        })),
        None => Err(pos_of(expr.span).error(MalError::BadArg {
            function: function.name,
            expected: "a label list, a string, Layer.X, DetectPoint.X or a closure",
        })),
    }
}

/// A closure passed to a MAL function (`tag`, `filter`, `forEach`, `decorate`, `instance`) or used
/// as the file's `filter`. SkyWalking's MAL grammar requires `params ->` and a non-empty body, so a
/// bare block (`{ tags.x == 'y' }`, a bare map `{ [k: v] }`) and an empty `{ }` are errors; inside,
/// arithmetic on a string literal is an error as well.
pub(crate) fn check_closure(closure: &Closure, expr: &Expr) -> Result<(), CompileError> {
    if closure.params.is_empty() {
        return Err(pos_of(expr.span).error(MalError::ClosureWithoutParams));
    }
    if closure.body.statements.is_empty() {
        return Err(pos_of(expr.span).error(MalError::EmptyClosure));
    }
    ast_walk::no_string_arithmetic(&closure.body)
}

/// A number literal, possibly negated.
fn numeric_literal(expr: &Expr) -> Option<NumberValue> {
    match &unparen(expr).kind {
        ExprKind::Number(number) => Some(number.value),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match numeric_literal(operand)? {
            NumberValue::Integer(value) => Some(NumberValue::Integer(value.checked_neg()?)),
            NumberValue::Decimal(value) => Some(NumberValue::Decimal(-value)),
        },
        _ => None,
    }
}

/// `java.time.Duration.parse` syntax (`PnDTnHnMn.nS`, case-insensitive), restricted to a positive
/// length: a zero or negative window makes `rate`/`increase` meaningless.
pub(crate) fn is_positive_iso_duration(text: &str) -> bool {
    let upper = text.to_ascii_uppercase();
    let Some(rest) = upper.strip_prefix('P') else {
        return false;
    };
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    let mut total = 0.0_f64;
    let mut components = 0;
    let mut parse_part = |part: &str, units: &[(char, f64)]| -> bool {
        let mut rest = part;
        let mut last_unit = 0;
        while !rest.is_empty() {
            let Some(unit_at) = rest.find(|c: char| c.is_ascii_alphabetic()) else {
                return false;
            };
            let (number, tail) = rest.split_at(unit_at);
            let Some(unit) = tail.chars().next() else {
                return false;
            };
            let Some(index) = units.iter().position(|(u, _)| *u == unit) else {
                return false;
            };
            let decimal_ok = unit == 'S';
            let valid_number = !number.is_empty()
                && number
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit() || (decimal_ok && (c == '.' || c == ',')));
            let Ok(value) = number.replace(',', ".").parse::<f64>() else {
                return false;
            };
            if !valid_number || index < last_unit {
                return false;
            }
            last_unit = index + 1;
            total += value * units.get(index).map_or(0.0, |(_, seconds)| *seconds);
            components += 1;
            rest = tail.get(1..).unwrap_or_default();
        }
        true
    };
    let days_ok = parse_part(days, &[('D', 86_400.0)]);
    let time_ok = match time {
        Some("") => false,
        Some(time) => parse_part(time, &[('H', 3_600.0), ('M', 60.0), ('S', 1.0)]),
        None => true,
    };
    days_ok && time_ok && components > 0 && total > 0.0
}

#[cfg(test)]
mod tests {
    use super::is_positive_iso_duration;

    #[test]
    fn iso_durations() {
        for ok in ["PT1M", "pt5m", "P1D", "P1DT2H", "PT0.5S", "PT1H30M"] {
            assert!(is_positive_iso_duration(ok), "{ok}");
        }
        for bad in [
            "1M", "PT", "P", "PT1X", "PT1S1M", "PT0S", "PT-1M", "", "P1M",
        ] {
            assert!(!is_positive_iso_duration(bad), "{bad}");
        }
    }
}
