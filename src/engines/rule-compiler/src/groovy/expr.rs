//! Expression parsing by precedence levels, following Groovy 3's grammar.
//!
//! Lowest to highest: assignment, `?:` (ternary and Elvis), `||`, `&&`, `=~ ==~`, `== !=`,
//! `< <= > >= in`, `as Type`, `+ -`, `* / %`, unary `! - +`, postfix (`.` `?.` calls, `[i]`),
//! primary. As in Groovy, `as` binds looser than `+` (`a + b as String` casts the sum) but tighter
//! than comparisons (`x as Integer < 400` compares the cast value), and a line may start with a
//! binary operator other than `+`/`-` to continue the previous line.

use super::ast::{Arg, AssignOp, BinaryOp, Call, CallStyle, Expr, ExprKind, Ident, UnaryOp};
use super::parser::{ParseError, Parser, span_pos};
use super::token::{Keyword, Punct, Tok};
use crate::CompileError;

/// A binary operator, or `as` (which takes a type, not an operand).
#[derive(Clone, Copy)]
enum Operator {
    Binary(BinaryOp),
    Cast,
}

/// Precedence level of `+ -`: the only operators a new line may not start with (they would read
/// as unary signs).
const ADDITIVE_LEVEL: usize = 6;

/// The operator a token spells and its level, loosest (0) first.
fn operator(tok: &Tok) -> Option<(usize, Operator)> {
    use BinaryOp as B;
    let (level, op) = match tok {
        Tok::Punct(Punct::OrOr) => (0, B::Or),
        Tok::Punct(Punct::AndAnd) => (1, B::And),
        Tok::Punct(Punct::RegexFind) => (2, B::RegexFind),
        Tok::Punct(Punct::RegexMatch) => (2, B::RegexMatch),
        Tok::Punct(Punct::Eq) => (3, B::Eq),
        Tok::Punct(Punct::NotEq) => (3, B::NotEq),
        Tok::Punct(Punct::Lt) => (4, B::Lt),
        Tok::Punct(Punct::Le) => (4, B::Le),
        Tok::Punct(Punct::Gt) => (4, B::Gt),
        Tok::Punct(Punct::Ge) => (4, B::Ge),
        Tok::Kw(Keyword::In) => (4, B::In),
        Tok::Kw(Keyword::As) => return Some((5, Operator::Cast)),
        Tok::Punct(Punct::Plus) => (ADDITIVE_LEVEL, B::Add),
        Tok::Punct(Punct::Minus) => (ADDITIVE_LEVEL, B::Sub),
        Tok::Punct(Punct::Star) => (7, B::Mul),
        Tok::Punct(Punct::Slash) => (7, B::Div),
        Tok::Punct(Punct::Percent) => (7, B::Mod),
        _ => return None,
    };
    Some((level, Operator::Binary(op)))
}

pub(super) fn boxed(expr: Expr) -> Box<Expr> {
    Box::new(expr)
}

