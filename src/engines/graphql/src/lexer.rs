//! The GraphQL lexer, shared by executable documents and SDL.
//!
//! It turns the whole source into a token vector up front, in one loop with no recursion, so
//! no input can exhaust the stack here; the parsers then bound their own nesting depth.
//! Commas, whitespace, line terminators, `#` comments and a leading unicode BOM are ignored
//! as the spec's "ignored tokens". Positions are 1-based line and column (columns count
//! characters, not bytes).

use crate::error::SyntaxError;

/// One token kind. Strings (plain and block) are already unescaped/dedented.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// One of `! $ & ( ) : = @ [ ] { } |`.
    Punct(char),
    /// `...`
    Spread,
    Name(String),
    /// Integer literal text, kept verbatim so coercion decides the range.
    Int(String),
    /// Float literal text, kept verbatim.
    Float(String),
    Str(String),
    Eof,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

impl Tok {
    /// The token as graphql-java names an "offending token" in syntax errors.
    pub fn describe(&self) -> String {
        match self {
            Tok::Punct(c) => c.to_string(),
            Tok::Spread => "...".to_string(),
            Tok::Name(n) | Tok::Int(n) | Tok::Float(n) => n.clone(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Eof => "<EOF>".to_string(),
        }
    }
}

struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    src: &'a str,
    line: usize,
    col: usize,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().map(|&(_, c)| c)
    }
    /// The character after the next one, for `...` and `"""` look-ahead.
    fn peek_at(&self, n: usize) -> Option<char> {
        let pos = self.chars.clone().next().map(|(i, _)| i)?;
        self.src.get(pos..)?.chars().nth(n)
    }
    fn bump(&mut self) -> Option<char> {
        let (_, c) = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else if c == '\r' {
            // "\r\n" counts as one line terminator: the '\n' will advance the line.
            if self.peek() != Some('\n') {
                self.line += 1;
                self.col = 1;
            }
        } else {
            self.col += 1;
        }
        Some(c)
    }
    fn err(&self, line: usize, col: usize, msg: impl Into<String>) -> SyntaxError {
        SyntaxError { message: msg.into(), line, col }
    }
}

/// Tokenizes `src`; the last token is always `Tok::Eof`.
pub fn tokenize(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut c = Cursor { chars: src.char_indices().peekable(), src, line: 1, col: 1 };
    let mut out = Vec::new();
    loop {
        let (line, col) = (c.line, c.col);
        let Some(ch) = c.peek() else {
            out.push(Token { tok: Tok::Eof, line, col });
            return Ok(out);
        };
        let tok = match ch {
            '\u{feff}' | ' ' | '\t' | ',' | '\n' | '\r' => {
                c.bump();
                continue;
            }
            '#' => {
                while let Some(x) = c.peek() {
                    if x == '\n' || x == '\r' {
                        break;
                    }
                    c.bump();
                }
                continue;
            }
            '!' | '$' | '&' | '(' | ')' | ':' | '=' | '@' | '[' | ']' | '{' | '}' | '|' => {
                c.bump();
                Tok::Punct(ch)
            }
            '.' => {
                if c.peek_at(1) == Some('.') && c.peek_at(2) == Some('.') {
                    c.bump();
                    c.bump();
                    c.bump();
                    Tok::Spread
                } else {
                    return Err(c.err(line, col, "Invalid syntax: unexpected '.'"));
                }
            }
            '"' => {
                if c.peek_at(1) == Some('"') && c.peek_at(2) == Some('"') {
                    Tok::Str(block_string(&mut c, line, col)?)
                } else {
                    Tok::Str(plain_string(&mut c, line, col)?)
                }
            }
            '-' | '0'..='9' => number(&mut c, line, col)?,
            '_' | 'a'..='z' | 'A'..='Z' => {
                let mut s = String::new();
                while let Some(x) = c.peek() {
                    if x == '_' || x.is_ascii_alphanumeric() {
                        s.push(x);
                        c.bump();
                    } else {
                        break;
                    }
                }
                Tok::Name(s)
            }
            other => {
                return Err(c.err(line, col, format!("Invalid syntax: unexpected character '{}'", other.escape_debug())));
            }
        };
        out.push(Token { tok, line, col });
    }
}

