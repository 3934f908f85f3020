//! The MQE syntax tree (one variant per labeled alternative of `MQEParser.g4`'s `expression`),
//! plus the helpers the alarm engine needs and a `getText`-like rendering used in error messages.

use crate::result::KeyValue;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Neq,
    Lte,
    Lt,
    Gte,
    Gt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
}

/// `avg count latest sum max min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregationOp {
    Avg,
    Count,
    Latest,
    Sum,
    Max,
    Min,
}

/// `abs ceil floor` (and `round` with its scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathOp {
    Abs,
    Ceil,
    Floor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrendOp {
    Increase,
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicalOp {
    ViewAsSeq,
    IsPresent,
}

/// `asc | des` (case-insensitive in the lexer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Des,
}

/// `aggregate_labels` functions: `avg sum max min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelsAgg {
    Avg,
    Sum,
    Max,
    Min,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineKind {
    Value,
    Upper,
    Lower,
}

/// `attrN = 'v'` or `attrN != 'v'` in `top_n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrCondition {
    /// `attr0` .. `attr5`.
    pub name: String,
    pub value: String,
    pub equals: bool,
}

/// A label selector or relabel argument as written: `name='v1,v2'` (the value without quotes;
/// `quote` keeps the quote character for rendering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelArg {
    pub name: String,
    pub value: String,
    pub quote: char,
}

impl LabelArg {
    pub fn key_value(&self) -> KeyValue {
        KeyValue::new(self.name.clone(), self.value.clone())
    }
}

/// `metricName` or `metricName{label='v', ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    pub name: String,
    pub labels: Vec<LabelArg>,
    /// True when braces were written (`m{}` is legal).
    pub braces: bool,
}

/// `top_n(metric, N, order [, attr...])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopN {
    pub metric: Metric,
    /// As written (the grammar's INTEGER; may be 0 or too large, checked at evaluation).
    pub n: String,
    pub order: Order,
    pub attrs: Vec<AttrCondition>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Metric(Metric),
    /// INTEGER or DECIMAL; `text` as written, `value` as `Double.parseDouble` reads it.
    Scalar { text: String, value: f64 },
    Parens(Box<Expr>),
    Binary { op: BinaryOp, left: Box<Expr>, right: Box<Expr> },
    Compare { op: CompareOp, has_bool: bool, left: Box<Expr>, right: Box<Expr> },
    Bool { op: BoolOp, left: Box<Expr>, right: Box<Expr> },
    Aggregation { op: AggregationOp, expr: Box<Expr> },
    Math { op: MathOp, expr: Box<Expr> },
    Round { expr: Box<Expr>, scale: String },
    Trend { op: TrendOp, metric: Metric, range: String },
    Logical { op: LogicalOp, exprs: Vec<Expr> },
    TopN(TopN),
    TopNOf { top_ns: Vec<TopN>, n: String, order: Order },
    Relabels { expr: Box<Expr>, target: LabelArg, replace: LabelArg },
    AggregateLabels { expr: Box<Expr>, func: LabelsAgg, labels: Option<Vec<String>> },
    /// `agg` may be empty in the grammar; upstream ignores it and always sorts by `avg`.
    SortValues { expr: Box<Expr>, limit: String, order: Order, agg: Option<AggregationOp> },
    SortLabelValues { expr: Box<Expr>, order: Order, labels: Vec<String> },
    Baseline { metric: Metric, kind: BaselineKind },
}

