//! The operations of `mqe-rt`'s `operation` package, on [`ExpressionResult`]s, ported one to one:
//! `LROp` (shared by binary, compare and bool operations), `AggregationOp`,
//! `MathematicalFunctionOp` and `TrendOp`. An `Err` is upstream's `IllegalExpressionException`;
//! the evaluator turns it into an error result.
//!
//! Empty values (`None`) follow upstream: a binary/compare/bool point with an empty side is empty;
//! aggregations skip empties (`sum`/`count` of nothing are 0, `avg/max/min/latest` of nothing are
//! empty). Where a SINGLE_VALUE side meets a series or list, upstream reads that single value's
//! `doubleValue` without looking at its empty flag: an empty single value counts as `0` there
//! (every empty single value upstream carries `doubleValue == 0`).

use crate::ast::{AggregationOp, BinaryOp, BoolOp, CompareOp, MathOp, TrendOp};
use crate::result::{ExpressionResult, KeyValue, MQEValue, MQEValues, ResultType};
use crate::Step;

/// Upstream's `IllegalExpressionException`: the message is what the error result carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpError(pub String);

fn err<T>(m: &str) -> Result<T, OpError> {
    Err(OpError(m.to_string()))
}

/// Which scalar calculation `LROp` applies (public for evaluators that apply it point by point
/// over their own data, as the alarm engine's compiled expressions do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calc {
    Binary(BinaryOp),
    Compare(CompareOp),
    Bool(BoolOp),
}

impl Calc {
    /// One point's value: `l op r` (a comparison or bool operation gives 1 or 0); a bool
    /// operation on a value that is not 1 or 0 fails, as SkyWalking's does.
    pub fn apply(self, l: f64, r: f64) -> Result<f64, OpError> {
        Ok(match self {
            Calc::Binary(op) => match op {
                BinaryOp::Add => l + r,
                BinaryOp::Sub => l - r,
                BinaryOp::Mul => l * r,
                BinaryOp::Div => l / r,
                BinaryOp::Mod => l % r,
            },
            Calc::Compare(op) => {
                let b = match op {
                    CompareOp::Eq => l == r,
                    CompareOp::Neq => l != r,
                    CompareOp::Gt => l > r,
                    CompareOp::Lt => l < r,
                    CompareOp::Gte => l >= r,
                    CompareOp::Lte => l <= r,
                };
                if b { 1.0 } else { 0.0 }
            }
            Calc::Bool(op) => {
                // Java's `(int) v` truncation, then the check for 0 or 1.
                let is_bool = |v: f64| v.is_finite() && (v.trunc() == 0.0 || v.trunc() == 1.0);
                if !is_bool(l) {
                    return err("Bool Operation: The result of the left expression is not 1 or 0.");
                }
                if !is_bool(r) {
                    return err("Bool Operation: The result of the right expression is not 1 or 0.");
                }
                let (l, r) = (l == 1.0, r == 1.0);
                let v = if op == BoolOp::And { l && r } else { l || r };
                if v { 1.0 } else { 0.0 }
            }
        })
    }
}

/// `BinaryOp.doBinaryOp` (`+ - * / %`).
pub fn binary_op(left: ExpressionResult, right: ExpressionResult, op: BinaryOp) -> Result<ExpressionResult, OpError> {
    lr_op(left, right, Calc::Binary(op)).map_err(|e| OpError(format!("Unsupported binary operation: {}", e.0)))
}

/// `CompareOp.doCompareOP`: 1 or 0 per point.
pub fn compare_op(left: ExpressionResult, right: ExpressionResult, op: CompareOp) -> Result<ExpressionResult, OpError> {
    lr_op(left, right, Calc::Compare(op)).map_err(|e| OpError(format!("Unsupported compare operation: {}", e.0)))
}

/// `BoolOp.doBoolOp`: both sides must carry the bool-result flag.
pub fn bool_op(left: ExpressionResult, right: ExpressionResult, op: BoolOp) -> Result<ExpressionResult, OpError> {
    if !left.bool_result {
        return err("Bool Operation: The result of the left expression is not a compare result.");
    }
    if !right.bool_result {
        return err("Bool Operation: The result of the right expression is not a compare result.");
    }
    lr_op(left, right, Calc::Bool(op)).map_err(|e| OpError(format!("Unsupported bool operation: {}", e.0)))
}

