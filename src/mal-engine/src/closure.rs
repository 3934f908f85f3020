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

use crate::error::EvalError;
use crate::output::Entity;
use crate::regex_cache::{Mode, RegexCache, java_replacement};
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
        self.vars.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v)
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
    map.borrow()
        .iter()
        .map(|(k, v)| match v {
            V::Null => Err(EvalError::NullLabel {
                label: k.clone(),
                line,
            }),
            V::Str(s) => Ok((k.clone(), s.clone())),
            other => Ok((k.clone(), other.to_text())),
        })
        .collect()
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
                property(&target, &name.name, *safe, at)?
            }
            ExprKind::Call(call) => self.call_method(call, env, at)?,
            ExprKind::Index { receiver, index } => {
                let target = self.eval(receiver, env)?;
                let index = self.eval(index, env)?;
                index_of(&target, &index, at)?
            }
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand, env)?;
                match op {
                    UnaryOp::Not => V::Bool(!value.truthy()),
                    UnaryOp::Neg => match value {
                        V::Int(i) => V::Int(i.wrapping_neg()),
                        V::Float(f) => V::Float(-f),
                        other => return Err(mismatch(format!("-{}", other.type_name()), at)),
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
            ExprKind::Cast { value, ty } => cast(self.eval(value, env)?, &ty.name, at)?,
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
                        arithmetic(op, &current, &value, at)?
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
                put(&holder, name.name.clone(), value, at)
            }
            ExprKind::Index { receiver, index } => {
                let holder = self.eval(receiver, env)?;
                let key = self.eval(index, env)?.to_text();
                put(&holder, key, value, at)
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
                    return Err(mismatch(
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
                other => return Err(mismatch(format!("in {}", other.type_name()), at)),
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
                V::Bool(self.regexes.get(&r.to_text(), Mode::Whole, at)?.is_match(&text))
            }
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
                arithmetic(op, &l, &r, at)?
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
        self.method(&target, &call.method.name, &args, at)
    }

    fn method(&mut self, target: &V, method: &str, args: &[V], at: usize) -> Result<V, EvalError> {
        let arg_text = |i: usize| args.get(i).map(V::to_text).unwrap_or_default();
        let arg_int = |i: usize| -> Option<i64> {
            args.get(i)
                .and_then(V::as_f64)
                .map(|f| f as i64)
        };
        let no_method = || EvalError::NoMethod {
            method: method.to_owned(),
            receiver: target.type_name(),
            line: at,
        };
        match target {
            V::Str(s) => Ok(match method {
                "trim" => V::Str(s.trim().to_owned()),
                "toLowerCase" => V::Str(s.to_lowercase()),
                "toUpperCase" => V::Str(s.to_uppercase()),
                "length" | "size" => V::Int(s.chars().count() as i64),
                "isEmpty" => V::Bool(s.is_empty()),
                "isBlank" => V::Bool(s.trim().is_empty()),
                "toString" => V::Str(s.clone()),
                "startsWith" => V::Bool(s.starts_with(&arg_text(0))),
                "endsWith" => V::Bool(s.ends_with(&arg_text(0))),
                "contains" => V::Bool(s.contains(&arg_text(0))),
                "equals" => V::Bool(args.first().is_some_and(|a| a.equals(target))),
                "equalsIgnoreCase" => V::Bool(s.eq_ignore_ascii_case(&arg_text(0))),
                "concat" => V::Str(format!("{s}{}", arg_text(0))),
                "indexOf" => V::Int(char_index(s, s.find(&arg_text(0)))),
                "lastIndexOf" => V::Int(char_index(s, s.rfind(&arg_text(0)))),
                "replace" => V::Str(s.replace(&arg_text(0), &arg_text(1))),
                "replaceAll" | "replaceFirst" => {
                    let regex = self.regexes.get(&arg_text(0), Mode::Find, at)?;
                    let replacement = java_replacement(&arg_text(1));
                    V::Str(if method == "replaceAll" {
                        regex.replace_all(s, replacement.as_str()).into_owned()
                    } else {
                        regex.replace(s, replacement.as_str()).into_owned()
                    })
                }
                "matches" => V::Bool(self.regexes.get(&arg_text(0), Mode::Whole, at)?.is_match(s)),
                "split" => {
                    let regex = self.regexes.get(&arg_text(0), Mode::Find, at)?;
                    let mut parts: Vec<V> = regex.split(s).map(|p| V::Str(p.to_owned())).collect();
                    // Java drops trailing empty strings.
                    while matches!(parts.last(), Some(V::Str(p)) if p.is_empty()) {
                        parts.pop();
                    }
                    V::List(parts)
                }
                "substring" => {
                    let chars: Vec<char> = s.chars().collect();
                    let begin = arg_int(0).unwrap_or(0);
                    let end = arg_int(1).unwrap_or(chars.len() as i64);
                    if begin < 0 || end > chars.len() as i64 || begin > end {
                        return Err(mismatch(
                            format!("substring({begin}, {end}) of a {}-character string", chars.len()),
                            at,
                        ));
                    }
                    V::Str(chars[begin as usize..end as usize].iter().collect())
                }
                "toInteger" | "toLong" | "parseInt" => cast(target.clone(), "Long", at)?,
                "toDouble" | "toFloat" => cast(target.clone(), "Double", at)?,
                _ => return Err(no_method()),
            }),
            V::Map(map) => Ok(match method {
                "get" | "getAt" => map.borrow().get(&arg_text(0)).cloned().unwrap_or(V::Null),
                "getOrDefault" => map
                    .borrow()
                    .get(&arg_text(0))
                    .cloned()
                    .unwrap_or_else(|| args.get(1).cloned().unwrap_or(V::Null)),
                "put" => map
                    .borrow_mut()
                    .insert(arg_text(0), args.get(1).cloned().unwrap_or(V::Null))
                    .unwrap_or(V::Null),
                "remove" => map.borrow_mut().remove(&arg_text(0)).unwrap_or(V::Null),
                "containsKey" => V::Bool(map.borrow().contains_key(&arg_text(0))),
                "size" => V::Int(map.borrow().len() as i64),
                "isEmpty" => V::Bool(map.borrow().is_empty()),
                _ => return Err(no_method()),
            }),
            V::List(items) => Ok(match method {
                "contains" => V::Bool(args.first().is_some_and(|a| items.iter().any(|i| i.equals(a)))),
                "size" => V::Int(items.len() as i64),
                "isEmpty" => V::Bool(items.is_empty()),
                "get" | "getAt" => index_of(target, args.first().unwrap_or(&V::Null), at)?,
                "join" => V::Str(
                    items
                        .iter()
                        .map(V::to_text)
                        .collect::<Vec<_>>()
                        .join(&arg_text(0)),
                ),
                _ => return Err(no_method()),
            }),
            V::Class(class) if class == "ProcessRegistry" => match method {
                "generateVirtualLocalProcess" => {
                    Ok(V::Str(virtual_process(&arg_text(0), &arg_text(1), "UNKNOWN_LOCAL")))
                }
                "generateVirtualRemoteProcess" => {
                    Ok(V::Str(virtual_process(&arg_text(0), &arg_text(1), "UNKNOWN_REMOTE")))
                }
                _ => Err(no_method()),
            },
            V::Int(_) | V::Float(_) if method == "toString" => Ok(V::Str(target.to_text())),
            V::Null => Err(EvalError::NoMethod {
                method: method.to_owned(),
                receiver: "null (NullPointerException)",
                line: at,
            }),
            _ => Err(no_method()),
        }
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

/// The id SkyWalking's `ProcessRegistry` builds for a virtual process. Upstream hashes the
/// instance id and the name with SHA-256 (and, for a remote process, looks the address up in its
/// Kubernetes cache); the engine keeps the ingredients readable instead, which is enough to
/// group samples but does not equal an OAP-issued id (see docs/mal.md).
fn virtual_process(service: &str, instance: &str, name: &str) -> String {
    format!("{service}_{instance}_{name}")
}

fn char_index(s: &str, byte_index: Option<usize>) -> i64 {
    match byte_index {
        Some(i) => s[..i].chars().count() as i64,
        None => -1,
    }
}

fn mismatch(detail: String, line: usize) -> EvalError {
    EvalError::TypeMismatch { detail, line }
}

fn property(target: &V, name: &str, safe: bool, at: usize) -> Result<V, EvalError> {
    match target {
        V::Null if safe => Ok(V::Null),
        V::Map(map) => Ok(map.borrow().get(name).cloned().unwrap_or(V::Null)),
        V::Entity(entity) => {
            let entity = entity.borrow();
            Ok(match name {
                "serviceName" => V::Str(entity.service_name.clone()),
                "instanceName" => V::Str(entity.instance_name.clone()),
                "endpointName" => V::Str(entity.endpoint_name.clone()),
                "layer" => V::Str(entity.layer.clone()),
                "scopeType" => V::Str(entity.scope.as_str().to_owned()),
                _ => match attr_index(name) {
                    Some(i) => entity.attrs[i].clone().map_or(V::Null, V::Str),
                    None => {
                        return Err(EvalError::NoProperty {
                            property: name.to_owned(),
                            receiver: "MeterEntity",
                            line: at,
                        });
                    }
                },
            })
        }
        // `Layer.GENERAL` and friends read as their constant's name.
        V::Class(_) => Ok(V::Str(name.to_owned())),
        V::Str(s) if name == "length" => Ok(V::Int(s.chars().count() as i64)),
        V::List(items) if name == "size" => Ok(V::Int(items.len() as i64)),
        other => Err(EvalError::NoProperty {
            property: name.to_owned(),
            receiver: if matches!(other, V::Null) {
                "null (NullPointerException)"
            } else {
                other.type_name()
            },
            line: at,
        }),
    }
}

fn attr_index(name: &str) -> Option<usize> {
    match name {
        "attr0" => Some(0),
        "attr1" => Some(1),
        "attr2" => Some(2),
        "attr3" => Some(3),
        "attr4" => Some(4),
        "attr5" => Some(5),
        _ => None,
    }
}

fn put(holder: &V, key: String, value: V, at: usize) -> Result<(), EvalError> {
    match holder {
        V::Map(map) => {
            map.borrow_mut().insert(key, value);
            Ok(())
        }
        V::Entity(entity) => match attr_index(&key) {
            Some(i) => {
                entity.borrow_mut().attrs[i] = match value {
                    V::Null => None,
                    other => Some(other.to_text()),
                };
                Ok(())
            }
            None => Err(EvalError::NoProperty {
                property: key,
                receiver: "MeterEntity (only attr0..attr5 can be set)",
                line: at,
            }),
        },
        other => Err(EvalError::NoProperty {
            property: key,
            receiver: other.type_name(),
            line: at,
        }),
    }
}

fn index_of(target: &V, index: &V, at: usize) -> Result<V, EvalError> {
    match target {
        V::Map(map) => Ok(map.borrow().get(&index.to_text()).cloned().unwrap_or(V::Null)),
        V::List(items) => {
            let Some(i) = index.as_f64().map(|f| f as i64) else {
                return Err(mismatch(format!("List[{}]", index.type_name()), at));
            };
            let i = if i < 0 { items.len() as i64 + i } else { i };
            Ok(usize::try_from(i)
                .ok()
                .and_then(|i| items.get(i))
                .cloned()
                .unwrap_or(V::Null))
        }
        V::Matcher(matches) => {
            let Some(i) = index.as_f64().map(|f| f as usize) else {
                return Err(mismatch(format!("Matcher[{}]", index.type_name()), at));
            };
            match matches.get(i) {
                None => Err(mismatch(format!("no match at index {i}"), at)),
                Some(groups) if groups.len() == 1 => {
                    Ok(groups[0].clone().map_or(V::Null, V::Str))
                }
                Some(groups) => Ok(V::List(
                    groups.iter().map(|g| g.clone().map_or(V::Null, V::Str)).collect(),
                )),
            }
        }
        V::Str(s) => {
            let Some(i) = index.as_f64().map(|f| f as usize) else {
                return Err(mismatch(format!("String[{}]", index.type_name()), at));
            };
            s.chars()
                .nth(i)
                .map(|c| V::Str(c.to_string()))
                .ok_or_else(|| mismatch(format!("String index {i} out of range"), at))
        }
        V::Null => Err(EvalError::NoProperty {
            property: index.to_text(),
            receiver: "null (NullPointerException)",
            line: at,
        }),
        other => Err(mismatch(format!("cannot index {}", other.type_name()), at)),
    }
}

fn arithmetic(op: BinaryOp, l: &V, r: &V, at: usize) -> Result<V, EvalError> {
    if op == BinaryOp::Add {
        match (l, r) {
            (V::Str(a), other) => return Ok(V::Str(format!("{a}{}", other.to_text()))),
            (other, V::Str(b)) => return Ok(V::Str(format!("{}{b}", other.to_text()))),
            (V::List(a), V::List(b)) => return Ok(V::List(a.iter().chain(b).cloned().collect())),
            _ => {}
        }
    }
    match (l, r) {
        (V::Int(a), V::Int(b)) => Ok(match op {
            BinaryOp::Add => V::Int(a.wrapping_add(*b)),
            BinaryOp::Sub => V::Int(a.wrapping_sub(*b)),
            BinaryOp::Mul => V::Int(a.wrapping_mul(*b)),
            BinaryOp::Mod if *b != 0 => V::Int(a.wrapping_rem(*b)),
            BinaryOp::Div if *b != 0 => V::Float(*a as f64 / *b as f64),
            _ => return Err(mismatch("division by zero".to_owned(), at)),
        }),
        _ => match (l.as_f64(), r.as_f64()) {
            (Some(a), Some(b)) => Ok(V::Float(match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Mod => a % b,
                _ => a / b,
            })),
            _ => Err(mismatch(
                format!("{} {} {}", l.type_name(), op.symbol(), r.type_name()),
                at,
            )),
        },
    }
}

fn cast(value: V, ty: &str, at: usize) -> Result<V, EvalError> {
    let simple = ty.rsplit('.').next().unwrap_or(ty);
    Ok(match (simple, value) {
        (_, V::Null) => V::Null,
        ("String", v) => V::Str(v.to_text()),
        ("Boolean" | "boolean", V::Str(s)) => V::Bool(s.eq_ignore_ascii_case("true")),
        ("Boolean" | "boolean", v) => V::Bool(v.truthy()),
        ("Integer" | "int" | "Long" | "long", V::Str(s)) => match s.trim().parse::<i64>() {
            Ok(i) => V::Int(i),
            Err(_) => return Err(mismatch(format!("'{s}' as {simple}"), at)),
        },
        ("Integer" | "int" | "Long" | "long", v) => match v.as_f64() {
            Some(f) => V::Int(f as i64),
            None => return Err(mismatch(format!("{} as {simple}", v.type_name()), at)),
        },
        ("Double" | "double" | "Float" | "float" | "BigDecimal", V::Str(s)) => {
            match s.trim().parse::<f64>() {
                Ok(f) => V::Float(f),
                Err(_) => return Err(mismatch(format!("'{s}' as {simple}"), at)),
            }
        }
        ("Double" | "double" | "Float" | "float" | "BigDecimal", v) => match v.as_f64() {
            Some(f) => V::Float(f),
            None => return Err(mismatch(format!("{} as {simple}", v.type_name()), at)),
        },
        ("Map", v @ V::Map(_)) | ("List", v @ V::List(_)) => v,
        (_, v) => {
            return Err(EvalError::Unsupported {
                what: format!("a cast of {} to {ty}", v.type_name()),
                line: at,
            });
        }
    })
}

/// A decorate closure's `me`.
pub(crate) fn entity_value(entity: Entity) -> (V, Rc<RefCell<Entity>>) {
    let shared = Rc::new(RefCell::new(entity));
    (V::Entity(shared.clone()), shared)
}