impl Parser<'_> {
    pub(crate) fn expr(&mut self) -> Result<Expr, CompileError> {
        self.nested(Self::assignment)
    }

    fn assignment(&mut self) -> Result<Expr, CompileError> {
        let target = self.ternary()?;
        let op = match self.peek().tok {
            Tok::Punct(Punct::Assign) => AssignOp::Assign,
            Tok::Punct(Punct::PlusAssign) => AssignOp::Add,
            Tok::Punct(Punct::MinusAssign) => AssignOp::Sub,
            Tok::Punct(Punct::StarAssign) => AssignOp::Mul,
            Tok::Punct(Punct::SlashAssign) => AssignOp::Div,
            _ => return Ok(target),
        };
        if !matches!(
            target.kind,
            ExprKind::Name(_) | ExprKind::Property { .. } | ExprKind::Index { .. }
        ) {
            return Err(span_pos(self.peek().span).error(ParseError::NotAssignable));
        }
        self.advance();
        self.skip_newlines();
        let value = self.nested(Self::assignment)?;
        let span = target.span.to(value.span);
        Ok(Expr {
            kind: ExprKind::Assign {
                op,
                target: boxed(target),
                value: boxed(value),
            },
            span,
        })
    }

    fn ternary(&mut self) -> Result<Expr, CompileError> {
        let condition = self.binary(0)?;
        if self.operator_ahead(&Tok::Punct(Punct::Question)) {
            self.advance();
            self.skip_newlines();
            let then = self.nested(Self::ternary)?;
            self.skip_newlines();
            self.expect_punct(Punct::Colon, "':' of the conditional expression")?;
            self.skip_newlines();
            let otherwise = self.nested(Self::ternary)?;
            let span = condition.span.to(otherwise.span);
            let kind = ExprKind::Ternary {
                condition: boxed(condition),
                then: boxed(then),
                otherwise: boxed(otherwise),
            };
            return Ok(Expr { kind, span });
        }
        if self.operator_ahead(&Tok::Punct(Punct::Elvis)) {
            self.advance();
            self.skip_newlines();
            let fallback = self.nested(Self::ternary)?;
            let span = condition.span.to(fallback.span);
            return Ok(Expr {
                kind: ExprKind::Elvis {
                    value: boxed(condition),
                    fallback: boxed(fallback),
                },
                span,
            });
        }
        Ok(condition)
    }

    /// Whether `tok` is next, possibly on a following line (then the newlines are consumed).
    fn operator_ahead(&mut self, tok: &Tok) -> bool {
        let (ahead, next) = self.peek_past_newlines();
        if &next.tok == tok {
            self.pos += ahead;
            return true;
        }
        false
    }

    /// Precedence climbing over the binary levels: one stack frame per nesting, not per level.
    fn binary(&mut self, min_level: usize) -> Result<Expr, CompileError> {
        let mut left = self.unary()?;
        let saved_depth = self.depth;
        while let Some((level, op)) = self.operator_ahead_from(min_level) {
            // Each link of a left-associative chain deepens the tree by one.
            self.deepen()?;
            self.advance();
            left = match op {
                Operator::Cast => {
                    let ty = self.type_name()?;
                    let span = left.span.to(ty.span);
                    Expr {
                        kind: ExprKind::Cast {
                            value: boxed(left),
                            ty,
                        },
                        span,
                    }
                }
                Operator::Binary(op) => {
                    self.skip_newlines();
                    let right = self.binary(level + 1)?;
                    let span = left.span.to(right.span);
                    Expr {
                        kind: ExprKind::Binary {
                            op,
                            left: boxed(left),
                            right: boxed(right),
                        },
                        span,
                    }
                }
            };
        }
        self.depth = saved_depth;
        Ok(left)
    }

    /// The binary operator at the cursor if its level is at least `min_level`. Like Groovy, an
    /// operator other than `+`/`-` may start the next line; the newlines are then consumed.
    fn operator_ahead_from(&mut self, min_level: usize) -> Option<(usize, Operator)> {
        let (ahead, next) = self.peek_past_newlines();
        let (level, op) = operator(&next.tok)?;
        if level < min_level || (ahead > 0 && level == ADDITIVE_LEVEL) {
            return None;
        }
        self.pos += ahead;
        Some((level, op))
    }

    /// A class name after `as`: `String`, `java.lang.Long`.
    fn type_name(&mut self) -> Result<Ident, CompileError> {
        let mut ty = self.ident("a type name after 'as'")?;
        while self.is_punct(Punct::Dot) && matches!(self.peek_at(1).tok, Tok::Ident(_)) {
            self.advance();
            let part = self.ident("a type name")?;
            ty = Ident {
                name: format!("{}.{}", ty.name, part.name),
                span: ty.span.to(part.span),
            };
        }
        Ok(ty)
    }

    fn unary(&mut self) -> Result<Expr, CompileError> {
        let op = match self.peek().tok {
            Tok::Punct(Punct::Not) => UnaryOp::Not,
            Tok::Punct(Punct::Minus) => UnaryOp::Neg,
            Tok::Punct(Punct::Plus) => UnaryOp::Plus,
            _ => return self.postfix(),
        };
        let start = self.advance().span;
        self.skip_newlines();
        let operand = self.nested(Self::unary)?;
        let span = start.to(operand.span);
        Ok(Expr {
            kind: ExprKind::Unary {
                op,
                operand: boxed(operand),
            },
            span,
        })
    }

    fn postfix(&mut self) -> Result<Expr, CompileError> {
        let mut expr = self.primary()?;
        let saved_depth = self.depth;
        loop {
            let (ahead, next) = self.peek_past_newlines();
            let safe = match next.tok {
                Tok::Punct(Punct::Dot) => false,
                Tok::Punct(Punct::SafeDot) => true,
                Tok::Punct(Punct::LBracket) if ahead == 0 => {
                    self.deepen()?;
                    self.advance();
                    let index = self.expr()?;
                    let close = self.expect_punct(Punct::RBracket, "']'")?.span;
                    let span = expr.span.to(close);
                    let kind = ExprKind::Index {
                        receiver: boxed(expr),
                        index: boxed(index),
                    };
                    expr = Expr { kind, span };
                    continue;
                }
                _ => break,
            };
            self.deepen()?;
            self.pos += ahead + 1;
            self.skip_newlines();
            expr = self.member(expr, safe)?;
        }
        self.depth = saved_depth;
        Ok(expr)
    }

    /// After `.` or `?.`: a property, a method call, or an extension call `ns::method(...)`.
    fn member(&mut self, receiver: Expr, safe: bool) -> Result<Expr, CompileError> {
        let token = self.peek();
        let mut name = match &token.tok {
            Tok::Ident(name) => name.clone(),
            Tok::Kw(keyword) => keyword.text().to_owned(),
            Tok::Str(literal) => literal.value.clone(),
            _ => return Err(self.unexpected("a property or method name after '.'")),
        };
        let mut span = token.span;
        self.advance();
        let mut namespace = None;
        if self.is_punct(Punct::ColonColon) {
            self.advance();
            namespace = Some(Ident { name, span });
            let method = self.ident("a method name after '::'")?;
            (name, span) = (method.name, method.span);
        }
        let method = Ident { name, span };
        if self.is_punct(Punct::LParen) || self.is_punct(Punct::LBrace) || namespace.is_some() {
            return self.call(Some(boxed(receiver)), safe, namespace, method);
        }
        let span = receiver.span.to(method.span);
        Ok(Expr {
            kind: ExprKind::Property {
                receiver: boxed(receiver),
                name: method,
                safe,
            },
            span,
        })
    }

    /// A call whose method name has been read: `(args)` with an optional trailing closure, or a closure alone.
    pub(super) fn call(
        &mut self,
        receiver: Option<Box<Expr>>,
        safe: bool,
        namespace: Option<Ident>,
        method: Ident,
    ) -> Result<Expr, CompileError> {
        let start = receiver
            .as_ref()
            .map_or(namespace.as_ref().map_or(method.span, |ns| ns.span), |r| {
                r.span
            });
        let mut args = Vec::new();
        let style = if self.is_punct(Punct::LBrace) {
            CallStyle::ClosureOnly
        } else {
            self.expect_punct(Punct::LParen, "'('")?;
            while !self.is_punct(Punct::RParen) {
                args.push(self.argument(true)?);
                if !self.eat_punct(Punct::Comma) {
                    break;
                }
            }
            self.expect_punct(Punct::RParen, "',' or ')'")?;
            CallStyle::Parens
        };
        let mut end = self
            .tokens
            .get(self.pos.saturating_sub(1))
            .map_or(method.span, |t| t.span);
        if self.is_punct(Punct::LBrace) {
            let closure = self.closure()?;
            end = closure.span;
            args.push(Arg {
                name: None,
                value: closure,
            });
        }
        let call = Call {
            receiver,
            safe,
            namespace,
            method,
            args,
            style,
        };
        Ok(Expr {
            kind: ExprKind::Call(Box::new(call)),
            span: start.to(end),
        })
    }

    /// One argument: `key: value`, MAL's `by=[...]` (inside parentheses only), or a value.
    pub(super) fn argument(&mut self, in_parens: bool) -> Result<Arg, CompileError> {
        let token = self.peek();
        let key = match &token.tok {
            Tok::Ident(name) => Some(name.clone()),
            Tok::Kw(keyword) => Some(keyword.text().to_owned()),
            Tok::Str(literal) => Some(literal.value.clone()),
            _ => None,
        };
        let separator = &self.peek_at(1).tok;
        let named = *separator == Tok::Punct(Punct::Colon)
            || (in_parens
                && *separator == Tok::Punct(Punct::Assign)
                && matches!(token.tok, Tok::Ident(_)));
        if let (Some(key), true) = (key, named) {
            self.advance();
            self.advance();
            self.skip_newlines();
            let value = self.expr()?;
            return Ok(Arg {
                name: Some(Ident {
                    name: key,
                    span: token.span,
                }),
                value,
            });
        }
        Ok(Arg {
            name: None,
            value: self.expr()?,
        })
    }
}
