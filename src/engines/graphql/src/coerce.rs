//! Input coercion (spec §"Input Coercion"): argument literals and request variables become
//! JSON values of their declared input types, with defaults applied. A single value in a
//! list position becomes a one-item list; an `ID` may be given as an integer and becomes a
//! string; custom scalars (`Long`) pass through as given.

use std::collections::HashSet;

use serde_json::{Map, Value as Json};

use crate::ast::{TypeRef, Value};
use crate::schema::Schema;
use crate::sdl::{InputValueDef, TypeKind};

/// Why an argument list did not coerce.
#[derive(Debug)]
pub enum ArgError {
    Unknown(String),
    Duplicate(String),
    Missing(String, String),
    Wrong { name: String, literal: String, reason: String },
}

fn kind_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "Boolean",
        Json::Number(_) => "Number",
        Json::String(_) => "String",
        Json::Array(_) => "List",
        Json::Object(_) => "Object",
    }
}

/// Coerces a request variable's JSON value to `ty`.
pub fn coerce_json(schema: &Schema, v: &Json, ty: &TypeRef) -> Result<Json, String> {
    match ty {
        TypeRef::NonNull(inner) => {
            if v.is_null() {
                return Err(format!("null value for non-null type '{ty}'"));
            }
            coerce_json(schema, v, inner)
        }
        _ if v.is_null() => Ok(Json::Null),
        TypeRef::List(inner) => match v {
            Json::Array(items) => items.iter().map(|i| coerce_json(schema, i, inner)).collect::<Result<_, _>>().map(Json::Array),
            single => Ok(Json::Array(vec![coerce_json(schema, single, inner)?])),
        },
        TypeRef::Named(n) => {
            let Some(t) = schema.get(n) else { return Err(format!("unknown type '{n}'")) };
            let bad = || format!("expected type '{n}' but was {} '{v}'", kind_name(v));
            match (t.kind, n.as_str()) {
                (TypeKind::Scalar, "Int") => match v.as_i64() {
                    Some(i) if i32::try_from(i).is_ok() => Ok(v.clone()),
                    _ => Err(bad()),
                },
                (TypeKind::Scalar, "Float") => if v.is_number() { Ok(v.clone()) } else { Err(bad()) },
                (TypeKind::Scalar, "String") => if v.is_string() { Ok(v.clone()) } else { Err(bad()) },
                (TypeKind::Scalar, "Boolean") => if v.is_boolean() { Ok(v.clone()) } else { Err(bad()) },
                (TypeKind::Scalar, "ID") => match v {
                    Json::String(_) => Ok(v.clone()),
                    Json::Number(num) if num.is_i64() || num.is_u64() => Ok(Json::String(num.to_string())),
                    _ => Err(bad()),
                },
                (TypeKind::Scalar, _) => Ok(v.clone()),
                (TypeKind::Enum, _) => match v.as_str() {
                    Some(s) if t.enum_values.iter().any(|e| e.name == s) => Ok(v.clone()),
                    _ => Err(bad()),
                },
                (TypeKind::InputObject, _) => {
                    let Json::Object(given) = v else { return Err(bad()) };
                    if let Some(k) = given.keys().find(|k| !t.input_fields.iter().any(|f| &f.name == *k)) {
                        return Err(format!("unknown field '{k}' for input type '{n}'"));
                    }
                    let mut out = Map::new();
                    for f in &t.input_fields {
                        match given.get(&f.name) {
                            Some(x) => {
                                let c = coerce_json(schema, x, &f.ty).map_err(|e| format!("field '{}': {e}", f.name))?;
                                out.insert(f.name.clone(), c);
                            }
                            None => default_or_missing(schema, f, &mut out)?,
                        }
                    }
                    Ok(Json::Object(out))
                }
                _ => Err(format!("type '{n}' is not an input type")),
            }
        }
    }
}

/// Applies an input value's default, or fails when it is required.
fn default_or_missing(schema: &Schema, f: &InputValueDef, out: &mut Map<String, Json>) -> Result<(), String> {
    if let Some(d) = &f.default {
        if let Some(c) = coerce_literal(schema, d, &f.ty, &Map::new())? {
            out.insert(f.name.clone(), c);
        }
        Ok(())
    } else if f.ty.is_non_null() {
        Err(format!("missing required field '{}' of type '{}'", f.name, f.ty))
    } else {
        Ok(())
    }
}

