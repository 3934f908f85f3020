//! The alarm expressions evaluated straight over a window's cells, without a MemSource and
//! without the MQE result model (a string id per point, a result per node).
//!
//! [`Compiled`] covers what alarm rules are written with: metrics (common or labeled, with label
//! selectors), `increase`/`rate`, numbers, parentheses, `+ - * / %`, the six comparisons,
//! `&&`/`||` and the aggregations `avg count latest sum max min`. It follows the MQE evaluator
//! step by step (`hotrule_mqe_engine`'s `eval` and `ops`): the same result shapes (single value
//! or series, labeled or not, the bool-result flag and where it is set and cleared), the same
//! empty-value rules, the same arithmetic in the same order, and any MQE error is a mismatch.
//! An expression with anything else is not compiled, and a window where two labeled results
//! meet (label matching) is handed back ([`Compiled::matches`] gives `None`): the caller then
//! evaluates it with the MQE engine. `compiled_tests` checks both give the same answer.

use hotrule_mqe_engine::ops::Calc;
use hotrule_mqe_engine::ops_labels::split_label_value;
use hotrule_mqe_engine::{AggregationOp, BinaryOp, BoolOp, CompareOp, Expr, KeyValue, MAX_POINTS, TrendOp};

use super::frame::{Cell, Frame, WindowCells};

#[derive(Debug)]
enum Node {
    /// Metric `slot` of the rule (its window row), with its label selectors, maybe in a trend;
    /// `id` numbers the reads of the expression.
    Read { id: usize, slot: usize, selectors: Vec<KeyValue>, trend: Option<(TrendOp, usize)> },
    Scalar(f64),
    Parens(Box<Node>),
    Binary { op: BinaryOp, left: Box<Node>, right: Box<Node> },
    Compare { op: CompareOp, left: Box<Node>, right: Box<Node> },
    Bool { op: BoolOp, left: Box<Node>, right: Box<Node> },
    Aggregation { op: AggregationOp, inner: Box<Node> },
}

/// An alarm expression ready to be evaluated over window cells.
#[derive(Debug)]
pub struct Compiled {
    root: Node,
    period: u32,
    /// The root as `agg(m OP k) OP n`, the usual alarm: counted without intermediate results
    /// when `m` is a common metric.
    threshold: Option<Threshold>,
}

/// `agg(m OP k) OP n`, `m` maybe in a trend.
#[derive(Debug)]
struct Threshold {
    slot: usize,
    trend: Option<(TrendOp, usize)>,
    inner: CompareOp,
    k: f64,
    agg: AggregationOp,
    outer: CompareOp,
    n: f64,
}

impl Threshold {
    fn of(root: &Node) -> Option<Threshold> {
        let Node::Compare { op: outer, left, right } = root else { return None };
        let (Node::Aggregation { op: agg, inner }, Node::Scalar(n)) = (&**left, &**right) else { return None };
        let Node::Compare { op: inner, left, right } = &**inner else { return None };
        let (Node::Read { slot, trend, .. }, Node::Scalar(k)) = (&**left, &**right) else { return None };
        Some(Threshold { slot: *slot, trend: *trend, inner: *inner, k: *k, agg: *agg, outer: *outer, n: *n })
    }

    /// The match, as the general evaluation gives it for a common metric: the comparison
    /// with k is 1 or 0 where there is a value, the aggregation of those, compared with n;
    /// none when the metric is labeled here.
    fn matches(&self, cx: &Context<'_>, scratch: &mut Scratch) -> Option<bool> {
        let row = cx.window.row(self.slot);
        match kind(row) {
            None => return Some(false),
            Some(true) => return None,
            Some(false) => {}
        }
        let mut values = scratch.values();
        let first = cx.start - self.trend.map_or(0, |(_, range)| range) as i64;
        common_values(&mut values, row, cx.window.start(), first, cx.now);
        if let Some((op, range)) = self.trend {
            trend_values(&mut values, op, range);
        }
        let inner = Calc::Compare(self.inner);
        for value in values.iter_mut().flatten() {
            *value = inner.apply(*value, self.k).ok()?;
        }
        let aggregated = aggregate(&values, self.agg);
        scratch.values.push(values);
        Some(point(aggregated, Some(self.n), Calc::Compare(self.outer)).ok()? == Some(1.0))
    }
}