impl Expr {
    /// Visits every node, parents before children.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Metric(_) | Expr::Scalar { .. } | Expr::Trend { .. } | Expr::TopN(_) | Expr::TopNOf { .. } | Expr::Baseline { .. } => {}
            Expr::Parens(e) | Expr::Aggregation { expr: e, .. } | Expr::Math { expr: e, .. } | Expr::Round { expr: e, .. } => e.walk(f),
            Expr::Relabels { expr, .. } | Expr::AggregateLabels { expr, .. } | Expr::SortValues { expr, .. } | Expr::SortLabelValues { expr, .. } => expr.walk(f),
            Expr::Binary { left, right, .. } | Expr::Compare { left, right, .. } | Expr::Bool { left, right, .. } => {
                left.walk(f);
                right.walk(f);
            }
            Expr::Logical { exprs, .. } => {
                for e in exprs {
                    e.walk(f);
                }
            }
        }
    }

    /// Every metric referenced, in order of appearance, without duplicates.
    pub fn metric_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |n: &str| {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        };
        self.walk(&mut |e| match e {
            Expr::Metric(m) | Expr::Trend { metric: m, .. } | Expr::Baseline { metric: m, .. } => push(&m.name),
            Expr::TopN(t) => push(&t.metric.name),
            Expr::TopNOf { top_ns, .. } => top_ns.iter().for_each(|t| push(&t.metric.name)),
            _ => {}
        });
        out
    }

    /// The largest trend range N of `increase(m, N)` / `rate(m, N)` (0 when there is none, or
    /// when N does not fit a u32): how many extra steps before the window the expression reads.
    pub fn max_trend_range(&self) -> u32 {
        let mut max = 0;
        self.walk(&mut |e| {
            if let Expr::Trend { range, .. } = e {
                max = max.max(range.parse::<u32>().unwrap_or(0));
            }
        });
        max
    }

    /// Whether `top_n` (or `top_n_of`) is used; SkyWalking rejects it in alarm rules.
    pub fn uses_top_n(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if matches!(e, Expr::TopN(_) | Expr::TopNOf { .. }) {
                found = true;
            }
        });
        found
    }

    /// SkyWalking's `isBoolResult` as the alarm verifier sees it for `parser.expression()`: the root
    /// is a compare or bool operation. (A compare sets the flag only when its parent is the root, a
    /// parenthesis or a bool op; a parenthesis clears it unless its parent is a parenthesis or a
    /// bool op. So `sum(x > 1) >= 3` is bool, `avg(x > 1000) + 1` and `(x > 1)` are not.)
    pub fn is_bool_result(&self) -> bool {
        matches!(self, Expr::Compare { .. } | Expr::Bool { .. })
    }

    /// ANTLR's `getText()`: the tokens concatenated without whitespace (used in error messages).
    pub fn text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s);
        s
    }

    fn write_text(&self, s: &mut String) {
        match self {
            Expr::Metric(m) => m.write_text(s),
            Expr::Scalar { text, .. } => s.push_str(text),
            Expr::Parens(e) => {
                s.push('(');
                e.write_text(s);
                s.push(')');
            }
            Expr::Binary { op, left, right } => {
                left.write_text(s);
                s.push_str(match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    BinaryOp::Div => "/",
                    BinaryOp::Mod => "%",
                });
                right.write_text(s);
            }
            Expr::Compare { op, has_bool, left, right } => {
                left.write_text(s);
                s.push_str(match op {
                    CompareOp::Eq => "==",
                    CompareOp::Neq => "!=",
                    CompareOp::Lte => "<=",
                    CompareOp::Lt => "<",
                    CompareOp::Gte => ">=",
                    CompareOp::Gt => ">",
                });
                if *has_bool {
                    s.push_str("bool");
                }
                right.write_text(s);
            }
            Expr::Bool { op, left, right } => {
                left.write_text(s);
                s.push_str(if *op == BoolOp::And { "&&" } else { "||" });
                right.write_text(s);
            }
            Expr::Aggregation { op, expr } => {
                s.push_str(agg_name(*op));
                s.push('(');
                expr.write_text(s);
                s.push(')');
            }
            Expr::Math { op, expr } => {
                s.push_str(match op {
                    MathOp::Abs => "abs(",
                    MathOp::Ceil => "ceil(",
                    MathOp::Floor => "floor(",
                });
                expr.write_text(s);
                s.push(')');
            }
            Expr::Round { expr, scale } => {
                s.push_str("round(");
                expr.write_text(s);
                s.push(',');
                s.push_str(scale);
                s.push(')');
            }
            Expr::Trend { op, metric, range } => {
                s.push_str(if *op == TrendOp::Increase { "increase(" } else { "rate(" });
                metric.write_text(s);
                s.push(',');
                s.push_str(range);
                s.push(')');
            }
            Expr::Logical { op, exprs } => {
                s.push_str(if *op == LogicalOp::ViewAsSeq { "view_as_seq(" } else { "is_present(" });
                for (i, e) in exprs.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    e.write_text(s);
                }
                s.push(')');
            }
            Expr::TopN(t) => t.write_text(s),
            Expr::TopNOf { top_ns, n, order } => {
                s.push_str("top_n_of(");
                for t in top_ns {
                    t.write_text(s);
                    s.push(',');
                }
                s.push_str(n);
                s.push(',');
                s.push_str(order_name(*order));
                s.push(')');
            }
            Expr::Relabels { expr, target, replace } => {
                s.push_str("relabels(");
                expr.write_text(s);
                s.push(',');
                write_label(target, s);
                s.push(',');
                write_label(replace, s);
                s.push(')');
            }
            Expr::AggregateLabels { expr, func, labels } => {
                s.push_str("aggregate_labels(");
                expr.write_text(s);
                s.push(',');
                s.push_str(match func {
                    LabelsAgg::Avg => "avg",
                    LabelsAgg::Sum => "sum",
                    LabelsAgg::Max => "max",
                    LabelsAgg::Min => "min",
                });
                if let Some(ls) = labels {
                    s.push('(');
                    s.push_str(&ls.join(","));
                    s.push(')');
                }
                s.push(')');
            }
            Expr::SortValues { expr, limit, order, agg } => {
                s.push_str("sort_values(");
                expr.write_text(s);
                s.push_str(&format!(",{},{},{})", limit, order_name(*order), agg.map(agg_name).unwrap_or("")));
            }
            Expr::SortLabelValues { expr, order, labels } => {
                s.push_str("sort_label_values(");
                expr.write_text(s);
                s.push_str(&format!(",{},{})", order_name(*order), labels.join(",")));
            }
            Expr::Baseline { metric, kind } => {
                s.push_str("baseline(");
                metric.write_text(s);
                s.push_str(match kind {
                    BaselineKind::Value => ",value)",
                    BaselineKind::Upper => ",upper)",
                    BaselineKind::Lower => ",lower)",
                });
            }
        }
    }
}

