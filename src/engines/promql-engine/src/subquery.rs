//! Subqueries `expr[range:step]`, as Prometheus 2.42: at evaluation time `t` the inner expression
//! is evaluated at the absolute multiples of the step from the first at or after `end - range`
//! through `end` (`end` being `t` moved by `@` and `offset`), and a range function reads those
//! points as it reads a range selector's samples.
//!
//! Prometheus evaluates a subquery once over a range query's whole span; this engine evaluates a
//! range query step by step, so consecutive steps would evaluate the same inner instants again.
//! Each subquery therefore keeps the inner results it computed during one evaluation, by instant
//! (the value of an expression at an instant depends on nothing else), and drops those before the
//! window it last read.

use std::collections::{BTreeMap, HashMap};

use promql_parser::parser::SubqueryExpr;

use crate::error::Error;
use crate::eval::{Evaluator, Labels, Series, Value, millis};
use crate::rate::Window;

/// The inner results of one subquery: label sets numbered once, and each evaluated instant's
/// points by label-set number.
#[derive(Default)]
pub(crate) struct SubqueryCache {
    labels: Vec<Labels>,
    numbers: HashMap<Labels, usize>,
    instants: BTreeMap<i64, Vec<(usize, f64)>>,
}

impl SubqueryCache {
    fn number(&mut self, labels: Labels) -> usize {
        if let Some(number) = self.numbers.get(&labels) {
            return *number;
        }
        let number = self.labels.len();
        self.labels.push(labels.clone());
        self.numbers.insert(labels, number);
        number
    }
}

/// Identifies a subquery node of the expression being evaluated (its address, stable while the
/// evaluation borrows the expression).
fn key(subquery: &SubqueryExpr) -> usize {
    std::ptr::from_ref(subquery) as usize
}

impl Evaluator<'_> {
    /// The subquery's series at `t_ms` and its window `(end - range, end, range)`.
    pub(crate) fn subquery(&mut self, subquery: &SubqueryExpr, t_ms: i64) -> Result<(Vec<Series>, Window), Error> {
        let end = self.instant_with(subquery.at.as_ref(), subquery.offset.as_ref(), t_ms);
        let range_ms = millis(subquery.range);
        let step_ms = match subquery.step.map(millis) {
            Some(step) if step > 0 => step,
            _ => self.limits.default_subquery_step_ms,
        };
        if step_ms <= 0 {
            return Err(Error::Unsupported { construct: "a subquery without a step when the default step is zero".to_string() });
        }
        let start = end.saturating_sub(range_ms);
        let mut first = start.div_euclid(step_ms).saturating_mul(step_ms);
        if first < start {
            first = first.saturating_add(step_ms);
        }
        let mut cache = self.subqueries.remove(&key(subquery)).unwrap_or_default();
        // Earlier instants are not read again while evaluation times grow.
        cache.instants = cache.instants.split_off(&first);
        let filled = self.fill(subquery, &mut cache, first, end, step_ms);
        let assembled = filled.and_then(|()| {
            let mut by_number: BTreeMap<usize, Vec<(i64, f64)>> = BTreeMap::new();
            let mut points = 0;
            for (inner_t, samples) in cache.instants.range(first..=end) {
                points += samples.len();
                for (number, value) in samples {
                    by_number.entry(*number).or_default().push((*inner_t, *value));
                }
            }
            self.count(points)?;
            Ok(by_number.into_iter().filter_map(|(number, samples)| Some(Series { labels: cache.labels.get(number)?.clone(), samples })).collect())
        });
        self.subqueries.insert(key(subquery), cache);
        Ok((assembled?, (start, end, range_ms)))
    }

    /// Evaluates the inner expression at every instant of `first, first + step, … ≤ end` that
    /// `cache` does not hold yet.
    fn fill(&mut self, subquery: &SubqueryExpr, cache: &mut SubqueryCache, first: i64, end: i64, step_ms: i64) -> Result<(), Error> {
        let mut inner_t = first;
        while inner_t <= end {
            if !cache.instants.contains_key(&inner_t) {
                let samples = match self.eval(&subquery.expr, inner_t)? {
                    Value::Scalar(_, value) => vec![(Labels::new(), value)],
                    Value::Vector(samples) => samples.into_iter().map(|(labels, _, value)| (labels, value)).collect(),
                    _ => return Err(Error::Unsupported { construct: "a subquery over a range vector or string".to_string() }),
                };
                self.count(samples.len())?;
                let numbered = samples.into_iter().map(|(labels, value)| (cache.number(labels), value)).collect();
                cache.instants.insert(inner_t, numbered);
            }
            inner_t = match inner_t.checked_add(step_ms) {
                Some(next) => next,
                None => break,
            };
        }
        Ok(())
    }
}
