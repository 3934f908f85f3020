//! One check shared by MAL closures and LAL scripts: arithmetic other than `+` on a string literal.
//!
//! Groovy would run `'a' - 'b'` or `'ab' * 2` (String has `minus` and `multiply`), but SkyWalking
//! compiles MAL closures and LAL expressions to Java, where `+` is the only operator a string
//! takes (concatenation); `-`, `*`, `/` and `%` with a string operand do not compile there.

use crate::CompileError;
use crate::ast::{BinaryOp, Block, Else, Expr, ExprKind, GStringPart, IfStmt, StmtKind};
use crate::model::pos_of;

#[derive(Debug, thiserror::Error)]
#[error("operator '{0}' cannot be applied to a string (only '+' concatenates strings)")]
struct StringArithmetic(&'static str);

/// Checks every expression of `block`.
pub(crate) fn check_block(block: &Block) -> Result<(), CompileError> {
    for statement in &block.statements {
        match &statement.kind {
            StmtKind::Expr(expr) => check_expr(expr)?,
            StmtKind::Local { init, .. } | StmtKind::Return(init) => {
                if let Some(expr) = init {
                    check_expr(expr)?;
                }
            }
            StmtKind::If(if_stmt) => check_if(if_stmt)?,
        }
    }
    Ok(())
}

fn check_if(if_stmt: &IfStmt) -> Result<(), CompileError> {
    check_expr(&if_stmt.condition)?;
    check_block(&if_stmt.then)?;
    match &if_stmt.otherwise {
        None => Ok(()),
        Some(Else::Block(block)) => check_block(block),
        Some(Else::If(nested)) => check_if(nested),
    }
}

fn is_string(expr: &Expr) -> bool {
    match &expr.kind {
        ExprKind::Str(_) | ExprKind::GString(_) => true,
        ExprKind::Paren(inner) => is_string(inner),
        _ => false,
    }
}

/// Checks `expr` and everything inside it (closures included).
pub(crate) fn check_expr(expr: &Expr) -> Result<(), CompileError> {
    match &expr.kind {
        ExprKind::Name(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => Ok(()),
        ExprKind::GString(parts) => parts.iter().try_for_each(|part| match part {
            GStringPart::Text(_) => Ok(()),
            GStringPart::Expr(inner) => check_expr(inner),
        }),
        ExprKind::List(items) => items.iter().try_for_each(check_expr),
        ExprKind::Map(entries) => entries.iter().try_for_each(|entry| {
            check_expr(&entry.key)?;
            check_expr(&entry.value)
        }),
        ExprKind::Closure(closure) => check_block(&closure.body),
        ExprKind::Property { receiver, .. } => check_expr(receiver),
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                check_expr(receiver)?;
            }
            call.args.iter().try_for_each(|arg| check_expr(&arg.value))
        }
        ExprKind::Index { receiver, index } => {
            check_expr(receiver)?;
            check_expr(index)
        }
        ExprKind::Unary { operand, .. } => check_expr(operand),
        ExprKind::Binary { op, left, right } => {
            use BinaryOp::{Div, Mod, Mul, Sub};
            if matches!(op, Sub | Mul | Div | Mod) && (is_string(left) || is_string(right)) {
                return Err(pos_of(expr.span).error(StringArithmetic(op.symbol())));
            }
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
        ExprKind::Elvis { value, fallback } => {
            check_expr(value)?;
            check_expr(fallback)
        }
        ExprKind::Cast { value, .. } => check_expr(value),
        ExprKind::Assign { target, value, .. } => {
            check_expr(target)?;
            check_expr(value)
        }
        ExprKind::Paren(inner) => check_expr(inner),
    }
}
