//! `complete`: apply each root field's selections to the caller's resolved JSON, per the
//! schema types (spec §"Value Completion"), writing the response body as it goes (object keys
//! in selection order, as the spec recommends).
//!
//! Each nullable position absorbs failures below it: a field error or a non-null violation
//! makes the nearest nullable ancestor `null` (`Err(Propagate)` carries the failure upward;
//! the error itself is recorded once, where it happened; the nullable position cuts what its
//! value had written and writes `null`). A failing non-null root makes
//! `data` null. The output size is bounded by `MAX_RESPONSE_NODES` so that nested
//! introspection (`types { fields { type { fields ...` ) cannot blow up.

use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value as Json;

use crate::ast::TypeRef;
use crate::error::{GraphQLError, PathSegment};
use crate::introspection::{TYPE_REF_KEY, schema_json, type_json};
use crate::prepare::{Prepared, RootEntry, RootField, Selected};
use crate::schema::Schema;
use crate::sdl::{FieldDef, TypeDef, TypeKind};

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

/// The response keys an object selection completes, each with its merged field nodes and the
/// field's definition on the runtime type (none: `__typename`, or a field the type lacks).
type Plan<'a, 'p> = Rc<Vec<PlannedField<'a, 'p>>>;

struct PlannedField<'a, 'p> {
    key: &'p str,
    group: Vec<&'p RootField>,
    def: Option<&'a FieldDef>,
}

/// A plan's cache key: the first field node and the node count (the field set), and the
/// runtime type's definition, by address.
type PlanKey = (usize, usize, usize);

struct Completer<'a, 'p> {
    schema: &'a Schema,
    errors: Vec<GraphQLError>,
    nodes: usize,
    path: Vec<Step<'p>>,
    /// Collected fields per field set and runtime type: every item of a list of objects
    /// selects the same fields, so they are grouped (and their definitions found) once.
    plans: foldhash::HashMap<PlanKey, Plan<'a, 'p>>,
    /// Expanded `__Type` markers, built once per type name (introspection queries revisit
    /// the same types many times).
    types: HashMap<String, Rc<Json>>,
    /// The response written so far.
    out: Vec<u8>,
}

/// A completed response: the body as JSON text, and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed {
    /// `{"data": ..., "errors": [...]}` (`errors` only when there are some); object keys in the
    /// document's selection order.
    pub body: Vec<u8>,
    /// Whether the body lists errors.
    pub has_errors: bool,
    /// Whether `data` is null (a non-null root field failed).
    pub data_null: bool,
}

/// Builds the response body `{"data": ..., "errors": [...]}` (`errors` only when there are some)
/// as a JSON value; see [`complete_body`], which writes the same response as text.
pub fn complete(schema: &Schema, prepared: &Prepared, resolved: Vec<Result<Json, String>>) -> Json {
    let completed = complete_body(schema, prepared, resolved);
    // The body is JSON this module wrote; a failure to read it back would be a bug, shown as one.
    serde_json::from_slice(&completed.body).unwrap_or_else(|e| Json::String(format!("internal error: response not JSON: {e}")))
}

/// Writes the response body for `prepared`: `resolved[i]` is the value of `prepared.fields[i]`
/// (or its resolver's error message). The answer is written as it is completed, so a response of
/// tens of thousands of values is never built twice.
pub fn complete_body(schema: &Schema, prepared: &Prepared, resolved: Vec<Result<Json, String>>) -> Completed {
    let mut c = Completer {
        schema,
        errors: Vec::new(),
        nodes: 0,
        path: Vec::new(),
        plans: foldhash::HashMap::default(),
        types: HashMap::new(),
        out: Vec::with_capacity(4096),
    };
    let mut resolved: Vec<Option<Result<Json, String>>> = resolved.into_iter().map(Some).collect();
    c.out.extend_from_slice(b"{\"data\":{");
    let mut failed = false;
    let mut first_key = true;
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
        c.key(&field.response_key, &mut first_key);
        let fields = [field];
        let out = match value {
            Ok(v) => c.complete_value(&def.ty, &fields, &prepared.root_type, &v),
            Err(msg) => c.field_error(msg, field, &def.ty),
        };
        c.path.pop();
        // `data` is null now; like graphql-js, the remaining root fields are not completed
        // (their errors would describe values nobody receives).
        if out.is_err() {
            failed = true;
            break;
        }
    }
    let mut body = c.out;
    if failed {
        body.clear();
        body.extend_from_slice(b"{\"data\":null");
    } else {
        body.push(b'}');
    }
    if !c.errors.is_empty() {
        body.extend_from_slice(b",\"errors\":");
        let errors = Json::Array(c.errors.iter().map(GraphQLError::to_json).collect());
        write_json(&mut body, &errors);
    }
    body.push(b'}');
    Completed { body, has_errors: !c.errors.is_empty(), data_null: failed }
}