/// Coerces a literal to `ty`. `Ok(None)` means "not provided": a variable the request did not
/// supply (and that has no default), which the caller treats as an absent argument/field.
pub fn coerce_literal(schema: &Schema, v: &Value, ty: &TypeRef, vars: &Map<String, Json>) -> Result<Option<Json>, String> {
    if let Value::Variable(name, _) = v {
        return match vars.get(name) {
            Some(Json::Null) if ty.is_non_null() => Err(format!("variable '${name}' is null but '{ty}' is non-null")),
            // The value was coerced to the variable's declared type; coercing it again to
            // this position's type stops e.g. a `String` variable from feeding an `Int`
            // argument (graphql-java rejects that statically as VariableTypeMismatch).
            Some(x) => coerce_json(schema, x, ty).map(Some).map_err(|e| format!("variable '${name}': {e}")),
            None if ty.is_non_null() => Err(format!("variable '${name}' is not provided for non-null type '{ty}'")),
            None => Ok(None),
        };
    }
    match ty {
        TypeRef::NonNull(inner) => {
            if *v == Value::Null {
                return Err(format!("null value for non-null type '{ty}'"));
            }
            coerce_literal(schema, v, inner, vars)
        }
        _ if *v == Value::Null => Ok(Some(Json::Null)),
        TypeRef::List(inner) => match v {
            Value::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(coerce_literal(schema, i, inner, vars)?.unwrap_or(Json::Null));
                }
                Ok(Some(Json::Array(out)))
            }
            single => Ok(coerce_literal(schema, single, inner, vars)?.map(|x| Json::Array(vec![x]))),
        },
        TypeRef::Named(n) => {
            let Some(t) = schema.get(n) else { return Err(format!("unknown type '{n}'")) };
            let bad = || format!("expected type '{n}' but was '{}'", v.to_short_literal());
            let out = match (t.kind, n.as_str(), v) {
                (TypeKind::Scalar, "Int", Value::Int(s)) => Json::from(s.parse::<i32>().map_err(|_| bad())?),
                (TypeKind::Scalar, "Float", Value::Int(s) | Value::Float(s)) => {
                    let f = s.parse::<f64>().map_err(|_| bad())?;
                    serde_json::Number::from_f64(f).map(Json::Number).ok_or_else(bad)?
                }
                (TypeKind::Scalar, "String", Value::String(s)) => Json::String(s.clone()),
                (TypeKind::Scalar, "Boolean", Value::Boolean(b)) => Json::Bool(*b),
                (TypeKind::Scalar, "ID", Value::String(s) | Value::Int(s)) => Json::String(s.clone()),
                (TypeKind::Scalar, "Int" | "Float" | "String" | "Boolean" | "ID", _) => return Err(bad()),
                (TypeKind::Scalar, _, _) => literal_to_json(v, vars).ok_or_else(bad)?,
                (TypeKind::Enum, _, Value::Enum(e)) if t.enum_values.iter().any(|x| &x.name == e) => Json::String(e.clone()),
                (TypeKind::InputObject, _, Value::Object(given)) => {
                    let mut out = Map::new();
                    let mut seen = HashSet::new();
                    for (k, _) in given {
                        if !t.input_fields.iter().any(|f| &f.name == k) {
                            return Err(format!("unknown field '{k}' for input type '{n}'"));
                        }
                        if !seen.insert(k.as_str()) {
                            return Err(format!("field '{k}' is given more than once"));
                        }
                    }
                    for f in &t.input_fields {
                        let given = given.iter().find(|(k, _)| *k == f.name);
                        let c = match given {
                            Some((_, x)) => coerce_literal(schema, x, &f.ty, vars).map_err(|e| format!("field '{}': {e}", f.name))?,
                            None => None,
                        };
                        match c {
                            Some(c) => {
                                out.insert(f.name.clone(), c);
                            }
                            None => default_or_missing(schema, f, &mut out)?,
                        }
                    }
                    Json::Object(out)
                }
                _ => return Err(bad()),
            };
            Ok(Some(out))
        }
    }
}

/// A literal as plain JSON, for custom scalars. Enum-like names become strings.
fn literal_to_json(v: &Value, vars: &Map<String, Json>) -> Option<Json> {
    Some(match v {
        Value::Variable(n, _) => vars.get(n).cloned().unwrap_or(Json::Null),
        Value::Int(s) => match s.parse::<i64>() {
            Ok(i) => Json::from(i),
            Err(_) => serde_json::Number::from_f64(s.parse().ok()?).map(Json::Number)?,
        },
        Value::Float(s) => serde_json::Number::from_f64(s.parse().ok()?).map(Json::Number)?,
        Value::String(s) | Value::Enum(s) => Json::String(s.clone()),
        Value::Boolean(b) => Json::Bool(*b),
        Value::Null => Json::Null,
        Value::List(items) => Json::Array(items.iter().map(|i| literal_to_json(i, vars)).collect::<Option<_>>()?),
        Value::Object(f) => Json::Object(f.iter().map(|(k, x)| Some((k.clone(), literal_to_json(x, vars)?))).collect::<Option<_>>()?),
    })
}

/// The number of JSON values in `v`, for the argument-size budget.
pub fn json_size(v: &Json) -> usize {
    match v {
        Json::Array(a) => 1 + a.iter().map(json_size).sum::<usize>(),
        Json::Object(m) => 1 + m.values().map(json_size).sum::<usize>(),
        _ => 1,
    }
}

/// Coerces a field's or directive's arguments: defaults applied, absent optional ones left out.
pub fn coerce_args(
    schema: &Schema,
    defs: &[InputValueDef],
    given: &[(String, Value)],
    vars: &Map<String, Json>,
) -> Result<Map<String, Json>, ArgError> {
    let mut seen = HashSet::new();
    for (k, _) in given {
        if !defs.iter().any(|d| &d.name == k) {
            return Err(ArgError::Unknown(k.clone()));
        }
        if !seen.insert(k.as_str()) {
            return Err(ArgError::Duplicate(k.clone()));
        }
    }
    let mut out = Map::new();
    for d in defs {
        let provided = match given.iter().find(|(k, _)| *k == d.name) {
            // An unset variable leaves the argument to its default (spec: CoerceArgumentValues).
            Some((_, Value::Variable(n, _))) if !vars.contains_key(n) => None,
            Some((_, v)) => coerce_literal(schema, v, &d.ty, vars)
                .map_err(|reason| ArgError::Wrong { name: d.name.clone(), literal: v.to_short_literal(), reason })?,
            None => None,
        };
        match provided {
            Some(v) => {
                out.insert(d.name.clone(), v);
            }
            None => default_or_missing(schema, d, &mut out).map_err(|_| ArgError::Missing(d.name.clone(), d.ty.to_string()))?,
        }
    }
    Ok(out)
}
