//! `prepare`: parse a request's document, pick the operation, coerce variables, validate every
//! selection against the schema and flatten fragments into a tree `complete` can walk.
//!
//! Fragments are expanded here (not at completion) so that the field-count limit bounds both
//! work and fragment blow-up, and so `@skip`/`@include` are decided once (variables are known).
//! A fragment whose type condition always holds for the parent type is inlined; one that holds
//! only for some runtime types of an abstract parent stays a `Selected::Cond` node.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value as Json};

use crate::ast::{self, Document, OpKind, Value};
use crate::coerce::{ArgError, coerce_args, coerce_json, coerce_literal, json_size};
use crate::error::GraphQLError;
use crate::parser::parse_document;
use crate::schema::{Schema, is_input};
use crate::sdl::TypeKind;
use crate::{MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_FIELDS, MAX_ROOT_FIELDS, Request};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    Query,
    Mutation,
}

/// A selected field. At the root it is what the caller resolves; the same type is used for
/// nested selections, where the value is read from the resolved JSON by `name`.
#[derive(Debug, Clone, PartialEq)]
pub struct RootField {
    /// The alias, or the field name when there is none.
    pub response_key: String,
    pub name: String,
    /// Coerced arguments: defaults applied, variables substituted, absent optional ones left out.
    pub args: Map<String, Json>,
    pub(crate) selection: Vec<Selected>,
    pub(crate) location: (usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Selected {
    Field(RootField),
    /// Applies only when the runtime object type satisfies `type_cond`.
    Cond { type_cond: String, selection: Vec<Selected> },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RootEntry {
    /// Index into `Prepared::fields`.
    User(usize),
    /// `__schema`, `__type`, `__typename`: answered from the schema by `complete`.
    Meta(RootField),
}

/// A validated operation, ready for the caller to resolve `fields`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub kind: OperationKind,
    /// The root fields the caller resolves, in document order (introspection fields excluded).
    pub fields: Vec<RootField>,
    pub(crate) root: Vec<RootEntry>,
    pub(crate) root_type: String,
}

/// Most errors one `prepare` reports; it stops validating after that many.
pub const MAX_ERRORS: usize = 100;
/// Most JSON values in all coerced field arguments of one operation.
pub const MAX_ARGUMENT_VALUES: usize = 1_000_000;

fn verr(rule: &str, path: &[String], msg: String, loc: (usize, usize)) -> GraphQLError {
    let at = if path.is_empty() { String::new() } else { format!("@[{}]", path.join("/")) };
    GraphQLError::at(format!("Validation error ({rule}{at}) : {msg}"), loc)
}

/// Validates `request` against `schema`; all errors found are returned together.
pub fn prepare(schema: &Schema, request: &Request) -> Result<Prepared, Vec<GraphQLError>> {
    if request.query.len() > MAX_DOCUMENT_BYTES {
        return Err(vec![GraphQLError::new(format!("document is larger than {MAX_DOCUMENT_BYTES} bytes"))]);
    }
    let doc = parse_document(&request.query).map_err(|e| vec![GraphQLError::from(e)])?;
    let op = select_operation(&doc, request.operation_name.as_deref())?;
    let (kind, root_type) = match op.kind {
        OpKind::Query => (OperationKind::Query, schema.query_type().to_string()),
        OpKind::Mutation => match schema.mutation_type() {
            Some(m) => (OperationKind::Mutation, m.to_string()),
            None => return Err(vec![GraphQLError::at("Schema is not configured for mutations.", op.pos)]),
        },
        OpKind::Subscription => return Err(vec![GraphQLError::at("subscriptions are not supported", op.pos)]),
    };
    let mut frags = HashMap::new();
    for f in &doc.fragments {
        if frags.insert(f.name.as_str(), f).is_some() {
            return Err(vec![GraphQLError::at(format!("There can be only one fragment named '{}'", f.name), f.pos)]);
        }
    }
    let vars = coerce_variables(schema, op, request.variables.as_ref())?;
    let mut cx = Ctx {
        schema,
        frags,
        var_names: op.vars.iter().map(|v| v.name.clone()).collect(),
        vars,
        count: 0,
        arg_values: 0,
        errors: Vec::new(),
        frag_stack: Vec::new(),
    };
    // Neither @skip nor @include (nor any other known directive) applies to operations or
    // fragment definitions.
    let defs_dirs = op.directives.iter().chain(doc.fragments.iter().flat_map(|f| f.directives.iter()));
    for d in defs_dirs {
        cx.misplaced_or_unknown(d, &[]);
    }
    let selected = cx.selection_set(&root_type, &op.selection, &mut Vec::new(), 0);
    if !cx.errors.is_empty() {
        return Err(cx.errors);
    }
    let mut prepared = Prepared { kind, fields: Vec::new(), root: Vec::new(), root_type };
    // Response key -> slot in `prepared.root`.
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for s in selected {
        // The root type is an object type, so every fragment was inlined: only fields remain.
        let Selected::Field(f) = s else { continue };
        let existing = by_key.get(&f.response_key).and_then(|&i| match prepared.root.get_mut(i) {
            Some(RootEntry::User(u)) => prepared.fields.get_mut(*u),
            Some(RootEntry::Meta(m)) => Some(m),
            None => None,
        });
        match existing {
            // Same key, same field (checked by `fields_conflict`): one resolution, merged selections.
            Some(e) => e.selection.extend(f.selection),
            None => {
                by_key.insert(f.response_key.clone(), prepared.root.len());
                if f.name.starts_with("__") {
                    prepared.root.push(RootEntry::Meta(f));
                } else {
                    prepared.root.push(RootEntry::User(prepared.fields.len()));
                    prepared.fields.push(f);
                }
            }
        }
    }
    if prepared.root.len() > MAX_ROOT_FIELDS {
        return Err(vec![GraphQLError::new(format!("more than {MAX_ROOT_FIELDS} root fields"))]);
    }
    Ok(prepared)
}

fn select_operation<'d>(doc: &'d Document, name: Option<&'d str>) -> Result<&'d ast::Operation, Vec<GraphQLError>> {
    let named = |n: &'d str| doc.operations.iter().filter(move |o| o.name.as_deref() == Some(n));
    let mut seen = HashSet::new();
    for o in &doc.operations {
        if let Some(n) = &o.name
            && !seen.insert(n.as_str())
        {
            return Err(vec![GraphQLError::at(format!("There can be only one operation named '{n}'"), o.pos)]);
        }
    }
    if doc.operations.len() > 1 && doc.operations.iter().any(|o| o.name.is_none()) {
        return Err(vec![GraphQLError::new("This anonymous operation must be the only defined operation.")]);
    }
    match name {
        Some(n) => named(n).next().ok_or_else(|| vec![GraphQLError::new(format!("Unknown operation named '{n}'."))]),
        None => match doc.operations.as_slice() {
            [one] => Ok(one),
            [] => Err(vec![GraphQLError::new("The document contains no operation.")]),
            _ => Err(vec![GraphQLError::new("Must provide operation name if query contains multiple operations.")]),
        },
    }
}

fn coerce_variables(schema: &Schema, op: &ast::Operation, given: Option<&Map<String, Json>>) -> Result<Map<String, Json>, Vec<GraphQLError>> {
    let mut out = Map::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for v in &op.vars {
        if errors.len() >= MAX_ERRORS {
            break;
        }
        if !seen.insert(v.name.as_str()) {
            errors.push(GraphQLError::at(format!("There can be only one variable named '{}'", v.name), v.pos));
            continue;
        }
        match schema.kind_of(v.ty.base()) {
            None => {
                errors.push(verr("UnknownType", &[], format!("Unknown type '{}'", v.ty.base()), v.pos));
                continue;
            }
            Some(k) if !is_input(k) => {
                let msg = format!("Input type expected for variable '{}' but got '{}'", v.name, v.ty);
                errors.push(verr("NonInputTypeOnVariable", &[], msg, v.pos));
                continue;
            }
            Some(_) => {}
        }
        let value = match given.and_then(|g| g.get(&v.name)) {
            Some(x) => coerce_json(schema, x, &v.ty).map(Some),
            None => match &v.default {
                Some(d) => coerce_literal(schema, d, &v.ty, &Map::new()),
                None if v.ty.is_non_null() => {
                    let msg = format!("Variable '{}' has coerced Null value for NonNull type '{}'", v.name, v.ty);
                    errors.push(GraphQLError::at(msg, v.pos));
                    continue;
                }
                None => Ok(None),
            },
        };
        match value {
            Ok(Some(x)) => {
                out.insert(v.name.clone(), x);
            }
            Ok(None) => {}
            Err(e) => errors.push(GraphQLError::at(format!("Variable '{}' has an invalid value: {e}", v.name), v.pos)),
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

struct Ctx<'a> {
    schema: &'a Schema,
    frags: HashMap<&'a str, &'a ast::Fragment>,
    var_names: HashSet<String>,
    vars: Map<String, Json>,
    count: usize,
    /// JSON values in all coerced field arguments so far (see `MAX_ARGUMENT_VALUES`).
    arg_values: usize,
    errors: Vec<GraphQLError>,
    frag_stack: Vec<&'a str>,
}

impl<'a> Ctx<'a> {
    fn misplaced_or_unknown(&mut self, d: &ast::Directive, path: &[String]) {
        if self.schema.directives.iter().any(|x| x.name == d.name) {
            self.errors.push(verr("MisplacedDirective", path, format!("Directive '{}' not allowed here", d.name), d.pos));
        } else {
            self.errors.push(verr("UnknownDirective", path, format!("Unknown directive '{}'", d.name), d.pos));
        }
    }

    /// Whether `@skip`/`@include` keep the selection; unknown directives are errors.
    fn included(&mut self, dirs: &[ast::Directive], path: &[String]) -> bool {
        let mut keep = true;
        for d in dirs {
            let def = self.schema.directives.iter().find(|x| x.name == d.name);
            let Some(def) = def.filter(|_| matches!(d.name.as_str(), "skip" | "include")) else {
                self.misplaced_or_unknown(d, path);
                continue;
            };
            if !self.check_vars(&d.args, path) {
                continue;
            }
            match coerce_args(self.schema, &def.args, &d.args, &self.vars) {
                Ok(args) => {
                    let cond = args.get("if").and_then(Json::as_bool).unwrap_or(false);
                    keep &= if d.name == "skip" { !cond } else { cond };
                }
                Err(e) => self.arg_error(e, path, d.pos),
            }
        }
        keep
    }

    /// False (with errors recorded) when an argument uses an undeclared variable.
    fn check_vars(&mut self, args: &[(String, Value)], path: &[String]) -> bool {
        let before = self.errors.len();
        for (_, v) in args {
            self.check_var(v, path);
        }
        self.errors.len() == before
    }

    /// Every `$name` used must be declared by the operation (recursion bounded by the parser).
    fn check_var(&mut self, v: &Value, path: &[String]) {
        match v {
            Value::Variable(n, pos) if !self.var_names.contains(n) => {
                self.errors.push(verr("UndefinedVariable", path, format!("Undefined variable '{n}'"), *pos));
            }
            Value::List(items) => items.iter().for_each(|i| self.check_var(i, path)),
            Value::Object(fields) => fields.iter().for_each(|(_, x)| self.check_var(x, path)),
            _ => {}
        }
    }

    fn arg_error(&mut self, e: ArgError, path: &[String], loc: (usize, usize)) {
        let (rule, msg) = match e {
            ArgError::Unknown(n) => ("UnknownArgument", format!("Unknown field argument '{n}'")),
            ArgError::Duplicate(n) => ("DuplicateArgumentNames", format!("There can be only one argument named '{n}'")),
            ArgError::Missing(n, t) => ("MissingFieldArgument", format!("Missing field argument '{n}' of type '{t}'")),
            ArgError::Wrong { name, literal, reason } => {
                ("WrongType", format!("argument '{name}' with value '{literal}' is not a valid input: {reason}"))
            }
        };
        self.errors.push(verr(rule, path, msg, loc));
    }

    /// Validates one selection set of `parent` (an object, interface or union type).
    fn selection_set(&mut self, parent: &str, sels: &'a [ast::Selection], path: &mut Vec<String>, depth: usize) -> Vec<Selected> {
        let mut out = Vec::new();
        if depth > 3 * MAX_DEPTH {
            self.errors.push(GraphQLError::new(format!("Query nesting (fields and fragments) is deeper than {}", 3 * MAX_DEPTH)));
            return out;
        }
        for sel in sels {
            if self.count > MAX_FIELDS || self.errors.len() >= MAX_ERRORS || self.arg_values > MAX_ARGUMENT_VALUES {
                return out;
            }
            match sel {
                ast::Selection::Field(f) => {
                    if let Some(x) = self.field(parent, f, path, depth) {
                        out.push(Selected::Field(x));
                    }
                }
                // Skipped selections are still validated (validation is static, as in
                // graphql-java and graphql-js), then dropped.
                ast::Selection::Spread { name, directives, pos } => {
                    let keep = self.included(directives, path);
                    let Some(frag) = self.frags.get(name.as_str()).copied() else {
                        self.errors.push(verr("UndefinedFragment", path, format!("Undefined fragment '{name}'"), *pos));
                        continue;
                    };
                    if self.frag_stack.contains(&frag.name.as_str()) {
                        self.errors.push(verr("FragmentCycle", path, "Fragment cycles not allowed".into(), *pos));
                        continue;
                    }
                    self.frag_stack.push(&frag.name);
                    let mut inner = Vec::new();
                    self.fragment(parent, &frag.type_cond, &frag.selection, path, depth, *pos, &mut inner);
                    self.frag_stack.pop();
                    if keep {
                        out.extend(inner);
                    }
                }
                ast::Selection::Inline { type_cond, directives, selection, pos } => {
                    let keep = self.included(directives, path);
                    let cond = type_cond.as_deref().unwrap_or(parent);
                    let mut inner = Vec::new();
                    self.fragment(parent, cond, selection, path, depth, *pos, &mut inner);
                    if keep {
                        out.extend(inner);
                    }
                }
            }
        }
        self.fields_conflict(&out, path);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn fragment(
        &mut self,
        parent: &str,
        cond: &str,
        sels: &'a [ast::Selection],
        path: &mut Vec<String>,
        depth: usize,
        pos: (usize, usize),
        out: &mut Vec<Selected>,
    ) {
        match self.schema.kind_of(cond) {
            None => {
                self.errors.push(verr("UnknownType", path, format!("Unknown type '{cond}'"), pos));
                return;
            }
            Some(TypeKind::Object | TypeKind::Interface | TypeKind::Union) => {}
            Some(_) => {
                let msg = format!("Fragment type condition '{cond}' is not a composite type");
                self.errors.push(verr("InlineFragmentTypeConditionInvalid", path, msg, pos));
                return;
            }
        }
        let parent_types = self.schema.possible_types(parent);
        let cond_types = self.schema.possible_types(cond);
        if !parent_types.iter().any(|t| cond_types.contains(t)) && cond != parent {
            let msg = format!("Fragment cannot be spread here as objects of type '{parent}' can never be of type '{cond}'");
            self.errors.push(verr("InvalidFragmentType", path, msg, pos));
            return;
        }
        let inner = self.selection_set(cond, sels, path, depth + 1);
        if cond == parent || parent_types.iter().all(|t| cond_types.contains(t)) {
            out.extend(inner);
        } else {
            out.push(Selected::Cond { type_cond: cond.to_string(), selection: inner });
        }
    }

    fn field(&mut self, parent: &str, f: &'a ast::Field, path: &mut Vec<String>, depth: usize) -> Option<RootField> {
        let key = f.alias.clone().unwrap_or_else(|| f.name.clone());
        path.push(key.clone());
        let r = self.field_inner(parent, f, key, path, depth);
        path.pop();
        r
    }

    fn field_inner(&mut self, parent: &str, f: &'a ast::Field, key: String, path: &mut Vec<String>, depth: usize) -> Option<RootField> {
        self.count += 1;
        if self.count > MAX_FIELDS {
            self.errors.push(GraphQLError::new(format!("more than {MAX_FIELDS} fields selected (after fragment expansion)")));
            return None;
        }
        if path.len() > MAX_DEPTH {
            self.errors.push(GraphQLError::at(format!("Query is nested deeper than {MAX_DEPTH} fields"), f.pos));
            return None;
        }
        let keep = self.included(&f.directives, path);
        let Some(def) = self.schema.field(parent, &f.name) else {
            let msg = format!("Field '{}' in type '{parent}' is undefined", f.name);
            self.errors.push(verr("FieldUndefined", path, msg, f.pos));
            return None;
        };
        let vars_ok = self.check_vars(&f.args, path);
        let args = match coerce_args(self.schema, &def.args, &f.args, &self.vars) {
            Ok(a) => {
                // A fragment may repeat a huge literal or variable value thousands of times;
                // the total is bounded so that fragment expansion cannot multiply memory.
                self.arg_values += a.values().map(json_size).sum::<usize>();
                if self.arg_values > MAX_ARGUMENT_VALUES {
                    let msg = format!("more than {MAX_ARGUMENT_VALUES} values in field arguments (after fragment expansion)");
                    self.errors.push(GraphQLError::at(msg, f.pos));
                    return None;
                }
                a
            }
            Err(_) if !vars_ok => Map::new(),
            Err(e) => {
                self.arg_error(e, path, f.pos);
                Map::new()
            }
        };
        let leaf = self.schema.is_leaf(&def.ty);
        let mut selection = Vec::new();
        if leaf && !f.selection.is_empty() {
            let msg = format!("Subselection not allowed on leaf type '{}' of field '{}'", def.ty.base(), f.name);
            self.errors.push(verr("SubselectionNotAllowed", path, msg, f.pos));
        } else if !leaf && f.selection.is_empty() {
            let msg = format!("Subselection required for type '{}' of field '{}'", def.ty.base(), f.name);
            self.errors.push(verr("SubselectionRequired", path, msg, f.pos));
        } else if !leaf {
            selection = self.selection_set(def.ty.base(), &f.selection, path, depth + 1);
        }
        keep.then(|| RootField { response_key: key, name: f.name.clone(), args, selection, location: f.pos })
    }

    /// Two fields under one response key must be the same field with the same arguments.
    fn fields_conflict(&mut self, sels: &[Selected], path: &[String]) {
        let mut seen: HashMap<&str, &RootField> = HashMap::new();
        for s in sels {
            let Selected::Field(f) = s else { continue };
            match seen.get(f.response_key.as_str()) {
                Some(prev) if prev.name != f.name || prev.args != f.args => {
                    let msg = format!("'{}' : '{}' and '{}' are different fields or have different arguments", f.response_key, prev.name, f.name);
                    self.errors.push(verr("FieldsConflict", path, msg, f.location));
                }
                Some(_) => {}
                None => {
                    seen.insert(&f.response_key, f);
                }
            }
        }
    }
}
