//! `complete`: apply each root field's selections to the caller's resolved JSON, per the
//! schema types (spec §"Value Completion"), and build the response body.
//!
//! Each nullable position absorbs failures below it: a field error or a non-null violation
//! makes the nearest nullable ancestor `null` (`Err(Propagate)` carries the failure upward;
//! the error itself is recorded once, where it happened). A failing non-null root makes
//! `data` null. The output size is bounded by `MAX_RESPONSE_NODES` so that nested
//! introspection (`types { fields { type { fields ...` ) cannot blow up.

use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Map, Value as Json};

use crate::ast::TypeRef;
use crate::error::{GraphQLError, PathSegment};
use crate::introspection::{TYPE_REF_KEY, schema_json, type_json};
use crate::prepare::{Prepared, RootEntry, RootField, Selected};
use crate::schema::Schema;
use crate::sdl::TypeKind;

/// Most JSON values one response may hold before completion stops with an error.
pub const MAX_RESPONSE_NODES: usize = 500_000;

/// Most errors one response lists.
pub const MAX_RESPONSE_ERRORS: usize = 1_000;

/// A null that must propagate to the nearest nullable parent; its error is already recorded.
struct Propagate;

/// One step of the path being completed, borrowed from the prepared document (a response of
/// tens of thousands of values would otherwise allocate a key per value).
#[derive(Clone, Copy)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// The response keys an object selection completes, each with its merged field nodes.
type Plan<'p> = Rc<Vec<(&'p str, Vec<&'p RootField>)>>;

struct Completer<'a, 'p> {
    schema: &'a Schema,
    errors: Vec<GraphQLError>,
    nodes: usize,
    path: Vec<Step<'p>>,
    /// Collected fields per (first field node, node count, runtime type): every item of a list
    /// of objects selects the same fields, so they are grouped once.
    plans: HashMap<(usize, usize, String), Plan<'p>>,
    /// Expanded `__Type` markers, built once per type name (introspection queries revisit
    /// the same types many times).
    types: HashMap<String, Rc<Json>>,
}

/// Builds the response body `{"data": ..., "errors": [...]}` (`errors` only when there are some).
/// `resolved[i]` is the value of `prepared.fields[i]` (or its resolver's error message).
pub fn complete(schema: &Schema, prepared: &Prepared, resolved: Vec<Result<Json, String>>) -> Json {
    let mut c = Completer { schema, errors: Vec::new(), nodes: 0, path: Vec::new(), plans: HashMap::new(), types: HashMap::new() };
    let mut resolved: Vec<Option<Result<Json, String>>> = resolved.into_iter().map(Some).collect();
    let mut data = Map::new();
    let mut failed = false;
    for entry in &prepared.root {
        let (field, value) = match entry {
            RootEntry::User(i) => {
                let Some(f) = prepared.fields.get(*i) else { continue };
                let v = resolved.get_mut(*i).and_then(Option::take);
                (f, v.unwrap_or_else(|| Err(format!("no value was resolved for field '{}'", f.name))))
            }
            RootEntry::Meta(f) => (f, Ok(meta_value(schema, prepared, f))),
        };
        let Some(def) = schema.field(&prepared.root_type, &field.name) else { continue };
        c.path.push(Step::Key(&field.response_key));
        let fields = [field];
        let out = match value {
            Ok(v) => c.complete_value(&def.ty, &fields, &prepared.root_type, &v),
            Err(msg) => c.field_error(msg, field, &def.ty),
        };
        c.path.pop();
        match out {
            Ok(v) => {
                data.insert(field.response_key.clone(), v);
            }
            // `data` is null now; like graphql-js, the remaining root fields are not completed
            // (their errors would describe values nobody receives).
            Err(Propagate) => {
                failed = true;
                break;
            }
        }
    }
    let mut body = Map::new();
    body.insert("data".into(), if failed { Json::Null } else { Json::Object(data) });
    if !c.errors.is_empty() {
        body.insert("errors".into(), Json::Array(c.errors.iter().map(GraphQLError::to_json).collect()));
    }
    Json::Object(body)
}

fn meta_value(schema: &Schema, prepared: &Prepared, f: &RootField) -> Json {
    match f.name.as_str() {
        "__typename" => Json::String(prepared.root_type.clone()),
        "__schema" => schema_json(schema),
        "__type" => f.args.get("name").and_then(Json::as_str).and_then(|n| type_json(schema, n)).unwrap_or(Json::Null),
        _ => Json::Null,
    }
}