/// Appends `value` as JSON text (serde_json's writer into a `Vec` cannot fail).
fn write_json(out: &mut Vec<u8>, value: &Json) {
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        out.extend_from_slice(format!("\"internal error: {e}\"").as_bytes());
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    if let Err(e) = serde_json::to_writer(&mut *out, s) {
        out.extend_from_slice(format!("\"internal error: {e}\"").as_bytes());
    }
}

fn meta_value(schema: &Schema, prepared: &Prepared, f: &RootField) -> Json {
    match f.name.as_str() {
        "__typename" => Json::String(prepared.root_type.clone()),
        "__schema" => schema_json(schema),
        "__type" => f.args.get("name").and_then(Json::as_str).and_then(|n| type_json(schema, n)).unwrap_or(Json::Null),
        _ => Json::Null,
    }
}

/// What a completion wrote: `null`, or a value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wrote {
    Null,
    Value,
}

impl<'a, 'p> Completer<'a, 'p> {
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

    /// Writes an object key (with the comma before every key but the first).
    fn key(&mut self, key: &str, first: &mut bool) {
        if !std::mem::take(first) {
            self.out.push(b',');
        }
        write_str(&mut self.out, key);
        self.out.push(b':');
    }

    /// Records an error at the current path; the field becomes null (or propagates when non-null).
    fn field_error(&mut self, message: String, field: &'p RootField, ty: &TypeRef) -> Result<Wrote, Propagate> {
        self.record(GraphQLError { message, locations: vec![field.location], path: self.path() });
        if ty.is_non_null() {
            return Err(Propagate);
        }
        self.out.extend_from_slice(b"null");
        Ok(Wrote::Null)
    }