fn is_many(t: ResultType) -> bool {
    matches!(t, ResultType::TimeSeriesValues | ResultType::SortedList | ResultType::RecordList)
}

fn lr_op(left: ExpressionResult, right: ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    use ResultType::*;
    match (left.result_type, right.result_type) {
        (SingleValue, SingleValue) => match (left.labeled_result, right.labeled_result) {
            (false, false) => single_to_single(&left, &right, c),
            (true, false) => many_to_one(left, &right, c),
            (false, true) => one_to_many(&left, right, c),
            (true, true) => single_labeled(left, &right, c),
        },
        (l, SingleValue) if is_many(l) => many_to_one(left, &right, c),
        (SingleValue, r) if is_many(r) => one_to_many(&left, right, c),
        (TimeSeriesValues, TimeSeriesValues) => match (left.labeled_result, right.labeled_result) {
            (false, false) => series_no_labeled(left, &right, c),
            (true, false) => series_labeled_with_no_labeled(left, &right, c),
            (false, true) => series_no_labeled_with_labeled(&left, right, c),
            (true, true) => series_labeled_with_labeled(left, &right, c),
        },
        _ => err("Unsupported operation."),
    }
}

/// One point: empty when either side is empty.
fn point(l: Option<f64>, r: Option<f64>, c: Calc) -> Result<Option<f64>, OpError> {
    match (l, r) {
        (Some(l), Some(r)) => c.apply(l, r).map(Some),
        _ => Ok(None),
    }
}

fn the_single<'a>(r: &'a ExpressionResult, msg: &str) -> Result<&'a MQEValue, OpError> {
    match r.results.first() {
        Some(v) if v.values.len() == 1 => Ok(&v.values[0]),
        _ => err(msg),
    }
}

fn single_to_single(l: &ExpressionResult, r: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let lv = the_single(l, "Single to Single, left result is empty or has more than one value.")?;
    let rv = the_single(r, "Single to Single, right result is empty or has more than one value.")?;
    Ok(ExpressionResult::single(point(lv.value, rv.value, c)?))
}

fn single_labeled(mut l: ExpressionResult, r: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    for lv in &mut l.results {
        if lv.values.len() != 1 {
            return err("Single Labeled to Single Labeled, left labeled result is empty or has more than one value.");
        }
        match find_same_labels(r, &lv.labels) {
            None => lv.values[0].value = None,
            Some(rv) => {
                if rv.values.len() != 1 {
                    return err("Single Labeled to Single Labeled, right labeled result has more than one value.");
                }
                lv.values[0].value = point(lv.values[0].value, rv.values[0].value, c)?;
            }
        }
    }
    Ok(l)
}

/// Upstream keys the right side by `HashSet<KeyValue>` (a later duplicate wins).
fn find_same_labels<'a>(r: &'a ExpressionResult, labels: &[KeyValue]) -> Option<&'a MQEValues> {
    let mut key: Vec<&KeyValue> = labels.iter().collect();
    key.sort();
    key.dedup();
    r.results.iter().rev().find(|rv| {
        let mut k: Vec<&KeyValue> = rv.labels.iter().collect();
        k.sort();
        k.dedup();
        k == key
    })
}

fn many_to_one(mut many: ExpressionResult, single: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let s = the_single(single, "Many to One, single result is empty or has more than one value.")?.value.unwrap_or(0.0);
    for vs in &mut many.results {
        for v in &mut vs.values {
            if let Some(x) = v.value {
                v.value = Some(c.apply(x, s)?);
            }
        }
    }
    Ok(many)
}

fn one_to_many(single: &ExpressionResult, mut many: ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let s = the_single(single, "One to Many, single result is empty or has more than one value.")?.value.unwrap_or(0.0);
    for vs in &mut many.results {
        for v in &mut vs.values {
            if let Some(x) = v.value {
                v.value = Some(c.apply(s, x)?);
            }
        }
    }
    Ok(many)
}

