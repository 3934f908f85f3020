//! A pre-order walk over every expression of a script or closure, and the checks built on it that
//! MAL closures and LAL scripts share.
//!
//! Index literals: `x[3000000000]` indexes with a Java `int` upstream, so a literal index must fit.
//!
//! Arithmetic on strings: Groovy would run `'a' - 'b'` or `'ab' * 2` (String has `minus` and
//! `multiply`), but SkyWalking compiles MAL closures and LAL expressions to Java, where `+` is the
//! only operator a string takes (concatenation); `-`, `*`, `/` and `%` with a string operand do
//! not compile there.

use crate::CompileError;
use crate::ast::{BinaryOp, Block, Else, Expr, ExprKind, GStringPart, IfStmt, StmtKind};
use crate::model::pos_of;

/// Calls `visit` on every expression of `block`, outer before inner, closures included.
pub(crate) fn walk_block<F>(block: &Block, visit: &mut F) -> Result<(), CompileError>
where
    F: FnMut(&Expr) -> Result<(), CompileError>,
{
    for statement in &block.statements {
        match &statement.kind {
            StmtKind::Expr(expr) => walk_expr(expr, visit)?,
            StmtKind::Local { init, .. } | StmtKind::Return(init) => {
                if let Some(expr) = init {
                    walk_expr(expr, visit)?;
                }
            }
            StmtKind::If(if_stmt) => walk_if(if_stmt, visit)?,
        }
    }
    Ok(())
}

fn walk_if<F>(if_stmt: &IfStmt, visit: &mut F) -> Result<(), CompileError>
where
    F: FnMut(&Expr) -> Result<(), CompileError>,
{
    walk_expr(&if_stmt.condition, visit)?;
    walk_block(&if_stmt.then, visit)?;
    match &if_stmt.otherwise {
        None => Ok(()),
        Some(Else::Block(block)) => walk_block(block, visit),
        Some(Else::If(nested)) => walk_if(nested, visit),
    }
}

/// Calls `visit` on `expr` and then on everything inside it.
pub(crate) fn walk_expr<F>(expr: &Expr, visit: &mut F) -> Result<(), CompileError>
where
    F: FnMut(&Expr) -> Result<(), CompileError>,
{
    visit(expr)?;
    match &expr.kind {
        ExprKind::Name(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => Ok(()),
        ExprKind::GString(parts) => parts.iter().try_for_each(|part| match part {
            GStringPart::Text(_) => Ok(()),
            GStringPart::Expr(inner) => walk_expr(inner, visit),
        }),
        ExprKind::List(items) => items.iter().try_for_each(|item| walk_expr(item, visit)),
        ExprKind::Map(entries) => entries.iter().try_for_each(|entry| {
            walk_expr(&entry.key, visit)?;
            walk_expr(&entry.value, visit)
        }),
        ExprKind::Closure(closure) => walk_block(&closure.body, visit),
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                walk_expr(receiver, visit)?;
            }
            call.args
                .iter()
                .try_for_each(|arg| walk_expr(&arg.value, visit))
        }
        ExprKind::Property {
            receiver: inner, ..
        }
        | ExprKind::Unary { operand: inner, .. }
        | ExprKind::Cast { value: inner, .. }
        | ExprKind::Paren(inner) => walk_expr(inner, visit),
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
            walk_expr(left, visit)?;
            walk_expr(right, visit)
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => {
            walk_expr(condition, visit)?;
            walk_expr(then, visit)?;
            walk_expr(otherwise, visit)
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("operator '{0}' cannot be applied to a string (only '+' concatenates strings)")]
struct StringArithmetic(&'static str);

/// A string literal, or LAL's `tag("k")` (a String unless cast).
fn is_string(expr: &Expr) -> bool {
    match &expr.kind {
        ExprKind::Str(_) | ExprKind::GString(_) => true,
        ExprKind::Call(call) => {
            call.receiver.is_none() && call.namespace.is_none() && call.method.name == "tag"
        }
        ExprKind::Paren(inner) => is_string(inner),
        _ => false,
    }
}

/// Rejects `-`, `*`, `/` and `%` with a string operand anywhere in `block`.
pub(crate) fn no_string_arithmetic(block: &Block) -> Result<(), CompileError> {
    walk_block(block, &mut |expr| match &expr.kind {
        ExprKind::Binary { op, left, right }
            if matches!(
                op,
                BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod
            ) && (is_string(left) || is_string(right)) =>
        {
            Err(pos_of(expr.span).error(StringArithmetic(op.symbol())))
        }
        _ => Ok(()),
    })
}

#[derive(Debug, thiserror::Error)]
#[error("index {0} is outside the range of a Java int")]
struct IndexOutOfRange(i64);

/// Rejects `x[n]` with a literal `n` that does not fit a Java `int` (upstream indexes with one).
pub(crate) fn index_literals_fit_int(block: &Block) -> Result<(), CompileError> {
    walk_block(block, &mut |expr| match &expr.kind {
        ExprKind::Index { index, .. } => match &index.kind {
            ExprKind::Number(crate::ast::Number {
                value: crate::ast::NumberValue::Integer(value),
                ..
            }) if i32::try_from(*value).is_err() => {
                Err(pos_of(index.span).error(IndexOutOfRange(*value)))
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    })
}
