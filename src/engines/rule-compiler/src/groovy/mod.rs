//! A lexer and parser for the subset of Groovy that MAL expressions and LAL scripts are written in.
//!
//! Both rule languages are Groovy DSLs upstream. This module knows Groovy syntax only; what a call
//! means (a MAL function, a LAL statement) is decided by `mal*.rs` and `lal*.rs`. Input is always the
//! value of one YAML scalar, with a [`Locator`] that turns offsets into file positions.

pub mod ast;
mod expr;
mod lexer;
mod literals;
mod parser;
mod primary;
mod token;

use crate::CompileError;
use crate::position::Locator;

/// Parses text that must be exactly one expression (a MAL `exp`, `filter`, `expPrefix`, `expSuffix`).
pub(crate) fn parse_expression(
    text: &str,
    locator: &mut Locator<'_>,
) -> Result<ast::Expr, CompileError> {
    let tokens = lexer::tokenize(text, locator, lexer::UnknownEscape::Reject)?;
    parser::Parser::new(&tokens, 0).whole_expression()
}

/// Parses a sequence of statements (a LAL `dsl`).
pub(crate) fn parse_script(
    text: &str,
    locator: &mut Locator<'_>,
) -> Result<ast::Block, CompileError> {
    let tokens = lexer::tokenize(text, locator, lexer::UnknownEscape::Keep)?;
    parser::Parser::new(&tokens, 0).script()
}

#[cfg(test)]
mod tests;