fn series_no_labeled(mut l: ExpressionResult, r: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let (Some(lv), Some(rv)) = (l.results.first_mut(), r.results.first()) else {
        return err("Series No Labeled, left or right result is empty.");
    };
    if lv.values.len() != rv.values.len() {
        return err("Series No Labeled, left and right series value size not equal.");
    }
    for (a, b) in lv.values.iter_mut().zip(&rv.values) {
        a.value = point(a.value, b.value, c)?;
    }
    Ok(l)
}

fn series_labeled_with_no_labeled(mut l: ExpressionResult, r: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let Some(rv) = r.results.first() else {
        return err("Series Labeled with No Labeled, no labeled result is empty.");
    };
    for lv in &mut l.results {
        if lv.values.len() != rv.values.len() {
            return err("Series Labeled with No Labeled, left and right series value size not equal.");
        }
        for (a, b) in lv.values.iter_mut().zip(&rv.values) {
            a.value = point(a.value, b.value, c)?;
        }
    }
    Ok(l)
}

/// Result keeps the right (labeled) side. Upstream marks the shared *left* point empty when a side
/// is empty and leaves the right point as it was (so the point keeps the right operand's value);
/// here the point is empty, as the rule "a binary operation on an empty value stays empty" and the
/// mirror case (labeled with no labeled) say.
fn series_no_labeled_with_labeled(l: &ExpressionResult, mut r: ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    let Some(lv) = l.results.first() else {
        return err("Series No Labeled with Labeled, no labeled result is empty.");
    };
    for rv in &mut r.results {
        if lv.values.len() != rv.values.len() {
            return err("Series No Labeled with Labeled, left and right series value size not equal.");
        }
        for (a, b) in lv.values.iter().zip(rv.values.iter_mut()) {
            b.value = point(a.value, b.value, c)?;
        }
    }
    Ok(r)
}

fn series_labeled_with_labeled(mut l: ExpressionResult, r: &ExpressionResult, c: Calc) -> Result<ExpressionResult, OpError> {
    for lv in &mut l.results {
        match find_same_labels(r, &lv.labels) {
            None => lv.values.iter_mut().for_each(|v| v.value = None),
            Some(rv) => {
                if !lv.values.is_empty() && rv.values.len() != lv.values.len() {
                    return err("Series Labeled with Labeled, left and right series value size not equal.");
                }
                for (a, b) in lv.values.iter_mut().zip(&rv.values) {
                    a.value = point(a.value, b.value, c)?;
                }
            }
        }
    }
    Ok(l)
}

/// `AggregationOp.doAggregationOp`: one value per series; `avg/count/sum` drop the id,
/// `latest/max/min` keep the selected point (id, trace id).
pub fn aggregation_op(mut result: ExpressionResult, op: AggregationOp) -> Result<ExpressionResult, OpError> {
    if op == AggregationOp::Latest && result.result_type != ResultType::TimeSeriesValues {
        return err("LATEST can only be used in time series result.");
    }
    for vs in &mut result.results {
        let present = vs.values.iter().filter(|v| v.value.is_some());
        let nums = || vs.values.iter().filter_map(|v| v.value);
        let picked: MQEValue = match op {
            AggregationOp::Avg => {
                let n = nums().count();
                MQEValue::new(None, if n == 0 { None } else { Some(nums().sum::<f64>() / n as f64) })
            }
            AggregationOp::Count => MQEValue::new(None, Some(nums().count() as f64)),
            AggregationOp::Sum => MQEValue::new(None, Some(nums().sum::<f64>())),
            // Streams.findLast / Stream.max / Stream.min: max keeps the last of equal maxima,
            // min the first of equal minima.
            AggregationOp::Latest => vs.values.iter().rev().find(|v| v.value.is_some()).cloned().unwrap_or_default(),
            AggregationOp::Max => present.fold(None::<&MQEValue>, |best, v| match best {
                Some(b) if java_cmp(v.value, b.value) == std::cmp::Ordering::Less => Some(b),
                _ => Some(v),
            }).cloned().unwrap_or_default(),
            AggregationOp::Min => present.fold(None::<&MQEValue>, |best, v| match best {
                Some(b) if java_cmp(v.value, b.value) != std::cmp::Ordering::Less => Some(b),
                _ => Some(v),
            }).cloned().unwrap_or_default(),
        };
        vs.values = vec![picked];
    }
    result.result_type = ResultType::SingleValue;
    Ok(result)
}

