//! The built-in behaviour of closure values: methods of strings, maps and lists, property and
//! index access, assignment into maps and `me`, Groovy arithmetic and casts, and
//! `ProcessRegistry`'s static helpers.

use hotrule_rule_compiler::ast::BinaryOp;

use crate::error::EvalError;
use crate::regex_cache::{Mode, RegexCache, java_replacement};
use crate::value::V;

/// A method call on a closure value: string, map and list methods, and `ProcessRegistry`.
pub(crate) fn method(
    regexes: &mut RegexCache,
    target: &V,
    method: &str,
    args: &[V],
    at: usize,
) -> Result<V, EvalError> {
    let arg_text = |i: usize| args.get(i).map(V::to_text).unwrap_or_default();
    let arg_int = |i: usize| -> Option<i64> { args.get(i).and_then(V::as_f64).map(|f| f as i64) };
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
            // `name()` is `Enum.name()`: enum values such as `me.layer` are their names here.
            "toString" | "name" => V::Str(s.clone()),
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
                let regex = regexes.get(&arg_text(0), Mode::Find, at)?;
                let replacement = java_replacement(&arg_text(1));
                V::Str(if method == "replaceAll" {
                    regex.replace_all(s, replacement.as_str()).into_owned()
                } else {
                    regex.replace(s, replacement.as_str()).into_owned()
                })
            }
            "matches" => V::Bool(regexes.get(&arg_text(0), Mode::Whole, at)?.is_match(s)),
            "split" => {
                let regex = regexes.get(&arg_text(0), Mode::Find, at)?;
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
                        format!(
                            "substring({begin}, {end}) of a {}-character string",
                            chars.len()
                        ),
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
            "put" => {
                // Arguments first: one of them may be this very map.
                let (key, value) = (arg_text(0), args.get(1).cloned().unwrap_or(V::Null));
                map.try_borrow_mut()
                    .map_err(|_| mismatch("a map modified while it is read".to_owned(), at))?
                    .insert(key, value)
                    .unwrap_or(V::Null)
            }
            "remove" => {
                let key = arg_text(0);
                map.try_borrow_mut()
                    .map_err(|_| mismatch("a map modified while it is read".to_owned(), at))?
                    .remove(&key)
                    .unwrap_or(V::Null)
            }
            "containsKey" => V::Bool(map.borrow().contains_key(&arg_text(0))),
            "size" => V::Int(map.borrow().len() as i64),
            "isEmpty" => V::Bool(map.borrow().is_empty()),
            _ => return Err(no_method()),
        }),
        V::List(items) => Ok(match method {
            "contains" => V::Bool(
                args.first()
                    .is_some_and(|a| items.iter().any(|i| i.equals(a))),
            ),
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
            "generateVirtualLocalProcess" => Ok(V::Str(virtual_process(
                &arg_text(0),
                &arg_text(1),
                "UNKNOWN_LOCAL",
            ))),
            "generateVirtualRemoteProcess" => Ok(V::Str(virtual_process(
                &arg_text(0),
                &arg_text(1),
                "UNKNOWN_REMOTE",
            ))),
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

/// The id SkyWalking's `ProcessRegistry` builds for a virtual process. Upstream hashes the
/// instance id and the name with SHA-256 (and, for a remote process, looks the address up in its
/// Kubernetes cache); the engine keeps the ingredients readable instead, which is enough to
/// group samples but does not equal an OAP-issued id (see docs/mal.md).
pub(crate) fn virtual_process(service: &str, instance: &str, name: &str) -> String {
    format!("{service}_{instance}_{name}")
}

pub(crate) fn char_index(s: &str, byte_index: Option<usize>) -> i64 {
    match byte_index {
        Some(i) => s[..i].chars().count() as i64,
        None => -1,
    }
}

pub(crate) fn mismatch(detail: String, line: usize) -> EvalError {
    EvalError::TypeMismatch { detail, line }
}

pub(crate) fn property(target: &V, name: &str, safe: bool, at: usize) -> Result<V, EvalError> {
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

pub(crate) fn attr_index(name: &str) -> Option<usize> {
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

pub(crate) fn put(holder: &V, key: String, value: V, at: usize) -> Result<(), EvalError> {
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

pub(crate) fn index_of(target: &V, index: &V, at: usize) -> Result<V, EvalError> {
    match target {
        V::Map(map) => Ok(map
            .borrow()
            .get(&index.to_text())
            .cloned()
            .unwrap_or(V::Null)),
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
                Some(groups) if groups.len() == 1 => Ok(groups[0].clone().map_or(V::Null, V::Str)),
                Some(groups) => Ok(V::List(
                    groups
                        .iter()
                        .map(|g| g.clone().map_or(V::Null, V::Str))
                        .collect(),
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

pub(crate) fn arithmetic(op: BinaryOp, l: &V, r: &V, at: usize) -> Result<V, EvalError> {
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

pub(crate) fn cast(value: V, ty: &str, at: usize) -> Result<V, EvalError> {
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
