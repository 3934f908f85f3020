//! Syntax trees for executable documents, plus the literal values and type references that
//! SDL shares with them. Positions are (line, column), 1-based.

pub type Pos = (usize, usize);

/// A GraphQL input literal. Numbers keep their source text so coercion decides the range and
/// `defaultValue` introspection can print them back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Variable(String, Pos),
    Int(String),
    Float(String),
    String(String),
    Boolean(bool),
    Null,
    Enum(String),
    List(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// A type reference: `Name`, `[T]`, `T!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    /// The innermost named type.
    pub fn base(&self) -> &str {
        let mut t = self;
        loop {
            match t {
                TypeRef::Named(n) => return n,
                TypeRef::List(i) | TypeRef::NonNull(i) => t = i,
            }
        }
    }
    pub fn is_non_null(&self) -> bool {
        matches!(self, TypeRef::NonNull(_))
    }
}

impl std::fmt::Display for TypeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypeRef::Named(n) => f.write_str(n),
            TypeRef::List(i) => write!(f, "[{i}]"),
            TypeRef::NonNull(i) => write!(f, "{i}!"),
        }
    }
}

impl Value {
    /// GraphQL literal text, as introspection's `defaultValue` and error messages show it.
    pub fn to_literal(&self) -> String {
        let mut s = String::new();
        self.write_literal(&mut s);
        s
    }

    /// The literal for an error message: long values are cut (a message must stay small even
    /// when a fragment repeats a huge argument many times).
    pub fn to_short_literal(&self) -> String {
        let s = self.to_literal();
        if s.chars().count() > 80 { format!("{}...", s.chars().take(80).collect::<String>()) } else { s }
    }

    fn write_literal(&self, out: &mut String) {
        match self {
            Value::Variable(n, _) => {
                out.push('$');
                out.push_str(n);
            }
            Value::Int(t) | Value::Float(t) | Value::Enum(t) => out.push_str(t),
            Value::String(s) => write_string(s, out),
            Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Null => out.push_str("null"),
            Value::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write_literal(out);
                }
                out.push(']');
            }
            Value::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(": ");
                    v.write_literal(out);
                }
                out.push('}');
            }
        }
    }
}

/// A GraphQL string literal with the escapes a reader needs.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Query,
    Mutation,
    Subscription,
}

#[derive(Debug, Clone)]
pub struct Directive {
    pub name: String,
    pub args: Vec<(String, Value)>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct VarDef {
    pub name: String,
    pub ty: TypeRef,
    pub default: Option<Value>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub alias: Option<String>,
    pub name: String,
    pub args: Vec<(String, Value)>,
    pub directives: Vec<Directive>,
    pub selection: Vec<Selection>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub enum Selection {
    Field(Field),
    Spread { name: String, directives: Vec<Directive>, pos: Pos },
    Inline { type_cond: Option<String>, directives: Vec<Directive>, selection: Vec<Selection>, pos: Pos },
}

#[derive(Debug, Clone)]
pub struct Operation {
    pub kind: OpKind,
    pub name: Option<String>,
    pub vars: Vec<VarDef>,
    pub directives: Vec<Directive>,
    pub selection: Vec<Selection>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Fragment {
    pub name: String,
    pub type_cond: String,
    pub directives: Vec<Directive>,
    pub selection: Vec<Selection>,
    pub pos: Pos,
}

#[derive(Debug, Clone, Default)]
pub struct Document {
    pub operations: Vec<Operation>,
    pub fragments: Vec<Fragment>,
}
