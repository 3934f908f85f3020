//! What an expression needs from the store: one [`SelectorLoad`] per selector, with the absolute
//! window of sample timestamps its evaluation can look at (offsets, `@`, ranges, lookback and
//! subqueries applied). The windows are inclusive on both ends, so a caller that loads them never
//! misses a sample; the evaluator applies the exact window of the Prometheus version it matches.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::label::Matchers;
use promql_parser::parser::{AtModifier, Expr, Offset, VectorSelector};

use crate::error::Error;

/// Bounds for one query's evaluation.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Samples selected plus points produced, at most (Prometheus' --query.max-samples,
    /// simplified); in a range query, those of one step plus the output gathered so far.
    pub max_samples: usize,
    /// When the evaluation gives up with [`Error::Timeout`].
    pub deadline: std::time::Instant,
    /// The step of a subquery written without one (`x[5m:]`): Prometheus' global
    /// `evaluation_interval`, [`DEFAULT_SUBQUERY_STEP_MS`] unless configured. Zero or less is
    /// refused when such a subquery is evaluated.
    pub default_subquery_step_ms: i64,
}

/// Prometheus' default global `evaluation_interval` (1m), the step of a subquery without one.
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60_000;

/// An absolute window of sample timestamps, in Unix milliseconds, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    pub start_ms: i64,
    pub end_ms: i64,
}

/// One selector of the expression and the samples its evaluation may read.
#[derive(Debug, Clone)]
pub struct SelectorLoad {
    /// The key under which the evaluator looks up this selector's series in [`crate::Loaded`].
    pub key: String,
    /// The metric name, when the selector names one (`foo{…}` or `{__name__="foo"}`).
    pub metric: Option<String>,
    pub matchers: Matchers,
    pub window: TimeWindow,
}

impl SelectorLoad {
    /// Every series over `window`: what the series API lists without `match[]`.
    pub fn everything(window: TimeWindow) -> SelectorLoad {
        SelectorLoad { key: String::new(), metric: None, matchers: Matchers::empty(), window }
    }

    /// The value an equality matcher (`label="v"`) of the selector fixes, if there is one.
    pub fn fixed(&self, label: &str) -> Option<&str> {
        self.matchers
            .matchers
            .iter()
            .find(|m| m.name == label && matches!(m.op, promql_parser::label::MatchOp::Equal))
            .map(|m| m.value.as_str())
    }

    /// Whether a series with `labels` is one of the selector's: its metric name and every matcher
    /// (a missing label matches as the empty string, as in Prometheus).
    pub fn selects(&self, labels: &crate::Labels) -> bool {
        self.metric.as_ref().is_none_or(|name| labels.get("__name__") == Some(name))
            && self.matchers.matchers.iter().all(|m| m.is_match(labels.get(&m.name).map_or("", String::as_str)))
    }
}

/// The evaluation range of a subtree: instants from `start_ms` to `end_ms`.
#[derive(Debug, Clone, Copy)]
struct EvalRange {
    start_ms: i64,
    end_ms: i64,
}

/// Walks `expr` and lists the selectors to load for a query evaluated from `start_ms` to `end_ms`
/// (equal for an instant query), with `lookback_ms` for instant vector selectors.
pub fn selectors_to_load(expr: &Expr, start_ms: i64, end_ms: i64, lookback_ms: i64) -> Result<Vec<SelectorLoad>, Error> {
    let query = EvalRange { start_ms, end_ms };
    let mut loads = Vec::new();
    walk(expr, query, query, lookback_ms, &mut loads)?;
    // Selectors that differ only in offset or `@` share a key (and the caller loads each key once):
    // one load per key, over the hull of their windows.
    let mut merged: Vec<SelectorLoad> = Vec::with_capacity(loads.len());
    for load in loads {
        match merged.iter_mut().find(|seen| seen.key == load.key) {
            Some(seen) => {
                seen.window.start_ms = seen.window.start_ms.min(load.window.start_ms);
                seen.window.end_ms = seen.window.end_ms.max(load.window.end_ms);
            }
            None => merged.push(load),
        }
    }
    Ok(merged)
}

