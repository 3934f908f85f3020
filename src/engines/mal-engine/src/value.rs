//! Runtime values of the Groovy subset that MAL closures are written in.
//!
//! Maps are shared and mutable (`Rc<RefCell<..>>`) because Groovy closures mutate the tag map they
//! are given (`tags.x = ...`) and the caller reads it back. Values never leave one closure call
//! except as labels, booleans or strings, so `Rc` does not escape the evaluation.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::output::Entity;

pub(crate) type MapRef = Rc<RefCell<BTreeMap<String, V>>>;

/// How deep printing and comparing go into nested lists and maps.
const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone)]
pub(crate) enum V {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<V>),
    Map(MapRef),
    /// `me` in `decorate({ me -> ... })`.
    Entity(Rc<RefCell<Entity>>),
    /// The result of `=~`: every match, each as its groups (group 0 first).
    Matcher(Vec<Vec<Option<String>>>),
    /// A class name used for a static call or constant (`ProcessRegistry`, `Layer`).
    Class(String),
}

impl V {
    pub(crate) fn map(entries: BTreeMap<String, V>) -> V {
        V::Map(Rc::new(RefCell::new(entries)))
    }

    /// Groovy truth.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            V::Null => false,
            V::Bool(b) => *b,
            V::Int(i) => *i != 0,
            V::Float(f) => *f != 0.0,
            V::Str(s) => !s.is_empty(),
            V::List(items) => !items.is_empty(),
            V::Map(map) => !map.borrow().is_empty(),
            V::Matcher(matches) => !matches.is_empty(),
            V::Entity(_) | V::Class(_) => true,
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            V::Null => "null",
            V::Bool(_) => "Boolean",
            V::Int(_) => "Integer",
            V::Float(_) => "Double",
            V::Str(_) => "String",
            V::List(_) => "List",
            V::Map(_) => "Map",
            V::Entity(_) => "MeterEntity",
            V::Matcher(_) => "Matcher",
            V::Class(_) => "Class",
        }
    }

    /// Groovy's `toString()` (`String.valueOf` for null). Nesting deeper than a few levels (a map
    /// that contains itself) prints `...` instead of recursing.
    pub(crate) fn to_text(&self) -> String {
        self.text_at(0)
    }

    fn text_at(&self, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return "...".to_owned();
        }
        match self {
            V::Null => "null".to_owned(),
            V::Bool(b) => b.to_string(),
            V::Int(i) => i.to_string(),
            V::Float(f) => java_double(*f),
            V::Str(s) => s.clone(),
            V::List(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(|item| item.text_at(depth + 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            V::Map(map) => match map.try_borrow() {
                Ok(map) => format!(
                    "[{}]",
                    map.iter()
                        .map(|(k, v)| format!("{k}:{}", v.text_at(depth + 1)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => "[...]".to_owned(),
            },
            V::Entity(_) => "MeterEntity".to_owned(),
            V::Matcher(_) => "Matcher".to_owned(),
            V::Class(name) => name.clone(),
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            V::Int(i) => Some(*i as f64),
            V::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Groovy `==`: null-safe; numbers compare by value; lists and maps element-wise (a map is
    /// equal to itself without looking inside, so self-containing maps do not recurse).
    pub(crate) fn equals(&self, other: &V) -> bool {
        self.equals_at(other, 0)
    }

    fn equals_at(&self, other: &V, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match (self, other) {
            (V::Null, V::Null) => true,
            (V::Null, _) | (_, V::Null) => false,
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Str(a), V::Str(b)) => a == b,
            (V::List(a), V::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.equals_at(y, depth + 1))
            }
            (V::Map(a), V::Map(b)) if Rc::ptr_eq(a, b) => true,
            (V::Map(a), V::Map(b)) => match (a.try_borrow(), b.try_borrow()) {
                (Ok(a), Ok(b)) => {
                    a.len() == b.len()
                        && a.iter()
                            .zip(b.iter())
                            .all(|((ka, va), (kb, vb))| ka == kb && va.equals_at(vb, depth + 1))
                }
                _ => false,
            },
            _ => match (self.as_f64(), other.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            },
        }
    }
}

/// Java's `Double.toString` for the common cases: integral values keep a `.0`.
pub(crate) fn java_double(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}