/// What the node being visited hangs under (the MQE evaluator's `Parent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    Root,
    Parens,
    Bool,
    Other,
}

/// Why an evaluation stopped: the MQE evaluation gives an error (a mismatch), or this path does
/// not follow it here.
#[derive(Debug)]
enum Stop {
    Fail,
    Unsupported,
}

/// An MQE operation's error (a bool operation on a value that is not 1 or 0) is the
/// evaluation's failure: no match.
impl From<hotrule_mqe_engine::OpError> for Stop {
    fn from(_: hotrule_mqe_engine::OpError) -> Stop {
        Stop::Fail
    }
}

/// An MQE result as far as the match depends on it: single value or time series, labeled,
/// bool result, and one vector of values per series (in the MQE result's order).
#[derive(Debug)]
struct Val {
    single: bool,
    labeled: bool,
    bool_result: bool,
    series: Vec<Vec<Option<f64>>>,
}

/// Buffers reused from one evaluation to the next, and whether each read's selectors take each
/// label set of the frame (asked once per rule and frame: [`Scratch::reset`] between them).
#[derive(Debug, Default)]
pub struct Scratch {
    values: Vec<Vec<Option<f64>>>,
    lists: Vec<Vec<Vec<Option<f64>>>>,
    sets: Vec<u32>,
    /// Per read id, per label set: unknown, refused or selected.
    selections: Vec<Vec<Selection>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    Unknown,
    Refused,
    Selected,
}

impl Scratch {
    /// Forgets the selections: the next evaluation is of another rule or another frame.
    pub fn reset(&mut self) {
        self.selections.iter_mut().for_each(Vec::clear);
    }

    fn selected(&mut self, id: usize, set: u32, frame: &Frame, selectors: &[KeyValue]) -> bool {
        if self.selections.len() <= id {
            self.selections.resize_with(id + 1, Vec::new);
        }
        let known = &mut self.selections[id];
        if known.len() <= set as usize {
            known.resize(set as usize + 1, Selection::Unknown);
        }
        if known[set as usize] == Selection::Unknown {
            known[set as usize] = if selected(frame.set_labels(set), selectors) { Selection::Selected } else { Selection::Refused };
        }
        known[set as usize] == Selection::Selected
    }

    fn values(&mut self) -> Vec<Option<f64>> {
        let mut values = self.values.pop().unwrap_or_default();
        values.clear();
        values
    }

    fn list(&mut self) -> Vec<Vec<Option<f64>>> {
        self.lists.pop().unwrap_or_default()
    }

    fn release(&mut self, val: Val) {
        let mut series = val.series;
        self.values.append(&mut series);
        self.lists.push(series);
    }
}

impl Compiled {
    /// `expr` over a rule's `metrics` (window rows in that order), evaluated over the last
    /// `period` minutes; none when the expression uses something this path does not cover.
    pub fn compile(expr: &Expr, metrics: &[String], period: u32) -> Option<Compiled> {
        let root = node(expr, metrics, &mut 0)?;
        Some(Compiled { threshold: Threshold::of(&root), root, period })
    }

    /// Whether the expression matches over `window` (as the MQE evaluation over the window's
    /// MemSource decides: a single value of 1, for a labeled result any series' 1); none when
    /// this window needs the MQE evaluation. `scratch` is reset before another rule or frame.
    pub fn matches(&self, frame: &Frame, window: &WindowCells, scratch: &mut Scratch) -> Option<bool> {
        let now = frame.now();
        let context = Context { frame, window, now, start: now - i64::from(self.period) + 1 };
        if let Some(matched) = self.threshold.as_ref().and_then(|threshold| threshold.matches(&context, scratch)) {
            return Some(matched);
        }
        match eval(&self.root, Parent::Root, &context, scratch) {
            Ok(val) => {
                let matched = val.single && val.series.iter().any(|series| series.first().copied().flatten() == Some(1.0));
                scratch.release(val);
                Some(matched)
            }
            Err(Stop::Fail) => Some(false),
            Err(Stop::Unsupported) => None,
        }
    }
}

