//! SDL (type system document) parsing into raw definitions; `schema.rs` merges and checks them.
//!
//! Supported: `schema {}`, `type`/`extend type`, `interface` (+ `implements A & B`), `union`,
//! `enum`, `input`, `scalar` (with `@specifiedBy(url:)`), `directive @x(...) repeatable on A | B`,
//! descriptions before definitions/fields/arguments/values, and `@deprecated(reason:)`.
//! Other directive uses are parsed and ignored.

use crate::ast::{Directive, Pos, TypeRef, Value};
use crate::error::SyntaxError;
use crate::lexer::Tok;
use crate::parser::Parser;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    Scalar,
    Object,
    Interface,
    Union,
    Enum,
    InputObject,
}

impl TypeKind {
    /// The `__TypeKind` enum value.
    pub fn introspection_name(self) -> &'static str {
        match self {
            TypeKind::Scalar => "SCALAR",
            TypeKind::Object => "OBJECT",
            TypeKind::Interface => "INTERFACE",
            TypeKind::Union => "UNION",
            TypeKind::Enum => "ENUM",
            TypeKind::InputObject => "INPUT_OBJECT",
        }
    }
}

#[derive(Debug, Clone)]
pub struct InputValueDef {
    pub name: String,
    pub description: Option<String>,
    pub ty: TypeRef,
    pub default: Option<Value>,
    pub deprecation: Option<String>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct FieldDef {
    pub name: String,
    pub description: Option<String>,
    pub args: Vec<InputValueDef>,
    pub ty: TypeRef,
    pub deprecation: Option<String>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct EnumValueDef {
    pub name: String,
    pub description: Option<String>,
    pub deprecation: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TypeDef {
    pub name: String,
    pub kind: TypeKind,
    pub description: Option<String>,
    pub fields: Vec<FieldDef>,
    pub interfaces: Vec<String>,
    /// Union members (interfaces' implementers are computed from `interfaces`).
    pub members: Vec<String>,
    pub enum_values: Vec<EnumValueDef>,
    pub input_fields: Vec<InputValueDef>,
    pub specified_by: Option<String>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct DirectiveDef {
    pub name: String,
    pub description: Option<String>,
    pub args: Vec<InputValueDef>,
    pub locations: Vec<String>,
    pub repeatable: bool,
    pub pos: Pos,
}

/// One top-level SDL item.
#[derive(Debug)]
pub enum Definition {
    Schema { query: Option<String>, mutation: Option<String>, description: Option<String> },
    Type(TypeDef),
    /// `extend type|interface|input|enum|union X ...`: merged into X after all files are read.
    Extend(TypeDef),
    Directive(DirectiveDef),
}

const DEFAULT_DEPRECATION: &str = "No longer supported";

fn deprecation(dirs: &[Directive]) -> Option<String> {
    let d = dirs.iter().find(|d| d.name == "deprecated")?;
    Some(match d.args.iter().find(|(k, _)| k == "reason") {
        Some((_, Value::String(s))) => s.clone(),
        _ => DEFAULT_DEPRECATION.to_string(),
    })
}

fn read_description(p: &mut Parser) -> Option<String> {
    if let Tok::Str(s) = p.peek().clone() {
        p.bump();
        Some(s)
    } else {
        None
    }
}

/// Parses SDL text into definitions, in source order.
pub fn parse_sdl(src: &str) -> Result<Vec<Definition>, SyntaxError> {
    let mut p = Parser::new(src)?;
    let mut defs = Vec::new();
    while !p.at_eof() {
        let desc = read_description(&mut p);
        let pos = p.pos();
        let kw = p.name()?;
        let def = match kw.as_str() {
            "schema" => {
                p.directives(true)?;
                p.expect_punct('{')?;
                let (mut query, mut mutation) = (None, None);
                while !p.eat_punct('}') {
                    let op = p.name()?;
                    p.expect_punct(':')?;
                    let ty = p.name()?;
                    match op.as_str() {
                        "query" => query = Some(ty),
                        "mutation" => mutation = Some(ty),
                        // Subscriptions are not served; the root is accepted and ignored.
                        "subscription" => {}
                        _ => return Err(p.error(format!("unknown operation type '{op}' in schema definition"))),
                    }
                }
                Definition::Schema { query, mutation, description: desc }
            }
            "extend" => {
                let kw = p.name()?;
                let at = p.pos();
                let mut t = type_def(&mut p, &kw, None, at)?;
                t.pos = pos;
                Definition::Extend(t)
            }
            "directive" => Definition::Directive(directive_def(&mut p, desc, pos)?),
            other => Definition::Type(type_def(&mut p, other, desc, pos)?),
        };
        defs.push(def);
    }
    Ok(defs)
}

fn type_def(p: &mut Parser, kw: &str, description: Option<String>, pos: Pos) -> Result<TypeDef, SyntaxError> {
    let kind = match kw {
        "type" => TypeKind::Object,
        "interface" => TypeKind::Interface,
        "union" => TypeKind::Union,
        "enum" => TypeKind::Enum,
        "input" => TypeKind::InputObject,
        "scalar" => TypeKind::Scalar,
        _ => return Err(p.error(format!("unexpected '{kw}', expected a type system definition"))),
    };
    let name = p.name()?;
    let mut t = TypeDef {
        name,
        kind,
        description,
        fields: Vec::new(),
        interfaces: Vec::new(),
        members: Vec::new(),
        enum_values: Vec::new(),
        input_fields: Vec::new(),
        specified_by: None,
        pos,
    };
    if matches!(kind, TypeKind::Object | TypeKind::Interface) && p.is_name("implements") {
        p.bump();
        p.eat_punct('&');
        t.interfaces.push(p.name()?);
        while p.eat_punct('&') || (matches!(p.peek(), Tok::Name(_)) && !p.is_punct('{') && next_is_interface(p)) {
            t.interfaces.push(p.name()?);
        }
    }
    let dirs = p.directives(true)?;
    if kind == TypeKind::Scalar {
        t.specified_by = dirs.iter().find(|d| d.name == "specifiedBy").and_then(|d| {
            d.args.iter().find_map(|(k, v)| match v {
                Value::String(s) if k == "url" => Some(s.clone()),
                _ => None,
            })
        });
        return Ok(t);
    }
    match kind {
        TypeKind::Union => {
            if p.eat_punct('=') {
                p.eat_punct('|');
                t.members.push(p.name()?);
                while p.eat_punct('|') {
                    t.members.push(p.name()?);
                }
            }
        }
        TypeKind::Enum => {
            if p.eat_punct('{') {
                while !p.eat_punct('}') {
                    let description = read_description(p);
                    let name = p.name()?;
                    let dirs = p.directives(true)?;
                    t.enum_values.push(EnumValueDef { name, description, deprecation: deprecation(&dirs) });
                }
            }
        }
        TypeKind::InputObject => {
            if p.eat_punct('{') {
                while !p.eat_punct('}') {
                    t.input_fields.push(input_value(p)?);
                }
            }
        }
        _ => {
            if p.eat_punct('{') {
                while !p.eat_punct('}') {
                    t.fields.push(field_def(p)?);
                }
            }
        }
    }
    Ok(t)
}

/// Legacy SDL allowed `implements A B` without `&`; a name is an interface unless it starts
/// the next definition (a keyword followed by a name) — good enough for real schemas.
fn next_is_interface(p: &Parser) -> bool {
    !matches!(p.peek_at(1), Tok::Name(_))
}

fn field_def(p: &mut Parser) -> Result<FieldDef, SyntaxError> {
    let description = read_description(p);
    let pos = p.pos();
    let name = p.name()?;
    let args = arg_defs(p)?;
    p.expect_punct(':')?;
    let ty = p.type_ref()?;
    let dirs = p.directives(true)?;
    Ok(FieldDef { name, description, args, ty, deprecation: deprecation(&dirs), pos })
}

fn arg_defs(p: &mut Parser) -> Result<Vec<InputValueDef>, SyntaxError> {
    let mut args = Vec::new();
    if p.eat_punct('(') {
        while !p.eat_punct(')') {
            args.push(input_value(p)?);
        }
    }
    Ok(args)
}

fn input_value(p: &mut Parser) -> Result<InputValueDef, SyntaxError> {
    let description = read_description(p);
    let pos = p.pos();
    let name = p.name()?;
    p.expect_punct(':')?;
    let ty = p.type_ref()?;
    let default = if p.eat_punct('=') { Some(p.value(true)?) } else { None };
    let dirs = p.directives(true)?;
    Ok(InputValueDef { name, description, ty, default, deprecation: deprecation(&dirs), pos })
}

fn directive_def(p: &mut Parser, description: Option<String>, pos: Pos) -> Result<DirectiveDef, SyntaxError> {
    p.expect_punct('@')?;
    let name = p.name()?;
    let args = arg_defs(p)?;
    let repeatable = p.is_name("repeatable");
    if repeatable {
        p.bump();
    }
    p.expect_keyword("on")?;
    p.eat_punct('|');
    let mut locations = vec![p.name()?];
    while p.eat_punct('|') {
        locations.push(p.name()?);
    }
    Ok(DirectiveDef { name, description, args, locations, repeatable, pos })
}