impl Metric {
    pub fn text(&self) -> String {
        let mut s = String::new();
        self.write_text(&mut s);
        s
    }
    fn write_text(&self, s: &mut String) {
        s.push_str(&self.name);
        if self.braces {
            s.push('{');
            for (i, l) in self.labels.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write_label(l, s);
            }
            s.push('}');
        }
    }
}

impl TopN {
    fn write_text(&self, s: &mut String) {
        s.push_str("top_n(");
        self.metric.write_text(s);
        s.push_str(&format!(",{},{}", self.n, order_name(self.order)));
        for a in &self.attrs {
            s.push_str(&format!(",{}{}'{}'", a.name, if a.equals { "=" } else { "!=" }, a.value));
        }
        s.push(')');
    }
}

fn write_label(l: &LabelArg, s: &mut String) {
    s.push_str(&l.name);
    s.push('=');
    s.push(l.quote);
    s.push_str(&l.value);
    s.push(l.quote);
}

fn agg_name(op: AggregationOp) -> &'static str {
    match op {
        AggregationOp::Avg => "avg",
        AggregationOp::Count => "count",
        AggregationOp::Latest => "latest",
        AggregationOp::Sum => "sum",
        AggregationOp::Max => "max",
        AggregationOp::Min => "min",
    }
}

fn order_name(o: Order) -> &'static str {
    if o == Order::Asc { "asc" } else { "des" }
}