fn node(expr: &Expr, metrics: &[String], reads: &mut usize) -> Option<Node> {
    let mut boxed = |e: &Expr| node(e, metrics, reads).map(Box::new);
    Some(match expr {
        Expr::Metric(metric) => read_node(metric, None, metrics, reads)?,
        Expr::Trend { op, metric, range } => {
            // A range the MQE evaluation refuses stays with it.
            let range = range.parse::<i64>().ok().filter(|r| (1..=MAX_POINTS).contains(r))?;
            read_node(metric, Some((*op, range as usize)), metrics, reads)?
        }
        Expr::Scalar { value, .. } => Node::Scalar(*value),
        Expr::Parens(inner) => Node::Parens(boxed(inner)?),
        Expr::Binary { op, left, right } => Node::Binary { op: *op, left: boxed(left)?, right: boxed(right)? },
        Expr::Compare { op, left, right, .. } => Node::Compare { op: *op, left: boxed(left)?, right: boxed(right)? },
        Expr::Bool { op, left, right } => Node::Bool { op: *op, left: boxed(left)?, right: boxed(right)? },
        Expr::Aggregation { op, expr } => Node::Aggregation { op: *op, inner: boxed(expr)? },
        _ => return None,
    })
}

fn read_node(metric: &hotrule_mqe_engine::Metric, trend: Option<(TrendOp, usize)>, metrics: &[String], reads: &mut usize) -> Option<Node> {
    let slot = metrics.iter().position(|m| *m == metric.name)?;
    let selectors = metric.labels.iter().flat_map(|l| split_label_value(&l.name, &l.value)).collect();
    *reads += 1;
    Some(Node::Read { id: *reads - 1, slot, selectors, trend })
}

struct Context<'a> {
    frame: &'a Frame,
    window: &'a WindowCells,
    now: i64,
    /// The first minute of the evaluated duration.
    start: i64,
}

fn eval(node: &Node, parent: Parent, cx: &Context<'_>, scratch: &mut Scratch) -> Result<Val, Stop> {
    match node {
        Node::Read { id, slot, selectors, trend } => read(*id, *slot, selectors, *trend, cx, scratch),
        Node::Scalar(value) => {
            let mut values = scratch.values();
            values.push(Some(*value));
            let mut series = scratch.list();
            series.push(values);
            Ok(Val { single: true, labeled: false, bool_result: false, series })
        }
        Node::Parens(inner) => {
            let mut val = eval(inner, Parent::Parens, cx, scratch)?;
            if val.bool_result && !matches!(parent, Parent::Bool | Parent::Parens) {
                val.bool_result = false;
            }
            Ok(val)
        }
        Node::Binary { op, left, right } => {
            let (l, r) = both(left, right, Parent::Other, cx, scratch)?;
            lr(l, r, Calc::Binary(*op), scratch)
        }
        Node::Compare { op, left, right } => {
            let (l, r) = both(left, right, Parent::Other, cx, scratch)?;
            let mut val = lr(l, r, Calc::Compare(*op), scratch)?;
            if matches!(parent, Parent::Root | Parent::Parens | Parent::Bool) {
                val.bool_result = true;
            }
            Ok(val)
        }
        Node::Bool { op, left, right } => {
            let (l, r) = both(left, right, Parent::Bool, cx, scratch)?;
            if !l.bool_result || !r.bool_result {
                return Err(Stop::Fail);
            }
            let mut val = lr(l, r, Calc::Bool(*op), scratch)?;
            if matches!(parent, Parent::Root | Parent::Parens | Parent::Bool) {
                val.bool_result = true;
            }
            Ok(val)
        }
        Node::Aggregation { op, inner } => {
            let mut val = eval(inner, Parent::Other, cx, scratch)?;
            if *op == AggregationOp::Latest && val.single {
                return Err(Stop::Fail);
            }
            for series in &mut val.series {
                let picked = aggregate(series, *op);
                series.clear();
                series.push(picked);
            }
            val.single = true;
            Ok(val)
        }
    }
}

fn both(left: &Node, right: &Node, parent: Parent, cx: &Context<'_>, scratch: &mut Scratch) -> Result<(Val, Val), Stop> {
    let l = eval(left, parent, cx, scratch)?;
    let r = eval(right, parent, cx, scratch)?;
    Ok((l, r))
}