fn digits(c: &mut Cursor<'_>, s: &mut String) -> usize {
    let mut n = 0;
    while let Some(x) = c.peek().filter(char::is_ascii_digit) {
        s.push(x);
        c.bump();
        n += 1;
    }
    n
}

fn number(c: &mut Cursor<'_>, line: usize, col: usize) -> Result<Tok, SyntaxError> {
    let mut s = String::new();
    if c.peek() == Some('-') {
        s.push('-');
        c.bump();
    }
    let int_start = s.len();
    if digits(c, &mut s) == 0 {
        return Err(c.err(line, col, "Invalid syntax: expected digit in number"));
    }
    // The spec forbids leading zeros ("01"): they read as a likely mistake.
    if s.len() - int_start > 1 && s.get(int_start..).is_some_and(|d| d.starts_with('0')) {
        return Err(c.err(line, col, format!("Invalid syntax: invalid number '{s}'")));
    }
    let mut float = false;
    if c.peek() == Some('.') {
        float = true;
        s.push('.');
        c.bump();
        if digits(c, &mut s) == 0 {
            return Err(c.err(line, col, format!("Invalid syntax: invalid number '{s}'")));
        }
    }
    if matches!(c.peek(), Some('e' | 'E')) {
        float = true;
        s.push('e');
        c.bump();
        if let Some(sign @ ('+' | '-')) = c.peek() {
            s.push(sign);
            c.bump();
        }
        if digits(c, &mut s) == 0 {
            return Err(c.err(line, col, format!("Invalid syntax: invalid number '{s}'")));
        }
    }
    // A number directly followed by a name start or '.' is malformed (e.g. "1x", "1.2.3").
    if let Some(x) = c.peek()
        && (x == '.' || x == '_' || x.is_ascii_alphabetic())
    {
        return Err(c.err(line, col, format!("Invalid syntax: invalid number '{s}{x}'")));
    }
    Ok(if float { Tok::Float(s) } else { Tok::Int(s) })
}

fn plain_string(c: &mut Cursor<'_>, line: usize, col: usize) -> Result<String, SyntaxError> {
    c.bump();
    let mut s = String::new();
    loop {
        let (l, k) = (c.line, c.col);
        match c.bump() {
            None | Some('\n' | '\r') => return Err(c.err(line, col, "Invalid syntax: unterminated string")),
            Some('"') => return Ok(s),
            Some('\\') => match c.bump() {
                Some('"') => s.push('"'),
                Some('\\') => s.push('\\'),
                Some('/') => s.push('/'),
                Some('b') => s.push('\u{8}'),
                Some('f') => s.push('\u{c}'),
                Some('n') => s.push('\n'),
                Some('r') => s.push('\r'),
                Some('t') => s.push('\t'),
                Some('u') => {
                    let hi = hex4(c).ok_or_else(|| c.err(l, k, "Invalid syntax: bad \\u escape"))?;
                    let code = if (0xD800..0xDC00).contains(&hi) {
                        // A surrogate pair written as two escapes ("\uD83D\uDE00").
                        if c.bump() != Some('\\') || c.bump() != Some('u') {
                            return Err(c.err(l, k, "Invalid syntax: unpaired surrogate in \\u escape"));
                        }
                        let lo = hex4(c).filter(|lo| (0xDC00..0xE000).contains(lo));
                        let lo = lo.ok_or_else(|| c.err(l, k, "Invalid syntax: unpaired surrogate in \\u escape"))?;
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    } else {
                        hi
                    };
                    let ch = char::from_u32(code).ok_or_else(|| c.err(l, k, "Invalid syntax: bad \\u escape"))?;
                    s.push(ch);
                }
                _ => return Err(c.err(l, k, "Invalid syntax: bad escape sequence")),
            },
            Some(x) => s.push(x),
        }
    }
}

