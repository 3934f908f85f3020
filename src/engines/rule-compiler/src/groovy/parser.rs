//! Recursive-descent parser: token cursor, statements and blocks. Expressions are in `expr.rs`.
//!
//! Newlines follow Groovy: a newline token ends a statement, except where the expression is
//! obviously incomplete (after a binary operator, before a `.`/`?.` that continues a call chain,
//! before `else`, before the comparison/logical operators Groovy 3 lets a line start with). Inside
//! parentheses and brackets the lexer has already dropped newlines.
//!
//! Statements that start with a name followed by an argument (`rpm 6000`, `tag level: x`,
//! `timestamp parsed.time as String, "fmt"`) are Groovy command expressions and become
//! [`CallStyle::Command`] calls. `Type name = value` declares a local when `Type` is capitalised or
//! primitive, which is how Groovy tells `String s = ""` from the command `layer x`.
//!
//! Nesting is bounded (see [`MAX_DEPTH`]) so that hostile input cannot overflow the stack, here or
//! in the recursive walks and drops of the tree.

use super::ast::{
    Block, Call, CallStyle, Else, Expr, ExprKind, Ident, IfStmt, Span, Stmt, StmtKind,
};
use super::token::{Keyword, Punct, Tok, Token};
use crate::CompileError;
use crate::position::Pos;

/// Maximum depth of the syntax tree (nested expressions plus call-chain and operator-chain links).
pub(crate) const MAX_DEPTH: usize = 150;

static EOF_TOKEN: Token = Token {
    tok: Tok::Eof,
    span: Span {
        start: 0,
        end: 0,
        line: 0,
        column: 0,
    },
};

#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    #[error("unexpected {found}, expected {expected}")]
    Unexpected {
        found: String,
        expected: &'static str,
    },
    #[error("expression is nested too deeply (more than {MAX_DEPTH} levels)")]
    TooDeep,
    #[error("cannot assign to this expression")]
    NotAssignable,
    #[error("empty '${{}}' in a string")]
    EmptyInterpolation,
}

pub(crate) struct Parser<'t> {
    pub(super) tokens: &'t [Token],
    pub(super) pos: usize,
    pub(super) depth: usize,
}

pub(super) fn span_pos(span: Span) -> Pos {
    Pos {
        line: span.line,
        column: span.column,
    }
}

impl<'t> Parser<'t> {
    pub(crate) fn new(tokens: &'t [Token], depth: usize) -> Self {
        Parser {
            tokens,
            pos: 0,
            depth,
        }
    }

    // ---- token cursor -------------------------------------------------------------------------

