//! Primary expressions: names and calls, literals, `(...)`, list and map literals, closures, and
//! the expressions inside GString interpolations.

use super::ast::{Block, Closure, Expr, ExprKind, GStringPart, Ident, MapEntry, Param, Span};
use super::expr::boxed;
use super::parser::{ParseError, Parser, span_pos};
use super::token::{Keyword, Punct, RawPart, Tok};
use crate::CompileError;

impl Parser<'_> {
    pub(super) fn primary(&mut self) -> Result<Expr, CompileError> {
        let token = self.peek();
        let kind = match &token.tok {
            Tok::Ident(name) => {
                self.advance();
                let ident = Ident {
                    name: name.clone(),
                    span: token.span,
                };
                if self.is_punct(Punct::LParen) || self.is_punct(Punct::LBrace) {
                    return self.call(None, false, None, ident);
                }
                if self.eat_punct(Punct::ColonColon) {
                    let method = self.ident("a method name after '::'")?;
                    return self.call(None, false, Some(ident), method);
                }
                ExprKind::Name(ident.name)
            }
            Tok::Kw(Keyword::True) => self.advance_with(ExprKind::Bool(true)),
            Tok::Kw(Keyword::False) => self.advance_with(ExprKind::Bool(false)),
            Tok::Kw(Keyword::Null) => self.advance_with(ExprKind::Null),
            Tok::Number(number) => self.advance_with(ExprKind::Number(number.clone())),
            Tok::Str(literal) => self.advance_with(ExprKind::Str(literal.clone())),
            Tok::GStr { parts, .. } => {
                self.advance();
                ExprKind::GString(self.gstring_parts(parts, token.span)?)
            }
            Tok::Punct(Punct::LParen) => {
                self.advance();
                let inner = self.expr()?;
                let close = self.expect_punct(Punct::RParen, "')'")?.span;
                return Ok(Expr {
                    kind: ExprKind::Paren(boxed(inner)),
                    span: token.span.to(close),
                });
            }
            Tok::Punct(Punct::LBracket) => return self.list_or_map(),
            Tok::Punct(Punct::LBrace) => return self.closure(),
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr {
            kind,
            span: token.span,
        })
    }

    fn advance_with(&mut self, kind: ExprKind) -> ExprKind {
        self.advance();
        kind
    }

    fn gstring_parts(
        &mut self,
        parts: &[RawPart],
        span: Span,
    ) -> Result<Vec<GStringPart>, CompileError> {
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            match part {
                RawPart::Text(text) => out.push(GStringPart::Text(text.clone())),
                RawPart::Interp(tokens) => {
                    let mut inner = Parser::new(tokens, self.depth + 1);
                    inner.skip_newlines();
                    if inner.peek().tok == Tok::Eof {
                        return Err(span_pos(span).error(ParseError::EmptyInterpolation));
                    }
                    out.push(GStringPart::Expr(inner.whole_expression()?));
                }
            }
        }
        Ok(out)
    }

    /// `[a, b]`, `[k: v]`, `[]` or `[:]`.
    fn list_or_map(&mut self) -> Result<Expr, CompileError> {
        let open = self.advance().span;
        if self.is_punct(Punct::Colon) && self.peek_at(1).tok == Tok::Punct(Punct::RBracket) {
            self.advance();
            let close = self.advance().span;
            return Ok(Expr {
                kind: ExprKind::Map(Vec::new()),
                span: open.to(close),
            });
        }
        let mut items = Vec::new();
        let mut entries = Vec::new();
        let mut is_map = false;
        while !self.is_punct(Punct::RBracket) {
            let item = self.expr()?;
            if items.is_empty() && entries.is_empty() {
                is_map = self.is_punct(Punct::Colon);
            }
            if is_map {
                self.expect_punct(Punct::Colon, "':' in a map literal")?;
                let value = self.expr()?;
                entries.push(MapEntry { key: item, value });
            } else {
                items.push(item);
            }
            if !self.eat_punct(Punct::Comma) {
                break;
            }
        }
        let close = self.expect_punct(Punct::RBracket, "',' or ']'")?.span;
        let kind = if is_map {
            ExprKind::Map(entries)
        } else {
            ExprKind::List(items)
        };
        Ok(Expr {
            kind,
            span: open.to(close),
        })
    }

    /// `{ params -> statements }` or `{ statements }`.
    pub(super) fn closure(&mut self) -> Result<Expr, CompileError> {
        let open = self.expect_punct(Punct::LBrace, "'{'")?.span;
        self.nested(|parser| {
            parser.skip_newlines();
            let params = parser.closure_params()?;
            let statements = parser.statements(true)?;
            let close = parser.expect_punct(Punct::RBrace, "'}'")?.span;
            let span = open.to(close);
            Ok(Expr {
                kind: ExprKind::Closure(Box::new(Closure {
                    params,
                    body: Block { statements, span },
                })),
                span,
            })
        })
    }

    /// Reads `a, String b ->` if present; leaves the cursor alone when the closure has no parameters.
    fn closure_params(&mut self) -> Result<Vec<Param>, CompileError> {
        if !self.has_closure_params() {
            return Ok(Vec::new());
        }
        let mut params = Vec::new();
        while !self.eat_punct(Punct::Arrow) {
            let first = self.ident("a closure parameter")?;
            let param = match self.peek().tok {
                Tok::Ident(_) => Param {
                    ty: Some(first),
                    name: self.ident("a closure parameter")?,
                },
                _ => Param {
                    ty: None,
                    name: first,
                },
            };
            params.push(param);
            if !self.eat_punct(Punct::Comma) && !self.is_punct(Punct::Arrow) {
                return Err(self.unexpected("',' or '->' after a closure parameter"));
            }
        }
        Ok(params)
    }

    /// Lookahead for `[Type] name (, [Type] name)* ->` or a bare `->`.
    fn has_closure_params(&self) -> bool {
        let mut ahead = 0;
        loop {
            if self.peek_at(ahead).tok == Tok::Punct(Punct::Arrow) {
                return true;
            }
            match (&self.peek_at(ahead).tok, &self.peek_at(ahead + 1).tok) {
                (Tok::Ident(_), Tok::Ident(_)) => ahead += 2,
                (Tok::Ident(_), _) => ahead += 1,
                _ => return false,
            }
            match self.peek_at(ahead).tok {
                Tok::Punct(Punct::Comma) => ahead += 1,
                Tok::Punct(Punct::Arrow) => return true,
                _ => return false,
            }
        }
    }
}