fn hex4(c: &mut Cursor<'_>) -> Option<u32> {
    let mut v = 0u32;
    for _ in 0..4 {
        v = v * 16 + c.bump()?.to_digit(16)?;
    }
    Some(v)
}

fn block_string(c: &mut Cursor<'_>, line: usize, col: usize) -> Result<String, SyntaxError> {
    for _ in 0..3 {
        c.bump();
    }
    let mut raw = String::new();
    loop {
        match c.bump() {
            None => return Err(c.err(line, col, "Invalid syntax: unterminated block string")),
            Some('"') if c.peek() == Some('"') && c.peek_at(1) == Some('"') => {
                c.bump();
                c.bump();
                return Ok(dedent_block(&raw));
            }
            Some('\\') if c.peek() == Some('"') && c.peek_at(1) == Some('"') && c.peek_at(2) == Some('"') => {
                // \""" is the one escape a block string has.
                c.bump();
                c.bump();
                c.bump();
                raw.push_str("\"\"\"");
            }
            Some(x) => raw.push(x),
        }
    }
}

/// The spec's BlockStringValue(): strip the common indentation and blank first/last lines.
pub fn dedent_block(raw: &str) -> String {
    let normalized = raw.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = normalized.split('\n').collect();
    let common = lines
        .iter()
        .skip(1)
        .filter_map(|l| {
            let indent = l.chars().take_while(|c| *c == ' ' || *c == '\t').count();
            (indent < l.chars().count()).then_some(indent)
        })
        .min();
    let mut out: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| match common {
            Some(n) if i > 0 => l.chars().skip(n).collect(),
            _ => (*l).to_string(),
        })
        .collect();
    let blank = |l: &String| l.chars().all(|c| c == ' ' || c == '\t');
    // Drop blank lines at both ends by index: repeated `remove(0)` would be quadratic.
    let start = out.iter().position(|l| !blank(l)).unwrap_or(out.len());
    while out.len() > start && out.last().is_some_and(blank) {
        out.pop();
    }
    out.get(start..).unwrap_or_default().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn ignored_tokens_and_positions() {
        let t = tokenize("\u{feff}# c\n  a,,b").unwrap();
        assert_eq!(t[0].tok, Tok::Name("a".into()));
        assert_eq!((t[0].line, t[0].col), (2, 3));
        assert_eq!((t[1].line, t[1].col), (2, 6));
        assert_eq!(t[2].tok, Tok::Eof);
    }

    #[test]
    fn strings_and_numbers() {
        assert_eq!(toks(r#""a\"\\\n\u00e9\uD83D\uDE00""#)[0], Tok::Str("a\"\\\n\u{e9}\u{1F600}".into()));
        assert_eq!(toks("-12 1.5e3 0")[..3], [Tok::Int("-12".into()), Tok::Float("1.5e3".into()), Tok::Int("0".into())]);
        assert!(tokenize("01").is_err());
        assert!(tokenize("1.").is_err());
        assert!(tokenize("1x").is_err());
        assert!(tokenize("\"abc").is_err());
        assert!(tokenize("\"a\nb\"").is_err());
        assert!(tokenize("\"\\q\"").is_err());
        assert!(tokenize("\"\\uD83D\"").is_err());
        assert!(tokenize("..").is_err());
        assert!(tokenize("?").is_err());
    }

    #[test]
    fn block_strings() {
        assert_eq!(toks("\"\"\"\n    hello\n      world\n  \"\"\"")[0], Tok::Str("hello\n  world".into()));
        assert_eq!(toks(r#""""a \""" b""""#)[0], Tok::Str("a \"\"\" b".into()));
        assert!(tokenize("\"\"\"abc").is_err());
    }
}
