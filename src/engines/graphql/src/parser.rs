//! Recursive-descent parser for executable documents, and the token helpers, literal values
//! and type references that the SDL parser (`sdl.rs`) reuses.
//!
//! Recursion only happens for nested selection sets, list/object values and list types, and
//! each of those is counted against `MAX_DEPTH`, so `{a{a{...}}}` or `[[[[...]]]]` of any
//! length returns an error instead of overflowing the stack.

use crate::ast::*;
use crate::error::SyntaxError;
use crate::lexer::{Tok, Token, tokenize};

/// Deepest nesting of selection sets, and separately of values/types, that parses.
pub const MAX_DEPTH: usize = 64;

pub struct Parser {
    toks: Vec<Token>,
    i: usize,
    sel_depth: usize,
    val_depth: usize,
}

impl Parser {
    pub fn new(src: &str) -> Result<Parser, SyntaxError> {
        Ok(Parser { toks: tokenize(src)?, i: 0, sel_depth: 0, val_depth: 0 })
    }

    pub fn peek(&self) -> &Tok {
        self.toks.get(self.i).map_or(&Tok::Eof, |t| &t.tok)
    }

    pub fn peek_at(&self, n: usize) -> &Tok {
        self.toks.get(self.i + n).map_or(&Tok::Eof, |t| &t.tok)
    }

    pub fn pos(&self) -> Pos {
        // The vector always ends with Eof, so the last token's position is the end of input.
        self.toks.get(self.i).or(self.toks.last()).map_or((1, 1), |t| (t.line, t.col))
    }

