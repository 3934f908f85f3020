//! The `Schema`: SDL definitions merged (extensions applied after every file is read, since
//! SkyWalking's files `extend type Query` before the file that defines it sorts first) and
//! checked, together with the built-in scalars, directives and introspection types, which are
//! themselves written in SDL below so that introspection queries are validated and completed
//! by exactly the same code as user queries.


use crate::ast::TypeRef;
use crate::error::SchemaError;
use crate::sdl::{Definition, DirectiveDef, FieldDef, TypeDef, TypeKind, parse_sdl};

const BUILTIN_SDL: &str = r#"
"The `String` scalar type represents textual data, represented as UTF-8 character sequences."
scalar String
"The `Int` scalar type represents non-fractional signed whole numeric values between -(2^31) and 2^31 - 1."
scalar Int
"The `Float` scalar type represents signed double-precision fractional values as specified by IEEE 754."
scalar Float
"The `Boolean` scalar type represents `true` or `false`."
scalar Boolean
"The `ID` scalar type represents a unique identifier, serialized as a String."
scalar ID

"Directs the executor to include this field or fragment only when the `if` argument is true."
directive @include("Included when true." if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
"Directs the executor to skip this field or fragment when the `if` argument is true."
directive @skip("Skipped when true." if: Boolean!) on FIELD | FRAGMENT_SPREAD | INLINE_FRAGMENT
"Marks an element of a GraphQL schema as no longer supported."
directive @deprecated(reason: String = "No longer supported") on FIELD_DEFINITION | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION | ENUM_VALUE
"Exposes a URL that specifies the behavior of this scalar."
directive @specifiedBy(url: String!) on SCALAR

"A GraphQL Schema defines the capabilities of a GraphQL server."
type __Schema {
  description: String
  types: [__Type!]!
  queryType: __Type!
  mutationType: __Type
  subscriptionType: __Type
  directives: [__Directive!]!
}
"The fundamental unit of any GraphQL Schema is the type."
type __Type {
  kind: __TypeKind!
  name: String
  description: String
  specifiedByURL: String
  fields(includeDeprecated: Boolean = false): [__Field!]
  interfaces: [__Type!]
  possibleTypes: [__Type!]
  enumValues(includeDeprecated: Boolean = false): [__EnumValue!]
  inputFields(includeDeprecated: Boolean = false): [__InputValue!]
  ofType: __Type
  isOneOf: Boolean
}
"An enum describing what kind of type a given `__Type` is."
enum __TypeKind { SCALAR OBJECT INTERFACE UNION ENUM INPUT_OBJECT LIST NON_NULL }
"Object and Interface types are described by a list of Fields, each of which has a name, potentially a list of arguments, and a return type."
type __Field {
  name: String!
  description: String
  args(includeDeprecated: Boolean = false): [__InputValue!]!
  type: __Type!
  isDeprecated: Boolean!
  deprecationReason: String
}
"Arguments provided to Fields or Directives and the input fields of an InputObject are represented as Input Values which describe their type and optionally a default value."
type __InputValue {
  name: String!
  description: String
  type: __Type!
  defaultValue: String
  isDeprecated: Boolean!
  deprecationReason: String
}
"One possible value for a given Enum."
type __EnumValue {
  name: String!
  description: String
  isDeprecated: Boolean!
  deprecationReason: String
}
"A Directive provides a way to describe alternate runtime execution and type validation behavior in a GraphQL document."
type __Directive {
  name: String!
  description: String
  isRepeatable: Boolean!
  locations: [__DirectiveLocation!]!
  args(includeDeprecated: Boolean = false): [__InputValue!]!
}
"A Directive can be adjacent to many parts of the GraphQL language."
enum __DirectiveLocation {
  QUERY MUTATION SUBSCRIPTION FIELD FRAGMENT_DEFINITION FRAGMENT_SPREAD INLINE_FRAGMENT VARIABLE_DEFINITION
  SCHEMA SCALAR OBJECT FIELD_DEFINITION ARGUMENT_DEFINITION INTERFACE UNION ENUM ENUM_VALUE INPUT_OBJECT INPUT_FIELD_DEFINITION
}
"#;

/// Names of the built-in scalars (kept in this order at the end of introspection's type list).
pub const BUILTIN_SCALARS: [&str; 5] = ["String", "Int", "Float", "Boolean", "ID"];

/// A parsed and checked schema. Build once with [`Schema::parse`] and share.
#[derive(Debug, Clone)]
pub struct Schema {
    pub(crate) types: foldhash::HashMap<String, TypeDef>,
    /// Type names in introspection order: user types in source order, then built-ins.
    pub(crate) order: Vec<String>,
    pub(crate) directives: Vec<DirectiveDef>,
    pub(crate) query: String,
    pub(crate) mutation: Option<String>,
    pub(crate) description: Option<String>,
    /// `__schema`, `__type` and `__typename` as fields, for validation of root selections.
    pub(crate) meta_fields: Vec<FieldDef>,
}

fn invalid(message: String, pos: (usize, usize)) -> SchemaError {
    SchemaError::Invalid { message, line: pos.0, col: pos.1 }
}

impl Schema {
    /// Parses and checks SDL text (one or more files concatenated).
    pub fn parse(sdl: &str) -> Result<Schema, SchemaError> {
        // The built-ins are trusted text; an error there is a bug reported like any other.
        let builtins = parse_sdl(BUILTIN_SDL)?;
        let user = parse_sdl(sdl)?;
        let mut s = Schema {
            types: foldhash::HashMap::default(),
            order: Vec::new(),
            directives: Vec::new(),
            query: "Query".into(),
            mutation: None,
            description: None,
            meta_fields: Vec::new(),
        };
        let mut explicit_mutation = None;
        let mut extensions = Vec::new();
        let mut builtin_order = Vec::new();
        for (is_builtin, def) in builtins.into_iter().map(|d| (true, d)).chain(user.into_iter().map(|d| (false, d))) {
            match def {
                Definition::Schema { query, mutation, description, .. } => {
                    if let Some(q) = query {
                        s.query = q;
                    }
                    explicit_mutation = mutation.or(explicit_mutation);
                    s.description = description.or(s.description.take());
                }
                Definition::Type(t) => {
                    if s.types.contains_key(&t.name) {
                        // Redeclaring a built-in scalar is harmless (some schemas do it); any
                        // other duplicate is a mistake.
                        if t.kind == TypeKind::Scalar && BUILTIN_SCALARS.contains(&t.name.as_str()) {
                            continue;
                        }
                        return Err(invalid(format!("type '{}' is defined more than once", t.name), t.pos));
                    }
                    if !is_builtin && t.name.starts_with("__") {
                        return Err(invalid(format!("type name '{}' is reserved (starts with __)", t.name), t.pos));
                    }
                    if is_builtin {
                        builtin_order.push(t.name.clone());
                    } else {
                        s.order.push(t.name.clone());
                    }
                    s.types.insert(t.name.clone(), t);
                }
                Definition::Extend(t) => extensions.push(t),
                Definition::Directive(d) => {
                    if s.directives.iter().any(|x| x.name == d.name) {
                        if is_builtin || ["include", "skip", "deprecated", "specifiedBy"].contains(&d.name.as_str()) {
                            continue;
                        }
                        return Err(invalid(format!("directive '@{}' is defined more than once", d.name), d.pos));
                    }
                    s.directives.push(d);
                }
            }
        }
        s.order.extend(builtin_order);
        for ext in extensions {
            let Some(t) = s.types.get_mut(&ext.name) else {
                return Err(invalid(format!("cannot extend undefined type '{}'", ext.name), ext.pos));
            };
            if t.kind != ext.kind {
                return Err(invalid(format!("extension of '{}' is not of the same kind", ext.name), ext.pos));
            }
            t.fields.extend(ext.fields);
            t.interfaces.extend(ext.interfaces);
            t.members.extend(ext.members);
            t.enum_values.extend(ext.enum_values);
            t.input_fields.extend(ext.input_fields);
        }
        s.mutation = match explicit_mutation {
            Some(m) => Some(m),
            None => s.types.get("Mutation").filter(|t| t.kind == TypeKind::Object).map(|t| t.name.clone()),
        };
        let meta = parse_sdl("type M { __schema: __Schema! __type(name: String!): __Type __typename: String! }")?;
        if let Some(Definition::Type(t)) = meta.into_iter().next() {
            s.meta_fields = t.fields;
        }
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> Result<(), SchemaError> {
        let root_ok = |n: &str| self.types.get(n).is_some_and(|t| t.kind == TypeKind::Object);
        if !root_ok(&self.query) {
            return Err(invalid(format!("query root type '{}' is not a defined object type", self.query), (1, 1)));
        }
        if let Some(m) = &self.mutation
            && !root_ok(m)
        {
            return Err(invalid(format!("mutation root type '{m}' is not a defined object type"), (1, 1)));
        }
        for name in &self.order {
            let Some(t) = self.types.get(name) else { continue };
            let mut seen = std::collections::HashSet::new();
            for f in &t.fields {
                if !seen.insert(f.name.as_str()) {
                    return Err(invalid(format!("field '{}.{}' is defined more than once", t.name, f.name), f.pos));
                }
                if !self.kind_of(f.ty.base()).is_some_and(is_output) {
                    return Err(invalid(format!("field '{}.{}' has unknown or non-output type '{}'", t.name, f.name, f.ty), f.pos));
                }
                for a in &f.args {
                    if !self.kind_of(a.ty.base()).is_some_and(is_input) {
                        return Err(invalid(format!("argument '{}.{}({})' has unknown or non-input type '{}'", t.name, f.name, a.name, a.ty), a.pos));
                    }
                }
            }
            for f in &t.input_fields {
                if !self.kind_of(f.ty.base()).is_some_and(is_input) {
                    return Err(invalid(format!("input field '{}.{}' has unknown or non-input type '{}'", t.name, f.name, f.ty), f.pos));
                }
            }
            for i in &t.interfaces {
                if self.kind_of(i) != Some(TypeKind::Interface) {
                    return Err(invalid(format!("type '{}' implements '{i}', which is not an interface", t.name), t.pos));
                }
            }
            for m in &t.members {
                if self.kind_of(m) != Some(TypeKind::Object) {
                    return Err(invalid(format!("union '{}' member '{m}' is not an object type", t.name), t.pos));
                }
            }
            let empty = match t.kind {
                TypeKind::Object | TypeKind::Interface => t.fields.is_empty(),
                TypeKind::Enum => t.enum_values.is_empty(),
                TypeKind::InputObject => t.input_fields.is_empty(),
                TypeKind::Union => t.members.is_empty(),
                TypeKind::Scalar => false,
            };
            if empty {
                return Err(invalid(format!("type '{}' has no fields, values or members", t.name), t.pos));
            }
        }
        Ok(())
    }

    /// The query root type's name.
    pub fn query_type(&self) -> &str {
        &self.query
    }

    /// The mutation root type's name, if the schema has one.
    pub fn mutation_type(&self) -> Option<&str> {
        self.mutation.as_deref()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&TypeDef> {
        self.types.get(name)
    }

    pub(crate) fn kind_of(&self, name: &str) -> Option<TypeKind> {
        self.types.get(name).map(|t| t.kind)
    }

    /// A field of an object or interface type, including the meta fields a selection may
    /// name there (`__typename` everywhere, `__schema`/`__type` on the query root).
    pub(crate) fn field(&self, type_name: &str, field: &str) -> Option<&FieldDef> {
        if field.starts_with("__") {
            let allowed = field == "__typename" || type_name == self.query;
            return self.meta_fields.iter().find(|f| f.name == field).filter(|_| allowed);
        }
        self.types.get(type_name)?.fields.iter().find(|f| f.name == field)
    }

    /// Object types a value of `abstract_type` may be at runtime (itself for an object type).
    pub(crate) fn possible_types(&self, type_name: &str) -> Vec<&str> {
        match self.types.get(type_name) {
            Some(t) if t.kind == TypeKind::Union => t.members.iter().map(String::as_str).collect(),
            Some(t) if t.kind == TypeKind::Interface => self
                .order
                .iter()
                .filter_map(|n| self.types.get(n))
                .filter(|o| o.kind == TypeKind::Object && o.interfaces.iter().any(|i| i == type_name))
                .map(|o| o.name.as_str())
                .collect(),
            Some(t) if t.kind == TypeKind::Object => vec![t.name.as_str()],
            _ => Vec::new(),
        }
    }

    /// Whether object type `object` is `cond` or a member/implementer of it.
    pub(crate) fn applies(&self, cond: &str, object: &str) -> bool {
        cond == object || self.possible_types(cond).contains(&object)
    }

    pub(crate) fn is_leaf(&self, ty: &TypeRef) -> bool {
        matches!(self.kind_of(ty.base()), Some(TypeKind::Scalar | TypeKind::Enum))
    }
}

pub(crate) fn is_output(k: TypeKind) -> bool {
    k != TypeKind::InputObject
}

pub(crate) fn is_input(k: TypeKind) -> bool {
    matches!(k, TypeKind::Scalar | TypeKind::Enum | TypeKind::InputObject)
}