impl<'p> Completer<'_, 'p> {
    /// The current path, as an error carries it.
    fn path(&self) -> Vec<PathSegment> {
        self.path
            .iter()
            .map(|step| match step {
                Step::Key(key) => PathSegment::Key(key.to_string()),
                Step::Index(i) => PathSegment::Index(*i),
            })
            .collect()
    }

    /// Records an error at the current path; the field becomes null (or propagates when non-null).
    fn field_error(&mut self, message: String, field: &'p RootField, ty: &TypeRef) -> Result<Json, Propagate> {
        self.record(GraphQLError { message, locations: vec![field.location], path: self.path() });
        if ty.is_non_null() { Err(Propagate) } else { Ok(Json::Null) }
    }

    /// Completes `value` as `ty`; `fields` are the (merged) field nodes selecting it.
    fn complete_value(&mut self, ty: &TypeRef, fields: &[&'p RootField], parent: &str, value: &Json) -> Result<Json, Propagate> {
        let Some(first) = fields.first().copied() else { return Ok(Json::Null) };
        match ty {
            TypeRef::NonNull(inner) => {
                let v = self.complete_inner(inner, fields, parent, value)?;
                if v.is_null() {
                    let msg = format!("Cannot return null for non-nullable field {parent}.{}.", first.name);
                    self.record(GraphQLError { message: msg, locations: vec![first.location], path: self.path() });
                    return Err(Propagate);
                }
                Ok(v)
            }
            _ => Ok(self.complete_inner(ty, fields, parent, value).unwrap_or(Json::Null)),
        }
    }

    fn error(&mut self, message: String, field: &'p RootField) -> Propagate {
        self.record(GraphQLError { message, locations: vec![field.location], path: self.path() });
        Propagate
    }

    /// Keeps at most `MAX_RESPONSE_ERRORS`; a huge list of bad items still gets nulls.
    fn record(&mut self, e: GraphQLError) {
        if self.errors.len() < MAX_RESPONSE_ERRORS {
            self.errors.push(e);
        }
    }

    /// Completes a list or named type (nullability is handled by the caller).
    fn complete_inner(&mut self, ty: &TypeRef, fields: &[&'p RootField], parent: &str, value: &Json) -> Result<Json, Propagate> {
        let Some(first) = fields.first().copied() else { return Ok(Json::Null) };
        self.nodes += 1;
        if self.nodes > MAX_RESPONSE_NODES {
            if self.nodes == MAX_RESPONSE_NODES + 1 {
                return Err(self.error(format!("response has more than {MAX_RESPONSE_NODES} values"), first));
            }
            return Err(Propagate);
        }
        if value.is_null() {
            return Ok(Json::Null);
        }
        match ty {
            TypeRef::NonNull(_) => self.complete_value(ty, fields, parent, value),
            TypeRef::List(inner) => {
                let Json::Array(items) = value else {
                    return Err(self.error(format!("Expected a list for field {parent}.{}, got {}", first.name, short(value)), first));
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    self.path.push(Step::Index(i));
                    let r = self.complete_value(inner, fields, parent, item);
                    self.path.pop();
                    out.push(r?);
                }
                Ok(Json::Array(out))
            }
            TypeRef::Named(name) => {
                let Some(t) = self.schema.get(name) else { return Ok(Json::Null) };
                match t.kind {
                    TypeKind::Scalar => serialize_scalar(name, value).map_err(|m| self.error(m, first)),
                    TypeKind::Enum => match value.as_str() {
                        Some(s) if t.enum_values.iter().any(|e| e.name == s) => Ok(value.clone()),
                        _ => Err(self.error(format!("Invalid value {} for enum '{name}'", short(value)), first)),
                    },
                    TypeKind::Object | TypeKind::Interface | TypeKind::Union => self.complete_object(name, fields, value),
                    TypeKind::InputObject => Ok(Json::Null),
                }
            }
        }
    }

    fn complete_object(&mut self, type_name: &str, fields: &[&'p RootField], value: &Json) -> Result<Json, Propagate> {
        let Some(first) = fields.first().copied() else { return Ok(Json::Null) };
        // A `__Type` marker stands for a named type; expand it only now that it is selected.
        let expanded = match value.get(TYPE_REF_KEY).and_then(Json::as_str) {
            Some(n) if type_name == "__Type" => Some(match self.types.get(n) {
                Some(t) => Rc::clone(t),
                None => {
                    let t = Rc::new(type_json(self.schema, n).unwrap_or(Json::Null));
                    self.types.insert(n.to_string(), Rc::clone(&t));
                    t
                }
            }),
            _ => None,
        };
        let value = expanded.as_deref().unwrap_or(value);
        let Json::Object(obj) = value else {
            return Err(self.error(format!("Expected an object of type '{type_name}', got {}", short(value)), first));
        };
        let runtime = match self.schema.kind_of(type_name) {
            Some(TypeKind::Object) => type_name.to_string(),
            _ => {
                let possible = self.schema.possible_types(type_name);
                match obj.get("__typename").and_then(Json::as_str) {
                    Some(t) if possible.contains(&t) => t.to_string(),
                    None if possible.len() == 1 => possible.first().map_or_else(String::new, |s| s.to_string()),
                    _ => return Err(self.error(format!("Could not determine the concrete type of abstract type '{type_name}'"), first)),
                }
            }
        };
        let plan = self.plan(&runtime, fields);
        let mut out = Map::new();
        for (key, group) in plan.iter() {
            let Some(f) = group.first().copied() else { continue };
            self.path.push(Step::Key(key));
            let r = if f.name == "__typename" {
                Ok(Json::String(runtime.clone()))
            } else if let Some(def) = self.schema.field(&runtime, &f.name) {
                let child = obj.get(&f.name).unwrap_or(&Json::Null);
                let child = filter_deprecated(&runtime, f, child);
                self.complete_value(&def.ty, group, &runtime, &child)
            } else {
                Ok(Json::Null)
            };
            self.path.pop();
            out.insert(key.to_string(), r?);
        }
        Ok(Json::Object(out))
    }

    /// The fields `fields` select on an object of type `runtime` (spec CollectFields: grouped by
    /// response key, in first-seen order), collected once per field set and type.
    fn plan(&mut self, runtime: &str, fields: &[&'p RootField]) -> Plan<'p> {
        let first = fields.first().map_or(0, |f| *f as *const RootField as usize);
        let key = (first, fields.len(), runtime.to_string());
        if let Some(plan) = self.plans.get(&key) {
            return Rc::clone(plan);
        }
        let mut groups: Vec<(&'p str, Vec<&'p RootField>)> = Vec::new();
        let mut index = HashMap::new();
        for f in fields {
            self.collect(runtime, &f.selection, &mut groups, &mut index);
        }
        let plan = Rc::new(groups);
        self.plans.insert(key, Rc::clone(&plan));
        plan
    }

    /// `index` maps a response key to its slot in `groups` (a linear search would make wide
    /// selections quadratic per object).
    fn collect(
        &self,
        runtime: &str,
        sels: &'p [Selected],
        groups: &mut Vec<(&'p str, Vec<&'p RootField>)>,
        index: &mut HashMap<&'p str, usize>,
    ) {
        for s in sels {
            match s {
                Selected::Field(f) => match index.get(f.response_key.as_str()).and_then(|&i| groups.get_mut(i)) {
                    Some((_, g)) => g.push(f),
                    None => {
                        index.insert(&f.response_key, groups.len());
                        groups.push((&f.response_key, vec![f]));
                    }
                },
                Selected::Cond { type_cond, selection } => {
                    if self.schema.applies(type_cond, runtime) {
                        self.collect(runtime, selection, groups, index);
                    }
                }
            }
        }
    }
}

/// Introspection lists hide deprecated items unless `includeDeprecated: true`.
fn filter_deprecated<'v>(runtime: &str, f: &RootField, child: &'v Json) -> Cow<'v, Json> {
    let wants_all = f.args.get("includeDeprecated").and_then(Json::as_bool).unwrap_or(true);
    match child {
        Json::Array(items) if runtime.starts_with("__") && !wants_all && items.iter().any(is_deprecated) => Cow::Owned(Json::Array(
            items.iter().filter(|i| !is_deprecated(i)).cloned().collect(),
        )),
        _ => Cow::Borrowed(child),
    }
}

fn is_deprecated(item: &Json) -> bool {
    item.get("isDeprecated") == Some(&Json::Bool(true))
}

/// A short rendering of a value for error messages.
fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 60 { format!("{}...", s.chars().take(60).collect::<String>()) } else { s }
}

fn serialize_scalar(name: &str, v: &Json) -> Result<Json, String> {
    match name {
        "Int" => {
            let i = v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e10).map(|f| f as i64));
            match i.and_then(|i| i32::try_from(i).ok()) {
                Some(i) => Ok(Json::from(i)),
                None => Err(format!("Int cannot represent non 32-bit signed integer value: {}", short(v))),
            }
        }
        "Float" => match v {
            Json::Number(_) => Ok(v.clone()),
            _ => Err(format!("Float cannot represent non numeric value: {}", short(v))),
        },
        "String" => match v {
            Json::String(_) => Ok(v.clone()),
            Json::Number(n) => Ok(Json::String(n.to_string())),
            Json::Bool(b) => Ok(Json::String(b.to_string())),
            _ => Err(format!("String cannot represent value: {}", short(v))),
        },
        "ID" => match v {
            Json::String(_) => Ok(v.clone()),
            Json::Number(n) if n.is_i64() || n.is_u64() => Ok(Json::String(n.to_string())),
            _ => Err(format!("ID cannot represent value: {}", short(v))),
        },
        "Boolean" => match v {
            Json::Bool(_) => Ok(v.clone()),
            _ => Err(format!("Boolean cannot represent a non boolean value: {}", short(v))),
        },
        // Custom scalars (e.g. `Long`) carry whatever JSON the resolver gave.
        _ => Ok(v.clone()),
    }
}
