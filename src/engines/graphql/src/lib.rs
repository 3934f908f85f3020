//! `hotrule-graphql`: a small schema-first GraphQL server core with no IO and no async.
//!
//! It serves SkyWalking's GraphQL query protocol (booster-ui, swctl, Python `gql` clients)
//! without a GraphQL framework. The flow for one HTTP request is:
//!
//! 1. [`Schema::parse`] once, from SDL text (SkyWalking's `.graphqls` files concatenated).
//! 2. [`Request::from_json`] reads the POST body `{"query", "variables", "operationName"}`.
//! 3. [`prepare`] parses the document, picks the operation, coerces variables and arguments,
//!    validates every selection (graphql-java-style messages) and expands fragments. The
//!    caller gets [`Prepared::fields`]: the root fields with coerced arguments to resolve.
//!    Introspection root fields (`__schema`, `__type`, `__typename`) are not in that list.
//! 4. The caller resolves each root field to a JSON tree of the field's type (objects carry
//!    their fields by field name) or an error message.
//! 5. [`complete_body`] applies the selections to those trees (aliases, `__typename`, enum and
//!    scalar checks, null propagation), answers introspection from the schema, and writes
//!    the response body as JSON text ([`complete()`] gives it as a JSON value).
//!    [`error_response`] renders errors from steps 2-3.
//!
//! Every stage bounds its work: documents up to [`MAX_DOCUMENT_BYTES`], nesting up to
//! [`MAX_DEPTH`] (the parser counts depth instead of trusting the stack), at most
//! [`MAX_FIELDS`] field occurrences after fragment expansion and [`MAX_ROOT_FIELDS`] root
//! fields, and at most [`MAX_RESPONSE_NODES`] values ([`MAX_RESPONSE_ERRORS`] errors) in a response;
//! coerced arguments hold at most [`MAX_ARGUMENT_VALUES`] values and `prepare` reports at
//! most [`MAX_ERRORS`] errors.
//!
//! The response body is written as text in the document's selection order, as the spec
//! recommends ([`complete()`]'s JSON value has its keys sorted: serde_json's `preserve_order`
//! feature would keep the order, but Cargo unifies features across a build, and the rest of
//! hotrule relies on sorted maps).
//!
//! Module map: `lexer` (tokens), `parser` + `ast` (executable documents), `sdl` + `schema`
//! (type system), `coerce` (input values), `prepare` (validation), `complete` (execution
//! output), `introspection` (schema as data), `error` (error types).

mod ast;
mod coerce;
mod complete;
mod error;
mod introspection;
mod lexer;
mod parser;
mod prepare;
mod schema;
mod sdl;

use serde_json::{Map, Value as Json};

pub use complete::{Completed, MAX_RESPONSE_ERRORS, MAX_RESPONSE_NODES, complete, complete_body};
pub use error::{GraphQLError, PathSegment, SchemaError, error_response};
pub use parser::MAX_DEPTH;
pub use prepare::{MAX_ARGUMENT_VALUES, MAX_ERRORS, OperationKind, Prepared, RootField, prepare};
pub use schema::Schema;

/// Largest accepted query document, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Most field occurrences one operation may select, counted after fragment expansion.
pub const MAX_FIELDS: usize = 10_000;
/// Most root fields one operation may select.
pub const MAX_ROOT_FIELDS: usize = 1_000;

/// A GraphQL-over-HTTP request body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    pub query: String,
    pub variables: Option<Map<String, Json>>,
    pub operation_name: Option<String>,
}

impl Request {
    /// Reads `{"query": "...", "variables": {...} | null, "operationName": "..." | null}`.
    pub fn from_json(body: &[u8]) -> Result<Request, Vec<GraphQLError>> {
        let fail = |m: &str| vec![GraphQLError::new(m)];
        let v: Json = serde_json::from_slice(body).map_err(|e| fail(&format!("request body is not valid JSON: {e}")))?;
        let Json::Object(mut obj) = v else { return Err(fail("request body must be a JSON object")) };
        let query = match obj.remove("query") {
            Some(Json::String(q)) => q,
            Some(_) => return Err(fail("\"query\" must be a string")),
            None => return Err(fail("request body has no \"query\"")),
        };
        let variables = match obj.remove("variables") {
            None | Some(Json::Null) => None,
            Some(Json::Object(m)) => Some(m),
            // Some clients send variables as a JSON-encoded string.
            Some(Json::String(s)) if s.trim().is_empty() => None,
            Some(Json::String(s)) => match serde_json::from_str(&s) {
                Ok(Json::Object(m)) => Some(m),
                _ => return Err(fail("\"variables\" must be an object")),
            },
            Some(_) => return Err(fail("\"variables\" must be an object")),
        };
        let operation_name = match obj.remove("operationName") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s),
            Some(_) => return Err(fail("\"operationName\" must be a string")),
        };
        Ok(Request { query, variables, operation_name })
    }

    /// A request with just a query document.
    pub fn new(query: impl Into<String>) -> Request {
        Request { query: query.into(), variables: None, operation_name: None }
    }
}
