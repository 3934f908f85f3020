//! Literals: numbers, and strings `'...'`, `"..."`, triple-quoted forms, slashy `/.../` and
//! dollar-slashy `$/.../$`.
//!
//! Numbers follow Groovy: decimal or `0x` hex, `_` separators, a fraction and exponent, and a type
//! suffix (`L`, `G`, `D`, `F`, `I`). As in Java and SkyWalking's MAL/LAL grammars, `L` and `I` only
//! go on integers, and an integer must fit its type (`I`: int, otherwise long); only a `G` integer
//! may be larger (it becomes a decimal here).
//!
//! Double-quoted, triple-double-quoted and both slashy forms are GStrings: `${expr}` and
//! `$name.path` interpolate. An interpolation is lexed into its own token list here (by re-entering
//! the main token loop until the matching `}`), so the parser can parse it as an expression with
//! correct positions. A string without interpolation becomes a plain [`Tok::Str`].

use super::ast::{Number, NumberValue, StrDelimiter, StrLit};
use super::lexer::{LexError, Lexer, MAX_BRACKET_DEPTH, UnknownEscape};
use super::token::{Punct, RawPart, Tok, Token};
use crate::CompileError;

/// How one kind of literal treats backslashes and dollars.
#[derive(Clone, Copy)]
struct Rules {
    delimiter: StrDelimiter,
    terminator: &'static str,
    multiline: bool,
    interpolates: bool,
    /// Java-style escapes (`\n`, `\u0041`...). Slashy strings only escape their terminator.
    escapes: bool,
}