/// `AggregationOp.doAggregationOp` on one series (values only).
fn aggregate(values: &[Option<f64>], op: AggregationOp) -> Option<f64> {
    let nums = || values.iter().filter_map(|v| *v);
    match op {
        AggregationOp::Avg => {
            let n = nums().count();
            if n == 0 { None } else { Some(nums().sum::<f64>() / n as f64) }
        }
        AggregationOp::Count => Some(nums().count() as f64),
        AggregationOp::Sum => Some(nums().sum::<f64>()),
        AggregationOp::Latest => values.iter().rev().find_map(|v| *v),
        // Stream.max keeps the last of equal maxima, Stream.min the first of equal minima
        // (Double.compare).
        AggregationOp::Max => nums().fold(None, |best: Option<f64>, x| match best {
            Some(b) if x.total_cmp(&b) == std::cmp::Ordering::Less => Some(b),
            _ => Some(x),
        }),
        AggregationOp::Min => nums().fold(None, |best: Option<f64>, x| match best {
            Some(b) if x.total_cmp(&b) != std::cmp::Ordering::Less => Some(b),
            _ => Some(x),
        }),
    }
}

/// A metric's values over the duration (extended back by a trend's range), as the MemSource of
/// the window answers them, then the trend.
fn read(id: usize, slot: usize, selectors: &[KeyValue], trend: Option<(TrendOp, usize)>, cx: &Context<'_>, scratch: &mut Scratch) -> Result<Val, Stop> {
    let range = trend.map_or(0, |(_, range)| range);
    let first = cx.start - range as i64;
    let points = usize::try_from(cx.now - first + 1).map_err(|_| Stop::Unsupported)?;
    let row = cx.window.row(slot);
    let window_start = cx.window.start();
    let labeled = kind(row).ok_or(Stop::Fail)?;
    let mut series = scratch.list();
    if !labeled {
        let mut values = scratch.values();
        common_values(&mut values, row, window_start, first, cx.now);
        series.push(values);
    } else {
        // One series per label set, in the order the window first shows them.
        let mut sets = std::mem::take(&mut scratch.sets);
        sets.clear();
        for (i, cell) in row.iter().enumerate() {
            let Cell::Labeled { start, len } = *cell else { continue };
            let minute = window_start + i as i64;
            let point = (minute >= first && minute <= cx.now).then(|| (minute - first) as usize);
            for &(key, v) in cx.frame.pairs(start, len) {
                let set = cx.frame.key_set(key);
                let index = match sets.iter().position(|s| *s == set) {
                    Some(index) => index,
                    None => {
                        sets.push(set);
                        let mut values = scratch.values();
                        values.resize(points, None);
                        series.push(values);
                        sets.len() - 1
                    }
                };
                if let Some(point) = point {
                    series[index][point] = Some(v);
                }
            }
        }
        if !selectors.is_empty() {
            let mut index = 0;
            series.retain(|_| {
                let keep = scratch.selected(id, sets[index], cx.frame, selectors);
                index += 1;
                keep
            });
        }
        scratch.sets = sets;
    }
    if let Some((op, range)) = trend {
        for values in &mut series {
            trend_values(values, op, range);
        }
    }
    Ok(Val { single: false, labeled, bool_result: false, series })
}

/// The kind a metric exists as in the window's MemSource: that of its first value (a labeled
/// value with no label key declares nothing), labeled or not; none without any value.
fn kind(row: &[Cell]) -> Option<bool> {
    row.iter().find_map(|cell| match cell {
        Cell::Single(_) => Some(false),
        Cell::Labeled { len, .. } if *len > 0 => Some(true),
        _ => None,
    })
}

/// A common metric's values at minutes `first..=now`: a window minute's common value, else none.
fn common_values(values: &mut Vec<Option<f64>>, row: &[Cell], window_start: i64, first: i64, now: i64) {
    values.extend((first..=now).map(|minute| match usize::try_from(minute - window_start).ok().and_then(|at| row.get(at)) {
        Some(Cell::Single(v)) => Some(*v),
        _ => None,
    }));
}

/// The MemSource's selector match: for every selector key, the series' value of that key is one
/// of the key's selected values.
fn selected(labels: &[KeyValue], selectors: &[KeyValue]) -> bool {
    selectors.iter().all(|s| {
        let have = labels.iter().find(|l| l.key == s.key).map(|l| l.value.as_str());
        selectors.iter().filter(|o| o.key == s.key).any(|w| Some(w.value.as_str()) == have)
    })
}

