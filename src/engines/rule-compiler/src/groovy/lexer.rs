//! The lexer: turns one scalar's text into tokens (`token.rs`).
//!
//! Besides splitting text into tokens the lexer owns two decisions that Groovy makes lexically:
//! - **Newline significance.** A newline inside `(...)` or `[...]` is whitespace; inside `{...}`
//!   or at top level it may end a statement, so it becomes a (collapsed) [`Tok::Newline`] and the
//!   parser decides. This needs the bracket stack, which also lets the lexer report an unbalanced
//!   bracket at the bracket itself rather than wherever the parser happens to notice.
//! - **Slash.** `/` starts a slashy string where an operand is expected (after an operator, `(`, a
//!   newline...) and is division after an operand, like Groovy's lexer.
//!
//! Literals (numbers; strings with quotes, escapes and `${}` interpolation) are lexed in `literals.rs`.

use super::ast::Span;
use super::token::punctuation;
use super::token::{Keyword, Punct, Tok, Token};
use crate::CompileError;
use crate::position::Locator;

/// Bracket nesting limit; bounds the parser's recursion (and thus stack use) on hostile input.
pub(crate) const MAX_BRACKET_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub(crate) enum LexError {
    #[error("unexpected character '{0}'")]
    UnexpectedChar(char),
    #[error("unterminated string literal")]
    UnterminatedString,
    #[error("unterminated block comment")]
    UnterminatedComment,
    #[error("invalid escape sequence '\\{0}'")]
    InvalidEscape(char),
    #[error("invalid number literal '{0}'")]
    InvalidNumber(String),
    #[error(
        "invalid number literal '{0}': an L or I suffix needs an integer (no fraction or exponent)"
    )]
    IntegerSuffixOnDecimal(String),
    #[error("integer literal '{0}' is out of range for its type (int with I, otherwise long)")]
    IntegerOutOfRange(String),
    #[error("'{opener}' is never closed")]
    Unclosed { opener: &'static str },
    #[error("unexpected '{closer}': it does not close anything")]
    UnmatchedCloser { closer: &'static str },
    #[error(
        "unexpected '{closer}': expected '{expected}' to close the '{opener}' at line {line}, column {column}"
    )]
    MismatchedCloser {
        closer: &'static str,
        expected: &'static str,
        opener: &'static str,
        line: usize,
        column: usize,
    },
    #[error("brackets are nested deeper than {MAX_BRACKET_DEPTH} levels")]
    TooDeep,
}

/// How a quoted string treats a backslash before a character that is no Java escape (`'\\d'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnknownEscape {
    /// An error, as in Groovy and SkyWalking's MAL lexer.
    Reject,
    /// Kept as written, backslash included: SkyWalking's LAL lexer takes any `\\x`, so a regexp
    /// may be written `'(?<n>\\d+)'`.
    Keep,
}

/// Tokenises a whole scalar. The result always ends with an `Eof` token.
pub(crate) fn tokenize(
    text: &str,
    locator: &mut Locator<'_>,
    unknown_escape: UnknownEscape,
) -> Result<Vec<Token>, CompileError> {
    let mut lexer = Lexer {
        text,
        pos: 0,
        locator,
        depth: 0,
        unknown_escape,
    };
    lexer.tokens(false)
}

pub(super) struct Lexer<'t, 'l, 'a> {
    pub(super) text: &'t str,
    pub(super) pos: usize,
    pub(super) locator: &'l mut Locator<'a>,
    /// Open brackets across nested `${...}` interpolations.
    pub(super) depth: usize,
    pub(super) unknown_escape: UnknownEscape,
}

