//! PromQL for hotrule: parsing (with `promql-parser`), the plan of what to load, and evaluation
//! with Prometheus' semantics over series the caller loaded.
//!
//! The crate is pure: the caller parses, asks [`selectors_to_load`] which series and which absolute
//! time windows the expression needs, reads them from its store, and hands them back for evaluation.
//! Nothing here knows about HTTP, storage or async.
//!
//! Semantics follow Prometheus 2.42 (Debian's); the cases of its `promql/testdata` run as data
//! in `tests/promqltest.rs`. [`eval_instant`] evaluates:
//! - literals; selectors with lookback, `offset` and `@` (a stale marker ends a series);
//!   subqueries `expr[range:step]` with `offset`/`@` (inner instants at absolute multiples of the
//!   step; without a step, [`Limits::default_subquery_step_ms`], Prometheus' evaluation interval);
//! - unary minus and the binary operators (arithmetic, `atan2`, comparisons with and without
//!   `bool`, `and`/`or`/`unless`) with vector matching (`on`/`ignoring`, `group_left`/`group_right`);
//! - the aggregations sum avg min max count group stddev stdvar topk bottomk quantile count_values;
//! - the range functions rate increase delta irate idelta deriv predict_linear holt_winters changes
//!   resets absent_over_time and `*_over_time` (avg min max sum count last present stddev stdvar
//!   quantile), over a range selector or a subquery;
//! - the instant functions abs ceil floor exp ln log2 log10 sqrt sgn, the trigonometric ones
//!   (sin … atanh, rad, deg, pi), round clamp clamp_min clamp_max sort sort_desc vector scalar time
//!   timestamp label_replace label_join absent, histogram_quantile over classic `le` buckets, and
//!   the date functions year month day_of_month day_of_year day_of_week days_in_month hour minute.
//!
//! Anything else — native histograms and their functions (histogram_count, histogram_sum,
//! histogram_fraction), unknown extensions — is [`Error::Unsupported`] naming the construct.
//! [`eval_range`] is the instant evaluation at every step, gathered per series.

mod aggregate;
mod arith;
mod call;
mod error;
mod eval;
mod functions;
mod histogram;
mod plan;
mod rate;
mod subquery;

pub use error::Error;
pub use eval::{Labels, Loaded, Series, Value, eval_instant, eval_range, load_key};
pub use plan::{DEFAULT_SUBQUERY_STEP_MS, Limits, SelectorLoad, TimeWindow, selectors_to_load};
pub use promql_parser::parser::Expr;

/// Parses a PromQL expression. Any syntax error becomes [`Error::Parse`] with the parser's message.
pub fn parse(text: &str) -> Result<Expr, Error> {
    promql_parser::parser::parse(text).map_err(|message| Error::Parse { message })
}