    /// Completes `value` as `ty`; `fields` are the (merged) field nodes selecting it. A nullable
    /// position whose completion failed below is rewritten as `null`.
    fn complete_value(&mut self, ty: &TypeRef, fields: &[&'p RootField], parent: &str, value: &Json) -> Result<Wrote, Propagate> {
        let Some(first) = fields.first().copied() else {
            self.out.extend_from_slice(b"null");
            return Ok(Wrote::Null);
        };
        match ty {
            TypeRef::NonNull(inner) => {
                if self.complete_inner(inner, fields, parent, value)? == Wrote::Null {
                    let msg = format!("Cannot return null for non-nullable field {parent}.{}.", first.name);
                    self.record(GraphQLError { message: msg, locations: vec![first.location], path: self.path() });
                    return Err(Propagate);
                }
                Ok(Wrote::Value)
            }
            _ => {
                let mark = self.out.len();
                match self.complete_inner(ty, fields, parent, value) {
                    Ok(wrote) => Ok(wrote),
                    Err(Propagate) => {
                        self.out.truncate(mark);
                        self.out.extend_from_slice(b"null");
                        Ok(Wrote::Null)
                    }
                }
            }
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
    fn complete_inner(&mut self, ty: &TypeRef, fields: &[&'p RootField], parent: &str, value: &Json) -> Result<Wrote, Propagate> {
        let Some(first) = fields.first().copied() else {
            self.out.extend_from_slice(b"null");
            return Ok(Wrote::Null);
        };
        self.nodes += 1;
        if self.nodes > MAX_RESPONSE_NODES {
            if self.nodes == MAX_RESPONSE_NODES + 1 {
                return Err(self.error(format!("response has more than {MAX_RESPONSE_NODES} values"), first));
            }
            return Err(Propagate);
        }
        if value.is_null() {
            self.out.extend_from_slice(b"null");
            return Ok(Wrote::Null);
        }
        match ty {
            TypeRef::NonNull(_) => self.complete_value(ty, fields, parent, value),
            TypeRef::List(inner) => {
                let Json::Array(items) = value else {
                    return Err(self.error(format!("Expected a list for field {parent}.{}, got {}", first.name, short(value)), first));
                };
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.path.push(Step::Index(i));
                    let r = self.complete_value(inner, fields, parent, item);
                    self.path.pop();
                    r?;
                }
                self.out.push(b']');
                Ok(Wrote::Value)
            }
            TypeRef::Named(name) => {
                let Some(t) = self.schema.get(name) else {
                    self.out.extend_from_slice(b"null");
                    return Ok(Wrote::Null);
                };
                match t.kind {
                    TypeKind::Scalar => match serialize_scalar(&mut self.out, name, value) {
                        Ok(()) => Ok(Wrote::Value),
                        Err(m) => Err(self.error(m, first)),
                    },
                    TypeKind::Enum => match value.as_str() {
                        Some(s) if t.enum_values.iter().any(|e| e.name == s) => {
                            write_str(&mut self.out, s);
                            Ok(Wrote::Value)
                        }
                        _ => Err(self.error(format!("Invalid value {} for enum '{name}'", short(value)), first)),
                    },
                    TypeKind::Object | TypeKind::Interface | TypeKind::Union => self.complete_object(name, fields, value),
                    TypeKind::InputObject => {
                        self.out.extend_from_slice(b"null");
                        Ok(Wrote::Null)
                    }
                }
            }
        }
    }

    fn complete_object(&mut self, type_name: &str, fields: &[&'p RootField], value: &Json) -> Result<Wrote, Propagate> {
        let Some(first) = fields.first().copied() else {
            self.out.extend_from_slice(b"null");
            return Ok(Wrote::Null);
        };
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
        let schema = self.schema;
        let runtime: &TypeDef = match schema.get(type_name) {
            Some(t) if t.kind == TypeKind::Object => t,
            _ => {
                let possible = schema.possible_types(type_name);
                let name = match obj.get("__typename").and_then(Json::as_str) {
                    Some(t) if possible.contains(&t) => Some(t),
                    None if possible.len() == 1 => possible.first().copied(),
                    _ => None,
                };
                match name.and_then(|n| schema.get(n)) {
                    Some(t) => t,
                    None => return Err(self.error(format!("Could not determine the concrete type of abstract type '{type_name}'"), first)),
                }
            }
        };
        let plan = self.plan(runtime, fields);
        self.out.push(b'{');
        let mut first_key = true;
        for planned in plan.iter() {
            let Some(f) = planned.group.first().copied() else { continue };
            self.key(planned.key, &mut first_key);
            self.path.push(Step::Key(planned.key));
            let r = if f.name == "__typename" {
                write_str(&mut self.out, &runtime.name);
                Ok(Wrote::Value)
            } else if let Some(def) = planned.def {
                let child = obj.get(&f.name).unwrap_or(&Json::Null);
                let child = filter_deprecated(&runtime.name, f, child);
                self.complete_value(&def.ty, &planned.group, &runtime.name, &child)
            } else {
                self.out.extend_from_slice(b"null");
                Ok(Wrote::Null)
            };
            self.path.pop();
            r?;
        }
        self.out.push(b'}');
        Ok(Wrote::Value)
    }

    /// The fields `fields` select on an object of type `runtime` (spec CollectFields: grouped by
    /// response key, in first-seen order), collected once per field set and type.
    fn plan(&mut self, runtime: &'a TypeDef, fields: &[&'p RootField]) -> Plan<'a, 'p> {
        let first = fields.first().map_or(0, |f| *f as *const RootField as usize);
        let key = (first, fields.len(), runtime as *const TypeDef as usize);
        if let Some(plan) = self.plans.get(&key) {
            return Rc::clone(plan);
        }
        let mut groups: Vec<(&'p str, Vec<&'p RootField>)> = Vec::new();
        let mut index = HashMap::new();
        for f in fields {
            self.collect(&runtime.name, &f.selection, &mut groups, &mut index);
        }
        let schema = self.schema;
        let plan = Rc::new(
            groups
                .into_iter()
                .map(|(key, group)| {
                    let def = group.first().filter(|f| f.name != "__typename").and_then(|f| schema.field(&runtime.name, &f.name));
                    PlannedField { key, group, def }
                })
                .collect::<Vec<_>>(),
        );
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

fn serialize_scalar(out: &mut Vec<u8>, name: &str, v: &Json) -> Result<(), String> {
    match name {
        "Int" => {
            let i = v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e10).map(|f| f as i64));
            match i.and_then(|i| i32::try_from(i).ok()) {
                Some(i) => out.extend_from_slice(i.to_string().as_bytes()),
                None => return Err(format!("Int cannot represent non 32-bit signed integer value: {}", short(v))),
            }
        }
        "Float" => match v {
            Json::Number(_) => write_json(out, v),
            _ => return Err(format!("Float cannot represent non numeric value: {}", short(v))),
        },
        "String" => match v {
            Json::String(s) => write_str(out, s),
            Json::Number(n) => write_str(out, &n.to_string()),
            Json::Bool(b) => write_str(out, if *b { "true" } else { "false" }),
            _ => return Err(format!("String cannot represent value: {}", short(v))),
        },
        "ID" => match v {
            Json::String(s) => write_str(out, s),
            Json::Number(n) if n.is_i64() || n.is_u64() => write_str(out, &n.to_string()),
            _ => return Err(format!("ID cannot represent value: {}", short(v))),
        },
        "Boolean" => match v {
            Json::Bool(_) => write_json(out, v),
            _ => return Err(format!("Boolean cannot represent a non boolean value: {}", short(v))),
        },
        // Custom scalars (e.g. `Long`) carry whatever JSON the resolver gave.
        _ => write_json(out, v),
    }
    Ok(())
}
