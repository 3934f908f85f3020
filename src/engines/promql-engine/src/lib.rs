//! PromQL for hotrule: parsing (with `promql-parser`), the plan of what to load, and (to come)
//! evaluation with Prometheus' semantics over series the caller loaded.
//!
//! The crate is pure: the caller parses, asks [`selectors_to_load`] which series and which absolute
//! time windows the expression needs, reads them from its store, and hands them back for evaluation.
//! Nothing here knows about HTTP, storage or async.

mod aggregate;
mod arith;
mod error;
mod eval;
mod plan;
mod rate;

pub use error::Error;
pub use eval::{Labels, Loaded, Series, Value, eval_instant, load_key};
pub use plan::{Limits, SelectorLoad, TimeWindow, selectors_to_load};
pub use promql_parser::parser::Expr;

/// Parses a PromQL expression. Any syntax error becomes [`Error::Parse`] with the parser's message.
pub fn parse(text: &str) -> Result<Expr, Error> {
    promql_parser::parser::parse(text).map_err(|message| Error::Parse { message })
}