    pub fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.i < self.toks.len() {
            self.i += 1;
        }
        t
    }

    pub fn at_eof(&self) -> bool {
        matches!(self.peek(), Tok::Eof)
    }

    /// graphql-java's wording for an unexpected token.
    pub fn unexpected(&self) -> SyntaxError {
        let (line, col) = self.pos();
        SyntaxError {
            message: format!("Invalid syntax with offending token '{}'", self.peek().describe()),
            line,
            col,
        }
    }

    pub fn error(&self, msg: impl Into<String>) -> SyntaxError {
        let (line, col) = self.pos();
        SyntaxError { message: msg.into(), line, col }
    }

    pub fn is_punct(&self, c: char) -> bool {
        *self.peek() == Tok::Punct(c)
    }

    pub fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    pub fn expect_punct(&mut self, c: char) -> Result<(), SyntaxError> {
        if self.eat_punct(c) { Ok(()) } else { Err(self.unexpected()) }
    }

    pub fn is_name(&self, n: &str) -> bool {
        matches!(self.peek(), Tok::Name(x) if x == n)
    }

    pub fn name(&mut self) -> Result<String, SyntaxError> {
        match self.peek() {
            Tok::Name(n) => {
                let n = n.clone();
                self.bump();
                Ok(n)
            }
            _ => Err(self.unexpected()),
        }
    }

    pub fn expect_keyword(&mut self, k: &str) -> Result<(), SyntaxError> {
        if self.is_name(k) {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn enter_value(&mut self) -> Result<(), SyntaxError> {
        self.val_depth += 1;
        if self.val_depth > MAX_DEPTH {
            return Err(self.error(format!("Invalid syntax: values or types nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    /// A literal value; `is_const` forbids `$variables` (defaults, SDL).
    pub fn value(&mut self, is_const: bool) -> Result<Value, SyntaxError> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Punct('$') if !is_const => {
                self.bump();
                Ok(Value::Variable(self.name()?, pos))
            }
            Tok::Int(t) => {
                self.bump();
                Ok(Value::Int(t))
            }
            Tok::Float(t) => {
                self.bump();
                Ok(Value::Float(t))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Value::String(s))
            }
            Tok::Name(n) => {
                self.bump();
                Ok(match n.as_str() {
                    "true" => Value::Boolean(true),
                    "false" => Value::Boolean(false),
                    "null" => Value::Null,
                    _ => Value::Enum(n),
                })
            }
            Tok::Punct('[') => {
                self.enter_value()?;
                self.bump();
                let mut items = Vec::new();
                while !self.eat_punct(']') {
                    if self.at_eof() {
                        return Err(self.unexpected());
                    }
                    items.push(self.value(is_const)?);
                }
                self.val_depth -= 1;
                Ok(Value::List(items))
            }
            Tok::Punct('{') => {
                self.enter_value()?;
                self.bump();
                let mut fields = Vec::new();
                while !self.eat_punct('}') {
                    let k = self.name()?;
                    self.expect_punct(':')?;
                    fields.push((k, self.value(is_const)?));
                }
                self.val_depth -= 1;
                Ok(Value::Object(fields))
            }
            _ => Err(self.unexpected()),
        }
    }

    pub fn type_ref(&mut self) -> Result<TypeRef, SyntaxError> {
        let t = if self.eat_punct('[') {
            self.enter_value()?;
            let inner = self.type_ref()?;
            self.expect_punct(']')?;
            self.val_depth -= 1;
            TypeRef::List(Box::new(inner))
        } else {
            TypeRef::Named(self.name()?)
        };
        Ok(if self.eat_punct('!') { TypeRef::NonNull(Box::new(t)) } else { t })
    }

    /// `(name: value ...)`, or nothing.
    pub fn arguments(&mut self, is_const: bool) -> Result<Vec<(String, Value)>, SyntaxError> {
        let mut args = Vec::new();
        if self.eat_punct('(') {
            loop {
                let k = self.name()?;
                self.expect_punct(':')?;
                args.push((k, self.value(is_const)?));
                if self.eat_punct(')') {
                    break;
                }
            }
        }
        Ok(args)
    }

    pub fn directives(&mut self, is_const: bool) -> Result<Vec<Directive>, SyntaxError> {
        let mut out = Vec::new();
        while self.is_punct('@') {
            let pos = self.pos();
            self.bump();
            let name = self.name()?;
            let args = self.arguments(is_const)?;
            out.push(Directive { name, args, pos });
        }
        Ok(out)
    }

    /// Parses a whole executable document.
    pub fn document(mut self) -> Result<Document, SyntaxError> {
        let mut doc = Document::default();
        if self.at_eof() {
            return Err(self.unexpected());
        }
        while !self.at_eof() {
            let pos = self.pos();
            if self.is_punct('{') {
                let selection = self.selection_set()?;
                let (vars, directives) = (Vec::new(), Vec::new());
                doc.operations.push(Operation { kind: OpKind::Query, name: None, vars, directives, selection, pos });
                continue;
            }
            // Descriptions on operations and fragments (a newer spec addition) are accepted
            // and ignored, as graphql-core does.
            if matches!(self.peek(), Tok::Str(_)) && matches!(self.peek_at(1), Tok::Name(_)) {
                self.bump();
            }
            let kw = self.name().map_err(|_| self.unexpected())?;
            match kw.as_str() {
                "query" | "mutation" | "subscription" => {
                    let kind = match kw.as_str() {
                        "query" => OpKind::Query,
                        "mutation" => OpKind::Mutation,
                        _ => OpKind::Subscription,
                    };
                    let name = if matches!(self.peek(), Tok::Name(_)) { Some(self.name()?) } else { None };
                    let vars = self.var_defs()?;
                    let directives = self.directives(false)?;
                    let selection = self.selection_set()?;
                    doc.operations.push(Operation { kind, name, vars, directives, selection, pos });
                }
                "fragment" => {
                    let name = self.name()?;
                    if name == "on" {
                        return Err(self.error("Invalid syntax: a fragment cannot be named 'on'"));
                    }
                    self.expect_keyword("on")?;
                    let type_cond = self.name()?;
                    let directives = self.directives(false)?;
                    let selection = self.selection_set()?;
                    doc.fragments.push(Fragment { name, type_cond, directives, selection, pos });
                }
                _ => {
                    self.i -= 1;
                    return Err(self.unexpected());
                }
            }
        }
        Ok(doc)
    }

    fn var_defs(&mut self) -> Result<Vec<VarDef>, SyntaxError> {
        let mut vars = Vec::new();
        if self.eat_punct('(') {
            loop {
                let pos = self.pos();
                self.expect_punct('$')?;
                let name = self.name()?;
                self.expect_punct(':')?;
                let ty = self.type_ref()?;
                let default = if self.eat_punct('=') { Some(self.value(true)?) } else { None };
                self.directives(true)?;
                vars.push(VarDef { name, ty, default, pos });
                if self.eat_punct(')') {
                    break;
                }
            }
        }
        Ok(vars)
    }

    fn selection_set(&mut self) -> Result<Vec<Selection>, SyntaxError> {
        self.expect_punct('{')?;
        self.sel_depth += 1;
        if self.sel_depth > MAX_DEPTH {
            return Err(self.error(format!("Invalid syntax: selection sets nested deeper than {MAX_DEPTH}")));
        }
        let mut out = Vec::new();
        loop {
            if self.eat_punct('}') {
                break;
            }
            out.push(self.selection()?);
        }
        if out.is_empty() {
            return Err(self.error("Invalid syntax: empty selection set"));
        }
        self.sel_depth -= 1;
        Ok(out)
    }

    fn selection(&mut self) -> Result<Selection, SyntaxError> {
        let pos = self.pos();
        if *self.peek() == Tok::Spread {
            self.bump();
            let is_spread = matches!(self.peek(), Tok::Name(n) if n != "on");
            if is_spread {
                let name = self.name()?;
                let directives = self.directives(false)?;
                return Ok(Selection::Spread { name, directives, pos });
            }
            let type_cond = if self.is_name("on") {
                self.bump();
                Some(self.name()?)
            } else {
                None
            };
            let directives = self.directives(false)?;
            let selection = self.selection_set()?;
            return Ok(Selection::Inline { type_cond, directives, selection, pos });
        }
        let first = self.name()?;
        let (alias, name) = if self.eat_punct(':') { (Some(first), self.name()?) } else { (None, first) };
        let args = self.arguments(false)?;
        let directives = self.directives(false)?;
        let selection = if self.is_punct('{') { self.selection_set()? } else { Vec::new() };
        Ok(Selection::Field(Field { alias, name, args, directives, selection, pos }))
    }
}

/// Parses an executable document.
pub fn parse_document(src: &str) -> Result<Document, SyntaxError> {
    Parser::new(src)?.document()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_operations_fragments_and_values() {
        let doc = parse_document(
            r#"query Q($a: [Int!]! = [1], $b: In = {x: "s", y: [true null E]}) @d {
                 x: f(a: $a, b: 1.5) @include(if: true) { ...F ... on T { g } ... @skip(if: false) { h } }
               }
               fragment F on T { i }
               { j }"#,
        )
        .unwrap();
        assert_eq!(doc.operations.len(), 2);
        assert_eq!(doc.fragments.len(), 1);
        let op = &doc.operations[0];
        assert_eq!(op.vars[0].ty.to_string(), "[Int!]!");
        assert_eq!(op.vars[1].default.as_ref().unwrap().to_literal(), "{x: \"s\", y: [true, null, E]}");
        let Selection::Field(f) = &op.selection[0] else { panic!() };
        assert_eq!((f.alias.as_deref(), f.name.as_str(), f.selection.len()), (Some("x"), "f", 3));
        assert_eq!(f.pos, (2, 18));
    }

    #[test]
    fn syntax_errors() {
        for bad in ["", "{", "{}", "{ a(x:) }", "query ($a) { a }", "{ a } }", "fragment on on T { a }", "{ a(x: $) }", "{ ... }"] {
            assert!(parse_document(bad).is_err(), "{bad}");
        }
        let e = parse_document("{ a }\n  }").unwrap_err();
        assert_eq!((e.message.as_str(), e.line, e.col), ("Invalid syntax with offending token '}'", 2, 3));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "{a".repeat(100_000) + &"}".repeat(100_000);
        assert!(parse_document(&deep).is_err());
        let list = format!("{{ a(x: {}1{}) }}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_document(&list).is_err());
        let obj = format!("{{ a(x: {}1{}) }}", "{a:".repeat(100_000), "}".repeat(100_000));
        assert!(parse_document(&obj).is_err());
        let ty = format!("query($a: {}Int{}) {{ a }}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_document(&ty).is_err());
        let ok = "{a".repeat(64) + &"}".repeat(64);
        assert!(parse_document(&ok).is_ok());
    }
}
