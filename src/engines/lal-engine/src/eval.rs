//! Expression evaluation: `parsed` / `log` / `tag()` / `sourceAttribute()` reads, `def`
//! variables, casts, comparisons and the value methods the bundled and upstream test rules use.
//!
//! Comparison semantics follow SkyWalking's generated code (reference §4.4): `==` / `!=` compare
//! numerically when the right side is a numeric literal or both sides are numbers, otherwise by
//! type-sensitive equality (JSON `200` is not `"200"`); `<`, `<=`, `>`, `>=` are numeric.

use std::collections::HashMap;

use hotrule_rule_compiler::ast::{
    AssignOp, BinaryOp, Call, Expr, ExprKind, GStringPart, NumberValue, UnaryOp,
};
use serde_json::Value as Json;

use crate::error::EvalError;
use crate::log::LogData;
use crate::parse::{Parsed, compile_java_regex};
use crate::value::Val;

/// What expressions read: the log, the current `parsed`, and the rule's variables.
pub(crate) struct Env<'a> {
    pub log: &'a LogData,
    pub parsed: Parsed,
    pub vars: HashMap<String, Val>,
}

impl Env<'_> {
    pub fn eval(&mut self, expr: &Expr) -> Result<Val, EvalError> {
        match &expr.kind {
            ExprKind::Null => Ok(Val::Null),
            ExprKind::Bool(b) => Ok(Val::Bool(*b)),
            ExprKind::Number(number) => Ok(match number.value {
                NumberValue::Integer(i) => Val::Int(i),
                NumberValue::Decimal(f) => Val::Float(f),
            }),
            ExprKind::Str(literal) => Ok(Val::Str(literal.value.clone())),
            ExprKind::GString(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        GStringPart::Text(text) => out.push_str(text),
                        GStringPart::Expr(inner) => out.push_str(&self.eval(inner)?.display()),
                    }
                }
                Ok(Val::Str(out))
            }
            ExprKind::Name(name) => self.name(name),
            ExprKind::Paren(inner) => self.eval(inner),
            ExprKind::Property { receiver, name, .. } => {
                if let ExprKind::Name(root) = &receiver.kind
                    && !self.vars.contains_key(root)
                {
                    match root.as_str() {
                        "parsed" => return self.parsed_field(&name.name),
                        "log" => return Ok(log_field(self.log, &name.name)),
                        _ => {}
                    }
                }
                let value = self.eval(receiver)?;
                Ok(property(value, &name.name))
            }
            ExprKind::Index { receiver, index } => {
                let value = self.eval(receiver)?;
                let index = self.eval(index)?;
                Ok(index_of(value, &index))
            }
            ExprKind::Call(call) => self.call(call),
            ExprKind::Cast { value, ty } => {
                let value = self.eval(value)?;
                cast(value, &ty.name)
            }
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand)?;
                match op {
                    UnaryOp::Not => Ok(Val::Bool(!value.truth())),
                    UnaryOp::Plus => Ok(value),
                    UnaryOp::Neg => match value {
                        Val::Int(i) => Ok(Val::Int(i.wrapping_neg())),
                        other => Ok(Val::Float(-other.to_double()?)),
                    },
                }
            }
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right),
            ExprKind::Ternary {
                condition,
                then,
                otherwise,
            } => {
                if self.eval(condition)?.truth() {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            ExprKind::Elvis { value, fallback } => {
                let value = self.eval(value)?;
                if value.truth() {
                    Ok(value)
                } else {
                    self.eval(fallback)
                }
            }
            ExprKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.eval(item)?.to_json());
                }
                Ok(Val::Json(Json::Array(out)))
            }
            ExprKind::Map(entries) => {
                let mut out = serde_json::Map::new();
                for entry in entries {
                    let key = match &entry.key.kind {
                        ExprKind::Name(name) => name.clone(),
                        _ => self.eval(&entry.key)?.display(),
                    };
                    out.insert(key, self.eval(&entry.value)?.to_json());
                }
                Ok(Val::Json(Json::Object(out)))
            }
            ExprKind::Assign { op, target, value } => {
                let ExprKind::Name(name) = &target.kind else {
                    return Err(EvalError::Unsupported {
                        what: "assignment to anything but a variable",
                    });
                };
                let value = self.eval(value)?;
                let value = match op {
                    AssignOp::Assign => value,
                    AssignOp::Add => add(self.name(name)?, value)?,
                    AssignOp::Sub => arithmetic(BinaryOp::Sub, self.name(name)?, value)?,
                    AssignOp::Mul => arithmetic(BinaryOp::Mul, self.name(name)?, value)?,
                    AssignOp::Div => arithmetic(BinaryOp::Div, self.name(name)?, value)?,
                };
                self.vars.insert(name.clone(), value.clone());
                Ok(value)
            }
            ExprKind::Closure(_) => Err(EvalError::Unsupported {
                what: "closure as a value",
            }),
        }
    }

    fn name(&self, name: &str) -> Result<Val, EvalError> {
        if let Some(value) = self.vars.get(name) {
            return Ok(value.clone());
        }
        match name {
            "parsed" => Ok(match &self.parsed {
                Parsed::Map(map) => Val::Json(Json::Object(map.clone())),
                Parsed::Typed(message) => Val::Proto(message.clone()),
                Parsed::Metadata | Parsed::Groups { .. } => Val::Null,
            }),
            _ => Err(EvalError::UnknownName {
                name: name.to_owned(),
            }),
        }
    }

    /// `parsed.<name>`.
    fn parsed_field(&self, name: &str) -> Result<Val, EvalError> {
        match &self.parsed {
            Parsed::Metadata => Ok(metadata_field(self.log, name)),
            Parsed::Map(map) => Ok(map.get(name).map_or(Val::Null, Val::from_json)),
            Parsed::Groups { regex, groups } => {
                let index = regex
                    .capture_names()
                    .position(|group| group == Some(name))
                    .ok_or_else(|| EvalError::NoSuchGroup {
                        name: name.to_owned(),
                    })?;
                Ok(groups
                    .get(index)
                    .and_then(Option::as_ref)
                    .map_or(Val::Null, |text| Val::Str(text.clone())))
            }
            Parsed::Typed(message) => Ok(property(Val::Proto(message.clone()), name)),
        }
    }

    fn binary(&mut self, op: BinaryOp, left: &Expr, right: &Expr) -> Result<Val, EvalError> {
        match op {
            BinaryOp::And => {
                return Ok(Val::Bool(
                    self.eval(left)?.truth() && self.eval(right)?.truth(),
                ));
            }
            BinaryOp::Or => {
                return Ok(Val::Bool(
                    self.eval(left)?.truth() || self.eval(right)?.truth(),
                ));
            }
            _ => {}
        }
        if matches!(op, BinaryOp::Eq | BinaryOp::NotEq)
            && let (Some(l), Some(r)) = (self.borrowed_str(left), self.borrowed_str(right))
        {
            // Two strings compare as strings: no need to copy them into values first.
            return Ok(Val::Bool((l == r) == (op == BinaryOp::Eq)));
        }
        let l = self.eval(left)?;
        let r = self.eval(right)?;
        match op {
            BinaryOp::Eq | BinaryOp::NotEq => {
                let equal = if is_numeric_literal(right) || (l.is_numeric() && r.is_numeric()) {
                    match (l.to_double(), r.to_double()) {
                        (Ok(a), Ok(b)) => a == b,
                        _ => false,
                    }
                } else {
                    l == r
                };
                Ok(Val::Bool(equal == (op == BinaryOp::Eq)))
            }
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let (a, b) = (l.to_double()?, r.to_double()?);
                Ok(Val::Bool(match op {
                    BinaryOp::Lt => a < b,
                    BinaryOp::Le => a <= b,
                    BinaryOp::Gt => a > b,
                    _ => a >= b,
                }))
            }
            BinaryOp::RegexFind | BinaryOp::RegexMatch => {
                let pattern = r.display();
                let pattern = if op == BinaryOp::RegexMatch {
                    format!("^(?:{pattern})$")
                } else {
                    pattern
                };
                let regex =
                    compile_java_regex(&pattern).map_err(|reason| EvalError::Regex { reason })?;
                Ok(Val::Bool(regex.is_match(&l.display())))
            }
            BinaryOp::In => Ok(Val::Bool(match &r {
                Val::Json(Json::Array(items)) => items.iter().any(|item| Val::from_json(item) == l),
                Val::Json(Json::Object(map)) => map.contains_key(&l.display()),
                Val::Str(s) => s.contains(&l.display()),
                _ => false,
            })),
            BinaryOp::Add => add(l, r),
            _ => arithmetic(op, l, r),
        }
    }

    /// The string an expression evaluates to, borrowed, for the side-effect-free forms that are
    /// always strings: a string literal and `tag("literal")` (as `==` in filters uses them).
    fn borrowed_str<'e>(&'e self, expr: &'e Expr) -> Option<&'e str> {
        match &expr.kind {
            ExprKind::Str(literal) => Some(&literal.value),
            ExprKind::Paren(inner) => self.borrowed_str(inner),
            ExprKind::Call(call) if call.receiver.is_none() && call.method.name == "tag" => {
                match call.args.as_slice() {
                    [arg] => match &arg.value.kind {
                        ExprKind::Str(key) => Some(self.log.tag(&key.value)),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn call(&mut self, call: &Call) -> Result<Val, EvalError> {
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            args.push(self.eval(&arg.value)?);
        }
        let Some(receiver) = &call.receiver else {
            return self.function(&call.method.name, args);
        };
        if let ExprKind::Name(class) = &receiver.kind
            && class == "ProcessRegistry"
            && !self.vars.contains_key(class)
        {
            return process_registry(&call.method.name, &args);
        }
        let value = self.eval(receiver)?;
        if value.is_null() {
            // `x?.m()` is null on null; Java would throw on `x.m()`, LAL's helpers are null-safe.
            return Ok(Val::Null);
        }
        method(value, &call.method.name, &args)
    }

    fn function(&self, name: &str, args: Vec<Val>) -> Result<Val, EvalError> {
        let first = args.into_iter().next().unwrap_or(Val::Null);
        match name {
            "tag" => Ok(Val::Str(self.log.tag(&first.display_cow()).to_owned())),
            "sourceAttribute" => Ok(Val::Str(
                self.log
                    .source_attributes
                    .get(first.display_cow().as_ref())
                    .cloned()
                    .unwrap_or_default(),
            )),
            "toJson" | "toJsonArray" => Ok(match first {
                Val::Str(text) => match serde_json::from_str::<Json>(&text) {
                    Ok(json @ (Json::Object(_) | Json::Array(_))) => Val::Json(json),
                    _ => Val::Null,
                },
                json @ Val::Json(_) => json,
                _ => Val::Null,
            }),
            _ => Err(EvalError::UnknownFunction {
                name: name.to_owned(),
            }),
        }
    }
}

fn is_numeric_literal(expr: &Expr) -> bool {
    match &expr.kind {
        ExprKind::Number(_) => true,
        ExprKind::Unary { operand, .. } | ExprKind::Paren(operand) => is_numeric_literal(operand),
        _ => false,
    }
}

/// `parsed.x` with no parser: the log's metadata fields.
fn metadata_field(log: &LogData, name: &str) -> Val {
    match name {
        "service" => Val::Str(log.service.clone()),
        "serviceInstance" => Val::Str(log.service_instance.clone()),
        "endpoint" => Val::Str(log.endpoint.clone()),
        "layer" => Val::Str(log.layer.clone()),
        "timestamp" => Val::Int(log.timestamp_ms),
        "traceId" => Val::Str(log.trace_context.trace_id.clone()),
        "segmentId" | "traceSegmentId" => Val::Str(log.trace_context.trace_segment_id.clone()),
        "spanId" => Val::Int(i64::from(log.trace_context.span_id)),
        _ => Val::Null,
    }
}

/// `log.x`: the fields of the received `LogData`.
fn log_field(log: &LogData, name: &str) -> Val {
    match name {
        "body" => {
            let json = match &log.body {
                crate::log::Body::None => serde_json::json!({}),
                crate::log::Body::Text(text) => serde_json::json!({"text": {"text": text}}),
                crate::log::Body::Json(json) => serde_json::json!({"json": {"json": json}}),
                crate::log::Body::Yaml(yaml) => serde_json::json!({"yaml": {"yaml": yaml}}),
            };
            Val::Proto(json)
        }
        "traceContext" => Val::Proto(serde_json::json!({
            "traceId": log.trace_context.trace_id,
            "traceSegmentId": log.trace_context.trace_segment_id,
            "spanId": log.trace_context.span_id,
        })),
        "tags" => Val::Proto(serde_json::json!({
            "data": log.tags.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect::<Vec<_>>(),
        })),
        "segmentId" => Val::Null,
        other => metadata_field(log, other),
    }
}

/// `value.name`: a map entry, a message field (missing reads as an empty message; `.value` of a
/// wrapper is the wrapped scalar), null otherwise.
fn property(value: Val, name: &str) -> Val {
    match value {
        Val::Json(Json::Object(map)) => map.get(name).map_or(Val::Null, Val::from_json),
        Val::Proto(Json::Object(map)) => match map.get(name) {
            None | Some(Json::Null) => Val::Proto(Json::Object(serde_json::Map::new())),
            Some(json @ Json::Object(_)) => Val::Proto(json.clone()),
            Some(json) => Val::from_json(json),
        },
        scalar @ (Val::Int(_) | Val::Float(_) | Val::Bool(_) | Val::Str(_)) if name == "value" => {
            scalar
        }
        _ => Val::Null,
    }
}

fn index_of(value: Val, index: &Val) -> Val {
    match (value, index) {
        (Val::Json(Json::Array(items)) | Val::Proto(Json::Array(items)), Val::Int(i)) => {
            usize::try_from(*i)
                .ok()
                .and_then(|i| items.get(i))
                .map_or(Val::Null, Val::from_json)
        }
        (Val::Json(Json::Object(map)), key) => {
            map.get(&key.display()).map_or(Val::Null, Val::from_json)
        }
        (proto @ Val::Proto(_), key) => property(proto, &key.display()),
        _ => Val::Null,
    }
}

/// `value as Type`, through the runtime helper's conversions.
pub(crate) fn cast(value: Val, ty: &str) -> Result<Val, EvalError> {
    Ok(match ty {
        "String" => value.to_str().map_or(Val::Null, Val::Str),
        "Long" => Val::Int(value.to_long()?),
        "Integer" => Val::Int(value.to_int()?),
        "Boolean" => Val::Bool(value.to_bool()),
        "Double" | "Float" => match value {
            Val::Null => Val::Float(0.0),
            other => Val::Float(other.to_double()?),
        },
        _ => value,
    })
}

fn add(l: Val, r: Val) -> Result<Val, EvalError> {
    match (&l, &r) {
        (Val::Str(_), _) | (_, Val::Str(_)) => Ok(Val::Str(l.display() + &r.display())),
        _ => arithmetic(BinaryOp::Add, l, r),
    }
}

fn arithmetic(op: BinaryOp, l: Val, r: Val) -> Result<Val, EvalError> {
    if let (Val::Int(a), Val::Int(b)) = (&l, &r) {
        let (a, b) = (*a, *b);
        let exact = match op {
            BinaryOp::Add => a.checked_add(b),
            BinaryOp::Sub => a.checked_sub(b),
            BinaryOp::Mul => a.checked_mul(b),
            BinaryOp::Mod => a.checked_rem(b),
            BinaryOp::Div if a.checked_rem(b) == Some(0) => a.checked_div(b),
            _ => None,
        };
        if let Some(result) = exact {
            return Ok(Val::Int(result));
        }
    }
    let (a, b) = (l.to_double()?, r.to_double()?);
    Ok(Val::Float(match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        _ => a % b,
    }))
}

/// `ProcessRegistry.generateVirtual{Local,Remote,}Process(service, instance[, address or name])`,
/// as SkyWalking's `ProcessRegistry`: a local process is the virtual process named
/// `UNKNOWN_LOCAL`, a remote one is named by its address, and `generateVirtualProcess` takes the
/// name. SkyWalking returns an encoded process id; hotrule returns a readable, stable one.
fn process_registry(method: &str, args: &[Val]) -> Result<Val, EvalError> {
    let arg = |i: usize| args.get(i).map_or_else(String::new, Val::display);
    let virtual_process = |name: String| Ok(Val::Str(format!("virtual:{}:{}:{name}", arg(0), arg(1))));
    match method {
        "generateVirtualLocalProcess" => virtual_process("UNKNOWN_LOCAL".to_string()),
        "generateVirtualRemoteProcess" | "generateVirtualProcess" => virtual_process(arg(2)),
        _ => Err(EvalError::UnknownFunction {
            name: format!("ProcessRegistry.{method}"),
        }),
    }
}

/// The methods of values that LAL scripts call: Java `String`, Gson `JsonObject` / `JsonArray`
/// and `Map` methods, and `toString()` on anything.
fn method(value: Val, name: &str, args: &[Val]) -> Result<Val, EvalError> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or(Val::Null);
    let text = || value.display();
    Ok(match name {
        "toString" => Val::Str(text()),
        "trim" => Val::Str(text().trim().to_owned()),
        "toLowerCase" => Val::Str(text().to_lowercase()),
        "toUpperCase" => Val::Str(text().to_uppercase()),
        "startsWith" => Val::Bool(text().starts_with(&arg(0).display())),
        "endsWith" => Val::Bool(text().ends_with(&arg(0).display())),
        "contains" => Val::Bool(match &value {
            Val::Json(Json::Array(items)) => items.iter().any(|i| Val::from_json(i) == arg(0)),
            _ => text().contains(&arg(0).display()),
        }),
        "equals" => Val::Bool(value == arg(0)),
        "equalsIgnoreCase" => Val::Bool(text().eq_ignore_ascii_case(&arg(0).display())),
        "isEmpty" => Val::Bool(match &value {
            Val::Json(Json::Array(items)) => items.is_empty(),
            Val::Json(Json::Object(map)) | Val::Proto(Json::Object(map)) => map.is_empty(),
            _ => text().is_empty(),
        }),
        "size" | "length" => Val::Int(match &value {
            Val::Json(Json::Array(items)) => items.len() as i64,
            Val::Json(Json::Object(map)) => map.len() as i64,
            _ => text().chars().count() as i64,
        }),
        "has" | "containsKey" => Val::Bool(match &value {
            Val::Json(Json::Object(map)) => map.contains_key(&arg(0).display()),
            _ => false,
        }),
        "keySet" => match &value {
            Val::Json(Json::Object(map)) => {
                Val::Json(Json::Array(map.keys().cloned().map(Json::String).collect()))
            }
            _ => Val::Null,
        },
        "get" | "getAsJsonObject" | "getAsJsonArray" if !args.is_empty() => {
            index_of(value, &arg(0))
        }
        "getAsString" => match value {
            Val::Json(_) | Val::Proto(_) => Val::Null,
            other => Val::Str(other.display()),
        },
        "getAsInt" => Val::Int(value.to_int()?),
        "getAsLong" => Val::Int(value.to_long()?),
        "getAsDouble" => Val::Float(value.to_double()?),
        "getAsBoolean" => Val::Bool(value.to_bool()),
        _ => {
            return Err(EvalError::UnknownMethod {
                method: name.to_owned(),
                on: kind_name(&value),
            });
        }
    })
}

fn kind_name(value: &Val) -> &'static str {
    match value {
        Val::Null => "null",
        Val::Bool(_) => "a boolean",
        Val::Int(_) | Val::Float(_) => "a number",
        Val::Str(_) => "a string",
        Val::Json(_) => "a map or list",
        Val::Proto(_) => "a message",
    }
}