impl Lexer<'_, '_, '_> {
    pub(super) fn quoted_string(&mut self, quote: char) -> Result<Tok, CompileError> {
        let triple = if quote == '\'' { "'''" } else { "\"\"\"" };
        let is_triple = self.starts_with(triple);
        let rules = match (quote, is_triple) {
            ('\'', false) => Rules {
                delimiter: StrDelimiter::Single,
                terminator: "'",
                multiline: false,
                interpolates: false,
                escapes: true,
            },
            ('\'', true) => Rules {
                delimiter: StrDelimiter::TripleSingle,
                terminator: "'''",
                multiline: true,
                interpolates: false,
                escapes: true,
            },
            (_, false) => Rules {
                delimiter: StrDelimiter::Double,
                terminator: "\"",
                multiline: false,
                interpolates: true,
                escapes: true,
            },
            (_, true) => Rules {
                delimiter: StrDelimiter::TripleDouble,
                terminator: "\"\"\"",
                multiline: true,
                interpolates: true,
                escapes: true,
            },
        };
        let start = self.pos;
        self.pos += rules.terminator.len();
        self.string_body(start, rules)
    }

    pub(super) fn slashy_string(&mut self) -> Result<Tok, CompileError> {
        let start = self.pos;
        self.pos += 1;
        let rules = Rules {
            delimiter: StrDelimiter::Slashy,
            terminator: "/",
            multiline: true,
            interpolates: true,
            escapes: false,
        };
        self.string_body(start, rules)
    }

    pub(super) fn dollar_slashy_string(&mut self) -> Result<Tok, CompileError> {
        let start = self.pos;
        self.pos += 2;
        let rules = Rules {
            delimiter: StrDelimiter::DollarSlashy,
            terminator: "/$",
            multiline: true,
            interpolates: true,
            escapes: false,
        };
        self.string_body(start, rules)
    }

    fn string_body(&mut self, start: usize, rules: Rules) -> Result<Tok, CompileError> {
        let mut parts: Vec<RawPart> = Vec::new();
        let mut text = String::new();
        loop {
            if self.starts_with(rules.terminator) {
                self.pos += rules.terminator.len();
                break;
            }
            let at = self.pos;
            let Some(c) = self.bump() else {
                return Err(self.error_at(start, LexError::UnterminatedString));
            };
            match c {
                '\n' if !rules.multiline => {
                    return Err(self.error_at(start, LexError::UnterminatedString));
                }
                // LAL keeps `\d` as written (see `UnknownEscape`); the next character is then read
                // as an ordinary one.
                '\\' if rules.escapes
                    && self.unknown_escape == UnknownEscape::Keep
                    && self.peek().is_some_and(|next| !is_java_escape(next)) =>
                {
                    text.push('\\');
                }
                '\\' if rules.escapes => {
                    if let Some(escaped) = self.escape(at)? {
                        text.push(escaped);
                    }
                }
                // Slashy strings: only `\/` is an escape; every other backslash is kept for the regex.
                '\\' if rules.delimiter == StrDelimiter::Slashy && self.peek() == Some('/') => {
                    self.bump();
                    text.push('/');
                }
                '$' if rules.delimiter == StrDelimiter::DollarSlashy
                    && matches!(self.peek(), Some('$' | '/')) =>
                {
                    text.extend(self.bump());
                }
                '$' if rules.interpolates => {
                    let interpolation = self.interpolation(at)?;
                    match interpolation {
                        Some(tokens) => {
                            parts.push(RawPart::Text(std::mem::take(&mut text)));
                            parts.push(RawPart::Interp(tokens));
                        }
                        None => text.push('$'),
                    }
                }
                other => text.push(other),
            }
        }
        if parts.is_empty() {
            return Ok(Tok::Str(StrLit {
                value: text,
                delimiter: rules.delimiter,
            }));
        }
        parts.push(RawPart::Text(text));
        parts.retain(|part| !matches!(part, RawPart::Text(t) if t.is_empty()));
        Ok(Tok::GStr {
            parts,
            delimiter: rules.delimiter,
        })
    }

    /// After a `$`: `${...}` or `$name.path`. `None` means a literal dollar.
    fn interpolation(&mut self, dollar: usize) -> Result<Option<Vec<Token>>, CompileError> {
        match self.peek() {
            Some('{') => {
                if self.depth >= MAX_BRACKET_DEPTH {
                    return Err(self.error_at(dollar, LexError::TooDeep));
                }
                self.bump();
                self.depth += 1;
                let tokens = self.tokens(true);
                self.depth = self.depth.saturating_sub(1);
                match tokens {
                    Ok(tokens) => Ok(Some(tokens)),
                    // Running out of text inside `${` means the string itself never ended.
                    Err(_) if self.peek().is_none() => {
                        Err(self.error_at(dollar, LexError::Unclosed { opener: "${" }))
                    }
                    Err(error) => Err(error),
                }
            }
            Some(c) if c == '_' || c.is_alphabetic() => Ok(Some(self.dotted_path())),
            // Groovy rejects a bare `$` in a GString, but SkyWalking's MAL and LAL grammars read
            // strings without interpolation rules, so `"^(?<msg>.*)$"` is a regex ending in `$`.
            _ => Ok(None),
        }
    }

    /// `$a.b.c` interpolates the property path `a.b.c`.
    fn dotted_path(&mut self) -> Vec<Token> {
        let mut tokens = Vec::new();
        loop {
            let start = self.pos;
            while self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
                self.bump();
            }
            let name = self
                .text
                .get(start..self.pos)
                .unwrap_or_default()
                .to_owned();
            let span = self.span(start, self.pos);
            tokens.push(Token {
                tok: Tok::Ident(name),
                span,
            });
            let continues = self.peek() == Some('.')
                && self
                    .peek_at(1)
                    .is_some_and(|c| c == '_' || c.is_alphabetic());
            if !continues {
                break;
            }
            let dot = self.pos;
            self.bump();
            let span = self.span(dot, self.pos);
            tokens.push(Token {
                tok: Tok::Punct(Punct::Dot),
                span,
            });
        }
        let span = self.span(self.pos, self.pos);
        tokens.push(Token {
            tok: Tok::Eof,
            span,
        });
        tokens
    }

    /// After a backslash in a quoted string; `None` for a backslash-newline line continuation.
    fn escape(&mut self, backslash: usize) -> Result<Option<char>, CompileError> {
        let Some(c) = self.bump() else {
            return Err(self.error_at(backslash, LexError::UnterminatedString));
        };
        let escaped = match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            's' => ' ',
            '\\' | '\'' | '"' | '$' | '/' => c,
            '\n' => return Ok(None),
            'u' => {
                while self.peek() == Some('u') {
                    self.bump();
                }
                let digits = self
                    .text
                    .get(self.pos..self.pos + 4)
                    .filter(|d| d.chars().all(|c| c.is_ascii_hexdigit()));
                let decoded = digits
                    .and_then(|d| u32::from_str_radix(d, 16).ok())
                    .and_then(char::from_u32);
                match decoded {
                    Some(decoded) => {
                        self.pos += 4;
                        decoded
                    }
                    None => return Err(self.error_at(backslash, LexError::InvalidEscape('u'))),
                }
            }
            '0'..='7' => {
                let mut value = c.to_digit(8).unwrap_or(0);
                let max_digits = if c <= '3' { 2 } else { 1 };
                for _ in 0..max_digits {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(digit) => {
                            value = value * 8 + digit;
                            self.bump();
                        }
                        None => break,
                    }
                }
                char::from_u32(value).unwrap_or('\0')
            }
            other => return Err(self.error_at(backslash, LexError::InvalidEscape(other))),
        };
        Ok(Some(escaped))
    }

    pub(super) fn number(&mut self) -> Result<Tok, CompileError> {
        let start = self.pos;
        let mut decimal = false;
        if self.starts_with("0x") || self.starts_with("0X") {
            self.pos += 2;
            while self
                .peek()
                .is_some_and(|c| c.is_ascii_hexdigit() || c == '_')
            {
                self.bump();
            }
        } else {
            self.digits();
            if self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
                decimal = true;
                self.bump();
                self.digits();
            }
            if matches!(self.peek(), Some('e' | 'E')) {
                let sign = usize::from(matches!(self.peek_at(1), Some('+' | '-')));
                if self.peek_at(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                    decimal = true;
                    self.pos += 1 + sign;
                    self.digits();
                }
            }
        }
        let body_end = self.pos;
        let fractional = decimal;
        let mut suffix = None;
        if let Some(found @ ('l' | 'L' | 'i' | 'I' | 'g' | 'G' | 'd' | 'D' | 'f' | 'F')) =
            self.peek()
        {
            decimal |= matches!(found, 'd' | 'D' | 'f' | 'F');
            suffix = Some(found.to_ascii_uppercase());
            self.bump();
        }
        if self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
            while self.peek().is_some_and(|c| c == '_' || c.is_alphanumeric()) {
                self.bump();
            }
            let text = self
                .text
                .get(start..self.pos)
                .unwrap_or_default()
                .to_owned();
            return Err(self.error_at(start, LexError::InvalidNumber(text)));
        }
        let text = self
            .text
            .get(start..self.pos)
            .unwrap_or_default()
            .to_owned();
        let body: String = self
            .text
            .get(start..body_end)
            .unwrap_or_default()
            .chars()
            .filter(|&c| c != '_')
            .collect();
        // As in Java and SkyWalking's grammars: `L` and `I` only on integers, and an integer
        // literal must fit its type (int or long; a bare one is a long when it is too big for an
        // int). Only `G` (BigInteger/BigDecimal) makes an arbitrarily large integer.
        if fractional && matches!(suffix, Some('L' | 'I')) {
            return Err(self.error_at(start, LexError::IntegerSuffixOnDecimal(text)));
        }
        let value = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            if hex.is_empty() {
                return Err(self.error_at(start, LexError::InvalidNumber(text)));
            }
            i64::from_str_radix(hex, 16).ok().map(NumberValue::Integer)
        } else if decimal {
            body.parse::<f64>().ok().map(NumberValue::Decimal)
        } else if suffix == Some('G') {
            body.parse::<i64>()
                .ok()
                .map(NumberValue::Integer)
                .or_else(|| body.parse::<f64>().ok().map(NumberValue::Decimal))
        } else {
            body.parse::<i64>().ok().map(NumberValue::Integer)
        };
        match value {
            Some(NumberValue::Integer(integer))
                if suffix == Some('I') && i32::try_from(integer).is_err() =>
            {
                Err(self.error_at(start, LexError::IntegerOutOfRange(text)))
            }
            Some(value) => Ok(Tok::Number(Number { text, value })),
            None if !decimal => Err(self.error_at(start, LexError::IntegerOutOfRange(text))),
            None => Err(self.error_at(start, LexError::InvalidNumber(text))),
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '_') {
            self.bump();
        }
    }
}

/// The characters [`Lexer::escape`] decodes after a backslash (Groovy's escapes).
fn is_java_escape(c: char) -> bool {
    matches!(
        c,
        'n' | 't' | 'r' | 'b' | 'f' | 's' | '\\' | '\'' | '"' | '$' | '/' | '\n' | 'u' | '0'..='7'
    )
}
