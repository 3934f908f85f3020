//! An interpreter for the Groovy subset MAL closures are written in (`tag`, `filter`, `forEach`,
//! `decorate`, `instance` properties and the file `filter`): map access and assignment, string
//! methods, conditionals, elvis, safe navigation, `in`, regex find/match, casts, locals, `if`
//! and `return`. There are no loops in the subset, so evaluation is bounded by the tree's size.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use hotrule_rule_compiler::ast::{
    AssignOp, BinaryOp, Block, Call, Closure, Else, Expr, ExprKind, GStringPart, IfStmt,
    NumberValue, StmtKind, UnaryOp,
};

use crate::closure_builtins as builtins;
use crate::error::EvalError;
use crate::output::Entity;
use crate::regex_cache::{Mode, RegexCache};
use crate::sample::Labels;
use crate::value::{MapRef, V};

/// Runs closures; holds the regex cache for the duration of one evaluation.
pub(crate) struct Interp<'c> {
    pub(crate) regexes: &'c mut RegexCache,
}

enum Flow {
    Value(V),
    Return(V),
}

#[derive(Default)]
struct Env {
    vars: Vec<(String, V)>,
}

impl Env {
    fn get(&self, name: &str) -> Option<&V> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
    fn set(&mut self, name: &str, value: V) -> bool {
        match self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            Some(slot) => {
                slot.1 = value;
                true
            }
            None => false,
        }
    }
}

fn line(expr: &Expr) -> usize {
    expr.span.line
}

/// A tag map as a closure value.
pub(crate) fn tags_value(labels: &Labels) -> V {
    V::map(
        labels
            .iter()
            .map(|(k, v)| (k.clone(), V::Str(v.clone())))
            .collect(),
    )
}

/// Reads a closure's tag map back into labels. A null value fails like upstream's
/// `ImmutableMap.copyOf`.
pub(crate) fn labels_of(map: &MapRef, line: usize) -> Result<Labels, EvalError> {
    let labels: Result<crate::sample::LabelMap, EvalError> = map
        .borrow()
        .iter()
        .map(|(k, v)| match v {
            V::Null => Err(EvalError::NullLabel {
                label: k.clone(),
                line,
            }),
            V::Str(s) => Ok((k.clone(), s.clone())),
            V::Map(_) | V::List(_) | V::Entity(_) | V::Matcher(_) => Err(EvalError::TypeMismatch {
                detail: format!("label '{k}' set to a {}", v.type_name()),
                line,
            }),
            other => Ok((k.clone(), other.to_text())),
        })
        .collect();
    labels.map(std::sync::Arc::new)
}