/// `TrendOp.doTrendOp`: the first `range` points dropped, each other the difference with the
/// point `range` before (empty when either is); `rate` per second.
fn trend_values(values: &mut Vec<Option<f64>>, op: TrendOp, range: usize) {
    for i in range..values.len() {
        let (current, previous) = (values[i], values[i - range]);
        values[i - range] = match (current, previous) {
            (Some(c), Some(p)) => Some(c - p),
            _ => None,
        };
    }
    values.truncate(values.len().saturating_sub(range));
    if op == TrendOp::Rate {
        let seconds = range as f64 * 60.0;
        for value in values.iter_mut().flatten() {
            *value /= seconds;
        }
    }
}

/// One point: empty when either side is.
fn point(l: Option<f64>, r: Option<f64>, c: Calc) -> Result<Option<f64>, Stop> {
    match (l, r) {
        (Some(l), Some(r)) => Ok(Some(c.apply(l, r)?)),
        _ => Ok(None),
    }
}

/// The value of a single-value result with exactly one value in its first series.
fn the_single(val: &Val) -> Result<Option<f64>, Stop> {
    match val.series.first() {
        Some(values) if values.len() == 1 => Ok(values[0]),
        _ => Err(Stop::Fail),
    }
}

/// `LROp`: which side's shape decides, as the MQE `lr_op`.
fn lr(l: Val, r: Val, c: Calc, scratch: &mut Scratch) -> Result<Val, Stop> {
    match (l.single, r.single, l.labeled, r.labeled) {
        (true, true, false, false) => {
            let value = point(the_single(&l)?, the_single(&r)?, c)?;
            scratch.release(l);
            let mut values = scratch.values();
            values.push(value);
            let mut series = scratch.list();
            series.push(values);
            scratch.release(r);
            Ok(Val { single: true, labeled: false, bool_result: false, series })
        }
        (true, true, true, true) | (false, false, true, true) => Err(Stop::Unsupported),
        (true, true, true, false) | (false, true, _, _) => many_to_one(l, r, c, scratch),
        (true, true, false, true) | (true, false, _, _) => one_to_many(l, r, c, scratch),
        (false, false, false, false) => {
            let mut l = l;
            let (Some(lv), Some(rv)) = (l.series.first_mut(), r.series.first()) else { return Err(Stop::Fail) };
            pointwise(lv, rv, c, false)?;
            scratch.release(r);
            Ok(l)
        }
        (false, false, true, false) => {
            let mut l = l;
            let Some(rv) = r.series.first() else { return Err(Stop::Fail) };
            for lv in &mut l.series {
                pointwise(lv, rv, c, false)?;
            }
            scratch.release(r);
            Ok(l)
        }
        (false, false, false, true) => {
            let mut r = r;
            let Some(lv) = l.series.first() else { return Err(Stop::Fail) };
            for rv in &mut r.series {
                pointwise(rv, lv, c, true)?;
            }
            scratch.release(l);
            Ok(r)
        }
    }
}

/// `into[i] = into[i] OP other[i]` (or `other[i] OP into[i]` when `flipped`); series of
/// different lengths are an error.
fn pointwise(into: &mut [Option<f64>], other: &[Option<f64>], c: Calc, flipped: bool) -> Result<(), Stop> {
    if into.len() != other.len() {
        return Err(Stop::Fail);
    }
    for (a, b) in into.iter_mut().zip(other) {
        *a = if flipped { point(*b, *a, c)? } else { point(*a, *b, c)? };
    }
    Ok(())
}

fn many_to_one(mut many: Val, single: Val, c: Calc, scratch: &mut Scratch) -> Result<Val, Stop> {
    let s = the_single(&single)?.unwrap_or(0.0);
    for values in &mut many.series {
        for value in values.iter_mut().flatten() {
            *value = c.apply(*value, s)?;
        }
    }
    scratch.release(single);
    Ok(many)
}

fn one_to_many(single: Val, mut many: Val, c: Calc, scratch: &mut Scratch) -> Result<Val, Stop> {
    let s = the_single(&single)?.unwrap_or(0.0);
    for values in &mut many.series {
        for value in values.iter_mut().flatten() {
            *value = c.apply(s, *value)?;
        }
    }
    scratch.release(single);
    Ok(many)
}

#[cfg(test)]
#[path = "compiled_tests.rs"]
mod tests;
