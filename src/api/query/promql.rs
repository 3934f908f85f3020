//! The PromQL hotrule answers: vector selectors, and arithmetic between number literals.
//!
//! - `name`, `name{l="v", l!="v", l=~"re", l!~"re"}`, `{__name__="name", ...}`; strings in `"`,
//!   `'` (Go escapes) or backticks (raw). Regexes are RE2, fully anchored: `^(?s:re)$`.
//! - A selector needs a metric name or one matcher that does not match the empty string.
//! - Number literals (`1`, `0x1f`, `1e3`, `Inf`, `NaN`) and `+ - * / % ^` between them, with
//!   parentheses and unary signs: the result is a scalar. This is what Grafana's data source
//!   "Test" sends (`1+1`).
//!
//! Everything else of PromQL is refused with a message naming the construct
//! (`unsupported PromQL: function call rate()`), so a dashboard shows why a panel is empty.

use super::lexer::{Lexer, Token};
use super::matcher::{MatchOp, Matcher};

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Scalar(f64),
    Selector(Selector),
}

/// A vector selector: AND of its matchers, the metric name as a `__name__` matcher.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// The metric name if the selector fixes it with `name` or `__name__="name"`.
    pub fn metric_name(&self) -> Option<&str> {
        self.matchers.iter().find(|m| m.name == "__name__" && m.op == MatchOp::Equal).map(|m| m.value.as_str())
    }

    /// The value an equality matcher on `label` fixes, when it is not empty.
    pub fn fixed(&self, label: &str) -> Option<&str> {
        self.matchers
            .iter()
            .find(|m| m.name == label && m.op == MatchOp::Equal && !m.value.is_empty())
            .map(|m| m.value.as_str())
    }
}

pub use super::lexer::ParseError;

const AGGREGATIONS: &[&str] = &[
    "sum", "avg", "count", "min", "max", "group", "stddev", "stdvar", "topk", "bottomk", "count_values", "quantile",
    "limitk", "limit_ratio",
];
const SET_OPERATORS: &[&str] = &["and", "or", "unless", "atan2"];

/// An expression while parsing: what it is decides what may follow it.
enum Node {
    Number(f64),
    Selector(Selector),
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
    end: usize,
}

fn unsupported(what: impl Into<String>) -> ParseError {
    ParseError::Unsupported(what.into())
}

/// Parses `text` into a query, or says which construct is not supported.
pub fn parse(text: &str) -> Result<Query, ParseError> {
    let tokens = Lexer { text, pos: 0 }.tokens()?;
    if tokens.is_empty() {
        return Err(ParseError::Syntax { pos: 0, message: "empty query".into() });
    }
    let mut parser = Parser { tokens, at: 0, end: text.len() };
    let node = parser.expression(0)?;
    if let Some((pos, token)) = parser.tokens.get(parser.at) {
        return Err(ParseError::Syntax { pos: *pos, message: format!("unexpected {} after the expression", describe(token)) });
    }
    Ok(match node {
        Node::Number(value) => Query::Scalar(value),
        Node::Selector(selector) => Query::Selector(selector),
    })
}

fn describe(token: &Token) -> String {
    match token {
        Token::Ident(word) => format!("identifier {word:?}"),
        Token::Number(n) => format!("number {n}"),
        Token::Duration(d) => format!("duration {d}"),
        Token::Str(s) => format!("string {s:?}"),
        Token::LBrace => "\"{\"".into(),
        Token::RBrace => "\"}\"".into(),
        Token::LParen => "\"(\"".into(),
        Token::RParen => "\")\"".into(),
        Token::LBracket => "\"[\"".into(),
        Token::RBracket => "\"]\"".into(),
        Token::Comma => "\",\"".into(),
        Token::Colon => "\":\"".into(),
        Token::At => "\"@\"".into(),
        Token::Op(op) => format!("{op:?}"),
    }
}