impl Interp<'_> {
    /// Calls `closure` with positional arguments (Groovy's implicit `it` when it declares none).
    pub(crate) fn call(&mut self, closure: &Closure, args: Vec<V>) -> Result<V, EvalError> {
        let mut env = Env::default();
        if closure.params.is_empty() {
            if let Some(first) = args.into_iter().next() {
                env.vars.push(("it".to_owned(), first));
            }
        } else {
            let mut args = args.into_iter();
            for param in &closure.params {
                env.vars
                    .push((param.name.name.clone(), args.next().unwrap_or(V::Null)));
            }
        }
        let body = inline_block(&closure.body);
        match self.block(body, &mut env)? {
            Flow::Value(v) | Flow::Return(v) => Ok(v),
        }
    }

    fn block(&mut self, block: &Block, env: &mut Env) -> Result<Flow, EvalError> {
        let depth = env.vars.len();
        let mut last = V::Null;
        for stmt in &block.statements {
            match &stmt.kind {
                StmtKind::Expr(expr) => last = self.eval(expr, env)?,
                StmtKind::Local { name, init, .. } => {
                    let value = match init {
                        Some(init) => self.eval(init, env)?,
                        None => V::Null,
                    };
                    env.vars.push((name.name.clone(), value));
                    last = V::Null;
                }
                StmtKind::If(if_stmt) => match self.if_stmt(if_stmt, env)? {
                    Flow::Return(v) => {
                        env.vars.truncate(depth);
                        return Ok(Flow::Return(v));
                    }
                    Flow::Value(v) => last = v,
                },
                StmtKind::Return(value) => {
                    let value = match value {
                        Some(value) => self.eval(value, env)?,
                        None => V::Null,
                    };
                    env.vars.truncate(depth);
                    return Ok(Flow::Return(value));
                }
            }
        }
        env.vars.truncate(depth);
        Ok(Flow::Value(last))
    }

    fn if_stmt(&mut self, if_stmt: &IfStmt, env: &mut Env) -> Result<Flow, EvalError> {
        if self.eval(&if_stmt.condition, env)?.truthy() {
            self.block(&if_stmt.then, env)
        } else {
            match &if_stmt.otherwise {
                None => Ok(Flow::Value(V::Null)),
                Some(Else::Block(block)) => self.block(block, env),
                Some(Else::If(nested)) => self.if_stmt(nested, env),
            }
        }
    }

    fn eval(&mut self, expr: &Expr, env: &mut Env) -> Result<V, EvalError> {
        let at = line(expr);
        Ok(match &expr.kind {
            ExprKind::Name(name) => match env.get(name) {
                Some(v) => v.clone(),
                None if name.chars().next().is_some_and(char::is_uppercase) => {
                    V::Class(name.clone())
                }
                None => {
                    return Err(EvalError::UnknownVariable {
                        name: name.clone(),
                        line: at,
                    });
                }
            },
            ExprKind::Number(number) => match number.value {
                NumberValue::Integer(i) => V::Int(i),
                NumberValue::Decimal(f) => V::Float(f),
            },
            ExprKind::Str(literal) => V::Str(literal.value.clone()),
            ExprKind::GString(parts) => {
                let mut text = String::new();
                for part in parts {
                    match part {
                        GStringPart::Text(t) => text.push_str(t),
                        GStringPart::Expr(e) => text.push_str(&self.eval(e, env)?.to_text()),
                    }
                }
                V::Str(text)
            }
            ExprKind::Bool(b) => V::Bool(*b),
            ExprKind::Null => V::Null,
            ExprKind::List(items) => V::List(
                items
                    .iter()
                    .map(|item| self.eval(item, env))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Map(entries) => {
                let mut map = BTreeMap::new();
                for entry in entries {
                    let key = match &entry.key.kind {
                        ExprKind::Name(name) => name.clone(),
                        _ => self.eval(&entry.key, env)?.to_text(),
                    };
                    map.insert(key, self.eval(&entry.value, env)?);
                }
                V::map(map)
            }
            ExprKind::Closure(_) => {
                return Err(EvalError::Unsupported {
                    what: "a closure value inside a closure".to_owned(),
                    line: at,
                });
            }
            ExprKind::Property {
                receiver,
                name,
                safe,
            } => {
                let target = self.eval(receiver, env)?;
                builtins::property(&target, &name.name, *safe, at)?
            }
            ExprKind::Call(call) => self.call_method(call, env, at)?,
            ExprKind::Index { receiver, index } => {
                let target = self.eval(receiver, env)?;
                let index = self.eval(index, env)?;
                builtins::index_of(&target, &index, at)?
            }
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand, env)?;
                match op {
                    UnaryOp::Not => V::Bool(!value.truthy()),
                    UnaryOp::Neg => match value {
                        V::Int(i) => V::Int(i.wrapping_neg()),
                        V::Float(f) => V::Float(-f),
                        other => {
                            return Err(builtins::mismatch(format!("-{}", other.type_name()), at));
                        }
                    },
                    UnaryOp::Plus => value,
                }
            }
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right, env, at)?,
            ExprKind::Ternary {
                condition,
                then,
                otherwise,
            } => {
                if self.eval(condition, env)?.truthy() {
                    self.eval(then, env)?
                } else {
                    self.eval(otherwise, env)?
                }
            }
            ExprKind::Elvis { value, fallback } => {
                let value = self.eval(value, env)?;
                if value.truthy() {
                    value
                } else {
                    self.eval(fallback, env)?
                }
            }
            ExprKind::Cast { value, ty } => builtins::cast(self.eval(value, env)?, &ty.name, at)?,
            ExprKind::Assign { op, target, value } => {
                let value = self.eval(value, env)?;
                let value = match op {
                    AssignOp::Assign => value,
                    compound => {
                        let current = self.eval(target, env)?;
                        let op = match compound {
                            AssignOp::Add => BinaryOp::Add,
                            AssignOp::Sub => BinaryOp::Sub,
                            AssignOp::Mul => BinaryOp::Mul,
                            AssignOp::Div | AssignOp::Assign => BinaryOp::Div,
                        };
                        builtins::arithmetic(op, &current, &value, at)?
                    }
                };
                self.assign(target, value.clone(), env)?;
                value
            }
            ExprKind::Paren(inner) => self.eval(inner, env)?,
        })
    }

    fn assign(&mut self, target: &Expr, value: V, env: &mut Env) -> Result<(), EvalError> {
        let at = line(target);
        match &target.kind {
            ExprKind::Name(name) => {
                if !env.set(name, value.clone()) {
                    env.vars.push((name.clone(), value));
                }
                Ok(())
            }
            ExprKind::Property { receiver, name, .. } => {
                let holder = self.eval(receiver, env)?;
                builtins::put(&holder, name.name.clone(), value, at)
            }
            ExprKind::Index { receiver, index } => {
                let holder = self.eval(receiver, env)?;
                let key = self.eval(index, env)?.to_text();
                builtins::put(&holder, key, value, at)
            }
            ExprKind::Paren(inner) => self.assign(inner, value, env),
            _ => Err(EvalError::Unsupported {
                what: "this assignment target".to_owned(),
                line: at,
            }),
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        left: &Expr,
        right: &Expr,
        env: &mut Env,
        at: usize,
    ) -> Result<V, EvalError> {
        match op {
            BinaryOp::And => {
                return Ok(V::Bool(
                    self.eval(left, env)?.truthy() && self.eval(right, env)?.truthy(),
                ));
            }
            BinaryOp::Or => {
                return Ok(V::Bool(
                    self.eval(left, env)?.truthy() || self.eval(right, env)?.truthy(),
                ));
            }
            _ => {}
        }
        let l = self.eval(left, env)?;
        let r = self.eval(right, env)?;
        Ok(match op {
            BinaryOp::Eq => V::Bool(l.equals(&r)),
            BinaryOp::NotEq => V::Bool(!l.equals(&r)),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let ordering = match (&l, &r) {
                    (V::Str(a), V::Str(b)) => Some(a.cmp(b)),
                    _ => match (l.as_f64(), r.as_f64()) {
                        (Some(a), Some(b)) => a.partial_cmp(&b),
                        _ => None,
                    },
                };
                let Some(ordering) = ordering else {
                    return Err(builtins::mismatch(
                        format!("{} {} {}", l.type_name(), op.symbol(), r.type_name()),
                        at,
                    ));
                };
                V::Bool(match op {
                    BinaryOp::Lt => ordering.is_lt(),
                    BinaryOp::Le => ordering.is_le(),
                    BinaryOp::Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                })
            }
            BinaryOp::In => V::Bool(match &r {
                V::List(items) => items.iter().any(|item| item.equals(&l)),
                V::Map(map) => map.borrow().contains_key(&l.to_text()),
                V::Str(s) => s.contains(&l.to_text()),
                V::Null => false,
                other => return Err(builtins::mismatch(format!("in {}", other.type_name()), at)),
            }),
            BinaryOp::RegexFind => {
                let text = match &l {
                    V::Null => return Ok(V::Matcher(Vec::new())),
                    other => other.to_text(),
                };
                let regex = self.regexes.get(&r.to_text(), Mode::Find, at)?;
                V::Matcher(
                    regex
                        .captures_iter(&text)
                        .map(|caps| {
                            caps.iter()
                                .map(|group| group.map(|m| m.as_str().to_owned()))
                                .collect()
                        })
                        .collect(),
                )
            }
            BinaryOp::RegexMatch => {
                let text = l.to_text();
                V::Bool(
                    self.regexes
                        .get(&r.to_text(), Mode::Whole, at)?
                        .is_match(&text),
                )
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
                builtins::arithmetic(op, &l, &r, at)?
            }
            BinaryOp::And | BinaryOp::Or => V::Null,
        })
    }

    fn call_method(&mut self, call: &Call, env: &mut Env, at: usize) -> Result<V, EvalError> {
        let Some(receiver) = &call.receiver else {
            return Err(EvalError::Unsupported {
                what: format!("the function '{}' in a closure", call.method.name),
                line: at,
            });
        };
        let target = self.eval(receiver, env)?;
        if call.safe && matches!(target, V::Null) {
            return Ok(V::Null);
        }
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            args.push(self.eval(&arg.value, env)?);
        }
        builtins::method(self.regexes, &target, &call.method.name, &args, at)
    }
}

/// Groovy allows `{ tags -> { a && b } }` in the bundled rules, meaning a block: a body made of one
/// parameter-less closure literal runs that closure's statements.
fn inline_block(block: &Block) -> &Block {
    match block.statements.as_slice() {
        [only] => match &only.kind {
            StmtKind::Expr(Expr {
                kind: ExprKind::Closure(inner),
                ..
            }) if inner.params.is_empty() => inline_block(&inner.body),
            _ => block,
        },
        _ => block,
    }
}

/// A decorate closure's `me`.
pub(crate) fn entity_value(entity: Entity) -> (V, Rc<RefCell<Entity>>) {
    let shared = Rc::new(RefCell::new(entity));
    (V::Entity(shared.clone()), shared)
}
