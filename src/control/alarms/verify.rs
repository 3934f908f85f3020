//! A rule's expression, checked at load as SkyWalking's `AlarmMQEVerifyVisitor` checks it, with
//! the MQE engine (`hotrule_mqe_engine`):
//! - it parses;
//! - `top_n` is refused (`Unsupported operation: [top_n] in alarm expression.`);
//! - the root is a compare or a bool operation (each ancestor of a compare a parenthesis or a
//!   bool op), so `sum(x > 1) >= 3` is valid and `avg(x > 1000) + 1` or a bare `x > 1000` are not;
//! - the result is a single value (checked by evaluating it over one point of stand-in values).
//!
//! That every metric exists, is a common or labeled metric and shares one scope is checked when
//! the rule runs (`engine`): hotrule accepts a rule whose metrics no loaded MAL file produces yet
//! and holds it waiting, where SkyWalking refuses it at load.

use hotrule_mqe_engine::{Duration, Expr, MemSource, ResultType, Step, evaluate, parse};

use super::settings::ExpressionFacts;

/// The parsed expression of a valid alarm rule.
pub fn compile(expression: &str) -> Result<Expr, String> {
    let expr = parse(expression).map_err(|e| format!("Expression: {expression} does not parse: {e}"))?;
    if expr.uses_top_n() {
        return Err("Unsupported operation: [top_n] in alarm expression.".to_string());
    }
    if !expr.is_bool_result() {
        return Err(format!("Expression: {expression} root operation is not a Compare Operation or Bool Operation."));
    }
    let result = evaluate(&expr, &stand_in(&expr), &Duration::new(0, 0, Step::Minute));
    if result.error.is_none() && result.result_type != ResultType::SingleValue {
        return Err(format!("Expression: {expression} The result of expression is not a SINGLE_VALUE result."));
    }
    Ok(expr)
}

/// The verifier `AlarmSettings::parse` takes.
pub fn verify(expression: &str) -> Result<ExpressionFacts, String> {
    let expr = compile(expression)?;
    let mut metrics = expr.metric_names();
    metrics.sort();
    metrics.dedup();
    Ok(ExpressionFacts { metrics, max_trend_range: expr.max_trend_range() })
}

/// Every metric of `expr` as a common metric with the value 1 at the one point: enough to see
/// the shape of the result.
fn stand_in(expr: &Expr) -> MemSource {
    let mut source = MemSource::new();
    for metric in expr.metric_names() {
        source.set(&metric, 0, 1.0);
    }
    source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skywalkings_load_checks() {
        let facts = verify("sum(service_resp_time > 1000) >= 3").expect("the shipped form");
        assert_eq!((facts.metrics, facts.max_trend_range), (vec!["service_resp_time".to_string()], 0));
        let facts = verify("sum((service_resp_time > 100) && (service_sla > 1)) >= 1").expect("composite");
        assert_eq!(facts.metrics, ["service_resp_time", "service_sla"]);
        assert_eq!(verify("sum(abs(increase(service_resp_time,2)) > 0) >= 1").expect("trend").max_trend_range, 2);
        verify("avg(service_sla / 100) > 80").expect("a binary inside an aggregation");

        let refused = |e: &str| verify(e).expect_err(e);
        assert!(refused("avg(x > 1000) + 1").contains("not a Compare Operation or Bool Operation"));
        assert!(refused("x > 1000").contains("not a SINGLE_VALUE"), "a time series");
        assert!(refused("sum(top_n(x, 10, des) > 1) >= 1").contains("[top_n]"));
        assert!(refused("sum(x > ").contains("does not parse"));
    }
}
