//! The tokenizer, following `MQELexer.g4`: longest match wins, ties go to the rule listed first
//! (so `100` is INTEGER, `100abc` and `avg_x` are names, `avg` is a keyword), `bool`, `asc` and
//! `des` are case-insensitive, quoted strings have no escapes, whitespace is skipped.

use crate::parser::ParseError;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Name(String),
    Int(String),
    Dec(String),
    /// A quoted string: the text between the quotes and the quote character.
    Str(String, char),
    Kw(&'static str),
    /// Punctuation and operators, as written (`(`, `==`, `&&`, ...).
    P(&'static str),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    /// Byte offset in the input.
    pub pos: usize,
}

const KEYWORDS: &[&str] = &[
    "_", "avg", "count", "latest", "max", "min", "sum", "abs", "ceil", "floor", "round", "increase", "rate", "top_n",
    "top_n_of", "view_as_seq", "is_present", "relabels", "aggregate_labels", "sort_values", "sort_label_values",
    "attr0", "attr1", "attr2", "attr3", "attr4", "attr5", "baseline", "value", "upper", "lower",
];
const CASE_INSENSITIVE: &[&str] = &["bool", "asc", "des"];
const PUNCT: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", ".", ",", "(", ")", "[", "]", "{", "}", "=", "-", "+", "*", "/", "%", "<", ">",
];

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub fn tokenize(input: &str) -> Result<Vec<Token>, ParseError> {
    let bytes = input.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
            i += 1;
            continue;
        }
        let start = i;
        if is_name_char(b) {
            while i < bytes.len() && is_name_char(bytes[i]) {
                i += 1;
            }
            let word = &input[start..i];
            let tok = if word.bytes().all(|c| c.is_ascii_digit()) {
                let digits_after = bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(|c| c.is_ascii_digit());
                if digits_after {
                    i += 1;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                    Tok::Dec(input[start..i].to_string())
                } else {
                    Tok::Int(word.to_string())
                }
            } else if let Some(k) = KEYWORDS.iter().find(|k| **k == word) {
                Tok::Kw(k)
            } else if let Some(k) = CASE_INSENSITIVE.iter().find(|k| k.eq_ignore_ascii_case(word)) {
                Tok::Kw(k)
            } else {
                Tok::Name(word.to_string())
            };
            out.push(Token { tok, pos: start });
            continue;
        }
        if b == b'\'' || b == b'"' {
            match input[i + 1..].find(b as char) {
                Some(len) => {
                    let text = input[i + 1..i + 1 + len].to_string();
                    out.push(Token { tok: Tok::Str(text, b as char), pos: start });
                    i += len + 2;
                    continue;
                }
                None => return Err(ParseError::at(input, start, "unterminated quoted string".to_string())),
            }
        }
        if let Some(p) = PUNCT.iter().find(|p| input[i..].starts_with(**p)) {
            out.push(Token { tok: Tok::P(p), pos: start });
            i += p.len();
            continue;
        }
        let ch = input[i..].chars().next().unwrap_or('?');
        return Err(ParseError::at(input, start, format!("token recognition error at: '{}'", ch)));
    }
    out.push(Token { tok: Tok::Eof, pos: input.len() });
    Ok(out)
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Name(s) | Tok::Int(s) | Tok::Dec(s) => format!("'{}'", s),
            Tok::Str(s, q) => format!("'{q}{s}{q}'"),
            Tok::Kw(k) | Tok::P(k) => format!("'{}'", k),
            Tok::Eof => "<EOF>".to_string(),
        }
    }
}