    pub(super) fn peek(&self) -> &'t Token {
        self.peek_at(0)
    }

    pub(super) fn peek_at(&self, ahead: usize) -> &'t Token {
        let tokens: &'t [Token] = self.tokens;
        tokens
            .get(self.pos + ahead)
            .or(tokens.last())
            .unwrap_or(&EOF_TOKEN)
    }

    /// Whether the last token consumed is `punct`.
    fn previous_is(&self, punct: Punct) -> bool {
        self.pos
            .checked_sub(1)
            .and_then(|at| self.tokens.get(at))
            .is_some_and(|token| token.tok == Tok::Punct(punct))
    }

    pub(super) fn advance(&mut self) -> &'t Token {
        let token = self.peek();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        token
    }

    pub(super) fn is_punct(&self, punct: Punct) -> bool {
        self.peek().tok == Tok::Punct(punct)
    }

    pub(super) fn is_keyword(&self, keyword: Keyword) -> bool {
        self.peek().tok == Tok::Kw(keyword)
    }

    pub(super) fn eat_punct(&mut self, punct: Punct) -> bool {
        let found = self.is_punct(punct);
        if found {
            self.advance();
        }
        found
    }

    pub(super) fn expect_punct(
        &mut self,
        punct: Punct,
        expected: &'static str,
    ) -> Result<&'t Token, CompileError> {
        if self.is_punct(punct) {
            Ok(self.advance())
        } else {
            Err(self.unexpected(expected))
        }
    }

    pub(super) fn skip_newlines(&mut self) {
        while self.peek().tok == Tok::Newline {
            self.advance();
        }
    }

    /// The first token at or after the cursor that is not a newline, and how far ahead it is.
    pub(super) fn peek_past_newlines(&self) -> (usize, &'t Token) {
        let mut ahead = 0;
        while self.peek_at(ahead).tok == Tok::Newline {
            ahead += 1;
        }
        (ahead, self.peek_at(ahead))
    }

    pub(super) fn unexpected(&self, expected: &'static str) -> CompileError {
        let token = self.peek();
        span_pos(token.span).error(ParseError::Unexpected {
            found: token.tok.describe(),
            expected,
        })
    }

    pub(super) fn ident(&mut self, expected: &'static str) -> Result<Ident, CompileError> {
        let token = self.peek();
        match &token.tok {
            Tok::Ident(name) => {
                self.advance();
                Ok(Ident {
                    name: name.clone(),
                    span: token.span,
                })
            }
            _ => Err(self.unexpected(expected)),
        }
    }

    /// Runs `parse` one nesting level deeper, failing cleanly past [`MAX_DEPTH`].
    pub(super) fn nested<T>(
        &mut self,
        parse: impl FnOnce(&mut Self) -> Result<T, CompileError>,
    ) -> Result<T, CompileError> {
        if self.depth >= MAX_DEPTH {
            return Err(span_pos(self.peek().span).error(ParseError::TooDeep));
        }
        self.depth += 1;
        let result = parse(self);
        self.depth -= 1;
        result
    }

    /// Counts one more level for a node that wraps the previous one (a chain link); the caller
    /// restores `depth` when the chain ends. (After an error nothing is restored: the whole parse
    /// is abandoned.)
    pub(super) fn deepen(&mut self) -> Result<(), CompileError> {
        if self.depth >= MAX_DEPTH {
            return Err(span_pos(self.peek().span).error(ParseError::TooDeep));
        }
        self.depth += 1;
        Ok(())
    }

    // ---- entry points -------------------------------------------------------------------------

    /// A whole script: statements up to the end of input (LAL's `dsl`).
    pub(crate) fn script(&mut self) -> Result<Block, CompileError> {
        let start = self.peek().span;
        let statements = self.statements(false)?;
        Ok(Block {
            statements,
            span: start.to(self.peek().span),
        })
    }

    /// A single expression filling the whole input (MAL's `exp`, `filter`, `expPrefix`...).
    pub(crate) fn whole_expression(&mut self) -> Result<Expr, CompileError> {
        self.skip_newlines();
        let expr = self.expr()?;
        while matches!(self.peek().tok, Tok::Newline | Tok::Punct(Punct::Semicolon)) {
            self.advance();
        }
        if self.peek().tok != Tok::Eof {
            return Err(self.unexpected("end of expression"));
        }
        Ok(expr)
    }

    // ---- statements ---------------------------------------------------------------------------

    pub(super) fn statements(&mut self, in_braces: bool) -> Result<Vec<Stmt>, CompileError> {
        let mut statements = Vec::new();
        loop {
            while matches!(self.peek().tok, Tok::Newline | Tok::Punct(Punct::Semicolon)) {
                self.advance();
            }
            match self.peek().tok {
                Tok::Eof => break,
                Tok::Punct(Punct::RBrace) if in_braces => break,
                _ => {}
            }
            statements.push(self.statement()?);
            match self.peek().tok {
                Tok::Newline | Tok::Punct(Punct::Semicolon) | Tok::Eof => {}
                Tok::Punct(Punct::RBrace) if in_braces => {}
                // A statement that ends with a block may be followed by another on the same line:
                // `json {} sink {}`, as SkyWalking's LAL grammar (which needs no separators) reads it.
                _ if self.previous_is(Punct::RBrace) => {}
                _ => return Err(self.unexpected("end of statement (a new line or ';')")),
            }
        }
        Ok(statements)
    }

    /// `{ statements }`
    pub(super) fn braced_block(&mut self) -> Result<Block, CompileError> {
        let open = self.expect_punct(Punct::LBrace, "'{'")?.span;
        self.nested(|parser| {
            let statements = parser.statements(true)?;
            let close = parser.expect_punct(Punct::RBrace, "'}'")?.span;
            Ok(Block {
                statements,
                span: open.to(close),
            })
        })
    }

    fn statement(&mut self) -> Result<Stmt, CompileError> {
        let start = self.peek().span;
        let kind = match &self.peek().tok {
            Tok::Kw(Keyword::If) => StmtKind::If(self.if_statement()?),
            Tok::Kw(Keyword::Return) => {
                self.advance();
                let value = match self.peek().tok {
                    Tok::Newline | Tok::Eof | Tok::Punct(Punct::Semicolon | Punct::RBrace) => None,
                    _ => Some(self.expr()?),
                };
                StmtKind::Return(value)
            }
            Tok::Kw(Keyword::Def) => {
                self.advance();
                self.local(None)?
            }
            Tok::Ident(ty) if self.starts_typed_local(ty) => {
                let ty = self.ident("a type")?;
                self.local(Some(ty))?
            }
            Tok::Ident(_) if self.starts_command() => StmtKind::Expr(self.command()?),
            _ => StmtKind::Expr(self.expr()?),
        };
        let end = self
            .tokens
            .get(self.pos.saturating_sub(1))
            .map_or(start, |token| token.span);
        Ok(Stmt {
            kind,
            span: start.to(end),
        })
    }

    fn local(&mut self, ty: Option<Ident>) -> Result<StmtKind, CompileError> {
        let name = self.ident("a variable name")?;
        let init = if self.eat_punct(Punct::Assign) {
            self.skip_newlines();
            Some(self.expr()?)
        } else {
            None
        };
        Ok(StmtKind::Local { ty, name, init })
    }

    /// `Type name =` or `Type name` at the end of a statement.
    fn starts_typed_local(&self, ty: &str) -> bool {
        let looks_like_type = ty.starts_with(|c: char| c.is_uppercase())
            || matches!(
                ty,
                "int" | "long" | "short" | "byte" | "char" | "boolean" | "double" | "float"
            );
        looks_like_type
            && matches!(self.peek_at(1).tok, Tok::Ident(_))
            && matches!(
                self.peek_at(2).tok,
                Tok::Punct(Punct::Assign | Punct::Semicolon | Punct::RBrace)
                    | Tok::Newline
                    | Tok::Eof
            )
    }

    /// `name arg...` or `a.b.name arg...`: a path followed, on the same line, by an argument start.
    fn starts_command(&self) -> bool {
        let mut ahead = 1;
        while self.peek_at(ahead).tok == Tok::Punct(Punct::Dot)
            && matches!(self.peek_at(ahead + 1).tok, Tok::Ident(_))
        {
            ahead += 2;
        }
        matches!(
            self.peek_at(ahead).tok,
            Tok::Ident(_)
                | Tok::Number(_)
                | Tok::Str(_)
                | Tok::GStr { .. }
                | Tok::Kw(Keyword::True | Keyword::False | Keyword::Null)
        )
    }

    fn command(&mut self) -> Result<Expr, CompileError> {
        let mut method = self.ident("a name")?;
        let mut receiver: Option<Box<Expr>> = None;
        while self.eat_punct(Punct::Dot) {
            let previous = Expr {
                kind: receiver_kind(receiver.take(), method.clone()),
                span: method.span,
            };
            receiver = Some(Box::new(previous));
            method = self.ident("a name")?;
        }
        let mut args = Vec::new();
        loop {
            args.push(self.argument(false)?);
            if !self.eat_punct(Punct::Comma) {
                break;
            }
            self.skip_newlines();
        }
        let start = receiver.as_ref().map_or(method.span, |r| r.span);
        let end = args.last().map_or(method.span, |arg| arg.value.span);
        let call = Call {
            receiver,
            safe: false,
            namespace: None,
            method,
            args,
            style: CallStyle::Command,
        };
        Ok(Expr {
            kind: ExprKind::Call(Box::new(call)),
            span: start.to(end),
        })
    }

    fn if_statement(&mut self) -> Result<IfStmt, CompileError> {
        self.advance();
        self.expect_punct(Punct::LParen, "'(' after 'if'")?;
        let condition = self.expr()?;
        self.expect_punct(Punct::RParen, "')'")?;
        let then = self.branch()?;
        let (ahead, next) = self.peek_past_newlines();
        if next.tok != Tok::Kw(Keyword::Else) {
            return Ok(IfStmt {
                condition,
                then,
                otherwise: None,
            });
        }
        self.pos += ahead + 1;
        self.skip_newlines();
        let otherwise = if self.is_keyword(Keyword::If) {
            Else::If(Box::new(self.nested(Self::if_statement)?))
        } else {
            Else::Block(self.branch()?)
        };
        Ok(IfStmt {
            condition,
            then,
            otherwise: Some(otherwise),
        })
    }

    /// The body of `if`/`else`: a braced block, or a single statement.
    fn branch(&mut self) -> Result<Block, CompileError> {
        self.skip_newlines();
        if self.is_punct(Punct::LBrace) {
            return self.braced_block();
        }
        let statement = self.nested(Self::statement)?;
        let span = statement.span;
        Ok(Block {
            statements: vec![statement],
            span,
        })
    }
}

/// The receiver built so far in a command path `a.b.c arg`: `a`, then `a.b`...
fn receiver_kind(receiver: Option<Box<Expr>>, name: Ident) -> ExprKind {
    match receiver {
        None => ExprKind::Name(name.name),
        Some(receiver) => ExprKind::Property {
            receiver,
            name,
            safe: false,
        },
    }
}