/// `Double.compare` on present values.
pub(crate) fn java_cmp(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    a.unwrap_or(0.0).total_cmp(&b.unwrap_or(0.0))
}

/// `MathematicalFunctionOp.doFunction0Op` (`abs ceil floor`), empties untouched.
pub fn math_op(mut result: ExpressionResult, op: MathOp) -> ExpressionResult {
    let f: fn(f64) -> f64 = match op {
        MathOp::Abs => f64::abs,
        MathOp::Ceil => f64::ceil,
        MathOp::Floor => f64::floor,
    };
    map_values(&mut result, f);
    result
}

/// `MathematicalFunctionOp.doFunction1Op` (`round(x, scale)`): `BigDecimal.valueOf(x)` (the
/// shortest decimal repr of x) rounded HALF_UP to `scale` places.
pub fn round_op(mut result: ExpressionResult, scale: i32) -> ExpressionResult {
    map_values(&mut result, |x| round_half_up(x, scale));
    result
}

fn map_values(result: &mut ExpressionResult, f: impl Fn(f64) -> f64) {
    for vs in &mut result.results {
        for v in &mut vs.values {
            if let Some(x) = v.value {
                v.value = Some(f(x));
            }
        }
    }
}

/// HALF_UP rounding of the shortest decimal representation of `x` (as `BigDecimal.valueOf`).
pub fn round_half_up(x: f64, scale: i32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // `{:e}` prints the shortest repr that round-trips: digits and a decimal exponent.
    let repr = format!("{:e}", x.abs());
    let (mant, exp) = repr.split_once('e').unwrap_or((&repr, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(|b| b.is_ascii_digit()).map(|b| b - b'0').collect();
    // value = 0.d1d2d3... * 10^(exp+1); keep digits up to position exp+1+scale.
    let keep = exp + 1 + scale as i64;
    if keep >= digits.len() as i64 {
        return x;
    }
    let mut kept: Vec<u8> = if keep > 0 { digits[..keep as usize].to_vec() } else { Vec::new() };
    let next = if keep >= 0 { digits[keep as usize] } else { 0 };
    let mut shift = exp + 1 - kept.len() as i64; // value = int(kept) * 10^shift
    if next >= 5 {
        // add one unit in the last kept place
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
        if keep < 0 {
            shift = -(scale as i64);
        }
    }
    if kept.is_empty() {
        return 0.0_f64.copysign(x);
    }
    let s: String = kept.iter().map(|d| (b'0' + d) as char).collect();
    let v: f64 = format!("{}e{}", s, shift).parse().unwrap_or(x.abs());
    v.copysign(x)
}

/// `TrendOp.doTrendOp`: `increase` is `v[i] - v[i-range]` for `i >= range` (the first `range`
/// points are dropped; empty when either side is empty); `rate` divides by the range in seconds.
pub fn trend_op(mut result: ExpressionResult, op: TrendOp, range: usize, step: Step) -> ExpressionResult {
    for vs in &mut result.results {
        let old = std::mem::take(&mut vs.values);
        for i in range..old.len() {
            let cur = &old[i];
            let prev = &old[i - range];
            if cur.value.is_none() {
                vs.values.push(cur.clone());
                continue;
            }
            let mut v = MQEValue::new(cur.id.clone(), None);
            if let (Some(c), Some(p)) = (cur.value, prev.value) {
                v.trace_id = cur.trace_id.clone();
                v.value = Some(c - p);
            }
            vs.values.push(v);
        }
    }
    if op == TrendOp::Rate {
        let secs = range as f64 * step.seconds() as f64;
        map_values(&mut result, |x| x / secs);
    }
    result
}
