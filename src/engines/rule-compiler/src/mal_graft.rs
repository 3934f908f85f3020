//! Building a MAL rule's full expression from `expPrefix`, `exp` and `expSuffix`, on the syntax tree.
//!
//! The reference (§3.1) defines the full expression as:
//! - `expSuffix` appended as `(exp).expSuffix`;
//! - `expPrefix` injected right after each sample-family reference (HEAD's ANTLR-based
//!   `injectExpPrefix`; the original spliced it after the first `.`).
//!
//! Both are done here by grafting parsed trees rather than splicing strings, so positions stay
//! exact (prefix and suffix nodes keep the positions of the scalar they were written in) and no
//! re-parse can go wrong on quoting. A prefix or suffix must be a call chain whose head has no
//! receiver, such as `tag({...})` or `forEach(...).forEach(...)`; grafting gives that head the
//! sample family (or `(exp)`) as its receiver.
//!
//! A *sample-family reference* is a bare name outside closures that is not a class used for a
//! constant or static call (see [`CLASS_NAMES`]) and not the constant argument of `downsampling`.
//! Literals, `time()`, constants and everything inside closures are left alone.

use crate::CompileError;
use crate::ast::{Arg, Call, Expr, ExprKind, GStringPart, MapEntry};
use crate::mal_catalog::CLASS_NAMES;
use crate::model::pos_of;

#[derive(Debug, thiserror::Error)]
#[error("{key} must be a chain of MAL function calls such as {example}")]
struct NotAChain {
    key: &'static str,
    example: &'static str,
}

/// A validated `expPrefix` or `expSuffix`: a call chain with a receiver-less head.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    template: Expr,
}

impl Chain {
    pub(crate) fn new(template: Expr, key: &'static str) -> Result<Chain, CompileError> {
        let example = if key == "expPrefix" {
            "tag({tags -> ...})"
        } else {
            "service(['svc'], Layer.GENERAL)"
        };
        let mut link = &template;
        loop {
            match &link.kind {
                ExprKind::Call(call) => match &call.receiver {
                    Some(receiver) => link = receiver,
                    None if call.namespace.is_none() => return Ok(Chain { template }),
                    None => return Err(pos_of(link.span).error(NotAChain { key, example })),
                },
                _ => return Err(pos_of(link.span).error(NotAChain { key, example })),
            }
        }
    }

    /// The chain with `base` as the receiver of its head call.
    pub(crate) fn apply_to(&self, base: Expr) -> Expr {
        graft(&self.template, base)
    }
}

fn graft(link: &Expr, base: Expr) -> Expr {
    match &link.kind {
        ExprKind::Call(call) => {
            let receiver = match &call.receiver {
                Some(receiver) => graft(receiver, base),
                None => base,
            };
            let span = receiver.span.to(link.span);
            let call = Call {
                receiver: Some(Box::new(receiver)),
                safe: call.safe,
                namespace: call.namespace.clone(),
                method: call.method.clone(),
                args: call.args.clone(),
                style: call.style,
            };
            Expr {
                kind: ExprKind::Call(Box::new(call)),
                span,
            }
        }
        // `Chain::new` admits only calls; anything else is returned unchanged.
        _ => link.clone(),
    }
}

/// `(prefix-injected exp).suffix`, or the parts that are configured.
pub(crate) fn full_expression(exp: Expr, prefix: Option<&Chain>, suffix: Option<&Chain>) -> Expr {
    let exp = match prefix {
        Some(prefix) => inject(exp, prefix, false),
        None => exp,
    };
    match suffix {
        Some(suffix) => {
            let span = exp.span;
            suffix.apply_to(Expr {
                kind: ExprKind::Paren(Box::new(exp)),
                span,
            })
        }
        None => exp,
    }
}

/// Rewrites every sample-family reference `name` to `name.<prefix chain>`.
fn inject(expr: Expr, prefix: &Chain, is_constant_arg: bool) -> Expr {
    let span = expr.span;
    let boxed = |inner: Box<Expr>| Box::new(inject(*inner, prefix, false));
    let kind = match expr.kind {
        ExprKind::Name(name) if is_constant_arg || CLASS_NAMES.contains(&name.as_str()) => {
            ExprKind::Name(name)
        }
        ExprKind::Name(name) => {
            return prefix.apply_to(Expr {
                kind: ExprKind::Name(name),
                span,
            });
        }
        ExprKind::Call(call) => {
            let call = *call;
            let constant_args = call.receiver.is_some()
                && call.namespace.is_none()
                && call.method.name == "downsampling";
            let receiver = call.receiver.map(boxed);
            let args = call
                .args
                .into_iter()
                .map(|arg| Arg {
                    name: arg.name,
                    value: inject(arg.value, prefix, constant_args),
                })
                .collect();
            ExprKind::Call(Box::new(Call {
                receiver,
                args,
                ..call
            }))
        }
        ExprKind::Property {
            receiver,
            name,
            safe,
        } => ExprKind::Property {
            receiver: boxed(receiver),
            name,
            safe,
        },
        ExprKind::Index { receiver, index } => ExprKind::Index {
            receiver: boxed(receiver),
            index: boxed(index),
        },
        ExprKind::Unary { op, operand } => ExprKind::Unary {
            op,
            operand: boxed(operand),
        },
        ExprKind::Binary { op, left, right } => ExprKind::Binary {
            op,
            left: boxed(left),
            right: boxed(right),
        },
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => ExprKind::Ternary {
            condition: boxed(condition),
            then: boxed(then),
            otherwise: boxed(otherwise),
        },
        ExprKind::Elvis { value, fallback } => ExprKind::Elvis {
            value: boxed(value),
            fallback: boxed(fallback),
        },
        ExprKind::Cast { value, ty } => ExprKind::Cast {
            value: boxed(value),
            ty,
        },
        ExprKind::Assign { op, target, value } => ExprKind::Assign {
            op,
            target: boxed(target),
            value: boxed(value),
        },
        ExprKind::Paren(inner) => ExprKind::Paren(boxed(inner)),
        ExprKind::List(items) => ExprKind::List(
            items
                .into_iter()
                .map(|item| inject(item, prefix, false))
                .collect(),
        ),
        ExprKind::Map(entries) => ExprKind::Map(
            entries
                .into_iter()
                .map(|entry| MapEntry {
                    key: entry.key,
                    value: inject(entry.value, prefix, false),
                })
                .collect(),
        ),
        ExprKind::GString(parts) => ExprKind::GString(
            parts
                .into_iter()
                .map(|part| match part {
                    GStringPart::Expr(inner) => GStringPart::Expr(inject(inner, prefix, false)),
                    text => text,
                })
                .collect(),
        ),
        // Closures run on tag maps, not sample families; literals have nothing to inject into.
        kind @ (ExprKind::Closure(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null) => kind,
    };
    Expr { kind, span }
}
