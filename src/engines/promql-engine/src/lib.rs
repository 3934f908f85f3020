//! PromQL for hotrule: parsing (with `promql-parser`), the plan of what to load, and evaluation
//! with Prometheus' semantics over series the caller loaded.
//!
//! The crate is pure: the caller parses, asks [`selectors_to_load`] which series and which absolute
//! time windows the expression needs, reads them from its store, and hands them back for evaluation.
//! Nothing here knows about HTTP, storage or async.
//!
//! Semantics follow Prometheus 2.42 (Debian's). [`eval_instant`] evaluates today: literals,
//! selectors (lookback, `offset`, `@`), unary minus, scalar/vector binary operators including
//! vector/vector matching (`on`/`ignoring`/`group_left`/`group_right`, `bool`, `and`/`or`/`unless`),
//! the aggregations sum avg min max count group stddev stdvar topk bottomk quantile, the range
//! functions rate increase delta irate idelta deriv changes resets and `*_over_time` (avg min max
//! sum count last present stddev stdvar quantile), and the instant functions abs ceil floor exp ln log2
//! log10 sqrt round clamp clamp_min clamp_max sort sort_desc vector scalar time label_replace
//! label_join absent. Everything else (count_values, histogram_quantile,
//! timestamp, absent_over_time, subqueries) is [`Error::Unsupported`]. [`eval_range`] is the
//! instant evaluation at every step, gathered per series.

mod aggregate;
mod arith;
mod call;
mod error;
mod eval;
mod functions;
mod histogram;
mod plan;
mod rate;

pub use error::Error;
pub use eval::{Labels, Loaded, Series, Value, eval_instant, eval_range, load_key};
pub use plan::{DEFAULT_SUBQUERY_STEP_MS, Limits, SelectorLoad, TimeWindow, selectors_to_load};
pub use promql_parser::parser::Expr;

/// Parses a PromQL expression. Any syntax error becomes [`Error::Parse`] with the parser's message.
pub fn parse(text: &str) -> Result<Expr, Error> {
    promql_parser::parser::parse(text).map_err(|message| Error::Parse { message })
}
