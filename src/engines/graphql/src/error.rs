//! Error types: the GraphQL response error (`GraphQLError`), the SDL error (`SchemaError`) and
//! the lexer/parser's `SyntaxError`, which becomes either of the two.

use serde_json::{Map, Value as Json, json};

/// One step of a response path: an object key (alias or field name) or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// An error as it appears in a response's `errors` list.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphQLError {
    pub message: String,
    /// (line, column), both 1-based, in the request document.
    pub locations: Vec<(usize, usize)>,
    pub path: Vec<PathSegment>,
}

impl GraphQLError {
    pub fn new(message: impl Into<String>) -> Self {
        GraphQLError { message: message.into(), locations: Vec::new(), path: Vec::new() }
    }

    pub fn at(message: impl Into<String>, loc: (usize, usize)) -> Self {
        GraphQLError { message: message.into(), locations: vec![loc], path: Vec::new() }
    }

    /// The spec's error object; `locations` and `path` are left out when empty.
    pub fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("message".into(), Json::String(self.message.clone()));
        if !self.locations.is_empty() {
            let locs = self.locations.iter().map(|(l, c)| json!({"line": l, "column": c})).collect();
            m.insert("locations".into(), Json::Array(locs));
        }
        if !self.path.is_empty() {
            let path = self
                .path
                .iter()
                .map(|p| match p {
                    PathSegment::Key(k) => Json::String(k.clone()),
                    PathSegment::Index(i) => json!(i),
                })
                .collect();
            m.insert("path".into(), Json::Array(path));
        }
        Json::Object(m)
    }
}

impl std::fmt::Display for GraphQLError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A lexer or parser failure at a source position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} at line {line} column {col}")]
pub struct SyntaxError {
    pub message: String,
    pub line: usize,
    pub col: usize,
}

impl From<SyntaxError> for GraphQLError {
    fn from(e: SyntaxError) -> Self {
        GraphQLError::at(format!("{} at line {} column {}", e.message, e.line, e.col), (e.line, e.col))
    }
}

/// Why SDL text could not become a `Schema`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("schema syntax error at {line}:{col}: {message}")]
    Syntax { message: String, line: usize, col: usize },
    #[error("schema error at {line}:{col}: {message}")]
    Invalid { message: String, line: usize, col: usize },
}

impl From<SyntaxError> for SchemaError {
    fn from(e: SyntaxError) -> Self {
        SchemaError::Syntax { message: e.message, line: e.line, col: e.col }
    }
}

/// `{"errors": [...]}` for a request that failed before execution (no `data` key, per spec).
pub fn error_response(errors: &[GraphQLError]) -> Json {
    json!({ "errors": errors.iter().map(GraphQLError::to_json).collect::<Vec<_>>() })
}
