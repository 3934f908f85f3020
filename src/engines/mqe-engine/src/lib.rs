//! SkyWalking's MQE (Metrics Query Expression): a hand-written parser for `MQEParser.g4` /
//! `MQELexer.g4` and an evaluator that follows `oap-server/mqe-rt` (the visitor base and the
//! `operation` package) and the metric reads of the GraphQL plugin's `MQEVisitor`. Pure: no IO, no
//! async, no clock; metric values come from a [`MetricSource`] the caller implements
//! ([`MemSource`] is an in-memory one, for tests and for evaluating over an alarm window).
//!
//! Design:
//! - [`parse`] gives an [`Expr`] (public AST) or a [`ParseError`] with line, column and offset. The
//!   AST has what the alarm engine needs: [`Expr::metric_names`], [`Expr::max_trend_range`],
//!   [`Expr::uses_top_n`], [`Expr::is_bool_result`].
//! - [`evaluate`] / [`exec_expression`] give an [`ExpressionResult`] exactly shaped as upstream's:
//!   type, a list of [`MQEValues`] (labels + values, `None` = empty), `error`, `labeled_result`.
//!   Errors (unknown metric, unsupported operation, ...) are carried in the result with the
//!   upstream messages, never raised; no input panics (nesting is capped at [`MAX_DEPTH`], windows
//!   at [`MAX_POINTS`] points).
//! - The operations are public ([`ops`], [`ops_labels`]) and work on results, like upstream's, so
//!   the upstream unit tests are ported against them directly.
//! - Numbers are doubles everywhere, as upstream; [`format_value`] renders a value as the GraphQL
//!   `value` string (`DecimalFormat`, at most three decimals).
//!
//! Deliberate differences from upstream (each is a bug or an ANTLR artefact there):
//! - trailing tokens after a complete expression are a parse error (upstream's
//!   `parser.expression()` silently ignores them); error messages are this parser's own, in
//!   ANTLR's `line L:C message` shape;
//! - no-labeled series OP labeled series: a point with an empty side is empty (upstream marks the
//!   shared left point empty and leaves the right value, so the point keeps the right operand);
//! - a labeled metric inside `top_n` is the error upstream meant to raise (its check tests the
//!   wrong parse context, so it reads the labeled series instead);
//! - `aggregate_labels` on series of different lengths skips missing points (upstream throws);
//! - integers that do not fit (`top_n` N, `round` scale, trend range) are error results (upstream:
//!   an uncaught `NumberFormatException`).
//!
//! Kept as upstream, though surprising: `sort_values` always sorts by `avg` (the visitor ignores
//! the written aggregation); a SINGLE_VALUE side meeting a series uses the *first* single series
//! even when labeled, and an empty single value there counts as 0; `series - avg(series)` on labeled
//! metrics therefore does not match labels (the MQE doc example shows matched labels; the code does
//! not); `view_as_seq` with no non-empty candidate returns the first candidate, error included.
//!
//! Not ported: debugging traces (`debuggingTrace`), the entity/scope handling of `Entity` (left to
//! the [`MetricSource`]), `checkAttributes` for `top_n` attributes (the source decides), baseline
//! time-bucket ids (baseline values use the same epoch-ms ids as metric points).

mod ast;
mod eval;
mod lexer;
pub mod ops;
pub mod ops_labels;
mod parser;
mod result;
mod source;

pub use ast::*;
pub use eval::evaluate;
pub use ops::OpError;
pub use parser::{MAX_DEPTH, ParseError, parse, parse_lenient};
pub use result::{ExpressionResult, KeyValue, MQEValue, MQEValues, Owner, ResultType, format_value};
pub use source::{
    Duration, LabeledSeries, MAX_POINTS, MemSource, MetricKind, MetricSource, SourceError, Step, TopNItem, TopNRequest,
};

/// `execExpression`: parses and evaluates; a syntax error is an UNKNOWN result whose `error` is the
/// parse error's message (`line L:C ...`), as upstream returns it.
pub fn exec_expression(expression: &str, source: &dyn MetricSource, duration: &Duration) -> ExpressionResult {
    match parse(expression) {
        Ok(e) => evaluate(&e, source, duration),
        Err(e) => ExpressionResult::error(e.to_string()),
    }
}
