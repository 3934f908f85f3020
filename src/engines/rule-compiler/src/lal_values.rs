//! The values inside LAL statements: `as` casts, the `regexp` pattern and the `rpm` literal.
//!
//! Expressions are checked for syntax by the parser; here only what upstream's LAL compiler
//! checks about them at compile time: casts go to the [`CAST_TYPES`] or a qualified class name,
//! a literal `regexp` is a valid Java regex, `rpm` is a plain `int` literal.

use crate::CompileError;
use crate::ast::{Call, Expr, ExprKind, GStringPart, NumberValue};
use crate::java_regex;
use crate::model::pos_of;

/// Types LAL's `as` casts to.
pub(crate) const CAST_TYPES: &[&str] = &[
    "String", "Long", "Integer", "Boolean", "Double", "Float", "Map", "List",
];

#[derive(Debug, thiserror::Error)]
enum LalValueError {
    #[error("unsupported cast to '{ty}'; LAL casts to {} or a qualified class name", CAST_TYPES.join(", "))]
    Cast { ty: String },
    #[error("invalid regular expression: {0}")]
    Regex(String),
    #[error("'rpm' takes one plain integer literal from 0 to {}", i32::MAX)]
    Rpm,
}

/// `regexp` with a literal pattern: the pattern must compile (see `java_regex`).
pub(crate) fn check_regexp(call: &Call) -> Result<(), CompileError> {
    let Some(arg) = call.args.first() else {
        return Ok(());
    };
    if let ExprKind::Str(literal) = &arg.value.kind {
        java_regex::check(&literal.value)
            .map_err(|message| pos_of(arg.value.span).error(LalValueError::Regex(message)))?;
    }
    Ok(())
}

/// `rpm n`: upstream's grammar takes a number literal, and the sampler holds it in a Java `int`.
pub(crate) fn check_rpm(call: &Call) -> Result<(), CompileError> {
    let fits = match call.args.as_slice() {
        [arg] => match &arg.value.kind {
            // A plain integer: no suffix (`100L`), no sign, no `_` or hex.
            ExprKind::Number(number) => {
                number.text.bytes().all(|byte| byte.is_ascii_digit())
                    && matches!(
                        number.value,
                        NumberValue::Integer(value) if (0..=i64::from(i32::MAX)).contains(&value)
                    )
            }
            _ => false,
        },
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(pos_of(call.method.span).error(LalValueError::Rpm))
    }
}

/// Checks the casts inside an expression (everything else was checked by the parser).
pub(crate) fn check_expr(expr: &Expr) -> Result<(), CompileError> {
    match &expr.kind {
        ExprKind::Cast { value, ty } => {
            // A qualified class name (`as io.envoyproxy...AccessLogCommon`) narrows a typed
            // input's value; upstream's grammar takes one, and only the JVM can check it.
            if !CAST_TYPES.contains(&ty.name.as_str()) && !ty.name.contains('.') {
                return Err(pos_of(ty.span).error(LalValueError::Cast {
                    ty: ty.name.clone(),
                }));
            }
            check_expr(value)
        }
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                check_expr(receiver)?;
            }
            call.args.iter().try_for_each(|arg| check_expr(&arg.value))
        }
        ExprKind::Property { receiver, .. }
        | ExprKind::Paren(receiver)
        | ExprKind::Unary {
            operand: receiver, ..
        } => check_expr(receiver),
        ExprKind::Index {
            receiver: left,
            index: right,
        }
        | ExprKind::Binary { left, right, .. }
        | ExprKind::Elvis {
            value: left,
            fallback: right,
        }
        | ExprKind::Assign {
            target: left,
            value: right,
            ..
        } => {
            check_expr(left)?;
            check_expr(right)
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => {
            check_expr(condition)?;
            check_expr(then)?;
            check_expr(otherwise)
        }
        ExprKind::List(items) => items.iter().try_for_each(check_expr),
        ExprKind::Map(entries) => entries
            .iter()
            .try_for_each(|entry| check_expr(&entry.value)),
        ExprKind::GString(parts) => parts.iter().try_for_each(|part| match part {
            GStringPart::Expr(inner) => check_expr(inner),
            GStringPart::Text(_) => Ok(()),
        }),
        // Closure bodies inside values are plain Groovy; LAL gives them no statements to check.
        ExprKind::Closure(_)
        | ExprKind::Name(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => Ok(()),
    }
}
