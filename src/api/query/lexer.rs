//! The PromQL lexer: tokens with their byte offsets; strings decoded with Go's escapes
//! (`\a \b \f \n \r \t \v \\`, the opening quote, `\xHH`, octal `\OOO`, `\uHHHH`,
//! `\UHHHHHHHH`; none in backticks); numbers (decimal, hex, `Inf`, `NaN`) and durations.

use super::matcher::MatcherError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Ident(String),
    Number(f64),
    Duration(String),
    Str(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Colon,
    At,
    /// Operators and matchers, as written: `=`, `!=`, `=~`, `!~`, `==`, `<`, `+` ...
    Op(&'static str),
}

pub(super) struct Lexer<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl<'a> Lexer<'a> {
    fn error(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError::Syntax { pos, message: message.into() }
    }

    pub(super) fn tokens(mut self) -> Result<Vec<(usize, Token)>, ParseError> {
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            let start = self.pos;
            if c.is_whitespace() {
                self.pos += c.len_utf8();
                continue;
            }
            if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
                continue;
            }
            let token = match c {
                '{' => self.single(Token::LBrace),
                '}' => self.single(Token::RBrace),
                '(' => self.single(Token::LParen),
                ')' => self.single(Token::RParen),
                '[' => self.single(Token::LBracket),
                ']' => self.single(Token::RBracket),
                ',' => self.single(Token::Comma),
                '@' => self.single(Token::At),
                '"' | '\'' | '`' => Token::Str(self.string(c)?),
                '0'..='9' | '.' => self.number()?,
                c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                    let word = self.word();
                    if word == ":" {
                        Token::Colon
                    } else if word.eq_ignore_ascii_case("inf") {
                        Token::Number(f64::INFINITY)
                    } else if word.eq_ignore_ascii_case("nan") {
                        Token::Number(f64::NAN)
                    } else {
                        Token::Ident(word)
                    }
                }
                _ => self.operator()?,
            };
            out.push((start, token));
        }
        Ok(out)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn single(&mut self, token: Token) -> Token {
        self.pos += 1;
        token
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            self.pos += 1;
        }
        // A lone `:` (subquery step separator) is a word of its own.
        if self.text[start..self.pos].starts_with(':') && self.pos - start > 1 && !self.text[start..self.pos].starts_with("::") {
            self.pos = start + 1;
        }
        self.text[start..self.pos].to_string()
    }

    fn operator(&mut self) -> Result<Token, ParseError> {
        const OPERATORS: [&str; 16] = ["=~", "!~", "!=", "==", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "^", "!"];
        let rest = &self.text[self.pos..];
        match OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            Some(op) if *op != "!" => {
                self.pos += op.len();
                Ok(Token::Op(op))
            }
            _ => Err(self.error(self.pos, format!("unexpected character {:?}", rest.chars().next().unwrap_or(' ')))),
        }
    }

    /// A number literal (decimal, hex, exponent), or a duration (`5m`, `1h30m`).
    fn number(&mut self) -> Result<Token, ParseError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_') {
            let c = self.bump().unwrap_or(' ');
            if matches!(c, 'e' | 'E') && matches!(self.peek(), Some('+' | '-')) && !self.text[start..].starts_with("0x") {
                self.bump();
            }
        }
        let text = &self.text[start..self.pos];
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            return i64::from_str_radix(hex, 16)
                .map(|v| Token::Number(v as f64))
                .map_err(|_| self.error(start, format!("bad number literal {text:?}")));
        }
        if let Ok(value) = text.parse::<f64>() {
            return Ok(Token::Number(value));
        }
        if super::time::parse_prom_duration(text).is_some() {
            return Ok(Token::Duration(text.to_string()));
        }
        Err(self.error(start, format!("bad number or duration literal {text:?}")))
    }

    /// A string literal, its Go escapes decoded (none in backticks).
    fn string(&mut self, quote: char) -> Result<String, ParseError> {
        let start = self.pos;
        self.bump();
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.bump() else { return Err(self.error(start, "unterminated quoted string")) };
            if c == quote {
                break;
            }
            if quote == '`' {
                push_char(&mut bytes, c);
                continue;
            }
            match c {
                '\n' => return Err(self.error(start, "unterminated quoted string")),
                '\\' => self.escape(quote, &mut bytes)?,
                _ => push_char(&mut bytes, c),
            }
        }
        String::from_utf8(bytes).map_err(|_| self.error(start, "string literal is not valid UTF-8"))
    }

    fn escape(&mut self, quote: char, bytes: &mut Vec<u8>) -> Result<(), ParseError> {
        let at = self.pos - 1;
        let Some(c) = self.bump() else { return Err(self.error(at, "unterminated escape sequence")) };
        let simple = match c {
            'a' => Some(0x07),
            'b' => Some(0x08),
            'f' => Some(0x0c),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(0x0b),
            '\\' => Some(b'\\'),
            c if c == quote => Some(c as u8),
            _ => None,
        };
        if let Some(byte) = simple {
            bytes.push(byte);
            return Ok(());
        }
        let (digits, radix, is_char) = match c {
            '0'..='7' => {
                self.pos -= 1;
                (3, 8, false)
            }
            'x' => (2, 16, false),
            'u' => (4, 16, true),
            'U' => (8, 16, true),
            other => return Err(self.error(at, format!("unknown escape sequence \\{other}"))),
        };
        let text = self.text.get(self.pos..self.pos + digits).unwrap_or("");
        let value = u32::from_str_radix(text, radix)
            .ok()
            .filter(|_| text.len() == digits && text.chars().all(|c| c.is_digit(radix)))
            .ok_or_else(|| self.error(at, format!("invalid escape sequence \\{c}{text}")))?;
        self.pos += digits;
        if is_char {
            let ch = char::from_u32(value).ok_or_else(|| self.error(at, format!("escape sequence \\{c}{text} is not a character")))?;
            push_char(bytes, ch);
        } else {
            let byte = u8::try_from(value).map_err(|_| self.error(at, format!("octal escape \\{text} is above 255")))?;
            bytes.push(byte);
        }
        Ok(())
    }
}

fn push_char(bytes: &mut Vec<u8>, c: char) {
    let mut buffer = [0u8; 4];
    bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unsupported PromQL: {0}")]
    Unsupported(String),
    #[error("parse error at char {pos}: {message}")]
    Syntax { pos: usize, message: String },
    #[error(transparent)]
    Matcher(#[from] MatcherError),
}
