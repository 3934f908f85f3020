//! Tokens of the Groovy subset: kinds, keywords, punctuation, and how each reads in a message.

use super::ast::{Number, Span, StrDelimiter, StrLit};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Kw(Keyword),
    Number(Number),
    Str(StrLit),
    /// A string with interpolation; each `Interp` holds the tokens of one `${...}` (ending in Eof).
    GStr {
        parts: Vec<RawPart>,
        delimiter: StrDelimiter,
    },
    Punct(Punct),
    Newline,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawPart {
    Text(String),
    Interp(Vec<Token>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    Def,
    If,
    Else,
    Return,
    As,
    In,
    True,
    False,
    Null,
}

impl Keyword {
    pub(super) fn from_word(word: &str) -> Option<Keyword> {
        Some(match word {
            "def" => Keyword::Def,
            "if" => Keyword::If,
            "else" => Keyword::Else,
            "return" => Keyword::Return,
            "as" => Keyword::As,
            "in" => Keyword::In,
            "true" => Keyword::True,
            "false" => Keyword::False,
            "null" => Keyword::Null,
            _ => return None,
        })
    }

    pub(crate) fn text(self) -> &'static str {
        match self {
            Keyword::Def => "def",
            Keyword::If => "if",
            Keyword::Else => "else",
            Keyword::Return => "return",
            Keyword::As => "as",
            Keyword::In => "in",
            Keyword::True => "true",
            Keyword::False => "false",
            Keyword::Null => "null",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Semicolon,
    Dot,
    SafeDot,
    ColonColon,
    Arrow,
    Assign,
    PlusAssign,
    MinusAssign,
    StarAssign,
    SlashAssign,
    Eq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    Not,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Question,
    Elvis,
    RegexFind,
    RegexMatch,
}

impl Punct {
    pub(crate) fn text(self) -> &'static str {
        match self {
            Punct::LParen => "(",
            Punct::RParen => ")",
            Punct::LBracket => "[",
            Punct::RBracket => "]",
            Punct::LBrace => "{",
            Punct::RBrace => "}",
            Punct::Comma => ",",
            Punct::Colon => ":",
            Punct::Semicolon => ";",
            Punct::Dot => ".",
            Punct::SafeDot => "?.",
            Punct::ColonColon => "::",
            Punct::Arrow => "->",
            Punct::Assign => "=",
            Punct::PlusAssign => "+=",
            Punct::MinusAssign => "-=",
            Punct::StarAssign => "*=",
            Punct::SlashAssign => "/=",
            Punct::Eq => "==",
            Punct::NotEq => "!=",
            Punct::Lt => "<",
            Punct::Le => "<=",
            Punct::Gt => ">",
            Punct::Ge => ">=",
            Punct::AndAnd => "&&",
            Punct::OrOr => "||",
            Punct::Not => "!",
            Punct::Plus => "+",
            Punct::Minus => "-",
            Punct::Star => "*",
            Punct::Slash => "/",
            Punct::Percent => "%",
            Punct::Question => "?",
            Punct::Elvis => "?:",
            Punct::RegexFind => "=~",
            Punct::RegexMatch => "==~",
        }
    }
}

/// The punctuation at the start of `rest` (longest match) and its length in bytes. `/` is not
/// here: whether it divides or starts a regex depends on the previous token.
pub(super) fn punctuation(rest: &[u8]) -> Option<(usize, Punct)> {
    use Punct as P;
    let second = rest.get(1).copied();
    let third = rest.get(2).copied();
    let (len, punct) = match (*rest.first()?, second, third) {
        (b'=', Some(b'='), Some(b'~')) => (3, P::RegexMatch),
        (b'=', Some(b'='), _) => (2, P::Eq),
        (b'=', Some(b'~'), _) => (2, P::RegexFind),
        (b'=', ..) => (1, P::Assign),
        (b'?', Some(b'.'), _) => (2, P::SafeDot),
        (b'?', Some(b':'), _) => (2, P::Elvis),
        (b'?', ..) => (1, P::Question),
        (b':', Some(b':'), _) => (2, P::ColonColon),
        (b':', ..) => (1, P::Colon),
        (b'-', Some(b'>'), _) => (2, P::Arrow),
        (b'-', Some(b'='), _) => (2, P::MinusAssign),
        (b'-', ..) => (1, P::Minus),
        (b'!', Some(b'='), _) => (2, P::NotEq),
        (b'!', ..) => (1, P::Not),
        (b'<', Some(b'='), _) => (2, P::Le),
        (b'<', ..) => (1, P::Lt),
        (b'>', Some(b'='), _) => (2, P::Ge),
        (b'>', ..) => (1, P::Gt),
        (b'&', Some(b'&'), _) => (2, P::AndAnd),
        (b'|', Some(b'|'), _) => (2, P::OrOr),
        (b'+', Some(b'='), _) => (2, P::PlusAssign),
        (b'+', ..) => (1, P::Plus),
        (b'*', Some(b'='), _) => (2, P::StarAssign),
        (b'*', ..) => (1, P::Star),
        (b'%', ..) => (1, P::Percent),
        (b'(', ..) => (1, P::LParen),
        (b')', ..) => (1, P::RParen),
        (b'[', ..) => (1, P::LBracket),
        (b']', ..) => (1, P::RBracket),
        (b'{', ..) => (1, P::LBrace),
        (b'}', ..) => (1, P::RBrace),
        (b',', ..) => (1, P::Comma),
        (b';', ..) => (1, P::Semicolon),
        (b'.', ..) => (1, P::Dot),
        _ => return None,
    };
    Some((len, punct))
}

impl Tok {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("'{name}'"),
            Tok::Kw(keyword) => format!("'{}'", keyword.text()),
            Tok::Number(number) => format!("number {}", number.text),
            Tok::Str(_) | Tok::GStr { .. } => "string".to_owned(),
            Tok::Punct(punct) => format!("'{}'", punct.text()),
            Tok::Newline => "end of line".to_owned(),
            Tok::Eof => "end of input".to_owned(),
        }
    }

    /// Whether a `/` after this token is division (an operand just ended) rather than a regex.
    pub(super) fn ends_operand(&self) -> bool {
        matches!(
            self,
            Tok::Ident(_)
                | Tok::Number(_)
                | Tok::Str(_)
                | Tok::GStr { .. }
                | Tok::Kw(Keyword::True | Keyword::False | Keyword::Null)
                | Tok::Punct(Punct::RParen | Punct::RBracket | Punct::RBrace)
        )
    }
}