/// Binding power of the binary operators (PromQL's precedence; `^` is right-associative).
fn binary_power(token: &Token) -> Option<(&'static str, u8, bool)> {
    match token {
        Token::Op(op @ ("+" | "-")) => Some((op, 4, false)),
        Token::Op(op @ ("*" | "/" | "%")) => Some((op, 5, false)),
        Token::Op("^") => Some(("^", 7, true)),
        Token::Op(op @ ("==" | "!=" | "<" | ">" | "<=" | ">=")) => Some((op, 3, false)),
        Token::Ident(word) if word == "and" || word == "unless" => Some((if word == "and" { "and" } else { "unless" }, 2, false)),
        Token::Ident(word) if word == "or" => Some(("or", 1, false)),
        Token::Ident(word) if word == "atan2" => Some(("atan2", 5, false)),
        _ => None,
    }
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(_, token)| token)
    }

    fn pos(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(pos, _)| *pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).map(|(_, token)| token.clone());
        self.at += 1;
        token
    }

    fn syntax(&self, message: impl Into<String>) -> ParseError {
        ParseError::Syntax { pos: self.pos(), message: message.into() }
    }

    fn expect(&mut self, wanted: Token, what: &str) -> Result<(), ParseError> {
        match self.peek() {
            Some(token) if *token == wanted => {
                self.at += 1;
                Ok(())
            }
            Some(token) => Err(self.syntax(format!("expected {what}, found {}", describe(token)))),
            None => Err(self.syntax(format!("expected {what}, found the end of the query"))),
        }
    }

    fn expression(&mut self, min_power: u8) -> Result<Node, ParseError> {
        let mut lhs = self.unary()?;
        while let Some((op, power, right)) = self.peek().and_then(binary_power) {
            if power < min_power {
                break;
            }
            self.at += 1;
            if matches!(op, "==" | "!=" | "<" | ">" | "<=" | ">=" | "and" | "or" | "unless" | "atan2") {
                return Err(unsupported(format!("binary operator {op}")));
            }
            if let Some(Token::Ident(word)) = self.peek()
                && matches!(word.as_str(), "bool" | "on" | "ignoring" | "group_left" | "group_right")
            {
                return Err(unsupported(format!("binary operator {op} with {word} modifier")));
            }
            let rhs = self.expression(if right { power } else { power + 1 })?;
            lhs = match (lhs, rhs) {
                (Node::Number(a), Node::Number(b)) => Node::Number(apply(op, a, b)),
                _ => return Err(unsupported(format!("binary operator {op} on a vector"))),
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        match self.peek() {
            Some(Token::Op(op @ ("+" | "-"))) => {
                let negate = *op == "-";
                self.at += 1;
                // Unary minus binds looser than `^` (`-2^2` is -4), like PromQL.
                match self.expression(6)? {
                    Node::Number(value) => Ok(Node::Number(if negate { -value } else { value })),
                    Node::Selector(_) => Err(unsupported(format!("unary {} on a vector", if negate { "-" } else { "+" }))),
                }
            }
            _ => self.postfix(),
        }
    }

    /// A primary expression, then whatever PromQL may put after it (`[5m]`, `offset`, `@`).
    fn postfix(&mut self) -> Result<Node, ParseError> {
        let node = self.primary()?;
        match self.peek() {
            Some(Token::LBracket) => {
                let window = self.bracket_text();
                if window.contains(':') {
                    Err(unsupported(format!("subquery [{window}]")))
                } else {
                    Err(unsupported(format!("range vector selector [{window}]")))
                }
            }
            Some(Token::Ident(word)) if word == "offset" => Err(unsupported("offset modifier")),
            Some(Token::At) => Err(unsupported("@ modifier")),
            _ => Ok(node),
        }
    }

    /// The text between `[` and `]` (for the message), e.g. `5m` or `5m:1m`.
    fn bracket_text(&self) -> String {
        let mut parts = String::new();
        for (_, token) in self.tokens.iter().skip(self.at + 1) {
            match token {
                Token::RBracket => break,
                Token::Duration(d) => parts.push_str(d),
                Token::Number(n) => parts.push_str(&n.to_string()),
                Token::Colon => parts.push(':'),
                Token::Ident(word) => parts.push_str(word),
                other => parts.push_str(&describe(other)),
            }
        }
        parts
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let Some(token) = self.next() else { return Err(self.syntax("unexpected end of the query")) };
        match token {
            Token::Number(value) => Ok(Node::Number(value)),
            Token::Duration(text) => Err(unsupported(format!("duration literal {text}"))),
            Token::Str(_) => Err(unsupported("string literal")),
            Token::LParen => {
                let inner = self.expression(0)?;
                self.expect(Token::RParen, "\")\"")?;
                Ok(inner)
            }
            Token::LBrace => {
                let matchers = self.matchers()?;
                Ok(Node::Selector(selector(None, matchers)?))
            }
            Token::Ident(word) => self.named(word),
            other => {
                self.at -= 1;
                Err(self.syntax(format!("unexpected {}", describe(&other))))
            }
        }
    }

    /// An identifier in expression position: a function, an aggregation, or a metric name.
    fn named(&mut self, word: String) -> Result<Node, ParseError> {
        let lowered = word.to_ascii_lowercase();
        if AGGREGATIONS.contains(&lowered.as_str())
            && matches!(self.peek(), Some(Token::LParen) | Some(Token::Ident(_)))
            && !matches!(self.peek(), Some(Token::Ident(next)) if !matches!(next.as_str(), "by" | "without"))
        {
            return Err(unsupported(format!("aggregation {word}()")));
        }
        if matches!(self.peek(), Some(Token::LParen)) {
            return Err(unsupported(format!("function call {word}()")));
        }
        if SET_OPERATORS.contains(&lowered.as_str()) || matches!(lowered.as_str(), "bool" | "offset" | "by" | "without" | "on" | "ignoring") {
            return Err(ParseError::Syntax { pos: self.pos(), message: format!("unexpected keyword {word:?}") });
        }
        let matchers = if matches!(self.peek(), Some(Token::LBrace)) {
            self.at += 1;
            self.matchers()?
        } else {
            Vec::new()
        };
        Ok(Node::Selector(selector(Some(word), matchers)?))
    }

    /// `l op "v", ...}` after the `{`.
    fn matchers(&mut self) -> Result<Vec<Matcher>, ParseError> {
        let mut matchers = Vec::new();
        loop {
            match self.next() {
                Some(Token::RBrace) => return Ok(matchers),
                Some(Token::Ident(name)) => {
                    if !is_label_name(&name) {
                        self.at -= 1;
                        return Err(self.syntax(format!("invalid label name {name:?}")));
                    }
                    let op = match self.next() {
                        Some(Token::Op("=")) => MatchOp::Equal,
                        Some(Token::Op("!=")) => MatchOp::NotEqual,
                        Some(Token::Op("=~")) => MatchOp::Regex,
                        Some(Token::Op("!~")) => MatchOp::NotRegex,
                        other => {
                            self.at -= 1;
                            let found = other.as_ref().map_or("the end of the query".to_string(), describe);
                            return Err(self.syntax(format!("expected a label matching operator (=, !=, =~, !~) after {name:?}, found {found}")));
                        }
                    };
                    let value = match self.next() {
                        Some(Token::Str(value)) => value,
                        other => {
                            self.at -= 1;
                            let found = other.as_ref().map_or("the end of the query".to_string(), describe);
                            return Err(self.syntax(format!("expected a quoted string for label {name:?}, found {found}")));
                        }
                    };
                    matchers.push(Matcher::new(&name, op, &value)?);
                    match self.next() {
                        Some(Token::Comma) => {}
                        Some(Token::RBrace) => return Ok(matchers),
                        other => {
                            self.at -= 1;
                            let found = other.as_ref().map_or("the end of the query".to_string(), describe);
                            return Err(self.syntax(format!("expected \",\" or \"}}\" in label matchers, found {found}")));
                        }
                    }
                }
                Some(Token::Str(_)) => return Err(unsupported("quoted label or metric names in braces")),
                other => {
                    self.at -= 1;
                    let found = other.as_ref().map_or("the end of the query".to_string(), describe);
                    return Err(self.syntax(format!("expected a label name or \"}}\", found {found}")));
                }
            }
        }
    }
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A selector from a metric name and matchers, checked as Prometheus checks it.
fn selector(name: Option<String>, mut matchers: Vec<Matcher>) -> Result<Selector, ParseError> {
    if let Some(name) = name {
        if let Some(other) = matchers.iter().find(|m| m.name == "__name__") {
            return Err(ParseError::Syntax { pos: 0, message: format!("metric name must not be set twice: {name:?} or {:?}", other.value) });
        }
        matchers.insert(0, Matcher::new("__name__", MatchOp::Equal, &name)?);
    }
    if matchers.iter().all(|m| m.matches("")) {
        return Err(ParseError::Syntax {
            pos: 0,
            message: "vector selector must contain at least one non-empty matcher".into(),
        });
    }
    Ok(Selector { matchers })
}

fn apply(op: &str, a: f64, b: f64) -> f64 {
    match op {
        "+" => a + b,
        "-" => a - b,
        "*" => a * b,
        "/" => a / b,
        "%" => a % b,
        _ => a.powf(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector_of(text: &str) -> Selector {
        match parse(text) {
            Ok(Query::Selector(selector)) => selector,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn rendered(selector: &Selector) -> Vec<String> {
        selector.matchers.iter().map(|m| format!("{}{}{}", m.name, m.op.as_str(), m.value)).collect()
    }

    #[test]
    fn valid_selectors() {
        let table: &[(&str, &[&str])] = &[
            ("up", &["__name__=up"]),
            ("meter_vm_cpu_total_percentage", &["__name__=meter_vm_cpu_total_percentage"]),
            ("job:rate5m", &["__name__=job:rate5m"]),
            ("up{}", &["__name__=up"]),
            ("up{job=\"a\"}", &["__name__=up", "job=a"]),
            ("up{job=\"a\",}", &["__name__=up", "job=a"]),
            ("up{job!=\"a\", i=~\"b.*\", k!~'c'}", &["__name__=up", "job!=a", "i=~b.*", "k!~c"]),
            ("{__name__=\"up\"}", &["__name__=up"]),
            ("{__name__=~\"meter_.*\"}", &["__name__=~meter_.*"]),
            ("{job=\"x\"}", &["job=x"]),
            ("{job=~\".+\"}", &["job=~.+"]),
            ("{job=\"\", svc=\"x\"}", &["job=", "svc=x"]),
            ("up{a=`raw\\n`}", &["__name__=up", "a=raw\\n"]),
            ("up{a=\"tab\\there\"}", &["__name__=up", "a=tab\there"]),
            ("up{a='it\\'s'}", &["__name__=up", "a=it's"]),
            ("up{a=\"\\x41\\101\\u00e9\\U0001F600\"}", &["__name__=up", "a=AAé😀"]),
            ("  up  # a comment", &["__name__=up"]),
            ("(up)", &["__name__=up"]),
            ("up{sum=\"x\"}", &["__name__=up", "sum=x"]),
        ];
        for (text, want) in table {
            assert_eq!(rendered(&selector_of(text)), *want, "{text}");
        }
    }

    #[test]
    fn scalars_evaluate() {
        let table: &[(&str, f64)] = &[
            ("1", 1.0),
            ("1+1", 2.0),
            ("2 * 3 + 1", 7.0),
            ("2 ^ 3 ^ 2", 512.0),
            ("-2 ^ 2", -4.0),
            ("(1 + 2) * 3", 9.0),
            ("7 % 4", 3.0),
            ("0x10", 16.0),
            ("1e3", 1000.0),
            ("1 / 0", f64::INFINITY),
            ("-Inf", f64::NEG_INFINITY),
        ];
        for (text, want) in table {
            assert_eq!(parse(text), Ok(Query::Scalar(*want)), "{text}");
        }
        assert!(matches!(parse("NaN"), Ok(Query::Scalar(v)) if v.is_nan()));
    }

    #[test]
    fn unsupported_constructs_are_named() {
        let table: &[(&str, &str)] = &[
            ("rate(up[5m])", "function call rate()"),
            ("abs(up)", "function call abs()"),
            ("sum(up)", "aggregation sum()"),
            ("sum by (job) (up)", "aggregation sum()"),
            ("topk(3, up)", "aggregation topk()"),
            ("up[5m]", "range vector selector [5m]"),
            ("up{job=\"a\"}[1h30m]", "range vector selector [1h30m]"),
            ("up[5m:1m]", "subquery [5m:1m]"),
            ("up offset 5m", "offset modifier"),
            ("up @ 1609746000", "@ modifier"),
            ("up + 1", "binary operator + on a vector"),
            ("1 * up", "binary operator * on a vector"),
            ("up / up", "binary operator / on a vector"),
            ("up > 1", "binary operator >"),
            ("up and up", "binary operator and"),
            ("up or up", "binary operator or"),
            ("1 == bool 1", "binary operator =="),
            ("-up", "unary - on a vector"),
            ("\"text\"", "string literal"),
            ("5m", "duration literal 5m"),
        ];
        for (text, want) in table {
            assert_eq!(parse(text), Err(ParseError::Unsupported(want.to_string())), "{text}");
            assert_eq!(parse(text).err().map(|e| e.to_string()), Some(format!("unsupported PromQL: {want}")), "{text}");
        }
    }

    #[test]
    fn syntax_errors_say_where_and_why() {
        for text in [
            "", "up{", "up{job}", "up{job=}", "up{job=a}", "up{job=\"a\"", "up{\"job\"", "up{job=\"unterminated}", "(up",
            "up up", "up{job=\"\\q\"}", "up{job=\"\\xZZ\"}", "{}", "{job=\"\"}", "{job=~\".*\"}", "{job!~\"x\"}",
            "up{__name__=\"x\"}", "1 +", "up{0a=\"x\"}", "up{job=\"\\xff\"}", "$",
        ] {
            let error = parse(text).expect_err(text);
            assert!(matches!(error, ParseError::Syntax { .. } | ParseError::Unsupported(_)), "{text}: {error:?}");
        }
        assert!(parse("{job=~\".*\"}").unwrap_err().to_string().contains("at least one non-empty matcher"));
        assert!(parse("up{job=~\"(\"}").unwrap_err().to_string().contains("regular expression"));
    }
}