impl Lexer<'_, '_, '_> {
    pub(super) fn peek(&self) -> Option<char> {
        self.text.get(self.pos..)?.chars().next()
    }

    pub(super) fn peek_at(&self, skip: usize) -> Option<char> {
        self.text.get(self.pos..)?.chars().nth(skip)
    }

    pub(super) fn starts_with(&self, prefix: &str) -> bool {
        self.text
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(prefix))
    }

    pub(super) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    pub(super) fn span(&mut self, start: usize, end: usize) -> Span {
        let pos = self.locator.pos(start);
        Span {
            start,
            end,
            line: pos.line,
            column: pos.column,
        }
    }

    pub(super) fn error_at(&mut self, start: usize, error: LexError) -> CompileError {
        let pos = self.locator.pos(start);
        pos.error(error)
    }

    /// Lexes tokens up to the end of the text, or (inside `${`) up to the `}` that closes it.
    pub(super) fn tokens(&mut self, in_interpolation: bool) -> Result<Vec<Token>, CompileError> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut brackets: Vec<(Punct, usize)> = Vec::new();
        loop {
            self.skip_blanks_and_comments()?;
            let start = self.pos;
            let Some(c) = self.peek() else {
                if in_interpolation {
                    return Err(self.error_at(start, LexError::Unclosed { opener: "${" }));
                }
                if let Some(&(opener, at)) = brackets.last() {
                    return Err(self.error_at(
                        at,
                        LexError::Unclosed {
                            opener: opener.text(),
                        },
                    ));
                }
                let span = self.span(start, start);
                tokens.push(Token {
                    tok: Tok::Eof,
                    span,
                });
                return Ok(tokens);
            };
            let tok = if c == '\n' {
                self.bump();
                let newline_is_whitespace =
                    matches!(brackets.last(), Some((Punct::LParen | Punct::LBracket, _)));
                if newline_is_whitespace
                    || matches!(
                        tokens.last(),
                        None | Some(Token {
                            tok: Tok::Newline,
                            ..
                        })
                    )
                {
                    continue;
                }
                Tok::Newline
            } else if c == '_' || c.is_alphabetic() || (c == '$' && self.peek_at(1) != Some('/')) {
                self.word()
            } else if c.is_ascii_digit() {
                self.number()?
            } else if c == '\'' || c == '"' {
                self.quoted_string(c)?
            } else if c == '$' {
                self.dollar_slashy_string()?
            } else if c == '/' {
                if tokens.last().is_some_and(|t| t.tok.ends_operand()) {
                    self.bump();
                    if self.peek() == Some('=') {
                        self.bump();
                        Tok::Punct(Punct::SlashAssign)
                    } else {
                        Tok::Punct(Punct::Slash)
                    }
                } else {
                    self.slashy_string()?
                }
            } else {
                let rest = self.text.as_bytes().get(self.pos..).unwrap_or_default();
                let Some((len, punct)) = punctuation(rest) else {
                    return Err(self.error_at(start, LexError::UnexpectedChar(c)));
                };
                self.pos += len;
                match punct {
                    Punct::LParen | Punct::LBracket | Punct::LBrace => {
                        if self.depth >= MAX_BRACKET_DEPTH {
                            return Err(self.error_at(start, LexError::TooDeep));
                        }
                        self.depth += 1;
                        brackets.push((punct, start));
                    }
                    Punct::RParen | Punct::RBracket | Punct::RBrace => {
                        let Some((opener, at)) = brackets.pop() else {
                            if punct == Punct::RBrace && in_interpolation {
                                return self.finish_interpolation(tokens, start);
                            }
                            return Err(self.error_at(
                                start,
                                LexError::UnmatchedCloser {
                                    closer: punct.text(),
                                },
                            ));
                        };
                        self.depth = self.depth.saturating_sub(1);
                        let expected = closer_of(opener);
                        if expected != punct {
                            let opened = self.locator.pos(at);
                            return Err(self.error_at(
                                start,
                                LexError::MismatchedCloser {
                                    closer: punct.text(),
                                    expected: expected.text(),
                                    opener: opener.text(),
                                    line: opened.line,
                                    column: opened.column,
                                },
                            ));
                        }
                    }
                    _ => {}
                }
                Tok::Punct(punct)
            };
            let span = self.span(start, self.pos);
            tokens.push(Token { tok, span });
        }
    }

    fn finish_interpolation(
        &mut self,
        mut tokens: Vec<Token>,
        close: usize,
    ) -> Result<Vec<Token>, CompileError> {
        let span = self.span(close, close);
        tokens.push(Token {
            tok: Tok::Eof,
            span,
        });
        Ok(tokens)
    }

    fn skip_blanks_and_comments(&mut self) -> Result<(), CompileError> {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r' | '\u{c}') => {
                    self.bump();
                }
                // A backslash before a line break continues the line.
                Some('\\') if matches!(self.peek_at(1), Some('\n')) => {
                    self.pos += 2;
                }
                Some('/') if self.peek_at(1) == Some('/') => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                Some('/') if self.peek_at(1) == Some('*') => {
                    let start = self.pos;
                    match self
                        .text
                        .get(self.pos + 2..)
                        .and_then(|rest| rest.find("*/"))
                    {
                        Some(end) => self.pos += 2 + end + 2,
                        None => return Err(self.error_at(start, LexError::UnterminatedComment)),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn word(&mut self) -> Tok {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c == '_' || c == '$' || c.is_alphanumeric())
        {
            self.bump();
        }
        let word = self.text.get(start..self.pos).unwrap_or_default();
        match Keyword::from_word(word) {
            Some(keyword) => Tok::Kw(keyword),
            None => Tok::Ident(word.to_owned()),
        }
    }
}

fn closer_of(opener: Punct) -> Punct {
    match opener {
        Punct::LParen => Punct::RParen,
        Punct::LBracket => Punct::RBracket,
        _ => Punct::RBrace,
    }
}