fn walk(expr: &Expr, query: EvalRange, range: EvalRange, lookback_ms: i64, loads: &mut Vec<SelectorLoad>) -> Result<(), Error> {
    match expr {
        Expr::Aggregate(aggregate) => {
            if let Some(param) = &aggregate.param {
                walk(param, query, range, lookback_ms, loads)?;
            }
            walk(&aggregate.expr, query, range, lookback_ms, loads)
        }
        Expr::Unary(unary) => walk(&unary.expr, query, range, lookback_ms, loads),
        Expr::Binary(binary) => {
            walk(&binary.lhs, query, range, lookback_ms, loads)?;
            walk(&binary.rhs, query, range, lookback_ms, loads)
        }
        Expr::Paren(paren) => walk(&paren.expr, query, range, lookback_ms, loads),
        Expr::Subquery(subquery) => {
            let shifted = shift(range, query, subquery.at.as_ref(), subquery.offset.as_ref())?;
            let inner = EvalRange {
                start_ms: shifted.start_ms.saturating_sub(millis(subquery.range)),
                end_ms: shifted.end_ms,
            };
            walk(&subquery.expr, query, inner, lookback_ms, loads)
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(selector) => load(selector, query, range, lookback_ms, loads),
        Expr::MatrixSelector(matrix) => load(&matrix.vs, query, range, millis(matrix.range), loads),
        Expr::Call(call) => {
            // 2.42's timestamp() drops the offset of a selector pinned by `@` (see `call.rs`).
            if call.func.name == "timestamp"
                && let Some(Expr::VectorSelector(selector)) = call.args.args.first().map(|arg| crate::call::unwrap_parens(arg))
                && selector.at.is_some()
            {
                let mut pinned = selector.clone();
                pinned.offset = None;
                return walk(&Expr::VectorSelector(pinned), query, range, lookback_ms, loads);
            }
            for arg in &call.args.args {
                walk(arg, query, range, lookback_ms, loads)?;
            }
            Ok(())
        }
        Expr::Extension(_) => Err(Error::Unsupported { construct: "extension expression".to_string() }),
    }
}

/// Lists `selector`'s load: its evaluation instants (`range`, moved by `@` and `offset`), each
/// looking `back_ms` before it (the lookback of an instant selector, a range selector's range).
fn load(selector: &VectorSelector, query: EvalRange, range: EvalRange, back_ms: i64, loads: &mut Vec<SelectorLoad>) -> Result<(), Error> {
    refuse_or_matchers(selector)?;
    let shifted = shift(range, query, selector.at.as_ref(), selector.offset.as_ref())?;
    loads.push(SelectorLoad {
        key: crate::eval::load_key(selector),
        metric: selector.name.clone(),
        matchers: selector.matchers.clone(),
        window: TimeWindow { start_ms: shifted.start_ms.saturating_sub(back_ms), end_ms: shifted.end_ms },
    });
    Ok(())
}

/// `{a="x" or b="y"}` is Prometheus 3's; 2.42 refuses it, and so does hotrule (its matchers
/// would otherwise be read as one conjunction).
fn refuse_or_matchers(selector: &VectorSelector) -> Result<(), Error> {
    if selector.matchers.or_matchers.is_empty() {
        Ok(())
    } else {
        Err(Error::Unsupported { construct: "`or` between label matchers".to_string() })
    }
}

/// Applies `@` (which pins every evaluation instant) and then `offset` (which moves it back).
fn shift(range: EvalRange, query: EvalRange, at: Option<&AtModifier>, offset: Option<&Offset>) -> Result<EvalRange, Error> {
    let pinned = match at {
        None => range,
        Some(AtModifier::Start) => EvalRange { start_ms: query.start_ms, end_ms: query.start_ms },
        Some(AtModifier::End) => EvalRange { start_ms: query.end_ms, end_ms: query.end_ms },
        Some(AtModifier::At(time)) => {
            let at_ms = system_time_ms(*time);
            EvalRange { start_ms: at_ms, end_ms: at_ms }
        }
    };
    let offset_ms = match offset {
        None => 0,
        Some(Offset::Pos(duration)) => millis(*duration),
        Some(Offset::Neg(duration)) => millis(*duration).saturating_neg(),
    };
    Ok(EvalRange {
        start_ms: pinned.start_ms.saturating_sub(offset_ms),
        end_ms: pinned.end_ms.saturating_sub(offset_ms),
    })
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Unix milliseconds of `time`; times before the epoch are negative.
fn system_time_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => millis(after),
        Err(before) => millis(before.duration()).saturating_neg(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    const MIN: i64 = 60_000;

    fn windows(query: &str, start_ms: i64, end_ms: i64) -> Vec<(Option<String>, i64, i64)> {
        let expr = parse(query).unwrap_or_else(|error| panic!("{query}: {error}"));
        selectors_to_load(&expr, start_ms, end_ms, 5 * MIN)
            .unwrap_or_else(|error| panic!("{query}: {error}"))
            .into_iter()
            .map(|load| (load.metric, load.window.start_ms, load.window.end_ms))
            .collect()
    }

    fn named(metric: &str, start_ms: i64, end_ms: i64) -> (Option<String>, i64, i64) {
        (Some(metric.to_string()), start_ms, end_ms)
    }

    #[test]
    fn an_instant_selector_looks_back_the_lookback() {
        assert_eq!(windows("up", 100 * MIN, 100 * MIN), vec![named("up", 95 * MIN, 100 * MIN)]);
    }

    #[test]
    fn a_range_selector_looks_back_its_range_from_the_query_start() {
        assert_eq!(windows("rate(http[10m])", 100 * MIN, 200 * MIN), vec![named("http", 90 * MIN, 200 * MIN)]);
    }

    #[test]
    fn offset_moves_the_window_back_and_a_negative_offset_forward() {
        assert_eq!(windows("up offset 1h", 100 * MIN, 100 * MIN), vec![named("up", 35 * MIN, 40 * MIN)]);
        assert_eq!(windows("up offset -1h", 100 * MIN, 100 * MIN), vec![named("up", 155 * MIN, 160 * MIN)]);
    }

    #[test]
    fn at_pins_the_window_whatever_the_query_range() {
        assert_eq!(windows("up @ 600", 0, 100 * MIN), vec![named("up", 5 * MIN, 10 * MIN)]);
        assert_eq!(windows("up @ start()", 50 * MIN, 100 * MIN), vec![named("up", 45 * MIN, 50 * MIN)]);
        assert_eq!(windows("up[1m] @ end() offset 1m", 50 * MIN, 100 * MIN), vec![named("up", 98 * MIN, 99 * MIN)]);
    }

    #[test]
    fn a_subquery_widens_its_inner_selectors() {
        assert_eq!(
            windows("max_over_time(rate(http[5m])[30m:1m] offset 10m)", 100 * MIN, 100 * MIN),
            vec![named("http", 55 * MIN, 90 * MIN)]
        );
    }

    #[test]
    fn a_pinned_subquery_pins_its_inner_windows_whatever_the_query_range() {
        // `@ 600` ends the subquery at 10m; its 10m range starts at 0; the lookback adds 5m.
        assert_eq!(windows("max_over_time(up[10m:] @ 600)", 0, 100 * MIN), vec![named("up", -5 * MIN, 10 * MIN)]);
        assert_eq!(
            windows("sum_over_time(rate(http[1m])[5m:1m] @ end() offset 5m)", 50 * MIN, 100 * MIN),
            vec![named("http", 89 * MIN, 95 * MIN)]
        );
    }

    #[test]
    fn timestamp_of_a_pinned_selector_reads_at_the_pin_without_the_offset() {
        assert_eq!(windows("timestamp(up @ 600 offset 1m)", 0, 0), vec![named("up", 5 * MIN, 10 * MIN)]);
        assert_eq!(windows("timestamp(up offset 1m)", 10 * MIN, 10 * MIN), vec![named("up", 4 * MIN, 9 * MIN)]);
    }

    #[test]
    fn every_selector_of_a_binary_expression_is_listed() {
        assert_eq!(
            windows("a + on(x) group_left b", 10 * MIN, 10 * MIN),
            vec![named("a", 5 * MIN, 10 * MIN), named("b", 5 * MIN, 10 * MIN)]
        );
    }

    #[test]
    fn selectors_differing_in_offset_share_one_load_over_both_windows() {
        assert_eq!(windows("up - up offset 1h", 100 * MIN, 100 * MIN), vec![named("up", 35 * MIN, 100 * MIN)]);
    }

    #[test]
    fn or_between_label_matchers_is_refused_as_in_prometheus_2() {
        let expr = parse(r#"up{a="x" or b="y"}"#).unwrap_or_else(|error| panic!("{error}"));
        assert!(matches!(selectors_to_load(&expr, 0, 0, MIN), Err(Error::Unsupported { construct }) if construct.contains("or")));
    }

    #[test]
    fn a_syntax_error_is_a_parse_error() {
        assert!(matches!(parse("sum(up"), Err(Error::Parse { .. })));
    }
}
